//! The ProxOps agent: the long-running service behind `proxops run`, which keeps every cluster
//! of a repository converged with the engine's
//! [`Reconciler`](proxops_engine::Reconciler). It uses only `proxops-engine`'s public API; a
//! tool that embeds the engine without a server does not depend on this crate.
//!
//! # The principal types, at the crate root
//!
//! - [`Agent`]: bound with [`Agent::bind`] from [`AgentOptions`] (the repository, a
//!   [`SourceLocation`]; the PVE API, an [`AgentBackend`]; the control API's [`ControlToken`];
//!   the webhook receivers, [`hooks::Receivers`]; the notification sinks,
//!   [`ConfiguredSinks`] sent as [`NotifyOptions`] say; a [`PassHook`] after every pass),
//!   then run with [`Agent::run`] until stopped; [`AgentError`] says why it cannot run.
//! - [`AgentStatus`]: what `/status` and the dashboard show, a [`ClusterState`] per cluster
//!   with its [`CycleRecord`]s ([`CycleResult`], [`ActionLine`]s, [`FieldChange`]s), the
//!   [`ResourceCheck`]s and [`VerifyRecord`]s of verifications, and the operator's
//!   [`Suspensions`].
//! - [`client::AgentClient`] ([`client::AgentClientError`]): the control API's client.
//! - [`metrics`]: the Prometheus metrics `/metrics` serves, with the `prometheus_client` they
//!   are registered with ([`Agent::register_metrics`]).
//!
//! Feature `sim` (off by default) adds [`AgentBackend`]'s simulator backend (the engine's
//! feature `sim`).
//!
//! # How it runs
//!
//! Every interval (with ±10% jitter, so that agents started together drift apart) an
//! [`Agent`] runs a pass: it brings the repository up to date ([`SourceLocation`]), loads and
//! validates it at that commit (unless the previous pass loaded the same commit: then its load
//! is reused), and runs one cycle per cluster, clusters in parallel (bounded) and isolated: an
//! invalid, unreachable or failing cluster ends its own cycle only.
//!
//! A cluster's cycle ([`cluster`]) takes the cluster's lease in the git store (so two agents,
//! or an agent and `proxops apply --planes`, never reconcile one cluster at once), publishes
//! the desired plane, plans, executes unless the cluster's `drift` mode is `report`, publishes
//! receipts and releases the lease. Suspended clusters and resources are left alone.
//!
//! Its HTTP endpoint ([`http`]) serves `/healthz`, `/readyz`, `/metrics` ([`metrics`]; a tool
//! embedding the agent registers the same metrics in its own registry with
//! [`Agent::register_metrics`]),
//! `/status` ([`AgentStatus`]) and a small control API that [`client::AgentClient`] speaks:
//! run a cluster's cycle now, suspend and resume; and signed webhook receivers ([`hooks`])
//! through which a forge's push notice runs a pass at once; and a web dashboard of the same
//! status at `/`, live through server-sent events. What cycles find is told to
//! notification sinks and posted as commit statuses ([`notify`]), off the reconcile path. A
//! stop signal starts no new action, waits for the ones in flight up to
//! [`AgentOptions::shutdown_timeout`], and gives back the leases.

pub mod auth;
pub mod client;
pub mod cluster;
mod dashboard;
pub mod hooks;
pub mod http;
mod load;
pub mod metrics;
pub mod notify;
pub mod source;
pub mod status;
mod verification;
mod waits;

pub use auth::ControlToken;
pub use notify::{ConfiguredSinks, NotifyOptions};
pub use source::SourceLocation;
pub use status::{
    ActionLine, AgentStatus, ClusterState, CycleRecord, CycleResult, FieldChange, ResourceCheck,
    Suspensions, VerifyRecord,
};

use load::LoadCache;
use metrics::Metrics;
use metrics::prometheus_client::registry::Registry as MetricRegistry;
use proxops_engine::workspace::Workspace;
use proxops_model::{Registry, Repository};
use proxops_store::documents::{hex, utc_timestamp};
use source::Fetched;
use status::SourceState;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

/// Where the agent's clusters' PVE API is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentBackend {
    /// Each cluster's `base-url`, with credentials from the environment or its SOPS file.
    Pve,
    /// A simulator per cluster and cycle, keeping its state in `state_file` between cycles
    /// (feature `sim`).
    #[cfg(feature = "sim")]
    Sim {
        /// The state file (several clusters: `name.<cluster>.ext`).
        state_file: Option<PathBuf>,
        /// How long simulated tasks take.
        task_time: Duration,
    },
}

/// How the agent runs. Build with [`AgentOptions::new`], then the `with_*` setters (or assign
/// the fields).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentOptions {
    /// The repository.
    pub source: SourceLocation,
    /// Where the agent keeps its clone of a remote repository and its suspensions.
    pub data_dir: PathBuf,
    /// Only these clusters (empty: every cluster).
    pub clusters: Vec<String>,
    /// Time between passes (default 30 s).
    pub interval: Duration,
    /// The HTTP endpoint's address (default `127.0.0.1:9494`).
    pub listen: SocketAddr,
    /// The PVE API.
    pub backend: AgentBackend,
    /// Clusters reconciled at once.
    pub parallel_clusters: usize,
    /// This agent's name in leases.
    pub holder: String,
    /// How long a lease lasts unless renewed (it is renewed every third of that).
    pub lease_ttl: Duration,
    /// How long a stop waits for actions in flight.
    pub shutdown_timeout: Duration,
    /// A pass running longer than this makes `/healthz` fail.
    pub stall_timeout: Duration,
    /// Stop after this many passes (`None`: run until stopped).
    pub max_passes: Option<u64>,
    /// The bearer token of the control API; without one the control routes refuse every
    /// request, and only a loopback address may be listened on.
    pub token: Option<ControlToken>,
    /// The webhook receivers (`None`: `/v1/hooks/...` answers 404).
    pub webhooks: Option<hooks::Receivers>,
    /// The sinks of the agent's own configuration file, which win over the repository's
    /// `proxops.yaml` (a cluster's entry still overrides both for that cluster).
    pub notifications: Option<notify::ConfiguredSinks>,
    /// How notifications are sent (queues, retries).
    pub notify: notify::NotifyOptions,
    /// Called after every pass, once the pass's memory is freed (`None`: nothing).
    pub after_pass: Option<PassHook>,
    /// Time between verifications of every cluster (`proxops verify`, between passes: reads
    /// only; `None`, the default: none). What they find stays in `/status`, the metrics and
    /// the dashboard until a verification or cycle finds the resource in sync.
    pub verify_interval: Option<Duration>,
}

/// A function the agent calls after every pass, off the async threads, when what the pass
/// held has been freed. The `proxops` binary hands the allocator's free pages back to the OS
/// there: a pass peaks at several times what the agent keeps between passes.
#[derive(Clone)]
pub struct PassHook(Arc<dyn Fn() + Send + Sync>);

impl PassHook {
    /// A hook calling `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> PassHook {
        PassHook(Arc::new(f))
    }
}

impl std::fmt::Debug for PassHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PassHook")
    }
}

impl AgentOptions {
    /// The defaults for a repository.
    pub fn new(source: SourceLocation, data_dir: PathBuf) -> AgentOptions {
        AgentOptions {
            source,
            data_dir,
            clusters: Vec::new(),
            interval: Duration::from_secs(30),
            listen: SocketAddr::from(([127, 0, 0, 1], 9494)),
            backend: AgentBackend::Pve,
            parallel_clusters: 4,
            holder: format!("agent@{}", proxops_store::lease::hostname()),
            lease_ttl: Duration::from_secs(120),
            shutdown_timeout: Duration::from_secs(300),
            stall_timeout: Duration::from_secs(900),
            max_passes: None,
            token: None,
            webhooks: None,
            notifications: None,
            notify: notify::NotifyOptions::default(),
            after_pass: None,
            verify_interval: None,
        }
    }

    /// Only these clusters (empty: every cluster).
    pub fn with_clusters(mut self, clusters: Vec<String>) -> Self {
        self.clusters = clusters;
        self
    }
    /// Sets the time between passes.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
    /// Sets the HTTP endpoint's address.
    pub fn with_listen(mut self, listen: SocketAddr) -> Self {
        self.listen = listen;
        self
    }
    /// Sets where the clusters' PVE API is.
    pub fn with_backend(mut self, backend: AgentBackend) -> Self {
        self.backend = backend;
        self
    }
    /// Sets how many clusters are reconciled at once (at least one).
    pub fn with_parallel_clusters(mut self, n: usize) -> Self {
        self.parallel_clusters = n.max(1);
        self
    }
    /// Sets the agent's name in leases.
    pub fn with_holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }
    /// Sets how long a lease lasts unless renewed.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }
    /// Sets how long a stop waits for actions in flight.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }
    /// Sets how long a pass may run before `/healthz` fails.
    pub fn with_stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = timeout;
        self
    }
    /// Stops after `passes` passes (`None`: runs until stopped).
    pub fn with_max_passes(mut self, passes: Option<u64>) -> Self {
        self.max_passes = passes;
        self
    }
    /// Sets the control API's bearer token.
    pub fn with_token(mut self, token: Option<ControlToken>) -> Self {
        self.token = token;
        self
    }
    /// Sets the webhook receivers.
    pub fn with_webhooks(mut self, webhooks: Option<hooks::Receivers>) -> Self {
        self.webhooks = webhooks;
        self
    }
    /// Sets the sinks of the agent's own configuration file.
    pub fn with_notifications(mut self, sinks: Option<notify::ConfiguredSinks>) -> Self {
        self.notifications = sinks;
        self
    }
    /// Sets how notifications are sent.
    pub fn with_notify(mut self, notify: notify::NotifyOptions) -> Self {
        self.notify = notify;
        self
    }
    /// Sets the function called after every pass.
    pub fn with_after_pass(mut self, hook: Option<PassHook>) -> Self {
        self.after_pass = hook;
        self
    }
    /// Sets the time between verifications (`None`: the agent does not verify).
    pub fn with_verify_interval(mut self, interval: Option<Duration>) -> Self {
        self.verify_interval = interval;
        self
    }
}

/// Why the agent cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The HTTP endpoint cannot listen.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why not.
        reason: String,
    },
    /// Listening beyond loopback without a token would let anyone who reaches the address read
    /// the agent's state and, were the control routes open, steer it.
    #[error(
        "refusing to listen on {addr} without a control token: give one with --token-file, \
         `agent.token-file`, `agent.token-env` or PROXOPS_AGENT_TOKEN, or listen on a loopback \
         address such as 127.0.0.1:9494"
    )]
    Unprotected {
        /// The address.
        addr: SocketAddr,
    },
    /// The data directory is unusable.
    #[error("data directory {path}: {reason}")]
    DataDir {
        /// The directory.
        path: String,
        /// Why.
        reason: String,
    },
    /// The repository could not be fetched or read (the pass is skipped, the agent goes on).
    #[error("repository: {0}")]
    Source(String),
    /// A webhook receiver's secret cannot be read.
    #[error("webhook receiver `{receiver}`: {reason}")]
    Webhook {
        /// The receiver.
        receiver: &'static str,
        /// Why.
        reason: String,
    },
    /// The notifications cannot be sent.
    #[error("{0}")]
    Notify(#[from] notify::NotifierError),
}

/// A request to run one cluster's cycle now.
pub(crate) struct Trigger {
    cluster: String,
    reply: oneshot::Sender<Option<ClusterState>>,
}

/// When passes ran, for `/healthz` and `/readyz`.
#[derive(Debug)]
pub(crate) struct Health {
    started: Instant,
    pass_started: Option<Instant>,
    last_pass_end: Option<Instant>,
    ready: bool,
    stopping: bool,
}

/// What the HTTP endpoint and the loop share.
pub(crate) struct Shared {
    status: Mutex<AgentStatus>,
    metrics: Metrics,
    /// What `/metrics` encodes: [`Metrics`] and the notifier's, under the prefix `proxops`.
    exposition: MetricRegistry,
    suspensions: Mutex<Suspensions>,
    health: Mutex<Health>,
    triggers: mpsc::Sender<Trigger>,
    options: Arc<AgentOptions>,
    guard: auth::Guard,
    /// Each cluster's resources (`Kind/name`) as the last loaded repository declares them;
    /// `None` until a pass loaded it.
    known: Mutex<Option<BTreeMap<String, BTreeSet<String>>>>,
    /// The webhook receivers' memory.
    hooks: Mutex<hooks::HookState>,
    /// Passes asked for by webhooks, run as soon as the loop is free.
    wanted: Mutex<Wanted>,
    wake: tokio::sync::Notify,
    notifier: Arc<notify::Notifier>,
    /// What the last loaded pass read, for the dashboard's graph and resource pages.
    view: Mutex<Option<Arc<dashboard::View>>>,
    /// Bumped whenever the status changes: the dashboard's live updates wait on it.
    changes: watch::Sender<u64>,
    /// Open live-update streams, bounded.
    streams: Arc<Semaphore>,
    /// Since when each consumer has waited.
    waits: Mutex<waits::WaitClock>,
    /// Migrations PVE refused, remembered across passes.
    refusals: proxops_engine::refusals::Refusals,
}

/// Passes asked for by webhooks and not yet run.
#[derive(Debug, Default)]
pub(crate) struct Wanted {
    /// A pass over every cluster.
    all: bool,
    /// Passes over these clusters.
    clusters: BTreeSet<String>,
}

impl Wanted {
    fn take(&mut self) -> Option<Option<BTreeSet<String>>> {
        let taken = std::mem::take(self);
        if taken.all {
            Some(None)
        } else if taken.clusters.is_empty() {
            None
        } else {
            Some(Some(taken.clusters))
        }
    }
}

/// Locks a mutex, recovering the data if a panicking holder poisoned it (the data is plain
/// status, always consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// Asks for a pass over `cluster` (`None`: every cluster, after a fetch) as soon as the loop
    /// is free; asks made meanwhile are run together.
    pub(crate) fn request_pass(&self, cluster: Option<String>) {
        let mut w = lock(&self.wanted);
        match cluster {
            None => w.all = true,
            Some(c) => {
                w.clusters.insert(c);
            }
        }
        drop(w);
        self.wake.notify_one();
    }

    /// Tells the dashboard's live updates that the status changed.
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn record(&self, outcome: &cluster::CycleOutcome, drift: proxops_model::config::DriftMode) {
        let mut status = lock(&self.status);
        let entry = entry_of(&mut status, &outcome.cluster);
        entry.cycles += 1;
        entry.drift = drift;
        if outcome.record.result.is_success() {
            entry.last_success = Some(outcome.record.finished.clone());
        }
        // Rows that did not change keep their allocations: a converged pass would otherwise
        // scatter 1,000 long-lived rows per cluster among the pass's freed memory, pinning
        // pages the allocator could hand back.
        if let Some(rows) = &outcome.resources {
            if entry.last_verify.is_some() {
                // What verifications found lasts until it is found in sync.
                let mut rows = rows.clone();
                verification::carry_over(&entry.resources, &mut rows, outcome);
                if entry.resources != rows {
                    entry.resources = rows;
                }
            } else if entry.resources != *rows {
                entry.resources = rows.clone();
            }
        }
        let drifted = entry.last_verify.is_some().then(|| entry.drifted());
        entry.last_cycle = Some(outcome.record.clone());
        drop(status);
        if let Some(n) = drifted {
            self.metrics.drifted(&outcome.cluster, n);
        }
        self.changed();
        let finished_unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs() as f64);
        let metrics = &self.metrics;
        metrics.cycle(
            &outcome.cluster,
            outcome.record.result,
            outcome.record.duration_seconds,
            finished_unix,
            outcome.plan.as_ref(),
            outcome.report.as_ref(),
        );
        if outcome.plan.is_some() {
            metrics.waits(&outcome.cluster, &outcome.record);
        }
        metrics.pve(&outcome.cluster, &outcome.requests, &outcome.latencies);
    }

    /// The status, with the current suspensions filled in.
    pub(crate) fn status(&self) -> AgentStatus {
        let suspensions = lock(&self.suspensions).clone();
        let mut status = lock(&self.status);
        fill_suspensions(&mut status, &suspensions);
        status.clone()
    }

    /// [`Shared::status`] as JSON, written from the shared status itself: `/status` is polled,
    /// and a copy of every cluster's resource rows per request is heap churn that nobody
    /// needs.
    pub(crate) fn status_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        // Suspensions first and apart: the control API locks them, then the status.
        let suspensions = lock(&self.suspensions).clone();
        let mut status = lock(&self.status);
        fill_suspensions(&mut status, &suspensions);
        serde_json::to_vec(&*status)
    }

    /// Whether the repository last loaded declares `cluster` and, if given, its `resource`
    /// (`Kind/name`), counting resources still being pruned (the planes' rows).
    pub(crate) fn declares(&self, cluster: &str, resource: Option<&str>) -> Declared {
        let known = lock(&self.known);
        let Some(known) = known.as_ref() else {
            return Declared::NotLoaded;
        };
        let Some(resources) = known.get(cluster) else {
            return Declared::NoCluster;
        };
        let Some(r) = resource else {
            return Declared::Yes;
        };
        let in_planes = || {
            lock(&self.status)
                .clusters
                .iter()
                .filter(|c| c.name == cluster)
                .flat_map(|c| &c.resources)
                .any(|row| r.split_once('/') == Some((row.kind.as_str(), row.name.as_str())))
        };
        if resources.contains(r) || in_planes() {
            Declared::Yes
        } else {
            Declared::NoResource
        }
    }

    pub(crate) fn cluster_state(&self, name: &str) -> Option<ClusterState> {
        self.status().clusters.into_iter().find(|c| c.name == name)
    }
}

/// The entry of cluster `name` in `status`, added (in name order) if it has none.
fn entry_of<'a>(status: &'a mut AgentStatus, name: &str) -> &'a mut ClusterState {
    let i = match status.clusters.iter().position(|c| c.name == name) {
        Some(i) => i,
        None => {
            status.clusters.push(ClusterState::new(name));
            status.clusters.sort_by(|a, b| a.name.cmp(&b.name));
            status
                .clusters
                .iter()
                .position(|c| c.name == name)
                .unwrap_or(0)
        }
    };
    &mut status.clusters[i]
}

/// Sets each cluster's suspensions in `status` to `suspensions` (they change outside passes,
/// through the control API).
fn fill_suspensions(status: &mut AgentStatus, suspensions: &Suspensions) {
    for c in &mut status.clusters {
        c.suspended = suspensions.clusters.contains(&c.name);
        c.suspended_resources = suspensions.resources_of(&c.name);
    }
}

/// The answer of [`Shared::declares`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// It is declared.
    Yes,
    /// No pass has loaded the repository yet.
    NotLoaded,
    /// No such cluster.
    NoCluster,
    /// The cluster has no such resource.
    NoResource,
}

/// What one pass works with.
pub struct Pass {
    fetched: Fetched,
    /// The repository at the fetched commit, shared with the agent's [`LoadCache`] while the
    /// commit stays the same.
    workspace: Arc<Workspace>,
    registry: Arc<Registry>,
    options: Arc<AgentOptions>,
    stop: watch::Receiver<bool>,
    suspensions: Suspensions,
    notifier: Arc<notify::Notifier>,
    refusals: proxops_engine::refusals::Refusals,
}

impl Pass {
    /// The repository the pass reconciles.
    fn repo(&self) -> &Repository {
        self.workspace.repo()
    }

    /// The errors that make `cluster` invalid, one line each.
    fn errors_of(&self, cluster: &str) -> Vec<String> {
        self.repo()
            .diagnostics
            .iter()
            .filter(|d| d.is_error() && d.cluster.as_deref().is_none_or(|c| c == cluster))
            .map(|d| match &d.file {
                Some(f) => format!("{f}: {} ({})", d.message, d.code),
                None => format!("{} ({})", d.message, d.code),
            })
            .collect()
    }
}

/// A bound, not yet running agent.
pub struct Agent {
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    triggers: mpsc::Receiver<Trigger>,
    registry: Arc<Registry>,
}

impl Agent {
    /// Binds the HTTP endpoint and reads the suspensions of the data directory. Refuses a
    /// non-loopback address when no token is configured ([`AgentError::Unprotected`]).
    pub async fn bind(options: AgentOptions) -> Result<Agent, AgentError> {
        if options.token.is_none() && !options.listen.ip().is_loopback() {
            return Err(AgentError::Unprotected {
                addr: options.listen,
            });
        }
        let suspensions =
            Suspensions::load(&options.data_dir).map_err(|e| AgentError::DataDir {
                path: options.data_dir.display().to_string(),
                reason: e.to_string(),
            })?;
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| AgentError::Listen {
                addr: options.listen,
                reason: e.to_string(),
            })?;
        let bound = listener.local_addr().unwrap_or(options.listen);
        let guard = auth::Guard::new(
            options.token.clone(),
            bound,
            &proxops_store::lease::hostname(),
        );
        let (tx, rx) = mpsc::channel(16);
        let notifier = Arc::new(notify::Notifier::new(
            &options.holder,
            options.notify.clone(),
        )?);
        if let Some(own) = &options.notifications {
            notifier.configure_own(own);
        }
        if let Some(warning) = options.source.credential_warning() {
            tracing::warn!("{warning}");
        }
        let hooks = hooks::HookState::following(&options.source, &options.data_dir);
        let metrics = Metrics::default();
        let mut exposition = MetricRegistry::default();
        register_all(&metrics, &notifier, &mut exposition);
        let options = Arc::new(options);
        let status = AgentStatus {
            api_version: proxops_model::report::REPORT_API_VERSION.to_owned(),
            kind: "AgentStatus".to_owned(),
            holder: options.holder.clone(),
            started: utc_timestamp(SystemTime::now()),
            interval_seconds: options.interval.as_secs_f64(),
            passes: 0,
            source: SourceState {
                location: options.source.to_string(),
                ..SourceState::default()
            },
            clusters: Vec::new(),
            vanished: Vec::new(),
        };
        Ok(Agent {
            shared: Arc::new(Shared {
                status: Mutex::new(status),
                metrics,
                exposition,
                suspensions: Mutex::new(suspensions),
                health: Mutex::new(Health {
                    started: Instant::now(),
                    pass_started: None,
                    last_pass_end: None,
                    ready: false,
                    stopping: false,
                }),
                triggers: tx,
                options,
                guard,
                known: Mutex::new(None),
                waits: Mutex::new(waits::WaitClock::default()),
                refusals: proxops_engine::refusals::Refusals::default(),
                hooks: Mutex::new(hooks),
                wanted: Mutex::new(Wanted::default()),
                wake: tokio::sync::Notify::new(),
                notifier,
                view: Mutex::new(None),
                changes: watch::channel(0).0,
                streams: Arc::new(Semaphore::new(dashboard::MAX_STREAMS)),
            }),
            listener,
            triggers: rx,
            registry: Arc::new(Registry::builtin()),
        })
    }

    /// Registers the agent's metrics in an embedding tool's `registry`, under the names that
    /// its `/metrics` serves (`proxops_passes_total`, `proxops_cycles_total`, ...; a
    /// `registry` with a prefix, such as one from
    /// [`Registry::sub_registry_with_prefix`](metrics::prometheus_client::registry::Registry::sub_registry_with_prefix),
    /// prefixes them further). The registered metrics are the agent's own, live: the tool's
    /// scrape shows what the agent counts, before and while it runs; `/metrics` keeps serving
    /// them too. Use the `prometheus_client` that [`metrics`] re-exports, so that the
    /// registry is of the same version.
    pub fn register_metrics(&self, registry: &mut MetricRegistry) {
        register_all(&self.shared.metrics, &self.shared.notifier, registry);
    }

    /// Where the HTTP endpoint listens.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Runs passes until `stop` turns true (or [`AgentOptions::max_passes`] ran); returns the
    /// status at the end.
    pub async fn run(self, mut stop: watch::Receiver<bool>) -> AgentStatus {
        let Agent {
            shared,
            listener,
            mut triggers,
            registry,
        } = self;
        let options = Arc::clone(&shared.options);
        let server = tokio::spawn(http::serve(listener, Arc::clone(&shared), stop.clone()));
        let mut jitter = Jitter::new();
        let mut cache = LoadCache::default();
        let mut next = tokio::time::Instant::now();
        let mut passes = 0u64;
        // Verifications run between passes, on the last pass's repository.
        let mut last: Option<Arc<Pass>> = None;
        let mut next_verify = options
            .verify_interval
            .map(|every| tokio::time::Instant::now() + every);
        loop {
            let verify_at = next_verify;
            // A timed pass, a control request for one cluster, webhooks' asks, or a
            // verification.
            let (only, trigger) = tokio::select! {
                _ = tokio::time::sleep_until(next) => (None, None),
                () = sleep_until_some(verify_at) => {
                    if let Some(pass) = &last {
                        let run = verification::run(&shared, pass);
                        with_shutdown_timeout(run, stop.clone(), Duration::ZERO).await;
                    }
                    next_verify = options
                        .verify_interval
                        .map(|every| tokio::time::Instant::now() + jitter.around(every));
                    if *stop.borrow() { break; }
                    continue;
                }
                Some(t) = triggers.recv() => (Some(BTreeSet::from([t.cluster.clone()])), Some(t)),
                () = shared.wake.notified() => match lock(&shared.wanted).take() {
                    Some(scope) => (scope, None),
                    None => continue,
                },
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() { break; }
                    continue;
                }
            };
            let full = only.is_none();
            let pass = run_pass(&shared, &registry, &mut cache, only.as_ref(), stop.clone());
            let finished = with_shutdown_timeout(
                async {
                    if let Some(pass) = pass.await {
                        last = Some(pass);
                    }
                },
                stop.clone(),
                options.shutdown_timeout,
            )
            .await;
            if let Some(hook) = options.after_pass.clone() {
                let _ = tokio::task::spawn_blocking(move || (hook.0)()).await;
            }
            if let Some(t) = trigger {
                let _ = t.reply.send(shared.cluster_state(&t.cluster));
            }
            if full {
                passes += 1;
                next = tokio::time::Instant::now() + jitter.around(options.interval);
            }
            if !finished {
                tracing::warn!("stopped before the actions in flight ended");
            }
            if *stop.borrow() || options.max_passes.is_some_and(|m| passes >= m) {
                break;
            }
        }
        // Leases of cycles a shutdown cut short were given back when those cycles were dropped.
        lock(&shared.health).stopping = true;
        shared.changed();
        server.abort();
        let _ = server.await;
        shared.notifier.close().await;
        tracing::info!("agent stopped");
        shared.status()
    }
}

/// Registers the agent's and the notifier's metrics in a sub-registry of `registry` prefixed
/// `proxops`.
fn register_all(metrics: &Metrics, notifier: &notify::Notifier, registry: &mut MetricRegistry) {
    let proxops = registry.sub_registry_with_prefix("proxops");
    metrics.register(proxops);
    notifier.register_metrics(proxops);
}

/// Sleeps until `at`, or forever when there is no `at`.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs `pass`; once `stop` turns true, gives it `timeout` more, then drops it. Returns whether
/// it ended by itself.
async fn with_shutdown_timeout(
    pass: impl std::future::Future<Output = ()>,
    mut stop: watch::Receiver<bool>,
    timeout: Duration,
) -> bool {
    let deadline = async {
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        tokio::time::sleep(timeout).await;
    };
    tokio::select! {
        () = pass => true,
        () = deadline => false,
    }
}

/// One pass over the clusters (or over `only`); what it worked with, when it loaded the
/// repository.
async fn run_pass(
    shared: &Arc<Shared>,
    registry: &Arc<Registry>,
    cache: &mut LoadCache,
    only: Option<&BTreeSet<String>>,
    stop: watch::Receiver<bool>,
) -> Option<Arc<Pass>> {
    let options = Arc::clone(&shared.options);
    {
        let mut h = lock(&shared.health);
        h.pass_started = Some(Instant::now());
    }
    shared.metrics.pass();
    let loaded = load::load(&options, registry, cache).await;
    let pass = match loaded {
        Ok(load::Source {
            fetched,
            workspace,
            loaded,
        }) => {
            let repo = workspace.repo();
            if loaded {
                shared.metrics.source_loaded();
            }
            let mut status = lock(&shared.status);
            status.passes += 1;
            status.source.revision = Some(hex(fetched.commit));
            status.source.fetched = Some(utc_timestamp(SystemTime::now()));
            status.source.error = None;
            for c in &repo.clusters {
                if !status.clusters.iter().any(|s| s.name == c.name) {
                    status.clusters.push(ClusterState::new(&c.name));
                }
            }
            status.clusters.sort_by(|a, b| a.name.cmp(&b.name));
            drop(status);
            // Both follow from the repository alone: rebuilt when it was (re)loaded.
            if loaded {
                *lock(&shared.known) = Some(
                    repo.clusters
                        .iter()
                        .map(|c| {
                            let keys = c.resources.iter().map(|r| r.key().to_string()).collect();
                            (c.name.clone(), keys)
                        })
                        .collect(),
                );
                lock(&shared.hooks).followed = followed(&options.source, repo);
            }
            *lock(&shared.view) = Some(Arc::new(dashboard::View {
                store: fetched.store.clone(),
                workspace: Arc::clone(&workspace),
            }));
            shared.changed();
            shared
                .notifier
                .configure(options.notifications.as_ref(), repo, workspace.dir());
            shared.notifier.source_read(&hex(fetched.commit));
            Arc::new(Pass {
                fetched,
                workspace,
                registry: Arc::clone(registry),
                options: Arc::clone(&options),
                stop,
                suspensions: lock(&shared.suspensions).clone(),
                notifier: Arc::clone(&shared.notifier),
                refusals: shared.refusals.clone(),
            })
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot read the repository; the pass is skipped");
            shared.metrics.source_failed();
            lock(&shared.status).source.error = Some(e.to_string());
            shared.notifier.source_failed(&e.to_string());
            end_pass(shared, false);
            return None;
        }
    };
    if options.clusters.is_empty() {
        let store = pass.fetched.store.clone();
        let known: Vec<String> = pass
            .repo()
            .clusters
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let vanished = tokio::task::spawn_blocking(move || {
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            proxops_engine::reconcile::vanished_clusters(&store, &known)
        })
        .await
        .unwrap_or_default();
        for v in &vanished {
            tracing::warn!(cluster = %v.cluster, "{v}");
        }
        lock(&shared.status).vanished = vanished.iter().map(ToString::to_string).collect();
    }
    let names: Vec<String> = pass
        .repo()
        .clusters
        .iter()
        .map(|c| c.name.clone())
        .filter(|n| only.is_none_or(|o| o.contains(n)))
        .collect();
    let limit = Arc::new(Semaphore::new(options.parallel_clusters.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for name in names {
        let (pass, limit) = (Arc::clone(&pass), Arc::clone(&limit));
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let drift = pass
                .repo()
                .cluster(&name)
                .and_then(|c| c.entry.as_ref())
                .and_then(|e| e.drift)
                .unwrap_or_default();
            (cluster::run_cycle(pass, name).await, drift)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((mut outcome, drift)) => {
                lock(&shared.waits).observe(pass.repo(), &mut outcome, SystemTime::now());
                shared.record(&outcome, drift);
                shared.notifier.cycle_ended(&outcome, drift);
            }
            Err(e) => tracing::error!(error = %e, "a cluster's cycle panicked"),
        }
    }
    end_pass(shared, true);
    Some(pass)
}

fn end_pass(shared: &Shared, loaded: bool) {
    let mut h = lock(&shared.health);
    h.pass_started = None;
    h.last_pass_end = Some(Instant::now());
    h.ready |= loaded;
}

/// What the webhook receivers act on: the followed branch, and the gated clusters' live
/// desired branches.
fn followed(source: &SourceLocation, repo: &Repository) -> hooks::Followed {
    let gated = repo
        .clusters
        .iter()
        .filter_map(|c| {
            let refs = proxops_store::PlaneRefs::from_config(&c.name, c.entry.as_ref()).ok()?;
            (refs.gate == proxops_model::config::ChangeGate::PullRequest)
                .then(|| (refs.desired_branch().to_owned(), c.name.clone()))
        })
        .collect();
    hooks::Followed {
        branch: match source {
            SourceLocation::Local(_) => None,
            SourceLocation::Remote { branch, .. } => Some(branch.clone()),
        },
        gated,
    }
}

/// ±10% jitter, so that agents started together spread apart (fastrand, seeded by fastrand
/// from the process's state; no cryptographic source is needed).
struct Jitter(fastrand::Rng);

impl Jitter {
    fn new() -> Jitter {
        Jitter(fastrand::Rng::new())
    }

    fn around(&mut self, interval: Duration) -> Duration {
        // A factor in [0.9, 1.1).
        interval.mul_f64(0.9 + self.0.f64() / 5.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let mut j = Jitter::new();
        let base = Duration::from_secs(30);
        for _ in 0..1000 {
            let d = j.around(base);
            assert!(
                d >= Duration::from_secs(27) && d < Duration::from_secs(33),
                "{d:?}"
            );
        }
    }
}
