//! The planner: one cluster's graph and live PVE state in, a [`ClusterPlan`] out.
//!
//! Reads one `/cluster/resources` listing, the guest list of each (node, guest type) holding
//! guests of ours (live power state), the content of each (node, storage) an artifact uses,
//! and the config of each guest of ours; never waits for a guest agent. A step that cannot be
//! planned (a guest at our vmid that is not ours, a lock, an unreadable listing) is reported and
//! its dependants are skipped this cycle, so nothing is built on an unknown foundation. What
//! the cluster's PVE would refuse (its version, `compat`, read once per connection,
//! or a storage without the content a step puts there) is an anomaly before anything is sent.
//!
//! The files follow the planner's decisions, in the order a step meets them: this one reads
//! the live state and walks the graph's steps in create order (`options.rs`: what a command
//! allows and knows); `create.rs` makes what is absent (downloads, creates, clones);
//! `update.rs` takes a live guest (its claim, its node, its config) and `power.rs` what follows
//! the update (a stop first, restarts, start, stop, template); `prune.rs` deletes guests no
//! longer declared. Around them: `placement.rs` (placed guests' nodes, migrations),
//! `snapshots.rs` (what a migration's snapshots hold), `guarded.rs` (snapshot-guarded updates),
//! `ha.rs` and `ha_rules.rs` (HA resources, and PVE 9's node-affinity rules).

use crate::compat::Release;
use crate::desired::{Context, Desired, DesiredError, DesiredGuest};
use crate::identity::{Guests, owned_by_proxops, untagged};
use crate::plan::{
    Action, Anomaly, ClusterPlan, DiskGrowth, KeyChange, Op, ResourceError, SUSPENDED_PREFIX,
    Skipped, Verb,
};
use proxops_graph::{Deferral, Graph, ResourceId, Step, StepId};
use proxops_model::{Resource, ResourceKey};
use proxops_pve::{
    GuestConfig, GuestInfo, GuestRef, GuestType, Inventory, PendingEntry, PveClient, PveError,
    Version,
};
use std::collections::{BTreeMap, BTreeSet};

mod create;
mod guarded;
mod ha;
mod ha_rules;
mod objects;
mod options;
mod placement;
mod power;
mod prune;
mod snapshots;
mod storage_pools;
mod update;
pub use create::{NO_TEMPLATE, VOLUME_WITHOUT_GUEST};
pub use options::PlanOptions;

/// The code of a resource with reference expressions planned without the planes.
pub const NEEDS_PLANES: &str = "proxops::reference::needs_planes";

/// The code of an API token not created because the planes are not recorded: its secret, which
/// PVE shows only in the create's answer, would have nowhere to go.
pub const TOKEN_NEEDS_PLANES: &str = "proxops::apitoken::needs_planes";

/// The code of an API token not created because the cluster's SOPS secrets file gives no age
/// recipient to encrypt its secret to.
pub const TOKEN_NO_RECIPIENTS: &str = "proxops::apitoken::no_recipients";

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
    let list_failures = read_live_power(client, &mut inventory, options).await;
    let cx = Context {
        secrets: options.secrets.as_ref(),
        ..Context::new(cluster, graph)
    };
    let mut planner = Planner::new(cx, &inventory, release, options);
    planner.read_ha(client, options).await;
    planner.warn_unchecked(&version, list_failures);
    let (stopped, running) = planner.config_reads();
    let running_kinds: Vec<(u32, GuestType)> = running.iter().map(|g| (g.vmid, g.kind)).collect();
    let (configs, pendings) =
        read_configs(client, stopped, running, options.config_concurrency).await;
    planner.mark_addressable(&running_kinds, &configs);
    let movers = planner.movers(&configs, options);
    planner.snapshots = snapshots::read(client, movers).await;
    let guarded = planner.guarded_guests(&configs, options);
    planner.guard_snapshots = guarded::read(client, guarded).await;
    let live = Live {
        configs: &configs,
        pendings: &pendings,
        restarts: options.restarts,
    };
    planner.read_objects(client, options).await;
    planner.read_storage_pools(client, options).await;
    planner.plan_steps(client, options, &live).await;
    planner.prunes(client, options).await;
    planner.object_prunes(client, options).await;
    planner.sdn_apply(options);
    Ok(planner.plan)
}

/// Reads the live power state of the guests of ours into `inventory`; the (node, guest type)
/// lists that could not be read, with why.
async fn read_live_power(
    client: &PveClient,
    inventory: &mut Inventory,
    options: &PlanOptions,
) -> Vec<(String, GuestType, PveError)> {
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
    inventory
        .read_live_power(client, lists, options.config_concurrency)
        .await
}

/// Reads the configs of the `stopped` and `running` guests, and the pending changes of the
/// running ones.
async fn read_configs(
    client: &PveClient,
    stopped: Vec<GuestRef>,
    running: Vec<GuestRef>,
    concurrency: usize,
) -> (Configs, Pendings) {
    // A stopped guest takes every write at once: its config (`current=1`) is all there is. A
    // running guest's `GET .../pending` gives both what it runs with (each row's value, and
    // the digest) and what waits for its next start, in one request.
    let mut configs = client.guest_configs(stopped, concurrency).await;
    let mut pendings = BTreeMap::new();
    for (vmid, rows) in client.guest_pendings(running, concurrency).await {
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

/// One cluster's plan as it is made, and what it is made from.
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
    /// The cluster-object lists read (`objects.rs`).
    objects: objects::ObjectLists,
    /// The storages of the pools storages name (`storage_pools.rs`).
    pool_storages: storage_pools::PoolStorages,
}

impl<'a> Planner<'a> {
    /// A planner over `inventory`, with the guests the graph declares (and the templates
    /// their clones come from, which the drivers name).
    fn new(
        cx: Context<'a>,
        inventory: &'a Inventory,
        release: Option<Release>,
        options: &'a PlanOptions,
    ) -> Self {
        let guests = Guests::new(cx.cluster, cx.graph, inventory, |key| {
            let id = cx.graph.find(&key.kind, &key.name)?;
            match options.drivers.desired(&cx, cx.graph.resource(id)) {
                Ok(Desired::Guest(d)) => d.clone.map(|c| c.vmid),
                _ => None,
            }
        });
        Planner {
            cx,
            inventory,
            guests,
            plan: ClusterPlan {
                cluster: cx.cluster.to_owned(),
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
            objects: BTreeMap::new(),
            pool_storages: BTreeMap::new(),
        }
    }

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

    /// HA resources, read once when a guest declares `ha:` or a guest of ours has one.
    async fn read_ha(&mut self, client: &PveClient, options: &PlanOptions) {
        let graph = self.cx.graph;
        let declares_ha = graph.resources().any(|r| {
            matches!(options.drivers.desired(&self.cx, graph.resource(r)), Ok(Desired::Guest(d)) if d.ha.is_some())
        });
        let has_ha = self
            .inventory
            .guests
            .values()
            .any(|g| owned_by_proxops(g) && g.hastate.is_some());
        if declares_ha || has_ha {
            self.ha = Some(client.ha_resources().await);
            // PVE 9 keeps `ha.group` as node-affinity rules (`planner/ha_rules.rs`).
            if self.ha_uses_rules() {
                self.ha_rules = Some(client.ha_rules().await);
            }
        }
    }

    /// Warns of what this plan cannot check: the version rules when `/version` names no
    /// release, the guests of the nodes whose guest lists could not be read.
    fn warn_unchecked(
        &mut self,
        version: &Version,
        list_failures: Vec<(String, GuestType, PveError)>,
    ) {
        if self.release.is_none() {
            self.plan.warnings.push(format!(
                "the cluster's /version (release `{}`, version `{}`) names no PVE release: the version rules (plain .tar templates from 9.1, import content from 8.3) are not checked",
                version.release, version.version
            ));
        }
        for (node, kind, e) in list_failures {
            self.plan.warnings.push(format!(
                "cannot read the {} guests of node `{node}`: {e}; their power state is unknown and they are not planned this cycle",
                kind.as_str()
            ));
        }
    }

    /// The guests whose configs the plan reads, stopped and running.
    fn config_reads(&self) -> (Vec<GuestRef>, Vec<GuestRef>) {
        // Configs of the guests of ours at vmids the repository declares (whichever identity
        // they carry: a renamed resource's or a template's), and of untagged guests there (to
        // adopt them if they match), read in one bounded batch.
        let cluster = self.cx.cluster;
        let mut stopped = Vec::new();
        let mut running = Vec::new();
        let mut seen = BTreeSet::new();
        for step in self.graph().steps() {
            if let Some(live) = step.vmid.and_then(|v| self.inventory.guest(v))
                && (untagged(live)
                    || owned_by_proxops(live)
                        && !self.guests.identities(cluster, &live.tags).is_empty())
                && seen.insert(live.vmid)
            {
                if live.status == "running" {
                    running.push(live.guest_ref());
                } else {
                    stopped.push(live.guest_ref());
                }
            }
        }
        (stopped, running)
    }

    /// Which running guests can tell their addresses: a container always (PVE reads its network
    /// namespace), a VM when its guest agent is enabled.
    fn mark_addressable(&mut self, running: &[(u32, GuestType)], configs: &Configs) {
        for &(vmid, kind) in running {
            let agent = || {
                configs
                    .get(&vmid)
                    .and_then(|c| c.as_ref().ok())
                    .and_then(|c| c.values.get("agent"))
                    .is_some_and(|v| crate::guest_config::agent_enabled(v))
            };
            if kind == GuestType::Lxc || agent() {
                self.plan.addressable.insert(vmid);
            }
        }
    }

    /// The declared guests that exist live with a config read, each with its desired state.
    fn declared_live<'s>(
        &'s self,
        configs: &'s Configs,
        options: &'s PlanOptions,
    ) -> impl Iterator<Item = (&'s GuestInfo, Box<DesiredGuest>)> + 's {
        let graph = self.graph();
        graph.steps().iter().filter_map(move |step| {
            let live = self.inventory.guest(step.vmid?)?;
            if !configs.contains_key(&live.vmid) {
                return None;
            }
            match options
                .drivers
                .desired(&self.cx, graph.resource(step.resource))
            {
                Ok(Desired::Guest(d)) => Some((live, d)),
                _ => None,
            }
        })
    }

    /// The guests of ours found off their nodes, which may be migrated: what their snapshots
    /// hold decides whether PVE would take it.
    fn movers(&self, configs: &Configs, options: &PlanOptions) -> Vec<GuestRef> {
        self.declared_live(configs, options)
            .filter(|(live, d)| {
                if d.placed {
                    !d.nodes.contains(&live.node)
                } else {
                    d.node != live.node
                }
            })
            .map(|(live, _)| live.guest_ref())
            .collect()
    }

    /// The guests of ours whose updates are guarded by snapshots: their snapshots name the
    /// next one, tell which are ProxOps's to prune, and remember a rollback.
    fn guarded_guests(&self, configs: &Configs, options: &PlanOptions) -> Vec<GuestRef> {
        self.declared_live(configs, options)
            .filter(|(live, d)| crate::guard::policy(d).is_some() && owned_by_proxops(live))
            .map(|(live, _)| live.guest_ref())
            .collect()
    }

    /// Plans the graph's steps in create order, but those held back (suspended, waiting) and
    /// those whose prerequisites could not be planned.
    async fn plan_steps(&mut self, client: &PveClient, options: &PlanOptions, live: &Live<'_>) {
        let graph = self.cx.graph;
        let mut held = BTreeSet::new();
        for step in graph.steps() {
            let resource = graph.resource(step.resource);
            if self.held(step.resource, resource, options, &mut held) {
                continue;
            }
            if self.is_blocked(step.id, graph) {
                continue;
            }
            self.plan_step(client, step, resource, options, live).await;
        }
    }

    /// Whether `resource` is held back this cycle: suspended (a skip), or waiting for what its
    /// reference expressions read. Recorded once per resource (`seen`).
    fn held(
        &mut self,
        id: ResourceId,
        resource: &Resource,
        options: &PlanOptions,
        seen: &mut BTreeSet<ResourceId>,
    ) -> bool {
        if let Some(why) = suspension(resource, options) {
            // One line per resource, however many nodes its steps cover.
            if seen.insert(id) {
                self.plan.skipped.push(Skipped {
                    subject: resource.key().to_string(),
                    reason: why,
                });
            }
            return true;
        }
        if let Some(why) = options.waiting.get(&resource.key()) {
            if seen.insert(id) {
                self.plan.waiting.push(Skipped {
                    subject: resource.key().to_string(),
                    reason: why.clone(),
                });
            }
            return true;
        }
        false
    }

    /// Plans one step with what its kind's driver makes of the resource: an artifact on the
    /// step's node, or a guest.
    async fn plan_step(
        &mut self,
        client: &PveClient,
        step: &Step,
        resource: &Resource,
        options: &PlanOptions,
        live: &Live<'_>,
    ) {
        if resource.unresolved() {
            // Never planned with the placeholder its manifest decodes to (`crate::planes`).
            let subject = self.subject(step.id);
            self.plan.errors.push(ResourceError {
                subject,
                code: NEEDS_PLANES.to_owned(),
                reason: "its reference expressions are resolved when the desired plane is published: run with --planes (the agent always does)".to_owned(),
            });
            self.blocked.insert(step.id);
            self.deferral = None;
            return;
        }
        let cx = self.cx;
        match options.drivers.desired(&cx, resource) {
            Ok(Desired::Artifact(a)) => {
                let before = match previous(&cx, options, resource) {
                    Some(Desired::Artifact(b)) => Some(b),
                    _ => None,
                };
                let node = step.node.as_deref().unwrap_or_default();
                self.artifact_step(client, step.id, a, before.as_ref(), node)
                    .await;
            }
            Ok(Desired::Guest(d)) => {
                let before = match previous(&cx, options, resource) {
                    Some(Desired::Guest(b)) => Some(b),
                    _ => None,
                };
                self.guest_step(step.id, *d, before.as_deref(), live)
            }
            Ok(Desired::Objects(objs)) => {
                let before = previous(&cx, options, resource);
                let before = before.as_ref().and_then(objects::as_objects);
                self.object_step(step.id, resource, objs, before, options);
                self.storage_pool_step(step.id, resource, options);
            }
            Err(e @ (DesiredError::Secret { .. } | DesiredError::SshKey { .. })) => {
                self.unusable_secret(step.id, &e)
            }
            Err(e) => self.block(step.id, e.to_string(), false),
        }
    }

    /// A resource whose cloud-init secret or SSH key cannot be used: a plan error, since the
    /// manifest or its secrets must be fixed; its dependants wait.
    fn unusable_secret(&mut self, step: StepId, e: &DesiredError) {
        let subject = self.subject(step);
        let reason = match e {
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
        let cluster = self.cx.cluster;
        tracing::debug!(cluster, %subject, code = e.code(), "not planned: the manifest or its secrets must be fixed");
        self.plan.errors.push(ResourceError {
            subject,
            code: e.code().to_owned(),
            reason,
        });
        self.blocked.insert(step);
        self.deferral = None;
    }

    /// A declared guest: created when it is not live (`create.rs`), otherwise brought to its
    /// manifest (`update.rs`, then `power.rs`).
    fn guest_step(
        &mut self,
        step: StepId,
        d: DesiredGuest,
        before: Option<&DesiredGuest>,
        reads: &Live<'_>,
    ) {
        let graph = self.cx.graph;
        let key = graph.resource(graph.step(step).resource).key();
        for w in &d.warnings {
            self.plan.warnings.push(format!("{key}: {w}"));
        }
        let firewall = d.firewall.is_some().then(|| d.clone());
        let pool = (d.pool.clone(), before.and_then(|b| b.pool.clone()));
        let vmid = d.vmid;
        match self.inventory.guest(d.vmid) {
            None => self.create_step(step, d, &key, reads.configs),
            Some(live) => self.live_step(step, d, before, live, reads),
        }
        if let Some(d) = firewall {
            self.guest_firewall_step(step, &d);
        }
        self.guest_pool_step(step, vmid, pool);
    }
}

/// The displayed changes of an update: keys written and keys deleted, by key.
fn key_changes(
    changes: &[crate::diff::Change],
    removals: &[crate::diff::Removal],
) -> Vec<KeyChange> {
    KeyChange::sorted(
        changes.iter().map(|c| KeyChange {
            removed: c.removed.clone(),
            ..KeyChange::set(&c.key, c.live.clone(), &c.value)
        }),
        removals.iter().map(|r| KeyChange::deleted(&r.key, &r.live)),
    )
}

/// What the planner read of the live guests of ours.
struct Live<'a> {
    /// `GET .../config?current=1` by vmid.
    configs: &'a Configs,
    /// `GET .../pending` of the running ones, by vmid.
    pendings: &'a Pendings,
    /// [`PlanOptions::restarts`].
    restarts: bool,
}

/// The configs the planner read, by vmid: a stopped guest's `GET .../config?current=1`, a
/// running one's values from `GET .../pending`.
type Configs = BTreeMap<u32, Result<GuestConfig, PveError>>;

/// The pending changes of the running guests the planner read, by vmid.
type Pendings = BTreeMap<u32, Result<Vec<PendingEntry>, PveError>>;
