//! `spec.update-policy` (snapshot-guarded updates): refused on templates, which PVE cannot
//! snapshot; its values checked, each finding labelled on its node.

use crate::support::*;
use miette::{GraphicalReportHandler, GraphicalTheme};
use proxops_model::{Code, Diagnostic};

const CLUSTER: &str = "dev";

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01"]);
    repo.listing(CLUSTER, files);
    repo
}

fn render(d: &Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &d.to_miette())
        .expect("render");
    out
}

fn rendered(repo: &TempRepo) -> Vec<String> {
    let loaded = repo.load();
    errors(&loaded).into_iter().map(render).collect()
}

#[test]
fn a_valid_policy_loads() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &[
            "options: {agent: true}",
            "update-policy:",
            "  snapshot: true",
            "  keep: 5",
            "  vmstate: true",
            "  verify: {guest-agent: true, timeout: 1h30m}",
        ],
    );
    let ct = with_spec(
        &lxc("ct", "pve01", 150, "debian"),
        &["update-policy: {snapshot: true, verify: {timeout: 90s}}"],
    );
    let repo = cluster_of(&[
        ("vm/dev/web.yaml", text),
        ("lxc/dev/ct.yaml", ct),
        (
            "ctt/dev/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
    ]);
    assert_valid(&repo.load());
}

#[test]
fn a_template_cannot_have_an_update_policy() {
    let text = with_spec(
        &vm("golden", "pve01", 900).replace("kind: VM", "kind: TemplateVM"),
        &["update-policy:", "  snapshot: true"],
    );
    let repo = cluster_of(&[("templatevm/dev/golden.yaml", text)]);
    let found = rendered(&repo);
    assert_eq!(found.len(), 1, "{found:#?}");
    insta::assert_snapshot!(found[0], @r#"
        proxops::invalid_value

          × a TemplateVM cannot have an update policy: PVE cannot snapshot a template
            ╭─[templatevm/dev/golden.yaml:16:5]
         15 │   update-policy:
         16 │     snapshot: true
            ·     ───────┬──────
            ·            ╰── invalid value
            ╰────
          help: PVE refuses ("you can't take a snapshot if it's a template"); remove `update-policy`, or
                declare the guest a VM
        "#);
}

#[test]
fn keep_zero_and_a_timeout_that_is_no_duration_are_errors_on_their_nodes() {
    let text = with_spec(
        &vm("web", "pve01", 142),
        &[
            "update-policy:",
            "  snapshot: true",
            "  keep: 0",
            "  verify:",
            "    timeout: soon",
        ],
    );
    let repo = cluster_of(&[("vm/dev/web.yaml", text)]);
    let loaded = repo.load();
    assert!(
        all_with(&loaded, Code::InvalidValue).len() == 2,
        "{}",
        dump(&loaded)
    );
    let found = rendered(&repo);
    insta::assert_snapshot!(found.join("\n"), @r#"
        proxops::invalid_value

          × `keep` must be at least 1: the snapshot a guarded update takes is kept
            ╭─[vm/dev/web.yaml:17:11]
         16 │     snapshot: true
         17 │     keep: 0
            ·           ┬
            ·           ╰── invalid value
         18 │     verify:
            ╰────
          help: keep the newest N ProxOps snapshots, N >= 1 (default 3)

        proxops::invalid_value

          × `soon` is not a duration
            ╭─[vm/dev/web.yaml:19:16]
         18 │     verify:
         19 │       timeout: soon
            ·                ──┬─
            ·                  ╰── invalid value
            ╰────
          help: a positive duration: a number and a unit (ms, s, m, h), e.g. `5m`, `90s` or `1h30m`
        "#);
}

#[test]
fn what_only_a_vm_has_is_refused_on_a_container_and_on_a_vm_without_it() {
    let ct = with_spec(
        &lxc("ct", "pve01", 150, "debian"),
        &[
            "update-policy:",
            "  snapshot: true",
            "  vmstate: true",
            "  verify: {guest-agent: true}",
        ],
    );
    let web = with_spec(
        &vm("web", "pve01", 142),
        &["update-policy: {snapshot: true, verify: {guest-agent: true}}"],
    );
    let repo = cluster_of(&[
        ("lxc/dev/ct.yaml", ct),
        ("vm/dev/web.yaml", web),
        (
            "ctt/dev/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
    ]);
    let found = rendered(&repo);
    insta::assert_snapshot!(found.join("\n"), @r#"
        proxops::invalid_value

          × `vmstate` is for VMs: PVE does not save a container's memory in a snapshot
            ╭─[lxc/dev/ct.yaml:17:14]
         16 │     snapshot: true
         17 │     vmstate: true
            ·              ──┬─
            ·                ╰── invalid value
         18 │     verify: {guest-agent: true}
            ╰────
          help: remove `vmstate`

        proxops::invalid_value

          × a container has no QEMU guest agent: it passes the check when it runs
            ╭─[lxc/dev/ct.yaml:18:27]
         17 │     vmstate: true
         18 │     verify: {guest-agent: true}
            ·                           ──┬─
            ·                             ╰── invalid value
            ╰────
          help: remove `guest-agent`

        proxops::invalid_value

          × the check asks the QEMU guest agent, which this VM does not enable
            ╭─[vm/dev/web.yaml:15:57]
         14 │       size: 8GiB
         15 │   update-policy: {snapshot: true, verify: {guest-agent: true}}
            ·                                                         ──┬─
            ·                                                           ╰── invalid value
            ╰────
          help: enable it with `options.agent: true` (and install qemu-guest-agent in the guest), or set
                `guest-agent: false` to check only that the VM runs
        "#);
}
