//! Where a cluster's PVE API is: a real endpoint (`Backend::Pve`) or an in-process simulator
//! seeded from the cluster (`Backend::Sim`), which is how `proxops demo` and the tests run
//! without a Proxmox VE.

use crate::cycle::plan_options;
use crate::execute::ExecOptions;
use crate::planner::PlanOptions;
use crate::secrets::ClusterSecrets;
use proxops_model::config::{AuthMethod, ConfigFile, LogLevel};
use proxops_model::settings::{
    ClusterSettings, Credential, FlagSettings, Layers, Origin, Tls, cluster_variable, effective,
};
use proxops_model::{Cluster, Registry};
use proxops_pve::{Credentials, PveClient, PveError, TlsVerification, WaitOptions};
#[cfg(feature = "sim")]
use proxops_pve_sim::{SimError, SimHandle};
use proxops_secrets::{Secret, SecretKeys};
use std::path::{Path, PathBuf};
#[cfg(feature = "sim")]
use std::time::Duration;

#[cfg(feature = "sim")]
mod sim;
#[cfg(feature = "sim")]
pub use sim::{SimSeed, declared_storage, seed_cluster_guests, seed_state, sim_version};

/// The environment variables that may hold a cluster's API token (`USER@REALM!ID=SECRET`),
/// which wins over the cluster's SOPS secrets: `PROXOPS_PVE_TOKEN_<CLUSTER>` (upper case, `-` as
/// `_`), then `PROXOPS_PVE_TOKEN`. The whole list of variables is in [`proxops_model::settings`].
pub fn token_variables(cluster: &str) -> [String; 2] {
    [
        cluster_variable("PROXOPS_PVE_TOKEN", cluster),
        "PROXOPS_PVE_TOKEN".to_owned(),
    ]
}

/// A cluster's effective settings from `proxops.yaml` (`repository`), its own config, `flags`
/// and this process's environment ([`proxops_model::settings::effective`]).
pub fn settings_for(
    repository: Option<&ConfigFile>,
    cluster: &Cluster,
    flags: &FlagSettings,
    default_log_level: LogLevel,
) -> ClusterSettings {
    let env = |name: &str| std::env::var(name).ok();
    effective(&Layers {
        cluster: &cluster.name,
        repository,
        cluster_config: cluster.config.as_ref(),
        flags,
        env: &env,
        default_log_level,
    })
}

/// Which PVE to talk to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Backend {
    /// The cluster's `base-url`, with its TLS settings, and credentials from the environment or
    /// from the cluster's SOPS secrets file (read under the repository directory a connection
    /// is given: [`connect_with`], a [`crate::Source`]'s `dir`, [`crate::workspace::Workspace`]).
    Pve,
    /// A simulator started in this process for each cluster (feature `sim`). When the
    /// cluster's credentials resolve (environment or SOPS), the simulator accepts exactly them,
    /// so the whole credential path is exercised; otherwise it makes up a token of its own.
    #[cfg(feature = "sim")]
    Sim {
        /// Where each cluster's simulated state is kept between runs (`None`: in memory only).
        state_file: Option<PathBuf>,
        /// Task run times (short for demos and tests).
        task_time: Duration,
    },
}

/// Why a cluster could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The cluster config is missing or unusable.
    #[error("cluster `{0}` has no usable `pve.clusters` entry")]
    NoConfig(String),
    /// No token in the environment, the secrets file or the config files.
    #[error("no API token for cluster `{cluster}`: set {} or {}, or give the cluster a `secrets-file` and a `secrets.pve` mapping (token-id, token)", vars[0], vars[1])]
    NoToken {
        /// The cluster.
        cluster: String,
        /// The variables looked at.
        vars: [String; 2],
    },
    /// Ticket auth without a password.
    #[error(
        "no password for cluster `{cluster}` (`pve.auth: ticket`): set {} or PROXOPS_PVE_PASSWORD, or map `secrets.pve.password` to a key of the cluster's SOPS file",
        cluster_variable("PROXOPS_PVE_PASSWORD", cluster)
    )]
    NoPassword {
        /// The cluster.
        cluster: String,
    },
    /// The client could not be built (bad token form, CA file, fingerprint).
    #[error("cannot connect to cluster `{0}`: {1}")]
    Client(String, #[source] PveError),
    /// The secrets file could not be decrypted or lacks a mapped key.
    #[error("cluster `{0}`: {1}")]
    Secrets(String, String),
    /// The simulator did not start.
    #[cfg(feature = "sim")]
    #[error("cannot start the simulator for cluster `{0}`: {1}")]
    Sim(String, #[source] SimError),
}

/// A client for one cluster, and the simulator behind it if there is one.
#[non_exhaustive]
pub struct Connection {
    /// The API client.
    pub client: PveClient,
    /// The simulator serving it (dropped with the connection; shut it down for a clean stop).
    #[cfg(feature = "sim")]
    pub sim: Option<SimHandle>,
    /// Warnings about the connection (insecure TLS); repeated on every connection, so on every
    /// cycle of a loop that connects per cycle.
    pub warnings: Vec<String>,
    /// The cluster's effective settings.
    pub settings: ClusterSettings,
    /// The cluster's decrypted SOPS secrets (for cloud-init references).
    pub secrets: ClusterSecrets,
}

impl Connection {
    /// Planner options for the cluster: its node allowlist, its effective prune budget and its
    /// secrets.
    pub fn plan_options(&self, cluster: &Cluster) -> PlanOptions {
        PlanOptions {
            secrets: Some(self.secrets.clone()),
            ..plan_options(cluster, Some(self.settings.prune_budget.value))
        }
    }

    /// Executor options with the cluster's task timeout when a config or flag sets one (else the
    /// per-task-type defaults of [`proxops_pve::WaitOptions::for_task`]).
    pub fn exec_options(&self) -> ExecOptions {
        let timeout = &self.settings.task_timeout;
        ExecOptions {
            wait: (timeout.origin != Origin::Default)
                .then(|| WaitOptions::default().timeout(timeout.value)),
            ..ExecOptions::default()
        }
    }
}

/// Connects to one cluster with settings from its own config and the environment only (no
/// `proxops.yaml`, no flags, no SOPS file); [`connect_with`] takes the repository directory
/// whose secrets files it reads.
pub async fn connect(
    registry: &Registry,
    cluster: &Cluster,
    backend: &Backend,
) -> Result<Connection, ConnectError> {
    let settings = settings_for(None, cluster, &FlagSettings::default(), LogLevel::Warn);
    connect_with(registry, cluster, backend, settings, None).await
}

/// Connects to one cluster with its effective `settings`; the SOPS secrets file is read under
/// `repo` (`None`: no secrets).
pub async fn connect_with(
    registry: &Registry,
    cluster: &Cluster,
    backend: &Backend,
    settings: ClusterSettings,
    repo: Option<&Path>,
) -> Result<Connection, ConnectError> {
    let name = &cluster.name;
    let secrets = ClusterSecrets::load(repo, cluster);
    // Only the simulator seeds itself from the manifests' kinds.
    #[cfg(not(feature = "sim"))]
    let _ = registry;
    match backend {
        #[cfg(feature = "sim")]
        Backend::Sim {
            state_file,
            task_time,
        } => {
            sim::connect(
                registry,
                cluster,
                state_file.as_deref(),
                *task_time,
                settings,
                secrets,
                repo,
            )
            .await
        }
        Backend::Pve => {
            let entry = cluster
                .entry
                .as_ref()
                .ok_or_else(|| ConnectError::NoConfig(name.clone()))?;
            let credentials = credentials_from(&settings, &secrets)?;
            let mut warnings = Vec::new();
            let tls = match &settings.tls.value {
                Tls::Fingerprint(fp) => TlsVerification::Fingerprint(
                    fp.parse()
                        .map_err(|e| ConnectError::Client(name.clone(), e))?,
                ),
                Tls::CaFile(ca) => TlsVerification::CaFile(ca_path(repo, cluster, ca, &settings)),
                Tls::Insecure => {
                    warnings.push(format!(
                        "cluster `{name}`: TLS certificate verification is off (`insecure: true`); pin the node certificate with `fingerprint:` instead"
                    ));
                    TlsVerification::Insecure
                }
                Tls::System => TlsVerification::System,
            };
            tracing::debug!(cluster = %name, tls = %settings.tls.value, auth = ?settings.credentials.auth.value, "connecting");
            let client = PveClient::builder(entry.base_url.clone(), credentials)
                .tls(tls)
                .build()
                .map_err(|e| ConnectError::Client(name.clone(), e))?;
            Ok(Connection {
                client,
                #[cfg(feature = "sim")]
                sim: None,
                warnings,
                settings,
                secrets,
            })
        }
    }
}

/// A relative CA file is relative to the config file that names it.
fn ca_path(
    repo: Option<&Path>,
    cluster: &Cluster,
    ca: &str,
    settings: &ClusterSettings,
) -> PathBuf {
    let path = PathBuf::from(ca);
    match (repo, &settings.tls.origin) {
        (Some(repo), Origin::ClusterConfig(_)) if path.is_relative() => {
            repo.join("clusters").join(&cluster.name).join(path)
        }
        (Some(repo), Origin::RepositoryConfig) if path.is_relative() => repo.join(path),
        _ => path,
    }
}

/// A cluster's credentials from the environment alone and its SOPS file under `repo`, with
/// settings from its own config (see [`credentials_from`]).
pub fn credentials(cluster: &Cluster, repo: Option<&Path>) -> Result<Credentials, ConnectError> {
    let settings = settings_for(None, cluster, &FlagSettings::default(), LogLevel::Warn);
    credentials_from(&settings, &ClusterSecrets::load(repo, cluster))
}

/// The credentials the effective settings name: each field from the environment, the decrypted
/// SOPS document or a config file, as [`proxops_model::settings`] layered them.
pub fn credentials_from(
    settings: &ClusterSettings,
    secrets: &ClusterSecrets,
) -> Result<Credentials, ConnectError> {
    let name = &settings.cluster;
    let c = &settings.credentials;
    let fetch = |field: &Option<Credential>| -> Result<Option<Secret>, ConnectError> {
        let Some(field) = field else { return Ok(None) };
        if let Some(v) = field.value() {
            return Ok(Some(Secret::new(v)));
        }
        let Origin::Sops { key, .. } = &field.origin else {
            return Ok(None);
        };
        let document = secrets
            .document()
            .map_err(|e| ConnectError::Secrets(name.clone(), e))?;
        // One key at a time through the mapping API: it names the key, never the value.
        let found = document
            .credentials(&SecretKeys {
                pve_token: Some(key.clone()),
                ..SecretKeys::default()
            })
            .map_err(|e| ConnectError::Secrets(name.clone(), e.to_string()))?;
        Ok(found.pve_token)
    };
    let user = fetch(&c.user)?
        .map(|u| u.expose().to_owned())
        .unwrap_or_else(|| "root@pam".into());
    match c.auth.value {
        AuthMethod::Ticket => match fetch(&c.password)? {
            Some(password) => Ok(Credentials::password(user, password)),
            None => Err(ConnectError::NoPassword {
                cluster: name.clone(),
            }),
        },
        AuthMethod::Token => {
            if let Some(token) = fetch(&c.token_value)? {
                return Credentials::parse_token(token.expose())
                    .map_err(|e| ConnectError::Client(name.clone(), e));
            }
            match (fetch(&c.token_id)?, fetch(&c.token)?) {
                // The decrypted secret passes to the client as it is: one Secret type throughout.
                (Some(id), Some(token)) => {
                    Ok(Credentials::token(format!("{user}!{}", id.expose()), token))
                }
                _ => Err(ConnectError::NoToken {
                    cluster: name.clone(),
                    vars: token_variables(name),
                }),
            }
        }
    }
}

/// The simulator state file of `cluster` for the file name `file`: `name.<cluster>.ext`,
/// always, so a cluster's state is found under the same name whichever clusters a run selects.
pub fn per_cluster_state_file(file: &Path, cluster: &str) -> PathBuf {
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
