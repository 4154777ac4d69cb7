//! Steps, levels, create and prune order, deferral.

use crate::support::*;
use proxops_graph::{Deferred, Graph, StepId};

/// Two nodes: an ISO on both, a CTTemplate on pve01 only, a VM on each node using the ISO, a
/// template and its clone, an LXC, and a VM that depends on the LXC by annotation.
fn two_nodes() -> Graph {
    build(&[
        resource(
            "iso/x/i.yaml",
            &artifact("ISO", "installer", &["pve01", "pve02"]),
        ),
        resource(
            "ctt/x/c.yaml",
            &artifact("CTTemplate", "debian", &["pve01"]),
        ),
        resource("vm/x/a.yaml", &vm_with_iso("a", "pve01", 101, "installer")),
        resource("vm/x/b.yaml", &vm_with_iso("b", "pve02", 102, "installer")),
        resource("templatevm/x/t.yaml", &template_vm("tpl", "pve02", 900)),
        resource("vm/x/c.yaml", &clone_vm("c", "pve02", 103, "tpl")),
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 200, "debian")),
        resource("vm/x/d.yaml", &depends_on(&vm("d", "pve01", 104), "LXC:l")),
    ])
}

fn names(g: &Graph, ids: impl IntoIterator<Item = StepId>) -> Vec<String> {
    ids.into_iter().map(|s| step_name(g, s)).collect()
}

#[test]
fn steps_levels_and_create_order() {
    let g = two_nodes();
    assert_eq!(
        order(&g),
        [
            "CTTemplate/debian@pve01",
            "ISO/installer@pve01",
            "ISO/installer@pve02",
            "TemplateVM/tpl@pve02",
            "VM/a@pve01",
            "LXC/l@pve01",
            "VM/b@pve02",
            "VM/c@pve02",
            "VM/d@pve01",
        ]
    );
    let levels: Vec<Vec<String>> = g
        .levels()
        .map(|l| names(&g, l.iter().map(|s| s.id)))
        .collect();
    assert_eq!(levels.len(), g.level_count());
    assert_eq!(levels[2], ["VM/d@pve01"]);
    // One step per (artifact, node); the VM on pve02 waits only for the ISO on pve02.
    let iso = g.find("ISO", "installer").unwrap();
    assert_eq!(
        names(&g, g.steps_of(iso).iter().copied()),
        ["ISO/installer@pve01", "ISO/installer@pve02"]
    );
    let b = g.step(g.steps_of(g.find("VM", "b").unwrap())[0]);
    assert_eq!(
        names(&g, g.prerequisites(b.id).iter().copied()),
        ["ISO/installer@pve02"]
    );
    let on_pve02 = g.step_on(iso, Some("pve02")).unwrap();
    assert_eq!(
        names(&g, g.dependants(on_pve02).iter().copied()),
        ["VM/b@pve02"]
    );
    assert_eq!(g.step_on(iso, Some("pve03")), None);
}

#[test]
fn an_annotation_on_a_multi_node_artifact_waits_for_every_node() {
    let g = build(&[
        resource(
            "iso/x/i.yaml",
            &artifact("ISO", "installer", &["pve01", "pve02"]),
        ),
        resource(
            "vm/x/v.yaml",
            &depends_on(&vm("v", "pve01", 100), "ISO:installer"),
        ),
    ]);
    let v = g.step(g.steps_of(g.find("VM", "v").unwrap())[0]);
    assert_eq!(
        names(&g, g.prerequisites(v.id).iter().copied()),
        ["ISO/installer@pve01", "ISO/installer@pve02"]
    );
    assert_eq!(v.level, 1);
}

#[test]
fn within_a_level_node_then_vmid_then_name_then_kind() {
    let g = build(&[
        resource("vm/x/z.yaml", &vm("z", "pve01", 105)),
        resource("vm/x/y.yaml", &vm("y", "pve02", 101)),
        resource("lxc/x/x.yaml", &lxc("x", "pve01", 107, "same")),
        resource(
            "iso/x/s.yaml",
            &artifact("ISO", "same", &["pve02", "pve01"]),
        ),
        resource("ctt/x/s.yaml", &artifact("CTTemplate", "same", &["pve01"])),
        resource(
            "diskimage/x/a.yaml",
            &artifact("DiskImage", "a-image", &["pve01"]),
        ),
    ]);
    assert_eq!(
        order(&g),
        [
            // Level 0, pve01: artifacts (no vmid) by name, then kind for equal names; guests.
            "DiskImage/a-image@pve01",
            "CTTemplate/same@pve01",
            "ISO/same@pve01",
            "VM/z@pve01",
            // Level 0, pve02.
            "ISO/same@pve02",
            "VM/y@pve02",
            // Level 1.
            "LXC/x@pve01",
        ]
    );
}

#[test]
fn prune_order_puts_dependants_first() {
    let g = two_nodes();
    let prune: Vec<StepId> = g.prune_order().collect();
    assert_eq!(prune.len(), g.step_count());
    for (place, id) in prune.iter().enumerate() {
        for p in g.prerequisites(*id) {
            let p_place = prune.iter().position(|x| x == p).unwrap();
            assert!(
                p_place > place,
                "{} pruned before its dependant",
                step_name(&g, *p)
            );
        }
    }
    assert_eq!(step_name(&g, prune[0]), "VM/d@pve01");
    assert_eq!(
        step_name(&g, *prune.last().unwrap()),
        "CTTemplate/debian@pve01"
    );
}

#[test]
fn deferral_skips_every_transitive_dependant_with_its_blocker() {
    let g = two_nodes();
    let step = |kind, name, node| g.step_on(g.find(kind, name).unwrap(), Some(node)).unwrap();
    let ctt = step("CTTemplate", "debian", "pve01");
    let iso2 = step("ISO", "installer", "pve02");
    let d = g.defer(&[ctt, iso2]);
    let skipped: Vec<(String, Vec<String>)> = d
        .skipped
        .iter()
        .map(|Deferred { step, blocked_by }| {
            (step_name(&g, *step), names(&g, blocked_by.iter().copied()))
        })
        .collect();
    assert_eq!(
        skipped,
        [
            (
                "LXC/l@pve01".to_owned(),
                vec!["CTTemplate/debian@pve01".to_owned()]
            ),
            (
                "VM/b@pve02".to_owned(),
                vec!["ISO/installer@pve02".to_owned()]
            ),
            // Transitive: d waits for l, which waits for the failed template download.
            (
                "VM/d@pve01".to_owned(),
                vec!["CTTemplate/debian@pve01".to_owned()]
            ),
        ]
    );
    assert_eq!(
        names(&g, d.runnable.iter().copied()),
        [
            "ISO/installer@pve01",
            "TemplateVM/tpl@pve02",
            "VM/a@pve01",
            "VM/c@pve02"
        ]
    );
    assert!(d.is_skipped(step("VM", "d", "pve01")));
    assert!(!d.is_skipped(ctt));
}

#[test]
fn a_step_blocked_by_two_failures_names_both_in_create_order() {
    let g = build(&[
        resource("iso/x/i.yaml", &artifact("ISO", "i", &["n1"])),
        resource("ctt/x/c.yaml", &artifact("CTTemplate", "c", &["n1"])),
        resource(
            "vm/x/v.yaml",
            &depends_on(&vm_with_iso("v", "n1", 100, "i"), "CTTemplate:c"),
        ),
    ]);
    let failed: Vec<StepId> = g
        .steps()
        .iter()
        .filter(|s| s.vmid.is_none())
        .map(|s| s.id)
        .collect();
    let d = g.defer(&failed);
    assert_eq!(d.skipped.len(), 1);
    assert_eq!(
        names(&g, d.skipped[0].blocked_by.iter().copied()),
        ["CTTemplate/c@n1", "ISO/i@n1"]
    );
    assert!(d.runnable.is_empty());
    // Nothing failed: everything runs.
    assert_eq!(g.defer(&[]).runnable.len(), 3);
}

#[test]
fn an_empty_cluster_has_no_steps_and_no_levels() {
    let g = build(&[]);
    assert_eq!(
        (g.step_count(), g.level_count(), g.resource_count()),
        (0, 0, 0)
    );
    assert_eq!(g.levels().count(), 0);
    assert_eq!(g.defer(&[]), Default::default());
}
