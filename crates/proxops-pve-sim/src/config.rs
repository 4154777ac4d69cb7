//! How a simulator is started: [`SimConfig`] (listen address, initial [`State`], state file,
//! accepted [`ApiToken`]s and [`User`]s, [`AclEntry`]s, [`TaskDurations`], [`FaultConfig`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::error::SimError;
use crate::rng;
use crate::state::State;
use crate::version::PveVersion;

/// An API token `USER@REALM!TOKENID=SECRET`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    /// `USER@REALM!TOKENID`.
    pub id: String,
    /// The secret (PVE makes it a UUID).
    pub secret: String,
    /// Privilege separation (`pveum user token add --privsep`, PVE's default 1): the token holds
    /// what ACL entries grant the token itself, and of that only what its user holds too; without
    /// it the token holds exactly its user's privileges. The principal token ([`SimConfig::token`])
    /// ignores this: it holds every privilege.
    #[serde(default = "privsep_default")]
    pub privsep: bool,
}

fn privsep_default() -> bool {
    true
}

impl ApiToken {
    /// A privilege-separated token (PVE's default).
    pub fn new(id: impl Into<String>, secret: impl Into<String>) -> ApiToken {
        ApiToken {
            id: id.into(),
            secret: secret.into(),
            privsep: true,
        }
    }
}

impl std::fmt::Debug for ApiToken {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ApiToken {
    /// A fresh token `root@pam!proxops` with a random UUID secret.
    pub fn random() -> ApiToken {
        ApiToken {
            id: "root@pam!proxops".into(),
            secret: rng::uuid(),
            privsep: false,
        }
    }

    /// The user part (`root@pam`).
    pub fn user(&self) -> &str {
        self.id.split_once('!').map_or(self.id.as_str(), |(u, _)| u)
    }

    /// The value of the `Authorization` header: `PVEAPIToken=ID=SECRET`.
    pub fn header(&self) -> String {
        format!("PVEAPIToken={}={}", self.id, self.secret)
    }
}

impl std::fmt::Display for ApiToken {
    /// `USER@REALM!TOKENID=SECRET`, the form `proxops sim --token` takes and prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.id, self.secret)
    }
}

impl FromStr for ApiToken {
    type Err = SimError;

    fn from_str(s: &str) -> Result<ApiToken, SimError> {
        let bad = || SimError::Token(s.split('=').next().unwrap_or_default().to_string());
        let (id, secret) = s.split_once('=').ok_or_else(bad)?;
        let (user, name) = id.split_once('!').ok_or_else(bad)?;
        let (u, realm) = user.split_once('@').ok_or_else(bad)?;
        if u.is_empty() || realm.is_empty() || name.is_empty() || secret.is_empty() {
            return Err(bad());
        }
        Ok(ApiToken::new(id, secret))
    }
}

/// A user who can log in with a password (ticket auth).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// `user@realm`.
    pub userid: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("userid", &self.userid)
            .finish_non_exhaustive()
    }
}

/// Privileges of a principal (a user `root@pam` or a token `root@pam!ci`) on a path and below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclEntry {
    /// User or token id.
    pub principal: String,
    /// ACL path (`/`, `/vms/100`, `/storage/local`, `/nodes/pve1`).
    pub path: String,
    /// Privilege names (`VM.Allocate`, ...); `*` grants all.
    pub privs: Vec<String>,
    /// Whether the grant holds below `path` too (PVE's `propagate`, 1 unless set).
    #[serde(default = "propagates")]
    pub propagate: bool,
}

fn propagates() -> bool {
    true
}

/// `entries` with each grant to a token repeated for the token's user: what a
/// privilege-separated token needs to hold it, since PVE intersects a token's privileges with
/// its user's.
pub fn acl_with_token_users(entries: Vec<AclEntry>) -> Vec<AclEntry> {
    let mut out = entries.clone();
    for e in &entries {
        if let Some((user, _)) = e.principal.split_once('!') {
            let mirrored = AclEntry {
                principal: user.to_owned(),
                ..e.clone()
            };
            if !out.contains(&mirrored) {
                out.push(mirrored);
            }
        }
    }
    out
}

impl AclEntry {
    /// Every privilege on `/` for a principal.
    pub fn admin(principal: &str) -> AclEntry {
        AclEntry {
            principal: principal.into(),
            path: "/".into(),
            privs: vec!["*".into()],
            propagate: true,
        }
    }
}

/// pveproxy's limit on a proxied call: pve-http-server `src/PVE/APIServer/AnyEvent.pm`
/// `proxy_request` calls `http_request(... timeout => 30 ...)`. Every `protected` call (config
/// writes among them) goes through it, to pvedaemon (pve-manager `PVE/HTTPServer.pm`
/// `rest_handler`: `proxy => 'localhost'`), and so does every `proxyto` call for another node.
pub const PVE_PROXY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long PVE waits for a guest's config lock: pve-guest-common `PVE/AbstractConfig.pm`
/// `lock_config` calls `lock_config_full($vmid, 10, ...)`.
pub const PVE_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The simulator's time scale: a task at PVE speed is taken to last this long, so a task time
/// `d` runs the simulator `d / 10 s` times PVE's speed, and pveproxy's 30 s become `3 d`.
pub const PVE_TASK_TIME: Duration = Duration::from_secs(10);

/// How long a guest takes from its start until its QEMU guest agent answers `guest-ping` and
/// its DHCP lease is taken, at PVE speed. Not a PVE figure: a small Linux guest's boot to
/// `qemu-guest-agent.service`, taken as 30 s.
pub const PVE_AGENT_START: Duration = Duration::from_secs(30);

/// How long things take: tasks per type, the synchronous work inside a call, and pveproxy's
/// timeout, all on one time scale ([`PVE_TASK_TIME`]).
///
/// A synchronous call that allocates or imports storage (`PUT .../config` with `scsi1:
/// local-lvm:8`, `mp0: local-lvm:8,mp=/data` or `import-from=`) works for the sum of its
/// operations' [`TaskDurations::sync_of`] before it answers. When that exceeds `proxy_timeout`
/// the caller gets pveproxy's `596 Connection timed out` after `proxy_timeout`, while the work
/// goes on and its change lands when it is done, as pvedaemon finishes the request anyway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskDurations {
    /// Duration of any type not listed.
    pub default: Duration,
    /// Durations by task type (`qmclone`, `download`, ...).
    pub per_type: BTreeMap<String, Duration>,
    /// Synchronous work per operation: `alloc` (a new volume) and `import` (an `import-from`
    /// copy). Unlisted: `default`, the time of the task that would do the same work (POST
    /// config's `qmconfig` worker).
    #[serde(default)]
    pub sync_work: BTreeMap<String, Duration>,
    /// When the simulated pveproxy gives up on a synchronous call ([`PVE_PROXY_TIMEOUT`] on
    /// the simulator's time scale: [`TaskDurations::uniform`] makes it 3 × the task time).
    #[serde(default = "default_proxy_timeout")]
    pub proxy_timeout: Duration,
    /// How long a started guest runs before its guest agent answers (`QEMU guest agent is
    /// not running` until then) and its DHCP and SLAAC addresses appear, a container's too
    /// ([`PVE_AGENT_START`] on the simulator's scale).
    #[serde(default = "default_agent_start")]
    pub agent_start: Duration,
}

fn default_proxy_timeout() -> Duration {
    scaled(PVE_PROXY_TIMEOUT, Duration::from_millis(200))
}

fn default_agent_start() -> Duration {
    scaled(PVE_AGENT_START, Duration::from_millis(200))
}

/// A PVE-speed duration on the time scale where a task takes `task`.
fn scaled(at_pve_speed: Duration, task: Duration) -> Duration {
    at_pve_speed.mul_f64(task.as_secs_f64() / PVE_TASK_TIME.as_secs_f64())
}

impl Default for TaskDurations {
    fn default() -> Self {
        TaskDurations::uniform(Duration::from_millis(200))
    }
}

impl TaskDurations {
    /// Every task type takes the same time; synchronous work and pveproxy's timeout follow on
    /// the same scale.
    pub fn uniform(d: Duration) -> TaskDurations {
        TaskDurations {
            default: d,
            per_type: BTreeMap::new(),
            sync_work: BTreeMap::new(),
            proxy_timeout: scaled(PVE_PROXY_TIMEOUT, d),
            agent_start: scaled(PVE_AGENT_START, d),
        }
    }

    /// The duration of a task type.
    pub fn of(&self, kind: &str) -> Duration {
        self.per_type.get(kind).copied().unwrap_or(self.default)
    }

    /// The synchronous work of one operation (`alloc`, `import`).
    pub fn sync_of(&self, op: &str) -> Duration {
        self.sync_work.get(op).copied().unwrap_or(self.default)
    }

    /// A PVE-speed time on the simulator's scale, which `proxy_timeout` sets (30 s at PVE
    /// speed): `background_delay` seconds, the config lock's wait.
    pub fn scaled(&self, at_pve_speed: Duration) -> Duration {
        self.proxy_timeout
            .mul_f64(at_pve_speed.as_secs_f64() / PVE_PROXY_TIMEOUT.as_secs_f64())
    }

    /// Sets [`TaskDurations::agent_start`]: how long a started guest runs before its agent
    /// answers and its DHCP addresses appear.
    pub fn with_agent_start(mut self, agent_start: Duration) -> TaskDurations {
        self.agent_start = agent_start;
        self
    }

    /// How long a config write waits for the guest's config lock: PVE's 10 s on the
    /// simulator's scale.
    pub fn lock_timeout(&self) -> Duration {
        self.scaled(PVE_LOCK_TIMEOUT)
    }
}

/// A class of endpoints that a fault rate applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EndpointClass {
    /// GET requests except task polling.
    Read,
    /// POST, PUT and DELETE requests except login.
    Write,
    /// Task status, log and list.
    Task,
    /// `POST /access/ticket`.
    Auth,
}

/// Seeded, reproducible fault injection. Each decision is a reproducible draw seeded by
/// (seed, fault kind, method, path template, the request's number for that template), so a
/// sequence of requests meets the same faults on every run whatever else runs concurrently.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct FaultConfig {
    /// The seed.
    pub seed: u64,
    /// Probability of a 500 per endpoint class.
    pub error_rate: BTreeMap<EndpointClass, f64>,
    /// Added latency: each request waits a uniform draw in `[min, max]`.
    pub latency: Option<(Duration, Duration)>,
    /// Probability that a task ends with an error.
    pub task_failure_rate: f64,
    /// Tasks that always fail, as `TYPE` or `TYPE:ID` (`download:debian.iso`, `qmclone:101`).
    pub failing_tasks: Vec<String>,
    /// Probability that a guest mutation meets a lock (`VM is locked (backup)` or a file-lock timeout).
    pub lock_contention_rate: f64,
    /// Probability that the connection is closed without a response.
    pub reset_rate: f64,
    /// Probability of a 595/596 proxy error (as when pveproxy cannot reach another node).
    pub proxy_error_rate: f64,
}

impl FaultConfig {
    /// Sets [`FaultConfig::seed`]: the seed.
    pub fn with_seed(mut self, seed: u64) -> FaultConfig {
        self.seed = seed;
        self
    }

    /// Sets [`FaultConfig::error_rate`]: probability of a 500 per endpoint class.
    pub fn with_error_rate(mut self, error_rate: BTreeMap<EndpointClass, f64>) -> FaultConfig {
        self.error_rate = error_rate;
        self
    }

    /// Sets [`FaultConfig::latency`]: added latency: each request waits a uniform draw in
    /// `[min, max]`.
    pub fn with_latency(mut self, latency: Option<(Duration, Duration)>) -> FaultConfig {
        self.latency = latency;
        self
    }

    /// Sets [`FaultConfig::task_failure_rate`]: probability that a task ends with an error.
    pub fn with_task_failure_rate(mut self, task_failure_rate: f64) -> FaultConfig {
        self.task_failure_rate = task_failure_rate;
        self
    }

    /// Sets [`FaultConfig::failing_tasks`]: tasks that always fail, as `TYPE` or `TYPE:ID`
    /// (`download:debian.iso`, `qmclone:101`).
    pub fn with_failing_tasks(mut self, failing_tasks: Vec<String>) -> FaultConfig {
        self.failing_tasks = failing_tasks;
        self
    }

    /// Sets [`FaultConfig::lock_contention_rate`]: probability that a guest mutation meets a
    /// lock (`VM is locked (backup)` or a file-lock timeout).
    pub fn with_lock_contention_rate(mut self, lock_contention_rate: f64) -> FaultConfig {
        self.lock_contention_rate = lock_contention_rate;
        self
    }

    /// Sets [`FaultConfig::reset_rate`]: probability that the connection is closed without a
    /// response.
    pub fn with_reset_rate(mut self, reset_rate: f64) -> FaultConfig {
        self.reset_rate = reset_rate;
        self
    }

    /// Sets [`FaultConfig::proxy_error_rate`]: probability of a 595/596 proxy error (as when
    /// pveproxy cannot reach another node).
    pub fn with_proxy_error_rate(mut self, proxy_error_rate: f64) -> FaultConfig {
        self.proxy_error_rate = proxy_error_rate;
        self
    }
}

impl FaultConfig {
    /// Whether any fault is enabled.
    pub fn any(&self) -> bool {
        self.error_rate.values().any(|r| *r > 0.0)
            || self.latency.is_some()
            || self.task_failure_rate > 0.0
            || !self.failing_tasks.is_empty()
            || self.lock_contention_rate > 0.0
            || self.reset_rate > 0.0
            || self.proxy_error_rate > 0.0
    }
}

/// pvestatd's refresh interval (pve-manager `PVE/Service/pvestatd.pm`: `$updatetime = 10`).
pub const DEFAULT_STATS_INTERVAL: Duration = Duration::from_secs(10);

/// Everything `start` needs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SimConfig {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// The PVE version answered as (default 9.1): `/version`, the parameter schema, the
    /// version's response fields and rules. It is written into the state.
    pub pve_version: PveVersion,
    /// The initial cluster state (a seed or a loaded dump).
    pub state: State,
    /// When set, the state is saved there after every change and at shutdown.
    pub state_file: Option<PathBuf>,
    /// The principal token: accepted with every privilege on `/`.
    pub token: ApiToken,
    /// Further tokens, privileged by `acl` only.
    pub extra_tokens: Vec<ApiToken>,
    /// Users for ticket login (`root@pam` gets every privilege).
    pub users: Vec<User>,
    /// ACL entries for non-root principals.
    pub acl: Vec<AclEntry>,
    /// Task run times.
    pub task_durations: TaskDurations,
    /// Fault injection.
    pub faults: FaultConfig,
    /// Names in the certificate besides `127.0.0.1` and `localhost`.
    pub cert_names: Vec<String>,
    /// download-url makes up the file instead of fetching the URL (no network: demos), logging
    /// that it did; checksums cannot be verified then and are reported as not checked.
    pub offline_downloads: bool,
    /// How often guest stats (`status`, `template`, `name`, `mem`, ... in `/cluster/resources`)
    /// are refreshed; PVE's pvestatd does it every 10 s. Zero: always current.
    pub stats_interval: Duration,
}

impl SimConfig {
    /// Sets [`SimConfig::listen`]: address to listen on (port 0 picks a free one).
    pub fn with_listen(mut self, listen: SocketAddr) -> SimConfig {
        self.listen = listen;
        self
    }

    /// Sets [`SimConfig::pve_version`]: the PVE version answered as (default 9.1): `/version`,
    /// the parameter schema, the version's response fields and rules. It is written into the
    /// state.
    pub fn with_pve_version(mut self, pve_version: PveVersion) -> SimConfig {
        self.pve_version = pve_version;
        self
    }

    /// Sets [`SimConfig::state`]: the initial cluster state (a seed or a loaded dump).
    pub fn with_state(mut self, state: State) -> SimConfig {
        self.state = state;
        self
    }

    /// Sets [`SimConfig::token`]: the principal token: accepted with every privilege on `/`.
    pub fn with_token(mut self, token: ApiToken) -> SimConfig {
        self.token = token;
        self
    }

    /// Sets [`SimConfig::extra_tokens`]: further tokens, privileged by `acl` only.
    pub fn with_extra_tokens(mut self, extra_tokens: Vec<ApiToken>) -> SimConfig {
        self.extra_tokens = extra_tokens;
        self
    }

    /// Sets [`SimConfig::users`]: users for ticket login (`root@pam` gets every privilege).
    pub fn with_users(mut self, users: Vec<User>) -> SimConfig {
        self.users = users;
        self
    }

    /// Sets [`SimConfig::acl`]: ACL entries for non-root principals.
    pub fn with_acl(mut self, acl: Vec<AclEntry>) -> SimConfig {
        self.acl = acl;
        self
    }

    /// Sets [`SimConfig::task_durations`]: task run times.
    pub fn with_task_durations(mut self, task_durations: TaskDurations) -> SimConfig {
        self.task_durations = task_durations;
        self
    }

    /// Sets [`SimConfig::faults`]: fault injection.
    pub fn with_faults(mut self, faults: FaultConfig) -> SimConfig {
        self.faults = faults;
        self
    }

    /// Sets [`SimConfig::cert_names`]: names in the certificate besides `127.0.0.1` and
    /// `localhost`.
    pub fn with_cert_names(mut self, cert_names: Vec<String>) -> SimConfig {
        self.cert_names = cert_names;
        self
    }

    /// Sets [`SimConfig::offline_downloads`]: download-url makes up the file instead of
    /// fetching the URL (no network: demos), logging that it did; checksums cannot be verified
    /// then and are reported as not checked.
    pub fn with_offline_downloads(mut self, offline_downloads: bool) -> SimConfig {
        self.offline_downloads = offline_downloads;
        self
    }

    /// Sets [`SimConfig::stats_interval`]: how often guest stats (`status`, `template`, `name`,
    /// `mem`, ... in `/cluster/resources`) are refreshed; PVE's pvestatd does it every 10 s.
    /// Zero: always current.
    pub fn with_stats_interval(mut self, stats_interval: Duration) -> SimConfig {
        self.stats_interval = stats_interval;
        self
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            pve_version: PveVersion::default(),
            state: State::demo(),
            state_file: None,
            token: ApiToken::random(),
            extra_tokens: Vec::new(),
            users: Vec::new(),
            acl: Vec::new(),
            task_durations: TaskDurations::default(),
            faults: FaultConfig::default(),
            cert_names: Vec::new(),
            offline_downloads: false,
            stats_interval: DEFAULT_STATS_INTERVAL,
        }
    }
}

impl SimConfig {
    /// A default configuration answering as `version`, with the demo cluster of that version
    /// ([`State::demo_of`]).
    pub fn of_version(version: PveVersion) -> SimConfig {
        SimConfig {
            pve_version: version,
            state: State::demo_of(version),
            ..SimConfig::default()
        }
    }

    /// Uses a state file: loads it when it exists (else keeps `state` as the seed), taking the
    /// PVE version it records, and saves every change to it. Set `pve_version` afterwards to
    /// serve the cluster as another version (an upgrade).
    pub fn with_state_file(mut self, path: impl Into<PathBuf>) -> Result<SimConfig, SimError> {
        let path = path.into();
        if path.exists() {
            self.state = State::load(&path)?;
            self.pve_version = self.state.pve_version;
        }
        self.state_file = Some(path);
        Ok(self)
    }
}
