//! What executing a plan reports: each action's outcome, a guarded update's steps, progress.
//! Data only, so that the options, the config writes and the guarded updates can name these
//! types without importing the executor.

use crate::failure::ActionError;
use crate::plan::{Action, Verb};
use serde::Serialize;
use std::sync::Arc;

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
#[non_exhaustive]
pub enum Outcome {
    /// It did what it should.
    Succeeded,
    /// PVE refused, a task failed, PVE could not be reached, ...: [`ActionError::kind`] says
    /// which. Serialized flattened: `"kind"`, `"status"` (when PVE answered one) and `"error"`,
    /// the message.
    Failed {
        /// What went wrong.
        #[serde(flatten)]
        error: ActionError,
    },
    /// Not done this cycle; retried next cycle. Either a prerequisite failed (`blocked_by`), or
    /// the guest was locked by other PVE work when the action reached it (`reason`: `locked
    /// (backup)` for a nightly vzdump, a snapshot, a migration), which PVE refused before
    /// writing anything.
    Deferred {
        /// The failed actions it waits for.
        blocked_by: Vec<usize>,
        /// Why, when it is not a failed prerequisite.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Not started because a stop was requested.
    NotStarted,
}

/// The result of one action.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ActionResult {
    /// The action's id in the plan.
    pub id: usize,
    /// `Kind/name`.
    pub subject: String,
    /// What it did.
    pub verb: Verb,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The PVE tasks it ran.
    pub upids: Vec<String>,
    /// How long it took.
    pub millis: u64,
    /// What it did as a step of a snapshot-guarded update ([`crate::guard`]): the snapshot,
    /// the check's finding, a rollback, the snapshots pruned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardReport>,
    /// An API token's create: its secret, encrypted with SOPS ([`crate::objects::token`]); the
    /// receipt carries it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<crate::objects::token::SealedToken>,
}

/// What a cycle did to one cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CycleReport {
    /// The cluster.
    pub cluster: String,
    /// One result per action, in plan order.
    pub results: Vec<ActionResult>,
}

impl CycleReport {
    /// How many actions ended with `outcome`'s variant.
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| pred(&r.outcome)).count()
    }

    /// Whether every action succeeded.
    pub fn all_succeeded(&self) -> bool {
        self.results.iter().all(|r| r.outcome == Outcome::Succeeded)
    }
}

/// A progress event, for terminals and logs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// An action started.
    Started(&'a Action),
    /// An action ended.
    Ended(&'a Action, &'a ActionResult),
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(Progress<'_>) + Send + Sync>;

/// What a step of a guarded update did, in an action's result (and from there in the
/// receipt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GuardReport {
    /// The ProxOps snapshot the update is guarded by.
    pub snapshot: String,
    /// What the check found, when it passed (`the guest agent answered after 12s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<String>,
    /// Whether the guest was rolled back to the snapshot.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rolled_back: bool,
    /// Why the rollback itself failed, when it did: the guest is as the failure left it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_failed: Option<String>,
    /// The ProxOps snapshots deleted beyond `keep`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<String>,
}

impl GuardReport {
    /// The report of a step guarded by `snapshot`, before anything happened.
    pub(crate) fn of(snapshot: &str) -> GuardReport {
        GuardReport {
            snapshot: snapshot.to_owned(),
            verified: None,
            rolled_back: false,
            rollback_failed: None,
            pruned: Vec::new(),
        }
    }

    /// Whether a rollback was tried (whether or not it worked): what the refusal memory keeps.
    pub fn rollback_tried(&self) -> bool {
        self.rolled_back || self.rollback_failed.is_some()
    }
}
