//! Planning a converged cluster of 1,000 managed guests (VMs on four nodes, each mounting an ISO
//! that all four nodes hold) and of cluster objects of the kinds of issue 32 that the simulator
//! writes (pools, backup jobs, PCI mappings, users, ACL entries, and the cluster's firewall
//! with aliases, IP sets and security groups with rules), with 5 ms of simulated
//! latency on every request.
//!
//! Reports the wall time of `planner::plan_cluster` and the API requests it made (simulator
//! counters), against the goal of at most guests + (node, storage) pairs + nodes + 2 requests
//! (one live guest list per node and guest type holding managed guests: one per node here, all
//! being VMs; `/cluster/resources` status is a 10 s stats cache) + one request per object list
//! the composition declares (one per kind's list; an IP set's entries and a security group's
//! rules are one list each), and checks that the plan is empty and that no object list
//! endpoint was read more often than it has concrete lists. The guests and objects are created
//! beforehand by the engine itself (a converge with instant tasks and no latency), so they
//! carry exactly the config, tags and marks it writes.
//!
//! A custom harness: one plan takes about a second, so a few timed runs say more than
//! criterion's sampling. `cargo bench -p proxops-engine --bench plan`; `PLAN_RUNS` sets the
//! number of timed runs (default 5), `PLAN_GUESTS` the number of guests (default 1000),
//! `PLAN_OBJECTS=0` leaves the cluster objects out (the guests-only figure of before).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/fleet.rs"]
mod fleet;

use proxops_engine::cycle::converge;
use proxops_engine::desired::{OWNER_TAG, artifact, identity_tag};
use proxops_engine::execute::ExecOptions;
use proxops_engine::objects::objects;
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_pve::{PveClient, WaitOptions};
use proxops_pve_sim::{FaultConfig, SimHandle};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const LATENCY: Duration = Duration::from_millis(5);

fn main() {
    let guests = fleet::runs("PLAN_GUESTS", 1000);
    let runs = fleet::runs("PLAN_RUNS", 5);
    let with_objects = std::env::var("PLAN_OBJECTS").map_or(true, |v| v != "0");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(guests, runs, with_objects));
}

/// Counts of the cluster objects the bench declares.
const POOLS: usize = 20;
const BACKUP_JOBS: usize = 10;
const MAPPINGS: usize = 10;
const USERS: usize = 20;
const ACLS: usize = 20;
const ALIASES: usize = 10;
const IPSETS: usize = 3;
const IPSET_ENTRIES: usize = 4;
const GROUPS: usize = 2;
const GROUP_RULES: usize = 4;
const ACCESS_GROUPS: usize = 5;
const ROLES: usize = 3;
const VNETS: usize = 4;
const STORAGES: usize = 4;
/// Of the storages, those in a pool (`pool: pool-00`).
const POOL_STORAGES: usize = 2;

/// The cluster objects: pools, backup jobs (each of some guests, on `local`), PCI mappings,
/// users, ACL entries (each user audits a pool), the cluster's firewall, access groups, roles,
/// an SDN zone with its VNets and a subnet on each, and `dir` storages (some in a pool). API
/// tokens are left out: their create needs the planes or a directory for their secret.
fn object_manifests(guests: usize) -> Vec<String> {
    let m = |kind: &str, name: &str, spec: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
        )
    };
    let mut out = Vec::new();
    for i in 0..POOLS {
        out.push(m(
            "Pool",
            &format!("pool-{i:02}"),
            &format!("  comment: bench pool {i}\n"),
        ));
    }
    for i in 0..BACKUP_JOBS {
        let vmids: Vec<String> = (0..3)
            .map(|k| (1000 + (i * 3 + k) % guests.max(1)).to_string())
            .collect();
        out.push(m(
            "BackupJob",
            &format!("backup-{i:02}"),
            &format!(
                "  schedule: \"0{}:30\"\n  storage: local\n  vmids: [{}]\n  mode: snapshot\n  retention:\n    keep-last: 3\n  comment: bench job {i}\n",
                i % 10,
                vmids.join(", ")
            ),
        ));
    }
    for i in 0..MAPPINGS {
        let node = fleet::NODES[i % fleet::NODES.len()];
        out.push(m(
            "ResourceMapping",
            &format!("gpu-{i:02}"),
            &format!(
                "  type: pci\n  description: bench GPU {i}\n  map:\n    - node: {node}\n      path: \"0000:{:02x}:00.0\"\n      id: \"10de:1b80\"\n",
                i + 1
            ),
        ));
    }
    for i in 0..USERS {
        out.push(m(
            "User",
            &format!("user-{i:02}"),
            &format!("  userid: user-{i:02}@pve\n  comment: bench user {i}\n"),
        ));
    }
    for i in 0..ACLS {
        out.push(m(
            "Acl",
            &format!("acl-{i:02}"),
            &format!(
                "  path: /pool/pool-{:02}\n  roles: [PVEAuditor]\n  users: [user-{:02}@pve]\n",
                i % POOLS,
                i % USERS
            ),
        ));
    }
    let mut fw = String::from("  options:\n    enable: true\n    policy_in: DROP\n  aliases:\n");
    for i in 0..ALIASES {
        fw.push_str(&format!(
            "    - name: host{i:02}\n      cidr: 10.0.{i}.1\n      comment: bench host {i}\n"
        ));
    }
    fw.push_str("  ipsets:\n");
    for s in 0..IPSETS {
        fw.push_str(&format!("    - name: set{s}\n      entries:\n"));
        for e in 0..IPSET_ENTRIES {
            fw.push_str(&format!("        - cidr: 10.1.{s}.{e}\n"));
        }
    }
    fw.push_str("  groups:\n");
    for g in 0..GROUPS {
        fw.push_str(&format!(
            "    - name: group{g}\n      comment: bench group {g}\n      rules:\n"
        ));
        for (r, mac) in ["HTTPS", "HTTP", "SSH", "Ping"]
            .iter()
            .take(GROUP_RULES)
            .enumerate()
        {
            fw.push_str(&format!(
                "        - {{type: in, action: ACCEPT, macro: {mac}, source: +set{}, comment: rule {r}}}\n",
                r % IPSETS
            ));
        }
    }
    out.push(m("Firewall", "bench", &fw));
    for i in 0..ACCESS_GROUPS {
        out.push(m(
            "Group",
            &format!("team-{i:02}"),
            &format!("  comment: bench team {i}\n"),
        ));
    }
    for i in 0..ROLES {
        out.push(m(
            "Role",
            &format!("reader-{i:02}"),
            "  privs: [VM.Audit, Datastore.Audit]\n",
        ));
    }
    out.push(m("SdnZone", "bench", "  type: simple\n"));
    for i in 0..VNETS {
        out.push(m(
            "SdnVnet",
            &format!("vnet{i}"),
            &format!("  zone: bench\n  alias: bench vnet {i}\n"),
        ));
        out.push(m(
            "SdnSubnet",
            &format!("vnet{i}-v4"),
            &format!("  vnet: vnet{i}\n  subnet: 10.50.{i}.0/24\n  gateway: 10.50.{i}.1\n"),
        ));
    }
    for i in 0..STORAGES {
        let pool = if i < POOL_STORAGES {
            "  pool: pool-00\n"
        } else {
            ""
        };
        out.push(m(
            "Storage",
            &format!("store{i}"),
            &format!("  type: dir\n  content: [iso, backup]\n{pool}  options:\n    path: /mnt/bench/{i}\n"),
        ));
    }
    out
}

/// The object lists a converged plan may read: per list template (`GET` counter key), the
/// concrete lists the composition's objects are in (an IP set's entries and a security group's
/// rules are one list each), and the storages of each pool a storage names (PVE lists them one
/// pool at a time, `GET /pools?poolid=`).
fn object_lists(graph: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for id in graph.resources() {
        if let proxops_model::Spec::Object(proxops_model::kinds::ObjectSpec::Storage(st)) =
            &graph.resource(id).spec
            && let Some(pool) = &st.pool
        {
            out.entry("GET /pools".to_owned())
                .or_default()
                .insert(format!("/pools?poolid={pool}&type=storage"));
        }
        for o in objects(fleet::CLUSTER, graph.resource(id))
            .into_iter()
            .flatten()
        {
            out.entry(format!("GET {}", o.endpoints.list))
                .or_default()
                .insert(o.endpoints.list_path());
        }
    }
    out
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
    let objects = graph
        .resources()
        .filter(|id| objects(fleet::CLUSTER, graph.resource(*id)).is_some())
        .count();
    // Every action of the first plan that is not a guest's nor the ISO's writes an object.
    let created = cycles[0]
        .plan
        .actions
        .iter()
        .filter(|a| a.vmid.is_none() && a.kind != "ISO")
        .count();
    println!(
        "setup: {} guests created by the engine in {} cycle(s), {ours} ours, {running} running; {objects} object resources ({created} object writes), {:.1} s",
        state.guests.len(),
        cycles.len(),
        started.elapsed().as_secs_f64()
    );
}

struct Run {
    converged: bool,
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
        converged,
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

async fn bench(guests: usize, runs: usize, with_objects: bool) {
    println!(
        "plan benchmark: {guests} VMs on {} nodes{}, {} CPUs, load average {}",
        fleet::NODES.len(),
        if with_objects {
            " and cluster objects"
        } else {
            ""
        },
        fleet::cpus(),
        fleet::load_average()
    );
    let objects = if with_objects {
        object_manifests(guests)
    } else {
        Vec::new()
    };
    let graph = fleet::graph(guests, true, objects);
    let lists_by_template = object_lists(&graph);
    let object_lists: usize = lists_by_template.values().map(BTreeSet::len).sum();
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
    let goal = guests as u64 + pairs as u64 + lists as u64 + 2 + object_lists as u64;
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
    // Each object list is read at most once: no list template more often than it has
    // concrete lists.
    let mut once = true;
    println!("object lists (reads per plan / concrete lists declared):");
    for (template, paths) in &lists_by_template {
        let worst = timed
            .iter()
            .map(|r| {
                r.by_endpoint
                    .iter()
                    .find(|(e, _)| e == template)
                    .map_or(0, |(_, n)| *n)
            })
            .max()
            .unwrap_or(0);
        let ok = worst <= paths.len() as u64;
        once &= ok;
        println!(
            "  {worst:>3} / {:<3} {template}{}",
            paths.len(),
            if ok { "" } else { "  READ MORE THAN ONCE" }
        );
    }
    println!(
        "client counters (total over {} plans): {}",
        runs + 1,
        client.counters().total()
    );
    let object_requests: u64 = timed[0]
        .by_endpoint
        .iter()
        .filter(|(e, _)| lists_by_template.contains_key(e))
        .map(|(_, n)| n)
        .sum();
    println!(
        "RESULT plan guests={guests} node_storage_pairs={pairs} guest_lists={lists} object_lists={object_lists} object_requests={object_requests} latency_ms={} wall_ms={median:.1} requests={requests} goal_requests<={goal} {} each_object_list_once={} converged={}",
        LATENCY.as_millis(),
        if requests <= goal { "MET" } else { "MISSED" },
        if once { "MET" } else { "MISSED" },
        timed.iter().all(|r| r.converged)
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
    assert!(
        timed.iter().all(|r| r.converged),
        "a converged plan was not empty"
    );
    assert!(once, "an object list was read more than once in a plan");
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
