//! Configuration layering: one pure function, [`effective`], that merges built-in defaults,
//! `proxops.yaml`, a cluster's `config.yaml`, command-line flags and the environment into a
//! cluster's [`ClusterSettings`], each value with the [`Origin`] it came from.
//!
//! Lowest to highest: defaults < `proxops.yaml` < `clusters/<c>/config.yaml` < flags <
//! environment. The environment carries credentials only:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `PROXOPS_PVE_TOKEN_<C>`, `PROXOPS_PVE_TOKEN` | a whole API token `user@realm!id=secret` (token auth) |
//! | `PROXOPS_PVE_USER_<C>`, `PROXOPS_PVE_USER` | the PVE user (ticket auth, or with a SOPS token) |
//! | `PROXOPS_PVE_PASSWORD_<C>`, `PROXOPS_PVE_PASSWORD` | the password (ticket auth) |
//!
//! `<C>` is the cluster name in upper case with `-` as `_`; the per-cluster variable wins. A
//! credential from the environment wins over the cluster's SOPS secrets, which win over
//! bootstrap values in the YAML files. SOPS values are never read here (no I/O): a credential
//! held in SOPS is returned as its [`Origin::Sops`] location, for the engine to decrypt.
//! Log level, listen address and data directory are process-wide: only defaults,
//! `proxops.yaml` and flags set them.

pub mod agent;

use crate::config::{AuthMethod, ClusterEntry, ConfigFile, LogLevel};
use std::fmt;
use std::time::Duration;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// ProxOps's built-in default.
    Default,
    /// The repository's `proxops.yaml`.
    RepositoryConfig,
    /// The cluster's config file (`clusters/<c>/config.yaml`).
    ClusterConfig(String),
    /// A command-line flag (`--log-level`).
    Flag(String),
    /// An environment variable.
    Env(String),
    /// A key of the `secrets:` map of the cluster's SOPS file.
    Sops {
        /// The SOPS file, relative to the repository.
        file: String,
        /// The key in its `secrets:` map.
        key: String,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::RepositoryConfig => f.write_str("proxops.yaml"),
            Origin::ClusterConfig(path) => f.write_str(path),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Sops { file, key } => write!(f, "SOPS key {key} of {file}"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Its layer.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    fn new(value: T, origin: Origin) -> Self {
        Sourced { value, origin }
    }
}

/// One credential: where it is and, unless it is held in SOPS, its value.
///
/// `Debug` never shows the value of a secret one (token secret, password, whole token).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// Where it is.
    pub origin: Origin,
    value: Option<String>,
    secret: bool,
}

impl Credential {
    /// The value, unless it is in SOPS (then the engine decrypts it from [`Credential::origin`]).
    /// Callers must never print the value of a [`Credential::is_secret`] credential.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// Whether the value is secret (a token secret, a password or a whole token).
    pub fn is_secret(&self) -> bool {
        self.secret
    }

    /// How the setting is shown: the value of a plain credential, `set` for a secret one, with
    /// its origin (`set (from env PROXOPS_PVE_TOKEN)`).
    pub fn describe(&self) -> String {
        match (&self.value, self.secret) {
            (Some(v), false) => format!("{v} (from {})", self.origin),
            _ => format!("set (from {})", self.origin),
        }
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = match (&self.value, self.secret) {
            (None, _) => "<in SOPS>",
            (Some(_), true) => "[redacted]",
            (Some(v), false) => v.as_str(),
        };
        f.debug_struct("Credential")
            .field("origin", &self.origin)
            .field("value", &value)
            .finish()
    }
}

/// A cluster's effective PVE credentials (each field `None` when no layer sets it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSettings {
    /// `token` or `ticket`.
    pub auth: Sourced<AuthMethod>,
    /// A whole token `user@realm!id=secret` (token auth; then the fields below are unused).
    pub token_value: Option<Credential>,
    /// The PVE user (`root@pam`).
    pub user: Option<Credential>,
    /// The token id (the part after `!`; token auth).
    pub token_id: Option<Credential>,
    /// The token secret (token auth).
    pub token: Option<Credential>,
    /// The password (ticket auth).
    pub password: Option<Credential>,
}

/// How the endpoint's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// The system's trusted roots.
    System,
    /// A SHA-256 fingerprint pin of the leaf certificate.
    Fingerprint(String),
    /// A PEM CA bundle (a path as written in the config).
    CaFile(String),
    /// No verification (warned about on every cycle).
    Insecure,
}

impl fmt::Display for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tls::System => f.write_str("system roots"),
            Tls::Fingerprint(fp) => write!(f, "fingerprint {fp}"),
            Tls::CaFile(path) => write!(f, "ca-file {path}"),
            Tls::Insecure => f.write_str("insecure (no verification)"),
        }
    }
}

/// Everything ProxOps uses for one cluster, each value with its origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The cluster.
    pub cluster: String,
    /// Authentication.
    pub credentials: CredentialSettings,
    /// Certificate verification.
    pub tls: Sourced<Tls>,
    /// Most deletions per cycle (0: no limit).
    pub prune_budget: Sourced<u32>,
    /// Time between the agent's cycles.
    pub poll_interval: Sourced<Duration>,
    /// Longest wait for one PVE task.
    pub task_timeout: Sourced<Duration>,
    /// The log level (process-wide).
    pub log_level: Sourced<LogLevel>,
    /// The agent's HTTP address (process-wide).
    pub listen: Sourced<String>,
    /// Caches and clones (process-wide).
    pub data_dir: Sourced<String>,
}

/// Settings given on the command line (`None`: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagSettings {
    /// `--log-level`.
    pub log_level: Option<LogLevel>,
    /// A prune budget flag.
    pub prune_budget: Option<u32>,
    /// A poll interval flag.
    pub poll_interval: Option<Duration>,
    /// A task timeout flag.
    pub task_timeout: Option<Duration>,
    /// A listen address flag.
    pub listen: Option<String>,
    /// A data directory flag.
    pub data_dir: Option<String>,
}

/// The layers [`effective`] merges.
pub struct Layers<'a> {
    /// The cluster's name.
    pub cluster: &'a str,
    /// `proxops.yaml`, if present.
    pub repository: Option<&'a ConfigFile>,
    /// The cluster's `config.yaml`, if usable.
    pub cluster_config: Option<&'a ConfigFile>,
    /// Flags given.
    pub flags: &'a FlagSettings,
    /// The environment (a lookup, so that callers and tests choose what it holds).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The log level when no layer sets one (`warn` for interactive commands, `info` for the
    /// agent).
    pub default_log_level: LogLevel,
}

/// `BASE_<CLUSTER>`: the per-cluster variant of an environment variable (upper case, `-` as `_`).
pub fn cluster_variable(base: &str, cluster: &str) -> String {
    format!("{base}_{}", cluster.to_ascii_uppercase().replace('-', "_"))
}

/// The default prune budget.
pub const DEFAULT_PRUNE_BUDGET: u32 = 3;
/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9494";

/// The process-wide log level: flag > `proxops.yaml` > `default`.
pub fn log_level(
    repository: Option<&ConfigFile>,
    flags: &FlagSettings,
    default: LogLevel,
) -> Sourced<LogLevel> {
    if let Some(l) = flags.log_level {
        return Sourced::new(l, Origin::Flag("--log-level".into()));
    }
    match repository
        .and_then(|c| c.log.as_ref())
        .and_then(|l| l.level)
    {
        Some(l) => Sourced::new(l, Origin::RepositoryConfig),
        None => Sourced::new(default, Origin::Default),
    }
}

/// `log.level` of a `proxops.yaml` text, if the file decodes (the loader reports it otherwise):
/// for setting up logging before the repository is loaded.
pub fn configured_log_level(text: &str) -> Option<LogLevel> {
    let docs = crate::yaml::parse_documents(text).ok()?;
    let doc = docs.into_iter().find(|d| !d.is_null())?;
    let sink = crate::de::Sink::default();
    let registry = crate::Registry::builtin();
    let config: ConfigFile = crate::de::decode(&doc, &sink, registry.required())?;
    config.log?.level
}

/// Merges the layers into one cluster's effective settings.
pub fn effective(layers: &Layers<'_>) -> ClusterSettings {
    let cluster_origin = Origin::ClusterConfig(format!("clusters/{}/config.yaml", layers.cluster));
    // Highest first: the cluster's file, then proxops.yaml.
    let files: Vec<(&ConfigFile, Origin)> = [
        layers.cluster_config.map(|c| (c, cluster_origin.clone())),
        layers.repository.map(|c| (c, Origin::RepositoryConfig)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let from_files = |get: &dyn Fn(&ConfigFile) -> Option<String>| {
        files
            .iter()
            .find_map(|(c, o)| get(c).map(|v| (v, o.clone())))
    };
    let entry = layers
        .cluster_config
        .and_then(|c| c.pve.as_ref())
        .and_then(|p| p.clusters.get(layers.cluster));

    let tls = match entry {
        Some(e) if e.fingerprint.is_some() => Sourced::new(
            Tls::Fingerprint(e.fingerprint.clone().unwrap_or_default()),
            cluster_origin.clone(),
        ),
        Some(ClusterEntry {
            ca_file: Some(ca), ..
        }) => Sourced::new(Tls::CaFile(ca.clone()), cluster_origin.clone()),
        Some(e) if e.insecure == Some(true) => Sourced::new(Tls::Insecure, cluster_origin.clone()),
        _ => match from_files(&|c| c.pve.as_ref().and_then(|p| p.ca_file.clone())) {
            Some((ca, origin)) => Sourced::new(Tls::CaFile(ca), origin),
            None => Sourced::new(Tls::System, Origin::Default),
        },
    };

    let reconcile = |get: &dyn Fn(&crate::config::ReconcileConfig) -> Option<String>| {
        from_files(&|c| c.reconcile.as_ref().and_then(get))
    };
    let prune_budget = match layers.flags.prune_budget {
        Some(b) => Sourced::new(b, Origin::Flag("--prune-budget".into())),
        None => reconcile(&|r| r.prune_budget.map(|b| b.to_string()))
            .and_then(|(v, o)| v.parse().ok().map(|b| Sourced::new(b, o)))
            .unwrap_or_else(|| Sourced::new(DEFAULT_PRUNE_BUDGET, Origin::Default)),
    };
    // Durations were parsed when the files were decoded; one that does not parse was reported
    // by the loader, and the cluster is invalid then.
    let duration = |flag: Option<Duration>,
                    name: &str,
                    get: &dyn Fn(&crate::config::ReconcileConfig) -> Option<Duration>,
                    default: Duration| match flag {
        Some(d) => Sourced::new(d, Origin::Flag(name.into())),
        None => files
            .iter()
            .find_map(|(c, o)| {
                let d = c.reconcile.as_ref().and_then(get)?;
                Some(Sourced::new(d, o.clone()))
            })
            .unwrap_or_else(|| Sourced::new(default, Origin::Default)),
    };
    let poll_interval = duration(
        layers.flags.poll_interval,
        "--poll-interval",
        &|r| r.poll_interval.as_ref()?.value(),
        Duration::from_secs(30),
    );
    let task_timeout = duration(
        layers.flags.task_timeout,
        "--task-timeout",
        &|r| r.task_timeout.as_ref()?.value(),
        Duration::from_secs(30 * 60),
    );

    // Process-wide settings: flags, then proxops.yaml only.
    let repo = layers.repository;
    let listen = match &layers.flags.listen {
        Some(l) => Sourced::new(l.clone(), Origin::Flag("--listen".into())),
        None => match repo.and_then(|c| c.listen.clone()) {
            Some(l) => Sourced::new(l, Origin::RepositoryConfig),
            None => Sourced::new(DEFAULT_LISTEN.to_owned(), Origin::Default),
        },
    };
    let home = (layers.env)("HOME").filter(|h| !h.is_empty());
    let expand = |path: String| match (path.strip_prefix("~/"), &home) {
        (Some(rest), Some(home)) => format!("{}/{rest}", home.trim_end_matches('/')),
        _ => path,
    };
    let data_dir = match &layers.flags.data_dir {
        Some(d) => Sourced::new(expand(d.clone()), Origin::Flag("--data-dir".into())),
        None => match repo.and_then(|c| c.data_dir.clone()) {
            Some(d) => Sourced::new(expand(d), Origin::RepositoryConfig),
            None => Sourced::new(
                match &home {
                    Some(_) => expand("~/.local/share/proxops".into()),
                    None => "/tmp/proxops-data".into(),
                },
                Origin::Default,
            ),
        },
    };

    ClusterSettings {
        cluster: layers.cluster.to_owned(),
        credentials: credentials(layers, &files, entry),
        tls,
        prune_budget,
        poll_interval,
        task_timeout,
        log_level: log_level(repo, layers.flags, layers.default_log_level),
        listen,
        data_dir,
    }
}

/// The credential layers: environment > SOPS > cluster config > proxops.yaml > default.
fn credentials(
    layers: &Layers<'_>,
    files: &[(&ConfigFile, Origin)],
    entry: Option<&ClusterEntry>,
) -> CredentialSettings {
    let pve = |get: &dyn Fn(&crate::config::PveConfig) -> Option<String>| {
        files.iter().find_map(|(c, o)| {
            c.pve
                .as_ref()
                .and_then(get)
                .filter(|v| !v.is_empty())
                .map(|v| (v, o.clone()))
        })
    };
    let auth = match pve(&|p| {
        p.auth.map(|a| match a {
            AuthMethod::Token => "token".to_owned(),
            AuthMethod::Ticket => "ticket".to_owned(),
        })
    }) {
        Some((a, origin)) if a == "ticket" => Sourced::new(AuthMethod::Ticket, origin),
        Some((_, origin)) => Sourced::new(AuthMethod::Token, origin),
        None => Sourced::new(AuthMethod::Token, Origin::Default),
    };
    let env = |base: &str, secret: bool| {
        [cluster_variable(base, layers.cluster), base.to_owned()]
            .into_iter()
            .find_map(|var| {
                (layers.env)(&var)
                    .filter(|v| !v.is_empty())
                    .map(|v| Credential {
                        origin: Origin::Env(var),
                        value: Some(v),
                        secret,
                    })
            })
    };
    let mapping = entry
        .and_then(|e| e.secrets.as_ref())
        .and_then(|s| s.pve.as_ref());
    let file = entry
        .and_then(|e| e.secrets_file.as_deref())
        .map(|f| format!("clusters/{}/{}", layers.cluster, f.trim_start_matches("./")));
    let sops = |key: Option<&String>| {
        key.filter(|k| !k.is_empty()).map(|k| Credential {
            origin: Origin::Sops {
                file: file
                    .clone()
                    .unwrap_or_else(|| "(no secrets-file)".to_owned()),
                key: k.clone(),
            },
            value: None,
            secret: true,
        })
    };
    let yaml = |get: &dyn Fn(&crate::config::PveConfig) -> Option<String>, secret: bool| {
        pve(get).map(|(v, origin)| Credential {
            origin,
            value: Some(v),
            secret,
        })
    };
    let from_sops = mapping.is_some_and(|m| {
        [&m.user, &m.token_id, &m.token, &m.password]
            .iter()
            .any(|k| k.as_ref().is_some_and(|k| !k.is_empty()))
    });
    let user = env("PROXOPS_PVE_USER", false)
        .or_else(|| sops(mapping.and_then(|m| m.user.as_ref())))
        .or_else(|| yaml(&|p| p.user.clone(), false))
        .or(Some(Credential {
            origin: Origin::Default,
            value: Some("root@pam".into()),
            secret: false,
        }));
    let mut out = CredentialSettings {
        auth: auth.clone(),
        token_value: None,
        user,
        token_id: None,
        token: None,
        password: None,
    };
    match auth.value {
        AuthMethod::Ticket => {
            out.password = env("PROXOPS_PVE_PASSWORD", true)
                .or_else(|| sops(mapping.and_then(|m| m.password.as_ref())))
                .or_else(|| yaml(&|p| p.password.clone(), true));
        }
        AuthMethod::Token => {
            // A whole token: the environment, else `token-value` unless SOPS holds any PVE
            // credential of this cluster (SPEC.md section 2).
            out.token_value = env("PROXOPS_PVE_TOKEN", true).or_else(|| {
                (!from_sops)
                    .then(|| yaml(&|p| p.token_value.clone(), true))
                    .flatten()
            });
            if out.token_value.is_some() {
                out.user = None;
            } else {
                out.token_id = sops(mapping.and_then(|m| m.token_id.as_ref()))
                    .or_else(|| yaml(&|p| p.token_id.clone(), false));
                out.token = sops(mapping.and_then(|m| m.token.as_ref()))
                    .or_else(|| yaml(&|p| p.token.clone(), true));
            }
        }
    }
    out
}

impl ClusterSettings {
    /// One `(setting, value and origin)` pair per setting, in a fixed order, for display. Secret
    /// values never appear: only where they are set.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let c = &self.credentials;
        let auth = match c.auth.value {
            AuthMethod::Token => "token",
            AuthMethod::Ticket => "ticket",
        };
        let cred = |c: &Option<Credential>| {
            c.as_ref()
                .map_or_else(|| "not set".to_owned(), Credential::describe)
        };
        let mut out = vec![("pve.auth", format!("{auth} (from {})", c.auth.origin))];
        match (c.auth.value, &c.token_value) {
            (AuthMethod::Token, Some(t)) => out.push(("pve.token-value", t.describe())),
            (AuthMethod::Token, None) => {
                out.push(("pve.user", cred(&c.user)));
                out.push(("pve.token-id", cred(&c.token_id)));
                out.push(("pve.token", cred(&c.token)));
            }
            (AuthMethod::Ticket, _) => {
                out.push(("pve.user", cred(&c.user)));
                out.push(("pve.password", cred(&c.password)));
            }
        }
        let level = match self.log_level.value {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        out.extend([
            (
                "tls",
                format!("{} (from {})", self.tls.value, self.tls.origin),
            ),
            (
                "reconcile.prune-budget",
                format!(
                    "{} (from {})",
                    self.prune_budget.value, self.prune_budget.origin
                ),
            ),
            (
                "reconcile.poll-interval",
                format!(
                    "{}s (from {})",
                    self.poll_interval.value.as_secs_f64(),
                    self.poll_interval.origin
                ),
            ),
            (
                "reconcile.task-timeout",
                format!(
                    "{}s (from {})",
                    self.task_timeout.value.as_secs_f64(),
                    self.task_timeout.origin
                ),
            ),
            (
                "log.level",
                format!("{level} (from {})", self.log_level.origin),
            ),
            (
                "listen",
                format!("{} (from {})", self.listen.value, self.listen.origin),
            ),
            (
                "data-dir",
                format!("{} (from {})", self.data_dir.value, self.data_dir.origin),
            ),
        ]);
        out
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
