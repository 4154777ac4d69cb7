//! The planner's knobs: what a command allows (its prune budget, restarts), what it knows
//! from outside the cluster (suspensions, waits, refusals, the previous desired documents,
//! secrets) and the kind drivers.

use crate::desired::Drivers;
use crate::secrets::ClusterSecrets;
use proxops_model::{Resource, ResourceKey};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Knobs of the planner.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PlanOptions {
    /// Most guests deleted per command (an `apply`, a whole `converge`, one agent pass);
    /// `0` means no limit (default 3).
    pub prune_budget: u32,
    /// Guests this command already deleted in earlier cycles: they count against the budget.
    pub prunes_used: u32,
    /// The cluster's node allowlist: guests elsewhere are never deleted (empty: no check).
    pub allowed_nodes: Vec<String>,
    /// Config reads in flight at once.
    pub config_concurrency: usize,
    /// The kind drivers.
    pub drivers: Arc<Drivers>,
    /// Resources suspended from outside the repository (an agent's suspend command), with why.
    /// Resources annotated `proxops/reconcile: disabled` are suspended too. A suspended resource
    /// is neither changed nor pruned; its dependants are planned as usual.
    pub suspended: BTreeMap<ResourceKey, String>,
    /// Consumers that wait for what their reference expressions read, with why
    /// ([`crate::planes::plan_references`]): planned into
    /// [`crate::plan::ClusterPlan::waiting`], never changed nor pruned.
    pub waiting: BTreeMap<ResourceKey, String>,
    /// Migrations PVE refused for a reason that will not change by itself
    /// ([`crate::refusals`]): not planned again while their fingerprint is the same.
    pub refused: BTreeMap<ResourceKey, crate::refusals::Refusal>,
    /// Snapshot-guarded updates that failed and were rolled back ([`crate::refusals`], keyed
    /// by the desired document): not planned again while the document is the same.
    pub refused_updates: BTreeMap<ResourceKey, crate::refusals::Refusal>,
    /// The source revision being applied (a commit id): what ProxOps's snapshots are named
    /// after (`proxops-<revision>`, 12 digits). `None`: the desired document's id.
    pub source_revision: Option<String>,
    /// The cluster's SOPS secrets, for cloud-init references (`None`: not loaded; a resource
    /// with a reference is then skipped with an error naming it).
    pub secrets: Option<ClusterSecrets>,
    /// The desired plane's previous document of each resource: what ProxOps last reconciled
    /// (the document its latest receipt pins, else the one the desired head held before this
    /// cycle published). It proves which keys ProxOps owned, so a key removed from a manifest is
    /// removed from the guest, and it shows an artifact whose source changed under the same file
    /// name. `None`: the planes are not recorded; removed keys cannot be proven ours and are
    /// reported, never removed. A resource missing from the map is new to the planes.
    pub previous: Option<BTreeMap<ResourceKey, Arc<Resource>>>,
    /// The resources with a receipt on the observed plane: what ProxOps reconciled. It proves
    /// a cluster object without a free-text field for ProxOps's mark (a storage, a role, an
    /// ACL entry) ours, to change and to prune. `None`: the planes are not recorded; such an
    /// object is then only created, or left as it is when it matches.
    pub receipts: Option<std::collections::BTreeSet<ResourceKey>>,
    /// Without the planes, the repository directory under which a new API token's secret,
    /// encrypted, is written: `clusters/<cluster>/tokens/<name>.sops.yaml` (the
    /// [`Reconciler`](crate::Reconciler) sets it for runs that record no planes). With neither
    /// the planes nor this, a token is not created: its secret would be lost.
    pub token_files: Option<std::path::PathBuf>,
    /// Resources `proxops delete` marked, with the reason given
    /// ([`crate::planes::deleting`]): left out of the graph, their guests are pruned, and the
    /// prune says why.
    pub marked: BTreeMap<ResourceKey, Option<String>>,
    /// Whether a running guest declared `state: started` may be restarted (shut down, then
    /// started) for a change PVE applies only at the next start (default). When not, such a
    /// change is reported as an anomaly, "pending until restart", and the cluster is stuck.
    pub restarts: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            prune_budget: 3,
            prunes_used: 0,
            allowed_nodes: Vec::new(),
            config_concurrency: 8,
            drivers: Arc::new(Drivers::builtin()),
            suspended: BTreeMap::new(),
            waiting: BTreeMap::new(),
            marked: BTreeMap::new(),
            receipts: None,
            token_files: None,
            refused: BTreeMap::new(),
            refused_updates: BTreeMap::new(),
            source_revision: None,
            secrets: None,
            previous: None,
            restarts: true,
        }
    }
}

impl PlanOptions {
    /// Sets the most guests deleted per command (`0`: no limit).
    pub fn with_prune_budget(mut self, budget: u32) -> Self {
        self.prune_budget = budget;
        self
    }
    /// Sets how many guests this command already deleted.
    pub fn with_prunes_used(mut self, used: u32) -> Self {
        self.prunes_used = used;
        self
    }
    /// Sets the node allowlist (empty: no check).
    pub fn with_allowed_nodes(mut self, nodes: Vec<String>) -> Self {
        self.allowed_nodes = nodes;
        self
    }
    /// Sets how many config reads are in flight at once (at least one).
    pub fn with_config_concurrency(mut self, n: usize) -> Self {
        self.config_concurrency = n.max(1);
        self
    }
    /// Sets the kind drivers.
    pub fn with_drivers(mut self, drivers: Arc<Drivers>) -> Self {
        self.drivers = drivers;
        self
    }
    /// Sets the consumers that wait, with why.
    pub fn with_waiting(mut self, waiting: BTreeMap<ResourceKey, String>) -> Self {
        self.waiting = waiting;
        self
    }

    /// Sets the resources suspended from outside the repository, with why.
    pub fn with_suspended(mut self, suspended: BTreeMap<ResourceKey, String>) -> Self {
        self.suspended = suspended;
        self
    }
    /// Sets the cluster's SOPS secrets.
    pub fn with_secrets(mut self, secrets: Option<ClusterSecrets>) -> Self {
        self.secrets = secrets;
        self
    }
    /// Sets the resources with a receipt (`None`: the planes are not recorded).
    pub fn with_receipts(
        mut self,
        receipts: Option<std::collections::BTreeSet<ResourceKey>>,
    ) -> Self {
        self.receipts = receipts;
        self
    }
    /// Sets the directory new API tokens' encrypted secrets are written under when the planes
    /// are not recorded ([`PlanOptions::token_files`]).
    pub fn with_token_files(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.token_files = dir;
        self
    }
    /// Sets the previous desired documents (`None`: the planes are not recorded).
    pub fn with_previous(mut self, previous: Option<BTreeMap<ResourceKey, Arc<Resource>>>) -> Self {
        self.previous = previous;
        self
    }
    /// Allows or forbids restarts for changes PVE applies only at the next start.
    pub fn with_restarts(mut self, restarts: bool) -> Self {
        self.restarts = restarts;
        self
    }
}
