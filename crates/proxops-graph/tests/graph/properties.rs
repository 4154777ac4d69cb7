//! Properties over random graphs: order respects every edge and ignores input order; injected
//! cycles are found with all their members; deferral is exactly the transitive closure.

use crate::support::*;
use proptest::prelude::*;
use proxops_graph::{Graph, Problem, StepId};
use proxops_model::{Registry, Resource};
use std::collections::BTreeSet;
use std::sync::Arc;

/// `n` VMs `v0..v{n-1}` on two nodes; `edges[i]` lists the VMs that `v{i}` depends on.
fn vms(edges: &[BTreeSet<usize>]) -> Vec<Arc<Resource>> {
    edges
        .iter()
        .enumerate()
        .map(|(i, deps)| {
            let node = if i % 3 == 0 { "pve02" } else { "pve01" };
            // vmids deliberately not in name order.
            let text = vm(&format!("v{i}"), node, 1000 - i as u32);
            let text = if deps.is_empty() {
                text
            } else {
                let targets: Vec<String> = deps.iter().map(|d| format!("VM:v{d}")).collect();
                depends_on(&text, &targets.join(","))
            };
            resource(&format!("vm/x/v{i}.yaml"), &text)
        })
        .collect()
}

/// A random DAG: edges only go from a higher to a lower index.
fn dag(max: usize) -> impl Strategy<Value = Vec<BTreeSet<usize>>> {
    (1..max).prop_flat_map(|n| {
        proptest::collection::vec(proptest::collection::btree_set(0..n, 0..4), n).prop_map(
            |mut edges| {
                for (i, deps) in edges.iter_mut().enumerate() {
                    deps.retain(|d| *d < i);
                }
                edges
            },
        )
    })
}

fn vm_index(graph: &Graph, step: StepId) -> usize {
    graph.key(graph.step(step).resource).name[1..]
        .parse()
        .unwrap()
}

/// Which VMs reach which through dependant edges (`reach[a]` holds every b that needs a).
fn dependants_closure(edges: &[BTreeSet<usize>]) -> Vec<BTreeSet<usize>> {
    let n = edges.len();
    let mut direct = vec![Vec::new(); n];
    for (i, deps) in edges.iter().enumerate() {
        for d in deps {
            direct[*d].push(i);
        }
    }
    (0..n)
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut stack = direct[start].clone();
            while let Some(x) = stack.pop() {
                if seen.insert(x) {
                    stack.extend(direct[x].iter().copied());
                }
            }
            seen
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_edge_goes_forward_and_levels_are_longest_paths(edges in dag(40)) {
        let g = build(&vms(&edges));
        prop_assert_eq!(g.step_count(), edges.len());
        for step in g.steps() {
            let mut level = 0;
            for p in g.prerequisites(step.id) {
                prop_assert!(*p < step.id);
                level = level.max(g.step(*p).level + 1);
            }
            prop_assert_eq!(step.level, level);
            for d in g.dependants(step.id) {
                prop_assert!(*d > step.id);
            }
        }
        // Every declared edge is present at step level.
        for step in g.steps() {
            let i = vm_index(&g, step.id);
            let got: BTreeSet<usize> = g.prerequisites(step.id).iter().map(|p| vm_index(&g, *p)).collect();
            prop_assert_eq!(&got, &edges[i]);
        }
    }

    #[test]
    fn the_order_is_the_same_for_every_permutation(
        edges in dag(30),
        seed in any::<u64>(),
    ) {
        let resources = vms(&edges);
        let expected = order(&build(&resources));
        let mut shuffled = resources.clone();
        // Fisher-Yates with a small LCG: any permutation, reproducible from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (state >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(order(&build(&shuffled)), expected);
    }

    #[test]
    fn an_injected_cycle_is_reported_with_all_its_members(
        edges in dag(25),
        picks in proptest::collection::btree_set(0usize..25, 1..6),
    ) {
        let mut edges = edges;
        let members: Vec<usize> = picks.into_iter().filter(|p| *p < edges.len()).collect();
        prop_assume!(!members.is_empty());
        // m0 -> m1 -> ... -> mk -> m0.
        for (i, m) in members.iter().enumerate() {
            let next = members[(i + 1) % members.len()];
            edges[*m].insert(next);
        }
        let err = Graph::build(&Registry::builtin(), &vms(&edges)).unwrap_err();
        let closure = dependants_closure(&edges);
        let mut found = false;
        for p in &err.problems {
            let Problem::Cycle { members: names, .. } = p else {
                prop_assert!(false, "not a cycle: {p}");
                continue;
            };
            let indices: Vec<usize> = names.iter().map(|k| k.name[1..].parse().unwrap()).collect();
            // Sorted by (kind, name), and every member really is on a cycle.
            let mut sorted = names.clone();
            sorted.sort();
            prop_assert_eq!(&sorted, names);
            for i in &indices {
                prop_assert!(closure[*i].contains(i), "v{i} is not on a cycle");
            }
            if members.iter().all(|m| indices.contains(m)) {
                found = true;
            }
        }
        prop_assert!(found, "no reported cycle holds all of {:?}: {}", members, err);
    }

    #[test]
    fn deferral_is_exactly_the_transitive_closure_of_dependants(
        edges in dag(40),
        failures in proptest::collection::btree_set(0usize..40, 0..5),
    ) {
        let g = build(&vms(&edges));
        let failed: Vec<usize> = failures.into_iter().filter(|f| *f < edges.len()).collect();
        let failed_steps: Vec<StepId> = g
            .steps()
            .iter()
            .filter(|s| failed.contains(&vm_index(&g, s.id)))
            .map(|s| s.id)
            .collect();
        let d = g.defer(&failed_steps);
        let closure = dependants_closure(&edges);
        for step in g.steps() {
            let i = vm_index(&g, step.id);
            let blockers: BTreeSet<usize> =
                failed.iter().copied().filter(|f| closure[*f].contains(&i)).collect();
            let skipped = d.skipped.iter().find(|s| s.step == step.id);
            if failed.contains(&i) {
                prop_assert!(skipped.is_none() && !d.runnable.contains(&step.id));
            } else if blockers.is_empty() {
                prop_assert!(skipped.is_none() && d.runnable.contains(&step.id));
            } else {
                let s = skipped.expect("skipped");
                let got: BTreeSet<usize> = s.blocked_by.iter().map(|b| vm_index(&g, *b)).collect();
                prop_assert_eq!(got, blockers);
                prop_assert!(s.blocked_by.windows(2).all(|w| w[0] < w[1]));
            }
        }
        prop_assert_eq!(d.skipped.len() + d.runnable.len() + failed_steps.len(), g.step_count());
    }
}
