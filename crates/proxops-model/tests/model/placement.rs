//! `nodes:` (placed) beside `node:` (pinned), and `ha:`: exactly one of the two node fields,
//! each listed node allowlisted (the diagnostic on that exact entry), no templates placed or
//! HA-managed, no `state` beside `ha`, HA group names PVE accepts.

use crate::support::*;
use proxops_model::Code;

const CLUSTER: &str = "dev";

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster(CLUSTER, &["pve01", "pve02", "pve03"]);
    repo.listing(CLUSTER, files);
    repo
}

/// The text a label covers.
fn covered(label: &proxops_model::diagnostic::Label) -> &str {
    &label.file.text[label.span.start..label.span.end]
}

fn placed_vm(nodes: &[&str]) -> String {
    let list: String = nodes.iter().map(|n| format!("    - {n}\n")).collect();
    vm("web", "pve01", 100).replace("  node: pve01\n", &format!("  nodes:\n{list}"))
}

#[test]
fn a_placed_guest_lists_allowlisted_nodes() {
    let loaded = cluster_of(&[("vm/base/web.yaml", placed_vm(&["pve02", "pve01"]))]).load();
    assert_valid(&loaded);
    let c = &loaded.clusters[0];
    let r = resource(c, "VM", "web");
    let proxops_model::Spec::Vm(s) = &r.spec else {
        panic!("not a VM")
    };
    assert_eq!(
        (s.node.as_deref(), s.nodes.as_slice()),
        (None, &["pve02".to_owned(), "pve01".to_owned()][..])
    );

    let loaded = cluster_of(&[("vm/base/web.yaml", placed_vm(&["pve01", "pve09"]))]).load();
    let d = only_error(&loaded, Code::NodeNotAllowed, &["`pve09`", "VM/web"]);
    assert_eq!(covered(&d.labels[0]), "pve09");
}

#[test]
fn exactly_one_of_node_and_nodes() {
    let both = with_spec(&vm("web", "pve01", 100), &["nodes: [pve01, pve02]"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", both)]).load();
    let d = only_error(&loaded, Code::InvalidValue, &["either `node`", "not both"]);
    assert!(
        covered(&d.labels[0]).contains("pve01, pve02"),
        "{}",
        covered(&d.labels[0])
    );

    let neither = vm("web", "pve01", 100).replace("  node: pve01\n", "");
    let loaded = cluster_of(&[("vm/base/web.yaml", neither)]).load();
    only_error(&loaded, Code::MissingField, &["needs `node`", "`nodes`"]);

    let twice = placed_vm(&["pve01", "pve02", "pve01"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", twice)]).load();
    only_error(&loaded, Code::InvalidValue, &["`pve01` is listed twice"]);

    let template = placed_vm(&["pve01", "pve02"]).replace("kind: VM", "kind: TemplateVM");
    let loaded = cluster_of(&[("templatevm/base/web.yaml", template)]).load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["TemplateVM is pinned to one node"],
    );
}

#[test]
fn containers_are_placed_the_same_way() {
    let ct =
        lxc("db", "pve01", 200, "debian").replace("  node: pve01\n", "  nodes: [pve02, pve03]\n");
    let files = [
        (
            "ctt/base/debian.yaml",
            artifact("CTTemplate", "debian", &["pve02", "pve03"]),
        ),
        ("lxc/base/db.yaml", ct),
    ];
    assert_valid(&cluster_of(&files).load());
}

#[test]
fn ha_is_validated() {
    let ok = with_spec(
        &placed_vm(&["pve01", "pve02"]),
        &[
            "ha:",
            "  state: stopped",
            "  group: prefer-a",
            "  max-restart: 2",
            "  max-relocate: 0",
        ],
    );
    let loaded = cluster_of(&[("vm/base/web.yaml", ok)]).load();
    assert_valid(&loaded);
    let r = resource(&loaded.clusters[0], "VM", "web");
    let proxops_model::Spec::Vm(s) = &r.spec else {
        panic!("not a VM")
    };
    let ha = s.ha.as_ref().expect("ha");
    assert_eq!(
        (
            ha.state(),
            ha.group.as_deref(),
            ha.max_restart,
            ha.max_relocate
        ),
        (
            proxops_model::kinds::HaState::Stopped,
            Some("prefer-a"),
            Some(2),
            Some(0)
        )
    );

    let with_state = with_spec(&vm("web", "pve01", 100), &["state: started", "ha: {}"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", with_state)]).load();
    let d = only_error(
        &loaded,
        Code::InvalidValue,
        &["HA guest's power is its HA state"],
    );
    assert_eq!(covered(&d.labels[0]), "started");

    let bad_group = with_spec(&vm("web", "pve01", 100), &["ha:", "  group: 1st"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", bad_group)]).load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["`1st` is not an HA group name"],
    );

    let bad_state = with_spec(&vm("web", "pve01", 100), &["ha:", "  state: enabled"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", bad_state)]).load();
    assert!(
        error_codes(&loaded).contains(&Code::InvalidValue),
        "{}",
        dump(&loaded)
    );

    let unknown = with_spec(&vm("web", "pve01", 100), &["ha:", "  max-restarts: 1"]);
    let loaded = cluster_of(&[("vm/base/web.yaml", unknown)]).load();
    assert!(
        error_codes(&loaded).contains(&Code::UnknownField),
        "{}",
        dump(&loaded)
    );

    let template = with_spec(
        &lxc("db", "pve01", 200, "debian").replace("kind: LXC", "kind: TemplateCT"),
        &["ha: {}"],
    );
    let files = [
        (
            "ctt/base/debian.yaml",
            artifact("CTTemplate", "debian", &["pve01"]),
        ),
        ("templatect/base/db.yaml", template),
    ];
    let loaded = cluster_of(&files).load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["TemplateCT cannot be an HA resource"],
    );
}
