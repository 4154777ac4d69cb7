//! Builds the graph of one generated cluster once, for profilers (callgrind, massif, perf):
//! `cargo run --release -p proxops-graph --example build_graph -- 10000`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../benches/support/scale.rs"]
mod scale;

use proxops_graph::Graph;
use proxops_model::Registry;

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .map_or(10_000, |a| a.parse().expect("a resource count"));
    let registry = Registry::builtin();
    let resources = scale::resources(count);
    let start = std::time::Instant::now();
    let graph = Graph::build(&registry, &resources).expect("graph");
    let steps = graph.create_order().count() + graph.prune_order().count();
    println!(
        "{count} resources, {} steps, {} levels: built and ordered in {:?} ({steps} ids)",
        graph.step_count(),
        graph.level_count(),
        start.elapsed()
    );
}
