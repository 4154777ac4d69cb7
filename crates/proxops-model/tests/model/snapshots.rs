//! Snapshots of the human rendering (miette, unicode without colour, 100 columns) of a
//! representative set of diagnostics. Paths are repository-relative, so the output is stable.

use crate::support::*;
use miette::{GraphicalReportHandler, GraphicalTheme};
use proxops_model::{Code, Diagnostic};

const CLUSTER: &str = "dev";

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02"]);
    repo.listing(CLUSTER, files);
    repo
}

/// The human rendering of one diagnostic.
fn render(d: &Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &d.to_miette())
        .expect("render");
    out
}

/// Renders the only diagnostic with `code`.
fn render_only(repo: &TempRepo, code: Code) -> String {
    let loaded = repo.load();
    let found = all_with(&loaded, code);
    assert_eq!(found.len(), 1, "{}", dump(&loaded));
    render(found[0])
}

#[test]
fn unknown_field_with_did_you_mean() {
    let text = vm("web", "pve01", 142).replace("    cores: 1\n", "    cores: 1\n    coers: 2\n");
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::UnknownField), @r#"
        proxops::unknown_field

          × unknown field `coers`
            ╭─[vm/dev/web.yaml:12:5]
         11 │     cores: 1
         12 │     coers: 2
            ·     ──┬──
            ·       ╰── unknown field
         13 │   disks:
            ╰────
          help: did you mean `cores`?
        "#);
}

#[test]
fn kind_alias() {
    let text = vm("golden", "pve01", 900).replace("kind: VM", "kind: TVM");
    let repo = cluster_of(&[("templatevm/dev/golden.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::UnknownKind), @r#"
        proxops::unknown_kind

          × unknown kind `TVM`
           ╭─[templatevm/dev/golden.yaml:2:7]
         1 │ apiVersion: proxops/v1alpha1
         2 │ kind: TVM
           ·       ─┬─
           ·        ╰── unknown kind
         3 │ metadata:
           ╰────
          help: the canonical spelling is `TemplateVM`
        "#);
}

#[test]
fn vmid_collision_across_two_files() {
    let repo = cluster_of(&[
        (
            "ctt/base/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
        ("lxc/dev/cache.yaml", lxc("cache", "pve01", 142, "debian")),
        ("vm/dev/web.yaml", vm("web", "pve02", 142)),
    ]);
    insta::assert_snapshot!(render_only(&repo, Code::VmidCollision), @r#"
        proxops::vmid_collision

          × PVE id 142 is claimed by both LXC/cache and VM/web
           ╭─[vm/dev/web.yaml:7:9]
         6 │   node: pve02
         7 │   vmid: 142
           ·         ─┬─
           ·          ╰── vmid 142 of VM/web
         8 │   memory: 1GiB
           ╰────
          help: vmids are unique per cluster, across VMs, containers and templates: PVE's vmid namespace
                is cluster-wide

        Advice: 
          ☞ see also lxc/dev/cache.yaml
           ╭─[lxc/dev/cache.yaml:7:9]
         6 │   node: pve01
         7 │   vmid: 142
           ·         ─┬─
           ·          ╰── also claimed by LXC/cache
         8 │   template: debian
           ╰────
        "#);
}

#[test]
fn unknown_reference() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &["hardware:", "  cdrom:", "    iso: talos-1-8"],
    );
    let repo = cluster_of(&[
        (
            "iso/base/talos.yaml",
            artifact("ISO", "talos-1-8-0", &["pve01"]),
        ),
        ("vm/dev/web.yaml", text),
    ]);
    insta::assert_snapshot!(render_only(&repo, Code::UnknownReference), @r#"
        proxops::unknown_reference

          × VM/web `hardware.cdrom.iso` references unknown ISO `talos-1-8`
            ╭─[vm/dev/web.yaml:17:12]
         16 │     cdrom:
         17 │       iso: talos-1-8
            ·            ────┬────
            ·                ╰── ISO/talos-1-8 is not in cluster `dev`
            ╰────
          help: add an ISO named `talos-1-8` to this cluster's composition, or fix the name
        "#);
}

#[test]
fn invalid_enum_value() {
    let text = with_spec(&vm("web", "pve01", 142), &["hardware:", "  machine: q36"]);
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::InvalidValue), @r#"
        proxops::invalid_value

          × `q36` is not a machine type PVE knows
            ╭─[vm/dev/web.yaml:16:14]
         15 │   hardware:
         16 │     machine: q36
            ·              ─┬─
            ·               ╰── invalid value
            ╰────
          help: did you mean `q35`? PVE takes `i440fx`, `q35`, a versioned type such as `pc-q35-8.1` or
                `pc-i440fx-9.0`, or `virt`
        "#);
}

#[test]
fn yaml_syntax() {
    let text =
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec: {node: pve01\n";
    let repo = cluster_of(&[("vm/dev/web.yaml", text.to_owned())]);
    insta::assert_snapshot!(render_only(&repo, Code::YamlSyntax), @r#"
        proxops::yaml_syntax

          × invalid YAML: unclosed bracket '{'
           ╭─[vm/dev/web.yaml:5:7]
         4 │   name: web
         5 │ spec: {node: pve01
           ·       ┬
           ·       ╰── here
           ╰────
        "#);
}

#[test]
fn flat_layout() {
    let repo = cluster_of(&[("vm/web.yaml", vm("web", "pve01", 142))]);
    let loaded = repo.load();
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == Code::FlatLayout && !d.labels.is_empty())
        .unwrap_or_else(|| panic!("{}", dump(&loaded)));
    insta::assert_snapshot!(render(d), @r#"
        proxops::flat_layout

          × `vm/web.yaml` sits directly under the `vm/` kind root
           ╭─[clusters/dev/resources.yaml:2:5]
         1 │ resources:
         2 │   - ../../vm/web.yaml
           ·     ────────┬────────
           ·             ╰── listed here
           ╰────
          help: move it to `vm/base/web.yaml` (shared) or `vm/<cluster>/web.yaml`: ProxOps never invents a
                default cluster
        "#);
}

#[test]
fn missing_cluster_config_without_a_label() {
    let repo = TempRepo::new();
    repo.compose(CLUSTER, &[]);
    insta::assert_snapshot!(render_only(&repo, Code::ClusterConfig), @r#"
        proxops::cluster_config

          × clusters/dev/config.yaml is missing
          help: create clusters/dev/config.yaml declaring `pve.clusters.dev` with its base-url and nodes
        "#);
}

#[test]
fn node_not_allowed_on_an_artifact() {
    let repo = cluster_of(&[(
        "iso/base/talos.yaml",
        artifact("ISO", "talos", &["pve01", "pve07"]),
    )]);
    insta::assert_snapshot!(render_only(&repo, Code::NodeNotAllowed), @r#"
        proxops::node_not_allowed

          × node `pve07` of ISO/talos is not in cluster `dev`'s node allowlist
           ╭─[iso/base/talos.yaml:8:7]
         7 │     - pve01
         8 │     - pve07
           ·       ──┬──
           ·         ╰── not an allowed node
         9 │   storage: local
           ╰────
          help: allowed nodes: pve01, pve02; add the node to clusters/dev/config.yaml or move the resource
        "#);
}

#[test]
fn unlisted_manifest_warning() {
    let repo = cluster_of(&[]);
    repo.write("vm/dev/old.yaml", &vm("old", "pve01", 142));
    insta::assert_snapshot!(render_only(&repo, Code::UnlistedManifest), @r#"
        proxops::unlisted_manifest

          ⚠ `vm/dev/old.yaml` is not listed by any cluster
          help: add it to a cluster's resources.yaml, or delete it: unlisted manifests are never
                reconciled
        "#);
}

#[test]
fn credentials_in_base_url_are_never_echoed() {
    let repo = cluster_of(&[]);
    let config = repo.path().join("clusters/dev/config.yaml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace(
            "https://dev.example.invalid:8006",
            "https://root:hunter2@dev.example.invalid:8006",
        ),
    )
    .expect("write");
    let rendered = render_only(&repo, Code::CredentialsInUrl);
    assert!(!rendered.contains("hunter2"), "{rendered}");
    insta::assert_snapshot!(rendered, @r#"
        proxops::credentials_in_url

          × `https://***@dev.example.invalid:8006` carries credentials in the URL
           ╭─[clusters/dev/config.yaml:4:17]
         3 │     dev:
         4 │       base-url: https://************@dev.example.invalid:8006
           ·                 ──────────────────────┬──────────────────────
           ·                                       ╰── credentials (masked here)
         5 │       nodes:
           ╰────
          help: give only scheme, host and port, e.g. `https://pve.example.com:8006`; credentials belong
                in the environment (PROXOPS_PVE_TOKEN_<C>) or the cluster's SOPS file
        "#);
    // Nor in any other form a finding takes.
    let loaded = repo.load();
    for d in &loaded.diagnostics {
        assert!(!d.to_string().contains("hunter2"), "{d}");
        assert!(!format!("{d:?}").contains("hunter2"), "{d:?}");
    }
    assert!(!format!("{loaded:?}").contains("hunter2"));
}

#[test]
fn pve_config_key_of_a_typed_field() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &["pve-config:", "  cpuunits: 200"],
    );
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::PveConfigTyped), @r#"
        proxops::pve_config_typed

          × `cpuunits` is managed by a typed field and cannot be set through `pve-config`
            ╭─[vm/dev/web.yaml:16:15]
         15 │   pve-config:
         16 │     cpuunits: 200
            ·               ─┬─
            ·                ╰── managed by a typed field
            ╰────
          help: use cpu.units
        "#);
}

#[test]
fn pve_config_value_pve_refuses() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &["pve-config:", "  spice_enhancements: videostreaming=some"],
    );
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::PveConfigValue), @r#"
        proxops::pve_config_value

          × PVE refuses `spice_enhancements: videostreaming=some`: `videostreaming`: `some` is not one of
          │ `off`, `all`, `filter`
            ╭─[vm/dev/web.yaml:16:25]
         15 │   pve-config:
         16 │     spice_enhancements: videostreaming=some
            ·                         ─────────┬─────────
            ·                                  ╰── PVE refuses this value
            ╰────
        "#);
}

#[test]
fn raw_lxc_key_is_not_settable() {
    let text = with_spec(
        &lxc("cache", "pve01", 150, "debian"),
        &["pve-config:", "  lxc.cgroup2.devices.allow: c 226:0 rwm"],
    );
    let repo = cluster_of(&[
        (
            "ctt/base/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
        ("lxc/dev/cache.yaml", text),
    ]);
    insta::assert_snapshot!(render_only(&repo, Code::NotSettable), @r#"
        proxops::not_settable

          × ProxOps cannot set `lxc.cgroup2.devices.allow`, it is a raw LXC key, which PVE's API refuses
          │ for every user
            ╭─[lxc/dev/cache.yaml:16:32]
         15 │   pve-config:
         16 │     lxc.cgroup2.devices.allow: c 226:0 rwm
            ·                                ─────┬─────
            ·                                     ╰── not settable
            ╰────
          help: add it to /etc/pve/lxc/150.conf on the node; ProxOps never removes it
        "#);
}

#[test]
fn extra_is_retired() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &["extra:", "  watchdog: i6300esb"],
    );
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    insta::assert_snapshot!(render_only(&repo, Code::ExtraRetired), @r#"
        proxops::extra_retired

          × `extra` is retired: `extra.watchdog` is no longer read
            ╭─[vm/dev/web.yaml:16:15]
         15 │   extra:
         16 │     watchdog: i6300esb
            ·               ────┬───
            ·                   ╰── retired field
            ╰────
          help: move it to `pve-config:` (`pve-config.watchdog`), which checks it against PVE's schema and
                keeps it reconciled
        "#);
}
