//! Where a cluster's PVE API is: a real endpoint (`Backend::Pve`) or an in-process simulator
//! seeded from the cluster (`Backend::Sim`), which is how `proxops demo` and the tests run
//! without a Proxmox VE.

use proxops_model::{Cluster, Registry};
use proxops_pve::{Credentials, PveClient, PveError, TlsVerification};
use proxops_pve_sim::{Node, SimConfig, SimError, SimHandle, State, Storage, TaskDurations, start};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variables that may hold a cluster's API token (`USER@REALM!ID=SECRET`),
/// which wins over the cluster's SOPS secrets: `PROXOPS_PVE_TOKEN_<CLUSTER>` (upper case, `-` as
/// `_`), then `PROXOPS_PVE_TOKEN`.
pub fn token_variables(cluster: &str) -> [String; 2] {
    [
        format!(
            "PROXOPS_PVE_TOKEN_{}",
            cluster.to_ascii_uppercase().replace('-', "_")
        ),
        "PROXOPS_PVE_TOKEN".to_owned(),
    ]
}

/// Which PVE to talk to.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The cluster's `base-url`, with its TLS settings, and credentials from the environment or
    /// from the cluster's SOPS secrets file.
    Pve {
        /// The repository's directory, where `clusters/<c>/<secrets-file>` is read (`None`: the
        /// environment only).
        repo: Option<PathBuf>,
    },
    /// A simulator started in this process for each cluster.
    Sim {
        /// Where each cluster's simulated state is kept between runs (`None`: in memory only).
        state_file: Option<PathBuf>,
        /// Task run times (short for demos and tests).
        task_time: Duration,
    },
}

/// Why a cluster could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The cluster config is missing or unusable.
    #[error("cluster `{0}` has no usable `pve.clusters` entry")]
    NoConfig(String),
    /// No credentials in the environment or the secrets file.
    #[error("no API credentials for cluster `{cluster}`: set {} or {}, or give the cluster a `secrets-file` and a `secrets.pve` mapping", vars[0], vars[1])]
    NoToken {
        /// The cluster.
        cluster: String,
        /// The variables looked at.
        vars: [String; 2],
    },
    /// The client could not be built (bad token form, CA file, fingerprint).
    #[error("cannot connect to cluster `{0}`: {1}")]
    Client(String, #[source] PveError),
    /// The secrets file could not be decrypted or lacks a mapped key.
    #[error("cluster `{0}`: {1}")]
    Secrets(String, #[source] proxops_secrets::Error),
    /// The simulator did not start.
    #[error("cannot start the simulator for cluster `{0}`: {1}")]
    Sim(String, #[source] SimError),
}

/// A client for one cluster, and the simulator behind it if there is one.
pub struct Connection {
    /// The API client.
    pub client: PveClient,
    /// The simulator serving it (dropped with the connection; shut it down for a clean stop).
    pub sim: Option<SimHandle>,
    /// Warnings about the connection (insecure TLS).
    pub warnings: Vec<String>,
}

/// Connects to one cluster.
pub async fn connect(
    registry: &Registry,
    cluster: &Cluster,
    backend: &Backend,
) -> Result<Connection, ConnectError> {
    match backend {
        Backend::Sim {
            state_file,
            task_time,
        } => {
            let mut config = SimConfig {
                state: seed_state(registry, cluster),
                task_durations: TaskDurations::uniform(*task_time),
                offline_downloads: true,
                ..SimConfig::default()
            };
            if let Some(path) = state_file {
                config = config
                    .with_state_file(path)
                    .map_err(|e| ConnectError::Sim(cluster.name.clone(), e))?;
            }
            let sim = start(config)
                .await
                .map_err(|e| ConnectError::Sim(cluster.name.clone(), e))?;
            let fingerprint = sim
                .fingerprint
                .parse()
                .map_err(|e| ConnectError::Client(cluster.name.clone(), e))?;
            let credentials = Credentials::parse_token(&sim.token.to_string())
                .map_err(|e| ConnectError::Client(cluster.name.clone(), e))?;
            let client = PveClient::builder(sim.base_url(), credentials)
                .tls(TlsVerification::Fingerprint(fingerprint))
                .build()
                .map_err(|e| ConnectError::Client(cluster.name.clone(), e))?;
            Ok(Connection {
                client,
                sim: Some(sim),
                warnings: Vec::new(),
            })
        }
        Backend::Pve { repo } => {
            let entry = cluster
                .entry
                .as_ref()
                .ok_or_else(|| ConnectError::NoConfig(cluster.name.clone()))?;
            let credentials = credentials(cluster, repo.as_deref())?;
            let mut warnings = Vec::new();
            let tls = if let Some(fp) = &entry.fingerprint {
                TlsVerification::Fingerprint(
                    fp.parse()
                        .map_err(|e| ConnectError::Client(cluster.name.clone(), e))?,
                )
            } else if let Some(ca) = &entry.ca_file {
                TlsVerification::CaFile(PathBuf::from(ca))
            } else if entry.insecure == Some(true) {
                warnings.push(format!(
                    "cluster `{}`: TLS certificate verification is off (`insecure: true`); pin the node certificate with `fingerprint:` instead",
                    cluster.name
                ));
                TlsVerification::Insecure
            } else {
                TlsVerification::System
            };
            let client = PveClient::builder(entry.base_url.clone(), credentials)
                .tls(tls)
                .build()
                .map_err(|e| ConnectError::Client(cluster.name.clone(), e))?;
            Ok(Connection {
                client,
                sim: None,
                warnings,
            })
        }
    }
}

/// A simulator state with the cluster's nodes (its allowlist, plus any node a manifest names),
/// each with PVE's default storages (`local`: dir, `local-lvm`: lvmthin) and every storage the
/// cluster's manifests use, with the content types they need.
pub fn seed_state(registry: &Registry, cluster: &Cluster) -> State {
    let storage = |name: &str, kind: &str, content: &[&str]| Storage {
        storage: name.into(),
        kind: kind.into(),
        content: content.iter().map(|c| (*c).to_owned()).collect(),
        ..Storage::default()
    };
    let mut storages: BTreeMap<String, Storage> = BTreeMap::from([
        (
            "local".to_owned(),
            storage(
                "local",
                "dir",
                &["iso", "vztmpl", "import", "backup", "snippets"],
            ),
        ),
        (
            "local-lvm".to_owned(),
            storage("local-lvm", "lvmthin", &["images", "rootdir"]),
        ),
    ]);
    let mut nodes: Vec<String> = cluster
        .entry
        .as_ref()
        .map(|e| e.nodes.clone())
        .unwrap_or_default();
    for r in &cluster.resources {
        let Some(kind) = registry.get(r.kind) else {
            continue;
        };
        for n in kind.placement_view(&r.spec).nodes {
            if !nodes.iter().any(|x| *x == n) {
                nodes.push(n.into_owned());
            }
        }
        for used in kind.storages(&r.spec) {
            // Files (ISOs, templates, imports) need a directory storage; disks a block one.
            let file = matches!(used.content, "iso" | "vztmpl" | "import");
            let entry = storages.entry(used.storage.clone()).or_insert_with(|| {
                storage(&used.storage, if file { "dir" } else { "lvmthin" }, &[])
            });
            if file && !entry.file_based() {
                entry.kind = "dir".into();
            }
            if !entry.has_content(used.content) {
                entry.content.push(used.content.to_owned());
            }
        }
    }
    nodes.sort();
    nodes.dedup();
    State {
        cluster_name: cluster.name.clone(),
        nodes: nodes
            .into_iter()
            .map(|node| Node {
                node,
                storages: storages.values().cloned().collect(),
                ..Node::default()
            })
            .collect(),
        ..State::default()
    }
}

/// A cluster's credentials: a token from the environment, else the cluster's SOPS secrets file
/// decrypted in-process through its `secrets.pve` mapping (token, or user and password).
pub fn credentials(
    cluster: &Cluster,
    repo: Option<&std::path::Path>,
) -> Result<Credentials, ConnectError> {
    let name = &cluster.name;
    let vars = token_variables(name);
    if let Some(token) = vars.iter().find_map(|v| std::env::var(v).ok()) {
        return Credentials::parse_token(&token).map_err(|e| ConnectError::Client(name.clone(), e));
    }
    let none = || ConnectError::NoToken {
        cluster: name.clone(),
        vars: vars.clone(),
    };
    let entry = cluster.entry.as_ref().ok_or_else(none)?;
    let (Some(repo), Some(file), Some(mapping)) = (
        repo,
        entry.secrets_file.as_deref(),
        entry.secrets.as_ref().and_then(|s| s.pve.as_ref()),
    ) else {
        return Err(none());
    };
    // The path is relative to the cluster's config file.
    let path = repo.join("clusters").join(name).join(file);
    let document =
        proxops_secrets::decrypt_file(&path, &proxops_secrets::IdentitySource::from_env())
            .map_err(|e| ConnectError::Secrets(name.clone(), e))?;
    let keys = proxops_secrets::SecretKeys {
        pve_user: mapping.user.clone(),
        pve_token_id: mapping.token_id.clone(),
        pve_token: mapping.token.clone(),
        pve_password: mapping.password.clone(),
        git_token: None,
    };
    let found = document
        .credentials(&keys)
        .map_err(|e| ConnectError::Secrets(name.clone(), e))?;
    let user = found
        .pve_user
        .as_ref()
        .map(|u| u.expose().to_owned())
        .unwrap_or_else(|| "root@pam".into());
    match (&found.pve_token_id, &found.pve_token, &found.pve_password) {
        // The decrypted secrets pass to the client as they are: one Secret type throughout.
        (Some(id), Some(token), _) => Ok(Credentials::token(
            format!("{user}!{}", id.expose()),
            token.clone(),
        )),
        (_, _, Some(password)) => Ok(Credentials::password(user, password.clone())),
        _ => Err(none()),
    }
}

/// The simulator state file of `cluster` when one file name serves `count` clusters: the file
/// itself for one cluster, `name.<cluster>.ext` for several.
pub fn per_cluster_state_file(file: &Path, cluster: &str, count: usize) -> PathBuf {
    if count <= 1 {
        return file.to_path_buf();
    }
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match file.extension() {
        Some(ext) => format!("{stem}.{cluster}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{cluster}"),
    };
    file.with_file_name(name)
}
