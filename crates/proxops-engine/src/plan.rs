//! The plan of one reconcile cycle: actions in dependency order, and what was left alone.

use crate::desired::{DesiredArtifact, DesiredGuest};
use crate::diff::{Change, Removal, Resize};
use proxops_pve::{GuestRef, Params};
use serde::{Deserialize, Serialize};

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Verb {
    /// Fetch an artifact onto a node's storage (download-url).
    Download,
    /// Delete an artifact's file whose source (url or checksum) changed under the same file
    /// name, then fetch it again.
    Replace,
    /// Create a guest (or clone it from its template), configure it, make it a template or
    /// start it as the manifest says.
    Create,
    /// Write changed config keys and grow disks; restart when a change needs it.
    Update,
    /// Move a guest's identity tags to the resource now declared at its vmid (a rename, or a
    /// kind change PVE can follow), writing any other changed keys with them.
    Retag,
    /// Add the ownership tags to a guest ProxOps did not create, whose live config already
    /// matches its (adopted) manifest; nothing else is written.
    Adopt,
    /// Start a guest.
    Start,
    /// Shut a guest down.
    Stop,
    /// Turn an existing guest of ours into the template the manifest declares.
    MarkTemplate,
    /// Destroy a guest of ours that the repository no longer declares.
    Delete,
    /// Move a guest to another node (`POST .../migrate`): its `node` changed, or it is outside
    /// its `nodes`.
    Migrate,
    /// Add the HA resource a guest declares (`ha:`), or (PVE 9) the node-affinity rule of its
    /// `ha.group`.
    HaAdd,
    /// Change a guest's HA resource (state, group, limits), or its node-affinity rule.
    HaUpdate,
    /// Remove the HA resource of a guest whose manifest no longer declares `ha:`, or the
    /// node-affinity rule of a removed `ha.group`.
    HaRemove,
    /// Take the PVE snapshot a disruptive update is guarded by (`update-policy`,
    /// [`crate::guard`]).
    Snapshot,
    /// Check a guest after a guarded update (its guest agent answers, or it runs); roll it back
    /// to the snapshot when it does not.
    Verify,
    /// Delete ProxOps's snapshots of a guest beyond `update-policy.keep`, after a guarded
    /// update succeeded.
    PruneSnapshots,
}

/// One changed key, for display: a value written, or (`delete`) a key removed from the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeyChange {
    /// The config key.
    pub key: String,
    /// Its live value (absent when unset).
    pub from: Option<String>,
    /// The value written; absent when the key is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Whether the key is deleted (`delete=<key>`): ProxOps wrote it before and the manifest no
    /// longer declares it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
    /// Parts of the live value taken out of it (sub-keys, tags) because ProxOps wrote them
    /// before and the manifest no longer declares them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

impl KeyChange {
    /// `key` written with `to` (its live value `from`).
    pub fn set(key: impl Into<String>, from: Option<String>, to: impl Into<String>) -> KeyChange {
        KeyChange {
            key: key.into(),
            from,
            to: Some(to.into()),
            delete: false,
            removed: Vec::new(),
        }
    }

    /// `key` deleted (its live value `from`).
    pub fn deleted(key: impl Into<String>, from: impl Into<String>) -> KeyChange {
        KeyChange {
            key: key.into(),
            from: Some(from.into()),
            to: None,
            delete: true,
            removed: Vec::new(),
        }
    }

    /// The keys written and deleted, shown in key order.
    pub fn sorted(
        set: impl IntoIterator<Item = KeyChange>,
        deleted: impl IntoIterator<Item = KeyChange>,
    ) -> Vec<KeyChange> {
        let mut out: Vec<KeyChange> = set.into_iter().chain(deleted).collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

/// One disk growth, for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DiskGrowth {
    /// The slot.
    pub disk: String,
    /// Live size in bytes.
    pub from: u64,
    /// Desired size in bytes.
    pub to: u64,
}

/// What the executor runs for an action.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Download {
        artifact: DesiredArtifact,
    },
    Replace {
        artifact: DesiredArtifact,
    },
    Create {
        desired: Box<DesiredGuest>,
    },
    Update {
        desired: Box<DesiredGuest>,
        changes: Vec<Change>,
        removals: Vec<Removal>,
        resizes: Vec<Resize>,
        digest: Option<String>,
        restart: bool,
        /// The snapshot taken before a guarded update: rolled back to when it fails.
        guard: Option<Guard>,
    },
    Start {
        guest: GuestRef,
    },
    /// The start that completes a guarded update of a stopped guest: rolled back to the
    /// snapshot when it fails.
    GuardedStart {
        guest: GuestRef,
        guard: Guard,
    },
    Stop {
        guest: GuestRef,
    },
    MarkTemplate {
        guest: GuestRef,
        running: bool,
    },
    Delete {
        guest: GuestRef,
        running: bool,
        /// The HA resource managing it, removed first (PVE refuses to destroy an HA guest
        /// without `purge`, and a running one is stopped only through HA otherwise).
        ha: Option<String>,
    },
    Migrate {
        guest: GuestRef,
        request: proxops_pve::api::ha::MigrateRequest,
    },
    Ha {
        write: HaWrite,
        create: bool,
        guest: GuestRef,
    },
    HaRemove {
        sid: String,
    },
    /// The node-affinity rule standing for `ha.group` on PVE 9 (`planner/ha_rules.rs`).
    HaRule {
        id: String,
        create: bool,
        params: proxops_pve::Params,
    },
    HaRuleRemove {
        id: String,
    },
    /// The snapshot before a guarded update ([`crate::guard`]).
    Snapshot {
        guard: Guard,
        /// Save a running VM's memory.
        vmstate: bool,
    },
    /// The check after a guarded update; a rollback when it fails.
    Verify {
        guard: Guard,
        check: Check,
        timeout: std::time::Duration,
    },
    /// One API call on a cluster object ([`crate::objects`]).
    Object(crate::objects::ObjectRequest),
    /// An API token's create: PVE answers its secret only then, and the executor encrypts it
    /// at once with SOPS to `recipients` ([`crate::objects::token`]); the clear value never
    /// leaves it.
    Token {
        request: crate::objects::ObjectRequest,
        /// The age recipients of the cluster's SOPS secrets file.
        recipients: Vec<String>,
        /// Without the planes, the file the encrypted secret is written to (a SOPS file `sops
        /// -d` opens); with them, `None`: the receipt's artifact carries it.
        file: Option<std::path::PathBuf>,
    },
    /// `PUT /cluster/sdn`: the pending SDN configuration applied (a worker task).
    SdnApply,
    /// A firewall rule list brought to the manifest's rules, at run time from a fresh read
    /// ([`crate::objects::rules::apply`]).
    Rules {
        endpoints: crate::objects::Endpoints,
        rules: Vec<crate::objects::rules::Rule>,
        /// The identity whose marks say which rules are ProxOps's.
        owner: String,
    },
    /// ProxOps's snapshots beyond `keep`, oldest first.
    PruneSnapshots {
        guest: GuestRef,
        /// The snapshot of the update the pruning follows.
        snapshot: String,
        names: Vec<String>,
        keep: u32,
    },
}

/// What to write to an HA resource: its options, and those to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HaWrite {
    /// `vm:<vmid>` or `ct:<vmid>`.
    pub sid: String,
    /// Options set (`state`, `group`, `max_restart`, `max_relocate`).
    pub set: Vec<(String, String)>,
    /// Options dropped (back to PVE's default).
    pub delete: Vec<String>,
    /// The power state to wait for afterwards (`running`, `stopped`), if the HA state decides.
    pub wait: Option<&'static str>,
}

impl HaWrite {
    /// The request parameters.
    pub(crate) fn params(&self) -> Params {
        let mut p = Params::new();
        for (k, v) in &self.set {
            p.push(k, v);
        }
        if !self.delete.is_empty() {
            p.push("delete", self.delete.join(","));
        }
        p
    }
}

/// What a rollback needs: the guest, the snapshot, and whether the guest ran when it was taken.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// The guest.
    pub guest: GuestRef,
    /// The snapshot's name.
    pub snapshot: String,
    /// The snapshot's description (marked when the guest is rolled back to it).
    pub description: String,
    /// Whether the guest ran when the snapshot was taken: it is started again after a rollback.
    pub running: bool,
    /// The desired document's id ([`crate::guard::document_id`]): what a rollback keeps from
    /// being tried again ([`crate::refusals`]).
    pub document: String,
}

/// What the check after a guarded update asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The VM's QEMU guest agent answers `ping`.
    Agent,
    /// The guest runs (`status/current`).
    Running,
}

/// One step of the plan.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Action {
    /// Its index in the plan.
    pub id: usize,
    /// The dependency level of its resource (prunes: none).
    pub level: Option<u32>,
    /// The resource's kind.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The PVE node.
    pub node: String,
    /// The guest's vmid.
    pub vmid: Option<u32>,
    /// What it does.
    pub verb: Verb,
    /// Why, in a few words.
    pub reason: String,
    /// Config keys written or deleted (updates).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<KeyChange>,
    /// Disks grown (updates).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resizes: Vec<DiskGrowth>,
    /// Whether the guest restarts for the change to take effect.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restart: bool,
    /// Actions that must succeed first.
    pub after: Vec<usize>,
    #[serde(skip)]
    pub(crate) op: Op,
}

/// Something that differs and that ProxOps will not change by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Anomaly {
    /// `Kind/name` of the resource, or the guest (`vmid 120`) when none is declared.
    pub subject: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl Anomaly {
    /// An anomaly of `subject`.
    pub fn new(subject: impl Into<String>, message: impl Into<String>) -> Anomaly {
        Anomaly {
            subject: subject.into(),
            message: message.into(),
        }
    }
}

/// A resource not looked at in this cycle, and why (retried next cycle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Skipped {
    /// `Kind/name`.
    pub subject: String,
    /// Why.
    pub reason: String,
}

impl Skipped {
    /// `subject` skipped for `reason`.
    pub fn new(subject: impl Into<String>, reason: impl Into<String>) -> Skipped {
        Skipped {
            subject: subject.into(),
            reason: reason.into(),
        }
    }
}

/// A resource that cannot be planned until the repository or its secrets are fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceError {
    /// `Kind/name`.
    pub subject: String,
    /// The stable code (`proxops::cloud_init_secret`, `proxops::ssh_key`, `proxops::no_template`,
    /// `proxops::volume_without_guest`).
    pub code: String,
    /// What is wrong and what to do; never a secret value.
    pub reason: String,
}

/// The plan of one cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterPlan {
    /// The cluster.
    pub cluster: String,
    /// Actions in execution order (prerequisites first, prunes last).
    pub actions: Vec<Action>,
    /// Differences left alone.
    pub anomalies: Vec<Anomaly>,
    /// Resources not planned this cycle.
    pub skipped: Vec<Skipped>,
    /// Consumers not planned because they wait for what a reference expression reads (a
    /// producer's receipt or artifact not there yet, or that will never be): neither created,
    /// changed nor pruned, and the cluster is not in sync while any waits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Skipped>,
    /// Resources that cannot be planned until the repository or its secrets are fixed (a
    /// cloud-init secret reference that does not resolve, an SSH key PVE would refuse); a
    /// command exits non-zero.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ResourceError>,
    /// Prunes held back (budget, empty-composition guard).
    pub deferred_prunes: Vec<Skipped>,
    /// Manifest settings PVE cannot express.
    pub warnings: Vec<String>,
    /// Where each placed guest (`nodes:`) is: the node it was found on or is created on, and
    /// why. Receipts record it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
    /// The vmids of the guests of ours that were running when planned and can tell their
    /// addresses: a VM whose live config enables the QEMU guest agent, any container. Receipts
    /// read their `ip-addresses` from them ([`crate::planes::enrich`]); no other guest is asked.
    #[serde(skip)]
    pub addressable: std::collections::BTreeSet<u32>,
    /// What each planned migration (`Kind/name`) was decided from
    /// ([`crate::refusals`]): remembered with a permanent failure, so that the same migration
    /// is not sent again.
    #[serde(skip)]
    pub migration_fingerprints: std::collections::BTreeMap<String, String>,
}

/// The node of a placed guest, and why it is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Placement {
    /// `Kind/name`.
    pub subject: String,
    /// The node.
    pub node: String,
    /// Why: found there, or picked (with the facts).
    pub reason: String,
}

impl ClusterPlan {
    /// Whether the plan has no action. An empty plan is not a converged cluster: see
    /// [`ClusterPlan::state`].
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// Whether the cluster matches the repository, has changes planned, or is stuck.
    pub fn state(&self) -> PlanState {
        if !self.actions.is_empty() {
            return PlanState::Changes;
        }
        if self.has_blockers() {
            PlanState::Stuck
        } else if !self.waiting.is_empty() {
            PlanState::Waiting
        } else {
            PlanState::InSync
        }
    }

    /// Whether something only an operator can clear keeps the cluster from matching: an
    /// anomaly, an error, a resource not planned (suspensions aside) or a prune held back.
    pub fn has_blockers(&self) -> bool {
        !self.anomalies.is_empty()
            || !self.errors.is_empty()
            || !self.deferred_prunes.is_empty()
            || !self.skipped.iter().all(Skipped::is_suspension)
    }

    /// What keeps a stuck or waiting cluster from matching, counted (`2 anomalies, 1 resource
    /// waiting`).
    pub fn stuck_summary(&self) -> String {
        let blocked = self.skipped.iter().filter(|s| !s.is_suspension()).count();
        let parts = [
            (self.anomalies.len(), "anomaly", "anomalies"),
            (self.errors.len(), "error", "errors"),
            (blocked, "resource not planned", "resources not planned"),
            (self.waiting.len(), "resource waiting", "resources waiting"),
            (
                self.deferred_prunes.len(),
                "prune held back",
                "prunes held back",
            ),
        ];
        parts
            .iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|(n, one, many)| format!("{n} {}", if *n == 1 { one } else { many }))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How a cluster stands after planning: what `diff --detailed-exitcode` tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum PlanState {
    /// Nothing to do and nothing in the way: the cluster matches the repository (suspended
    /// resources aside, which are left alone on purpose).
    InSync,
    /// Actions are planned.
    Changes,
    /// Nothing can be planned, yet the cluster does not match: anomalies, locked or blocked
    /// resources, unresolved secrets or prunes held back need an operator.
    Stuck,
    /// Nothing else stands in the way, but consumers wait for what their reference expressions
    /// read ([`ClusterPlan::waiting`]): not in sync until they are planned.
    Waiting,
}

impl Skipped {
    /// Whether the resource was skipped because it is suspended (on purpose, not stuck).
    pub fn is_suspension(&self) -> bool {
        self.reason.starts_with(SUSPENDED_PREFIX)
    }
}

/// How the reason of a suspended resource's skip starts.
pub const SUSPENDED_PREFIX: &str = "suspended: ";

/// `{"apiVersion":"proxops/v1alpha1","kind":"Plan","clusters":[...]}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Plan {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `Plan`.
    pub kind: &'static str,
    /// One plan per cluster, in name order.
    pub clusters: Vec<ClusterPlan>,
}

impl Plan {
    /// A plan document of the clusters' plans.
    pub fn new(clusters: Vec<ClusterPlan>) -> Plan {
        Plan {
            api_version: proxops_model::report::REPORT_API_VERSION,
            kind: "Plan",
            clusters,
        }
    }

    /// The number of actions over every cluster.
    pub fn action_count(&self) -> usize {
        self.clusters.iter().map(|c| c.actions.len()).sum()
    }
}
