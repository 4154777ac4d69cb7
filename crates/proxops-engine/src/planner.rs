//! The planner: one cluster's graph and live PVE state in, a [`ClusterPlan`] out.
//!
//! Reads one `/cluster/resources` listing, the guest list of each (node, guest type) holding
//! guests of ours (live power state), the content of each (node, storage) an artifact uses,
//! and the config of each guest of ours; never waits for a guest agent. A step that cannot be
//! planned (a guest at our vmid that is not ours, a lock, an unreadable listing) is reported and
//! its dependants are skipped this cycle, so nothing is built on an unknown foundation. What
//! the cluster's PVE would refuse (its version, `compat`, read once per connection,
//! or a storage without the content a step puts there) is an anomaly before anything is sent.

use crate::compat::{self, Release};
use crate::desired::{
    Context, Desired, DesiredArtifact, DesiredError, DesiredGuest, Drivers, IDENTITY_PREFIX,
    OWNER_TAG, identity_tag,
};
use crate::diff::{after_clone, diff_since, mark_pending, words};
use crate::identity::{Guests, owned_by_proxops, untagged};
use crate::plan::{
    Action, Anomaly, ClusterPlan, DiskGrowth, KeyChange, Op, ResourceError, SUSPENDED_PREFIX,
    Skipped, Verb,
};
use crate::secrets::ClusterSecrets;
use proxops_graph::{Deferral, Graph, StepId};
use proxops_model::kinds::PowerState;
use proxops_model::{Resource, ResourceKey};
use proxops_pve::{
    GuestConfig, GuestInfo, GuestRef, GuestType, Inventory, PendingEntry, PveClient, PveError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod guarded;
mod ha;
mod ha_rules;
mod placement;
mod snapshots;

/// The code of a resource with reference expressions planned without the planes.
pub const NEEDS_PLANES: &str = "proxops::reference::needs_planes";

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
    /// ([`crate::planes::plan_references`]): planned into [`ClusterPlan::waiting`], never
    /// changed nor pruned.
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

/// Why a cluster could not be planned at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The inventory listing failed.
    #[error("cannot read the cluster's inventory: {0}")]
    Inventory(#[source] PveError),
    /// `GET /version` failed.
    #[error("cannot read the cluster's PVE version: {0}")]
    Version(#[source] PveError),
}

/// Plans one cluster against the live state `client` reaches.
pub async fn plan_cluster(
    client: &PveClient,
    cluster: &str,
    graph: &Graph,
    options: &PlanOptions,
) -> Result<ClusterPlan, PlanError> {
    let mut inventory = client.inventory().await.map_err(PlanError::Inventory)?;
    // Read once per connection (the client keeps it): which PVE rules apply.
    let version = client.pve_version().await.map_err(PlanError::Version)?;
    let release = Release::of(&version);
    // `/cluster/resources` serves power state and template flag from a stats cache up to 10 s
    // old (pve-manager `PVE/API2Tools.pm` `extract_vm_stats`): a guest just started or made a
    // template still looks stopped or a plain guest there. The power state of our guests comes
    // from their nodes' live lists instead, one request per (node, guest type).
    let lists: BTreeSet<(String, GuestType)> = inventory
        .guests
        .values()
        .filter(|g| owned_by_proxops(g))
        .map(|g| (g.node.clone(), g.kind))
        .collect();
    let list_failures = inventory
        .read_live_power(client, lists, options.config_concurrency)
        .await;
    let cx = Context {
        secrets: options.secrets.as_ref(),
        ..Context::new(cluster, graph)
    };
    let guests = Guests::new(cluster, graph, &inventory, |key| {
        let id = graph.find(&key.kind, &key.name)?;
        match options.drivers.desired(&cx, graph.resource(id)) {
            Ok(Desired::Guest(d)) => d.clone.map(|c| c.vmid),
            _ => None,
        }
    });
    let mut planner = Planner {
        cx,
        inventory: &inventory,
        guests,
        plan: ClusterPlan {
            cluster: cluster.to_owned(),
            actions: Vec::new(),
            anomalies: Vec::new(),
            skipped: Vec::new(),
            waiting: Vec::new(),
            errors: Vec::new(),
            deferred_prunes: Vec::new(),
            warnings: Vec::new(),
            placements: Vec::new(),
            addressable: BTreeSet::new(),
            migration_fingerprints: BTreeMap::new(),
        },
        step_actions: BTreeMap::new(),
        blocked: BTreeSet::new(),
        deferral: None,
        config_concurrency: options.config_concurrency,
        release,
        planned_memory: BTreeMap::new(),
        ha: None,
        ha_rules: None,
        snapshots: BTreeMap::new(),
        refused: &options.refused,
        refused_updates: &options.refused_updates,
        guard_snapshots: BTreeMap::new(),
        source_revision: options.source_revision.clone(),
    };
    // HA resources, read once when a guest declares `ha:` or a guest of ours has one.
    let declares_ha = graph.resources().any(|r| {
        matches!(options.drivers.desired(&cx, graph.resource(r)), Ok(Desired::Guest(d)) if d.ha.is_some())
    });
    let has_ha = inventory
        .guests
        .values()
        .any(|g| owned_by_proxops(g) && g.hastate.is_some());
    if declares_ha || has_ha {
        planner.ha = Some(client.ha_resources().await);
        // PVE 9 keeps `ha.group` as node-affinity rules (`planner/ha_rules.rs`).
        if planner.ha_uses_rules() {
            planner.ha_rules = Some(client.ha_rules().await);
        }
    }
    if release.is_none() {
        planner.plan.warnings.push(format!(
            "the cluster's /version (release `{}`, version `{}`) names no PVE release: the version rules (plain .tar templates from 9.1, import content from 8.3) are not checked",
            version.release, version.version
        ));
    }
    for (node, kind, e) in list_failures {
        planner.plan.warnings.push(format!(
            "cannot read the {} guests of node `{node}`: {e}; their power state is unknown and they are not planned this cycle",
            kind.as_str()
        ));
    }
    // Configs of the guests of ours at vmids the repository declares (whichever identity they
    // carry: a renamed resource's or a template's), and of untagged guests there (to adopt
    // them if they match), read in one bounded batch.
    let mut wanted = Vec::new();
    let mut running = Vec::new();
    let mut seen = BTreeSet::new();
    for step in graph.steps() {
        if let Some(live) = step.vmid.and_then(|v| inventory.guest(v))
            && (untagged(live)
                || owned_by_proxops(live)
                    && !planner.guests.identities(cluster, &live.tags).is_empty())
            && seen.insert(live.vmid)
        {
            if live.status == "running" {
                running.push(live.guest_ref());
            } else {
                wanted.push(live.guest_ref());
            }
        }
    }
    // A stopped guest takes every write at once: its config (`current=1`) is all there is. A
    // running guest's `GET .../pending` gives both what it runs with (each row's value, and
    // the digest) and what waits for its next start, in one request.
    let running_kinds: Vec<(u32, GuestType)> = running.iter().map(|g| (g.vmid, g.kind)).collect();
    let (configs, pendings) = {
        let mut configs = client
            .guest_configs(wanted, options.config_concurrency)
            .await;
        let mut pendings = BTreeMap::new();
        for (vmid, rows) in client
            .guest_pendings(running, options.config_concurrency)
            .await
        {
            match rows {
                Ok(rows) => {
                    configs.insert(vmid, Ok(GuestConfig::from_pending(&rows)));
                    pendings.insert(vmid, Ok(rows));
                }
                Err(e) => {
                    configs.insert(vmid, Err(e));
                }
            }
        }
        (configs, pendings)
    };
    // Which running guests can tell their addresses: a container always (PVE reads its network
    // namespace), a VM when its guest agent is enabled.
    for (vmid, kind) in running_kinds {
        let agent = || {
            configs
                .get(&vmid)
                .and_then(|c| c.as_ref().ok())
                .and_then(|c| c.values.get("agent"))
                .is_some_and(|v| crate::guest_config::agent_enabled(v))
        };
        if kind == GuestType::Lxc || agent() {
            planner.plan.addressable.insert(vmid);
        }
    }
    // The guests of ours found off their nodes may be migrated: what their snapshots hold
    // decides whether PVE would take it.
    let movers: Vec<GuestRef> = graph
        .steps()
        .iter()
        .filter_map(|step| {
            let live = inventory.guest(step.vmid?)?;
            let Ok(Desired::Guest(d)) = options
                .drivers
                .desired(&planner.cx, graph.resource(step.resource))
            else {
                return None;
            };
            let off = if d.placed {
                !d.nodes.contains(&live.node)
            } else {
                d.node != live.node
            };
            (off && configs.contains_key(&live.vmid)).then(|| live.guest_ref())
        })
        .collect();
    planner.snapshots = snapshots::read(client, movers).await;
    // The guests of ours whose updates are guarded by snapshots: their snapshots name the
    // next one, tell which are ProxOps's to prune, and remember a rollback.
    let guarded: Vec<GuestRef> = graph
        .steps()
        .iter()
        .filter_map(|step| {
            let live = inventory.guest(step.vmid?)?;
            let Ok(Desired::Guest(d)) = options
                .drivers
                .desired(&planner.cx, graph.resource(step.resource))
            else {
                return None;
            };
            (crate::guard::policy(&d).is_some()
                && owned_by_proxops(live)
                && configs.contains_key(&live.vmid))
            .then(|| live.guest_ref())
        })
        .collect();
    planner.guard_snapshots = guarded::read(client, guarded).await;
    let mut suspended_seen = BTreeSet::new();
    for step in graph.steps() {
        let resource = graph.resource(step.resource);
        if let Some(why) = suspension(resource, options) {
            // One line per resource, however many nodes its steps cover.
            if suspended_seen.insert(step.resource) {
                planner.plan.skipped.push(Skipped {
                    subject: resource.key().to_string(),
                    reason: why,
                });
            }
            continue;
        }
        if let Some(why) = options.waiting.get(&resource.key()) {
            if suspended_seen.insert(step.resource) {
                planner.plan.waiting.push(Skipped {
                    subject: resource.key().to_string(),
                    reason: why.clone(),
                });
            }
            continue;
        }
        if planner.is_blocked(step.id, graph) {
            continue;
        }
        if resource.unresolved() {
            // Never planned with the placeholder its manifest decodes to (`crate::planes`).
            let subject = planner.subject(step.id);
            planner.plan.errors.push(ResourceError {
                subject,
                code: NEEDS_PLANES.to_owned(),
                reason: "its reference expressions are resolved when the desired plane is published: run with --planes (the agent always does)".to_owned(),
            });
            planner.blocked.insert(step.id);
            planner.deferral = None;
            continue;
        }
        match options.drivers.desired(&cx, resource) {
            Ok(Desired::Artifact(a)) => {
                let before = match previous(&cx, options, resource) {
                    Some(Desired::Artifact(b)) => Some(b),
                    _ => None,
                };
                let node = step.node.as_deref().unwrap_or_default();
                planner
                    .artifact_step(client, step.id, a, before.as_ref(), node)
                    .await;
            }
            Ok(Desired::Guest(d)) => {
                let before = match previous(&cx, options, resource) {
                    Some(Desired::Guest(b)) => Some(b),
                    _ => None,
                };
                let live = Live {
                    configs: &configs,
                    pendings: &pendings,
                    restarts: options.restarts,
                };
                planner.guest_step(step.id, *d, before.as_deref(), &live)
            }
            Err(e @ (DesiredError::Secret { .. } | DesiredError::SshKey { .. })) => {
                let subject = planner.subject(step.id);
                let reason = match &e {
                    DesiredError::Secret {
                        reference, reason, ..
                    } => format!("cloud-init secret `{reference}` cannot be resolved: {reason}"),
                    DesiredError::SshKey {
                        index,
                        origin,
                        reason,
                        ..
                    } => format!(
                        "SSH key {index} ({origin}) is not one PVE accepts: {reason}; PVE refuses the whole write (\"SSH public key validation error\"), so nothing is sent: fix the key"
                    ),
                    _ => e.to_string(),
                };
                tracing::debug!(cluster, %subject, code = e.code(), "not planned: the manifest or its secrets must be fixed");
                planner.plan.errors.push(ResourceError {
                    subject,
                    code: e.code().to_owned(),
                    reason,
                });
                planner.blocked.insert(step.id);
                planner.deferral = None;
            }
            Err(e) => planner.block(step.id, e.to_string(), false),
        }
    }
    planner.prunes(client, options).await;
    Ok(planner.plan)
}

/// What the previous desired document of `resource` asked for, through its kind's driver in
/// this cycle's context. `None` when the planes are not recorded, the resource is new to them,
/// or that document no longer maps (a reference that no longer resolves): then nothing can be
/// proven from it, and nothing is removed on its account.
fn previous(cx: &Context<'_>, options: &PlanOptions, resource: &Resource) -> Option<Desired> {
    let document = options.previous.as_ref()?.get(&resource.key())?;
    match options.drivers.desired(cx, document) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::debug!(cluster = cx.cluster, resource = %resource.key(), error = %e, "the previous desired document does not map: ownership of removed keys unknown");
            None
        }
    }
}

/// Why `resource` is suspended, if it is.
fn suspension(resource: &Resource, options: &PlanOptions) -> Option<String> {
    if resource.reconcile_disabled() {
        return Some(format!(
            "{SUSPENDED_PREFIX}annotated proxops/reconcile: disabled"
        ));
    }
    options
        .suspended
        .get(&resource.key())
        .map(|why| format!("{SUSPENDED_PREFIX}{why}"))
}

/// The plan error of a declared container without `template` that is not live.
pub const NO_TEMPLATE: &str = "proxops::no_template";

/// The plan error of a declared guest that names existing volumes but is not live.
pub const VOLUME_WITHOUT_GUEST: &str = "proxops::volume_without_guest";

struct Planner<'a> {
    cx: Context<'a>,
    inventory: &'a Inventory,
    /// Declared vmids and the carriers of each identity.
    guests: Guests,
    plan: ClusterPlan,
    /// The action of each planned step.
    step_actions: BTreeMap<StepId, usize>,
    /// Steps that could not be planned (their dependants wait).
    blocked: BTreeSet<StepId>,
    /// The dependants of `blocked`, computed when first needed after `blocked` changed.
    deferral: Option<Deferral>,
    /// Config reads in flight at once.
    config_concurrency: usize,
    /// The cluster's PVE release (`None`: `/version` named none; its rules are not checked).
    release: Option<Release>,
    /// Memory (bytes) this plan puts on each node by creating placed guests there.
    planned_memory: BTreeMap<String, u64>,
    /// `GET /cluster/ha/resources`, when read (a guest declares `ha:` or has an HA resource).
    ha: Option<Result<Vec<proxops_pve::api::ha::HaResource>, PveError>>,
    /// `GET /cluster/ha/rules`, read with `ha` on PVE 9.
    ha_rules: Option<Result<Vec<proxops_pve::api::ha::HaRule>, PveError>>,
    /// The volumes the snapshots of each VM the plan may migrate reference.
    snapshots: BTreeMap<u32, Result<snapshots::SnapshotVolumes, String>>,
    /// Migrations PVE refused ([`PlanOptions::refused`]).
    refused: &'a BTreeMap<ResourceKey, crate::refusals::Refusal>,
    /// Guarded updates rolled back ([`PlanOptions::refused_updates`]).
    refused_updates: &'a BTreeMap<ResourceKey, crate::refusals::Refusal>,
    /// The snapshots of each guest whose updates are guarded (`update-policy`).
    guard_snapshots: BTreeMap<u32, Result<Vec<proxops_pve::SnapshotEntry>, String>>,
    /// [`PlanOptions::source_revision`].
    source_revision: Option<String>,
}

impl Planner<'_> {
    fn graph(&self) -> &Graph {
        self.cx.graph
    }

    /// Whether a prerequisite of `step` could not be planned; records the skip once.
    fn is_blocked(&mut self, step: StepId, graph: &Graph) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        // One deferral per change of the blocked set, not one per step.
        let blocked = &self.blocked;
        let deferral = self
            .deferral
            .get_or_insert_with(|| graph.defer(&blocked.iter().copied().collect::<Vec<_>>()));
        let Ok(at) = deferral.skipped.binary_search_by(|d| d.step.cmp(&step)) else {
            return false;
        };
        let d = &deferral.skipped[at];
        let waits: Vec<String> = d
            .blocked_by
            .iter()
            .map(|b| graph.key(graph.step(*b).resource).to_string())
            .collect();
        self.plan.skipped.push(Skipped {
            subject: graph.key(graph.step(step).resource).to_string(),
            reason: format!("waits for {}", waits.join(", ")),
        });
        true
    }

    fn subject(&self, step: StepId) -> String {
        self.graph()
            .key(self.graph().step(step).resource)
            .to_string()
    }

    /// A container declared without `template` whose vmid is not live: it can only be taken
    /// over, so nothing is sent for it; a plan error, the rest of the cluster still plans.
    fn no_template(&mut self, step: StepId, vmid: u32) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, "not planned: no template to create from");
        self.plan.errors.push(ResourceError {
            subject,
            code: NO_TEMPLATE.to_owned(),
            reason: format!(
                "vmid {vmid} is not on the cluster, and a container without `template` can only be taken over, never created: declare `template` (a CTTemplate) to let ProxOps create it, or correct `vmid`/`node` if the container lives elsewhere"
            ),
        });
        self.blocked.insert(step);
        self.deferral = None;
    }

    /// A guest whose manifest names the volumes it has (what `adopt` writes) but is not live:
    /// those volumes went with it (or belong to something else now), so nothing is created
    /// around them; a plan error, the rest of the cluster still plans.
    fn volume_without_guest(&mut self, step: StepId, vmid: u32, slots: &[String]) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, "not planned: named volumes without their guest");
        self.plan.errors.push(ResourceError {
            subject,
            code: VOLUME_WITHOUT_GUEST.to_owned(),
            reason: format!(
                "vmid {vmid} is not on the cluster, and its manifest names the existing volumes of {}: a guest is never created around named volumes; remove `volume` from them to let ProxOps allocate new ones, or correct `vmid`/`node` if the guest lives elsewhere",
                slots.join(", ")
            ),
        });
        self.blocked.insert(step);
        self.deferral = None;
    }

    fn block(&mut self, step: StepId, reason: String, anomaly: bool) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, %reason, anomaly, "not planned");
        if anomaly {
            self.plan.anomalies.push(Anomaly {
                subject,
                message: reason,
            });
        } else {
            self.plan.skipped.push(Skipped { subject, reason });
        }
        self.blocked.insert(step);
        self.deferral = None;
    }

    /// Appends an action for `step`, after the actions of its prerequisites (and `also`).
    fn push(
        &mut self,
        step: StepId,
        (node, vmid): (&str, Option<u32>),
        verb: Verb,
        reason: String,
        op: Op,
        also: &[usize],
    ) -> usize {
        let graph = self.cx.graph;
        let s = graph.step(step);
        let mut after: Vec<usize> = graph
            .prerequisites(step)
            .iter()
            .filter_map(|p| self.step_actions.get(p).copied())
            .chain(also.iter().copied())
            .collect();
        after.sort_unstable();
        after.dedup();
        let (changes, resizes, restart) = match &op {
            Op::Update {
                changes,
                removals,
                resizes,
                restart,
                ..
            } => (
                key_changes(changes, removals),
                resizes
                    .iter()
                    .map(|r| DiskGrowth {
                        disk: r.disk.clone(),
                        from: r.from,
                        to: r.to,
                    })
                    .collect(),
                *restart,
            ),
            _ => (Vec::new(), Vec::new(), false),
        };
        let id = self.plan.actions.len();
        // Reasons name keys, never values, so they may be logged.
        tracing::debug!(
            cluster = %self.plan.cluster,
            action = id,
            verb = ?verb,
            subject = %format!("{}/{}", graph.kind(s.resource), graph.name(s.resource)),
            %reason,
            after = ?after,
            "planned"
        );
        self.plan.actions.push(Action {
            id,
            level: Some(s.level),
            kind: graph.kind(s.resource).to_owned(),
            name: graph.name(s.resource).to_owned(),
            node: node.to_owned(),
            vmid,
            verb,
            reason,
            changes,
            resizes,
            restart,
            after,
            op,
        });
        // Dependants wait for the last action of the step (an update before a start, say).
        self.step_actions.insert(step, id);
        id
    }

    /// Why PVE would refuse to create `d`: a parameter its release lacks, or a new volume on a
    /// storage without the guest's content type. A clone's new volumes are the slots its
    /// template does not have (the others come from the template).
    fn create_problem(
        &self,
        d: &DesiredGuest,
        configs: &BTreeMap<u32, Result<GuestConfig, PveError>>,
    ) -> Option<String> {
        if let Some(why) = self
            .release
            .and_then(|release| compat::create_problem(release, d))
        {
            return Some(why);
        }
        let config = d.create_config();
        // A template whose config was not read: its slots are unknown, so nothing is claimed.
        let template: Option<&GuestConfig> = match &d.clone {
            Some(c) => Some(configs.get(&c.vmid)?.as_ref().ok()?),
            None => None,
        };
        let new = config
            .iter()
            .filter(|(k, _)| template.is_none_or(|t| !t.values.contains_key(*k)))
            .map(|(k, v)| (k.as_str(), v.as_str()));
        compat::storage_problem(self.inventory, &d.node, d.guest, new)
    }

    async fn artifact_step(
        &mut self,
        client: &PveClient,
        step: StepId,
        a: DesiredArtifact,
        before: Option<&DesiredArtifact>,
        node: &str,
    ) {
        let Some(storage) = self.inventory.storage(node, &a.storage) else {
            let reason = format!("storage `{}` does not exist on node `{node}`", a.storage);
            return self.block(step, reason, true);
        };
        if !storage.content.iter().any(|c| c == a.content) {
            let reason = format!(
                "storage `{}` on `{node}` does not allow `{}` content: enable it in PVE (Datacenter > Storage)",
                a.storage, a.content
            );
            return self.block(step, reason, true);
        }
        if let Some(why) = self
            .release
            .and_then(|release| compat::artifact_problem(release, &a))
        {
            return self.block(step, why, true);
        }
        match self.inventory.contents(client, node, &a.storage).await {
            Err(e) => self.block(
                step,
                format!("cannot list `{}` on `{node}`: {e}", a.storage),
                false,
            ),
            Ok(list) if list.iter().any(|v| v.volid == a.volid) => {
                let Some(changed) = before.and_then(|b| source_change(b, &a)) else {
                    return;
                };
                let shared = storage.shared;
                self.replace(client, step, a, &changed, node, shared).await;
            }
            Ok(_) => {
                let reason = format!("{} is not on {node}", a.volid);
                self.push(
                    step,
                    (node, None),
                    Verb::Download,
                    reason,
                    Op::Download { artifact: a },
                    &[],
                );
            }
        }
    }

    /// Plans replacing an artifact's file whose source changed under the same volid, unless a
    /// guest's config references that volid (then an anomaly: nothing is deleted).
    async fn replace(
        &mut self,
        client: &PveClient,
        step: StepId,
        a: DesiredArtifact,
        changed: &str,
        node: &str,
        shared: bool,
    ) {
        // A shared storage's volume is the same file on every node; a local one only here.
        let guests: Vec<GuestRef> = self
            .inventory
            .guests
            .values()
            .filter(|g| shared || g.node == node)
            .map(GuestInfo::guest_ref)
            .collect();
        let configs = client.guest_configs(guests, self.config_concurrency).await;
        let mut users = Vec::new();
        for (vmid, config) in &configs {
            match config {
                Ok(c) => {
                    for key in references(&c.values, &a.volid) {
                        users.push(format!("vmid {vmid} ({key})"));
                    }
                }
                Err(e) => {
                    // Unknown is not unused: nothing is deleted this cycle.
                    self.plan.skipped.push(Skipped {
                        subject: self.subject(step),
                        reason: format!(
                            "the {changed} of {} changed, but whether a guest uses it cannot be read (vmid {vmid}: {e}); retried next cycle",
                            a.volid
                        ),
                    });
                    return;
                }
            }
        }
        if !users.is_empty() {
            // Reported without holding back dependants: the old file is still there and usable,
            // and a dependant's own change (detaching the file) must stay possible.
            self.plan.anomalies.push(Anomaly {
                subject: self.subject(step),
                message: format!(
                    "the {changed} of {} on `{node}` changed since ProxOps last reconciled it, but {} use{} it: not replaced (deleting it would pull it from under the guest); detach it, or give the new file another name",
                    a.volid,
                    users.join(", "),
                    if users.len() == 1 { "s" } else { "" }
                ),
            });
            return;
        }
        let reason = format!("{changed} changed under the same file name {}", a.volid);
        self.push(
            step,
            (node, None),
            Verb::Replace,
            reason,
            Op::Replace { artifact: a },
            &[],
        );
    }

    fn guest_step(
        &mut self,
        step: StepId,
        mut d: DesiredGuest,
        before: Option<&DesiredGuest>,
        reads: &Live<'_>,
    ) {
        let configs = reads.configs;
        let graph = self.cx.graph;
        let resource = graph.resource(graph.step(step).resource);
        let key = resource.key();
        for w in &d.warnings {
            self.plan.warnings.push(format!("{key}: {w}"));
        }
        let Some(live) = self.inventory.guest(d.vmid) else {
            // One identity, one guest: never create a second carrier of it.
            let others = self.guests.other_carriers(&key, d.vmid);
            if !others.is_empty() {
                let reason = moved_vmid(&key, d.vmid, &others, self.cx.cluster);
                return self.block(step, reason, true);
            }
            if !d.creatable() {
                return self.no_template(step, d.vmid);
            }
            let named = d.named_volumes();
            if !named.is_empty() {
                return self.volume_without_guest(step, d.vmid, &named);
            }
            let mut placed = None;
            if d.placed {
                match self.place(step, &d, configs) {
                    Ok(pick) => {
                        d.node = pick.node;
                        placed = Some(pick.reason);
                    }
                    Err(why) => return self.block(step, why, true),
                }
            }
            if let Some(c) = &d.clone
                && c.node != d.node
                && let Some(Ok(template)) = configs.get(&c.vmid)
                && let Some(why) = self.local_drives(template, &c.node, &d.node, c.vmid)
            {
                return self.block(step, why, true);
            }
            if let Some(why) = self.create_problem(&d, configs) {
                return self.block(step, why, true);
            }
            let mut reason = match &d.clone {
                Some(c) => format!("absent; clone of vmid {}", c.vmid),
                None => "absent".to_owned(),
            };
            if let Some(why) = placed {
                reason.push_str(&format!("; {why}"));
                self.plan.placements.push(crate::plan::Placement {
                    subject: key.to_string(),
                    node: d.node.clone(),
                    reason: why,
                });
            }
            let (node, vmid) = (d.node.clone(), d.vmid);
            // An HA guest is created stopped: the HA manager starts it once its resource exists.
            let mut create = d.clone();
            if d.ha.is_some() {
                create.power = None;
            }
            let id = self.push(
                step,
                (&node, Some(vmid)),
                Verb::Create,
                reason,
                Op::Create {
                    desired: Box::new(create),
                },
                &[],
            );
            self.ha_after_create(step, &d, id);
            return;
        };
        // A placed guest on one of its nodes is in place there, wherever HA or an operator put it.
        if d.placed && d.nodes.contains(&live.node) {
            d.node = live.node.clone();
            self.plan.placements.push(crate::plan::Placement {
                subject: key.to_string(),
                node: live.node.clone(),
                reason: format!("found on `{}`, one of its nodes", live.node),
            });
        }
        let claim = match self.claim(&d, live, &key) {
            Ok(claim) => claim,
            Err(problem) => return self.block(step, problem, true),
        };
        if let Some(lock) = &live.lock {
            return self.block(step, locked(live, lock), false);
        }
        let others = self.guests.other_carriers(&key, d.vmid);
        if !others.is_empty() {
            let mut all = vec![d.vmid];
            all.extend(&others);
            let listed: Vec<String> = all.iter().map(u32::to_string).collect();
            let reason = format!(
                "its identity (tag `{}`) is on {} guests, vmids {}: one resource is one guest; remove the tag from the guests that are not {key} (they are then left alone), or delete them by hand",
                identity_tag(self.cx.cluster, resource.kind, resource.name()),
                all.len(),
                listed.join(", ")
            );
            return self.block(step, reason, true);
        }
        let running = match live.status.as_str() {
            "running" => true,
            "stopped" => false,
            other => {
                let reason = format!(
                    "vmid {} has power state `{other}` (its node's guest list did not show it): not planned this cycle",
                    d.vmid
                );
                return self.block(step, reason, false);
            }
        };
        let config = match configs.get(&d.vmid) {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                return self.block(
                    step,
                    format!("cannot read the config of vmid {}: {e}", d.vmid),
                    false,
                );
            }
            None => {
                return self.block(
                    step,
                    format!("the config of vmid {} was not read", d.vmid),
                    false,
                );
            }
        };
        // On a node it may not be on: migrated (or an anomaly), the rest waits for the next
        // cycle, which finds it on its node.
        if live.node != d.node {
            let why = if d.placed {
                format!(
                    "vmid {} is on `{}`, not one of its nodes ({})",
                    d.vmid,
                    live.node,
                    d.nodes.join(", ")
                )
            } else {
                format!(
                    "vmid {} is on `{}`, the manifest says `{}`",
                    d.vmid, live.node, d.node
                )
            };
            let target = if d.placed {
                match self.place(step, &d, configs) {
                    Ok(pick) => {
                        self.plan.placements.push(crate::plan::Placement {
                            subject: key.to_string(),
                            node: pick.node.clone(),
                            reason: pick.reason.clone(),
                        });
                        pick.node
                    }
                    Err(problem) => {
                        return self.block(
                            step,
                            format!("{why}, but it is not migrated: {problem}"),
                            true,
                        );
                    }
                }
            } else {
                d.node.clone()
            };
            return self.migrate(step, live, config, &target, &why);
        }
        // The template flag from the config, which PVE writes at once; the inventory's may be
        // the stats cache's.
        let is_template = config.values.get("template").is_some_and(|v| v == "1");
        if !d.template && is_template {
            let reason = format!(
                "vmid {} is a template, the manifest declares a {}: PVE cannot turn a template back into a guest; declare it a {} again, or give the {} another vmid",
                d.vmid,
                resource.kind,
                template_kind(d.guest),
                resource.kind
            );
            return self.block(step, reason, true);
        }
        let to_template = d.template && !is_template;
        if to_template && let Some(why) = cannot_template(live, config) {
            return self.block(step, why, true);
        }
        // A half-configured clone gets what its create would have written: only its own tags,
        // no template description.
        let mut found = match claim {
            Claim::Clone { .. } => after_clone(&d, &config.values),
            _ => diff_since(&d, before, &config.values),
        };
        if running {
            let pending = match reads.pendings.get(&d.vmid) {
                Some(Ok(rows)) => rows.as_slice(),
                Some(Err(e)) => {
                    return self.block(
                        step,
                        format!("cannot read the pending changes of vmid {}: {e}", d.vmid),
                        false,
                    );
                }
                None => {
                    return self.block(
                        step,
                        format!("the pending changes of vmid {} were not read", d.vmid),
                        false,
                    );
                }
            };
            mark_pending(&d, &mut found, &config.values, pending);
        }
        if matches!(claim, Claim::Adopt)
            && let Some(why) = adopt_mismatch(&d, &found, running, to_template)
        {
            let tag = identity_tag(self.cx.cluster, &key.kind, &key.name);
            let reason = format!(
                "vmid {} is taken by `{}`, which ProxOps did not create (no tag `{tag}`); it is adopted (tagged `{OWNER_TAG};{tag}`) only once its live config matches the manifest, and {why}: make the manifest say what the guest has (`proxops adopt` writes it), or change the guest",
                d.vmid,
                live.name.as_deref().unwrap_or("?")
            );
            return self.block(step, reason, true);
        }
        for a in &found.anomalies {
            self.plan.anomalies.push(Anomaly {
                subject: key.to_string(),
                message: a.message.clone(),
            });
        }
        for key in &found.unproven {
            self.plan.warnings.push(format!(
                "{}: {key} is on the guest but not in the manifest; without a previous desired document ProxOps cannot tell whether it set it: left alone",
                resource.key()
            ));
        }
        let mut update = None;
        // A running guest declared stopped is stopped first, so that PVE applies the changes
        // at once instead of keeping them for a next start.
        let stop_first = running
            && d.ha.is_none()
            && live.hastate.is_none()
            && d.power == Some(PowerState::Stopped)
            && !d.template
            && !to_template
            && !found.is_converged();
        let running = running && !stop_first;
        if running
            && found.needs_restart()
            && !(reads.restarts && d.power == Some(PowerState::Started) && !to_template)
        {
            // PVE would keep these for a start that this plan may not do: report them, never
            // count them as converged.
            let waiting: Vec<String> = found
                .changes
                .iter()
                .filter(|c| c.restart)
                .map(|c| c.key.clone())
                .chain(
                    found
                        .removals
                        .iter()
                        .filter(|r| r.restart)
                        .map(|r| r.key.clone()),
                )
                .collect();
            let why = if reads.restarts {
                "the plan does not restart it"
            } else {
                "restarts are not allowed"
            };
            self.plan.anomalies.push(Anomaly {
                subject: key.to_string(),
                message: format!(
                    "{}: pending until restart (vmid {} runs and {why}); PVE applies it at the next start",
                    waiting.join(", "),
                    d.vmid
                ),
            });
            found.changes.retain(|c| !c.restart);
            found.removals.retain(|r| !r.restart);
        }
        // New volumes (a disk added to the manifest) must find their storage's content type.
        let added = found
            .changes
            .iter()
            .filter(|c| c.live.is_none())
            .map(|c| (c.key.as_str(), c.value.as_str()));
        if let Some(why) = compat::storage_problem(self.inventory, &d.node, d.guest, added) {
            return self.block(step, why, true);
        }
        let written = found.changes.iter().map(|c| (c.key.as_str(), c.wire()));
        if let Some(why) = self
            .release
            .and_then(|release| compat::config_problem(release, d.guest, written))
        {
            return self.block(step, why, true);
        }
        // A disruptive update of a guest whose `update-policy` asks for snapshots: between a
        // snapshot and a check (`crate::guard`), or not at all when PVE could not snapshot it
        // or the same desired document was rolled back before.
        let guard = match claim {
            Claim::Own | Claim::Renamed(_) if !to_template => {
                match self.guard_plan(step, &d, &found, config, running) {
                    Ok(g) => g,
                    Err((why, anomaly)) => return self.block(step, why, anomaly),
                }
            }
            _ => None,
        };
        let mut stopped = None;
        if stop_first {
            let guest = live.guest_ref();
            stopped = Some(self.push(
                step,
                (&d.node, Some(d.vmid)),
                Verb::Stop,
                "is running".into(),
                Op::Stop { guest },
                &[],
            ));
        }
        let snapshot = guard.as_ref().map(|g| {
            let after: Vec<usize> = stopped.into_iter().collect();
            self.push(
                step,
                (&d.node, Some(d.vmid)),
                Verb::Snapshot,
                g.reason.clone(),
                Op::Snapshot {
                    guard: g.guard.clone(),
                    vmstate: g.vmstate,
                },
                &after,
            )
        });
        if !found.is_converged() {
            let restart = found.needs_restart() && running;
            let mut keys: Vec<&str> = found.changes.iter().map(|c| c.key.as_str()).collect();
            keys.extend(found.resizes.iter().map(|r| r.disk.as_str()));
            let removed: Vec<&str> = found.removals.iter().map(|r| r.key.as_str()).collect();
            let changed = match (keys.is_empty(), removed.is_empty()) {
                (false, true) => format!("changed: {}", keys.join(", ")),
                (true, false) => format!("removed: {}", removed.join(", ")),
                _ => format!(
                    "changed: {}; removed: {}",
                    keys.join(", "),
                    removed.join(", ")
                ),
            };
            let (verb, mut reason) = match &claim {
                Claim::Own => (Verb::Update, changed),
                Claim::Adopt => (
                    Verb::Adopt,
                    "not created by ProxOps and its config matches the manifest: adding the ownership tags".into(),
                ),
                Claim::Renamed(from) => (
                    Verb::Retag,
                    format!("was {from} at this vmid: identity tags move to {key}; {changed}"),
                ),
                Claim::Clone { template } => (
                    Verb::Retag,
                    format!(
                        "a clone of vmid {template} left unconfigured (it carries the template's identity): repairing; {changed}"
                    ),
                ),
            };
            if let Some(g) = &guard {
                reason.push_str(&format!(
                    "; rolled back to `{}` if it fails",
                    g.guard.snapshot
                ));
            }
            let (node, vmid) = (d.node.clone(), d.vmid);
            let op = Op::Update {
                desired: Box::new(d.clone()),
                changes: found.changes,
                removals: found.removals,
                resizes: found.resizes,
                digest: config.digest.clone(),
                restart,
                guard: guard.as_ref().map(|g| g.guard.clone()),
            };
            let after: Vec<usize> = stopped.into_iter().chain(snapshot).collect();
            update = Some(self.push(step, (&node, Some(vmid)), verb, reason, op, &after));
        }
        let after: Vec<usize> = update.into_iter().collect();
        let guest = live.guest_ref();
        if to_template {
            let (node, vmid) = (d.node.clone(), d.vmid);
            self.push(
                step,
                (&node, Some(vmid)),
                Verb::MarkTemplate,
                "declared a template".into(),
                Op::MarkTemplate {
                    guest,
                    running: false,
                },
                &after,
            );
            return;
        }
        if d.template {
            return;
        }
        // An HA guest's power is its HA state: set through its HA resource, never directly.
        if self.ha_step(step, &d, live, before, &after) {
            if let Some(g) = guard {
                self.guard_after(step, &d, g, running, update);
            }
            return;
        }
        let mut last = update;
        match d.power {
            Some(PowerState::Started) if !running => {
                let op = match &guard {
                    Some(g) => Op::GuardedStart {
                        guest,
                        guard: g.guard.clone(),
                    },
                    None => Op::Start { guest },
                };
                last = Some(self.push(
                    step,
                    (&d.node, Some(d.vmid)),
                    Verb::Start,
                    format!("is {}", live.status),
                    op,
                    &after,
                ));
            }
            Some(PowerState::Stopped) if running && stopped.is_none() => {
                self.push(
                    step,
                    (&d.node, Some(d.vmid)),
                    Verb::Stop,
                    "is running".into(),
                    Op::Stop { guest },
                    &after,
                );
            }
            _ => {}
        }
        if let Some(g) = guard {
            let runs = running || matches!(d.power, Some(PowerState::Started));
            self.guard_after(step, &d, g, runs, last);
        }
    }

    /// Why a template cannot be cloned from `from` onto node `to`, if it cannot: qemu-server
    /// `PVE::API2::Qemu` `clone_vm` refuses a target node unless every drive (cdrom and
    /// cloud-init drive included) is on shared storage ("can't clone VM to node ... (VM uses
    /// local storage)"). Checked here so the plan says it, instead of a task failing.
    fn local_drives(
        &self,
        template: &GuestConfig,
        from: &str,
        to: &str,
        vmid: u32,
    ) -> Option<String> {
        let drive = |k: &str| {
            let digits = k.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            matches!(
                k.trim_end_matches(|c: char| c.is_ascii_digit()),
                "ide" | "sata" | "scsi" | "virtio" | "efidisk" | "tpmstate"
            ) && !digits.is_empty()
        };
        let local: Vec<String> = template
            .values
            .iter()
            .filter(|(k, _)| drive(k))
            .filter_map(|(k, v)| {
                let volume = v.split(',').next()?;
                let (storage, _) = volume.split_once(':')?;
                let shared = self
                    .inventory
                    .storage(from, storage)
                    .is_some_and(|s| s.shared);
                (!shared).then(|| format!("{k} on `{storage}`"))
            })
            .collect();
        (!local.is_empty()).then(|| {
            format!(
                "the template (vmid {vmid}) is on `{from}` and the clone on `{to}`, but PVE clones to another node only from shared storage, and its drives are local ({}): put the clone on `{from}`, or move the template's drives to shared storage",
                local.join(", ")
            )
        })
    }

    /// Whether the live guest at a declared vmid is this resource's to manage, and how; why
    /// not when it is not (an anomaly: nothing is changed or deleted).
    fn claim(
        &self,
        d: &DesiredGuest,
        live: &GuestInfo,
        key: &ResourceKey,
    ) -> Result<Claim, String> {
        let cluster = self.cx.cluster;
        let tag = identity_tag(cluster, &key.kind, &key.name);
        let carried = self.guests.identities(cluster, &live.tags);
        // No ProxOps tag at all: a guest made by hand, declared now (by `proxops adopt` or by
        // hand). It is tagged only if its config already matches (see `Claim::Adopt`).
        if untagged(live) && live.node == d.node && live.kind == d.guest {
            return Ok(Claim::Adopt);
        }
        if !owned_by_proxops(live) || carried.is_empty() {
            return Err(format!(
                "vmid {} is taken by `{}`, which ProxOps did not create (no tag `{tag}`): choose another vmid, or add the tags `{OWNER_TAG};{tag}` to adopt it",
                d.vmid,
                live.name.as_deref().unwrap_or("?")
            ));
        }
        if live.kind != d.guest {
            return Err(format!(
                "vmid {} is a {}, the manifest declares a {}",
                d.vmid,
                live.kind.as_str(),
                key.kind
            ));
        }
        if carried.contains(key) {
            return Ok(Claim::Own);
        }
        // Another identity of this cluster: the first one decides.
        let from = &carried[0];
        match self.guests.vmid_of(from) {
            // Renamed, or a kind changed at the same vmid: the old resource is gone from the
            // composition, so the guest is this one's.
            None => Ok(Claim::Renamed(from.clone())),
            Some(template)
                if d.clone.as_ref().is_some_and(|c| c.vmid == template) && !live.template =>
            {
                Ok(Claim::Clone { template })
            }
            Some(other) => Err(format!(
                "vmid {} carries the identity of {from} (tag `{}`), which is declared at vmid {other}: one of the two manifests has the wrong vmid; fix it (nothing is changed until then)",
                d.vmid,
                identity_tag(cluster, &from.kind, &from.name)
            )),
        }
    }

    /// Guests tagged as this cluster's resources that the repository no longer declares.
    async fn prunes(&mut self, client: &PveClient, options: &PlanOptions) {
        let drivers = &options.drivers;
        let mut candidates: Vec<(&GuestInfo, String)> = Vec::new();
        for live in self.inventory.guests.values() {
            // A guest at a vmid the composition declares belongs to that resource's step
            // (updated, retagged or reported), whatever its tags say: never pruned.
            if !owned_by_proxops(live) || self.guests.is_declared(live.vmid) {
                continue;
            }
            let carried = self.guests.identities(self.cx.cluster, &live.tags);
            // Only a guest whose every identity is undeclared is gone from the repository.
            if carried.is_empty()
                || carried
                    .iter()
                    .any(|k| self.graph().find(&k.kind, &k.name).is_some())
            {
                continue;
            }
            candidates.push((live, carried[0].to_string()));
        }
        // Clones before their templates; then by vmid, newest first.
        candidates.sort_by(|(a, _), (b, _)| {
            (a.template, std::cmp::Reverse(a.vmid)).cmp(&(b.template, std::cmp::Reverse(b.vmid)))
        });
        let declares_guests = self.graph().resources().any(|r| {
            matches!(
                drivers.desired(&self.cx, self.graph().resource(r)),
                Ok(Desired::Guest(_))
            )
        });
        // The budget bounds a command: deletions earlier cycles of it made count.
        let mut budget = if options.prune_budget == 0 {
            usize::MAX
        } else {
            options.prune_budget.saturating_sub(options.prunes_used) as usize
        };
        // A template goes only after the guests pruned with it: a linked clone's disks rest
        // on its base volumes (PVE refuses to remove them), and a clone is its dependant.
        let mut guest_deletes = Vec::new();
        for (live, subject) in candidates {
            let defer = |reason: String| Skipped {
                subject: format!("{subject} (vmid {})", live.vmid),
                reason,
            };
            if !options.allowed_nodes.is_empty() && !options.allowed_nodes.contains(&live.node) {
                self.plan.deferred_prunes.push(defer(format!(
                    "node `{}` is not in the allowlist",
                    live.node
                )));
            } else if !declares_guests {
                self.plan.deferred_prunes.push(defer(
                    "the composition declares no guests: refusing to delete (a probable bad push); declare one, or delete by hand".into(),
                ));
            } else if live.lock.is_some() {
                self.plan.deferred_prunes.push(defer(format!(
                    "locked ({})",
                    live.lock.as_deref().unwrap_or_default()
                )));
            } else if budget == 0 {
                self.plan.deferred_prunes.push(defer(format!(
                    "prune budget of {} per run used (raise --prune-budget or reconcile.prune-budget, or run again)",
                    options.prune_budget
                )));
            } else if let Some(why) = protected(client, live).await {
                // PVE's protection flag exists to stop deletions; ProxOps honours it.
                self.plan.deferred_prunes.push(defer(why));
            } else {
                budget -= 1;
                let reason = prune_reason(&subject, self.cx.cluster, options, budget);
                let (kind, name) = subject.split_once('/').unwrap_or(("", &subject));
                let id = self.plan.actions.len();
                let after = if live.template {
                    guest_deletes.clone()
                } else {
                    guest_deletes.push(id);
                    Vec::new()
                };
                self.plan.actions.push(Action {
                    id,
                    level: None,
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    node: live.node.clone(),
                    vmid: Some(live.vmid),
                    verb: Verb::Delete,
                    reason,
                    changes: Vec::new(),
                    resizes: Vec::new(),
                    restart: false,
                    after,
                    op: Op::Delete {
                        guest: live.guest_ref(),
                        running: live.status == "running",
                        ha: live
                            .hastate
                            .is_some()
                            .then(|| proxops_pve::api::ha::ha_sid(live.kind, live.vmid)),
                    },
                });
            }
        }
    }
}

/// Why a guest is pruned, with the guards it passed: it is ours by its tags, and the prune
/// fits the run's budget (`left` prunes remain after it).
fn prune_reason(subject: &str, cluster: &str, options: &PlanOptions, left: usize) -> String {
    let (kind, name) = subject.split_once('/').unwrap_or(("", subject));
    let key = ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    };
    let why = match options.marked.get(&key) {
        Some(Some(reason)) => format!("marked for deletion with `proxops delete` ({reason})"),
        Some(None) => "marked for deletion with `proxops delete`".to_owned(),
        None => "no longer declared".to_owned(),
    };
    let ours = format!(
        "{why}; ours by its tags `{OWNER_TAG}` and `{}`",
        identity_tag(cluster, kind, name)
    );
    if options.prune_budget == 0 {
        format!("{ours}; no prune budget")
    } else {
        let used = options.prune_budget as usize - left;
        format!("{ours}; prune {used} of {} this run", options.prune_budget)
    }
}

/// How a resource holds the live guest at its vmid.
enum Claim {
    /// The guest carries the resource's identity.
    Own,
    /// The guest carries the identity of a resource no longer declared (a rename or a kind
    /// change at the same vmid): its tags move.
    Renamed(ResourceKey),
    /// A clone of the template at this vmid whose configuration never happened: it carries the
    /// template's identity.
    Clone { template: u32 },
    /// A guest without any ProxOps tag at a declared vmid: tagged, and nothing else, when its
    /// live config matches the manifest; otherwise an anomaly naming what differs.
    Adopt,
}

/// What keeps an untagged guest from being adopted as it is: any difference from the manifest
/// besides the ownership tags (a key to write or remove, a disk to grow, an anomaly of the
/// diff, a power state or template flag to change). `None`: only the tags differ.
fn adopt_mismatch(
    d: &DesiredGuest,
    found: &crate::diff::GuestDiff,
    running: bool,
    to_template: bool,
) -> Option<String> {
    let mut differs: Vec<String> = found
        .changes
        .iter()
        .filter(|c| c.key != "tags" || !adds_only_our_tags(c))
        .map(|c| c.key.clone())
        .collect();
    differs.extend(
        found
            .removals
            .iter()
            .map(|r| format!("{} (removed)", r.key)),
    );
    differs.extend(found.resizes.iter().map(|r| format!("{} (grown)", r.disk)));
    differs.extend(found.anomalies.iter().map(|a| a.message.clone()));
    if to_template {
        differs.push("template (the manifest declares a template)".into());
    }
    if !d.template {
        match (d.power, running) {
            (Some(PowerState::Started) | None, false) => {
                differs.push("power state (stopped, the manifest says started)".into())
            }
            (Some(PowerState::Stopped), true) => {
                differs.push("power state (running, the manifest says stopped)".into())
            }
            _ => {}
        }
    }
    (!differs.is_empty()).then(|| format!("these differ: {}", differs.join("; ")))
}

/// Whether a `tags` change only adds ProxOps's ownership and identity tags: the one difference
/// adoption itself makes. A tag of the manifest's that the guest lacks, or one taken away, is a
/// difference like any other.
fn adds_only_our_tags(change: &crate::diff::Change) -> bool {
    let have: Vec<String> = change
        .live
        .as_deref()
        .map(|t| words(t).map(str::to_ascii_lowercase).collect())
        .unwrap_or_default();
    change.removed.is_empty()
        && words(&change.value)
            .map(str::to_ascii_lowercase)
            .filter(|t| !have.contains(t))
            .all(|t| t == OWNER_TAG || t.starts_with(IDENTITY_PREFIX))
}

/// The anomaly of a resource whose vmid changed while its old guest still carries it.
fn moved_vmid(key: &ResourceKey, vmid: u32, others: &[u32], cluster: &str) -> String {
    let old: Vec<String> = others.iter().map(u32::to_string).collect();
    let old = old.join(", ");
    format!(
        "{key} is declared at vmid {vmid}, but vmid {old} carries its identity (tag `{}`): PVE cannot renumber a guest, and ProxOps never makes a second one. Set vmid back to {old}, or retire the old guest first (delete it, or remove its tag to keep it unmanaged); then vmid {vmid} is created",
        identity_tag(cluster, &key.kind, &key.name)
    )
}

/// What the planner read of the live guests of ours.
struct Live<'a> {
    /// `GET .../config?current=1` by vmid.
    configs: &'a BTreeMap<u32, Result<GuestConfig, PveError>>,
    /// `GET .../pending` of the running ones, by vmid.
    pendings: &'a BTreeMap<u32, Result<Vec<PendingEntry>, PveError>>,
    /// [`PlanOptions::restarts`].
    restarts: bool,
}

/// The skip of a locked guest, with the remedy when the lock is left from a crash.
fn locked(live: &GuestInfo, lock: &str) -> String {
    let tool = match live.kind {
        GuestType::Qemu => "qm",
        GuestType::Lxc => "pct",
    };
    match lock {
        "create" | "clone" => format!(
            "vmid {} is locked ({lock}): a create or clone that never finished leaves this lock; when no PVE task runs for vmid {} any more, clear it with `{tool} unlock {}` and the next cycle repairs the guest",
            live.vmid, live.vmid, live.vmid
        ),
        _ => format!(
            "vmid {} is locked ({lock}); retried next cycle (if no task holds it, `{tool} unlock {}`)",
            live.vmid, live.vmid
        ),
    }
}

/// The kind a template of `guest` is declared with.
fn template_kind(guest: GuestType) -> &'static str {
    match guest {
        GuestType::Qemu => "TemplateVM",
        GuestType::Lxc => "TemplateCT",
    }
}

/// Why PVE would refuse to make the guest a template, if it would (qemu-server
/// `API2/Qemu.pm` `template`, pve-container `API2/LXC.pm` `template`: not while running, not
/// with snapshots). ProxOps does not stop a guest to make it a template: that is a decision.
fn cannot_template(live: &GuestInfo, config: &GuestConfig) -> Option<String> {
    let tool = match live.kind {
        GuestType::Qemu => "qm",
        GuestType::Lxc => "pct",
    };
    if live.status == "running" {
        return Some(format!(
            "vmid {} is declared a template but is running: PVE makes only a stopped guest a template; shut it down (`{tool} shutdown {}`) and the next cycle converts it",
            live.vmid, live.vmid
        ));
    }
    if let Some(snapshot) = config.values.get("parent") {
        return Some(format!(
            "vmid {} is declared a template but has snapshots (current: `{snapshot}`): PVE refuses to make it a template; delete its snapshots first",
            live.vmid
        ));
    }
    None
}

/// The displayed changes of an update: keys written and keys deleted, by key.
fn key_changes(
    changes: &[crate::diff::Change],
    removals: &[crate::diff::Removal],
) -> Vec<KeyChange> {
    let mut out: Vec<KeyChange> = changes
        .iter()
        .map(|c| KeyChange {
            key: c.key.clone(),
            from: c.live.clone(),
            to: Some(c.value.clone()),
            delete: false,
            removed: c.removed.clone(),
        })
        .chain(removals.iter().map(|r| KeyChange {
            key: r.key.clone(),
            from: Some(r.live.clone()),
            to: None,
            delete: true,
            removed: Vec::new(),
        }))
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// Which download parameters that identify a file's content differ between the previous and
/// the current document (`url`, `checksum`, `checksum-algorithm`), as words; `None` if none.
fn source_change(before: &DesiredArtifact, now: &DesiredArtifact) -> Option<String> {
    let get = |a: &DesiredArtifact, key: &str| {
        a.download
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let changed: Vec<&str> = ["url", "checksum", "checksum-algorithm"]
        .into_iter()
        .filter(|k| get(before, k) != get(now, k))
        .collect();
    (!changed.is_empty()).then(|| changed.join(" and "))
}

/// The config keys whose value names `volid`: as the volume (`ide2: local:iso/x.iso,media=cdrom`)
/// or in a sub-key (`import-from=local:import/x.qcow2`).
fn references<'a>(config: &'a BTreeMap<String, String>, volid: &str) -> Vec<&'a str> {
    config
        .iter()
        .filter(|(_, v)| {
            v.split(',')
                .any(|part| part == volid || part.split_once('=').is_some_and(|(_, x)| x == volid))
        })
        .map(|(k, _)| k.as_str())
        .collect()
}

/// Why a guest must not be deleted, if PVE's `protection` flag (or an unreadable config) says so.
async fn protected(client: &PveClient, live: &GuestInfo) -> Option<String> {
    match client.guest_config(&live.guest_ref()).await {
        Ok(c) if c.values.get("protection").is_some_and(|p| p == "1") => Some(
            "protected in PVE (`protection: 1`): clear the flag to let ProxOps delete it, or delete it by hand".into(),
        ),
        Ok(_) => None,
        Err(e) => Some(format!("cannot read its config to check protection: {e}")),
    }
}
