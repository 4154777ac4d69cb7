//! The agent's verifications (`reconcile.verify-interval`, [`super::AgentOptions::verify_interval`]):
//! between passes, never while one runs (the agent's loop does one thing at a time, so a cluster
//! is never verified during its own cycle), every cluster of the last loaded repository is
//! verified ([`proxops_engine::verify`]: only reads; no lease, no receipt), `parallel_clusters` at a time
//! and each for at most the stall timeout. What a verification finds stays in `/status` (each
//! resource's `verify`), the metrics (`proxops_resources_drifted`) and the dashboard until a
//! later verification or cycle finds the resource in sync. Drift is never corrected here: that
//! stays the cycle's job.

use super::cluster::backend_for;
use super::status::{ResourceCheck, ResourceRow, VerifyRecord};
use super::{Pass, Shared, lock};
use proxops_engine::execute::Outcome;
use proxops_engine::verify::{ClusterVerification, VerifyOptions, VerifyState, verify_cluster};
use proxops_model::ResourceKey;
use proxops_model::config::LogLevel;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use tokio::sync::Semaphore;

/// Verifies every cluster of `pass` but the suspended ones, and records what each found.
pub(crate) async fn run(shared: &Arc<Shared>, pass: &Arc<Pass>) {
    let suspensions = lock(&shared.suspensions).clone();
    let names: Vec<String> = pass
        .repo()
        .clusters
        .iter()
        .map(|c| c.name.clone())
        .filter(|n| !suspensions.clusters.contains(n))
        .collect();
    let limit = Arc::new(Semaphore::new(pass.options.parallel_clusters.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for name in names {
        let (pass, limit) = (Arc::clone(pass), Arc::clone(&limit));
        let suspended: BTreeMap<ResourceKey, String> = suspensions
            .resources_of(&name)
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
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let clock = Instant::now();
            let options = VerifyOptions::default()
                .with_registry(Arc::clone(&pass.registry))
                .with_default_log_level(LogLevel::Info)
                .with_suspended(suspended);
            let backend = backend_for(&pass, &name);
            let found = tokio::time::timeout(
                pass.options.stall_timeout,
                verify_cluster(
                    &pass.fetched.store,
                    &backend,
                    pass.repo(),
                    pass.workspace.dir(),
                    &name,
                    &options,
                ),
            )
            .await;
            (name, found, clock.elapsed().as_secs_f64())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((name, Ok(found), seconds)) => {
                for e in &found.errors {
                    tracing::warn!(cluster = %name, code = e.code(), "verification: {e}");
                }
                tracing::info!(
                    cluster = %name,
                    in_sync = found.count(VerifyState::InSync),
                    drifted = found.count(VerifyState::Drifted),
                    missing = found.count(VerifyState::Missing),
                    not_verified = found.count(VerifyState::NotVerified),
                    seconds,
                    "verification finished"
                );
                shared.record_verify(&found, seconds);
            }
            Ok((name, Err(_), _)) => tracing::warn!(
                cluster = %name,
                "verification took longer than the stall timeout; abandoned"
            ),
            Err(e) => tracing::error!(error = %e, "a cluster's verification panicked"),
        }
    }
}

impl Shared {
    /// Records a cluster's verification: its summary, each resource's finding (a resource
    /// found drifted keeps that until it is found in sync: a later "not verified" does not
    /// clear it), and the metrics.
    pub(crate) fn record_verify(&self, found: &ClusterVerification, seconds: f64) {
        let mut status = lock(&self.status);
        let entry = super::entry_of(&mut status, &found.cluster);
        entry.last_verify = Some(VerifyRecord {
            checked_at: found.checked_at.clone(),
            duration_seconds: seconds,
            desired_head: found.desired_revision.clone(),
            in_sync: found.count(VerifyState::InSync),
            drifted: found.count(VerifyState::Drifted),
            missing: found.count(VerifyState::Missing),
            not_verified: found.count(VerifyState::NotVerified),
            errors: found
                .errors
                .iter()
                .map(|e| format!("{e} [{}]", e.code()))
                .collect(),
        });
        let by_key: BTreeMap<(&str, &str), &proxops_engine::verify::ResourceVerification> = found
            .resources
            .iter()
            .map(|r| ((r.kind.as_str(), r.name.as_str()), r))
            .collect();
        for row in &mut entry.resources {
            let Some(v) = by_key.get(&(row.kind.as_str(), row.name.as_str())) else {
                continue;
            };
            let drifted_before = row.verify.as_ref().is_some_and(|c| c.state.is_drift());
            if v.state == VerifyState::NotVerified && drifted_before {
                continue;
            }
            row.verify = Some(ResourceCheck {
                differences: v.differences.clone(),
                ..ResourceCheck::new(v.state, found.checked_at.clone(), v.reason.clone())
            });
        }
        let drifted = entry.drifted();
        drop(status);
        self.changed();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.metrics.verified(&found.cluster, now);
        self.metrics.drifted(&found.cluster, drifted);
    }
}

/// The rows a cycle read (`rows`), with what verifications found of each carried over from
/// the rows before it (`before`); a resource found drifted that this cycle `outcome` found in
/// sync (CLEAN, its actions all succeeded, nothing anomalous or skipped) is in sync again.
pub(crate) fn carry_over(
    before: &[ResourceRow],
    rows: &mut [ResourceRow],
    outcome: &super::cluster::CycleOutcome,
) {
    let known: BTreeMap<(&str, &str), &ResourceCheck> = before
        .iter()
        .filter_map(|r| Some(((r.kind.as_str(), r.name.as_str()), r.verify.as_ref()?)))
        .collect();
    for row in rows.iter_mut() {
        let Some(check) = known.get(&(row.kind.as_str(), row.name.as_str())) else {
            continue;
        };
        row.verify = Some((*check).clone());
        if check.state.is_drift()
            && let Some(reason) = in_sync_after(row, outcome)
        {
            row.verify = Some(ResourceCheck::new(
                VerifyState::InSync,
                outcome.record.finished.clone(),
                reason,
            ));
        }
    }
}

/// Why `row` is in sync after the cycle of `outcome` (`None`: it may not be).
fn in_sync_after(
    row: &ResourceRow,
    outcome: &super::cluster::CycleOutcome,
) -> Option<&'static str> {
    let plan = outcome.plan.as_ref()?;
    if row.state != "CLEAN" {
        return None;
    }
    let subject = format!("{}/{}", row.kind, row.name);
    let held = plan.anomalies.iter().any(|a| a.subject == subject)
        || plan
            .skipped
            .iter()
            .chain(&plan.waiting)
            .any(|s| s.subject == subject);
    if held {
        return None;
    }
    let actions: Vec<usize> = plan
        .actions
        .iter()
        .filter(|a| a.kind == row.kind && a.name == row.name)
        .map(|a| a.id)
        .collect();
    if actions.is_empty() {
        return Some("a cycle found it in sync");
    }
    let report = outcome.report.as_ref()?;
    let all_succeeded = actions.iter().all(|id| {
        report
            .results
            .iter()
            .any(|r| r.id == *id && r.outcome == Outcome::Succeeded)
    });
    all_succeeded.then_some("a cycle set it back as reconciled")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::cluster::CycleOutcome;
    use crate::status::{CycleRecord, CycleResult};
    use proxops_engine::plan::{Anomaly, ClusterPlan};
    use proxops_engine::verify::Difference;

    fn drifted_row(name: &str, state: &str) -> ResourceRow {
        let mut row = ResourceRow::new("VM", name, state, "");
        row.verify = Some(ResourceCheck {
            differences: vec![Difference::new(
                "memory",
                Some("2048".into()),
                Some("4096".into()),
            )],
            ..ResourceCheck::new(VerifyState::Drifted, "2026-01-01T00:00:00Z", "changed")
        });
        row
    }

    fn outcome(plan: Option<ClusterPlan>) -> CycleOutcome {
        let mut record = CycleRecord::new("2026-01-01T01:00:00Z", CycleResult::Converged);
        record.finished = "2026-01-01T01:00:01Z".to_owned();
        let mut o = CycleOutcome::new("lab", record);
        o.plan = plan;
        o
    }

    /// A plan with nothing in it. The engine's plans are built only by its planner (the
    /// struct is non-exhaustive): a cluster without resources, planned against an empty
    /// simulator.
    fn empty_plan() -> ClusterPlan {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let sim = proxops_pve_sim::start(proxops_pve_sim::SimConfig::default())
                .await
                .unwrap();
            let client = proxops_test_support::sim::client(&sim);
            let graph =
                proxops_graph::Graph::build(&proxops_model::Registry::builtin(), &[]).unwrap();
            let options = proxops_engine::PlanOptions::default();
            let plan = proxops_engine::plan_cluster(&client, "lab", &graph, &options)
                .await
                .unwrap();
            sim.shutdown().await.unwrap();
            assert!(
                plan.actions.is_empty() && plan.anomalies.is_empty(),
                "{plan:?}"
            );
            plan
        })
    }

    #[test]
    fn drift_lasts_across_cycles_until_one_finds_the_resource_in_sync() {
        let before = vec![
            drifted_row("a", "CLEAN"),
            drifted_row("b", "CLEAN"),
            drifted_row("c", "CLEAN"),
        ];
        // The cycle read the planes again: no verification in its rows.
        let fresh = || {
            vec![
                ResourceRow::new("VM", "a", "CLEAN", ""),
                ResourceRow::new("VM", "b", "CLEAN", ""),
                ResourceRow::new("VM", "c", "READY", ""),
                ResourceRow::new("VM", "new", "CLEAN", ""),
            ]
        };
        // No plan (the cluster could not be planned): everything stays as verified.
        let mut rows = fresh();
        carry_over(&before, &mut rows, &outcome(None));
        let states: Vec<Option<VerifyState>> = rows
            .iter()
            .map(|r| r.verify.as_ref().map(|v| v.state))
            .collect();
        assert_eq!(
            states,
            [
                Some(VerifyState::Drifted),
                Some(VerifyState::Drifted),
                Some(VerifyState::Drifted),
                None
            ]
        );
        assert_eq!(rows[0].verify, before[0].verify);
        // A plan with nothing for `a`, an anomaly of `b`, and `c` no longer CLEAN: only `a` is
        // in sync again, at the cycle's end.
        let mut plan = empty_plan();
        plan.anomalies.push(Anomaly::new("VM/b", "scsi0 shrunk"));
        let mut rows = fresh();
        carry_over(&before, &mut rows, &outcome(Some(plan)));
        let a = rows[0].verify.as_ref().unwrap();
        assert_eq!(
            (a.state, a.checked_at.as_str(), a.reason.as_str()),
            (
                VerifyState::InSync,
                "2026-01-01T01:00:01Z",
                "a cycle found it in sync"
            )
        );
        assert!(a.differences.is_empty());
        assert_eq!(rows[1].verify.as_ref().unwrap().state, VerifyState::Drifted);
        assert_eq!(rows[2].verify.as_ref().unwrap().state, VerifyState::Drifted);
    }
}
