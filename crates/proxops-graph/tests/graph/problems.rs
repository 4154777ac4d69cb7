//! Problems that stop a graph, and how `check_repository` reports them.

use crate::support::*;
use miette::{GraphicalReportHandler, GraphicalTheme};
use proxops_graph::{Graph, Problem};
use proxops_model::{Code, Diagnostic, Registry};

fn render(d: &Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &d.to_miette())
        .expect("render");
    out
}

fn errors(repo: &proxops_model::Repository) -> Vec<&Diagnostic> {
    repo.diagnostics.iter().filter(|d| d.is_error()).collect()
}

#[test]
fn a_cycle_of_three_names_every_member_sorted_with_a_label_per_edge() {
    let repo = TempRepo::dev(&[
        ("vm/dev/c.yaml", depends_on(&vm("c", "pve01", 144), "VM:a")),
        ("vm/dev/a.yaml", depends_on(&vm("a", "pve01", 142), "VM:b")),
        ("vm/dev/b.yaml", depends_on(&vm("b", "pve01", 143), "VM:c")),
    ]);
    let (loaded, graphs) = repo.check();
    let errs = errors(&loaded);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let d = errs[0];
    assert_eq!(d.code, Code::DependencyCycle);
    assert_eq!(d.message, "dependency cycle between VM/a, VM/b, VM/c");
    assert_eq!(d.cluster.as_deref(), Some("dev"));
    let labels: Vec<(&str, &str)> = d
        .labels
        .iter()
        .map(|l| (l.file.path.as_str(), l.message.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("vm/dev/a.yaml", "VM/a depends on VM/b"),
            ("vm/dev/b.yaml", "VM/b depends on VM/c"),
            ("vm/dev/c.yaml", "VM/c depends on VM/a"),
        ]
    );
    assert!(!loaded.cluster("dev").unwrap().valid);
    assert!(graphs[0].graph.is_none());
}

#[test]
fn a_cycle_renders_with_labels_in_both_files() {
    let repo = TempRepo::dev(&[
        ("vm/dev/a.yaml", depends_on(&vm("a", "pve01", 142), "VM:b")),
        ("vm/dev/b.yaml", depends_on(&vm("b", "pve01", 143), "VM:a")),
    ]);
    let (loaded, _) = repo.check();
    insta::assert_snapshot!(render(errors(&loaded)[0]), @r#"
    proxops::dependency_cycle

      × dependency cycle between VM/a, VM/b
       ╭─[vm/dev/a.yaml:6:25]
     5 │   annotations:
     6 │     proxops/depends-on: "VM:b"
       ·                         ───┬──
       ·                            ╰── VM/a depends on VM/b
     7 │ spec:
       ╰────
      help: dependencies must form a DAG: remove one of the references

    Advice: 
      ☞ see also vm/dev/b.yaml
       ╭─[vm/dev/b.yaml:6:25]
     5 │   annotations:
     6 │     proxops/depends-on: "VM:a"
       ·                         ───┬──
       ·                            ╰── VM/b depends on VM/a
     7 │ spec:
       ╰────
    "#);
}

#[test]
fn a_self_dependency_is_a_cycle_of_one() {
    let repo = TempRepo::dev(&[("vm/dev/a.yaml", depends_on(&vm("a", "pve01", 142), "VM:a"))]);
    let (loaded, _) = repo.check();
    let errs = errors(&loaded);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].message, "dependency cycle between VM/a");
}

#[test]
fn disjoint_cycles_are_reported_separately_in_a_stable_order() {
    let resources = [
        resource("vm/x/d.yaml", &depends_on(&vm("d", "n1", 104), "VM:c")),
        resource("vm/x/c.yaml", &depends_on(&vm("c", "n1", 103), "VM:d")),
        resource("vm/x/b.yaml", &depends_on(&vm("b", "n1", 102), "VM:a")),
        resource("vm/x/a.yaml", &depends_on(&vm("a", "n1", 101), "VM:b")),
        // Depends on a cycle but is not part of one.
        resource("vm/x/e.yaml", &depends_on(&vm("e", "n1", 105), "VM:a")),
    ];
    let err = Graph::build(&Registry::builtin(), &resources).unwrap_err();
    let messages: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "dependency cycle between VM/a, VM/b",
            "dependency cycle between VM/c, VM/d"
        ]
    );
}

#[test]
fn a_cycle_is_reported_beside_the_other_errors_of_its_cluster() {
    // The cluster is invalid for another reason (an unknown reference); the cycle still shows,
    // and the unknown reference is reported once (by the model), not twice.
    let repo = TempRepo::dev(&[
        ("vm/dev/a.yaml", depends_on(&vm("a", "pve01", 142), "VM:b")),
        ("vm/dev/b.yaml", depends_on(&vm("b", "pve01", 143), "VM:a")),
        ("vm/dev/c.yaml", vm_with_iso("c", "pve01", 144, "ghost")),
    ]);
    let (loaded, _) = repo.check();
    let codes: Vec<Code> = errors(&loaded).iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::DependencyCycle, Code::UnknownReference]);
}

#[test]
fn every_problem_at_once_from_a_direct_build() {
    // An embedder building from unchecked resources: a duplicate, an unknown target and an
    // artifact missing on the guest's node, all in one error.
    let resources = [
        resource("vm/x/a.yaml", &vm_with_iso("a", "pve02", 100, "installer")),
        resource("vm/y/a.yaml", &vm("a", "pve01", 101)),
        resource("iso/x/i.yaml", &artifact("ISO", "installer", &["pve01"])),
        resource("lxc/x/l.yaml", &lxc("l", "pve01", 200, "missing")),
    ];
    let err = Graph::build(&Registry::builtin(), &resources).unwrap_err();
    let codes: Vec<Code> = err.problems.iter().map(Problem::code).collect();
    assert_eq!(
        codes,
        [
            Code::DuplicateResource,
            Code::UnknownReference,
            Code::ReferenceNotOnNode
        ]
    );
    let not_on_node = err.problems[2].to_diagnostic(Some("dev"));
    assert_eq!(
        not_on_node.message,
        "ISO/installer is not placed on node `pve02`, where VM/a runs"
    );
    assert_eq!(not_on_node.labels[0].file.path, "vm/x/a.yaml");
    assert_eq!(not_on_node.labels[0].message, "needed on `pve02`");
    assert_eq!(not_on_node.cluster.as_deref(), Some("dev"));
    let duplicate = err.problems[0].to_diagnostic(None);
    assert_eq!(duplicate.labels.len(), 2);
    assert!(
        err.to_string()
            .starts_with("the dependency graph cannot be built:\n  duplicate resource VM/a")
    );
}

#[test]
fn the_repositories_we_ship_have_graphs() {
    let (repo, graphs) = check_dir(&example("homelab"));
    assert!(repo.is_valid(), "{:#?}", repo.diagnostics);
    let steps: Vec<(String, usize, usize)> = graphs
        .iter()
        .map(|c| {
            let g = c.graph.as_ref().expect("graph");
            (c.name.clone(), g.step_count(), g.level_count())
        })
        .collect();
    assert_eq!(
        steps,
        [("home".to_owned(), 26, 4), ("lab".to_owned(), 5, 2)]
    );
}
