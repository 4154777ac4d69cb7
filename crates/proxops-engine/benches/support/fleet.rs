//! A generated fleet for the engine benchmarks: `count` VMs spread round-robin over four nodes
//! (1 GiB, one core, an 8 GiB disk on `local-lvm`), optionally each with the cdrom of one ISO
//! that every node holds on `local`; a simulator seeded with those nodes and PVE's default
//! storages, and a client pinned to its certificate.

use proxops_graph::Graph;
use proxops_model::Registry;
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_pve::{Credentials, PveClient, TlsVerification};
use proxops_pve_sim::{FaultConfig, SimConfig, SimHandle, State, TaskDurations};
use proxops_test_support::sim::node_with_default_storages;
use std::time::Duration;

/// The cluster name (it is part of every identity tag).
pub const CLUSTER: &str = "bench";

/// The nodes the guests are spread over.
pub const NODES: [&str; 4] = ["pve01", "pve02", "pve03", "pve04"];

/// The manifests: an ISO on every node when `iso` (each VM then mounts it), then `count` VMs.
pub fn manifests(count: usize, iso: bool) -> Vec<String> {
    let head = "apiVersion: proxops/v1alpha1\n";
    let mut out = Vec::with_capacity(count + 1);
    if iso {
        let nodes: String = NODES.iter().map(|n| format!("    - {n}\n")).collect();
        out.push(format!(
            "{head}kind: ISO\nmetadata:\n  name: bench-iso\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: bench.iso\n  url: https://example.invalid/bench.iso\n"
        ));
    }
    let cdrom = if iso {
        "  hardware:\n    cdrom:\n      iso: bench-iso\n"
    } else {
        ""
    };
    for i in 0..count {
        let node = NODES[i % NODES.len()];
        let vmid = 1000 + i;
        out.push(format!(
            "{head}kind: VM\nmetadata:\n  name: vm-{i:04}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n{cdrom}"
        ));
    }
    out
}

/// The graph of [`manifests`] and of the manifests `more`.
pub fn graph(count: usize, iso: bool, more: Vec<String>) -> Graph {
    let registry = Registry::builtin();
    let resources: Vec<_> = manifests(count, iso)
        .into_iter()
        .chain(more)
        .enumerate()
        .map(|(i, text)| {
            let file = SourceFile::new(format!("m/{i}.yaml"), text);
            let loaded = load_manifest(&file, &registry, None);
            loaded
                .resource
                .unwrap_or_else(|| panic!("manifest {i}: {:#?}", loaded.diagnostics))
        })
        .collect();
    Graph::build(&registry, &resources).unwrap_or_else(|e| panic!("{e:#?}"))
}

/// The four nodes with PVE's default storages (`local`: dir, `local-lvm`: lvmthin), no guests.
pub fn empty_cluster() -> State {
    State {
        cluster_name: CLUSTER.into(),
        nodes: NODES
            .iter()
            .map(|n| node_with_default_storages(n))
            .collect(),
        ..State::default()
    }
}

/// Starts a simulator (offline downloads) with `state`, task run times and faults.
pub async fn simulator(state: State, tasks: Duration, faults: FaultConfig) -> SimHandle {
    let config = SimConfig::default()
        .with_state(state)
        .with_task_durations(TaskDurations::uniform(tasks))
        .with_faults(faults)
        .with_offline_downloads(true);
    proxops_pve_sim::start(config).await.unwrap()
}

/// A client of `sim` as the CLI builds one (defaults: 4 mutations per node), with
/// `mutations_per_node` overriding the per-node limit.
pub fn client(sim: &SimHandle, mutations_per_node: Option<usize>) -> PveClient {
    let mut builder = PveClient::builder(
        sim.base_url(),
        Credentials::parse_token(&sim.token.to_string()).unwrap(),
    )
    .tls(TlsVerification::Fingerprint(
        sim.fingerprint.parse().unwrap(),
    ));
    if let Some(n) = mutations_per_node {
        builder = builder.mutations_per_node(n);
    }
    builder.build().unwrap()
}

/// The 1-, 5- and 15-minute load averages, for the record.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The CPU count.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `runs` from the environment variable `var`, else `default`.
pub fn runs(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .max(1)
}
