//! Build, create order and prune order of one cluster of 10,000 resources with about two edges
//! each (goal: under 20 ms), and deferral after failures.
//!
//! The manifests are generated and decoded before timing; only graph work is measured.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use proxops_graph::{Graph, StepId};
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_model::{Registry, Resource};
use std::hint::black_box;
use std::sync::Arc;

const NODES: [&str; 4] = ["pve01", "pve02", "pve03", "pve04"];

fn guest_body(node: &str, vmid: usize) -> String {
    format!("spec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    cores: 1\n")
}

/// The `type` a VM's cpu needs (LXC has none).
const VM_CPU: &str = "    type: host\n";

/// Every 50 resources: an ISO and a CTTemplate on all four nodes, a TemplateVM, then guests.
/// Each VM uses the latest ISO and clones nothing; each fifth guest is an LXC from the latest
/// CTTemplate; every guest also depends on a pseudo-random earlier guest by annotation.
fn manifests(count: usize) -> Vec<String> {
    let nodes: String = NODES.iter().map(|n| format!("    - {n}\n")).collect();
    let mut guests: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(count);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..count {
        let block = i / 50;
        let head = "apiVersion: proxops/v1alpha1\n";
        let text = match i % 50 {
            0 => format!(
                "{head}kind: ISO\nmetadata:\n  name: iso-{block}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: iso-{block}.iso\n  url: https://example.invalid/{block}.iso\n"
            ),
            1 => format!(
                "{head}kind: CTTemplate\nmetadata:\n  name: ctt-{block}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: ctt-{block}.tar.zst\n  url: https://example.invalid/{block}.tar.zst\n"
            ),
            _ => {
                let node = NODES[i % NODES.len()];
                let vmid = 1000 + i;
                let name = format!("g-{i}");
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let annotation = if guests.is_empty() {
                    String::new()
                } else {
                    let target = &guests[(state >> 33) as usize % guests.len()];
                    format!("  annotations:\n    proxops/depends-on: \"{target}\"\n")
                };
                if i % 50 == 2 {
                    format!(
                        "{head}kind: TemplateVM\nmetadata:\n  name: {name}\n{annotation}{}{VM_CPU}  disks:\n    - storage: local-lvm\n      size: 8GiB\n",
                        guest_body(node, vmid)
                    )
                } else if i % 5 == 0 {
                    guests.push(format!("LXC:{name}"));
                    format!(
                        "{head}kind: LXC\nmetadata:\n  name: {name}\n{annotation}{}  template: ctt-{block}\n  root:\n    storage: local-lvm\n    size: 4GiB\n",
                        guest_body(node, vmid)
                    )
                } else {
                    guests.push(format!("VM:{name}"));
                    format!(
                        "{head}kind: VM\nmetadata:\n  name: {name}\n{annotation}{}{VM_CPU}  disks:\n    - storage: local-lvm\n      size: 8GiB\n  hardware:\n    cdrom:\n      iso: iso-{block}\n",
                        guest_body(node, vmid)
                    )
                }
            }
        };
        out.push(text);
    }
    out
}

fn resources(count: usize) -> Vec<Arc<Resource>> {
    let registry = Registry::builtin();
    manifests(count)
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let file = SourceFile::new(format!("m/{i}.yaml"), text);
            let loaded = load_manifest(&file, &registry, None);
            loaded
                .resource
                .unwrap_or_else(|| panic!("manifest {i}: {:#?}", loaded.diagnostics))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let registry = Registry::builtin();
    let mut group = c.benchmark_group("graph");
    group.sample_size(20);
    for count in [1_000usize, 10_000] {
        let input = resources(count);
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
