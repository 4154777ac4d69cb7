//! One agent cycle of one cluster: lease, desired plane, plan, execute (or only report drift),
//! receipts, release. Every failure ends this cluster's cycle only; the pass goes on.

use super::status::{CycleRecord, CycleResult, ResourceRow};
use super::{AgentBackend, Pass};
use crate::backend::{Backend, connect_with, per_cluster_state_file, settings_for};
use crate::execute::{CycleReport, ExecOptions, Outcome, Progress, execute};
use crate::lease::hold;
use crate::plan::ClusterPlan;
use crate::planes::{Planes, cluster_status};
use crate::planner::plan_cluster;
use proxops_model::config::{DriftMode, LogLevel};
use proxops_model::settings::FlagSettings;
use proxops_model::{Cluster, ResourceKey};
use proxops_pve::Latency;
use proxops_store::documents::{hex, utc_timestamp};
use proxops_store::{Holder, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;
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
            candidate: None,
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
    let holder = Holder::this_process(&pass.options.holder);
    let lease = match hold(
        &pass.fetched.store,
        name,
        &holder,
        pass.options.lease_ttl,
        Some(pass.stop.clone()),
    )
    .await
    {
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
    let result = leased_cycle(pass, cluster, graph, started_at, lease.stop(), out).await;
    if !lease.release().await {
        tracing::warn!(cluster = %name, "the lease was lost before the cycle ended");
    }
    result
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
    let planes = match Planes::from_config(pass.fetched.store.clone(), &pass.repo, name) {
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
    // A gated cluster proposed its change as a candidate: only the live desired head is
    // reconciled, as loaded from the source revision it pins.
    let mut reloaded = None;
    if let Some(candidate) = desired.candidate() {
        out.record.candidate = Some(candidate.refname.clone());
        if let Some(live) = desired.state.source_revision
            && live != pass.fetched.commit
        {
            out.record.source_revision = Some(hex(live));
            match load_cluster_at(pass, name, live).await {
                Ok(loaded) => reloaded = Some(loaded),
                Err(e) => {
                    out.record.errors.push(e);
                    return CycleResult::Failed;
                }
            }
        }
    }
    let (cluster, graph) = match &reloaded {
        None => (cluster, graph),
        Some((repo, graph)) => match repo.cluster(name) {
            Some(c) => (c, graph),
            None => {
                out.record
                    .errors
                    .push("the live desired head's source lacks the cluster".to_owned());
                return CycleResult::Failed;
            }
        },
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
            let recorded = planes
                .record_cycle(
                    &conn.client,
                    &desired.state,
                    &plan,
                    report.as_ref(),
                    started_at,
                )
                .await;
            out.plan = Some(plan);
            out.report = report;
            match recorded {
                Ok(_) => result,
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

/// The cluster as the source at `revision` has it, with its graph (for a gated cluster whose
/// live desired head lags behind the source).
async fn load_cluster_at(
    pass: &Arc<Pass>,
    name: &str,
    revision: proxops_store::ObjectId,
) -> Result<(proxops_model::Repository, proxops_graph::Graph), String> {
    let (store, registry, name) = (
        pass.fetched.store.clone(),
        Arc::clone(&pass.registry),
        name.to_owned(),
    );
    tokio::task::spawn_blocking(move || {
        let source = store
            .source(Some(&hex(revision)))
            .map_err(|e| e.to_string())?;
        let options = proxops_model::LoadOptions {
            clusters: vec![name.clone()],
        };
        let mut repo = proxops_model::load_repository(&source, &registry, &options)
            .map_err(|e| e.to_string())?;
        let graph = proxops_graph::check_repository(&registry, &mut repo)
            .into_iter()
            .find(|c| c.name == name)
            .and_then(|c| c.graph)
            .ok_or_else(|| {
                format!("cluster `{name}` is invalid at the live desired head's source")
            })?;
        Ok((repo, graph))
    })
    .await
    .map_err(|e| e.to_string())?
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
