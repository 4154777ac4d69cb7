//! One agent cycle of one cluster: the engine's [`Reconciler`] (lease, desired plane, plan,
//! execute or only report drift, receipts, release), recorded for `/status` and the metrics.
//! Every failure ends this cluster's cycle only; the pass goes on.

use super::status::{ActionLine, CycleRecord, CycleResult, FieldChange, ResourceRow};
use super::{AgentBackend, Pass, lock};
use proxops_engine::backend::Backend;
use proxops_engine::execute::{CycleReport, Outcome, Progress};
use proxops_engine::plan::ClusterPlan;
use proxops_engine::planes::Planes;
use proxops_engine::reconcile::{
    ClusterRun, Event, ReconcileOptions, Reconciler, RunError, RunResult, Source,
};
use proxops_model::ResourceKey;
use proxops_model::config::LogLevel;
use proxops_pve::Latency;
use proxops_store::StoreError;
use proxops_store::desired::DesiredState;
use proxops_store::documents::{hex, utc_timestamp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// What one cycle of one cluster did, for the status and the metrics.
#[non_exhaustive]
pub struct CycleOutcome {
    /// The cluster.
    pub cluster: String,
    /// The record `/status` shows.
    pub record: CycleRecord,
    /// The resources' states in the planes afterwards (`None`: not read).
    pub resources: Option<Vec<ResourceRow>>,
    /// The plan, when one was made.
    pub plan: Option<ClusterPlan>,
    /// What executing it did.
    pub report: Option<CycleReport>,
    /// PVE requests the cycle sent, by endpoint.
    pub requests: BTreeMap<String, u64>,
    /// Their durations.
    pub latencies: BTreeMap<String, Latency>,
    /// What failed, in stable words (a failed action's subject and verb, an error's code):
    /// what tells one failure from another without times or task ids.
    pub failures: Vec<String>,
    /// The subjects of the failed actions.
    pub failed_subjects: Vec<String>,
    /// Lease changes during the cycle (taken over from a stale holder, lost), one line each.
    pub lease_events: Vec<String>,
}

impl CycleOutcome {
    /// The cycle of `cluster` that `record` describes: no resources read, no plan, no report,
    /// no requests, failures or lease changes; the fields are set from there.
    pub fn new(cluster: impl Into<String>, record: CycleRecord) -> CycleOutcome {
        CycleOutcome {
            cluster: cluster.into(),
            record,
            resources: None,
            plan: None,
            report: None,
            requests: BTreeMap::new(),
            latencies: BTreeMap::new(),
            failures: Vec::new(),
            failed_subjects: Vec::new(),
            lease_events: Vec::new(),
        }
    }
}

/// Runs one cycle of `cluster`.
pub async fn run_cycle(pass: Arc<Pass>, cluster: String) -> CycleOutcome {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let mut out = CycleOutcome {
        cluster: cluster.clone(),
        record: CycleRecord {
            source_revision: Some(hex(pass.fetched.commit)),
            ..CycleRecord::new(utc_timestamp(started_at), CycleResult::Failed)
        },
        resources: None,
        plan: None,
        report: None,
        requests: BTreeMap::new(),
        latencies: BTreeMap::new(),
        failures: Vec::new(),
        failed_subjects: Vec::new(),
        lease_events: Vec::new(),
    };
    out.record.result = cycle(&pass, &cluster, started_at, &mut out).await;
    out.record.finished = utc_timestamp(SystemTime::now());
    out.record.duration_seconds = clock.elapsed().as_secs_f64();
    tracing::info!(
        cluster = %cluster,
        result = out.record.result.label(),
        planned = out.record.planned,
        succeeded = out.record.succeeded,
        failed = out.record.failed,
        seconds = out.record.duration_seconds,
        "cycle finished"
    );
    out
}

async fn cycle(
    pass: &Arc<Pass>,
    name: &str,
    _started_at: SystemTime,
    out: &mut CycleOutcome,
) -> CycleResult {
    if pass.repo().cluster(name).is_some() && pass.workspace.graph(name).is_none() {
        out.record.errors = pass.errors_of(name);
        return CycleResult::Invalid;
    }
    if pass.suspensions.clusters.contains(name) {
        return CycleResult::Suspended;
    }
    let backend = backend_for(pass, name);
    let suspended = pass
        .suspensions
        .resources_of(name)
        .iter()
        .filter_map(|k| k.split_once('/'))
        .map(|(kind, n)| {
            (
                ResourceKey {
                    kind: kind.to_owned(),
                    name: n.to_owned(),
                },
                "suspended through the agent".to_owned(),
            )
        })
        .collect();
    let lease_events = Arc::new(Mutex::new(Vec::new()));
    let options = ReconcileOptions::default()
        .with_holder(pass.options.holder.clone())
        .with_lease_ttl(pass.options.lease_ttl)
        .with_default_log_level(LogLevel::Info)
        .with_suspended(suspended)
        .with_refusals(pass.refusals.clone())
        .with_progress(log_progress(name))
        .with_events(watch_events(pass, name, Arc::clone(&lease_events)));
    let reconciler = Reconciler::builder(Arc::clone(&pass.registry), backend)
        .store(pass.fetched.store.clone())
        .record_planes(true)
        .options(options)
        .build();
    // The work tree at the fetched commit holds the SOPS files, for either backend. A cluster
    // the repository lacks still gets a source: the reconciler reports it as unknown.
    let ws = &pass.workspace;
    let source = ws
        .source(name)
        .unwrap_or_else(|| Source::new(ws.repo(), None, ws.dir()).at(ws.revision()));
    let run = reconciler.cycle(source, name, pass.stop.clone()).await;
    out.lease_events = std::mem::take(&mut *lock(&lease_events));
    out.record.candidate = run.candidate.clone();
    out.record.source_revision = run.source_revision.map(hex);
    for e in &run.errors {
        // The status keeps the message; the log says it too, for whoever reads only the log.
        if !matches!(e, RunError::Leased { .. }) {
            tracing::warn!(cluster = %name, code = e.code(), "cycle error: {e}");
        }
        out.record.errors.push(match e {
            RunError::Leased { .. } => e.to_string(),
            _ => format!("{e} [{}]", e.code()),
        });
        if !matches!(e, RunError::Leased { .. }) {
            out.failures.push(e.code().to_owned());
        }
    }
    out.requests = run.requests.clone();
    out.latencies = run.latencies.clone();
    let result = classify(&run, out);
    let desired = run.desired.map(|d| d.state);
    if let Some(last) = run.cycles.into_iter().last() {
        out.plan = Some(last.plan);
        out.report = last.report;
    }
    read_view(pass, name, desired, out).await;
    result
}

/// The backend of cluster `name` in `pass`: its PVE (SOPS files read from the work tree at the
/// fetched commit), or its simulator and state file.
// `name` names a simulator's state file only (feature `sim`).
#[cfg_attr(not(feature = "sim"), allow(unused_variables))]
pub(crate) fn backend_for(pass: &Pass, name: &str) -> Backend {
    match &pass.options.backend {
        AgentBackend::Pve => Backend::Pve,
        #[cfg(feature = "sim")]
        AgentBackend::Sim {
            state_file,
            task_time,
        } => Backend::Sim {
            state_file: state_file
                .as_ref()
                .map(|f| proxops_engine::backend::per_cluster_state_file(f, name)),
            task_time: *task_time,
        },
    }
}

/// Fills the desired and observed heads and the resources' states from the planes. `desired`
/// is the plane the cycle reconciled: read again only if the head moved since.
async fn read_view(
    pass: &Arc<Pass>,
    name: &str,
    desired: Option<Arc<DesiredState>>,
    out: &mut CycleOutcome,
) {
    let Ok(planes) = Planes::from_config(pass.fetched.store.clone(), pass.repo(), name) else {
        return;
    };
    let (store, refs) = (planes.store.clone(), planes.refs.clone());
    // Each plane is read once (its 1,000 documents parsed once), and only the heads and the
    // rows leave the blocking task.
    let read = tokio::task::spawn_blocking(move || {
        let head = store.head(&refs.desired)?;
        let desired = match (desired, head) {
            (_, None) => None,
            (Some(d), Some(h)) if d.plane.commit.id == h => Some(d),
            (_, Some(h)) => store.read_desired(&refs, Some(h))?.map(Arc::new),
        };
        let observed = store.read_observed(&refs, None)?;
        let view =
            proxops_store::state::derive(&refs.cluster, desired.as_deref(), observed.as_ref());
        let rows: Vec<ResourceRow> = view
            .resources
            .iter()
            .map(|r| {
                let result = r.receipt.as_ref().map(|s| &s.doc.spec.result);
                let identity = |f: &str| result.and_then(|res| res.pve_identity.get(f));
                ResourceRow {
                    kind: r.key.kind.clone(),
                    name: r.key.name.clone(),
                    state: word(r.state),
                    reason: r.reason.clone(),
                    // A guest's node, or the nodes an artifact was placed on.
                    node: identity("node")
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .or_else(|| {
                            let nodes = identity("nodes")?.as_array()?;
                            let names: Vec<&str> =
                                nodes.iter().filter_map(serde_json::Value::as_str).collect();
                            (!names.is_empty()).then(|| names.join(", "))
                        }),
                    vmid: identity("vmid").and_then(serde_json::Value::as_u64),
                    outcome: result.map(|res| word(res.outcome)),
                    reconciled: result.map(|res| res.finished_at.clone()),
                    document: Some(hex(r.blob)),
                    verify: None,
                }
            })
            .collect();
        let heads = (
            desired.map(|d| hex(d.plane.commit.id)),
            observed.map(|o| hex(o.plane.commit.id)),
        );
        Ok::<_, StoreError>((heads, rows))
    })
    .await;
    if let Ok(Ok(((desired, observed), rows))) = read {
        out.record.desired_head = desired;
        out.record.observed_head = observed;
        out.resources = Some(rows);
    }
}

/// What the agent does with a run's events: warnings become log lines, lease changes are
/// kept for the notifications, and the commit statuses learn when a cycle starts on a commit
/// (for a gated cluster, the one its live desired head was built from), or that a change was
/// proposed as a candidate.
fn watch_events(
    pass: &Arc<Pass>,
    cluster: &str,
    lease_events: Arc<Mutex<Vec<String>>>,
) -> proxops_engine::reconcile::EventFn {
    let notifier = Arc::clone(&pass.notifier);
    let fetched = hex(pass.fetched.commit);
    let cluster = cluster.to_owned();
    let live: Mutex<Option<String>> = Mutex::new(None);
    Arc::new(move |event: &Event<'_>| {
        match event {
        Event::Warning { cluster, message } => tracing::warn!(cluster = %cluster, "{message}"),
        Event::LeaseTakenOver { from, .. } => {
            let why = if from.expired_at(SystemTime::now()) {
                format!("its lease had expired at {}", from.expires)
            } else {
                "its process no longer runs".to_owned()
            };
            let line = format!(
                "took over the lease of cluster {cluster} from {} (pid {} on {}): {why}",
                from.holder, from.pid, from.host
            );
            tracing::warn!(cluster = %cluster, "{line}");
            lock(&lease_events).push(line);
        }
        Event::LeaseLost { .. } => lock(&lease_events).push(format!(
            "lost the lease of cluster {cluster} during its cycle: another writer broke or took it over"
        )),
        Event::Desired { published, .. } => {
            if let Some(candidate) = published.candidate() {
                notifier.cycle_started(
                    &cluster,
                    &fetched,
                    &format!("{cluster}: proposed as {}; merge it to apply", candidate.refname),
                );
            }
        }
        Event::LiveHead {
            source_revision, ..
        } => *lock(&live) = Some(hex(*source_revision)),
        Event::Planned { cycle: 1, .. } => {
            let revision = lock(&live).clone().unwrap_or_else(|| fetched.clone());
            notifier.cycle_started(&cluster, &revision, &format!("{cluster}: reconciling"));
        }
        _ => {}
    }
    })
}

/// The cycle's result from the run; fills the counts.
fn classify(run: &ClusterRun, out: &mut CycleOutcome) -> CycleResult {
    if let Some(last) = run.cycles.last() {
        let plan = &last.plan;
        out.record.planned = plan.actions.len();
        out.record.actions = action_lines(plan, last.report.as_ref());
        out.record.anomalies = plan.anomalies.clone();
        out.record.skipped = plan.skipped.clone();
        out.record.waiting = plan.waiting.clone();
        out.record.deferred_prunes = plan.deferred_prunes.clone();
        if let Some(report) = &last.report {
            let r = &mut out.record;
            r.succeeded = report.count(|o| *o == Outcome::Succeeded);
            r.failed = report.count(|o| matches!(o, Outcome::Failed { .. }));
            r.deferred = report.count(|o| matches!(o, Outcome::Deferred { .. }));
            r.not_started = report.count(|o| *o == Outcome::NotStarted);
            for res in &report.results {
                if let Outcome::Failed { error } = &res.outcome {
                    r.errors
                        .push(format!("{} {}: {error}", res.subject, verb_word(res)));
                    // The kind is a stable word: a failure of another kind is another failure.
                    out.failures.push(format!(
                        "{} {} {}",
                        res.subject,
                        verb_word(res),
                        error.kind()
                    ));
                    out.failed_subjects.push(res.subject.clone());
                }
            }
        }
    }
    match run.result {
        RunResult::InSync => CycleResult::Converged,
        RunResult::Applied => CycleResult::Applied,
        RunResult::Changes => CycleResult::Drifted,
        RunResult::Stuck => CycleResult::Stuck,
        RunResult::Waiting => CycleResult::Waiting,
        RunResult::Stopped => CycleResult::Stopped,
        RunResult::Leased => CycleResult::Leased,
        RunResult::Invalid => CycleResult::Invalid,
        RunResult::NotConverged | RunResult::Failed | RunResult::Declined => CycleResult::Failed,
        // A result the engine adds later (its enum is non-exhaustive): not a success.
        _ => CycleResult::Failed,
    }
}

fn verb_word(r: &proxops_engine::execute::ActionResult) -> String {
    word(r.verb)
}

/// The serialized word of a unit enum variant (`CLEAN`, `update`, `inSync`).
fn word(v: impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The plan's actions joined with what became of them, for `/status` and the dashboard.
fn action_lines(plan: &ClusterPlan, report: Option<&CycleReport>) -> Vec<ActionLine> {
    let results: BTreeMap<usize, &proxops_engine::execute::ActionResult> = report
        .map(|r| r.results.iter().map(|res| (res.id, res)).collect())
        .unwrap_or_default();
    plan.actions
        .iter()
        .map(|a| {
            let result = results.get(&a.id);
            let mut changes: Vec<FieldChange> = a
                .changes
                .iter()
                .map(|c| FieldChange {
                    key: c.key.clone(),
                    from: c.from.clone(),
                    to: c.to.clone().filter(|_| !c.delete),
                })
                .collect();
            changes.extend(a.resizes.iter().map(|r| FieldChange {
                key: r.disk.clone(),
                from: Some(format!("{} bytes", r.from)),
                to: Some(format!("{} bytes", r.to)),
            }));
            ActionLine {
                subject: format!("{}/{}", a.kind, a.name),
                node: a.node.clone(),
                verb: word(a.verb),
                reason: a.reason.clone(),
                outcome: result.map(|r| match &r.outcome {
                    Outcome::Succeeded => "succeeded".to_owned(),
                    Outcome::Failed { .. } => "failed".to_owned(),
                    Outcome::Deferred { .. } => "deferred".to_owned(),
                    _ => "notStarted".to_owned(),
                }),
                error: result.and_then(|r| match &r.outcome {
                    Outcome::Failed { error } => Some(error.to_string()),
                    Outcome::Deferred { reason, .. } => reason.clone(),
                    _ => None,
                }),
                millis: result.map(|r| r.millis),
                changes,
            }
        })
        .collect()
}

/// Progress as log lines: one per action that ends.
fn log_progress(cluster: &str) -> proxops_engine::execute::ProgressFn {
    let cluster = cluster.to_owned();
    Arc::new(move |p: Progress<'_>| match p {
        Progress::Started(a) => {
            tracing::debug!(cluster = %cluster, action = ?a.verb, subject = %format!("{}/{}", a.kind, a.name), "action started");
        }
        Progress::Ended(a, r) => match &r.outcome {
            Outcome::Failed { error } => tracing::warn!(
                cluster = %cluster, action = ?a.verb, subject = %r.subject, kind = %error.kind(), error = %error, "action failed"
            ),
            other => tracing::info!(
                cluster = %cluster, action = ?a.verb, subject = %r.subject, outcome = ?other, millis = r.millis, "action ended"
            ),
        },
        // Progress the engine adds later (its enum is non-exhaustive): not logged.
        _ => {}
    })
}
