//! The body of [`Reconciler::cycle`]: lease, desired plane and gate, connection, cycles.

use super::{
    ClusterRun, CycleRun, Event, Reconciler, RunError, RunResult, Source, previous_and_receipted,
};
use crate::backend::{Connection, connect_with, settings_for};
use crate::execute::{ExecOptions, Outcome, execute};
use crate::lease::{HeldLease, hold};
use crate::plan::{ClusterPlan, PlanState, Verb};
use crate::planes::{Planes, has_references, plan_references};
use crate::planner::plan_cluster;
use crate::workspace::Workspace;
use proxops_graph::Graph;
use proxops_model::config::DriftMode;
use proxops_model::{Cluster, Repository, ResourceKey};
use proxops_store::desired::DesiredState;
use proxops_store::documents::hex;
use proxops_store::{Holder, ObjectId, StoreError};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::watch;

/// The previous desired documents and the resources with a receipt.
type Previous = (
    super::previous::Documents,
    std::collections::BTreeSet<ResourceKey>,
);

fn joined(e: tokio::task::JoinError) -> StoreError {
    StoreError::Invalid(format!("task failed: {e}"))
}

impl Reconciler {
    /// Runs `cluster` from `source`: lease, desired plane, plan and execute (up to
    /// [`super::ReconcileOptions::max_cycles`] times), receipts. When `stop` turns true no new
    /// action starts. Every failure ends this cluster's run only and is in the result.
    pub async fn cycle(
        &self,
        source: Source<'_>,
        cluster: &str,
        stop: watch::Receiver<bool>,
    ) -> ClusterRun {
        let mut run = ClusterRun::new(cluster, source.revision);
        let Some(found) = source.repository.cluster(cluster) else {
            run.result = RunResult::Invalid;
            run.errors.push(RunError::Invalid(format!(
                "cluster `{cluster}` is not in the repository"
            )));
            return run;
        };
        let Some(graph) = source.graph.filter(|_| found.valid) else {
            run.result = RunResult::Invalid;
            run.errors.push(RunError::Invalid(format!(
                "cluster `{cluster}` has errors; nothing is done until they are fixed"
            )));
            return run;
        };
        let lease = match self.take_lease(cluster, &stop).await {
            Ok(lease) => lease,
            Err(e) => {
                run.result = if matches!(e, RunError::Leased { .. }) {
                    RunResult::Leased
                } else {
                    RunResult::Failed
                };
                run.errors.push(e);
                return run;
            }
        };
        if let Some(from) = lease.as_ref().and_then(HeldLease::taken_over) {
            self.emit(&Event::LeaseTakenOver { cluster, from });
        }
        let stop = lease.as_ref().map_or(stop, HeldLease::stop);
        run.result = match self.leased(source, found, graph, stop, &mut run).await {
            Ok(result) => result,
            Err(e) => {
                run.errors.push(e);
                RunResult::Failed
            }
        };
        if let Some(lease) = lease
            && !lease.release().await
        {
            self.emit(&Event::LeaseLost { cluster });
            self.emit(&Event::Warning {
                cluster,
                message: "the lease was taken over before this run ended".to_owned(),
            });
        }
        run
    }

    /// The cluster's lease, unless this is a dry run or there is no store to hold it in.
    async fn take_lease(
        &self,
        cluster: &str,
        stop: &watch::Receiver<bool>,
    ) -> Result<Option<HeldLease>, RunError> {
        if self.options.dry_run {
            return Ok(None);
        }
        let Some(store) = &self.store else {
            self.emit(&Event::Warning {
                cluster,
                message: "not a git repository: no lease is taken, so nothing keeps another writer off this cluster".to_owned(),
            });
            return Ok(None);
        };
        let holder = Holder::this_process(&self.options.holder);
        match hold(
            store,
            cluster,
            &holder,
            self.options.lease_ttl,
            Some(stop.clone()),
        )
        .await
        {
            Ok(lease) => Ok(Some(lease)),
            Err(StoreError::Leased {
                holder,
                host,
                pid,
                expires,
                ..
            }) => Err(RunError::Leased {
                holder,
                host,
                pid,
                expires,
            }),
            Err(e) => Err(RunError::Lease(e)),
        }
    }

    async fn leased(
        &self,
        source: Source<'_>,
        cluster: &Cluster,
        graph: &Graph,
        stop: watch::Receiver<bool>,
        run: &mut ClusterRun,
    ) -> Result<RunResult, RunError> {
        let name = cluster.name.as_str();
        let planes = match &self.store {
            Some(store) if self.record_planes => Some(
                Planes::from_config(store.clone(), source.repository, name)
                    .map_err(RunError::Desired)?
                    .with_registry(Arc::clone(&self.registry))
                    .with_drivers(Arc::clone(&self.drivers)),
            ),
            _ => None,
        };
        let mut prior = None;
        let mut reloaded = None;
        // Without recording the planes, `proxops delete`'s intents still hold: read them from
        // the live desired head so that nothing deleted on purpose is created again.
        let mut marked_outside = BTreeMap::new();
        if planes.is_none()
            && let Some(store) = &self.store
        {
            let reader = Planes::from_config(store.clone(), source.repository, name)
                .map_err(RunError::Desired)?;
            if let Some(state) = read_prior(&reader).await? {
                marked_outside = crate::planes::deleting::requested(&state);
            }
        }
        if let Some(planes) = &planes {
            prior = read_prior(planes).await?;
            if !self.options.dry_run {
                let revision = source.revision.ok_or(RunError::NoCommit)?;
                let published =
                    publish(planes, source.repository, revision, prior.as_ref()).await?;
                self.emit(&Event::Desired {
                    cluster: name,
                    refs: &planes.refs,
                    published: &published,
                });
                if let Some(candidate) = published.candidate() {
                    run.candidate = Some(candidate.refname.clone());
                    // Only the live desired head may run; it says which source it was built
                    // from, or nothing runs.
                    let live = published.state.source_revision.ok_or_else(|| {
                        RunError::UnknownLiveSource {
                            branch: planes.refs.desired_branch().to_owned(),
                        }
                    })?;
                    if live != revision {
                        self.emit(&Event::LiveHead {
                            cluster: name,
                            source_revision: live,
                        });
                        run.source_revision = Some(live);
                        reloaded = Some(self.load_at(planes, name, live, source.dir).await?);
                    }
                }
                run.desired = Some(published);
            }
        }
        let (cluster, graph) = match &reloaded {
            None => (cluster, graph),
            Some(ws) => match ws.repo().cluster(name).zip(ws.graph(name)) {
                Some(found) => found,
                None => {
                    return Err(RunError::LiveSource {
                        revision: run.source_revision.map(hex).unwrap_or_default(),
                        reason: format!("it has no cluster `{name}`"),
                    });
                }
            },
        };
        let repository = reloaded.as_ref().map_or(source.repository, |ws| ws.repo());
        let settings = settings_for(
            repository.config.as_ref(),
            cluster,
            &self.options.flags,
            self.options.default_log_level,
        );
        let conn = connect_with(
            &self.registry,
            cluster,
            &self.backend,
            settings,
            Some(source.dir),
        )
        .await?;
        for w in &conn.warnings {
            let prefix = format!("cluster `{name}`: ");
            self.emit(&Event::Warning {
                cluster: name,
                message: w.strip_prefix(&prefix).unwrap_or(w).to_owned(),
            });
        }
        // Consumers resolve again after each cycle's receipts, on the live ref only.
        let republish = match (planes.as_ref(), source.revision) {
            (Some(_), Some(rev))
                if !self.options.dry_run && run.candidate.is_none() && has_references(cluster) =>
            {
                Some((source.repository, rev))
            }
            _ => None,
        };
        let result = self
            .cycles(
                &conn,
                cluster,
                graph,
                planes.as_ref(),
                prior.as_ref(),
                &marked_outside,
                republish,
                source.dir,
                stop,
                run,
            )
            .await;
        run.requests = conn.client.counters().snapshot();
        run.latencies = conn.client.counters().latencies();
        #[cfg(feature = "sim")]
        if let Some(sim) = conn.sim {
            let _ = sim.shutdown().await;
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn cycles(
        &self,
        conn: &Connection,
        cluster: &Cluster,
        graph: &Graph,
        planes: Option<&Planes>,
        prior: Option<&Arc<DesiredState>>,
        marked_outside: &BTreeMap<ResourceKey, Option<String>>,
        republish: Option<(&Repository, ObjectId)>,
        dir: &Path,
        stop: watch::Receiver<bool>,
        run: &mut ClusterRun,
    ) -> Result<RunResult, RunError> {
        let name = cluster.name.as_str();
        let references = has_references(cluster);
        let drift = self
            .options
            .drift
            .or_else(|| cluster.entry.as_ref().and_then(|e| e.drift))
            .unwrap_or_default();
        let max = self.options.max_cycles.max(1);
        for n in 1..=max {
            let started = SystemTime::now();
            let previous = match planes {
                Some(p) => Some(self.previous(p, prior).await?),
                None => None,
            };
            let mut options = conn.plan_options(cluster);
            options.drivers = Arc::clone(&self.drivers);
            options.suspended = self.options.suspended.clone();
            options.refused = self.options.refusals.of(name);
            options.refused_updates = self.options.refusals.updates_of(name);
            options.source_revision = run.source_revision.map(hex);
            // Without the planes a new API token's secret (encrypted) goes into the repository.
            options.token_files = planes.is_none().then(|| dir.to_path_buf());
            // Reference expressions: plan what the live desired plane resolved (`crate::planes`).
            let planned = if references {
                if n > 1
                    && let (Some(p), Some((repository, revision))) = (planes, republish)
                {
                    let prior_state = run.desired.as_ref().map(|d| Arc::clone(&d.state));
                    let published = publish(p, repository, revision, prior_state.as_ref()).await?;
                    self.emit(&Event::Desired {
                        cluster: name,
                        refs: &p.refs,
                        published: &published,
                    });
                    run.desired = Some(published);
                }
                let desired = run
                    .desired
                    .as_ref()
                    .map(|d| &*d.state)
                    .or(prior.map(|p| &**p));
                let planned =
                    plan_references(&self.registry, cluster, desired, self.options.dry_run)
                        .map_err(RunError::Invalid)?;
                options.waiting = planned.waits.clone();
                Some(planned)
            } else {
                None
            };
            let graph = planned.as_ref().map_or(graph, |p| &p.graph);
            // `proxops delete`: plan without what it marked, so the prune step tears it down.
            let marked = match run
                .desired
                .as_ref()
                .map(|d| &*d.state)
                .or(prior.map(|p| &**p))
            {
                Some(state) => crate::planes::deleting::requested(state),
                None => marked_outside.clone(),
            };
            let unmarked;
            let mut held = Vec::new();
            let graph = if marked.is_empty() {
                graph
            } else {
                let (g, anomalies) =
                    crate::planes::deleting::without_marked(&self.registry, graph, &marked)
                        .map_err(RunError::Invalid)?;
                held = anomalies;
                unmarked = g;
                &unmarked
            };
            let waiting = planned.as_ref().is_some_and(|p| !p.waits.is_empty());
            options.marked = marked;
            options.prunes_used = run.deleted;
            options.restarts = self.options.restarts;
            let (previous, receipts) = previous.unzip();
            options.previous = previous;
            options.receipts = receipts;
            let mut plan = plan_cluster(&conn.client, name, graph, &options).await?;
            plan.anomalies.extend(held);
            self.emit(&Event::Planned {
                cycle: n,
                plan: &plan,
            });
            let state = plan.state();
            if self.options.dry_run {
                run.cycles.push(cycle_run(plan, None, None));
                return Ok(settled(state));
            }
            if state != PlanState::Changes || drift == DriftMode::Report {
                let receipts = self.record(conn, planes, run, &plan, None, started).await?;
                // New receipts may let a waiting consumer resolve: go round again.
                let unlocked = waiting
                    && republish.is_some()
                    && n < max
                    && receipts.as_ref().is_some_and(|r| r.receipts > 0);
                run.cycles.push(cycle_run(plan, None, receipts));
                if unlocked {
                    continue;
                }
                return Ok(settled(state));
            }
            if n == 1
                && let Some(confirm) = &self.options.confirm
                && !confirm(&plan)
            {
                run.cycles.push(cycle_run(plan, None, None));
                return Ok(RunResult::Declined);
            }
            let exec = ExecOptions {
                stop: Some(stop.clone()),
                progress: self.options.progress.clone(),
                ..conn.exec_options()
            };
            let report = execute(&conn.client, &plan, &exec).await;
            self.options.refusals.record(name, &plan, &report);
            self.emit(&Event::Executed {
                cycle: n,
                report: &report,
            });
            run.deleted += u32::try_from(
                report
                    .results
                    .iter()
                    .filter(|r| r.verb == Verb::Delete && r.outcome == Outcome::Succeeded)
                    .count(),
            )
            .unwrap_or(u32::MAX);
            let receipts = match self
                .record(conn, planes, run, &plan, Some(&report), started)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    // The receipts carry new API tokens' secrets, which PVE shows only once:
                    // kept in the repository directory instead of lost.
                    self.keep_token_secrets(name, &report, dir);
                    return Err(e);
                }
            };
            let failed =
                report.count(|o| matches!(o, Outcome::Failed { .. } | Outcome::Deferred { .. }));
            let not_started = report.count(|o| *o == Outcome::NotStarted);
            let blockers = plan.has_blockers();
            let waits = !plan.waiting.is_empty();
            run.cycles.push(cycle_run(plan, Some(report), receipts));
            if not_started > 0 {
                return Ok(RunResult::Stopped);
            }
            if max == 1 {
                return Ok(match (failed > 0, blockers, waits) {
                    (true, _, _) => RunResult::Failed,
                    (false, true, _) => RunResult::Stuck,
                    (false, false, true) => RunResult::Waiting,
                    (false, false, false) => RunResult::Applied,
                });
            }
            if *stop.borrow() {
                return Ok(RunResult::Stopped);
            }
        }
        // Cycles ran out, the last one still acting: whether it converged is unknown.
        let last_failed = run
            .cycles
            .last()
            .and_then(|c| c.report.as_ref())
            .is_some_and(|r| !r.all_succeeded());
        Ok(if last_failed {
            RunResult::Failed
        } else {
            RunResult::NotConverged
        })
    }

    /// Writes the encrypted secret of each API token the cycle created to
    /// `clusters/<cluster>/tokens/<name>.sops.yaml` under `dir`, with a warning naming it: what
    /// is left of the secret when its receipt could not be published.
    fn keep_token_secrets(&self, cluster: &str, report: &crate::execute::CycleReport, dir: &Path) {
        for r in &report.results {
            let Some(sealed) = &r.token else { continue };
            let name = r
                .subject
                .split_once('/')
                .map_or(r.subject.as_str(), |(_, n)| n);
            let shown = crate::objects::token::secret_file(cluster, name);
            let message = match crate::objects::token::write_sealed(&dir.join(&shown), &sealed.sops)
            {
                Ok(()) => format!(
                    "{}: its receipt could not be published; its secret (encrypted) is kept in {} instead (under {})",
                    r.subject,
                    shown.display(),
                    dir.display()
                ),
                Err(e) => format!(
                    "{}: its receipt could not be published and its secret could not be kept ({e}): delete the token by hand, ProxOps then makes it anew",
                    r.subject
                ),
            };
            self.emit(&Event::Warning { cluster, message });
        }
    }

    /// Publishes the receipts of one cycle, when the planes are recorded.
    async fn record(
        &self,
        conn: &Connection,
        planes: Option<&Planes>,
        run: &ClusterRun,
        plan: &ClusterPlan,
        report: Option<&crate::execute::CycleReport>,
        started: SystemTime,
    ) -> Result<Option<crate::planes::PublishedReceipts>, RunError> {
        let (Some(planes), Some(desired)) = (planes, &run.desired) else {
            return Ok(None);
        };
        let published = planes
            .record_cycle(&conn.client, &desired.state, plan, report, started)
            .await
            .map_err(RunError::Receipts)?;
        self.emit(&Event::Receipts {
            cluster: &run.cluster,
            refs: &planes.refs,
            published: &published,
        });
        Ok(Some(published))
    }

    /// The previous desired documents and the receipted resources (off the async threads:
    /// git reads).
    async fn previous(
        &self,
        planes: &Planes,
        prior: Option<&Arc<DesiredState>>,
    ) -> Result<Previous, RunError> {
        // The plane is shared, not copied: a copy of 1,000 documents per cycle was the largest
        // single allocation of a converged cycle.
        let (planes, prior, registry) =
            (planes.clone(), prior.cloned(), Arc::clone(&self.registry));
        tokio::task::spawn_blocking(move || {
            previous_and_receipted(&planes.store, &planes.refs, prior.as_deref(), &registry)
        })
        .await
        .map_err(joined)
        .and_then(|r| r)
        .map_err(RunError::Desired)
    }

    /// The cluster as the source at `revision` has it (its files under `dir`), with its graph.
    async fn load_at(
        &self,
        planes: &Planes,
        name: &str,
        revision: ObjectId,
        dir: &Path,
    ) -> Result<Workspace, RunError> {
        let (store, registry, name, dir) = (
            planes.store.clone(),
            Arc::clone(&self.registry),
            name.to_owned(),
            dir.to_path_buf(),
        );
        let fail = |reason: String| RunError::LiveSource {
            revision: hex(revision),
            reason,
        };
        let loaded = tokio::task::spawn_blocking(move || {
            let ws = Workspace::at_revision(
                &store,
                Some(&hex(revision)),
                &dir,
                registry,
                std::slice::from_ref(&name),
            )
            .map_err(|e| e.to_string())?;
            if ws.graph(&name).is_none() {
                return Err(format!("cluster `{name}` is invalid there"));
            }
            Ok::<_, String>(ws)
        })
        .await
        .map_err(|e| fail(e.to_string()))?;
        loaded.map_err(fail)
    }
}

/// How a run ends on a plan it does not execute.
fn settled(state: PlanState) -> RunResult {
    match state {
        PlanState::InSync => RunResult::InSync,
        PlanState::Changes => RunResult::Changes,
        PlanState::Stuck => RunResult::Stuck,
        PlanState::Waiting => RunResult::Waiting,
    }
}

fn cycle_run(
    plan: ClusterPlan,
    report: Option<crate::execute::CycleReport>,
    receipts: Option<crate::planes::PublishedReceipts>,
) -> CycleRun {
    CycleRun {
        plan,
        report,
        receipts,
    }
}

async fn read_prior(planes: &Planes) -> Result<Option<Arc<DesiredState>>, RunError> {
    let planes = planes.clone();
    tokio::task::spawn_blocking(move || planes.store.read_desired(&planes.refs, None))
        .await
        .map_err(joined)
        .and_then(|r| r)
        .map(|prior| prior.map(Arc::new))
        .map_err(RunError::Desired)
}

async fn publish(
    planes: &Planes,
    repository: &Repository,
    revision: ObjectId,
    prior: Option<&Arc<DesiredState>>,
) -> Result<crate::planes::PublishedDesired, RunError> {
    let (planes, repository, prior) = (planes.clone(), repository.clone(), prior.cloned());
    tokio::task::spawn_blocking(move || {
        planes.publish_desired_over(&repository, revision, prior.as_ref())
    })
    .await
    .map_err(joined)
    .and_then(|r| r)
    .map_err(RunError::Desired)
}
