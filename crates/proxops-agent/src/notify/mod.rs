//! Notifications: events to `webhook`, `slack` and `ntfy` sinks, commit statuses to the forges.
//!
//! Every pass [`Notifier::configure`]s the sinks from the configuration it loaded (the agent's
//! `--config` or the repository's `proxops.yaml`, a cluster's entry overriding them for that
//! cluster), reading their secrets anew and keeping each sink's memory. After each cycle
//! [`Notifier::cycle_ended`] turns the outcome into conditions (`event::Condition`) and tells each sink
//! of a cluster what changed for it: a condition it was not told of, one whose fingerprint
//! changed, or one whose reminder is due; a failure cleared by a successful cycle is told as a
//! recovery to the sinks that heard of the failure. `commit-status` sinks get `pending` when a
//! cycle starts on a commit ([`Notifier::cycle_started`]) and the result when it ends, each
//! state once per commit.
//!
//! Sending happens on one task per sink ([`worker`]): queues are bounded, a full one drops,
//! and a failing sink is retried with backoff; a notification that never arrived is forgotten
//! so that the next cycle tries again. `/metrics` counts sent, failed and dropped per sink.

pub mod event;
mod metrics;
mod resolve;
mod sink;
pub mod worker;

pub use worker::NotifyOptions;

use super::cluster::CycleOutcome;
use super::lock;
use super::status::CycleResult;
use event::{ClusterTrack, Condition, EventDocument};
use proxops_model::config::{
    DEFAULT_WAIT_CYCLES, DriftMode, EventKind, Reminder, SinkConfig, SinkKind,
};
use resolve::{ResolvedSink, SinkSpec, SopsCache};
use sink::{StatusState, event_request, status_request};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use worker::{Counters, Job};

/// The sinks of the agent's own configuration file (`--config`), which win over the
/// repository's `proxops.yaml`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConfiguredSinks {
    /// The sinks.
    pub sinks: Vec<SinkConfig>,
    /// The directory their relative paths start from.
    pub dir: PathBuf,
}

impl ConfiguredSinks {
    /// `sinks`, whose relative paths (`file:` secrets) start from `dir`.
    pub fn new(sinks: Vec<SinkConfig>, dir: impl Into<PathBuf>) -> ConfiguredSinks {
        ConfiguredSinks {
            sinks,
            dir: dir.into(),
        }
    }
}

/// What a sink was told, per cluster (`""`: the repository) and condition key.
#[derive(Debug, Default)]
struct Memory {
    told: HashMap<(String, String), Told>,
    /// The last commit status posted, per (cluster, commit), oldest first.
    statuses: VecDeque<((String, String), StatusState)>,
}

#[derive(Debug, Clone)]
struct Told {
    fingerprint: String,
    at: Instant,
    failure: bool,
}

/// Commit statuses remembered per sink.
const STATUS_MEMORY: usize = 512;

impl Memory {
    fn status(&self, cluster: &str, revision: &str) -> Option<StatusState> {
        self.statuses
            .iter()
            .rev()
            .find(|((c, r), _)| c == cluster && r == revision)
            .map(|(_, s)| *s)
    }

    fn set_status(&mut self, cluster: &str, revision: &str, state: StatusState) {
        self.statuses
            .retain(|((c, r), _)| !(c == cluster && r == revision));
        if self.statuses.len() >= STATUS_MEMORY {
            self.statuses.pop_front();
        }
        self.statuses
            .push_back(((cluster.to_owned(), revision.to_owned()), state));
    }
}

/// One sink as the notifier drives it.
struct Slot {
    resolved: Option<Arc<ResolvedSink>>,
    /// Why it cannot be used, when it cannot.
    error: Option<String>,
    queue: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<()>>,
}

/// Everything that outlives a sink's reconfiguration.
struct Kept {
    counters: Arc<Counters>,
    memory: Arc<Mutex<Memory>>,
}

#[derive(Default)]
struct Inner {
    slots: BTreeMap<String, Slot>,
    kept: BTreeMap<String, Kept>,
    /// Sinks of the repository as a whole (and of clusters without their own).
    global: Vec<String>,
    /// Clusters with their own sinks.
    clusters: BTreeMap<String, Vec<String>>,
    tracks: BTreeMap<String, ClusterTrack>,
    sops: SopsCache,
    /// Workers of sinks that were replaced or dropped, finishing their queues.
    retired: Vec<JoinHandle<()>>,
}

/// In-flight notifications (queued or being sent), over every sink.
type Busy = Arc<Mutex<usize>>;

/// The agent's notifications.
pub struct Notifier {
    inner: Arc<Mutex<Inner>>,
    client: reqwest::Client,
    options: NotifyOptions,
    agent: String,
    busy: Busy,
}

/// Why the notifier cannot start.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the notification client: {0}")]
pub struct NotifierError(String);

impl Notifier {
    /// A notifier sending as `agent` (its lease holder name).
    pub fn new(agent: &str, options: NotifyOptions) -> Result<Notifier, NotifierError> {
        // The workspace's reqwest has no built-in crypto provider: hand it ring's, with the
        // system's roots.
        let tls = proxops_pve::TlsVerification::System
            .client_config()
            .map_err(|e| NotifierError(e.to_string()))?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| NotifierError(e.to_string()))?;
        Ok(Notifier {
            inner: Arc::new(Mutex::new(Inner::default())),
            client,
            options,
            agent: agent.to_owned(),
            busy: Arc::new(Mutex::new(0)),
        })
    }

    /// Sets the sinks from a loaded repository: `own` (the agent's configuration file) or the
    /// repository's `proxops.yaml` for every cluster, and each cluster's entry for itself.
    /// Secrets are read from `repo_dir` (the work tree), the environment and SOPS files.
    pub fn configure(
        &self,
        own: Option<&ConfiguredSinks>,
        repository: &proxops_model::Repository,
        repo_dir: &Path,
    ) {
        let global: Vec<SinkSpec> = match own {
            Some(c) => specs(&c.sinks, &c.dir, None, None),
            None => repository
                .config
                .as_ref()
                .and_then(|c| c.notifications.as_ref())
                .map(|s| specs(s, repo_dir, None, None))
                .unwrap_or_default(),
        };
        let mut clusters = BTreeMap::new();
        for c in &repository.clusters {
            let Some(entry) = &c.entry else { continue };
            let Some(sinks) = &entry.notifications else {
                continue;
            };
            let dir = repo_dir.join("clusters").join(&c.name);
            let default = entry.secrets_file.as_ref().map(|f| dir.join(f));
            clusters.insert(c.name.clone(), specs(sinks, &dir, default, Some(&c.name)));
        }
        self.apply(global, clusters);
    }

    /// Sets the sinks from the agent's configuration alone (before a repository is read);
    /// clusters keep the sinks of their own they had.
    pub fn configure_own(&self, own: &ConfiguredSinks) {
        let global = specs(&own.sinks, &own.dir, None, None);
        let mut inner = lock(&self.inner);
        let keep = inner.clusters.values().flatten().cloned().collect();
        let labels = self.reconcile_slots(&mut inner, &global, keep);
        inner.global = labels;
    }

    fn apply(&self, global: Vec<SinkSpec>, clusters: BTreeMap<String, Vec<SinkSpec>>) {
        let mut inner = lock(&self.inner);
        let mut all: Vec<SinkSpec> = global.clone();
        for s in clusters.values() {
            all.extend(s.iter().cloned());
        }
        self.reconcile_slots(&mut inner, &all, BTreeSet::new());
        inner.global = global.iter().map(|s| s.label.clone()).collect();
        inner.clusters = clusters
            .into_iter()
            .map(|(c, s)| (c, s.into_iter().map(|s| s.label).collect()))
            .collect();
    }

    /// Makes the slots those of `specs` (plus `keep`, left as they are); returns the labels of
    /// `specs`.
    fn reconcile_slots(
        &self,
        inner: &mut Inner,
        specs: &[SinkSpec],
        keep: BTreeSet<String>,
    ) -> Vec<String> {
        let wanted: BTreeSet<&str> = specs.iter().map(|s| s.label.as_str()).collect();
        let gone: Vec<String> = inner
            .slots
            .keys()
            .filter(|l| !wanted.contains(l.as_str()) && !keep.contains(*l))
            .cloned()
            .collect();
        for label in gone {
            if let Some(slot) = inner.slots.remove(&label) {
                retire(inner, slot);
            }
        }
        for spec in specs {
            let resolved = resolve::resolve(spec, &mut inner.sops);
            let unchanged = match (&resolved, inner.slots.get(&spec.label)) {
                (
                    Ok(r),
                    Some(Slot {
                        resolved: Some(old),
                        ..
                    }),
                ) => old.fingerprint == r.fingerprint,
                (
                    Err(e),
                    Some(Slot {
                        error: Some(old), ..
                    }),
                ) => old == e,
                _ => false,
            };
            if unchanged {
                continue;
            }
            let kept = inner
                .kept
                .entry(spec.label.clone())
                .or_insert_with(|| Kept {
                    counters: Arc::new(Counters::default()),
                    memory: Arc::new(Mutex::new(Memory::default())),
                });
            let counters = Arc::clone(&kept.counters);
            let slot = match resolved {
                Ok(r) => {
                    let (tx, rx) = mpsc::channel(self.options.queue.max(1));
                    let worker = tokio::spawn(worker::run(
                        spec.label.clone(),
                        rx,
                        self.client.clone(),
                        counters,
                        self.options.clone(),
                        Arc::clone(&self.busy),
                    ));
                    tracing::info!(sink = %spec.label, kind = r.config.kind.name(), "notification sink ready");
                    Slot {
                        resolved: Some(Arc::new(r)),
                        error: None,
                        queue: Some(tx),
                        worker: Some(worker),
                    }
                }
                Err(e) => {
                    tracing::error!(sink = %spec.label, "notification sink unusable: {e}");
                    Slot {
                        resolved: None,
                        error: Some(e),
                        queue: None,
                        worker: None,
                    }
                }
            };
            if let Some(old) = inner.slots.insert(spec.label.clone(), slot) {
                retire(inner, old);
            }
        }
        specs.iter().map(|s| s.label.clone()).collect()
    }

    /// The sinks of `cluster` (`None`: the repository's).
    fn sinks_of(inner: &Inner, cluster: Option<&str>) -> Vec<String> {
        cluster
            .and_then(|c| inner.clusters.get(c))
            .unwrap_or(&inner.global)
            .clone()
    }

    /// The repository could not be fetched or read.
    pub fn source_failed(&self, error: &str) {
        self.tell(None, Some(vec![event::source_failed(error)]), None, None);
    }

    /// The repository was read at `revision`.
    pub fn source_read(&self, revision: &str) {
        self.tell(
            None,
            Some(Vec::new()),
            Some(CycleResult::Converged),
            Some(revision),
        );
    }

    /// A cycle of `cluster` runs on source commit `revision` (`description` says how).
    pub fn cycle_started(&self, cluster: &str, revision: &str, description: &str) {
        self.status(cluster, revision, StatusState::Pending, description, false);
    }

    /// A cycle ended.
    pub fn cycle_ended(&self, outcome: &CycleOutcome, drift: DriftMode) {
        let record = &outcome.record;
        let conditions = {
            let mut inner = lock(&self.inner);
            let track = inner.tracks.entry(outcome.cluster.clone()).or_default();
            event::conditions(outcome, drift, track)
        };
        self.tell(
            Some(&outcome.cluster),
            conditions,
            Some(record.result),
            record.source_revision.as_deref(),
        );
        let state = match record.result {
            CycleResult::Converged | CycleResult::Applied => Some(StatusState::Success),
            CycleResult::Failed
            | CycleResult::Stuck
            | CycleResult::Waiting
            | CycleResult::Drifted
            | CycleResult::Invalid => Some(StatusState::Failure),
            CycleResult::Leased | CycleResult::Suspended | CycleResult::Stopped => None,
        };
        if let (Some(state), Some(revision)) = (state, &record.source_revision) {
            let description = status_description(outcome, drift);
            self.status(&outcome.cluster, revision, state, &description, true);
        }
    }

    /// Posts `state` on `revision` to the commit-status sinks of `cluster` that did not post it
    /// there yet (`pending` only where nothing was posted).
    fn status(
        &self,
        cluster: &str,
        revision: &str,
        state: StatusState,
        description: &str,
        end: bool,
    ) {
        let inner = lock(&self.inner);
        for label in Self::sinks_of(&inner, Some(cluster)) {
            let Some(slot) = inner.slots.get(&label) else {
                continue;
            };
            let Some(kept) = inner.kept.get(&label) else {
                continue;
            };
            let is_status = slot
                .resolved
                .as_ref()
                .map_or_else(|| false, |r| r.config.kind == SinkKind::CommitStatus);
            if !is_status {
                continue;
            }
            let mut memory = lock(&kept.memory);
            let before = memory.status(cluster, revision);
            let post = match before {
                None => true,
                Some(b) => end && b != state,
            };
            if !post {
                continue;
            }
            memory.set_status(cluster, revision, state);
            drop(memory);
            let Some(resolved) = &slot.resolved else {
                continue;
            };
            let Some(out) = status_request(resolved, cluster, revision, state, description) else {
                continue;
            };
            let memory = Arc::clone(&kept.memory);
            let (c, r) = (cluster.to_owned(), revision.to_owned());
            let undo = Box::new(move || {
                let mut m = lock(&memory);
                if m.status(&c, &r) == Some(state) {
                    m.statuses.retain(|((a, b), _)| !(*a == c && *b == r));
                    if let Some(b) = before {
                        m.set_status(&c, &r, b);
                    }
                }
            });
            self.enqueue(slot, kept, out, Some(undo));
        }
    }

    /// Tells the sinks of `cluster` about `conditions` (`None`: nothing observed); `result`
    /// says whether failures clear.
    fn tell(
        &self,
        cluster: Option<&str>,
        conditions: Option<Vec<Condition>>,
        result: Option<CycleResult>,
        revision: Option<&str>,
    ) {
        let Some(conditions) = conditions else { return };
        let success = result.is_some_and(CycleResult::is_success);
        let scope = cluster.unwrap_or_default().to_owned();
        let now = Instant::now();
        let inner = lock(&self.inner);
        for label in Self::sinks_of(&inner, cluster) {
            let (Some(slot), Some(kept)) = (inner.slots.get(&label), inner.kept.get(&label)) else {
                continue;
            };
            // An unusable sink was reported when it was configured; `/metrics` shows it down.
            let Some(config) = slot.resolved.as_ref().map(|r| r.config.clone()) else {
                continue;
            };
            if config.kind == SinkKind::CommitStatus {
                continue;
            }
            let wait_cycles = config.wait_cycles.unwrap_or(DEFAULT_WAIT_CYCLES);
            let accepted: Vec<&Condition> = conditions
                .iter()
                .filter(|c| config.wants(c.kind))
                .filter(|c| c.severity >= config.min_severity.unwrap_or_default())
                .filter(|c| c.kind != EventKind::ResourceWaiting || c.waiting > wait_cycles)
                .collect();
            let mut memory = lock(&kept.memory);
            let mut send: Vec<(Condition, Option<String>)> = Vec::new();
            // Failures are cleared only by success; everything else when it no longer holds.
            let present: BTreeSet<String> = accepted.iter().map(|c| c.key()).collect();
            let had_failure = memory
                .told
                .iter()
                .any(|((s, _), t)| *s == scope && t.failure);
            let still_failing = accepted.iter().any(|c| c.is_failure());
            memory.told.retain(|(s, key), t| {
                *s != scope || present.contains(key) || (t.failure && !success)
            });
            for c in accepted {
                let key = (scope.clone(), c.key());
                let due = match memory.told.get(&key) {
                    None => true,
                    Some(t) if t.fingerprint != c.fingerprint => true,
                    Some(t) => match config.reminder() {
                        Reminder::Never => false,
                        Reminder::After(d) => now.duration_since(t.at) >= d,
                    },
                };
                if due {
                    memory.told.insert(
                        key.clone(),
                        Told {
                            fingerprint: c.fingerprint.clone(),
                            at: now,
                            failure: c.is_failure(),
                        },
                    );
                    send.push((c.clone(), Some(c.fingerprint.clone())));
                }
            }
            if success && had_failure && !still_failing && config.wants(EventKind::CycleRecovered) {
                send.push((
                    event::recovered(cluster, result.filter(|_| cluster.is_some())),
                    None,
                ));
            }
            drop(memory);
            let Some(resolved) = &slot.resolved else {
                continue;
            };
            for (c, fingerprint) in send {
                let doc = EventDocument::new(&c, cluster, revision, &self.agent);
                let Some(out) = event_request(resolved, &doc, c.severity) else {
                    continue;
                };
                let undo = fingerprint.map(|fp| {
                    let memory = Arc::clone(&kept.memory);
                    let key = (scope.clone(), c.key());
                    Box::new(move || {
                        let mut m = lock(&memory);
                        if m.told.get(&key).is_some_and(|t| t.fingerprint == fp) {
                            m.told.remove(&key);
                        }
                    }) as Box<dyn FnOnce() + Send>
                });
                self.enqueue(slot, kept, out, undo);
            }
        }
    }

    fn enqueue(
        &self,
        slot: &Slot,
        kept: &Kept,
        out: sink::Outgoing,
        undo: Option<Box<dyn FnOnce() + Send>>,
    ) {
        let Some(queue) = &slot.queue else { return };
        *lock(&self.busy) += 1;
        if let Err(e) = queue.try_send(Job {
            out,
            on_failure: undo,
        }) {
            *lock(&self.busy) -= 1;
            Counters::add(&kept.counters.dropped);
            let job = match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
            };
            tracing::warn!(what = %job.out.what, "notification dropped: the sink's queue is full");
            if let Some(undo) = job.on_failure {
                undo();
            }
        }
    }

    /// Notifications queued or being sent.
    pub fn in_flight(&self) -> usize {
        *lock(&self.busy)
    }

    /// Waits (at most the flush timeout) for the queued notifications, then stops the sinks.
    pub async fn close(&self) {
        let handles: Vec<JoinHandle<()>> = {
            let mut inner = lock(&self.inner);
            let slots: Vec<Slot> = std::mem::take(&mut inner.slots).into_values().collect();
            let mut handles: Vec<JoinHandle<()>> = std::mem::take(&mut inner.retired);
            handles.extend(slots.into_iter().filter_map(|s| s.worker));
            handles
        };
        let all = async {
            for h in handles {
                let _ = h.await;
            }
        };
        if tokio::time::timeout(self.options.flush_timeout, all)
            .await
            .is_err()
        {
            tracing::warn!("stopped before every notification was sent");
        }
    }

    /// Registers `notifications` (by sink and result) and `notification_sink_up` (by sink)
    /// in `registry`, read from the sinks at each scrape: a sink that is no longer configured
    /// keeps its counts but is no longer up. The agent registers them with its own metrics,
    /// under the `proxops` prefix.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(metrics::SinkMetrics(Arc::clone(&self.inner))));
    }

    /// Each sink's name and why it cannot be used (for `/status`).
    pub fn sink_errors(&self) -> Vec<(String, Option<String>)> {
        lock(&self.inner)
            .slots
            .iter()
            .map(|(l, s)| (l.clone(), s.error.clone()))
            .collect()
    }
}

fn retire(inner: &mut Inner, slot: Slot) {
    // Dropping the queue lets the worker finish what was queued, then end.
    drop(slot.queue);
    if let Some(w) = slot.worker {
        inner.retired.retain(|h| !h.is_finished());
        inner.retired.push(w);
    }
}

fn specs(
    sinks: &[SinkConfig],
    dir: &Path,
    default_secrets_file: Option<PathBuf>,
    cluster: Option<&str>,
) -> Vec<SinkSpec> {
    sinks
        .iter()
        .map(|s| SinkSpec {
            label: match cluster {
                Some(c) => format!("{c}/{}", s.label()),
                None => s.label(),
            },
            config: s.clone(),
            dir: dir.to_path_buf(),
            default_secrets_file: default_secrets_file.clone(),
        })
        .collect()
}

/// A commit status's description of a cycle.
fn status_description(outcome: &CycleOutcome, drift: DriftMode) -> String {
    let r = &outcome.record;
    let first = r.errors.first().cloned().unwrap_or_default();
    match r.result {
        CycleResult::Converged => format!("{}: PVE matches this commit", outcome.cluster),
        CycleResult::Applied => format!("{}: applied {} action(s)", outcome.cluster, r.succeeded),
        CycleResult::Failed => format!("{}: failed: {first}", outcome.cluster),
        CycleResult::Invalid => format!("{}: invalid: {first}", outcome.cluster),
        CycleResult::Stuck => format!(
            "{}: stuck: {} anomaly(ies), {} prune(s) held back",
            outcome.cluster,
            r.anomalies.len(),
            r.deferred_prunes.len()
        ),
        CycleResult::Waiting => format!(
            "{}: not converged: {} waiting{}",
            outcome.cluster,
            r.waiting.len(),
            r.waiting
                .first()
                .map(|w| format!(" ({}: {})", w.subject, w.reason))
                .unwrap_or_default()
        ),
        CycleResult::Drifted if drift == DriftMode::Report => format!(
            "{}: {} change(s) not applied (drift: report)",
            outcome.cluster, r.planned
        ),
        other => format!("{}: {}", outcome.cluster, other.label()),
    }
}
