//! The graph cases of ../shared/compat/EXPECTATIONS.md section 2 and the first-apply order of
//! section 3.

use crate::support::*;
use proxops_graph::{Graph, Problem};
use proxops_model::kind::ReferenceSource;
use proxops_model::{Code, Registry};

fn edges(graph: &Graph, kind: &str, name: &str) -> Vec<(String, ReferenceSource)> {
    let id = graph.find(kind, name).expect("resource");
    graph
        .dependencies(id)
        .iter()
        .map(|d| (graph.key(d.target).to_string(), d.source))
        .collect()
}

#[test]
fn lxc_from_a_ctt_is_one_level_above_it() {
    // 2.1: VM + LXC cache-01 (template base-ctt) + CTTemplate base-ctt.
    let g = build(&[
        resource("vm/x/w.yaml", &vm("talos-worker-01", "pve01", 142)),
        resource("lxc/x/c.yaml", &lxc("cache-01", "pve01", 901, "base-ctt")),
        resource(
            "ctt/x/b.yaml",
            &artifact("CTTemplate", "base-ctt", &["pve01"]),
        ),
    ]);
    assert_eq!(level(&g, "LXC", "cache-01"), 1);
    assert_eq!(level(&g, "CTTemplate", "base-ctt"), 0);
    assert_eq!(level(&g, "VM", "talos-worker-01"), 0);
    assert_eq!(g.resource_count(), 3);
}

#[test]
fn lowercase_depends_on_puts_the_vm_at_level_two() {
    // 2.1: `proxops/depends-on: "lxc:cache-01"` with LXC -> CTTemplate.
    let g = build(&[
        resource(
            "vm/x/w.yaml",
            &depends_on(&vm("talos-worker-01", "pve01", 142), "lxc:cache-01"),
        ),
        resource("lxc/x/c.yaml", &lxc("cache-01", "pve01", 901, "base-ctt")),
        resource(
            "ctt/x/b.yaml",
            &artifact("CTTemplate", "base-ctt", &["pve01"]),
        ),
    ]);
    assert_eq!(level(&g, "VM", "talos-worker-01"), 2);
    assert_eq!(
        edges(&g, "VM", "talos-worker-01"),
        [("LXC/cache-01".to_owned(), ReferenceSource::Annotation)]
    );
}

#[test]
fn cdrom_iso_is_exactly_one_edge() {
    // 2.2 and 2.3: VM -> ISO through the cdrom.
    let g = build(&[
        resource("vm/x/v.yaml", &vm_with_iso("v", "pve01", 142, "base-iso")),
        resource("iso/x/i.yaml", &artifact("ISO", "base-iso", &["pve01"])),
    ]);
    assert_eq!(
        edges(&g, "VM", "v"),
        [("ISO/base-iso".to_owned(), ReferenceSource::Structured)]
    );
    assert_eq!(
        g.dependencies(g.find("VM", "v").unwrap())[0].field,
        "hardware.cdrom.iso"
    );
    assert_eq!(level(&g, "ISO", "base-iso"), 0);
    assert_eq!(level(&g, "VM", "v"), 1);
}

#[test]
fn lxc_template_is_exactly_one_edge() {
    let g = build(&[
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 901, "debian-13")),
        resource(
            "ctt/x/d.yaml",
            &artifact("CTTemplate", "debian-13", &["pve01"]),
        ),
    ]);
    assert_eq!(
        edges(&g, "LXC", "l"),
        [(
            "CTTemplate/debian-13".to_owned(),
            ReferenceSource::Structured
        )]
    );
    assert_eq!(level(&g, "LXC", "l"), 1);
    assert_eq!(level(&g, "CTTemplate", "debian-13"), 0);
}

#[test]
fn unknown_targets_fail_closed_naming_source_and_target() {
    // 2.3: LXC template `ghost`, VM cdrom ISO `ghost`; 2.1: depends-on `lxc:ghost-ct`.
    let resources = [
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 901, "ghost")),
        resource("vm/x/v.yaml", &vm_with_iso("v", "pve01", 142, "ghost")),
        resource(
            "vm/x/w.yaml",
            &depends_on(&vm("w", "pve01", 143), "lxc:ghost-ct"),
        ),
    ];
    let err = Graph::build(&Registry::builtin(), &resources).unwrap_err();
    let messages: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "LXC/l references unknown CTTemplate/ghost through `template`: it is not in the cluster",
            "VM/v references unknown ISO/ghost through `hardware.cdrom.iso`: it is not in the cluster",
            "VM/w references unknown LXC/ghost-ct through `proxops/depends-on`: it is not in the cluster",
        ]
    );
    assert!(
        err.problems
            .iter()
            .all(|p| p.code() == Code::UnknownReference)
    );
}

#[test]
fn three_level_chain_structured_then_annotation() {
    // 2.3: CTTemplate gold (0) -> LXC l1 (1, structured) -> VM v1 (2, annotation `lxc:l1`).
    let g = build(&[
        resource(
            "vm/x/v1.yaml",
            &depends_on(&vm("v1", "pve01", 142), "lxc:l1"),
        ),
        resource("lxc/x/l1.yaml", &lxc("l1", "pve01", 901, "gold")),
        resource(
            "ctt/x/gold.yaml",
            &artifact("CTTemplate", "gold", &["pve01"]),
        ),
    ]);
    assert_eq!(level(&g, "CTTemplate", "gold"), 0);
    assert_eq!(level(&g, "LXC", "l1"), 1);
    assert_eq!(level(&g, "VM", "v1"), 2);
}

#[test]
fn structured_and_annotation_edges_are_deduplicated_structured_first() {
    // 2.3: a VM cloned from a template that its annotation also names, plus an LXC: the
    // structured edge comes first and the repeat is dropped.
    let g = build(&[
        resource(
            "vm/x/v.yaml",
            &depends_on(
                &clone_vm("v", "pve01", 142, "tpl"),
                "LXC:l,TemplateVM:tpl,lxc:l",
            ),
        ),
        resource("templatevm/x/t.yaml", &template_vm("tpl", "pve01", 900)),
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 901, "gold")),
        resource(
            "ctt/x/gold.yaml",
            &artifact("CTTemplate", "gold", &["pve01"]),
        ),
    ]);
    assert_eq!(
        edges(&g, "VM", "v"),
        [
            ("TemplateVM/tpl".to_owned(), ReferenceSource::Structured),
            ("LXC/l".to_owned(), ReferenceSource::Annotation),
        ]
    );
    assert_eq!(level(&g, "LXC", "l"), 1);
    assert_eq!(level(&g, "VM", "v"), 2);
    // The expectation's own case: the annotation names the LXC twice; one edge.
    let g = build(&[
        resource(
            "vm/x/v.yaml",
            &depends_on(&vm("v", "pve01", 142), "LXC:l,lxc:l"),
        ),
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 901, "gold")),
        resource(
            "ctt/x/gold.yaml",
            &artifact("CTTemplate", "gold", &["pve01"]),
        ),
    ]);
    assert_eq!(
        edges(&g, "VM", "v"),
        [("LXC/l".to_owned(), ReferenceSource::Annotation)]
    );
    assert_eq!((level(&g, "LXC", "l"), level(&g, "VM", "v")), (1, 2));
}

#[test]
fn mutual_annotations_are_a_cycle_in_any_spelling() {
    // 2.2 (`VM:vm-b` / `VM:vm-a`) and 2.3 (`vm:b` / `vm:a`).
    for (a, b, ta, tb) in [
        ("vm-a", "vm-b", "VM:vm-b", "VM:vm-a"),
        ("a", "b", "vm:b", "vm:a"),
    ] {
        let resources = [
            resource("vm/x/a.yaml", &depends_on(&vm(a, "pve01", 142), ta)),
            resource("vm/x/b.yaml", &depends_on(&vm(b, "pve01", 143), tb)),
        ];
        let err = Graph::build(&Registry::builtin(), &resources).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(matches!(err.problems[0], Problem::Cycle { .. }));
        assert_eq!(
            err.problems[0].to_string(),
            format!("dependency cycle between VM/{a}, VM/{b}")
        );
    }
}

#[test]
fn a_cross_cluster_reference_is_unknown_in_the_graph_too() {
    // 2.2: dev VM -> ISO listed only by prod. The graph of dev's resources alone fails closed.
    let resources = [resource(
        "vm/dev/v.yaml",
        &vm_with_iso("v", "pve01", 142, "base-iso"),
    )];
    let err = Graph::build(&Registry::builtin(), &resources).unwrap_err();
    assert!(err.to_string().contains("ISO/base-iso"), "{err}");
}

#[test]
fn the_iso_is_created_before_the_vm_that_needs_it() {
    // 3: ISO (level 0) + VM referencing it (level 1): the ISO's step comes first and is the
    // VM's only prerequisite.
    let g = build(&[
        resource("vm/x/v.yaml", &vm_with_iso("v", "n1", 100, "i")),
        resource("iso/x/i.yaml", &artifact("ISO", "i", &["n1"])),
    ]);
    assert_eq!(order(&g), ["ISO/i@n1", "VM/v@n1"]);
    let vm_step = g.step(g.steps_of(g.find("VM", "v").unwrap())[0]);
    let prereqs: Vec<String> = g
        .prerequisites(vm_step.id)
        .iter()
        .map(|p| step_name(&g, *p))
        .collect();
    assert_eq!(prereqs, ["ISO/i@n1"]);
}

/// Section 3's first apply of the example cluster: level, then node, then vmid (artifacts
/// first), then name.
const EXAMPLE_ORDER: &[&str] = &[
    "DiskImage/debian-13-cloud@pve01",
    "CTTemplate/golden-base@pve01",
    "ISO/talos-1-8-0@pve01",
    "VM/talos-worker-01@pve01",
    "VM/gpu-passthrough-01@pve01",
    "TemplateVM/almalinux-tpl@pve01",
    "ISO/talos-1-8-0@pve02",
    "VM/app-vm@pve01",
    "VM/cloudinit-vm@pve01",
    "VM/sops-cloudinit-01@pve01",
    "VM/clone-vm@pve01",
    "TemplateCT/debian-tpl@pve01",
    "LXC/cache-01@pve01",
];

#[test]
fn first_apply_order_of_the_example_cluster() {
    let Some(dir) = shared("compat/examples") else {
        return;
    };
    let (repo, graphs) = check_dir(&dir);
    // The example's one error, its placeholder SSH key, refuses only that VM: the cluster
    // keeps its graph.
    assert!(
        repo.diagnostics.iter().all(|d| !d.invalidates()),
        "{:#?}",
        repo.diagnostics
    );
    let example = graphs
        .iter()
        .find(|c| c.name == "example")
        .expect("cluster example");
    let g = example.graph.as_ref().expect("a graph");
    assert_eq!(order(g), EXAMPLE_ORDER);
    let levels: Vec<usize> = g.levels().map(|l| l.len()).collect();
    assert_eq!(levels, [7, 6]);
    // The vmids the expectation lists, in the same order.
    let vmids: Vec<u32> = g.steps().iter().filter_map(|s| s.vmid).collect();
    assert_eq!(vmids, [142, 412, 900, 400, 410, 413, 901, 910, 9000]);
}

#[test]
fn the_example_order_does_not_depend_on_the_order_of_the_files() {
    let Some(dir) = shared("compat/examples") else {
        return;
    };
    let (repo, _) = check_dir(&dir);
    let cluster = repo.cluster("example").expect("example");
    let mut resources = cluster.resources.clone();
    for rotation in 0..resources.len() {
        resources.rotate_left(1);
        let mut reversed = resources.clone();
        reversed.reverse();
        for input in [&resources, &reversed] {
            let g = build(input);
            assert_eq!(order(&g), EXAMPLE_ORDER, "rotation {rotation}");
        }
    }
}

#[test]
fn borrowed_views_agree_with_the_full_references_and_placements() {
    // The graph reads `reference_views` and `placement_view`; validation reads `references` and
    // `placement`. Every kind must give the same answer through both.
    let registry = Registry::builtin();
    let mut dirs = vec![example("homelab")];
    dirs.extend(shared("compat/examples"));
    let mut seen = 0;
    for dir in dirs {
        let (repo, _) = check_dir(&dir);
        for cluster in &repo.clusters {
            for r in &cluster.resources {
                let kind = registry.get(r.kind).unwrap();
                let full: Vec<_> = kind.references(&r.spec);
                let full: Vec<_> = full.iter().map(|x| x.view()).collect();
                assert_eq!(kind.reference_views(&r.spec), full, "{}", r.key());
                let placement = kind.placement(&r.spec);
                let view = kind.placement_view(&r.spec);
                // A placed guest (`nodes:`) has no node in the graph's view until the planner
                // picks one (`kinds/placement.rs` `placement_view`); a pinned one has its node.
                let placed = r.kind != "ISO"
                    && r.kind != "CTTemplate"
                    && r.kind != "DiskImage"
                    && placement
                        .nodes
                        .iter()
                        .any(|(_, path)| {
                            matches!(path.first(), Some(proxops_model::yaml::PathSeg::Key(k)) if k == "nodes")
                        });
                let nodes: Vec<&str> = if placed {
                    Vec::new()
                } else {
                    placement.nodes.iter().map(|(n, _)| n.as_str()).collect()
                };
                let viewed: Vec<&str> = view.nodes.iter().map(AsRef::as_ref).collect();
                assert_eq!((viewed, view.vmid), (nodes, placement.vmid), "{}", r.key());
                seen += 1;
            }
        }
    }
    assert!(seen >= 16, "{seen}");
}
