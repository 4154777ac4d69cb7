//! One or more tests per diagnostic code of `Code::ALL`, plus how findings combine: every problem
//! of a file at once, isolation between clusters, and label positions.

use crate::support::*;
use proxops_model::{Code, Severity};

const CLUSTER: &str = "dev";

/// A repository with cluster `dev` (nodes pve01, pve02) whose composition lists `files`.
fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02"]);
    repo.listing(CLUSTER, files);
    repo
}

/// A composition written verbatim.
fn raw_composition(repo: &TempRepo, cluster: &str, text: &str) {
    repo.write(&format!("clusters/{cluster}/resources.yaml"), text);
}

/// The text a label covers.
fn covered(label: &proxops_model::diagnostic::Label) -> &str {
    &label.file.text[label.span.start..label.span.end]
}

#[track_caller]
fn help_of(d: &proxops_model::Diagnostic) -> &str {
    d.help
        .as_deref()
        .unwrap_or_else(|| panic!("no help on {d}"))
}

/// Every code this module has a test for; `every_code_is_covered` keeps it equal to `Code::ALL`.
const COVERED: &[Code] = &[
    Code::YamlSyntax,
    Code::MultipleDocuments,
    Code::ApiVersion,
    Code::UnknownKind,
    Code::UnknownField,
    Code::MissingField,
    Code::InvalidValue,
    Code::InvalidName,
    Code::FlatLayout,
    Code::WrongKindRoot,
    Code::NotUnderKindRoot,
    Code::ClusterConfig,
    Code::RepositoryConfig,
    Code::Composition,
    Code::CompositionMissingFile,
    Code::CompositionEscape,
    Code::NotRegularFile,
    Code::DuplicateResource,
    Code::VmidCollision,
    Code::UnknownReference,
    Code::ReferenceNotOnNode,
    Code::InvalidDependsOn,
    Code::NodeNotAllowed,
    Code::UnlistedManifest,
    Code::UnknownAnnotation,
    Code::SshKey,
    Code::InvalidAnnotation,
    Code::CredentialsInUrl,
    Code::PlainSecret,
    Code::IpFamily,
    Code::PveEnum,
    Code::Io,
    Code::PveConfigTyped,
    Code::PveConfigUnknown,
    Code::PveConfigValue,
    Code::NotSettable,
    Code::ExtraRetired,
    // Stacks: tested in `stacks.rs`.
    Code::ExpressionKeys,
    Code::StackTemplate,
    Code::UnknownStackTemplate,
    Code::StackParameterMissing,
    Code::StackParameterType,
    Code::StackParameterUnknown,
    Code::StackForEach,
    Code::StackSubset,
    // Tested in `references`.
    Code::ReferenceShape,
    Code::ReferencePointer,
    Code::ReferenceTarget,
    Code::ReferenceContext,
    // Found from the planes by `validate` (proxops-engine `unresolvable_promotions`); tested
    // end to end in tests/references.rs (`promote_carries_...`).
    Code::ReferenceUnresolvable,
    Code::ReferenceField,
    // Found from the desired plane by `validate` (proxops-engine `planes::deleting`); tested
    // end to end in tests/delete.rs (`dependants_go_first_...`).
    Code::DeletedStillComposed,
];

#[test]
fn every_code_is_covered() {
    // Cycles are found by the graph crate and tested there (proxops-graph, tests/graph).
    let mut all: Vec<Code> = Code::ALL
        .iter()
        .copied()
        .filter(|c| *c != Code::DependencyCycle)
        .collect();
    let mut covered = COVERED.to_vec();
    all.sort();
    covered.sort();
    assert_eq!(
        covered, all,
        "a code was added or removed: write its test and update COVERED"
    );
    for code in Code::ALL {
        assert!(code.as_str().starts_with("proxops::"), "{code}");
        assert_eq!(code.to_string(), code.as_str());
    }
}

// ---------------------------------------------------------------------------------------------
// Single files.

#[test]
fn yaml_syntax() {
    let repo = cluster_of(&[(
        "vm/dev/a.yaml",
        "apiVersion: proxops/v1alpha1\nkind: [VM\n".into(),
    )]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::YamlSyntax, &["invalid YAML"]);
    assert_eq!(d.primary_file(), Some("vm/dev/a.yaml"));
    assert_eq!(d.cluster.as_deref(), Some(CLUSTER));
    assert!(loaded.cluster(CLUSTER).expect("dev").resources.is_empty());
}

#[test]
fn yaml_syntax_duplicate_key_and_not_utf8() {
    let text = vm("a", "pve01", 142).replace("  vmid: 142\n", "  vmid: 142\n  vmid: 143\n");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::YamlSyntax, &[]);
    // The label is on the repeated key (line 8: `  vmid: 143`).
    assert_eq!(d.labels[0].line_col().0, 8);

    let repo = cluster_of(&[("vm/dev/a.yaml", String::new())]);
    std::fs::write(repo.path().join("vm/dev/a.yaml"), b"kind: \xff\xfe\n").expect("write");
    let loaded = repo.load();
    let d = only_error(&loaded, Code::YamlSyntax, &["UTF-8"]);
    assert_eq!(d.primary_file(), Some("vm/dev/a.yaml"));
}

#[test]
fn yaml_syntax_in_cluster_config() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write("clusters/dev/config.yaml", "pve: {clusters: [\n");
    let loaded = repo.load();
    let d = find(&loaded, Code::YamlSyntax);
    assert_eq!(d.primary_file(), Some("clusters/dev/config.yaml"));
    assert_eq!(d.cluster.as_deref(), Some(CLUSTER));
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn multiple_documents() {
    let text = format!("{}---\n{}", vm("a", "pve01", 142), vm("b", "pve01", 143));
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::MultipleDocuments, &["one YAML document"]);
    assert_eq!(d.labels[0].line_col(), (16, 1));
    assert!(loaded.cluster(CLUSTER).expect("dev").resources.is_empty());
}

#[test]
fn leading_document_marker_and_empty_documents_are_one_document() {
    let text = format!("---\n{}---\n", vm("a", "pve01", 142));
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    assert!(loaded.diagnostics.is_empty(), "{}", dump(&loaded));
}

#[test]
fn api_version_missing_or_wrong() {
    let text = vm("a", "pve01", 142).replace("apiVersion: proxops/v1alpha1\n", "");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::ApiVersion, &["missing `apiVersion`"]);
    assert_contains(help_of(d), &["proxops/v1alpha1"]);

    let text = vm("a", "pve01", 142).replace("proxops/v1alpha1", "v1");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::ApiVersion, &["`v1`"]);
    assert_eq!(covered(&d.labels[0]), "v1");
}

#[test]
fn unknown_kind_missing_misspelt_and_alias() {
    let text = vm("a", "pve01", 142).replace("kind: VM\n", "");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownKind, &["missing `kind`"]);
    assert_contains(
        help_of(d),
        &["VM", "TemplateVM", "LXC", "ISO", "CTTemplate", "DiskImage"],
    );

    let text = vm("a", "pve01", 142).replace("kind: VM", "kind: TemplateVm");
    let repo = cluster_of(&[("templatevm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownKind, &["unknown kind `TemplateVm`"]);
    assert_contains(help_of(d), &["`TemplateVM`"]);

    let text = vm("a", "pve01", 142).replace("kind: VM", "kind: TemplatVM");
    let repo = cluster_of(&[("templatevm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownKind, &["unknown kind `TemplatVM`"]);
    assert_eq!(help_of(d), "did you mean `TemplateVM`?");

    let text = vm("a", "pve01", 142).replace("kind: VM", "kind: TVM");
    let repo = cluster_of(&[("templatevm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownKind, &["unknown kind `TVM`"]);
    assert_contains(help_of(d), &["canonical", "`TemplateVM`"]);
    assert_eq!(covered(&d.labels[0]), "TVM");
}

#[test]
fn unknown_field_with_did_you_mean() {
    let text = vm("a", "pve01", 142).replace("  memory: 1GiB", "  memroy: 1GiB");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = find(&loaded, Code::UnknownField);
    assert_contains(&d.message, &["`memroy`"]);
    assert_eq!(help_of(d), "did you mean `memory`?");
    assert_eq!(covered(&d.labels[0]), "memroy");
    // The misspelt field also leaves `memory` missing (labelled on `spec`, which comes first).
    assert_eq!(
        error_codes(&loaded),
        [Code::MissingField, Code::UnknownField]
    );
    assert_contains(&find(&loaded, Code::MissingField).message, &["memory"]);
}

#[test]
fn unknown_field_in_envelope_nested_and_composition() {
    let text = vm("a", "pve01", 142).replace("metadata:", "metdata:");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = find(&loaded, Code::UnknownField);
    assert_eq!(help_of(d), "did you mean `metadata`?");

    let text = vm("a", "pve01", 142).replace("    cores: 1", "    cores: 1\n    coers: 2");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownField, &["`coers`"]);
    assert_eq!(help_of(d), "did you mean `cores`?");

    // Nothing close: the help lists the known fields.
    let text = vm("a", "pve01", 142).replace("    cores: 1", "    cores: 1\n    zzzz: 2");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownField, &["`zzzz`"]);
    assert_contains(help_of(d), &["type", "cores", "flags"]);

    let repo = TempRepo::with_clusters(&[CLUSTER]);
    raw_composition(&repo, CLUSTER, "resources: []\nresource: []\n");
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownField, &["`resource`"]);
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));
}

#[test]
fn missing_field() {
    let text = vm("a", "pve01", 142).replace("  memory: 1GiB\n", "");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::MissingField, &["memory"]);
    assert_eq!(d.primary_file(), Some("vm/dev/a.yaml"));

    // An empty file holds no manifest.
    let repo = cluster_of(&[("vm/dev/a.yaml", "# nothing\n".into())]);
    only_error(&repo.load(), Code::MissingField, &["no manifest"]);

    // A VM without disks and without clone.
    let text =
        vm("a", "pve01", 142).replace("  disks:\n    - storage: local-lvm\n      size: 8GiB\n", "");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    only_error(&repo.load(), Code::MissingField, &["disk"]);
}

#[test]
fn invalid_value_types_enums_and_rules() {
    let text = vm("a", "pve01", 142).replace("vmid: 142", "vmid: many");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::InvalidValue, &["expected"]);
    assert_eq!(covered(&d.labels[0]), "many");

    let text = with_spec(&vm("a", "pve01", 142), &["state: running"]);
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    only_error(
        &repo.load(),
        Code::InvalidValue,
        &["`running`", "`started`", "`stopped`"],
    );

    let text = with_spec(&vm("a", "pve01", 142), &["hardware:", "  machine: q36"]);
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::InvalidValue, &["`q36`"]);
    assert!(
        help_of(d).starts_with("did you mean `q35`?"),
        "{}",
        help_of(d)
    );

    let text = vm("a", "pve01", 142).replace("vmid: 142", "vmid: 42");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    only_error(&repo.load(), Code::InvalidValue, &["vmid 42"]);

    let repo = cluster_of(&[("vm/dev/a.yaml", "- just\n- a list\n".into())]);
    only_error(&repo.load(), Code::InvalidValue, &["mapping"]);
}

#[test]
fn pve_enum_values_are_pves_exact_spellings() {
    let base = vm("a", "pve01", 142);
    let cases: &[(&[&str], &str, &str, Option<&str>)] = &[
        (
            &["networks:", "  - bridge: vmbr0", "    model: VirtIO"],
            "VirtIO",
            "NIC model",
            Some("did you mean `virtio`?"),
        ),
        (
            &["hardware:", "  display: Serial0"],
            "Serial0",
            "display type",
            Some("did you mean `serial0`?"),
        ),
        (
            &["hardware:", "  display: hdmi"],
            "hdmi",
            "display type",
            None,
        ),
    ];
    for (lines, node, what, hint) in cases {
        let repo = cluster_of(&[("vm/dev/a.yaml", with_spec(&base, lines))]);
        let loaded = repo.load();
        let d = only_error(&loaded, Code::PveEnum, &[&format!("`{node}`"), what]);
        assert_eq!(covered(&d.labels[0]), *node);
        let help = help_of(d);
        assert!(help.contains("PVE accepts (case-sensitive):"), "{help}");
        match hint {
            Some(h) => assert!(help.starts_with(h), "{help}"),
            None => assert!(!help.contains("did you mean"), "{help}"),
        }
    }
    // A SCSI controller on a disk, and a container's interface type.
    let text = vm("a", "pve01", 142).replace(
        "      size: 8GiB\n",
        "      size: 8GiB\n      controller: VirtIO-SCSI-Single\n",
    );
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::PveEnum, &["SCSI controller"]);
    assert!(help_of(d).starts_with("did you mean `virtio-scsi-single`?"));
    // Right spellings pass.
    let ok = with_spec(
        &base,
        &[
            "networks:",
            "  - bridge: vmbr0",
            "    model: e1000",
            "hardware:",
            "  display: serial0",
        ],
    );
    let loaded = cluster_of(&[("vm/dev/a.yaml", ok)]).load();
    assert!(errors(&loaded).is_empty(), "{}", dump(&loaded));
}

#[test]
fn ip_family_of_addresses_and_gateways() {
    let with_ipconfig = |lines: &[&str]| {
        let mut spec = vec!["cloud-init-data:", "  ipconfigs:"];
        spec.extend_from_slice(lines);
        cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), &spec))])
    };
    // IPv4, IPv6, both, DHCP and SLAAC are fine.
    for ok in [
        &["    - ip: 10.0.0.5/24", "      gateway: 10.0.0.1"][..],
        &["    - ip: 2001:db8::5/64", "      gateway: 2001:db8::1"],
        &[
            "    - ip: 10.0.0.5/24",
            "      gateway: 10.0.0.1",
            "      ip6: 2001:db8::5/64",
            "      gateway6: 2001:db8::1",
        ],
        &["    - ip: dhcp", "      ip6: auto"],
        &["    - ip6: dhcp"],
    ] {
        let loaded = with_ipconfig(ok).load();
        assert!(errors(&loaded).is_empty(), "{ok:?}: {}", dump(&loaded));
    }
    let cases: &[(&[&str], &str, &[&str])] = &[
        (
            &["    - ip: 10.0.0.5/24", "      gateway: 2001:db8::1"],
            "2001:db8::1",
            &["gateway `2001:db8::1` is IPv6", "no IPv6 address"],
        ),
        (
            &["    - ip6: 10.0.0.5/24"],
            "10.0.0.5/24",
            &["`ip6` is IPv6, `10.0.0.5/24` is IPv4"],
        ),
        (
            &["    - ip: 2001:db8::5/64", "      ip6: auto"],
            "auto",
            &["two IPv6 configurations"],
        ),
        (
            &["    - ip: 10.0.0.5/24", "      gateway6: 10.0.0.1"],
            "10.0.0.1",
            &["`gateway6` is IPv6"],
        ),
    ];
    for (lines, node, fragments) in cases {
        let loaded = with_ipconfig(lines).load();
        let d = only_error(&loaded, Code::IpFamily, fragments);
        assert_eq!(covered(&d.labels[0]), *node, "{lines:?}");
        assert!(!help_of(d).is_empty());
    }
}

#[test]
fn plane_branches_in_cluster_config_must_be_valid_and_distinct() {
    let repo = cluster_of(&[]);
    let path = format!("clusters/{CLUSTER}/config.yaml");
    let text = std::fs::read_to_string(repo.path().join(&path)).unwrap();
    repo.write(
        &path,
        &format!("{text}      planes:\n        desired: deploy/x\n        observed: refs/heads/deploy/x\n"),
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::InvalidValue, &["both on branch `deploy/x`"]);
    assert_eq!(covered(&d.labels[0]), "refs/heads/deploy/x");

    repo.write(
        &path,
        &format!("{text}      planes:\n        desired: a..b\n"),
    );
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::InvalidValue,
        &["`a..b` is not a usable branch name"],
    );
    assert_eq!(covered(&d.labels[0]), "a..b");
}

#[test]
fn invalid_name() {
    let text = vm("a", "pve01", 142).replace("name: a", "name: Web_01");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::InvalidName, &["`Web_01`"]);
    assert_eq!(covered(&d.labels[0]), "Web_01");

    let repo = TempRepo::with_clusters(&["Prod_1"]);
    let loaded = repo.load();
    let d = find(&loaded, Code::InvalidName);
    assert_eq!(d.primary_file(), Some("clusters/Prod_1"));
    assert!(!loaded.cluster("Prod_1").expect("listed").valid);
}

// ---------------------------------------------------------------------------------------------
// Layout.

#[test]
fn flat_layout_listed_and_unlisted() {
    let repo = cluster_of(&[("vm/a.yaml", vm("a", "pve01", 142))]);
    let loaded = repo.load();
    assert!(
        errors(&loaded).iter().all(|d| d.code == Code::FlatLayout),
        "{}",
        dump(&loaded)
    );
    let d = find(&loaded, Code::FlatLayout);
    assert_contains(&d.message, &["`vm/a.yaml`", "`vm/`"]);
    assert_contains(help_of(d), &["vm/base/a.yaml", "vm/<cluster>/a.yaml"]);
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);

    // Unlisted: still an error, found by scanning the kind roots.
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write("lxc/x.yaml", "anything: 1\n");
    let loaded = repo.load();
    let d = only_error(&loaded, Code::FlatLayout, &["`lxc/x.yaml`"]);
    assert_eq!(d.primary_file(), Some("lxc/x.yaml"));
    assert_eq!(d.cluster, None);
    // It belongs to no cluster, so the cluster stays valid; the repository does not.
    assert!(loaded.cluster(CLUSTER).expect("dev").valid);
    assert!(!loaded.is_valid());
}

#[test]
fn flat_layout_of_a_listed_file_is_reported_once() {
    let repo = cluster_of(&[("vm/a.yaml", vm("a", "pve01", 142))]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::FlatLayout, &["`vm/a.yaml`"]);
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));
}

#[test]
fn wrong_kind_root() {
    let repo = cluster_of(&[
        ("ctt/base/t.yaml", artifact("CTTemplate", "t", &["pve01"])),
        ("vm/dev/c.yaml", lxc("c", "pve01", 142, "t")),
    ]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::WrongKindRoot, &["LXC", "`vm/`"]);
    assert_contains(help_of(d), &["`lxc/`"]);
    assert_eq!(covered(&d.labels[0]), "LXC");
}

#[test]
fn not_under_kind_root() {
    let repo = cluster_of(&[("manifests/dev/a.yaml", vm("a", "pve01", 142))]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::NotUnderKindRoot, &["`manifests/dev/a.yaml`"]);
    assert_contains(
        help_of(d),
        &[
            "vm",
            "lxc",
            "iso",
            "ctt",
            "diskimage",
            "templatevm",
            "templatect",
        ],
    );
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));
}

// ---------------------------------------------------------------------------------------------
// Configuration.

#[test]
fn cluster_config_missing() {
    let repo = TempRepo::new();
    repo.compose(CLUSTER, &[]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::ClusterConfig,
        &["clusters/dev/config.yaml is missing"],
    );
    assert_eq!(d.primary_file(), Some("clusters/dev/config.yaml"));
    assert_contains(help_of(d), &["pve.clusters.dev"]);
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn cluster_config_misnamed_entry() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "clusters/dev/config.yaml",
        "pve:\n  clusters:\n    devv:\n      base-url: https://dev.example.invalid:8006\n      nodes: [pve01]\n",
    );
    let loaded = repo.load();
    let found = all_with(&loaded, Code::ClusterConfig);
    // One finding: the near-miss `devv` is the misnamed entry, not an extra cluster.
    assert_eq!(errors(&loaded).len(), 1, "{}", dump(&loaded));
    let missing = found
        .iter()
        .find(|d| d.message.contains("does not declare `pve.clusters.dev`"))
        .unwrap_or_else(|| panic!("{}", dump(&loaded)));
    assert_contains(help_of(missing), &["rename `devv` to `dev`"]);
    // The label covers the `pve.clusters` mapping.
    assert!(
        covered(&missing.labels[0]).starts_with("devv:\n      base-url:"),
        "{missing}"
    );
    // The misnamed entry is not reported a second time as an entry for another cluster.
    assert!(
        !found
            .iter()
            .any(|d| d.message.contains("declares cluster `devv`"))
    );
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn cluster_config_extra_entry() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "clusters/dev/config.yaml",
        "pve:\n  clusters:\n    dev:\n      base-url: https://dev.example.invalid:8006\n      nodes: [pve01]\n    prod:\n      base-url: https://prod.example.invalid:8006\n      nodes: [pve01]\n",
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::ClusterConfig, &["declares cluster `prod`"]);
    assert_eq!(covered(&d.labels[0]), "prod");
    assert_contains(help_of(d), &["clusters/prod/config.yaml"]);
}

#[test]
fn cluster_config_process_wide_keys_warn_and_shared_endpoints_fail() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    let config =
        std::fs::read_to_string(repo.path().join("clusters/dev/config.yaml")).expect("read");
    repo.write(
        "clusters/dev/config.yaml",
        &format!("log:\n  level: debug\n{config}"),
    );
    let loaded = repo.load();
    assert!(loaded.is_valid(), "{}", dump(&loaded));
    let d = find(&loaded, Code::ClusterConfig);
    assert_eq!(d.severity, Severity::Warning);
    assert_contains(&d.message, &["`log`"]);

    let repo = TempRepo::with_clusters(&["a", "b"]);
    repo.write(
        "clusters/b/config.yaml",
        "pve:\n  clusters:\n    b:\n      base-url: https://a.example.invalid:8006/\n      nodes: [pve01]\n",
    );
    let loaded = repo.load();
    let found = all_with(&loaded, Code::ClusterConfig);
    assert_eq!(found.len(), 2, "{}", dump(&loaded));
    for d in found {
        assert_contains(&d.message, &["a, b", "https://a.example.invalid:8006"]);
    }
    assert!(!loaded.cluster("a").expect("a").valid);
    assert!(!loaded.cluster("b").expect("b").valid);
}

#[test]
fn repository_config_unreadable() {
    // `proxops.yaml` that cannot be read as a file.
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    std::fs::create_dir_all(repo.path().join("proxops.yaml")).expect("mkdir");
    let loaded = repo.load();
    let d = only_error(&loaded, Code::RepositoryConfig, &["proxops.yaml"]);
    assert_eq!(d.cluster, None);
    assert!(loaded.config.is_none());
}

#[test]
fn repository_config_malformed_reports_at_proxops_yaml() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "proxops.yaml",
        "log:\n  level: loud\nreconcile:\n  poll-interval: soon\n",
    );
    let loaded = repo.load();
    let errs = errors(&loaded);
    assert!(!errs.is_empty());
    for d in &errs {
        assert_eq!(d.primary_file(), Some("proxops.yaml"), "{}", dump(&loaded));
        assert_eq!(d.cluster, None);
    }

    // Declaring clusters in proxops.yaml is a cluster config error.
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "proxops.yaml",
        "pve:\n  clusters:\n    dev:\n      base-url: https://x.example.invalid:8006\n      nodes: [pve01]\n",
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::ClusterConfig, &["clusters/dev/config.yaml"]);
    assert_eq!(d.primary_file(), Some("proxops.yaml"));
}

#[test]
fn durations_are_read_once_at_the_file_and_a_bad_one_is_reported_at_its_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("agent.yaml"),
        "reconcile:\n  poll-interval: 1h30m\n  task-timeout: 0s\n  verify-interval: often\nnotifications:\n  - type: webhook\n    url: {env: HOOK}\n    reminder: soon\n",
    )
    .expect("write");
    let source = proxops_model::FsSource::new(dir.path()).expect("source");
    let (config, diagnostics) = proxops_model::read_config_file(&source, "agent.yaml");
    assert!(config.is_none(), "a file with a bad duration is not usable");
    let mut found: Vec<((usize, usize), String)> = diagnostics
        .iter()
        .map(|d| {
            assert_eq!(d.code, Code::InvalidValue, "{d}");
            let label = d.labels.first().expect("a label");
            (label.line_col(), covered(label).to_owned())
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ((3, 17), "0s".to_owned()),
            ((4, 20), "often".to_owned()),
            ((8, 15), "soon".to_owned())
        ]
    );

    // A good file hands out the values, not their text.
    std::fs::write(
        dir.path().join("agent.yaml"),
        "reconcile:\n  poll-interval: 1h30m\n  verify-interval: 15m\nnotifications:\n  - type: webhook\n    url: {env: HOOK}\n    reminder: never\n",
    )
    .expect("write");
    let (config, diagnostics) = proxops_model::read_config_file(&source, "agent.yaml");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = config.expect("usable");
    let reconcile = config.reconcile.expect("reconcile");
    assert_eq!(
        reconcile.poll_interval.and_then(|d| d.value()),
        Some(std::time::Duration::from_secs(5400))
    );
    assert_eq!(
        reconcile.verify_interval.and_then(|d| d.value()),
        Some(std::time::Duration::from_secs(900))
    );
    let sinks = config.notifications.expect("sinks");
    assert_eq!(sinks[0].reminder(), proxops_model::config::Reminder::Never);
}

#[test]
fn malformed_proxops_yaml_keeps_the_specific_code() {
    // `repository_config` is only for a `proxops.yaml` that cannot be read; a syntax error keeps
    // `yaml_syntax` and a wrong shape its field code, as in every other file.
    for (text, code) in [
        ("log: [unclosed\n", Code::YamlSyntax),
        ("- a\n- list\n", Code::InvalidValue),
    ] {
        let repo = TempRepo::with_clusters(&[CLUSTER]);
        repo.write("proxops.yaml", text);
        let loaded = repo.load();
        let d = only_error(&loaded, code, &[]);
        assert_eq!(d.primary_file(), Some("proxops.yaml"));
        assert_eq!(d.cluster, None);
        assert!(loaded.config.is_none());
        // The finding belongs to no single cluster, but proxops.yaml applies to all of them.
        assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
    }
}

// ---------------------------------------------------------------------------------------------
// Compositions.

#[test]
fn composition_missing_malformed_twice_and_not_yaml() {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01"]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::Composition,
        &["clusters/dev/resources.yaml is missing"],
    );
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));

    raw_composition(&repo, CLUSTER, "resources: 5\n");
    only_error(&repo.load(), Code::Composition, &["must be a list"]);

    raw_composition(&repo, CLUSTER, "just a string\n");
    only_error(&repo.load(), Code::Composition, &["`resources:`"]);

    repo.write("vm/dev/a.yaml", &vm("a", "pve01", 142));
    raw_composition(
        &repo,
        CLUSTER,
        "resources:\n  - ../../vm/dev/a.yaml\n  - ../../vm/dev/./a.yaml\n",
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::Composition, &["listed twice"]);
    assert_eq!(d.labels.len(), 2);
    assert_eq!(d.labels[0].line_col(), (3, 5));
    assert_eq!(d.labels[1].line_col(), (2, 5));
    assert_eq!(loaded.cluster(CLUSTER).expect("dev").resources.len(), 1);

    raw_composition(
        &repo,
        CLUSTER,
        "resources:\n  - ../../vm/dev/a.yaml\n  - ../../vm/dev/notes.txt\n",
    );
    only_error(
        &repo.load(),
        Code::Composition,
        &["not a .yaml or .yml file"],
    );

    raw_composition(&repo, CLUSTER, "resources:\n  - {path: x}\n");
    only_error(&repo.load(), Code::Composition, &["expected a file path"]);
}

#[test]
fn composition_as_bare_list_and_null_resources_are_accepted() {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01"]);
    repo.write("vm/dev/a.yaml", &vm("a", "pve01", 142));
    raw_composition(&repo, CLUSTER, "- ../../vm/dev/a.yaml\n");
    let loaded = repo.load();
    assert!(loaded.diagnostics.is_empty(), "{}", dump(&loaded));
    assert_eq!(loaded.cluster(CLUSTER).expect("dev").resources.len(), 1);

    raw_composition(&repo, CLUSTER, "resources:\n");
    let loaded = repo.load();
    // The VM file is now unlisted: a warning only.
    assert!(loaded.is_valid(), "{}", dump(&loaded));
    assert!(loaded.cluster(CLUSTER).expect("dev").resources.is_empty());
}

#[test]
fn composition_missing_file() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.compose(CLUSTER, &["vm/dev/nope.yaml"]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::CompositionMissingFile,
        &["`vm/dev/nope.yaml`", "does not exist"],
    );
    assert_eq!(covered(&d.labels[0]), "../../vm/dev/nope.yaml");
    assert_eq!(d.cluster.as_deref(), Some(CLUSTER));
}

#[test]
fn composition_escape() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    raw_composition(&repo, CLUSTER, "resources:\n  - ../../../x.yaml\n");
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::CompositionEscape,
        &["`../../../x.yaml`", "outside the repository"],
    );
    assert_eq!(d.labels[0].line_col(), (2, 5));

    raw_composition(&repo, CLUSTER, "resources:\n  - /etc/x.yaml\n");
    only_error(&repo.load(), Code::CompositionEscape, &["/etc/x.yaml"]);
}

#[cfg(unix)]
#[test]
fn composition_escape_through_a_symbolic_link() {
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("x.yaml"), vm("x", "pve01", 142)).expect("write");
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    std::fs::create_dir_all(repo.path().join("vm/dev")).expect("mkdir");
    std::os::unix::fs::symlink(
        outside.path().join("x.yaml"),
        repo.path().join("vm/dev/x.yaml"),
    )
    .expect("symlink");
    repo.compose(CLUSTER, &["vm/dev/x.yaml"]);
    only_error(
        &repo.load(),
        Code::CompositionEscape,
        &["`vm/dev/x.yaml`", "outside the repository"],
    );
}

#[test]
fn credentials_in_url_of_a_cluster_or_the_agent_configuration() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "clusters/dev/config.yaml",
        "pve:\n  clusters:\n    dev:\n      base-url: https://root:hunter2@dev.example.invalid:8006\n      nodes: [pve01]\n",
    );
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::CredentialsInUrl,
        &["`https://***@dev.example.invalid:8006`", "credentials"],
    );
    let label = d.labels.first().expect("a label");
    assert_eq!(label.line_col(), (4, 17));
    // The label shows the node, its password masked.
    assert_eq!(
        covered(label),
        "https://************@dev.example.invalid:8006"
    );
    assert!(help_of(d).contains("PROXOPS_PVE_TOKEN"), "{d}");
    // `--config FILE` is read the same way, and a broken one is no exception.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("agent.yaml"),
        "pve:\n  clusters:\n    x:\n      base-url: https://u:hunter2@pve:8006/api2/json\n      nodez: []\n",
    )
    .expect("write");
    let source = proxops_model::FsSource::new(dir.path()).expect("source");
    let (_, diagnostics) = proxops_model::read_config_file(&source, "agent.yaml");
    assert!(!diagnostics.is_empty());
    for d in &diagnostics {
        let shown = format!("{d} {d:?} {:?}", d.help);
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}

#[test]
fn plain_secret_in_a_sink_is_refused_and_never_shown() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "proxops.yaml",
        "notifications:\n  - type: slack\n    url: https://hooks.slack.example/services/T0/B0/s3cr3tpath\n",
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::PlainSecret, &["never written"]);
    let label = d.labels.first().expect("a label");
    assert_eq!(label.line_col(), (3, 10));
    // The label covers the value, masked byte for byte, as does the whole file shown.
    assert!(
        covered(label).chars().all(|c| c == '*'),
        "{}",
        covered(label)
    );
    assert!(!label.file.text.contains("s3cr3tpath"));
    assert!(help_of(d).contains("{env:"), "{d}");
    let shown = format!("{d} {d:?}");
    assert!(!shown.contains("s3cr3tpath"), "{shown}");
    // The same in a cluster's entry, where a token is a secret too.
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    repo.write(
        "clusters/dev/config.yaml",
        "pve:\n  clusters:\n    dev:\n      base-url: https://dev.example.invalid:8006\n      nodes: [pve01]\n      notifications:\n        - type: ntfy\n          url: {env: NTFY_URL}\n          token: tk_hunter2\n",
    );
    let loaded = repo.load();
    let d = only_error(&loaded, Code::PlainSecret, &[]);
    assert_eq!(d.cluster.as_deref(), Some(CLUSTER));
    assert!(!format!("{d:?}").contains("hunter2"));
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn not_regular_file_a_listed_fifo_is_refused_without_blocking() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    std::fs::create_dir_all(repo.path().join("vm/dev")).expect("mkdir");
    let fifo = repo.path().join("vm/dev/pipe.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping: mkfifo is not available");
        return;
    }
    std::os::unix::fs::symlink(&fifo, repo.path().join("vm/dev/link.yaml")).expect("symlink");
    repo.compose(CLUSTER, &["vm/dev/pipe.yaml", "vm/dev/link.yaml"]);
    // Opening a FIFO for reading blocks until a writer comes: load on a thread, so that a
    // loader that opens it fails this test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let root = repo.path().to_path_buf();
    std::thread::spawn(move || {
        let source = proxops_model::FsSource::new(&root).expect("source");
        let loaded = proxops_model::load_repository(
            &source,
            &proxops_model::Registry::builtin(),
            &proxops_model::LoadOptions::default(),
        );
        let _ = tx.send(loaded.map(|r| r.diagnostics));
    });
    let diagnostics = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("loading a repository that lists a FIFO blocked")
        .expect("load");
    let errors: Vec<_> = diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    for (d, listed) in errors.iter().zip(["vm/dev/pipe.yaml", "vm/dev/link.yaml"]) {
        assert_eq!(d.code, Code::NotRegularFile, "{d}");
        assert!(
            d.message.contains("FIFO (named pipe), not a regular file"),
            "{d}"
        );
        let label = d.labels.first().expect("a label");
        assert_eq!(label.file.path, "clusters/dev/resources.yaml");
        assert_eq!(covered(label), format!("../../{listed}"));
        assert_eq!(
            label.line_col().0,
            if listed.contains("pipe") { 2 } else { 3 }
        );
        assert!(help_of(d).contains("only manifest files"), "{d:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Cluster-wide rules.

#[test]
fn duplicate_resource() {
    let repo = cluster_of(&[
        ("vm/base/web.yaml", vm("web", "pve01", 142)),
        ("vm/dev/web.yaml", vm("web", "pve01", 143)),
    ]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::DuplicateResource, &["VM/web", "`dev`"]);
    let labels: Vec<(&str, &str, &str)> = d
        .labels
        .iter()
        .map(|l| (l.file.path.as_str(), covered(l), l.message.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("vm/dev/web.yaml", "web", "defined again here"),
            ("vm/base/web.yaml", "web", "first defined here"),
        ]
    );
}

#[test]
fn duplicate_resource_across_kinds_is_not_a_duplicate() {
    let repo = cluster_of(&[
        ("vm/dev/web.yaml", vm("web", "pve01", 142)),
        (
            "templatevm/dev/web.yaml",
            vm("web", "pve01", 143).replace("kind: VM", "kind: TemplateVM"),
        ),
    ]);
    let loaded = repo.load();
    assert!(loaded.diagnostics.is_empty(), "{}", dump(&loaded));
}

#[test]
fn vmid_collision_labels_both_files() {
    let repo = cluster_of(&[
        (
            "ctt/base/t.yaml",
            artifact("CTTemplate", "t", &["pve01", "pve02"]),
        ),
        ("vm/dev/web.yaml", vm("web", "pve01", 500)),
        (
            "templatect/dev/base.yaml",
            lxc("base", "pve02", 500, "t").replace("kind: LXC", "kind: TemplateCT"),
        ),
    ]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::VmidCollision,
        &["PVE id 500", "TemplateCT/base", "VM/web"],
    );
    let labels: Vec<(&str, &str, (usize, usize))> = d
        .labels
        .iter()
        .map(|l| (l.file.path.as_str(), covered(l), l.line_col()))
        .collect();
    assert_eq!(
        labels,
        [
            ("vm/dev/web.yaml", "500", (7, 9)),
            ("templatect/dev/base.yaml", "500", (7, 9))
        ]
    );
    assert_contains(&d.labels[0].message, &["VM/web"]);
    assert_contains(&d.labels[1].message, &["TemplateCT/base"]);
    assert_contains(help_of(d), &["unique per cluster"]);
}

#[test]
fn unknown_reference() {
    let repo = cluster_of(&[(
        "vm/dev/web.yaml",
        with_spec(&vm("web", "pve01", 142), &["clone: golden"])
            .replace("  disks:\n    - storage: local-lvm\n      size: 8GiB\n", ""),
    )]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::UnknownReference,
        &["VM/web", "`clone`", "TemplateVM", "`golden`"],
    );
    assert_eq!(covered(&d.labels[0]), "golden");
    assert_contains(help_of(d), &["add a TemplateVM named `golden`"]);

    // A resource of another kind with that name: the help says so.
    let repo = cluster_of(&[
        (
            "iso/base/golden.yaml",
            artifact("ISO", "golden", &["pve01"]),
        ),
        (
            "vm/dev/web.yaml",
            with_spec(&vm("web", "pve01", 142), &["clone: golden"])
                .replace("  disks:\n    - storage: local-lvm\n      size: 8GiB\n", ""),
        ),
    ]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownReference, &["golden"]);
    assert_contains(help_of(d), &["ISO/golden exists"]);
}

#[test]
fn unknown_reference_listed_only_by_another_cluster() {
    let repo = TempRepo::new();
    repo.cluster("dev", &["pve01"]).cluster("prod", &["pve01"]);
    repo.write(
        "diskimage/base/deb.yaml",
        &artifact("DiskImage", "deb", &["pve01"]),
    )
    .write(
        "vm/dev/web.yaml",
        &vm("web", "pve01", 142).replace("      size: 8GiB\n", "      image: deb\n"),
    );
    repo.compose("dev", &["vm/dev/web.yaml"])
        .compose("prod", &["diskimage/base/deb.yaml"]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::UnknownReference, &["DiskImage", "`deb`"]);
    assert_contains(
        help_of(d),
        &[
            "only cluster `prod` lists DiskImage/deb",
            "clusters/dev/resources.yaml",
        ],
    );
    assert_eq!(covered(&d.labels[0]), "deb");
}

#[test]
fn reference_not_on_node() {
    let repo = cluster_of(&[
        ("iso/base/i.yaml", artifact("ISO", "i", &["pve01"])),
        (
            "vm/dev/web.yaml",
            with_spec(
                &vm("web", "pve02", 142),
                &["hardware:", "  cdrom:", "    iso: i"],
            ),
        ),
    ]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::ReferenceNotOnNode,
        &["ISO/i", "`pve02`", "VM/web"],
    );
    assert_eq!(covered(&d.labels[0]), "i");
    assert_contains(&d.labels[0].message, &["only on pve01"]);
    assert_contains(help_of(d), &["add `pve02`"]);

    // A clone source is not a same-node reference.
    let repo = cluster_of(&[
        (
            "templatevm/dev/t.yaml",
            vm("t", "pve01", 900).replace("kind: VM", "kind: TemplateVM"),
        ),
        (
            "vm/dev/c.yaml",
            with_spec(&vm("c", "pve02", 142), &["clone: t"])
                .replace("  disks:\n    - storage: local-lvm\n      size: 8GiB\n", ""),
        ),
    ]);
    let loaded = repo.load();
    assert!(loaded.diagnostics.is_empty(), "{}", dump(&loaded));
}

#[test]
fn invalid_depends_on() {
    for (value, fragment) in [
        ("VM-web", "not a `Kind:name` reference"),
        ("VM:", "does not name a resource"),
        ("VM:a b", "does not name a resource"),
        ("Widget:x", "`Widget` in `Widget:x` is not a kind"),
    ] {
        let repo = cluster_of(&[(
            "vm/dev/a.yaml",
            annotate(&vm("a", "pve01", 142), &[("proxops/depends-on", value)]),
        )]);
        let loaded = repo.load();
        let d = only_error(&loaded, Code::InvalidDependsOn, &[fragment]);
        assert_eq!(covered(&d.labels[0]), format!("\"{value}\""), "{value}");
    }
    // An alias gets the canonical kind in the help.
    let repo = cluster_of(&[(
        "vm/dev/a.yaml",
        annotate(&vm("a", "pve01", 142), &[("proxops/depends-on", "TVM:t")]),
    )]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::InvalidDependsOn, &["`TVM`"]);
    assert_contains(help_of(d), &["`TemplateVM`"]);
}

#[test]
fn node_not_allowed_for_guest_and_artifact() {
    let repo = cluster_of(&[("vm/dev/a.yaml", vm("a", "pve09", 142))]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::NodeNotAllowed, &["`pve09`", "VM/a", "`dev`"]);
    assert_eq!(covered(&d.labels[0]), "pve09");
    assert_contains(help_of(d), &["pve01, pve02"]);

    let repo = cluster_of(&[(
        "iso/base/i.yaml",
        artifact("ISO", "i", &["pve01", "pve09", "pve08"]),
    )]);
    let loaded = repo.load();
    let found = all_with(&loaded, Code::NodeNotAllowed);
    assert_eq!(error_codes(&loaded).len(), 2, "{}", dump(&loaded));
    let nodes: Vec<&str> = found.iter().map(|d| covered(&d.labels[0])).collect();
    assert_eq!(nodes, ["pve09", "pve08"]);
    assert_eq!(found[0].labels[0].line_col(), (8, 7));
}

#[test]
fn unlisted_manifest_is_a_warning() {
    let repo = cluster_of(&[("vm/dev/a.yaml", vm("a", "pve01", 142))]);
    repo.write("vm/dev/orphan.yaml", "not even: [valid\n");
    let loaded = repo.load();
    assert_eq!(loaded.diagnostics.len(), 1, "{}", dump(&loaded));
    let d = find(&loaded, Code::UnlistedManifest);
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.primary_file(), Some("vm/dev/orphan.yaml"));
    assert_contains(&d.message, &["`vm/dev/orphan.yaml`", "not listed"]);
    assert!(loaded.is_valid());
    assert!(loaded.cluster(CLUSTER).expect("dev").valid);
}

#[test]
fn unknown_annotation() {
    let text = annotate(
        &vm("a", "pve01", 142),
        &[("proxops/depend-on", "VM:b"), ("example.com/owner", "me")],
    );
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    assert_eq!(
        loaded.diagnostics.len(),
        1,
        "only the proxops/ annotation: {}",
        dump(&loaded)
    );
    let d = find(&loaded, Code::UnknownAnnotation);
    assert_contains(&d.message, &["`proxops/depend-on`"]);
    assert_eq!(help_of(d), "did you mean `proxops/depends-on`?");
    assert_eq!(covered(&d.labels[0]), "proxops/depend-on");
    assert_eq!(d.labels[0].line_col(), (6, 5));
}

#[test]
fn invalid_reconcile_annotation() {
    let text = annotate(&vm("a", "pve01", 142), &[("proxops/reconcile", "off")]);
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = find(&loaded, Code::InvalidAnnotation);
    assert_eq!(d.severity, Severity::Error);
    assert_contains(&d.message, &["`proxops/reconcile`", "`off`", "`disabled`"]);
    assert_eq!(covered(&d.labels[0]), "\"off\"");
    let ok = annotate(&vm("a", "pve01", 142), &[("proxops/reconcile", "disabled")]);
    let repo = cluster_of(&[("vm/dev/a.yaml", ok)]);
    let loaded = repo.load();
    assert!(loaded.diagnostics.is_empty(), "{}", dump(&loaded));
    let key = proxops_model::ResourceKey {
        kind: "VM".into(),
        name: "a".into(),
    };
    let cluster = &loaded.clusters[0];
    assert!(
        cluster
            .resources
            .iter()
            .any(|r| r.key() == key && r.reconcile_disabled())
    );
}

#[test]
fn unknown_annotation_is_a_warning() {
    let text = annotate(&vm("a", "pve01", 142), &[("proxops/depend-on", "VM:b")]);
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = find(&loaded, Code::UnknownAnnotation);
    assert_eq!(d.severity, Severity::Warning);
    assert!(loaded.is_valid(), "{}", dump(&loaded));
    assert!(loaded.cluster(CLUSTER).expect("dev").valid);
    // A warning does not discard the resource.
    assert_eq!(loaded.cluster(CLUSTER).expect("dev").resources.len(), 1);
}

#[test]
fn io_when_a_file_is_a_directory() {
    let repo = TempRepo::with_clusters(&[CLUSTER]);
    std::fs::remove_file(repo.path().join("clusters/dev/config.yaml")).expect("rm");
    std::fs::create_dir_all(repo.path().join("clusters/dev/config.yaml")).expect("mkdir");
    let loaded = repo.load();
    let d = only_error(&loaded, Code::Io, &["clusters/dev/config.yaml"]);
    assert_eq!(d.cluster.as_deref(), Some(CLUSTER));

    let repo = TempRepo::with_clusters(&[CLUSTER]);
    std::fs::create_dir_all(repo.path().join("vm/dev/a.yaml")).expect("mkdir");
    repo.compose(CLUSTER, &["vm/dev/a.yaml"]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::Io, &["`vm/dev/a.yaml`"]);
    assert_eq!(d.primary_file(), Some("clusters/dev/resources.yaml"));
}

// ---------------------------------------------------------------------------------------------
// How findings combine.

#[test]
fn every_problem_of_a_file_at_once() {
    let text = "\
apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: Web_01
spec:
  node: pve01
  vmid: 142
  colour: red
  state: running
  cpu:
    type: host
    cores: 1
  disks:
    - storage: local-lvm
      size: 8GiB
";
    let repo = cluster_of(&[("vm/dev/web.yaml", text.to_owned())]);
    let loaded = repo.load();
    let mut codes = error_codes(&loaded);
    codes.sort();
    assert_eq!(
        codes,
        [
            Code::UnknownField,
            Code::MissingField,
            Code::InvalidValue,
            Code::InvalidName
        ],
        "{}",
        dump(&loaded)
    );
    let lines: Vec<(Code, usize)> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.code, d.labels[0].line_col().0))
        .collect();
    assert_eq!(loaded.diagnostics.len(), 4, "{}", dump(&loaded));
    assert!(lines.contains(&(Code::InvalidName, 4)));
    // The missing `memory` is labelled on the `spec:` key that should hold it.
    assert!(lines.contains(&(Code::MissingField, 5)));
    assert!(lines.contains(&(Code::UnknownField, 8)));
    assert!(lines.contains(&(Code::InvalidValue, 9)));
    assert!(loaded.cluster(CLUSTER).expect("dev").resources.is_empty());
}

#[test]
fn an_error_in_one_cluster_leaves_the_other_valid() {
    let repo = TempRepo::new();
    repo.cluster("a", &["pve01"]).cluster("b", &["pve01"]);
    repo.write(
        "vm/a/x.yaml",
        &vm("x", "pve01", 142).replace("  memory: 1GiB\n", ""),
    )
    .write("vm/a/y.yaml", &vm("y", "pve01", 143))
    .write("vm/b/x.yaml", &vm("x", "pve01", 142))
    .write("vm/b/y.yaml", &vm("y", "pve01", 143))
    .write("iso/base/i.yaml", &artifact("ISO", "i", &["pve01"]));
    repo.compose("a", &["vm/a/x.yaml", "vm/a/y.yaml", "iso/base/i.yaml"])
        .compose("b", &["vm/b/x.yaml", "vm/b/y.yaml", "iso/base/i.yaml"]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::MissingField, &["memory"]);
    assert_eq!(d.cluster.as_deref(), Some("a"));
    let a = loaded.cluster("a").expect("a");
    let b = loaded.cluster("b").expect("b");
    assert!(!a.valid);
    assert!(b.valid);
    assert_eq!(
        a.resources.len(),
        2,
        "the broken file is left out, the rest is counted"
    );
    assert_eq!(b.resources.len(), 3);

    // Asking for `b` alone: no finding of `a` is reported.
    let only_b = repo.load_only(&["b"]).expect("load");
    assert!(only_b.diagnostics.is_empty(), "{}", dump(&only_b));
    assert_eq!(only_b.clusters.len(), 1);
    assert!(only_b.is_valid());
}

#[test]
fn an_error_in_a_shared_file_invalidates_every_cluster_listing_it() {
    let repo = TempRepo::new();
    repo.cluster("a", &["pve01"])
        .cluster("b", &["pve01"])
        .cluster("c", &["pve01"]);
    repo.write(
        "iso/base/i.yaml",
        &artifact("ISO", "i", &["pve01"]).replace("  storage: local\n", ""),
    );
    repo.compose("a", &["iso/base/i.yaml"])
        .compose("b", &["iso/base/i.yaml"])
        .compose("c", &[]);
    let loaded = repo.load();
    let d = only_error(&loaded, Code::MissingField, &["storage"]);
    assert_eq!(
        d.cluster, None,
        "a file listed by two clusters belongs to neither alone"
    );
    assert!(!loaded.cluster("a").expect("a").valid);
    assert!(!loaded.cluster("b").expect("b").valid);
    assert!(loaded.cluster("c").expect("c").valid);
}

#[test]
fn label_line_and_column() {
    // `vmid` value at line 7, column 9; the unknown field at line 12, column 5.
    let text = vm("a", "pve01", 42).replace("    cores: 1\n", "    cores: 1\n    sokets: 2\n");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let vmid = find(&loaded, Code::InvalidValue);
    assert_eq!(vmid.labels[0].line_col(), (7, 9));
    assert_eq!(covered(&vmid.labels[0]), "42");
    let field = find(&loaded, Code::UnknownField);
    assert_eq!(field.labels[0].line_col(), (12, 5));
    assert_eq!(covered(&field.labels[0]), "sokets");
    // Display carries the same position.
    assert!(
        field
            .to_string()
            .starts_with("vm/dev/a.yaml:12:5: proxops::unknown_field: "),
        "{field}"
    );
    // Diagnostics are sorted by position within the file.
    let order: Vec<Code> = loaded.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(order, [Code::InvalidValue, Code::UnknownField]);
}

#[test]
fn label_on_a_flow_collection_covers_the_closing_bracket() {
    let text = with_spec(&vm("a", "pve01", 142), &["hardware: [1, 2]"]);
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::InvalidValue,
        &["expected a mapping, found a sequence"],
    );
    assert_eq!(covered(&d.labels[0]), "[1, 2]");
}

#[test]
fn a_mistyped_mapping_is_reported_once() {
    let text =
        vm("a", "pve01", 142).replace("  cpu:\n    type: host\n    cores: 1\n", "  cpu: [1, 2]\n");
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["expected a mapping, found a sequence"],
    );
}

#[test]
fn column_counts_characters_not_bytes() {
    let text = vm("a", "pve01", 142).replace("metadata:\n", "# é€ comment\nmetadata:\n").replace(
        "  name: a\n",
        "  name: a\n  labels:\n    note: \"ü\"\n  annotations: {\"x\": \"é\", proxops/nope: \"1\"}\n",
    );
    let repo = cluster_of(&[("vm/dev/a.yaml", text)]);
    let loaded = repo.load();
    let d = find(&loaded, Code::UnknownAnnotation);
    // `  annotations: {"x": "é", ` is 26 characters (27 bytes).
    assert_eq!(d.labels[0].line_col(), (8, 27));
}

#[test]
fn ipconfig_gateways_beside_dhcp_or_slaac_are_refused_as_pve_would_ignore_them() {
    let with_ipconfig = |lines: &[&str]| {
        let mut spec = vec!["cloud-init-data:", "  ipconfigs:"];
        spec.extend_from_slice(lines);
        cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), &spec))])
    };
    for (lines, node) in [
        (
            &["    - ip: dhcp", "      gateway: 10.0.0.1"][..],
            "10.0.0.1",
        ),
        (
            &["    - ip6: auto", "      gateway6: 2001:db8::1"],
            "2001:db8::1",
        ),
        (
            &["    - ip: auto", "      gateway: 2001:db8::1"],
            "2001:db8::1",
        ),
    ] {
        let loaded = with_ipconfig(lines).load();
        let d = only_error(
            &loaded,
            Code::InvalidValue,
            &["ignore NIC 0's whole cloud-init"],
        );
        assert_eq!(covered(&d.labels[0]), node, "{lines:?}");
    }
}

#[test]
fn container_addresses_go_by_family_and_gateways_need_a_static_address() {
    let with_net = |lines: &[&str]| {
        let mut spec = vec!["networks:", "  - bridge: vmbr0"];
        spec.extend_from_slice(lines);
        cluster_of(&[
            ("ctt/dev/t.yaml", artifact("CTTemplate", "t", &["pve01"])),
            (
                "lxc/dev/c.yaml",
                with_spec(&lxc("c", "pve01", 142, "t"), &spec),
            ),
        ])
    };
    for ok in [
        &["    ip: 10.0.0.5/24", "    gw: 10.0.0.1"][..],
        &["    ip6: 2001:db8::5/64", "    gw6: 2001:db8::1"],
        &["    ip: dhcp", "    ip6: auto"],
    ] {
        let loaded = with_net(ok).load();
        assert!(errors(&loaded).is_empty(), "{ok:?}: {}", dump(&loaded));
    }
    let family: &[(&[&str], &str)] = &[
        (&["    ip: 2001:db8::5/64"], "2001:db8::5/64"),
        (&["    ip6: 10.0.0.5/24"], "10.0.0.5/24"),
        (
            &["    ip: 10.0.0.5/24", "    gw: 2001:db8::1"],
            "2001:db8::1",
        ),
    ];
    for (lines, node) in family {
        let loaded = with_net(lines).load();
        let d = only_error(&loaded, Code::IpFamily, &[]);
        assert_eq!(covered(&d.labels[0]), *node, "{lines:?}");
    }
    let loaded = with_net(&["    ip: dhcp", "    gw: 10.0.0.1"]).load();
    only_error(&loaded, Code::InvalidValue, &["needs a static address"]);
}

#[test]
fn a_container_mount_point_needs_its_path() {
    let spec = ["mount-points:", "  - storage: local-lvm", "    size: 4GiB"];
    let loaded = cluster_of(&[
        ("ctt/dev/t.yaml", artifact("CTTemplate", "t", &["pve01"])),
        (
            "lxc/dev/c.yaml",
            with_spec(&lxc("c", "pve01", 142, "t"), &spec),
        ),
    ])
    .load();
    only_error(&loaded, Code::MissingField, &["needs `mount-point`"]);
}

#[test]
fn disk_image_extensions_are_case_sensitive_and_a_whole_ova_is_refused() {
    let with_file = |file: &str| {
        let text = artifact("DiskImage", "img", &["pve01"]).replace("img.qcow2", file);
        cluster_of(&[("diskimage/dev/img.yaml", text)]).load()
    };
    assert!(errors(&with_file("img.qcow2")).is_empty());
    only_error(
        &with_file("img.QCOW2"),
        Code::InvalidValue,
        &["does not have an extension"],
    );
    only_error(
        &with_file("appliance.ova"),
        Code::InvalidValue,
        &["whole OVA appliance"],
    );
    // ISOs match any case, as pve-storage's ISO pattern does.
    let iso = artifact("ISO", "cd", &["pve01"]).replace("cd.iso", "CD.ISO");
    assert!(errors(&cluster_of(&[("iso/dev/cd.yaml", iso)]).load()).is_empty());
}

#[test]
fn ssh_keys_pve_would_refuse_are_errors_and_good_ones_pass() {
    let with_key = |key: &str| {
        let spec = [
            "cloud-init-data:",
            "  ssh-keys:",
            &format!("    - \"{key}\""),
        ];
        cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), &spec))]).load()
    };
    let good = with_key(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp ansible@lab",
    );
    assert!(all_with(&good, Code::SshKey).is_empty(), "{}", dump(&good));
    for (key, why) in [
        (
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA you@yourhost",
            "truncated",
        ),
        (
            "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp x",
            "not a `ssh-rsa` key",
        ),
        ("ssh-ed25519 not-base64!", "base64"),
        ("ssh-foo AAAA x", "not an SSH key type"),
        (
            "command=\\\"x ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp",
            "not closed",
        ),
    ] {
        let loaded = with_key(key);
        // An error, as `diff` and `apply` treat it: PVE refuses the whole create or update.
        only_error(&loaded, Code::SshKey, &[why]);
        assert!(
            dump(&loaded).contains("vm/dev/a.yaml:17:"),
            "{}",
            dump(&loaded)
        );
    }
    // authorized_keys options are accepted as `ssh-keygen -l` (PVE's check) accepts them.
    let with_options = with_key(
        "command=\\\"echo hi;exit\\\",no-pty,from=\\\"10.0.0.0/8,192.168.1.1\\\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp ansible@lab",
    );
    assert!(errors(&with_options).is_empty(), "{}", dump(&with_options));
    assert!(
        all_with(&with_options, Code::SshKey).is_empty(),
        "{}",
        dump(&with_options)
    );
}

// ---------------------------------------------------------------------------------------------
// `pve-config` and the retired `extra`.

fn vm_spec(lines: &[&str]) -> TempRepo {
    cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), lines))])
}

#[test]
fn pve_config_typed_names_the_field() {
    for (key, value, field) in [
        ("cpuunits", "200", "cpu.units"),
        ("ostype", "l26", "ostype"),
        (
            "scsi1",
            "local-lvm:8",
            "disks, hardware.cdroms or hardware.cloud-init",
        ),
        ("vga", "std", "hardware.display"),
        ("hookscript", "local:snippets/a.pl", "options.hookscript"),
    ] {
        let line = format!("  {key}: {value}");
        let loaded = vm_spec(&["pve-config:", &line]).load();
        let d = only_error(
            &loaded,
            Code::PveConfigTyped,
            &[&format!("`{key}` is managed")],
        );
        assert!(help_of(d).contains(field), "{key}: {}", help_of(d));
        assert_eq!(covered(&d.labels[0]), value);
    }
}

#[test]
fn pve_config_unknown_keys() {
    let loaded = vm_spec(&["pve-config:", "  cpuunit: 200"]).load();
    let d = only_error(&loaded, Code::PveConfigUnknown, &["`cpuunit`"]);
    assert!(help_of(d).contains("did you mean"), "{}", help_of(d));
    // A key PVE writes itself, and an index beyond a family's range.
    for line in ["  meta: creation-qemu=9.2.0", "  virtiofs10: share"] {
        let loaded = vm_spec(&["pve-config:", line]).load();
        only_error(&loaded, Code::PveConfigUnknown, &["is not a config key"]);
    }
    // An LXC key on a VM.
    let loaded = vm_spec(&["pve-config:", "  timezone: host"]).load();
    only_error(&loaded, Code::PveConfigUnknown, &["`timezone`"]);
}

#[test]
fn pve_config_values_are_checked_against_pves_schema() {
    for ok in [
        &["pve-config:", "  shares: 500", "  keephugepages: true"][..],
        &[
            "pve-config:",
            "  spice_enhancements: foldersharing=1,videostreaming=all",
        ],
        &[
            "pve-config:",
            "  smbios1: uuid=c0fd19ca-0415-4d1c-958c-d59642429f53",
        ],
        &[
            "pve-config:",
            "  watchdog: model=i6300esb,action=reset",
            "  tdf: 0",
        ],
        &["pve-config:", "  allow-ksm: false"],
    ] {
        let loaded = vm_spec(ok).load();
        assert!(errors(&loaded).is_empty(), "{ok:?}: {}", dump(&loaded));
    }
    for (line, fragment) in [
        ("  shares: 50001", "outside 0-50000"),
        ("  shares: many", "expected an integer"),
        ("  keyboard: xx", "`xx` is not one of"),
        (
            "  spice_enhancements: videostreaming=some",
            "`videostreaming`",
        ),
        ("  spice_enhancements: sharing=1", "`sharing` is not a key"),
        ("  ivshmem: name=lg", "`size` is required"),
        ("  vmgenid: nope", "does not match"),
    ] {
        let loaded = vm_spec(&["pve-config:", line]).load();
        let d = only_error(&loaded, Code::PveConfigValue, &[fragment]);
        assert_eq!(d.labels.len(), 1);
    }
}

#[test]
fn not_settable_keys() {
    let loaded = vm_spec(&["pve-config:", "  args: -cpu host"]).load();
    let d = only_error(&loaded, Code::NotSettable, &["`args`", "root@pam"]);
    assert!(help_of(d).contains("qm set 142 --args"), "{}", help_of(d));
    for line in [
        "  lock: backup",
        "  unused0: local-lvm:vm-142-disk-9",
        "  parent: snap1",
    ] {
        let loaded = vm_spec(&["pve-config:", line]).load();
        only_error(&loaded, Code::NotSettable, &["ProxOps cannot set"]);
    }
}

#[test]
fn extra_is_retired_with_where_each_key_goes() {
    let loaded = vm_spec(&["extra:", "  watchdog: i6300esb", "  cores: 2", "  args: -S"]).load();
    let found = all_with(&loaded, Code::ExtraRetired);
    assert_eq!(found.len(), 3, "{}", dump(&loaded));
    let help = |key: &str| {
        found
            .iter()
            .find(|d| d.message.contains(&format!("`extra.{key}`")))
            .and_then(|d| d.help.clone())
            .unwrap_or_default()
    };
    assert!(
        help("watchdog").contains("`pve-config.watchdog`"),
        "{}",
        help("watchdog")
    );
    assert!(help("cores").contains("cpu.cores"), "{}", help("cores"));
    assert!(help("args").contains("cannot set"), "{}", help("args"));
    assert!(!loaded.cluster(CLUSTER).expect("dev").valid);
}
