//! What the agent knows about each cluster, as `/status` shows it, and the suspensions an
//! operator set, kept in the data directory so that they survive restarts.

use proxops_engine::plan::{Anomaly, Skipped};
use proxops_engine::verify::{Difference, VerifyState};
use proxops_model::config::DriftMode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How a cluster's cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum CycleResult {
    /// Nothing to do: PVE matches the repository.
    Converged,
    /// Actions ran and all succeeded.
    Applied,
    /// Drift found and, in `report` mode, left alone.
    Drifted,
    /// An action failed, or the cluster could not be reached, planned or recorded.
    Failed,
    /// The cluster's configuration or manifests are invalid; nothing was done.
    Invalid,
    /// Another process holds the cluster's lease; nothing was done.
    Leased,
    /// The cluster is suspended; nothing was done.
    Suspended,
    /// A shutdown stopped the cycle before every action started.
    Stopped,
    /// Nothing could be planned, yet the cluster does not match (anomalies, locked or blocked
    /// resources, prunes held back): an operator must act.
    Stuck,
    /// Nothing else stands in the way, but consumers wait for what their reference
    /// expressions read: not converged (the cycle's `waiting` names them and why).
    Waiting,
}

impl CycleResult {
    /// The metric label value.
    pub fn label(self) -> &'static str {
        match self {
            CycleResult::Converged => "converged",
            CycleResult::Applied => "applied",
            CycleResult::Drifted => "drifted",
            CycleResult::Failed => "failed",
            CycleResult::Invalid => "invalid",
            CycleResult::Leased => "leased",
            CycleResult::Suspended => "suspended",
            CycleResult::Stopped => "stopped",
            CycleResult::Stuck => "stuck",
            CycleResult::Waiting => "waiting",
        }
    }

    /// Whether the cycle counts as a success for `last success` and health.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            CycleResult::Converged | CycleResult::Applied | CycleResult::Drifted
        )
    }
}

/// One cycle of one cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CycleRecord {
    /// When it started (RFC 3339, UTC).
    pub started: String,
    /// When it ended.
    pub finished: String,
    /// How long it took.
    pub duration_seconds: f64,
    /// How it ended.
    pub result: CycleResult,
    /// The source commit it reconciled (for a gated cluster: the one the live desired head
    /// pins).
    pub source_revision: Option<String>,
    /// The candidate branch a gated cluster's change was proposed on, if any.
    pub candidate: Option<String>,
    /// Actions planned.
    pub planned: usize,
    /// Actions that succeeded.
    pub succeeded: usize,
    /// Actions that failed.
    pub failed: usize,
    /// Actions deferred behind a failed prerequisite.
    pub deferred: usize,
    /// Actions a shutdown kept from starting.
    pub not_started: usize,
    /// Differences left alone.
    pub anomalies: Vec<Anomaly>,
    /// Resources not planned, with why (suspended, waiting for a prerequisite).
    pub skipped: Vec<Skipped>,
    /// Consumers that wait for what their reference expressions read, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Skipped>,
    /// The waiting consumers that waited longer than their `waitTimeout` (each also in
    /// `anomalies`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_timed_out: Vec<String>,
    /// Prunes held back by the budget or the empty-composition guard.
    pub deferred_prunes: Vec<Skipped>,
    /// What went wrong, in words.
    pub errors: Vec<String>,
    /// The desired plane's head after the cycle.
    pub desired_head: Option<String>,
    /// The observed plane's head after the cycle.
    pub observed_head: Option<String>,
    /// The plan's actions with what became of each (none when the plan was empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionLine>,
}

/// One planned action of a cycle and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ActionLine {
    /// `Kind/name`.
    pub subject: String,
    /// The PVE node it acts on.
    pub node: String,
    /// What it does (`create`, `update`, ...).
    pub verb: String,
    /// Why, in words.
    pub reason: String,
    /// `succeeded`, `failed`, `deferred` or `notStarted`; none when it was only planned (drift
    /// mode `report`, or a plan that was not executed).
    pub outcome: Option<String>,
    /// The error of a failed action.
    pub error: Option<String>,
    /// How long it ran.
    pub millis: Option<u64>,
    /// The config keys it writes, field by field, as `proxops diff` shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
}

/// One field an action changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FieldChange {
    /// The config key (or disk slot).
    pub key: String,
    /// Its live value; none when unset.
    pub from: Option<String>,
    /// The value written; none when the key is removed.
    pub to: Option<String>,
}

impl CycleRecord {
    /// A cycle started at `started` (RFC 3339, UTC) that ended as `result`: no action counted,
    /// nothing listed, no revision or plane head known; the fields are set from there.
    pub fn new(started: impl Into<String>, result: CycleResult) -> CycleRecord {
        CycleRecord {
            started: started.into(),
            finished: String::new(),
            duration_seconds: 0.0,
            result,
            source_revision: None,
            candidate: None,
            planned: 0,
            succeeded: 0,
            failed: 0,
            deferred: 0,
            not_started: 0,
            anomalies: Vec::new(),
            skipped: Vec::new(),
            waiting: Vec::new(),
            waits_timed_out: Vec::new(),
            deferred_prunes: Vec::new(),
            errors: Vec::new(),
            desired_head: None,
            observed_head: None,
            actions: Vec::new(),
        }
    }
}

/// One resource's state in the planes after the last cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResourceRow {
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
    /// `CLEAN`, `READY`, `WAIT` or `DELETING`.
    pub state: String,
    /// Why, in words.
    pub reason: String,
    /// The PVE node of what its receipt says exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The vmid of a guest, from its receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u64>,
    /// What its receipt says reconciling last achieved (`created`, `updated`, `inSync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// When that finished (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled: Option<String>,
    /// The blob id of its desired document (or deletion intent): what tells the notifier that
    /// an action on it is drift (the document did not change since it was last CLEAN).
    #[serde(skip)]
    pub document: Option<String>,
    /// What the agent's last verification (`reconcile.verify-interval`) found: drift stays
    /// until a later verification or cycle finds the resource in sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<ResourceCheck>,
}

/// One resource as a verification (`proxops verify`) last found it, or a cycle since.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceCheck {
    /// `inSync`, `drifted`, `missing` or `notVerified`.
    pub state: VerifyState,
    /// When PVE was read (RFC 3339, UTC).
    pub checked_at: String,
    /// What differs (drifted resources): key, desired and live values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<Difference>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl ResourceCheck {
    /// `state` found at `checked_at` because of `reason`, nothing listed as different.
    pub fn new(
        state: VerifyState,
        checked_at: impl Into<String>,
        reason: impl Into<String>,
    ) -> ResourceCheck {
        ResourceCheck {
            state,
            checked_at: checked_at.into(),
            differences: Vec::new(),
            reason: reason.into(),
        }
    }
}

/// A cluster's last verification by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct VerifyRecord {
    /// When PVE was read (RFC 3339, UTC).
    pub checked_at: String,
    /// How long it took.
    pub duration_seconds: f64,
    /// The desired commit verified against.
    pub desired_head: Option<String>,
    /// Resources found in sync.
    pub in_sync: usize,
    /// Resources found drifted.
    pub drifted: usize,
    /// Resources found missing.
    pub missing: usize,
    /// Resources not verified (no current receipt, or not readable).
    pub not_verified: usize,
    /// What kept resources from being verified, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl ResourceRow {
    /// `kind`/`name` in `state` (`CLEAN`, `READY`, `WAIT`, `DELETING`) because of `reason`.
    pub fn new(
        kind: impl Into<String>,
        name: impl Into<String>,
        state: impl Into<String>,
        reason: impl Into<String>,
    ) -> ResourceRow {
        ResourceRow {
            kind: kind.into(),
            name: name.into(),
            state: state.into(),
            reason: reason.into(),
            node: None,
            vmid: None,
            outcome: None,
            reconciled: None,
            document: None,
            verify: None,
        }
    }
}

/// One cluster in `/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterState {
    /// The cluster.
    pub name: String,
    /// `correct` or `report`.
    pub drift: DriftMode,
    /// Whether an operator suspended the whole cluster.
    pub suspended: bool,
    /// Resources an operator suspended (`Kind/name`).
    pub suspended_resources: Vec<String>,
    /// Cycles run since the agent started.
    pub cycles: u64,
    /// The last cycle.
    pub last_cycle: Option<CycleRecord>,
    /// When a cycle last succeeded.
    pub last_success: Option<String>,
    /// Each desired resource's state in the planes.
    pub resources: Vec<ResourceRow>,
    /// The agent's last verification of the cluster (`reconcile.verify-interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verify: Option<VerifyRecord>,
}

impl ClusterState {
    /// A cluster no cycle has reached yet.
    pub fn new(name: &str) -> ClusterState {
        ClusterState {
            name: name.to_owned(),
            drift: DriftMode::Correct,
            suspended: false,
            suspended_resources: Vec::new(),
            cycles: 0,
            last_cycle: None,
            last_success: None,
            resources: Vec::new(),
            last_verify: None,
        }
    }

    /// The resources whose verification says drifted or missing.
    pub fn drifted(&self) -> usize {
        self.resources
            .iter()
            .filter(|r| r.verify.as_ref().is_some_and(|v| v.state.is_drift()))
            .count()
    }
}

/// Where the repository comes from and what the agent last read of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SourceState {
    /// The path or URL.
    pub location: String,
    /// The commit last read.
    pub revision: Option<String>,
    /// When it was last read.
    pub fetched: Option<String>,
    /// Why the last fetch or load failed, if it did.
    pub error: Option<String>,
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"AgentStatus",...}`: what `/status` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AgentStatus {
    /// Always `proxops/v1alpha1`.
    pub api_version: String,
    /// Always `AgentStatus`.
    pub kind: String,
    /// Who this agent is in leases.
    pub holder: String,
    /// When it started.
    pub started: String,
    /// Seconds between passes.
    pub interval_seconds: f64,
    /// Passes over the clusters run so far.
    pub passes: u64,
    /// The repository.
    pub source: SourceState,
    /// The clusters, by name.
    pub clusters: Vec<ClusterState>,
    /// Clusters whose directory is gone from the repository while their desired plane remains
    /// (their guests are left alone), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vanished: Vec<String>,
}

/// Suspensions set through the agent's control API, persisted as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Suspensions {
    /// Suspended clusters.
    pub clusters: BTreeSet<String>,
    /// Suspended resources (`Kind/name`) by cluster.
    pub resources: BTreeMap<String, BTreeSet<String>>,
}

impl Suspensions {
    /// The file they live in, under the data directory.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("suspensions.json")
    }

    /// Reads them (none when the file does not exist).
    pub fn load(data_dir: &Path) -> std::io::Result<Suspensions> {
        match std::fs::read(Suspensions::path(data_dir)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Suspensions::default()),
            Err(e) => Err(e),
        }
    }

    /// Writes them atomically: a half-written file never replaces a good one.
    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(data_dir)?;
        let path = Suspensions::path(data_dir);
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(tmp, path)
    }

    /// Suspends (`on`) or resumes a cluster, or one of its resources; returns whether that
    /// changed anything.
    pub fn set(&mut self, cluster: &str, resource: Option<&str>, on: bool) -> bool {
        match (resource, on) {
            (None, true) => self.clusters.insert(cluster.to_owned()),
            (None, false) => self.clusters.remove(cluster),
            (Some(r), true) => self
                .resources
                .entry(cluster.to_owned())
                .or_default()
                .insert(r.to_owned()),
            (Some(r), false) => {
                let changed = self
                    .resources
                    .get_mut(cluster)
                    .is_some_and(|set| set.remove(r));
                self.resources.retain(|_, set| !set.is_empty());
                changed
            }
        }
    }

    /// The suspended resources of `cluster`.
    pub fn resources_of(&self, cluster: &str) -> Vec<String> {
        self.resources
            .get(cluster)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn suspensions_round_trip_through_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Suspensions::load(dir.path()).unwrap();
        assert!(s.set("lab", None, true));
        assert!(!s.set("lab", None, true));
        assert!(s.set("home", Some("VM/web"), true));
        s.save(dir.path()).unwrap();
        let back = Suspensions::load(dir.path()).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.resources_of("home"), vec!["VM/web".to_owned()]);
        let mut back = back;
        assert!(back.set("home", Some("VM/web"), false));
        assert!(back.resources.is_empty());
    }
}
