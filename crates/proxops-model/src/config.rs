//! Configuration shapes: the optional `proxops.yaml`, `clusters/<c>/config.yaml` and the
//! composition `clusters/<c>/resources.yaml` (SPEC.md sections 2-4). Only shapes and their
//! checks live here; [`crate::settings`] layers them with flags and the environment.

use crate::diagnostic::Code;
use crate::names::is_valid_node;
pub use crate::quantity::parse_duration;
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod build;
mod problem;
mod simulation;
mod url;
pub use problem::ConfigProblem;
use problem::{at, is_env_name};
pub use url::{mask_url_credentials, redact_url};

pub use simulation::{ContentType, SimPveVersion, SimStorage, SimulationConfig, StorageType};
mod notify;
mod typed;
pub use typed::{ConfigDuration, FromConfigText, Typed};

pub use notify::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_REMINDER, DEFAULT_WAIT_CYCLES, EventKind, Forge,
    NotifySeverity, ReceiverConfig, Reminder, SecretSource, SinkConfig, SinkKind, WebhooksConfig,
    check_sinks, mask_spans, plain_secret_spans,
};

/// A configuration file: `proxops.yaml`, or a cluster's `config.yaml` (which must declare exactly
/// one `pve.clusters` entry, named after its directory).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ConfigFile {
    /// Logging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogConfig>,
    /// PVE access and cluster endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve: Option<PveConfig>,
    /// Where the repository comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitConfig>,
    /// Reconcile loop settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<ReconcileConfig>,
    /// Address of the agent's HTTP endpoint (default `127.0.0.1:9494`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Directory for caches and the cloned repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
    /// The agent's control API (`proxops reconcile`, `suspend`, `resume`) and webhook
    /// receivers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentConfig>,
    /// Where the agent sends events and commit statuses (a cluster's entry may override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<SinkConfig>>,
}

/// The agent's control API: where its bearer token is. The token itself never sits in a
/// configuration file, which is often committed or world-readable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentConfig {
    /// A file holding the token (relative to the configuration file); surrounding whitespace
    /// is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// An environment variable holding the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// Signed webhook receivers: a push notice from a forge runs a pass at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhooks: Option<WebhooksConfig>,
}

/// Logging settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct LogConfig {
    /// `debug`, `info` (default), `warn` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevel>,
}

/// Log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Everything.
    Debug,
    /// Normal.
    Info,
    /// Warnings and errors.
    Warn,
    /// Errors only.
    Error,
}

/// PVE authentication methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// API token (`PVEAPIToken=user@realm!id=secret`).
    Token,
    /// User and password for a ticket.
    Ticket,
}

/// The `pve` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct PveConfig {
    /// Authentication method (`token` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMethod>,
    /// Bootstrap PVE user, e.g. `root@pam` (better: environment or SOPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Bootstrap token id (the part after `!`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    /// Bootstrap token secret (better: environment or SOPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A whole token `user@realm!id=secret` (better: environment or SOPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_value: Option<String>,
    /// Bootstrap password for ticket auth (better: environment or SOPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// A PEM CA bundle trusted for every cluster endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Cluster endpoints by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, ClusterEntry>,
}

/// One `pve.clusters.<name>` entry: a PVE cluster's endpoint, node allowlist and secrets.
///
/// `Debug` shows `base-url` with any credentials in it redacted ([`redact_url`]).
#[derive(Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ClusterEntry {
    /// The API endpoint, `https://host[:port]`; one endpoint reaches every node.
    pub base_url: String,
    /// The node allowlist: every node a manifest names must be here (empty: no check).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The SOPS file with this cluster's credentials, relative to the config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_file: Option<String>,
    /// Which keys of the decrypted SOPS `secrets:` map carry which credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<SecretsMapping>,
    /// SHA-256 fingerprint of the endpoint's certificate, `AA:BB:...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// A PEM CA bundle for this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Skip certificate verification (warns on every cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// This cluster's git planes: branch names and the change gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<PlanesConfig>,
    /// Which clusters may be promoted into this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<PromotionConfig>,
    /// What the agent does about drift: `correct` it (default) or only `report` it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftMode>,
    /// How the built-in simulator stands in for this cluster: the PVE release and the storages
    /// besides PVE's defaults (`--backend sim`, `proxops demo`, `proxops sim --seed-repo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<SimulationConfig>,
    /// This cluster's notification sinks, instead of the process-wide `notifications` (`[]`:
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<Vec<SinkConfig>>,
}

impl std::fmt::Debug for ClusterEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ClusterEntry {
            base_url,
            nodes,
            secrets_file,
            secrets,
            fingerprint,
            ca_file,
            insecure,
            planes,
            promotion,
            drift,
            simulation,
            notifications,
        } = self;
        f.debug_struct("ClusterEntry")
            .field("base_url", &redact_url(base_url))
            .field("nodes", nodes)
            .field("secrets_file", secrets_file)
            .field("secrets", secrets)
            .field("fingerprint", fingerprint)
            .field("ca_file", ca_file)
            .field("insecure", insecure)
            .field("planes", planes)
            .field("promotion", promotion)
            .field("drift", drift)
            .field("simulation", simulation)
            .field("notifications", notifications)
            .finish()
    }
}

/// A cluster's git planes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct PlanesConfig {
    /// The desired-plane branch (default `proxops/desired/<cluster>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
    /// The observed-plane branch (default `proxops/observed/<cluster>`); must differ from `desired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
    /// How desired changes are published: `none` (default) moves the desired branch;
    /// `pullRequest` publishes a candidate branch `proxops/candidates/<cluster>/<id>` to merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_gate: Option<ChangeGate>,
}

/// Change gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum ChangeGate {
    /// Publish to the live desired branch.
    #[default]
    #[serde(rename = "none")]
    None,
    /// Publish a candidate branch; only a merge makes it live.
    #[serde(rename = "pullRequest")]
    PullRequest,
}

/// Promotion into a cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct PromotionConfig {
    /// Clusters whose reconciled state may be promoted into this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_sources: Vec<String>,
    /// What a source resource must have for a promotion into this cluster: a current receipt
    /// (`reconciled`, the default), or at least the materialized payload of its current
    /// document (`materialized`). The target decides: it is the one taking the risk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_evidence: Option<PromotionEvidence>,
}

/// The evidence a promotion requires of each source resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PromotionEvidence {
    /// A current receipt: the source applied this very document.
    #[default]
    Reconciled,
    /// A current receipt, or the materialized payload of the current document (the PVE requests
    /// it makes are published, not yet applied).
    Materialized,
}

/// Drift handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DriftMode {
    /// Plan and apply whatever makes PVE match the repository.
    #[default]
    Correct,
    /// Plan and report drift; change nothing.
    Report,
}

/// Names of SOPS keys per credential.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct SecretsMapping {
    /// PVE credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve: Option<PveSecretKeys>,
    /// Git credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSecretKeys>,
}

/// SOPS key names of PVE credentials.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct PveSecretKeys {
    /// Key of the PVE user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Key of the token id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    /// Key of the token secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Key of the password (ticket auth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// SOPS key names of git credentials.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct GitSecretKeys {
    /// Key of the HTTPS token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The `git` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct GitConfig {
    /// A remote repository to clone and follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The branch (default `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// HTTPS token (better: environment or SOPS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A local work tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The `reconcile` section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ReconcileConfig {
    /// Time between cycles, e.g. `30s` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<ConfigDuration>,
    /// Longest wait for one PVE task, e.g. `30m` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_timeout: Option<ConfigDuration>,
    /// Most guests deleted per cycle and cluster (default 3; 0 = no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_budget: Option<u32>,
    /// Time between the agent's verifications (`proxops verify` of every cluster, between its
    /// passes: reads only, drift reported and kept until a cycle or verification finds the
    /// resource in sync), e.g. `15m`; none: the agent does not verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_interval: Option<ConfigDuration>,
}

impl ConfigFile {
    /// Checks of process-wide values that the types cannot express.
    pub fn check(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        if let Some(r) = &self.reconcile {
            for (key, value) in [
                ("poll-interval", &r.poll_interval),
                ("task-timeout", &r.task_timeout),
                ("verify-interval", &r.verify_interval),
            ] {
                if let Some(v) = value
                    && v.value().is_none()
                {
                    out.push(ConfigProblem {
                        code: Code::InvalidValue,
                        path: at(&["reconcile", key]),
                        message: format!("`{}` is not a positive duration", v.text()),
                        help: Some("e.g. `30s`, `5m`, `1h`".into()),
                    });
                }
            }
        }
        if let Some(listen) = &self.listen
            && listen.parse::<std::net::SocketAddr>().is_err()
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["listen"]),
                message: format!("`{listen}` is not an address and port"),
                help: Some("e.g. `127.0.0.1:9494`".into()),
            });
        }
        if let Some(a) = &self.agent {
            out.extend(a.check());
        }
        if let Some(sinks) = &self.notifications {
            out.extend(check_sinks(sinks, &at(&["notifications"])));
        }
        if let Some(g) = &self.git {
            if g.url.is_some() && g.path.is_some() {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path: at(&["git", "path"]),
                    message: "`git.url` and `git.path` cannot both be set".into(),
                    help: None,
                });
            }
            if g.branch.as_deref().is_some_and(|b| b.trim().is_empty()) {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path: at(&["git", "branch"]),
                    message: "`git.branch` must not be empty".into(),
                    help: None,
                });
            }
        }
        if let Some(p) = &self.pve
            && p.auth != Some(AuthMethod::Ticket)
            && p.password.as_deref().is_some_and(|s| !s.is_empty())
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["pve", "password"]),
                message: "`pve.password` is only used with `pve.auth: ticket`".into(),
                help: Some("remove the password, or set `pve.auth: ticket`".into()),
            });
        }
        out
    }
}

impl AgentConfig {
    fn check(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        if self.token_file.is_some() && self.token_env.is_some() {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["agent", "token-env"]),
                message: "`agent.token-file` and `agent.token-env` cannot both be set".into(),
                help: Some("keep one place for the token".into()),
            });
        }
        if self
            .token_file
            .as_deref()
            .is_some_and(|f| f.trim().is_empty())
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["agent", "token-file"]),
                message: "`agent.token-file` must not be empty".into(),
                help: Some("e.g. `/etc/proxops/agent.token`".into()),
            });
        }
        if let Some(var) = &self.token_env
            && !is_env_name(var)
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["agent", "token-env"]),
                message: format!("`{var}` is not an environment variable name"),
                help: Some("letters, digits and `_`, not starting with a digit, e.g. `PROXOPS_AGENT_TOKEN`".into()),
            });
        }
        if let Some(hooks) = &self.webhooks {
            out.extend(hooks.check(&at(&["agent", "webhooks"])));
        }
        out
    }
}

impl ClusterEntry {
    /// Checks of the entry's values; paths are relative to the entry.
    pub fn check(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        let shown = redact_url(&self.base_url);
        if shown != self.base_url {
            out.push(ConfigProblem {
                code: Code::CredentialsInUrl,
                path: at(&["base-url"]),
                message: format!("`{shown}` carries credentials in the URL"),
                help: Some(
                    "give only scheme, host and port, e.g. `https://pve.example.com:8006`; \
                     credentials belong in the environment (PROXOPS_PVE_TOKEN_<C>) or the \
                     cluster's SOPS file"
                        .into(),
                ),
            });
        } else if let Err(why) = check_base_url(&self.base_url) {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["base-url"]),
                message: format!("`{shown}` is not a usable base URL: {why}"),
                help: Some("e.g. `https://pve.example.com:8006`".into()),
            });
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let path = vec![PathSeg::from("nodes"), PathSeg::Index(i)];
            if !is_valid_node(node) {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path,
                    message: format!("`{node}` is not a valid PVE node name"),
                    help: None,
                });
            } else if self.nodes[..i].contains(node) {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path,
                    message: format!("node `{node}` is listed twice"),
                    help: None,
                });
            }
        }
        if self.secrets.is_some() && self.secrets_file.is_none() {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["secrets"]),
                message:
                    "`secrets` names SOPS keys, but there is no `secrets-file` to read them from"
                        .into(),
                help: Some("add `secrets-file: secrets.sops.yaml` (relative to this file)".into()),
            });
        }
        if let Some(fp) = &self.fingerprint {
            let ok = fp.split(':').count() == 32
                && fp
                    .split(':')
                    .all(|b| b.len() == 2 && b.bytes().all(|c| c.is_ascii_hexdigit()));
            if !ok {
                out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path: at(&["fingerprint"]),
                    message: "not a SHA-256 fingerprint".into(),
                    help: Some(
                        "32 hex bytes separated by colons, as `pvenode cert info` prints".into(),
                    ),
                });
            }
        }
        out.extend(self.check_planes());
        if let Some(sim) = &self.simulation {
            out.extend(sim.check(&self.nodes));
        }
        if let Some(sinks) = &self.notifications {
            out.extend(check_sinks(sinks, &at(&["notifications"])));
        }
        out
    }

    /// The plane branches must be valid branch names and differ (`refs/heads/x` and `x` are
    /// one branch), or the two planes would overwrite each other.
    fn check_planes(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        let Some(planes) = &self.planes else {
            return out;
        };
        let mut names = Vec::new();
        for (key, value) in [("desired", &planes.desired), ("observed", &planes.observed)] {
            let Some(name) = value else { continue };
            match branch_name(name) {
                Ok(short) => names.push((key, short)),
                Err(why) => out.push(ConfigProblem {
                    code: Code::InvalidValue,
                    path: at(&["planes", key]),
                    message: format!("`{name}` is not a usable branch name: {why}"),
                    help: Some("e.g. `proxops/desired/<cluster>`".into()),
                }),
            }
        }
        if let [(_, desired), (_, observed)] = names.as_slice()
            && desired == observed
        {
            out.push(ConfigProblem {
                code: Code::InvalidValue,
                path: at(&["planes", "observed"]),
                message: format!("the desired and observed planes are both on branch `{desired}`"),
                help: Some("give the observed plane its own branch".into()),
            });
        }
        out
    }
}

/// The short name of a branch given as `a/b` or `refs/heads/a/b`, checked against the rules
/// of `git check-ref-format` (the model does no git I/O, so they are restated here).
pub fn branch_name(name: &str) -> Result<&str, &'static str> {
    let short = match name.strip_prefix("refs/") {
        Some(rest) => rest
            .strip_prefix("heads/")
            .ok_or("only branches (refs/heads/...) can hold a plane")?,
        None => name,
    };
    if short.is_empty() {
        return Err("it is empty");
    }
    if short == "@" || short.contains("@{") {
        return Err("`@` alone and `@{` are reserved");
    }
    if short.contains("..") || short.contains("//") {
        return Err("`..` and `//` are not allowed");
    }
    if short.starts_with('/') || short.ends_with('/') || short.ends_with('.') {
        return Err("it cannot start or end with `/` or end with `.`");
    }
    if short
        .chars()
        .any(|c| c.is_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Err("spaces, control characters and `~ ^ : ? * [ \\` are not allowed");
    }
    if short
        .split('/')
        .any(|seg| seg.starts_with('.') || seg.ends_with(".lock"))
    {
        return Err("a component cannot start with `.` or end with `.lock`");
    }
    Ok(short)
}

fn check_base_url(url: &str) -> Result<(), &'static str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("the scheme must be https:// or http://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    if host.is_empty() {
        return Err("the host is missing");
    }
    if authority.contains(char::is_whitespace) || authority.contains('@') {
        return Err("the host part is malformed");
    }
    if let Some((_, port)) = authority.rsplit_once(':')
        && !authority.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Err("the port is not a number");
    }
    let path = &rest[authority.len()..];
    if !(path.is_empty() || path == "/") {
        return Err("give only scheme, host and port: ProxOps adds /api2/json itself");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plane_branches_must_be_valid_and_distinct() {
        let entry = |desired: &str, observed: &str| ClusterEntry {
            base_url: "https://pve.example:8006".into(),
            nodes: Vec::new(),
            secrets_file: None,
            secrets: None,
            fingerprint: None,
            ca_file: None,
            insecure: None,
            planes: Some(PlanesConfig {
                desired: Some(desired.into()),
                observed: Some(observed.into()),
                change_gate: None,
            }),
            promotion: None,
            drift: None,
            simulation: None,
            notifications: None,
        };
        assert!(entry("deploy/home", "observed/home").check().is_empty());
        let same = entry("deploy/home", "refs/heads/deploy/home").check();
        assert_eq!(same.len(), 1, "{same:?}");
        assert_eq!(same[0].path, at(&["planes", "observed"]));
        let bad = entry("a..b", "x.lock").check();
        assert_eq!(bad.len(), 2, "{bad:?}");
        for ok in ["a/b", "refs/heads/a/b", "proxops/desired/home"] {
            assert!(branch_name(ok).is_ok(), "{ok}");
        }
        for no in [
            "",
            "refs/tags/v1",
            "a b",
            "a:b",
            ".a",
            "a/",
            "a//b",
            "@",
            "a@{1}",
        ] {
            assert!(branch_name(no).is_err(), "{no}");
        }
    }

    #[test]
    fn the_agent_token_has_one_source_and_a_variable_name() {
        let agent = |file: Option<&str>, env: Option<&str>| ConfigFile {
            agent: Some(AgentConfig {
                token_file: file.map(str::to_owned),
                token_env: env.map(str::to_owned),
                webhooks: None,
            }),
            ..ConfigFile::default()
        };
        assert!(
            agent(Some("/etc/proxops/agent.token"), None)
                .check()
                .is_empty()
        );
        assert!(agent(None, Some("PROXOPS_AGENT_TOKEN")).check().is_empty());
        let both = agent(Some("t"), Some("T")).check();
        assert_eq!(both.len(), 1, "{both:?}");
        assert_eq!(both[0].path, at(&["agent", "token-env"]));
        for bad in ["1TOKEN", "MY-TOKEN", "", "A B"] {
            let p = agent(None, Some(bad)).check();
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
        }
        assert_eq!(agent(Some(" "), None).check().len(), 1);
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("30s"),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            parse_duration("1h30m"),
            Some(std::time::Duration::from_secs(5400))
        );
        assert_eq!(
            parse_duration("250ms"),
            Some(std::time::Duration::from_millis(250))
        );
        assert_eq!(parse_duration("30"), None);
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_duration("3d"), None);
    }

    #[test]
    fn credentials_in_urls_are_redacted() {
        let url = "https://root:hunter2@pve.example:8006";
        assert_eq!(redact_url(url), "https://***@pve.example:8006");
        assert_eq!(
            redact_url("https://pve.example:8006"),
            "https://pve.example:8006"
        );
        assert_eq!(redact_url("https://pve/a@b"), "https://pve/a@b");
        let text = format!("base-url: {url}\nother: \"http://u:p@x\"\n");
        let masked = mask_url_credentials(&text);
        assert_eq!(masked.len(), text.len());
        assert!(
            !masked.contains("hunter2") && !masked.contains("u:p"),
            "{masked}"
        );
        assert!(
            masked.contains("https://************@pve.example:8006"),
            "{masked}"
        );
        let entry = ClusterEntry {
            base_url: url.into(),
            nodes: Vec::new(),
            secrets_file: None,
            secrets: None,
            fingerprint: None,
            ca_file: None,
            insecure: None,
            planes: None,
            promotion: None,
            drift: None,
            simulation: None,
            notifications: None,
        };
        assert!(!format!("{entry:?}").contains("hunter2"));
        let problems = entry.check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].code, Code::CredentialsInUrl);
        assert!(!format!("{problems:?}").contains("hunter2"));
    }

    #[test]
    fn base_urls() {
        assert!(check_base_url("https://pve.example.invalid:8006").is_ok());
        assert!(check_base_url("https://[fd00::1]:8006").is_ok());
        assert!(check_base_url("ftp://x").is_err());
        assert!(check_base_url("https://:8006").is_err());
        assert!(check_base_url("https://pve:port").is_err());
        assert!(check_base_url("https://pve:8006/api2/json").is_err());
    }
}
