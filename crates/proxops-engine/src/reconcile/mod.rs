//! [`Reconciler`]: the one reconcile cycle every writer runs (`apply`, `converge`, the agent).
//!
//! A cycle of one cluster: take the cluster's lease, publish the desired plane (through the
//! change gate; a gated change is proposed and the live desired head is what runs, loaded from
//! the source revision it pins), connect, then plan and execute up to
//! [`ReconcileOptions::max_cycles`] times, recording receipts after each, and give the lease
//! back. What the planner needs from the planes (the previous desired documents that prove which
//! keys ProxOps owned) is read here, so every writer plans with the same facts.
//!
//! The guarantees that span a command live here too: the prune budget bounds all cycles of one
//! run together, a plan that cannot make progress stops the run as [`RunResult::Stuck`] (never
//! "converged"), and a gated cluster whose live head does not say which source it was built from
//! is refused ([`RunError::UnknownLiveSource`]) rather than planned from the branch head.

pub(crate) mod previous;
mod run;

pub(crate) use previous::resource_of;
pub use previous::{Vanished, previous_and_receipted, previous_documents, vanished_clusters};

use crate::backend::{Backend, ConnectError};
use crate::desired::Drivers;
use crate::execute::{CycleReport, ProgressFn};
use crate::plan::ClusterPlan;
use crate::planes::{PublishedDesired, PublishedReceipts};
use crate::planner::PlanError;
use proxops_graph::Graph;
use proxops_model::config::{DriftMode, LogLevel};
use proxops_model::settings::FlagSettings;
use proxops_model::{Registry, Repository, ResourceKey};
use proxops_pve::Latency;
use proxops_store::{ObjectId, PlaneRefs, Store, StoreError};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Asked before a cycle executes a non-empty plan; `false` leaves the cluster as it is.
pub type ConfirmFn = Arc<dyn Fn(&ClusterPlan) -> bool + Send + Sync>;

/// Told what a cycle does as it does it (for a terminal or a log).
pub type EventFn = Arc<dyn Fn(&Event<'_>) + Send + Sync>;

/// A step of a run, as it happens.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The desired plane was published (or found unchanged, or a candidate was proposed).
    Desired {
        /// The cluster.
        cluster: &'a str,
        /// The cluster's plane refs.
        refs: &'a PlaneRefs,
        /// What the publication did.
        published: &'a PublishedDesired,
    },
    /// A gated cluster reconciles its live desired head, built from this older source.
    LiveHead {
        /// The cluster.
        cluster: &'a str,
        /// The source revision the live head pins.
        source_revision: ObjectId,
    },
    /// A cycle planned (numbered from 1).
    Planned {
        /// The cycle.
        cycle: usize,
        /// Its plan.
        plan: &'a ClusterPlan,
    },
    /// A cycle executed its plan.
    Executed {
        /// The cycle.
        cycle: usize,
        /// What happened.
        report: &'a CycleReport,
    },
    /// Receipts of a cycle were published.
    Receipts {
        /// The cluster.
        cluster: &'a str,
        /// The cluster's plane refs.
        refs: &'a PlaneRefs,
        /// What was published.
        published: &'a PublishedReceipts,
    },
    /// The cluster's lease was taken over from another holder, whose lease had expired or
    /// whose process on this host was gone.
    LeaseTakenOver {
        /// The cluster.
        cluster: &'a str,
        /// The lease replaced.
        from: &'a proxops_store::LeaseRecord,
    },
    /// The lease was lost during the run (broken, or taken over by another writer); a
    /// [`Event::Warning`] says so too.
    LeaseLost {
        /// The cluster.
        cluster: &'a str,
    },
    /// Something the operator should know (an insecure connection, no lease possible, ...).
    Warning {
        /// The cluster.
        cluster: &'a str,
        /// What.
        message: String,
    },
}

/// How a [`Reconciler`] runs. Build with [`ReconcileOptions::default`] and the `with_*` setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct ReconcileOptions {
    /// The name in leases (`apply`, `converge`, `agent@host`).
    pub holder: String,
    /// How long the lease lasts between renewals (renewed every third of it).
    pub lease_ttl: Duration,
    /// Plan only: no lease, no publication, no execution.
    pub dry_run: bool,
    /// Most plan-and-execute cycles in one run of a cluster (`apply`: 1, `converge`: N).
    pub max_cycles: usize,
    /// Drift mode overriding the cluster's (`None`: the cluster config's, default `correct`).
    pub drift: Option<DriftMode>,
    /// The command line's settings layer.
    pub flags: FlagSettings,
    /// The log level when nothing configures one.
    pub default_log_level: LogLevel,
    /// Resources suspended from outside the repository, with why.
    pub suspended: BTreeMap<ResourceKey, String>,
    /// Whether a change PVE keeps pending on a running guest may restart it (`false`: it is
    /// reported "pending until restart" and the cluster is stuck).
    pub restarts: bool,
    /// Progress of each action.
    pub progress: Option<ProgressFn>,
    /// Asked before executing.
    pub confirm: Option<ConfirmFn>,
    /// Told of each step.
    pub events: Option<EventFn>,
    /// Migrations PVE refused, shared by every cycle that uses these options (the agent
    /// passes one memory to all its passes).
    pub refusals: crate::refusals::Refusals,
}

impl Default for ReconcileOptions {
    fn default() -> Self {
        ReconcileOptions {
            holder: "proxops".to_owned(),
            lease_ttl: Duration::from_secs(120),
            dry_run: false,
            max_cycles: 1,
            drift: None,
            flags: FlagSettings::default(),
            default_log_level: LogLevel::Warn,
            suspended: BTreeMap::new(),
            restarts: true,
            progress: None,
            confirm: None,
            events: None,
            refusals: crate::refusals::Refusals::default(),
        }
    }
}

impl ReconcileOptions {
    /// Sets the lease holder name.
    pub fn with_holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = holder.into();
        self
    }
    /// Sets the lease lifetime.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }
    /// Plans only.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
    /// Sets the most cycles per run.
    pub fn with_max_cycles(mut self, n: usize) -> Self {
        self.max_cycles = n.max(1);
        self
    }
    /// Overrides the drift mode.
    pub fn with_drift(mut self, drift: Option<DriftMode>) -> Self {
        self.drift = drift;
        self
    }
    /// Sets the command line's settings layer.
    pub fn with_flags(mut self, flags: FlagSettings) -> Self {
        self.flags = flags;
        self
    }
    /// Sets the default log level.
    pub fn with_default_log_level(mut self, level: LogLevel) -> Self {
        self.default_log_level = level;
        self
    }
    /// Shares a memory of refused migrations ([`crate::refusals`]).
    pub fn with_refusals(mut self, refusals: crate::refusals::Refusals) -> Self {
        self.refusals = refusals;
        self
    }
    /// Sets the externally suspended resources.
    pub fn with_suspended(mut self, suspended: BTreeMap<ResourceKey, String>) -> Self {
        self.suspended = suspended;
        self
    }
    /// Allows or forbids restarts for pending changes.
    pub fn with_restarts(mut self, restarts: bool) -> Self {
        self.restarts = restarts;
        self
    }
    /// Sets the progress callback.
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }
    /// Sets the confirmation callback.
    pub fn with_confirm(mut self, confirm: ConfirmFn) -> Self {
        self.confirm = Some(confirm);
        self
    }
    /// Sets the event callback.
    pub fn with_events(mut self, events: EventFn) -> Self {
        self.events = Some(events);
        self
    }
}

/// The source a run reconciles: a loaded repository (at a commit when the planes are
/// recorded), the cluster's graph, and where its SOPS files are read. Build with
/// [`Source::new`] and, when the planes are recorded, [`Source::at`].
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Source<'a> {
    /// The loaded repository.
    pub repository: &'a Repository,
    /// The cluster's graph (`None`: the cluster is invalid).
    pub graph: Option<&'a Graph>,
    /// The commit it was read at (`None`: a work tree; the planes cannot be recorded).
    pub revision: Option<ObjectId>,
    /// The directory holding the repository's files (SOPS secrets, CA files).
    pub dir: &'a Path,
}

impl<'a> Source<'a> {
    /// A source read from a work tree (no commit): `graph` is the cluster's (`None`: the
    /// cluster is invalid), `dir` holds the repository's files.
    pub fn new(repository: &'a Repository, graph: Option<&'a Graph>, dir: &'a Path) -> Self {
        Source {
            repository,
            graph,
            revision: None,
            dir,
        }
    }

    /// The commit the repository was read at (`None`: a work tree).
    pub fn at(mut self, revision: Option<ObjectId>) -> Self {
        self.revision = revision;
        self
    }
}

/// Runs reconcile cycles. Every writer uses one: the CLI's `apply` and `converge`, and the
/// agent.
pub struct Reconciler {
    registry: Arc<Registry>,
    drivers: Arc<Drivers>,
    backend: Backend,
    store: Option<Store>,
    record_planes: bool,
    options: ReconcileOptions,
}

/// Builds a [`Reconciler`].
pub struct ReconcilerBuilder {
    inner: Reconciler,
}

impl ReconcilerBuilder {
    /// The git store holding the planes and the leases. Without one, no lease can be taken
    /// (a warning says so) and no plane is recorded.
    pub fn store(mut self, store: Store) -> Self {
        self.inner.store = Some(store);
        self
    }
    /// Whether to record the desired plane and receipts (needs a store and a commit).
    pub fn record_planes(mut self, on: bool) -> Self {
        self.inner.record_planes = on;
        self
    }
    /// The kind drivers (default: the built-in ones).
    pub fn drivers(mut self, drivers: Arc<Drivers>) -> Self {
        self.inner.drivers = drivers;
        self
    }
    /// The run options.
    pub fn options(mut self, options: ReconcileOptions) -> Self {
        self.inner.options = options;
        self
    }
    /// The reconciler.
    pub fn build(self) -> Reconciler {
        self.inner
    }
}

impl Reconciler {
    /// A reconciler for `backend` with kinds from `registry`.
    pub fn builder(registry: Arc<Registry>, backend: Backend) -> ReconcilerBuilder {
        ReconcilerBuilder {
            inner: Reconciler {
                registry,
                drivers: Arc::new(Drivers::builtin()),
                backend,
                store: None,
                record_planes: false,
                options: ReconcileOptions::default(),
            },
        }
    }

    /// The store, if there is one.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Whether the planes are recorded.
    pub fn records_planes(&self) -> bool {
        self.record_planes && self.store.is_some()
    }

    /// The options.
    pub fn options(&self) -> &ReconcileOptions {
        &self.options
    }

    /// Clusters whose desired plane exists but that the repository no longer has: their guests
    /// are left alone, which the operator must know.
    pub fn vanished(&self, repository: &Repository) -> Vec<Vanished> {
        match &self.store {
            Some(store) => {
                let known: Vec<&str> = repository
                    .clusters
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                vanished_clusters(store, &known)
            }
            None => Vec::new(),
        }
    }

    pub(crate) fn emit(&self, event: &Event<'_>) {
        if let Some(f) = &self.options.events {
            f(event);
        }
    }
}

/// What one cycle of a run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CycleRun {
    /// The plan.
    pub plan: ClusterPlan,
    /// What executing it did (`None`: not executed).
    pub report: Option<CycleReport>,
    /// The receipts published after it.
    pub receipts: Option<PublishedReceipts>,
}

/// How a run of one cluster ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum RunResult {
    /// Nothing to do and nothing in the way.
    InSync,
    /// Actions ran, all succeeded, and nothing else stands in the way.
    Applied,
    /// Changes are planned and were not executed (a dry run, drift mode `report`).
    Changes,
    /// The cluster does not match and ProxOps cannot make it: anomalies, blocked or locked
    /// resources, prunes held back (by the budget, a lock, protection, ...).
    Stuck,
    /// Nothing else stands in the way, but consumers wait for what their reference
    /// expressions read ([`crate::plan::ClusterPlan::waiting`]): not converged.
    Waiting,
    /// Cycles ran out while changes were still planned.
    NotConverged,
    /// An action failed, or the cluster could not be reached, planned or recorded.
    Failed,
    /// A stop request ended the run before every action started.
    Stopped,
    /// The confirmation was declined.
    Declined,
    /// Another writer holds the cluster's lease.
    Leased,
    /// The cluster is invalid or missing; nothing was done.
    Invalid,
}

impl RunResult {
    /// Whether the cluster now matches the repository as far as this run can tell.
    pub fn is_success(self) -> bool {
        matches!(self, RunResult::InSync | RunResult::Applied)
    }
}

/// Why a run failed before or around its cycles.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The cluster is not in the repository, or has errors.
    #[error("{0}")]
    Invalid(String),
    /// Another writer holds the lease.
    #[error(
        "the cluster is being reconciled by {holder} (pid {pid} on {host}) until {expires}: its lease is held; wait, or see `proxops lease`"
    )]
    Leased {
        /// Its holder's name.
        holder: String,
        /// Its host.
        host: String,
        /// Its process.
        pid: u32,
        /// When it expires unless renewed.
        expires: String,
    },
    /// The lease could not be taken.
    #[error("cannot take the cluster's lease: {0}")]
    Lease(#[source] StoreError),
    /// The planes need the commit the source was read at.
    #[error(
        "the planes record the commit they reconcile, and the source was read from a work tree"
    )]
    NoCommit,
    /// Publishing the desired plane failed.
    #[error("publishing the desired plane: {0}")]
    Desired(#[source] StoreError),
    /// A gated cluster's live desired head names no source revision.
    #[error(
        "the live desired head of `{branch}` does not name the source revision it was built from (no `Source-Revision` trailer): refusing to guess; with change gate `pullRequest` only that head may run. Publish a desired commit with ProxOps (merge a candidate made by it), or roll back to one"
    )]
    UnknownLiveSource {
        /// The desired branch.
        branch: String,
    },
    /// The source at the live desired head cannot be loaded or is invalid.
    #[error("the source of the live desired head ({revision}) cannot be used: {reason}")]
    LiveSource {
        /// Its revision.
        revision: String,
        /// Why.
        reason: String,
    },
    /// PVE could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The cluster could not be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Publishing receipts failed.
    #[error("publishing receipts: {0}")]
    Receipts(#[source] StoreError),
}

impl RunError {
    /// A stable code (`proxops::<area>::<name>`).
    pub fn code(&self) -> &'static str {
        match self {
            RunError::Invalid(_) => "proxops::run::invalid",
            RunError::Leased { .. } => "proxops::lease::held",
            RunError::Lease(_) => "proxops::lease::failed",
            RunError::NoCommit => "proxops::planes::no_commit",
            RunError::Desired(_) => "proxops::planes::desired",
            RunError::UnknownLiveSource { .. } => "proxops::gate::unknown_source",
            RunError::LiveSource { .. } => "proxops::gate::live_source",
            RunError::Connect(_) => "proxops::pve::connect",
            RunError::Plan(_) => "proxops::pve::inventory",
            RunError::Receipts(_) => "proxops::planes::receipts",
        }
    }
}

/// What a run of one cluster did.
#[derive(Debug)]
#[non_exhaustive]
pub struct ClusterRun {
    /// The cluster.
    pub cluster: String,
    /// How it ended.
    pub result: RunResult,
    /// Each cycle, in order.
    pub cycles: Vec<CycleRun>,
    /// The desired publication, when the planes are recorded.
    pub desired: Option<PublishedDesired>,
    /// The source revision reconciled (for a gated cluster, the live head's).
    pub source_revision: Option<ObjectId>,
    /// The candidate a gated change was proposed as.
    pub candidate: Option<String>,
    /// What went wrong.
    pub errors: Vec<RunError>,
    /// PVE requests sent, by endpoint.
    pub requests: BTreeMap<String, u64>,
    /// Their durations.
    pub latencies: BTreeMap<String, Latency>,
    /// Guests deleted over every cycle.
    pub deleted: u32,
}

impl ClusterRun {
    fn new(cluster: &str, revision: Option<ObjectId>) -> ClusterRun {
        ClusterRun {
            cluster: cluster.to_owned(),
            result: RunResult::Failed,
            cycles: Vec::new(),
            desired: None,
            source_revision: revision,
            candidate: None,
            errors: Vec::new(),
            requests: BTreeMap::new(),
            latencies: BTreeMap::new(),
            deleted: 0,
        }
    }

    /// The last cycle's plan.
    pub fn last_plan(&self) -> Option<&ClusterPlan> {
        self.cycles.last().map(|c| &c.plan)
    }
}
