//! Migrations PVE refused for a reason trying again cannot change, remembered so that they are
//! not sent again every cycle ([`Refusals`]).
//!
//! A migration's fingerprint is what it was decided from: the target node, the guest's config
//! (without `lock`, which PVE itself sets and clears around the attempt: qemu-server
//! `PVE/QemuMigrate.pm` `phase1`), the volumes its snapshots reference, and the resource's
//! desired spec. A permanent failure (a worker that died, a refused request:
//! [`proxops_pve::ErrorClass::Permanent`]) is remembered with that fingerprint; while the
//! fingerprint stays the same the planner reports an anomaly instead of migrating. A change of
//! the manifest or of the guest (a deleted snapshot, a detached device) makes a new fingerprint,
//! and the migration is planned again.
//!
//! Snapshot-guarded updates ([`crate::guard`]) that failed and were rolled back are remembered
//! the same way, their fingerprint the desired document's id: the same document is not tried
//! again (an anomaly instead) until the manifest changes ([`Refusals::updates_of`]).

use crate::execute::report::{CycleReport, Outcome};
use crate::failure::FailureKind;
use crate::plan::{ClusterPlan, Verb};
use proxops_model::ResourceKey;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// A refused migration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// What the migration was decided from.
    pub fingerprint: String,
    /// PVE's error.
    pub message: String,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// For a rolled-back guarded update: the snapshot the guest was rolled back to. Deleting
    /// it from the guest lets the same document be tried again.
    pub snapshot: Option<String>,
}

/// The refused migrations (and rolled-back guarded updates) of each cluster, shared by the
/// cycles of a run (and, in the agent, by its passes). Cloning shares the memory.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<Memory>>);

/// Per cluster, per resource.
type PerCluster = BTreeMap<String, BTreeMap<ResourceKey, Refusal>>;

#[derive(Debug, Default)]
struct Memory {
    migrations: PerCluster,
    updates: PerCluster,
}

impl Refusals {
    /// The refused migrations remembered for `cluster`.
    pub fn of(&self, cluster: &str) -> BTreeMap<ResourceKey, Refusal> {
        self.lock()
            .migrations
            .get(cluster)
            .cloned()
            .unwrap_or_default()
    }

    /// The guarded updates of `cluster` rolled back, by resource (the fingerprint: the desired
    /// document's id).
    pub fn updates_of(&self, cluster: &str) -> BTreeMap<ResourceKey, Refusal> {
        self.lock()
            .updates
            .get(cluster)
            .cloned()
            .unwrap_or_default()
    }

    /// Remembers that PVE refused migrating `key` of `cluster`.
    pub fn refused(&self, cluster: &str, key: ResourceKey, refusal: Refusal) {
        self.lock()
            .migrations
            .entry(cluster.to_owned())
            .or_default()
            .insert(key, refusal);
    }

    /// Learns from executing `plan` on `cluster`: remembers each migration PVE refused for
    /// good (a refusal, a worker that died), forgets each that went through; remembers each
    /// guarded update that was rolled back (or whose rollback was tried), forgets the
    /// resources whose guarded update went through.
    pub fn record(&self, cluster: &str, plan: &ClusterPlan, report: &CycleReport) {
        self.record_updates(cluster, plan, report);
        for r in report.results.iter().filter(|r| r.verb == Verb::Migrate) {
            let Some(action) = plan.actions.get(r.id) else {
                continue;
            };
            let key = ResourceKey {
                kind: action.kind.clone(),
                name: action.name.clone(),
            };
            match &r.outcome {
                Outcome::Succeeded => self.forget(cluster, &key),
                Outcome::Failed { error }
                    if matches!(
                        error.kind(),
                        FailureKind::PveRefused | FailureKind::TaskFailed
                    ) =>
                {
                    if let Some(fingerprint) = plan.migration_fingerprints.get(&r.subject) {
                        let refusal = Refusal {
                            fingerprint: fingerprint.clone(),
                            message: error.to_string(),
                            at: proxops_store::documents::utc_timestamp(SystemTime::now()),
                            snapshot: None,
                        };
                        self.refused(cluster, key, refusal);
                    }
                }
                _ => {}
            }
        }
    }

    /// Forgets `key` of `cluster` (it migrated).
    pub fn forget(&self, cluster: &str, key: &ResourceKey) {
        if let Some(c) = self.lock().migrations.get_mut(cluster) {
            c.remove(key);
        }
    }

    fn record_updates(&self, cluster: &str, plan: &ClusterPlan, report: &CycleReport) {
        for r in &report.results {
            let Some(action) = plan.actions.get(r.id) else {
                continue;
            };
            let Some(guard) = crate::guard::guard_of(&action.op) else {
                continue;
            };
            let key = ResourceKey {
                kind: action.kind.clone(),
                name: action.name.clone(),
            };
            let mut memory = self.lock();
            let updates = memory.updates.entry(cluster.to_owned()).or_default();
            match &r.outcome {
                Outcome::Failed { error }
                    if r.guard.as_ref().is_some_and(|g| g.rollback_tried()) =>
                {
                    updates.insert(
                        key,
                        Refusal {
                            fingerprint: guard.document.clone(),
                            message: error.to_string(),
                            at: proxops_store::documents::utc_timestamp(SystemTime::now()),
                            snapshot: Some(guard.snapshot.clone()),
                        },
                    );
                }
                Outcome::Succeeded if action.verb != Verb::Snapshot => {
                    updates.remove(&key);
                }
                _ => {}
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
