//! The ownership contract of cluster objects (issue 32) over random manifest edits (add,
//! change, rename at the same id, id change, removal) of pools, backup jobs, PCI mappings and
//! ACL entries (proven ProxOps's by a receipt, not a mark), with injected PVE write failures,
//! against a simulator that holds hand-made objects from the start (unmarked, some at ids the
//! edits declare, some matching what they declare and some not) and objects marked by another
//! cluster. The planner gets the previous documents and receipts as the planes would give them.
//!
//! After every cycle: no hand-made object ProxOps did not adopt was deleted or changed; no
//! object marked by another cluster was; no live object carries the marks of two resources.
//! After the clean cycles at the end: the plan is empty, and every declared object exists as
//! declared unless its id is held by a hand-made object that differs or another cluster's.

use super::support::manifest;
use proptest::prelude::*;
use proxops_engine::execute::{ExecOptions, Outcome, execute};
use proxops_engine::objects::{LiveList, ObjValue, endpoints, mark, marks_in, read};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_model::kinds::ObjectClass;
use proxops_model::{Registry, Resource, ResourceKey};
use proxops_pve::{Method, Params, PveClient};
use proxops_pve_sim::{EndpointClass, FaultConfig, SimConfig, TaskDurations};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

const CLUSTER: &str = "t";
/// Ids per kind the edits pick from (small, so they collide with the hand-made objects).
const IDS: u8 = 4;
/// Contents per kind the edits pick from (hand-made objects too: some match).
const VARIANTS: u8 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum K {
    Pool,
    Job,
    Map,
    Acl,
}

const KINDS: [K; 4] = [K::Pool, K::Job, K::Map, K::Acl];

impl K {
    fn kind(self) -> &'static str {
        match self {
            K::Pool => "Pool",
            K::Job => "BackupJob",
            K::Map => "ResourceMapping",
            K::Acl => "Acl",
        }
    }

    fn class(self) -> ObjectClass {
        match self {
            K::Pool => ObjectClass::Pool,
            K::Job => ObjectClass::BackupJob,
            K::Map => ObjectClass::Mapping,
            K::Acl => ObjectClass::Acl,
        }
    }

    /// The free-text field PVE keeps the mark in (none: an ACL entry).
    fn marker(self) -> Option<&'static str> {
        match self {
            K::Pool | K::Job => Some("comment"),
            K::Map => Some("description"),
            K::Acl => None,
        }
    }

    /// The operator's text of variant `v`.
    fn text(self, v: u8) -> String {
        match self {
            K::Pool => format!("pool v{v}"),
            K::Job => format!("job v{v}"),
            K::Map => format!("gpu v{v}"),
            K::Acl => String::new(),
        }
    }

    /// The PVE id of a pool, job or mapping; an ACL manifest's path.
    fn id(self, id: u8) -> String {
        match self {
            K::Pool => format!("p{id}"),
            K::Job => format!("j{id}"),
            K::Map => format!("m{id}"),
            K::Acl => format!("/vms/10{id}"),
        }
    }
}

/// The (principal, role) pairs of ACL variant `v` on a path.
fn acl_pairs(v: u8) -> Vec<(&'static str, &'static str)> {
    match v {
        0 => vec![("alice@pve", "PVEAuditor")],
        1 => vec![("alice@pve", "PVEAuditor"), ("bob@pve", "PVEAuditor")],
        _ => vec![("bob@pve", "PVEVMUser")],
    }
}

fn acl_entry(path: &str, user: &str, role: &str) -> String {
    format!("{path}|user|{user}|{role}")
}

/// One declared object resource.
#[derive(Debug, Clone, PartialEq)]
struct Obj {
    kind: K,
    name: String,
    id: u8,
    v: u8,
}

impl Obj {
    fn key(&self) -> ResourceKey {
        ResourceKey {
            kind: self.kind.kind().to_owned(),
            name: self.name.clone(),
        }
    }

    fn text(&self) -> String {
        let (k, id, v) = (self.kind, self.kind.id(self.id), self.v);
        let spec = match k {
            K::Pool => format!("  id: {id}\n  comment: {}\n", k.text(v)),
            K::Job => format!(
                "  id: {id}\n  schedule: \"0{v}:00\"\n  storage: local\n  vmids: [100]\n  mode: snapshot\n  comment: {}\n",
                k.text(v)
            ),
            K::Map => format!(
                "  id: {id}\n  type: pci\n  description: {}\n  map:\n    - node: pve1\n      path: \"0000:0{}:00.0\"\n      id: \"10de:1b80\"\n",
                k.text(v),
                v + 1
            ),
            K::Acl => {
                let pairs = acl_pairs(v);
                let users: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
                let roles: BTreeSet<&str> = pairs.iter().map(|p| p.1).collect();
                let list = |s: BTreeSet<&str>| s.into_iter().collect::<Vec<_>>().join(", ");
                format!(
                    "  path: {id}\n  roles: [{}]\n  users: [{}]\n",
                    list(roles),
                    list(users)
                )
            }
        };
        format!(
            "apiVersion: proxops/v1alpha1\nkind: {}\nmetadata:\n  name: {}\nspec:\n{spec}",
            k.kind(),
            self.name
        )
    }

    /// The live ids it declares: its object's, or its ACL entries (the product of its users and
    /// roles).
    fn ids(&self) -> Vec<String> {
        match self.kind {
            K::Acl => {
                let pairs = acl_pairs(self.v);
                let users: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
                let roles: BTreeSet<&str> = pairs.iter().map(|p| p.1).collect();
                let path = self.kind.id(self.id);
                users
                    .iter()
                    .flat_map(|u| roles.iter().map(|r| acl_entry(&path, u, r)))
                    .collect()
            }
            k => vec![k.id(self.id)],
        }
    }
}

#[derive(Debug, Clone)]
enum Edit {
    Add { kind: usize, id: u8, v: u8 },
    Change(usize, u8),
    Rename(usize),
    Reid(usize, u8),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (0..KINDS.len(), 0..IDS, 0..VARIANTS).prop_map(|(kind, id, v)| Edit::Add { kind, id, v }),
        2 => (0usize..8, 0..VARIANTS).prop_map(|(i, v)| Edit::Change(i, v)),
        1 => (0usize..8).prop_map(Edit::Rename),
        1 => (0usize..8, 0..IDS).prop_map(|(i, id)| Edit::Reid(i, id)),
        1 => (0usize..8).prop_map(Edit::Remove),
    ]
}

/// The manifests after `edit`, kept valid as validation keeps them: no two resources of a kind
/// at one id.
fn applied(mut set: Vec<Obj>, edit: &Edit, fresh: &mut u32) -> Vec<Obj> {
    let free = |set: &[Obj], kind: K, id: u8| !set.iter().any(|o| o.kind == kind && o.id == id);
    let pick = |set: &[Obj], i: usize| (!set.is_empty()).then(|| i % set.len());
    match *edit {
        Edit::Add { kind, id, v } => {
            let kind = KINDS[kind];
            if free(&set, kind, id) {
                *fresh += 1;
                set.push(Obj {
                    kind,
                    name: format!("{}{fresh}", kind.kind().to_ascii_lowercase()),
                    id,
                    v,
                });
            }
        }
        Edit::Change(i, v) => {
            if let Some(i) = pick(&set, i) {
                set[i].v = v;
            }
        }
        Edit::Rename(i) => {
            if let Some(i) = pick(&set, i) {
                set[i].name.push('r');
            }
        }
        Edit::Reid(i, id) => {
            if let Some(i) = pick(&set, i)
                && free(&set, set[i].kind, id)
            {
                set[i].id = id;
            }
        }
        Edit::Remove(i) => {
            if let Some(i) = pick(&set, i) {
                set.remove(i);
            }
        }
    }
    set
}

/// What the simulator holds from the start besides ProxOps's objects.
#[derive(Debug, Clone)]
struct Start {
    /// Hand-made objects per kind and id, with their variant (ACL: the variant's entries).
    hand: Vec<(usize, u8, u8)>,
}

fn start() -> impl Strategy<Value = Start> {
    prop::collection::vec((0..KINDS.len(), 0..IDS, 0..VARIANTS), 0..6)
        .prop_map(|hand| Start { hand })
}

async fn call(client: &PveClient, method: Method, path: &str, params: Params) {
    let what = format!("{method:?} {path}");
    client
        .call_json(method, path, path, &params)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Makes a hand-made object of `kind` at `id` with variant `v` through the API, unmarked, or
/// with `text` in its free-text field.
async fn make(client: &PveClient, kind: K, id: u8, v: u8, text: Option<&str>) {
    let pid = kind.id(id);
    let note = text.map_or_else(|| kind.text(v), str::to_owned);
    match kind {
        K::Pool => {
            let p = Params::new().set("poolid", &pid).set("comment", note);
            call(client, Method::POST, "/pools", p).await;
        }
        K::Job => {
            let p = Params::new()
                .set("id", &pid)
                .set("schedule", format!("0{v}:00"))
                .set("storage", "local")
                .set("vmid", "100")
                .set("mode", "snapshot")
                .set("comment", note);
            call(client, Method::POST, "/cluster/backup", p).await;
        }
        K::Map => {
            let p = Params::new().set("id", &pid).set("description", note).set(
                "map",
                format!("node=pve1,path=0000:0{}:00.0,id=10de:1b80", v + 1),
            );
            call(client, Method::POST, "/cluster/mapping/pci", p).await;
        }
        K::Acl => {
            for (user, role) in acl_pairs(v) {
                let p = Params::new()
                    .set("path", &pid)
                    .set("users", user)
                    .set("roles", role);
                call(client, Method::PUT, "/access/acl", p).await;
            }
        }
    }
}

/// The live objects of every kind, by kind.
async fn live(client: &PveClient) -> BTreeMap<K, LiveList> {
    let mut out = BTreeMap::new();
    for k in KINDS {
        let list = read(client, &endpoints(k.class(), None)).await.unwrap();
        out.insert(k, list);
    }
    out
}

/// A live object's fields as compared: without what PVE computes (a job's next run, the
/// digest of the file it is in).
fn fields(list: &LiveList, id: &str) -> Option<BTreeMap<String, ObjValue>> {
    list.get(id).map(|p| {
        p.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "next-run" | "digest"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

fn text_of(list: &LiveList, id: &str, field: &str) -> Option<String> {
    match list.get(id)?.get(field)? {
        ObjValue::One(t) => Some(t.clone()),
        ObjValue::Many(_) => None,
    }
}

/// What the planes would remember after a cycle: receipts (the document each was reconciled
/// at: they outlive the resource) and the desired head.
#[derive(Default)]
struct Planes {
    receipts: BTreeMap<ResourceKey, Arc<Resource>>,
    prior: BTreeMap<ResourceKey, Arc<Resource>>,
}

impl Planes {
    /// `PlanOptions::previous` and `receipts` as `previous_and_receipted` gives them: a
    /// receipt's document, else the desired head's.
    fn options(&self, base: &PlanOptions) -> PlanOptions {
        let mut previous = self.prior.clone();
        previous.extend(self.receipts.clone());
        base.clone()
            .with_previous(Some(previous))
            .with_receipts(Some(self.receipts.keys().cloned().collect()))
    }

    /// The receipts a cycle earns (as `observation_batch`): each desired resource not held by
    /// an anomaly or skip whose actions all succeeded.
    fn record(&mut self, graph: &Graph, plan: &ClusterPlan, outcomes: &BTreeMap<usize, bool>) {
        let held: BTreeSet<&str> = plan
            .anomalies
            .iter()
            .map(|a| a.subject.as_str())
            .chain(plan.skipped.iter().map(|s| s.subject.as_str()))
            .collect();
        let mut desired = BTreeMap::new();
        for id in graph.resources() {
            let r = graph.resource(id);
            let key = r.key();
            desired.insert(key.clone(), Arc::clone(r));
            if held.contains(key.to_string().as_str()) {
                continue;
            }
            let ok = plan
                .actions
                .iter()
                .filter(|a| a.kind == key.kind && a.name == key.name)
                .all(|a| outcomes.get(&a.id).copied().unwrap_or(false));
            if ok {
                self.receipts.insert(key, Arc::clone(r));
            }
        }
        self.prior = desired;
    }
}

/// A hand-made object, as it was made.
struct Hand {
    kind: K,
    id: String,
    fields: BTreeMap<String, ObjValue>,
    adopted: bool,
    /// Marked by another cluster: never ProxOps's.
    foreign: bool,
}

#[allow(clippy::too_many_lines)]
async fn run(start: Start, edits: Vec<(Edit, bool)>, seed: u64) -> Result<(), TestCaseError> {
    let sim = proxops_pve_sim::start(
        SimConfig::default()
            .with_state(super::support::one_node())
            .with_task_durations(TaskDurations::uniform(Duration::from_millis(2))),
    )
    .await
    .unwrap();
    let client = proxops_test_support::sim::client(&sim);
    for user in ["alice@pve", "bob@pve"] {
        call(
            &client,
            Method::POST,
            "/access/users",
            Params::new().set("userid", user),
        )
        .await;
    }
    // Hand-made objects (one per kind and id), and a pool and a mapping another cluster's
    // ProxOps made, at ids the edits declare.
    let mut made = BTreeSet::new();
    for &(k, id, v) in &start.hand {
        if made.insert((k, id)) {
            make(&client, KINDS[k], id, v, None).await;
        }
    }
    let foreign = [(K::Pool, 3u8), (K::Map, 3u8)];
    for (k, id) in foreign {
        if made.insert((KINDS.iter().position(|x| *x == k).unwrap(), id)) {
            let text = format!(
                "elsewhere [proxops.other.{}.x{id}]",
                k.kind().to_lowercase()
            );
            make(&client, k, id, 0, Some(&text)).await;
        }
    }
    let before = live(&client).await;
    let mut hand: Vec<Hand> = Vec::new();
    for (k, list) in &before {
        for id in list.keys() {
            let is_foreign = k
                .marker()
                .and_then(|f| text_of(list, id, f))
                .is_some_and(|t| t.contains("[proxops.other."));
            hand.push(Hand {
                kind: *k,
                id: id.clone(),
                fields: fields(list, id).unwrap(),
                adopted: false,
                foreign: is_foreign,
            });
        }
    }

    let base = PlanOptions::default().with_prune_budget(0);
    let registry = Registry::builtin();
    let mut planes = Planes::default();
    let (mut set, mut fresh) = (Vec::new(), 0);
    // Clean cycles at the end let failed writes be retried.
    let steps: Vec<Option<(Edit, bool)>> = edits
        .into_iter()
        .map(Some)
        .chain([None, None, None])
        .collect();
    let mut last_plan = None;
    for (n, step) in steps.into_iter().enumerate() {
        let failing = match &step {
            Some((e, failing)) => {
                set = applied(set, e, &mut fresh);
                *failing
            }
            None => false,
        };
        let resources: Vec<_> = set.iter().map(|o| manifest(&o.text())).collect();
        let graph = Graph::build(&registry, &resources).unwrap();
        sim.set_faults(
            FaultConfig::default()
                .with_seed(seed.wrapping_add(n as u64))
                .with_error_rate(if failing {
                    BTreeMap::from([(EndpointClass::Write, 0.3)])
                } else {
                    BTreeMap::new()
                }),
        );
        let plan = plan_cluster(&client, CLUSTER, &graph, &planes.options(&base))
            .await
            .unwrap();
        let mut outcomes = BTreeMap::new();
        if !plan.is_empty() {
            let report = execute(&client, &plan, &ExecOptions::default()).await;
            for r in &report.results {
                outcomes.insert(r.id, r.outcome == Outcome::Succeeded);
            }
        }
        sim.set_faults(FaultConfig::default());
        let now = live(&client).await;
        // Which ids a succeeded Adopt wrote the mark of, by kind.
        let adopted_now: BTreeSet<(K, String)> = plan
            .actions
            .iter()
            .filter(|a| a.verb == Verb::Adopt && outcomes.get(&a.id) == Some(&true))
            .flat_map(|a| {
                set.iter()
                    .filter(|o| o.kind.kind() == a.kind && o.name == a.name)
                    .flat_map(|o| o.ids().into_iter().map(|id| (o.kind, id)))
                    .collect::<Vec<_>>()
            })
            .collect();
        for h in hand.iter_mut().filter(|h| !h.adopted) {
            let have = fields(&now[&h.kind], &h.id);
            if have.as_ref() == Some(&h.fields) {
                continue;
            }
            let adopted = !h.foreign && adopted_now.contains(&(h.kind, h.id.clone()));
            prop_assert!(
                adopted,
                "cycle {n}: the hand-made {:?} `{}` ({}) was {} without being adopted\nbefore: {:?}\nnow: {:?}\nplan: {:#?}",
                h.kind,
                h.id,
                if h.foreign {
                    "another cluster's"
                } else {
                    "unmarked"
                },
                if have.is_none() { "deleted" } else { "changed" },
                h.fields,
                have,
                plan.actions
                    .iter()
                    .map(|a| (&a.kind, &a.name, a.verb, &a.reason))
                    .collect::<Vec<_>>()
            );
            h.adopted = true;
        }
        planes.record(&graph, &plan, &outcomes);
        // An ACL entry is adopted by the receipt of the resource that declares it as it is.
        for h in hand.iter_mut().filter(|h| !h.adopted && h.kind == K::Acl) {
            h.adopted = set.iter().any(|o| {
                o.kind == K::Acl
                    && o.ids().contains(&h.id)
                    && planes.receipts.contains_key(&o.key())
            });
        }
        // No live object carries the marks of two resources of this cluster.
        for (k, list) in &now {
            let Some(field) = k.marker() else { continue };
            for id in list.keys() {
                let text = text_of(list, id, field).unwrap_or_default();
                let ours: BTreeSet<&str> = marks_in(&text)
                    .into_iter()
                    .filter(|m| m.starts_with("proxops.t."))
                    .collect();
                prop_assert!(
                    ours.len() <= 1,
                    "cycle {n}: {:?} `{id}` is claimed by {ours:?}",
                    k
                );
            }
        }
        last_plan = Some((plan, now));
    }

    // Converged: nothing left to do but what hand-made objects that differ, and another
    // cluster's, hold back; every other declared object exists as declared.
    let (plan, now) = last_plan.unwrap();
    let held_by_hand =
        |k: K, id: &str| hand.iter().any(|h| h.kind == k && h.id == id && !h.adopted);
    prop_assert!(
        plan.actions.is_empty(),
        "not converged: {:#?}",
        plan.actions
            .iter()
            .map(|a| (&a.kind, &a.name, a.verb, &a.reason))
            .collect::<Vec<_>>()
    );
    for o in &set {
        let list = &now[&o.kind];
        for id in o.ids() {
            if held_by_hand(o.kind, &id) {
                continue;
            }
            prop_assert!(
                list.contains_key(&id),
                "{} ({:?} `{id}`) does not exist; anomalies: {:#?}",
                o.key(),
                o.kind,
                plan.anomalies
            );
            if let Some(field) = o.kind.marker() {
                let want = format!(
                    "{} {}",
                    o.kind.text(o.v),
                    mark(CLUSTER, o.kind.kind(), &o.name)
                );
                let have = text_of(list, &id, field);
                prop_assert!(
                    have.as_deref() == Some(want.as_str()),
                    "{}: its `{field}` is {have:?}, declared {want:?}; anomalies: {:#?}",
                    o.key(),
                    plan.anomalies
                );
            }
        }
    }
    sim.shutdown().await.unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn hand_made_objects_are_never_touched_and_declared_objects_converge(
        start in start(),
        edits in prop::collection::vec((edit(), any::<bool>()), 1..10),
        seed in any::<u64>(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(start, edits, seed))?;
    }
}

/// The cases the property found, kept as plain tests.
fn replay(edits: Vec<Edit>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let edits = edits.into_iter().map(|e| (e, false)).collect();
    runtime
        .block_on(run(Start { hand: Vec::new() }, edits, 0))
        .unwrap();
}

#[test]
fn a_pool_renamed_at_the_same_id_is_taken_over_by_its_new_name() {
    // Was: "pool `p0` carries the mark `[proxops.t.pool.pool1]` of another resource", forever.
    replay(vec![
        Edit::Add {
            kind: 0,
            id: 0,
            v: 0,
        },
        Edit::Rename(0),
    ]);
}

#[test]
fn an_object_its_resource_no_longer_declares_is_taken_by_the_one_that_does() {
    // resourcemapping1 moves from m2 to m3, which another cluster's mapping holds (an
    // anomaly: its step, and the removal of m2, wait); resourcemapping2 then declares m2.
    replay(vec![
        Edit::Add {
            kind: 2,
            id: 2,
            v: 0,
        },
        Edit::Reid(0, 3),
        Edit::Add {
            kind: 2,
            id: 2,
            v: 0,
        },
    ]);
}
