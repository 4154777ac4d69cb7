//! Build, create order and prune order of one cluster of 10,000 resources with about two edges
//! each (goal: under 20 ms), and deferral after failures.
//!
//! The manifests are generated and decoded before timing; only graph work is measured.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/scale.rs"]
mod scale;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use proxops_graph::{Graph, StepId};
use proxops_model::Registry;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let registry = Registry::builtin();
    let mut group = c.benchmark_group("graph");
    group.sample_size(20);
    for count in [1_000usize, 10_000] {
        let input = scale::resources(count);
        let graph = Graph::build(&registry, &input).expect("graph");
        let edges: usize = graph.resources().map(|r| graph.dependencies(r).len()).sum();
        eprintln!(
            "{count} resources: {} edges ({:.2} per resource), {} steps, {} levels",
            edges,
            edges as f64 / count as f64,
            graph.step_count(),
            graph.level_count()
        );
        group.bench_with_input(
            BenchmarkId::new("build_order_prune", count),
            &input,
            |b, input| {
                b.iter(|| {
                    let g = Graph::build(&registry, input).expect("graph");
                    let first: usize = g.create_order().map(StepId::index).sum();
                    let last: usize = g.prune_order().map(StepId::index).sum();
                    black_box((first, last, g))
                })
            },
        );
        group.bench_with_input(BenchmarkId::new("order_only", count), &graph, |b, g| {
            b.iter(|| {
                let order: Vec<StepId> = g.create_order().collect();
                let prune: Vec<StepId> = g.prune_order().collect();
                black_box((order, prune))
            })
        });
        // Ten failed ISO downloads early in the order.
        let failed: Vec<StepId> = graph
            .steps()
            .iter()
            .filter(|s| s.vmid.is_none())
            .map(|s| s.id)
            .take(10)
            .collect();
        group.bench_with_input(
            BenchmarkId::new("defer_10_failures", count),
            &graph,
            |b, g| b.iter(|| black_box(g.defer(&failed))),
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
