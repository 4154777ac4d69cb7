//! Planning a converged cluster of 1,000 managed guests (VMs on four nodes, each mounting an ISO
//! that all four nodes hold) with 5 ms of simulated latency on every request.
//!
//! Reports the wall time of `planner::plan_cluster` and the API requests it made (simulator
//! counters), against the goal of at most guests + (node, storage) pairs + nodes + 2 requests
//! (one live guest list per node and guest type holding managed guests: one per node here, all
//! being VMs; `/cluster/resources` status is a 10 s stats cache), and checks that the plan is
//! empty. The guests are created beforehand by the engine itself (a converge
//! with instant tasks and no latency), so they carry exactly the config and tags it writes.
//!
//! A custom harness: one plan takes about a second, so a few timed runs say more than
//! criterion's sampling. `cargo bench -p proxops-engine --bench plan`; `PLAN_RUNS` sets the
//! number of timed runs (default 5), `PLAN_GUESTS` the number of guests (default 1000).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/fleet.rs"]
mod fleet;

use proxops_engine::cycle::converge;
use proxops_engine::desired::{OWNER_TAG, artifact, identity_tag};
use proxops_engine::execute::ExecOptions;
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_pve::{PveClient, WaitOptions};
use proxops_pve_sim::{FaultConfig, SimHandle};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const LATENCY: Duration = Duration::from_millis(5);

fn main() {
    let guests = fleet::runs("PLAN_GUESTS", 1000);
    let runs = fleet::runs("PLAN_RUNS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(guests, runs));
}

/// (node, storage) pairs whose content a plan lists: one per artifact storage and node.
fn node_storage_pairs(graph: &Graph) -> usize {
    let mut pairs = BTreeSet::new();
    for id in graph.resources() {
        if let Some(a) = artifact(graph.resource(id)) {
            for n in &a.nodes {
                pairs.insert((n.clone(), a.storage.clone()));
            }
        }
    }
    pairs.len()
}

/// Creates every guest with the engine: instant tasks, no latency, generous parallelism.
async fn populate(sim: &SimHandle, graph: &Graph) {
    let started = Instant::now();
    let client = fleet::client(sim, Some(32));
    let exec = ExecOptions::default().with_concurrency(64).with_wait(Some(
        WaitOptions::default()
            .with_first_poll(Duration::from_millis(2))
            .with_max_poll(Duration::from_millis(20)),
    ));
    let plan = PlanOptions::default();
    let cycles = converge(&client, fleet::CLUSTER, graph, &plan, &exec, 3)
        .await
        .unwrap();
    let first = cycles[0].report.as_ref().expect("a first apply");
    assert!(first.all_succeeded(), "{first:#?}");
    assert!(
        cycles.last().unwrap().plan.is_empty(),
        "setup did not converge: {:#?}",
        cycles.last().unwrap().plan
    );
    // Every guest is ours: the owner tag and its identity tag.
    let state = sim.state();
    let ours = state
        .guests
        .values()
        .filter(|g| {
            let tags = g.config.get("tags").cloned().unwrap_or_default();
            let tags: Vec<&str> = tags.split(';').collect();
            let name = format!("vm-{:04}", g.vmid - 1000);
            tags.contains(&OWNER_TAG)
                && tags.contains(&identity_tag(fleet::CLUSTER, "VM", &name).as_str())
        })
        .count();
    let running = state.guests.values().filter(|g| g.running()).count();
    println!(
        "setup: {} guests created by the engine in {} cycle(s), {ours} ours, {running} running, {:.1} s",
        state.guests.len(),
        cycles.len(),
        started.elapsed().as_secs_f64()
    );
}

struct Run {
    wall: Duration,
    requests: u64,
    by_endpoint: Vec<(String, u64)>,
}

async fn plan_once(sim: &SimHandle, client: &PveClient, graph: &Graph, opts: &PlanOptions) -> Run {
    sim.reset_counters();
    let started = Instant::now();
    let plan = plan_cluster(client, fleet::CLUSTER, graph, opts)
        .await
        .unwrap();
    let wall = started.elapsed();
    let converged = plan.is_empty()
        && plan.anomalies.is_empty()
        && plan.skipped.is_empty()
        && plan.deferred_prunes.is_empty();
    if !converged {
        println!(
            "NOT CONVERGED: {} actions, {} anomalies, {} skipped, {} deferred prunes; first action: {:?}; first anomaly: {:?}; first skip: {:?}",
            plan.actions.len(),
            plan.anomalies.len(),
            plan.skipped.len(),
            plan.deferred_prunes.len(),
            plan.actions
                .first()
                .map(|a| (&a.name, a.verb, &a.reason, &a.changes)),
            plan.anomalies.first(),
            plan.skipped.first(),
        );
    }
    Run {
        wall,
        requests: sim.total_requests(),
        by_endpoint: sim.counters().into_iter().collect(),
    }
}

fn summary(label: &str, runs: &[Run]) -> (f64, f64) {
    let mut ms: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    println!(
        "{label}: wall_ms median={median:.1} min={:.1} max={:.1} runs=[{}]",
        ms[0],
        ms[ms.len() - 1],
        runs.iter()
            .map(|r| format!("{:.1}", r.wall.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    (median, ms[0])
}

async fn bench(guests: usize, runs: usize) {
    println!(
        "plan benchmark: {guests} VMs on {} nodes, {} CPUs, load average {}",
        fleet::NODES.len(),
        fleet::cpus(),
        fleet::load_average()
    );
    let graph = fleet::graph(guests, true);
    let pairs = node_storage_pairs(&graph);
    let sim = fleet::simulator(
        fleet::empty_cluster(),
        Duration::ZERO,
        FaultConfig::default(),
    )
    .await;
    populate(&sim, &graph).await;

    // The (node, guest type) lists the planner reads for live power state.
    let lists: BTreeSet<(String, &str)> = sim
        .state()
        .guests
        .values()
        .map(|g| (g.node.clone(), g.kind.as_str()))
        .collect();
    let lists = lists.len();
    let goal = guests as u64 + pairs as u64 + lists as u64 + 2;
    sim.set_faults(FaultConfig::default().with_latency(Some((LATENCY, LATENCY))));
    // A fresh client as a CLI run has: its first plan opens the connections.
    let client = fleet::client(&sim, None);
    let opts = PlanOptions::default();
    let mut timed = Vec::new();
    for i in 0..=runs {
        let run = plan_once(&sim, &client, &graph, &opts).await;
        if i == 0 {
            println!(
                "cold (new client, connections opened): wall_ms={:.1} requests={}",
                run.wall.as_secs_f64() * 1e3,
                run.requests
            );
        } else {
            timed.push(run);
        }
    }
    let (median, _) = summary(
        &format!(
            "plan_cluster latency_ms={} config_concurrency={}",
            LATENCY.as_millis(),
            opts.config_concurrency
        ),
        &timed,
    );
    let requests = timed.iter().map(|r| r.requests).max().unwrap_or(0);
    println!("requests per plan (simulator counters):");
    for (endpoint, n) in &timed[0].by_endpoint {
        println!("  {n:>6}  {endpoint}");
    }
    println!(
        "client counters (total over {} plans): {}",
        runs + 1,
        client.counters().total()
    );
    println!(
        "RESULT plan guests={guests} node_storage_pairs={pairs} guest_lists={lists} latency_ms={} wall_ms={median:.1} requests={requests} goal_requests<={goal} {}",
        LATENCY.as_millis(),
        if requests <= goal { "MET" } else { "MISSED" }
    );
    // For reference: the time the same plan takes without latency (CPU and transport only), and
    // with more config reads in flight.
    sim.set_faults(FaultConfig::default());
    let zero: Vec<Run> = plan_runs(&sim, &client, &graph, &opts, 3).await;
    summary("reference: latency_ms=0 config_concurrency=8", &zero);
    sim.set_faults(FaultConfig::default().with_latency(Some((LATENCY, LATENCY))));
    for concurrency in [16, 32] {
        let opts = PlanOptions::default().with_config_concurrency(concurrency);
        let r = plan_runs(&sim, &client, &graph, &opts, 3).await;
        summary(
            &format!(
                "reference: latency_ms={} config_concurrency={concurrency}",
                LATENCY.as_millis()
            ),
            &r,
        );
    }
    sim.shutdown().await.unwrap();
}

async fn plan_runs(
    sim: &SimHandle,
    client: &PveClient,
    graph: &Graph,
    opts: &PlanOptions,
    n: usize,
) -> Vec<Run> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(plan_once(sim, client, graph, opts).await);
    }
    out
}
