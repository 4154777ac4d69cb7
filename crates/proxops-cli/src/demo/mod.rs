//! `proxops demo`: the whole story on simulators, in a private git copy of a repository.
//!
//! [`run`] takes [`DemoOptions`] and returns a [`DemoReport`], telling a [`DemoEventFn`] each
//! step as it happens:
//! 1. every cluster is reconciled by the [`Reconciler`](proxops_engine::Reconciler) (desired
//!    plane, plan, apply, receipts), then once more, which finds nothing to do;
//! 2. the resources of one cluster as `proxops get` lists them: each CLEAN, with its receipt;
//! 3. a change made by hand in PVE (a VM's memory, a tag removed) through the PVE API, reported
//!    by `proxops verify` ([`proxops_engine::verify`]: only reads), found as drift by the next cycle,
//!    restored, and a new receipt;
//! 4. a manifest taken out of the composition and committed: the deletion intent in the desired
//!    plane, the prune with its guards, the teardown recorded;
//! 5. a VM given `update-policy` and a disruptive change whose guest does not come back: the
//!    snapshot, the update, the failed check, the rollback, the receipt saying so, and a next
//!    cycle that leaves the same document alone ([`proxops_engine::guard`]);
//! 6. where to look next.
//!
//! Each cluster's simulator keeps its state in a file beside the copy, so a cycle sees what
//! the last one left, with PVE's stats lag (the simulator's default). The user's repository is
//! only read.

mod error;
mod story;
mod workspace;

use proxops_engine::execute::Progress;
use proxops_engine::plan::ClusterPlan;
use proxops_engine::planes::ResourceItem;
use proxops_engine::reconcile::{Event, RunResult};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use error::DemoError;
pub use story::run;

/// How the demo runs. Build with [`DemoOptions::new`] and the `with_*` setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct DemoOptions {
    /// The repository to copy (never written).
    pub source: PathBuf,
    /// Where to make the private copy (default: the system's temporary directory).
    pub parent: Option<PathBuf>,
    /// Keep the copy and the simulators' state after the demo.
    pub keep: bool,
    /// How long each simulated task runs.
    pub task_time: Duration,
    /// Told each step as it happens.
    pub events: Option<DemoEventFn>,
}

impl DemoOptions {
    /// The demo of the repository at `source`.
    pub fn new(source: impl Into<PathBuf>) -> DemoOptions {
        DemoOptions {
            source: source.into(),
            parent: None,
            keep: false,
            task_time: Duration::from_millis(50),
            events: None,
        }
    }

    /// Keeps the copy and the simulators' state.
    pub fn with_keep(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    /// Sets the event callback.
    pub fn with_events(mut self, events: DemoEventFn) -> Self {
        self.events = Some(events);
        self
    }
}

/// Told what the demo does as it does it.
pub type DemoEventFn = Arc<dyn Fn(&DemoEvent<'_>) + Send + Sync>;

/// A step of the demo, as it happens.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoEvent<'a> {
    /// A step begins (numbered from 1).
    Step {
        /// Its number.
        number: usize,
        /// What it shows.
        title: &'a str,
    },
    /// A reconcile cycle's event.
    Reconcile(&'a Event<'a>),
    /// An action started or ended.
    Progress {
        /// The cluster.
        cluster: &'a str,
        /// What happened.
        progress: Progress<'a>,
    },
    /// The resources of a cluster as the planes show them.
    Resources(&'a [ResourceItem]),
    /// Something done outside ProxOps, or a finding, in words.
    Note(&'a str),
    /// What `proxops verify` found of a cluster.
    Verified(&'a proxops_engine::verify::ClusterVerification),
}

/// What the demo did and found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DemoReport {
    /// The private copy (removed unless kept).
    pub repository: PathBuf,
    /// Whether the copy and the simulators' state were kept.
    pub kept: bool,
    /// Step 1: each cluster applied, then checked.
    pub clusters: Vec<ClusterApplied>,
    /// Step 2: the resources of one cluster.
    pub get: Listed,
    /// Step 3: a change by hand, found and restored.
    pub drift: Drifted,
    /// Step 4, when the repository declares a `Firewall`: a rule changed by hand restored, a
    /// rule added by hand kept.
    pub firewall: Option<FirewallDrift>,
    /// Step 4: a manifest removed, and its guest pruned.
    pub prune: Pruned,
    /// Step 5: a snapshot-guarded update rolled back.
    pub guarded: Guarded,
    /// Step 6: commands to go on with.
    pub next: Vec<String>,
}

impl DemoReport {
    /// Whether every step showed what it should: each cluster applied and then in sync, every
    /// resource CLEAN, the drift found and restored, the prune done and recorded, the guarded
    /// update rolled back, recorded and not tried again.
    pub fn succeeded(&self) -> bool {
        self.clusters.iter().all(|c| {
            c.result.is_success()
                && c.again == RunResult::InSync
                && c.repeated.is_empty()
                && c.tasks_again == 0
        }) && self.get.clean == self.get.items.len()
            && self.drift.verified
            && self.drift.found
            && self.drift.restored
            && self
                .firewall
                .as_ref()
                .is_none_or(|f| f.found && f.restored && f.hand_kept)
            && self.prune.intent_recorded
            && self.prune.deleted
            && self.prune.teardown_recorded
            && self.guarded.guarded
            && self.guarded.rolled_back
            && self.guarded.recorded
            && !self.guarded.retried
    }
}

/// One cluster's first apply and the cycle after it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterApplied {
    /// The cluster.
    pub cluster: String,
    /// How the apply ended.
    pub result: RunResult,
    /// Its plan.
    pub plan: Option<ClusterPlan>,
    /// Actions that succeeded.
    pub succeeded: usize,
    /// Actions that failed.
    pub failed: usize,
    /// The PVE tasks the simulator ran, by type (`qmcreate`, `qmstart`, `download`, ...).
    pub tasks: BTreeMap<String, usize>,
    /// Tasks of one type run more than once for one guest or file (`qmstart 110 on pve1 x2`): none, or
    /// something was done twice.
    pub repeated: Vec<String>,
    /// How the next cycle ended (in sync: nothing to do).
    pub again: RunResult,
    /// Tasks the next cycle started (none when in sync).
    pub tasks_again: usize,
    /// Receipts the apply published.
    pub receipts: usize,
}

/// The resources of one cluster, as `proxops get` shows them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Listed {
    /// The cluster.
    pub cluster: String,
    /// How many are CLEAN (a current receipt).
    pub clean: usize,
    /// The rows.
    pub items: Vec<ResourceItem>,
}

/// A change made by hand in PVE, and what the next cycle did about it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Drifted {
    /// The cluster.
    pub cluster: String,
    /// `Kind/name` of the changed guest.
    pub subject: String,
    /// Its vmid.
    pub vmid: u32,
    /// What was changed, `key: before -> after`.
    pub by_hand: Vec<String>,
    /// What `proxops verify` found of the guest right after the change, before any cycle.
    pub verify: Option<proxops_engine::verify::ResourceVerification>,
    /// Whether verify reported it drifted, exactly those keys, and nothing else drifted.
    pub verified: bool,
    /// Whether the next plan found exactly those keys.
    pub found: bool,
    /// The plan of that cycle.
    pub plan: Option<ClusterPlan>,
    /// Whether the guest's config is as declared again.
    pub restored: bool,
    /// The observed plane's new head after the cycle (its receipt).
    pub observed: Option<String>,
}

/// A firewall rule changed by hand, and one added by hand, and what the next cycle did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FirewallDrift {
    /// The cluster.
    pub cluster: String,
    /// `Firewall/<name>`.
    pub subject: String,
    /// The security group whose rule was changed.
    pub group: String,
    /// What was done by hand.
    pub by_hand: Vec<String>,
    /// Whether the next plan found exactly the changed rule (one update of the firewall).
    pub found: bool,
    /// Whether the rule is as declared again.
    pub restored: bool,
    /// Whether the rule added by hand is still there, first.
    pub hand_kept: bool,
    /// The plan of that cycle.
    pub plan: Option<ClusterPlan>,
    /// The observed plane's new head after the cycle.
    pub observed: Option<String>,
}

/// A manifest removed from the composition, and its guest pruned.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Pruned {
    /// The cluster.
    pub cluster: String,
    /// `Kind/name` of the removed resource.
    pub subject: String,
    /// Its vmid.
    pub vmid: u32,
    /// The composition line taken out.
    pub removed_line: String,
    /// The deletion intent's path in the desired plane, if recorded.
    pub intent: Option<String>,
    /// Whether the desired plane recorded the deletion intent.
    pub intent_recorded: bool,
    /// The plan of that cycle.
    pub plan: Option<ClusterPlan>,
    /// Whether the guest is gone from PVE.
    pub deleted: bool,
    /// Whether the observed plane recorded its teardown.
    pub teardown_recorded: bool,
    /// Guests of the cluster left in PVE (none of the others was touched).
    pub guests_left: usize,
}

/// A disruptive update guarded by a snapshot, whose guest did not come back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Guarded {
    /// The cluster.
    pub cluster: String,
    /// `Kind/name` of the VM.
    pub subject: String,
    /// Its vmid.
    pub vmid: u32,
    /// What the commit changed (`cores: 2 -> 4, state: started`).
    pub changed: String,
    /// The snapshot ProxOps took.
    pub snapshot: Option<String>,
    /// The plan of the cycle.
    pub plan: Option<ClusterPlan>,
    /// Whether the plan put the update between a `snapshot` and a `verify`.
    pub guarded: bool,
    /// What failed, with the rollback.
    pub failure: Option<String>,
    /// Whether the VM's config and power are what they were before.
    pub rolled_back: bool,
    /// Whether its receipt says `rolledBack`.
    pub recorded: bool,
    /// Whether the next cycle planned or ran anything for it (it should not).
    pub retried: bool,
    /// The observed plane's head after the cycle.
    pub observed: Option<String>,
}
