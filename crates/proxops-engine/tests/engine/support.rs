//! The example repository's graphs, and a simulator with a client.

use proxops_graph::{Graph, check_repository};
use proxops_model::{FsSource, LoadOptions, Registry, Repository, load_repository};
use proxops_pve::{Credentials, PveClient};
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

/// Planner options for a homelab cluster as a run without the planes has them: its node
/// allowlist and `budget`, the age recipients of its SOPS file (read from the file's metadata:
/// no key needed), and a directory (kept alive by the returned guard) that a new API token's
/// encrypted secret is written under.
pub fn homelab_options(
    cluster: &proxops_model::Cluster,
    budget: Option<u32>,
) -> (proxops_engine::planner::PlanOptions, tempfile::TempDir) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/homelab");
    let tokens = tempfile::tempdir().unwrap();
    let options = proxops_engine::cycle::plan_options(cluster, budget)
        .with_secrets(Some(proxops_engine::secrets::ClusterSecrets::load(
            Some(&dir),
            cluster,
        )))
        .with_token_files(Some(tokens.path().to_path_buf()));
    (options, tokens)
}

/// A simulator with `state` (answering as the PVE release it records), quick tasks, and a
/// client pinned to its certificate.
pub async fn simulator(state: State) -> (SimHandle, PveClient) {
    started(state, false).await
}

/// [`simulator`], with downloads made up instead of fetched (no network in tests).
pub async fn offline_simulator(state: State) -> (SimHandle, PveClient) {
    started(state, true).await
}

/// [`simulator`], the client logged in as root@pam with a password: what only root@pam may
/// write (a container's features besides `nesting`, raw devices) needs it, a token never will.
pub async fn root_simulator(state: State) -> (SimHandle, PveClient) {
    let root = Credentials::Password {
        username: "root@pam".into(),
        password: "root-password".into(),
    };
    launch(state, false, Some(root)).await
}

async fn started(state: State, offline_downloads: bool) -> (SimHandle, PveClient) {
    launch(state, offline_downloads, None).await
}

async fn launch(
    state: State,
    offline_downloads: bool,
    login: Option<Credentials>,
) -> (SimHandle, PveClient) {
    let mut config = SimConfig::default()
        .with_pve_version(state.pve_version)
        .with_state(state)
        .with_task_durations(TaskDurations::uniform(Duration::from_millis(20)))
        .with_offline_downloads(offline_downloads);
    if let Some(Credentials::Password { username, password }) = &login {
        config.users.push(proxops_pve_sim::User {
            userid: username.clone(),
            password: password.expose().to_owned(),
        });
    }
    let sim = start(config).await.unwrap();
    let credentials = login.unwrap_or_else(|| proxops_test_support::sim::token(&sim));
    let client = proxops_test_support::sim::client_builder(&sim, credentials)
        .build()
        .unwrap();
    (sim, client)
}

/// One manifest, loaded from its text.
pub fn manifest(text: &str) -> std::sync::Arc<proxops_model::Resource> {
    let file = proxops_model::diagnostic::SourceFile::new("manifest.yaml", text.to_owned());
    let loaded = proxops_model::manifest::load_manifest(&file, &Registry::builtin(), None);
    loaded
        .resource
        .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
}

/// The graph of some manifests.
pub fn graph_of(texts: &[&str]) -> Graph {
    let resources: Vec<_> = texts.iter().map(|t| manifest(t)).collect();
    Graph::build(&Registry::builtin(), &resources).unwrap()
}

/// Node `pve1` with PVE's default storages (`local` for files, `local-lvm` for disks).
pub fn one_node() -> State {
    let storage = |name: &str, kind: &str, content: &[&str]| proxops_pve_sim::Storage {
        storage: name.into(),
        kind: kind.into(),
        content: content.iter().map(|c| (*c).to_owned()).collect(),
        ..proxops_pve_sim::Storage::default()
    };
    State {
        nodes: vec![proxops_pve_sim::Node {
            node: "pve1".into(),
            storages: vec![
                storage("local", "dir", &["iso", "vztmpl", "import", "snippets"]),
                storage("local-lvm", "lvmthin", &["images", "rootdir"]),
            ],
            ..proxops_pve_sim::Node::default()
        }],
        ..State::default()
    }
}

/// The CTTemplate manifest of the template [`one_node_with_ct_template`] holds.
pub const CT_TEMPLATE: &str = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian\nspec:\n  node: pve1\n  storage: local\n  filename: debian-13-standard_13.1-2_amd64.tar.zst\n  url: https://example.invalid/debian-13-standard_13.1-2_amd64.tar.zst\n";

/// [`one_node`] with the Debian 13 container template (`CT_TEMPLATE`) already on `local`.
pub fn one_node_with_ct_template() -> State {
    let mut state = one_node();
    state.volumes.push(proxops_pve_sim::Volume {
        node: "pve1".into(),
        storage: "local".into(),
        volid: "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst".into(),
        content: "vztmpl".into(),
        format: "tzst".into(),
        size: 120 << 20,
        ..proxops_pve_sim::Volume::default()
    });
    state
}
