//! One agent cycle of one cluster: lease, desired plane, plan, execute (or only report drift),
//! receipts, release. Every failure ends this cluster's cycle only; the pass goes on.

use super::status::{CycleRecord, CycleResult, ResourceRow};
use super::{AgentBackend, Pass};
use crate::backend::{Backend, connect_with, per_cluster_state_file, settings_for};
use crate::execute::{CycleReport, ExecOptions, Outcome, Progress, execute};
use crate::plan::ClusterPlan;
use crate::planes::{Planes, cluster_status};
use crate::planner::plan_cluster;
use proxops_model::config::{DriftMode, LogLevel};
use proxops_model::settings::FlagSettings;
use proxops_model::{Cluster, ResourceKey};
use proxops_pve::Latency;
use proxops_store::documents::{hex, utc_timestamp};
use proxops_store::{Holder, Lease, StoreError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tokio::sync::watch;

/// What one cycle of one cluster did, for the status and the metrics.
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
}

/// Runs one cycle of `cluster`.
pub async fn run_cycle(pass: Arc<Pass>, cluster: String) -> CycleOutcome {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let mut out = CycleOutcome {
        cluster: cluster.clone(),
        record: CycleRecord {
            started: utc_timestamp(started_at),
            finished: String::new(),
            duration_seconds: 0.0,
            result: CycleResult::Failed,
            source_revision: Some(hex(pass.fetched.commit)),
            planned: 0,
            succeeded: 0,
            failed: 0,
            deferred: 0,
            not_started: 0,
            anomalies: Vec::new(),
            skipped: Vec::new(),
            deferred_prunes: Vec::new(),
            errors: Vec::new(),
            desired_head: None,
            observed_head: None,
        },
        resources: None,
        plan: None,
        report: None,
        requests: BTreeMap::new(),
        latencies: BTreeMap::new(),
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
    started_at: SystemTime,
    out: &mut CycleOutcome,
) -> CycleResult {
    let Some(cluster) = pass.repo.cluster(name) else {
        out.record.errors.push(format!(
            "cluster `{name}` is not in the repository at {}",
            hex(pass.fetched.commit)
        ));
        return CycleResult::Invalid;
    };
    let Some(graph) = pass.graphs.get(name) else {
        out.record.errors = pass.errors_of(name);
        return CycleResult::Invalid;
    };
    if pass.suspensions.clusters.contains(name) {
        return CycleResult::Suspended;
    }
    let lease = match acquire(pass, name).await {
        Ok(lease) => lease,
        Err(StoreError::Leased {
            holder,
            host,
            pid,
            expires,
            ..
        }) => {
            out.record.errors.push(format!(
                "held by {holder} (pid {pid} on {host}) until {expires}"
            ));
            return CycleResult::Leased;
        }
        Err(e) => {
            out.record
                .errors
                .push(format!("cannot take the lease: {e}"));
            return CycleResult::Failed;
        }
    };
    let lease = Arc::new(Mutex::new(Some(lease)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let keeper = tokio::spawn(keep(
        Arc::clone(&lease),
        pass.options.lease_ttl,
        pass.stop.clone(),
        stop_tx,
    ));
    let result = leased_cycle(pass, cluster, graph, started_at, stop_rx, out).await;
    keeper.abort();
    let held = lease.lock().ok().and_then(|mut l| l.take());
    if let Some(lease) = held {
        let token = lease.record().token.clone();
        let released = tokio::task::spawn_blocking(move || lease.release()).await;
        if !matches!(released, Ok(Ok(()))) {
            tracing::warn!(cluster = %name, token = %token, "could not release the lease; it expires by itself");
        }
    }
    result
}

/// Takes the cluster's lease (git I/O, off the async threads).
async fn acquire(pass: &Arc<Pass>, cluster: &str) -> Result<Lease, StoreError> {
    let store = pass.fetched.store.clone();
    let holder = Holder::this_process(&pass.options.holder);
    let ttl = pass.options.lease_ttl;
    let cluster = cluster.to_owned();
    tokio::task::spawn_blocking(move || store.acquire_lease(&cluster, &holder, ttl))
        .await
        .map_err(|e| StoreError::Invalid(format!("lease task failed: {e}")))?
}

/// Renews the lease every third of its lifetime; on losing it, or on shutdown, tells the
/// executor to start nothing new.
async fn keep(
    lease: Arc<Mutex<Option<Lease>>>,
    ttl: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
) {
    let every = (ttl / 3).max(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    let _ = stop.send(true);
                    return;
                }
                continue;
            }
        }
        let renewed = match lease.lock() {
            Ok(mut guard) => match guard.as_mut() {
                Some(l) => l.renew(ttl).map_err(|e| e.to_string()),
                None => return,
            },
            Err(_) => Err("lease lock poisoned".to_owned()),
        };
        if let Err(e) = renewed {
            tracing::error!(error = %e, "lost the cluster lease: starting no new action");
            let _ = stop.send(true);
            return;
        }
    }
}

async fn leased_cycle(
    pass: &Arc<Pass>,
    cluster: &Cluster,
    graph: &proxops_graph::Graph,
    started_at: SystemTime,
    stop: watch::Receiver<bool>,
    out: &mut CycleOutcome,
) -> CycleResult {
    let name = cluster.name.as_str();
    let planes = match Planes::for_cluster(pass.fetched.store.clone(), name) {
        Ok(p) => p,
        Err(e) => {
            out.record.errors.push(e.to_string());
            return CycleResult::Failed;
        }
    };
    let desired = {
        let (planes, pass2) = (planes.clone(), Arc::clone(pass));
        tokio::task::spawn_blocking(move || {
            planes.publish_desired(&pass2.repo, pass2.fetched.commit)
        })
        .await
    };
    let desired = match desired {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            out.record
                .errors
                .push(format!("publishing the desired plane: {e}"));
            return CycleResult::Failed;
        }
        Err(e) => {
            out.record
                .errors
                .push(format!("publishing the desired plane: {e}"));
            return CycleResult::Failed;
        }
    };
    let backend = match &pass.options.backend {
        AgentBackend::Pve => Backend::Pve {
            repo: Some(pass.fetched.dir.clone()),
        },
        AgentBackend::Sim {
            state_file,
            task_time,
        } => Backend::Sim {
            state_file: state_file
                .as_ref()
                .map(|f| per_cluster_state_file(f, name, pass.repo.clusters.len())),
            task_time: *task_time,
        },
    };
    // The work tree at the fetched commit holds the SOPS files, for either backend.
    let settings = settings_for(
        pass.repo.config.as_ref(),
        cluster,
        &FlagSettings::default(),
        LogLevel::Info,
    );
    let conn = match connect_with(
        &pass.registry,
        cluster,
        &backend,
        settings,
        Some(&pass.fetched.dir),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            out.record.errors.push(e.to_string());
            return CycleResult::Failed;
        }
    };
    for w in &conn.warnings {
        tracing::warn!(cluster = %name, "{w}");
    }
    let mut options = conn.plan_options(cluster);
    options.suspended = pass
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
    let drift = cluster
        .entry
        .as_ref()
        .and_then(|e| e.drift)
        .unwrap_or_default();
    let result = match plan_cluster(&conn.client, name, graph, &options).await {
        Err(e) => {
            out.record.errors.push(e.to_string());
            CycleResult::Failed
        }
        Ok(plan) => {
            out.record.planned = plan.actions.len();
            out.record.anomalies = plan.anomalies.clone();
            out.record.skipped = plan.skipped.clone();
            out.record.deferred_prunes = plan.deferred_prunes.clone();
            let report = if plan.is_empty() || drift == DriftMode::Report {
                None
            } else {
                let exec = ExecOptions {
                    stop: Some(stop),
                    progress: Some(log_progress(name)),
                    ..conn.exec_options()
                };
                Some(execute(&conn.client, &plan, &exec).await)
            };
            let result = classify(&plan, report.as_ref(), drift, out);
            let recorded = {
                let planes = planes.clone();
                let (plan, report) = (plan.clone(), report.clone());
                let desired = desired.state.clone();
                tokio::task::spawn_blocking(move || {
                    planes.publish_receipts(&desired, &plan, report.as_ref(), started_at)
                })
                .await
            };
            out.plan = Some(plan);
            out.report = report;
            match recorded {
                Ok(Ok(_)) => result,
                Ok(Err(e)) => {
                    out.record.errors.push(format!("publishing receipts: {e}"));
                    CycleResult::Failed
                }
                Err(e) => {
                    out.record.errors.push(format!("publishing receipts: {e}"));
                    CycleResult::Failed
                }
            }
        }
    };
    out.requests = conn.client.counters().snapshot();
    out.latencies = conn.client.counters().latencies();
    if let Some(sim) = conn.sim {
        let _ = sim.shutdown().await;
    }
    let (store, refs) = (planes.store.clone(), planes.refs.clone());
    let read = tokio::task::spawn_blocking(move || {
        let status = cluster_status(&store, &refs)?;
        let view = store.view(&refs)?;
        Ok::<_, StoreError>((status, view))
    })
    .await;
    if let Ok(Ok((status, view))) = read {
        out.record.desired_head = status.desired.revision;
        out.record.observed_head = status.observed.revision;
        out.resources = Some(
            view.resources
                .iter()
                .map(|r| ResourceRow {
                    kind: r.key.kind.clone(),
                    name: r.key.name.clone(),
                    state: serde_json::to_value(r.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    reason: r.reason.clone(),
                })
                .collect(),
        );
    }
    result
}

/// The cycle's result from its plan and what executing it did; fills the counts.
fn classify(
    plan: &ClusterPlan,
    report: Option<&CycleReport>,
    drift: DriftMode,
    out: &mut CycleOutcome,
) -> CycleResult {
    let Some(report) = report else {
        return if plan.is_empty() {
            CycleResult::Converged
        } else {
            debug_assert_eq!(drift, DriftMode::Report);
            CycleResult::Drifted
        };
    };
    let r = &mut out.record;
    r.succeeded = report.count(|o| *o == Outcome::Succeeded);
    r.failed = report.count(|o| matches!(o, Outcome::Failed { .. }));
    r.deferred = report.count(|o| matches!(o, Outcome::Deferred { .. }));
    r.not_started = report.count(|o| *o == Outcome::NotStarted);
    for res in &report.results {
        if let Outcome::Failed { error } = &res.outcome {
            r.errors
                .push(format!("{} {}: {error}", res.subject, verb_word(res)));
        }
    }
    if r.failed > 0 || r.deferred > 0 {
        CycleResult::Failed
    } else if r.not_started > 0 {
        CycleResult::Stopped
    } else {
        CycleResult::Applied
    }
}

fn verb_word(r: &crate::execute::ActionResult) -> String {
    serde_json::to_value(r.verb)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Progress as log lines: one per action that ends.
fn log_progress(cluster: &str) -> crate::execute::ProgressFn {
    let cluster = cluster.to_owned();
    Arc::new(move |p: Progress<'_>| match p {
        Progress::Started(a) => {
            tracing::debug!(cluster = %cluster, action = ?a.verb, subject = %format!("{}/{}", a.kind, a.name), "action started");
        }
        Progress::Ended(a, r) => match &r.outcome {
            Outcome::Failed { error } => tracing::warn!(
                cluster = %cluster, action = ?a.verb, subject = %r.subject, error = %error, "action failed"
            ),
            other => tracing::info!(
                cluster = %cluster, action = ?a.verb, subject = %r.subject, outcome = ?other, millis = r.millis, "action ended"
            ),
        },
    })
}
