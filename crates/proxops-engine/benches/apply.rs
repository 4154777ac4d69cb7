//! Applying 200 creates across four nodes (50 VMs each) with 200 ms simulated tasks, with the
//! executor's default options and the client's default per-node mutation limit, against the
//! ideal schedule (goal: within 1.3x).
//!
//! Each VM declares `state: started` (the default) and clones nothing, so its create is one
//! `POST /nodes/{node}/qemu` with `start=1`: one `qmcreate` task of 200 ms that also starts the
//! guest. The ideal schedule runs those tasks back to back in as many slots as the limits allow:
//! at most `concurrency` actions over the cluster and `mutations_per_node` per node, so
//! `ideal = T x max(ceil(creates / min(concurrency, nodes x per_node)), max over nodes of
//! ceil(creates on the node / per_node))`, with no time for requests or polling.
//!
//! A custom harness: a run takes seconds, so a few timed runs say more than criterion's
//! sampling. `cargo bench -p proxops-engine --bench apply`; `APPLY_RUNS` sets the number of
//! runs (default 3).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/fleet.rs"]
mod fleet;

use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::Verb;
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_pve::WaitOptions;
use proxops_pve_sim::{FaultConfig, SimHandle};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const CREATES: usize = 200;
const TASK: Duration = Duration::from_millis(200);

fn main() {
    let runs = fleet::runs("APPLY_RUNS", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(runs));
}

/// Running tasks per node, sampled every 5 ms while the executor runs.
#[derive(Default)]
struct Occupancy {
    samples: u64,
    /// Sum over samples of the running tasks, per node and over the cluster.
    sum_node: BTreeMap<String, u64>,
    sum_all: u64,
    max_node: BTreeMap<String, u64>,
    max_all: u64,
}

async fn sample(sim: Arc<SimHandle>, done: Arc<AtomicBool>) -> Occupancy {
    let mut o = Occupancy::default();
    while !done.load(Ordering::Relaxed) {
        let per_node = sim.with_state(|st| {
            let mut m: BTreeMap<String, u64> = BTreeMap::new();
            for t in st.tasks.iter().filter(|t| t.status == "running") {
                *m.entry(t.node.clone()).or_default() += 1;
            }
            m
        });
        let all: u64 = per_node.values().sum();
        if all > 0 {
            o.samples += 1;
            o.sum_all += all;
            o.max_all = o.max_all.max(all);
            for n in fleet::NODES {
                let c = per_node.get(n).copied().unwrap_or(0);
                *o.sum_node.entry(n.to_owned()).or_default() += c;
                let m = o.max_node.entry(n.to_owned()).or_default();
                *m = (*m).max(c);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    o
}

struct Run {
    wall: Duration,
    plan: Duration,
    mean_action_ms: f64,
    requests: BTreeMap<String, u64>,
    occupancy: Occupancy,
}

async fn apply_once(graph: &Graph) -> Run {
    let sim =
        Arc::new(fleet::simulator(fleet::empty_cluster(), TASK, FaultConfig::default()).await);
    let client = fleet::client(&sim, None);
    let started = Instant::now();
    let plan = plan_cluster(&client, fleet::CLUSTER, graph, &PlanOptions::default())
        .await
        .unwrap();
    let plan_time = started.elapsed();
    assert_eq!(plan.actions.len(), CREATES);
    assert!(plan.actions.iter().all(|a| a.verb == Verb::Create));
    sim.reset_counters();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(sim.clone(), done.clone()));
    let started = Instant::now();
    let report = execute(&client, &plan, &ExecOptions::default()).await;
    let wall = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let occupancy = sampler.await.unwrap();
    assert!(report.all_succeeded(), "{report:#?}");
    let state = sim.state();
    assert_eq!(state.guests.len(), CREATES);
    assert!(state.guests.values().all(|g| g.running()));
    let tasks = state.tasks.len();
    assert_eq!(tasks, CREATES, "one task per create");
    let mean_action_ms =
        report.results.iter().map(|r| r.millis as f64).sum::<f64>() / report.results.len() as f64;
    let requests = sim.counters();
    let sim = Arc::into_inner(sim).expect("the sampler has ended");
    sim.shutdown().await.unwrap();
    Run {
        wall,
        plan: plan_time,
        mean_action_ms,
        requests,
        occupancy,
    }
}

async fn bench(runs: usize) {
    println!(
        "apply benchmark: {CREATES} creates on {} nodes, {} ms tasks, {} CPUs, load average {}",
        fleet::NODES.len(),
        TASK.as_millis(),
        fleet::cpus(),
        fleet::load_average()
    );
    let graph = fleet::graph(CREATES, false, Vec::new());
    let exec = ExecOptions::default();
    let per_node = 4; // the client's default `mutations_per_node`
    let nodes = fleet::NODES.len();
    let per_node_creates = CREATES.div_ceil(nodes);
    let slots = exec.concurrency.min(nodes * per_node);
    let waves = CREATES
        .div_ceil(slots)
        .max(per_node_creates.div_ceil(per_node));
    let ideal = TASK * waves as u32;
    println!(
        "ideal: {CREATES} creates x 1 task each, {slots} slots (min(concurrency {}, {nodes} nodes x {per_node} per node)), {waves} waves x {} ms = {} ms",
        exec.concurrency,
        TASK.as_millis(),
        ideal.as_millis()
    );
    // The client sees a task end at its first status poll after the end: polls go out at once,
    // then after `first_poll`, growing by `growth` (`WaitOptions::for_task`, which the executor
    // uses). The same schedule with each task taking until that poll is the best the executor
    // can do without a different poll schedule.
    let wait = WaitOptions::for_task("qmcreate");
    let (mut seen, mut interval) = (Duration::ZERO, wait.first_poll);
    while seen < TASK {
        seen += interval;
        interval = interval.mul_f64(wait.growth.max(1.0)).min(wait.max_poll);
    }
    let polled = seen * waves as u32;
    println!(
        "ideal with the client's poll schedule: a {} ms task is seen done at {} ms, {waves} waves = {} ms",
        TASK.as_millis(),
        seen.as_millis(),
        polled.as_millis()
    );
    let mut walls = Vec::new();
    for i in 1..=runs {
        let r = apply_once(&graph).await;
        let o = &r.occupancy;
        let mean = |s: u64| s as f64 / o.samples.max(1) as f64;
        println!(
            "run {i}: wall_ms={:.1} ratio={:.3} plan_ms={:.1} mean_create_ms={:.1} requests={} running_tasks mean={:.2} max={} per_node mean=[{}] max=[{}]",
            r.wall.as_secs_f64() * 1e3,
            r.wall.as_secs_f64() / ideal.as_secs_f64(),
            r.plan.as_secs_f64() * 1e3,
            r.mean_action_ms,
            r.requests.values().sum::<u64>(),
            mean(o.sum_all),
            o.max_all,
            o.sum_node
                .values()
                .map(|s| format!("{:.2}", mean(*s)))
                .collect::<Vec<_>>()
                .join(" "),
            o.max_node
                .values()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        );
        if i == 1 {
            for (endpoint, n) in &r.requests {
                println!("  {n:>6}  {endpoint}");
            }
        }
        walls.push(r.wall.as_secs_f64() * 1e3);
    }
    walls.sort_by(f64::total_cmp);
    let median = walls[walls.len() / 2];
    let ratio = median / (ideal.as_secs_f64() * 1e3);
    println!(
        "scheduling overhead: wall / ideal with polling = {:.3}",
        median / (polled.as_secs_f64() * 1e3)
    );
    println!(
        "RESULT apply creates={CREATES} nodes={nodes} task_ms={} ideal_ms={} wall_ms={median:.1} min_ms={:.1} max_ms={:.1} ratio={ratio:.3} goal<=1.3 {}",
        TASK.as_millis(),
        ideal.as_millis(),
        walls[0],
        walls[walls.len() - 1],
        if ratio <= 1.3 { "MET" } else { "MISSED" }
    );
}
