//! The example repository's graphs, and a simulator with a client.

use proxops_graph::{Graph, check_repository};
use proxops_model::{FsSource, LoadOptions, Registry, Repository, load_repository};
use proxops_pve::{Credentials, PveClient, TlsVerification};
use proxops_pve_sim::{SimConfig, SimHandle, State, TaskDurations, start};
use std::path::Path;
use std::time::Duration;

/// `examples/homelab`, loaded and validated, with each cluster's graph.
pub fn homelab() -> (Repository, Vec<(String, Graph)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/homelab");
    let registry = Registry::builtin();
    let mut repo = load_repository(
        &FsSource::new(&dir).unwrap(),
        &registry,
        &LoadOptions::default(),
    )
    .unwrap();
    let graphs = check_repository(&registry, &mut repo)
        .into_iter()
        .map(|c| (c.name, c.graph.expect("a valid cluster")))
        .collect();
    (repo, graphs)
}

/// A simulator with `state`, quick tasks, and a client pinned to its certificate.
pub async fn simulator(state: State) -> (SimHandle, PveClient) {
    let config = SimConfig {
        state,
        task_durations: TaskDurations::uniform(Duration::from_millis(20)),
        ..SimConfig::default()
    };
    let sim = start(config).await.unwrap();
    let client = PveClient::builder(
        sim.base_url(),
        Credentials::parse_token(&sim.token.to_string()).unwrap(),
    )
    .tls(TlsVerification::Fingerprint(
        sim.fingerprint.parse().unwrap(),
    ))
    .timeout(Duration::from_secs(20))
    .build()
    .unwrap();
    (sim, client)
}
