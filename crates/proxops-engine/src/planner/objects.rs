//! Cluster objects (storages, pools, backup jobs, resource mappings, users, groups, roles, ACL
//! entries: `crate::objects`) under the guests' contract:
//! - each list is read once per plan, and only when the plan needs it (a declared object of the
//!   class, or one the planes say ProxOps reconciled before);
//! - an object ProxOps did not make is taken over only when it already matches its manifest
//!   (then its mark is written, or for a class without a free-text field its first receipt
//!   proves it ours);
//! - drift is looked for on the keys the manifest sets, and a key ProxOps wrote before that the
//!   manifest no longer sets is removed;
//! - a prune deletes only what is provably ours: its mark names a resource of this cluster that
//!   is no longer declared, or (no free-text field) its receipt does, within the prune budget;
//!   a storage is never pruned while a declared or live guest has a volume on it.

use super::{PlanOptions, Planner};
use crate::desired::{Desired, identity_tag};
use crate::objects::{
    DesiredObject, Endpoints, Found, LiveList, LiveParams, OPTIONS, ObjValue, Shape, carried,
    create_request, delete_request, guest_firewall_objects, marks_in, objects, read_with_deletions,
    rules, same, strip_marks, update_request,
};
use crate::plan::{KeyChange, Op, Skipped, Verb};
use proxops_graph::StepId;
use proxops_model::kinds::ObjectClass;
use proxops_model::{Resource, ResourceKey};
use proxops_pve::PveClient;
use proxops_pve_schema::{Param, endpoint};
use std::collections::{BTreeMap, BTreeSet};

/// The lists read this plan, by concrete list path.
pub(super) type ObjectLists = BTreeMap<String, ObjectRead>;

/// One list read: where from, and what it held (or why it could not be read).
pub(super) struct ObjectRead {
    endpoints: Endpoints,
    list: Result<LiveList, String>,
    /// The SDN objects of the list whose deletion waits for `PUT /cluster/sdn`.
    deleted: BTreeSet<String>,
}

/// How the object at a declared id is held.
enum Claim {
    /// Marked as this resource, or reconciled by it before (a receipt, and the previous
    /// document at the same id): for a class without a free-text field, or one whose mark was
    /// edited away by hand.
    Own,
    /// Not ProxOps's: taken over only if it already matches.
    Adopt,
}

impl<'a> Planner<'a> {
    /// Reads the list of every class the plan needs: declared, or in the previous desired
    /// plane (prune candidates); and the firewall of each live guest that declares one or
    /// declared one before.
    pub(super) async fn read_objects(&mut self, client: &PveClient, options: &PlanOptions) {
        let mut needed: BTreeSet<Endpoints> = BTreeSet::new();
        let graph = self.cx.graph;
        let cx = self.cx;
        let firewalls = |resource: &Resource, needed: &mut BTreeSet<Endpoints>| {
            if let Ok(Desired::Guest(d)) = options.drivers.desired(&cx, resource)
                && let Some(f) = &d.firewall
                && let Some(live) = self.inventory.guest(d.vmid)
            {
                let owner = identity_tag(cx.cluster, resource.kind, resource.name());
                let lxc = live.kind == proxops_pve::GuestType::Lxc;
                for o in guest_firewall_objects(f, &owner, lxc, &live.node, d.vmid) {
                    needed.insert(o.endpoints);
                }
            }
        };
        for id in graph.resources() {
            let resource = graph.resource(id);
            match objects(cx.cluster, resource) {
                Some(objs) => needed.extend(objs.into_iter().map(|o| o.endpoints)),
                None => firewalls(resource, &mut needed),
            }
        }
        for (key, resource) in options.previous.iter().flatten() {
            if graph.find(&key.kind, &key.name).is_none()
                && let Some(objs) = objects(cx.cluster, resource)
            {
                needed.extend(objs.into_iter().map(|o| o.endpoints));
            }
        }
        // In template order, a list before the lists under its objects: the entries of an IP set
        // and the rules of a group are read only when the set or group exists.
        for e in needed {
            // The list of the objects under a parent (`/cluster/sdn/vnets/{vnet}/subnets`): not
            // read when the parent's own list was read and lacks it (created this plan).
            let missing_parent = e.vars.iter().any(|(k, id)| {
                let Some(at) = e.list.find(&format!("/{{{k}}}")) else {
                    return false;
                };
                matches!(self.live_list(&e.list[..at]), Some(Ok(l)) if !l.contains_key(id))
            });
            if missing_parent {
                continue;
            }
            let (list, deleted) = match read_with_deletions(client, &e).await {
                Ok((list, deleted)) => (Ok(list), deleted),
                Err(err) => (Err(err.to_string()), BTreeSet::new()),
            };
            self.objects.insert(
                e.list_path(),
                ObjectRead {
                    endpoints: e,
                    list,
                    deleted,
                },
            );
        }
    }

    /// The read of list `path`, if the plan read it.
    fn live_list(&self, path: &str) -> Option<&Result<LiveList, String>> {
        self.objects.get(path).map(|r| &r.list)
    }

    /// Plans a declared guest's own firewall (`firewall:`), after the guest's actions: on a
    /// guest being created, everything; on a live one, what differs.
    pub(super) fn guest_firewall_step(&mut self, step: StepId, d: &crate::desired::DesiredGuest) {
        let Some(f) = &d.firewall else { return };
        if self.blocked.contains(&step) {
            return;
        }
        let graph = self.cx.graph;
        let resource = graph.resource(graph.step(step).resource);
        let key = resource.key();
        let owner = identity_tag(self.cx.cluster, &key.kind, &key.name);
        let lxc = d.guest == proxops_pve::GuestType::Lxc;
        let after: Vec<usize> = self.step_actions.get(&step).copied().into_iter().collect();
        // Where the guest is: found live, or where its create action makes it.
        let (node, creating) = match self.inventory.guest(d.vmid) {
            Some(live) if live.node == d.node || d.placed && d.nodes.contains(&live.node) => {
                (live.node.clone(), false)
            }
            // Moving this cycle: its firewall follows next cycle, on its new node.
            Some(_) => return,
            None => match after.first() {
                Some(a) => (self.plan.actions[*a].node.clone(), true),
                None => return,
            },
        };
        let objs = guest_firewall_objects(f, &owner, lxc, &node, d.vmid);
        for o in objs {
            let live = if creating {
                Some(LiveList::new())
            } else {
                match self.live_list(&o.endpoints.list_path()) {
                    Some(Ok(list)) => Some(list.clone()),
                    Some(Err(e)) => {
                        let why = format!("cannot read {}: {e}", o.endpoints.list_path());
                        return self.block(step, why, false);
                    }
                    // A guest found on another node than planned: its firewall waits for the
                    // next cycle.
                    None => None,
                }
            };
            let Some(live) = live else { continue };
            let planned = match o.endpoints.shape {
                Shape::Rules => self.rules_change(&o, &live),
                _ => options_change(&o, None, live.get(OPTIONS)),
            };
            if let Some(p) = planned {
                self.push_object(step, &key, p, &after);
            }
        }
    }

    /// An API token not created, and why: a plan error (its dependants wait), never a token
    /// whose secret would be lost.
    fn refuse_token(&mut self, step: StepId, code: &str, reason: String) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, code, "API token not created");
        self.plan.errors.push(crate::plan::ResourceError {
            subject,
            code: code.to_owned(),
            reason,
        });
        self.blocked.insert(step);
        self.deferral = None;
    }

    /// Plans the objects of one declared resource.
    pub(super) fn object_step(
        &mut self,
        step: StepId,
        resource: &Resource,
        desired: Vec<DesiredObject>,
        before: Option<&[DesiredObject]>,
        options: &PlanOptions,
    ) {
        let key = resource.key();
        let receipted = options.receipts.as_ref().is_some_and(|r| r.contains(&key));
        let mut changes = Vec::new();
        for d in &desired {
            let list_path = d.endpoints.list_path();
            let list = match self.live_list(&list_path) {
                Some(Ok(list)) => list,
                Some(Err(e)) => {
                    let why = format!("cannot read {list_path}: {e}");
                    return self.block(step, why, false);
                }
                None => {
                    // A list under an object this plan creates (a new IP set's entries, a new
                    // group's rules): empty.
                    &LiveList::new()
                }
            };
            let previous = before.and_then(|b| {
                b.iter()
                    .find(|p| p.id == d.id && p.endpoints.list_path() == list_path)
            });
            match d.endpoints.shape {
                Shape::Rules => {
                    if let Some(p) = self.rules_change(d, list) {
                        changes.push(p);
                    }
                    continue;
                }
                Shape::Options => {
                    if let Some(p) = options_change(d, previous, list.get(OPTIONS)) {
                        changes.push(p);
                    }
                    continue;
                }
                Shape::Item | Shape::AclEntry => {}
            }
            let Some(live) = list.get(&d.id) else {
                if d.class == ObjectClass::ApiToken {
                    match token_sink(options, &self.plan.cluster, &key.name) {
                        Ok(sink) => changes.push(Planned::CreateToken(d.clone(), sink)),
                        Err((code, why)) => return self.refuse_token(step, code, why),
                    }
                    continue;
                }
                changes.push(Planned::Create(d.clone()));
                continue;
            };
            // Named in its own path by another field (a subnet's id).
            let named;
            let d = match d.endpoints.path_field.and_then(|f| live.get(f)) {
                Some(ObjValue::One(id)) => {
                    let mut o = d.clone();
                    o.path_id = Some(id.clone());
                    named = o;
                    &named
                }
                _ => d,
            };
            let claim = match self.object_claim(&key, d, live, receipted && previous.is_some()) {
                Ok(c) => c,
                Err(why) => return self.block(step, why, true),
            };
            let found = diff(d, previous, live);
            if let Some(why) = found.fixed.first() {
                let why = format!(
                    "{} `{}`: {why}; PVE cannot change it in place: remove the object and let ProxOps create it again, or declare what it has",
                    word(d),
                    d.id
                );
                return self.block(step, why, true);
            }
            match claim {
                Claim::Own if found.is_empty() => {}
                Claim::Own => changes.push(Planned::Update(d.clone(), found)),
                Claim::Adopt => {
                    let marker = d.endpoints.marker;
                    // The free-text field differs only by the mark to be written: the operator's
                    // text must already be what the manifest says.
                    let differs: Vec<&str> = found
                        .set
                        .iter()
                        .filter(|(k, want, have)| {
                            Some(k.as_str()) != marker || !same_text(want, have.as_ref())
                        })
                        .map(|(k, _, _)| k.as_str())
                        .collect();
                    if !differs.is_empty() || !found.unset.is_empty() {
                        let why = format!(
                            "{} `{}` exists and ProxOps did not make it ({}); it is taken over only once it matches the manifest, and it differs in: {}. Make the manifest say what PVE has (`proxops adopt --kind {}` writes it), or change the object",
                            word(d),
                            d.id,
                            match marker {
                                Some(f) => format!("no mark in its `{f}`"),
                                None => "no receipt on the observed plane".to_owned(),
                            },
                            differs.join(", "),
                            key.kind,
                        );
                        return self.block(step, why, true);
                    }
                    if marker.is_some() && !found.is_empty() {
                        changes.push(Planned::Adopt(d.clone(), found));
                    }
                }
            }
        }
        changes.extend(self.gone_parts(&desired, before, receipted));
        // One after the other: an IP set before its entries, a group before its rules.
        let mut last: Option<usize> = None;
        for c in changes {
            let also: Vec<usize> = last.into_iter().collect();
            last = Some(self.push_object(step, &key, c, &also));
        }
    }

    /// The parts of a declared resource it no longer declares: objects marked with its own
    /// mark in lists it uses (an alias, an IP set entry, a security group of its firewall), and
    /// (by its receipt) ACL entries it granted before.
    fn gone_parts(
        &self,
        desired: &[DesiredObject],
        before: Option<&[DesiredObject]>,
        receipted: bool,
    ) -> Vec<Planned> {
        let mut out = Vec::new();
        let mut lists: BTreeMap<String, &Endpoints> = BTreeMap::new();
        for d in desired.iter().chain(before.unwrap_or_default()) {
            if d.endpoints.shape == Shape::Item && d.endpoints.marker.is_some() {
                lists.insert(d.endpoints.list_path(), &d.endpoints);
            }
        }
        let Some(owner) = desired.first().map(|d| d.owner.as_str()) else {
            return out;
        };
        for (path, e) in lists {
            let Some(Ok(list)) = self.live_list(&path) else {
                continue;
            };
            let Some(field) = e.marker else { continue };
            for (id, live) in list {
                let declared = desired
                    .iter()
                    .any(|d| d.id == *id && d.endpoints.list_path() == path);
                let ours = matches!(live.get(field), Some(ObjValue::One(t)) if marks_in(t).contains(&owner));
                if ours && !declared {
                    let mut gone = DesiredObject::existing(desired[0].class, (*e).clone(), id);
                    gone.owner = owner.to_owned();
                    out.push(Planned::Remove(gone));
                }
            }
        }
        if receipted {
            for p in before.unwrap_or_default() {
                let gone = !desired.iter().any(|d| d.id == p.id);
                let live = matches!(self.live_list(&p.endpoints.list_path()), Some(Ok(l)) if l.contains_key(&p.id));
                if gone && live && p.endpoints.shape == Shape::AclEntry {
                    out.push(Planned::Remove(p.clone()));
                }
            }
        }
        out
    }

    /// What a rule list of `d` needs, if anything.
    fn rules_change(&self, d: &DesiredObject, list: &LiveList) -> Option<Planned> {
        let live = rules::ordered(list);
        let found = rules::diff(&d.endpoints, &d.rules, &live, &d.owner);
        (!found.is_empty()).then(|| Planned::Rules(d.clone(), found))
    }

    fn object_claim(
        &self,
        key: &ResourceKey,
        d: &DesiredObject,
        live: &LiveParams,
        receipted: bool,
    ) -> Result<Claim, String> {
        let Some(field) = d.endpoints.marker else {
            return Ok(if receipted { Claim::Own } else { Claim::Adopt });
        };
        let text = match live.get(field) {
            Some(ObjValue::One(t)) => t.as_str(),
            _ => "",
        };
        let marks = marks_in(text);
        let ours = identity_tag(self.cx.cluster, &key.kind, &key.name);
        if marks.contains(&ours.as_str()) {
            return Ok(Claim::Own);
        }
        match marks.first() {
            // Its mark edited away by hand: still ours when the planes remember reconciling it.
            None if receipted => Ok(Claim::Own),
            None => Ok(Claim::Adopt),
            // Marked by a resource of this cluster and kind that no longer declares it (renamed
            // at the same id, as a guest's `Renamed`, or given another id): ours by that mark,
            // which the update rewrites; its prune would delete it otherwise.
            Some(_) if self.released(key, d, &marks) => Ok(Claim::Own),
            Some(other) => Err(format!(
                "{} `{}` carries the mark `[{other}]` of another resource: it is not {key}'s; give the manifest another id, or remove that mark by hand to let {key} take it over",
                word(d),
                d.id
            )),
        }
    }

    /// Whether `marks` all name resources of this cluster and of `key`'s kind that do not
    /// declare `d`'s object (any more): not declared, or declaring other ids.
    fn released(&self, key: &ResourceKey, d: &DesiredObject, marks: &[&str]) -> bool {
        let (cluster, graph) = (self.cx.cluster, self.cx.graph);
        let prefix = format!("proxops.{cluster}.");
        let path = d.endpoints.list_path();
        !marks.is_empty()
            && marks.iter().all(|m| {
                key_of_mark(m, &prefix).is_some_and(|k| {
                    k.kind == key.kind
                        && graph.find(&k.kind, &k.name).is_none_or(|id| {
                            !objects(cluster, graph.resource(id))
                                .into_iter()
                                .flatten()
                                .any(|o| o.id == d.id && o.endpoints.list_path() == path)
                        })
                })
            })
    }

    fn push_object(
        &mut self,
        step: StepId,
        key: &ResourceKey,
        planned: Planned,
        also: &[usize],
    ) -> usize {
        let (verb, reason, op, shown) = match planned {
            Planned::Create(d) => {
                let reason = format!("{} `{}` does not exist", word(&d), d.id);
                (
                    Verb::Create,
                    reason,
                    Op::Object(create_request(&d)),
                    shown_all(&d),
                )
            }
            Planned::CreateToken(d, sink) => {
                let kept = match &sink.file {
                    Some((shown, _)) => format!("written to {}", shown.display()),
                    None => "kept on the observed plane".to_owned(),
                };
                let reason = format!(
                    "API token `{}` does not exist; its secret is encrypted to {} age recipient(s) of the cluster's SOPS file and {kept}",
                    d.id,
                    sink.recipients.len()
                );
                let op = Op::Token {
                    request: create_request(&d),
                    recipients: sink.recipients,
                    file: sink.file.map(|(_, path)| path),
                };
                (Verb::Create, reason, op, shown_all(&d))
            }
            Planned::Update(d, found) => {
                let reason = found.reason();
                let shown = shown(&found);
                (
                    Verb::Update,
                    reason,
                    Op::Object(update_request(&d, &found)),
                    shown,
                )
            }
            Planned::Adopt(d, found) => {
                let reason = format!(
                    "not made by ProxOps and matches the manifest: writing its mark in `{}`",
                    d.endpoints.marker.unwrap_or_default()
                );
                let shown = shown(&found);
                (
                    Verb::Adopt,
                    reason,
                    Op::Object(update_request(&d, &found)),
                    shown,
                )
            }
            Planned::Remove(p) => {
                let reason = format!("{} `{}` is no longer declared by {key}", word(&p), p.id);
                (
                    Verb::Delete,
                    reason,
                    Op::Object(delete_request(&p)),
                    Vec::new(),
                )
            }
            Planned::Rules(d, found) => {
                let reason = format!("{} of {}", found.summary(), d.endpoints.list_path());
                let op = Op::Rules {
                    endpoints: d.endpoints.clone(),
                    rules: d.rules.clone(),
                    owner: d.owner.clone(),
                };
                (Verb::Update, reason, op, Vec::new())
            }
        };
        let id = self.push(step, ("", None), verb, reason, op, also);
        self.plan.actions[id].changes = shown;
        id
    }

    /// Deletes the objects of ours whose resources are gone from the composition.
    pub(super) async fn object_prunes(&mut self, client: &PveClient, options: &PlanOptions) {
        let candidates = self.object_prune_candidates(options);
        if candidates.is_empty() {
            return;
        }
        let empty = self.graph().resources().next().is_none();
        let deleted = self
            .plan
            .actions
            .iter()
            .filter(|a| a.verb == Verb::Delete)
            .count();
        let mut budget = if options.prune_budget == 0 {
            usize::MAX
        } else {
            (options.prune_budget.saturating_sub(options.prunes_used) as usize)
                .saturating_sub(deleted)
        };
        for (key, d) in candidates {
            let subject = format!("{key} ({} `{}`)", word(&d), d.id);
            let deferral = if empty {
                Some(
                    "the composition declares nothing: an emptied resources.yaml prunes nothing"
                        .to_owned(),
                )
            } else if budget == 0 {
                Some(format!(
                    "prune budget of {} used up this run",
                    options.prune_budget
                ))
            } else if d.class == ObjectClass::Storage {
                match self.storage_users(client, &d.id).await {
                    StorageHold::Free => None,
                    StorageHold::Later(reason) => Some(reason),
                    // Only the operator can free it: said as an anomaly, never deleted.
                    StorageHold::Used(users) => {
                        self.plan.anomalies.push(crate::plan::Anomaly::new(
                            subject,
                            format!(
                                "not pruned: guests use it ({users}); move their disks off it or declare the storage again"
                            ),
                        ));
                        continue;
                    }
                }
            } else {
                None
            };
            if let Some(reason) = deferral {
                self.plan.deferred_prunes.push(Skipped { subject, reason });
                continue;
            }
            budget = budget.saturating_sub(1);
            let why = match options.marked.get(&key) {
                Some(_) => "marked for deletion with `proxops delete`",
                None => "no longer declared",
            };
            let proof = match d.endpoints.marker {
                Some(f) => format!("ours by the mark in its `{f}`"),
                None => "ours by its receipt on the observed plane".to_owned(),
            };
            let action = crate::plan::Action {
                id: self.plan.actions.len(),
                level: None,
                kind: key.kind.clone(),
                name: key.name.clone(),
                node: String::new(),
                vmid: None,
                verb: Verb::Delete,
                reason: format!("{why}; {proof}"),
                changes: Vec::new(),
                resizes: Vec::new(),
                restart: false,
                after: Vec::new(),
                op: match d.endpoints.shape {
                    Shape::Rules => Op::Rules {
                        endpoints: d.endpoints.clone(),
                        rules: Vec::new(),
                        owner: d.owner.clone(),
                    },
                    _ => Op::Object(delete_request(&d)),
                },
            };
            self.plan.actions.push(action);
        }
    }

    /// The objects of ours no declared resource holds: marked with an undeclared resource of
    /// this cluster, or receipted (no free-text field) for one; and the rules of such a
    /// resource (pruned as an emptied rule list).
    fn object_prune_candidates(&self, options: &PlanOptions) -> Vec<(ResourceKey, DesiredObject)> {
        let graph = self.cx.graph;
        let cluster = self.cx.cluster;
        // What the composition declares, by (list, id): never pruned whatever it carries.
        let mut declared: BTreeSet<(String, String)> = BTreeSet::new();
        for id in graph.resources() {
            for d in objects(cluster, graph.resource(id)).into_iter().flatten() {
                declared.insert((d.endpoints.list_path(), d.id));
            }
        }
        let mut out: BTreeMap<(String, String), (ResourceKey, DesiredObject)> = BTreeMap::new();
        let prefix = format!("proxops.{cluster}.");
        for (key, resource) in options.previous.iter().flatten() {
            if graph.find(&key.kind, &key.name).is_some() {
                continue;
            }
            let receipted = options.receipts.as_ref().is_some_and(|r| r.contains(key));
            for d in objects(cluster, resource).into_iter().flatten() {
                let path = d.endpoints.list_path();
                let Some(Ok(list)) = self.live_list(&path) else {
                    continue;
                };
                let at = (path, d.id.clone());
                if declared.contains(&at) {
                    continue;
                }
                let proven = match d.endpoints.shape {
                    // Never pruned: the options stay as they are.
                    Shape::Options => false,
                    Shape::Rules => rules::ordered(list)
                        .iter()
                        .any(|r| rules::index_of(r, &d.owner).is_some()),
                    Shape::Item | Shape::AclEntry => match (list.get(&d.id), d.endpoints.marker) {
                        (None, _) => false,
                        (Some(live), Some(f)) => {
                            matches!(live.get(f), Some(ObjValue::One(t)) if marks_in(t).contains(&d.owner.as_str()))
                        }
                        (Some(_), None) => receipted,
                    },
                };
                if proven {
                    let mut d = d;
                    d.rules.clear();
                    // Named in its path by another field (a subnet's id).
                    if let Some(ObjValue::One(id)) =
                        d.endpoints.path_field.and_then(|f| list.get(&d.id)?.get(f))
                    {
                        d.path_id = Some(id.clone());
                    }
                    out.insert(at, (key.clone(), d));
                }
            }
        }
        // Marked objects of this cluster whose resources are not declared, whether or not the
        // planes remember them (a plan without the planes).
        for (path, read) in &self.objects {
            let Ok(list) = &read.list else { continue };
            let e = &read.endpoints;
            let Some(field) = e.marker else { continue };
            let mut owners: BTreeSet<String> = BTreeSet::new();
            for (id, live) in list {
                let Some(ObjValue::One(text)) = live.get(field) else {
                    continue;
                };
                for mark in marks_in(text)
                    .into_iter()
                    .filter(|m| m.starts_with(&prefix))
                {
                    let owner = mark.split('#').next().unwrap_or(mark);
                    let Some(key) = key_of_mark(owner, &prefix) else {
                        continue;
                    };
                    if graph.find(&key.kind, &key.name).is_some() {
                        continue;
                    }
                    match e.shape {
                        Shape::Item => {
                            let at = (path.clone(), id.clone());
                            if declared.contains(&at) || out.contains_key(&at) {
                                continue;
                            }
                            let class =
                                ObjectClass::of_kind(&key.kind).unwrap_or(ObjectClass::Firewall);
                            let mut d = DesiredObject::existing(class, e.clone(), id);
                            d.owner = owner.to_owned();
                            out.insert(at, (key, d));
                        }
                        Shape::Rules if owners.insert(owner.to_owned()) => {
                            let at = (path.clone(), format!("rules of {owner}"));
                            if out.contains_key(&at) {
                                continue;
                            }
                            let mut d =
                                DesiredObject::existing(ObjectClass::Firewall, e.clone(), "rules");
                            d.owner = owner.to_owned();
                            out.insert(at, (key, d));
                        }
                        _ => {}
                    }
                }
            }
        }
        let mut v: Vec<(ResourceKey, DesiredObject)> = out.into_values().collect();
        // Dependants first: a backup job before the storage and pool it names, ACL entries
        // before users, groups and roles, rules before the groups they are in.
        v.sort_by_key(|(k, d)| {
            let rules_first = d.endpoints.shape != Shape::Rules;
            (std::cmp::Reverse(d.class), rules_first, k.clone())
        });
        v
    }

    /// Whether storage `id` may go: not while a declared guest has a disk on it, or a live
    /// guest a volume; held one cycle when those guests are pruned by this very plan.
    async fn storage_users(&self, client: &PveClient, id: &str) -> StorageHold {
        let graph = self.cx.graph;
        let registry = proxops_model::Registry::builtin();
        let declared: Vec<String> = graph
            .resources()
            .map(|r| graph.resource(r))
            .filter(|r| {
                registry
                    .get(r.kind)
                    .is_some_and(|k| k.storages(&r.spec).iter().any(|u| u.storage == id))
            })
            .map(|r| format!("declared {}", r.key()))
            .collect();
        if !declared.is_empty() {
            return StorageHold::Used(declared.join(", "));
        }
        let mut users = BTreeSet::new();
        let nodes: BTreeSet<&str> = self
            .inventory
            .storages
            .iter()
            .filter(|s| s.storage == id)
            .map(|s| s.node.as_str())
            .collect();
        for node in nodes {
            match client.storage_content(node, id, None).await {
                Ok(volumes) => users.extend(volumes.iter().filter_map(|v| v.vmid)),
                Err(e) => {
                    return StorageHold::Later(format!(
                        "cannot read its content on node `{node}` to see which guests use it: {e}"
                    ));
                }
            }
        }
        if users.is_empty() {
            return StorageHold::Free;
        }
        let pruned: BTreeMap<u32, String> = self
            .plan
            .actions
            .iter()
            .filter(|a| a.verb == Verb::Delete)
            .filter_map(|a| Some((a.vmid?, format!("{}/{}", a.kind, a.name))))
            .collect();
        let named = |vmid: &u32| match (pruned.get(vmid), self.inventory.guests.get(vmid)) {
            (Some(key), _) => format!("{key} (vmid {vmid})"),
            (None, Some(g)) => match &g.name {
                Some(name) => format!("vmid {vmid} `{name}`"),
                None => format!("vmid {vmid}"),
            },
            (None, None) => format!("vmid {vmid} (volumes only)"),
        };
        let list: Vec<String> = users.iter().map(named).collect();
        if users.iter().all(|v| pruned.contains_key(v)) {
            StorageHold::Later(format!(
                "guests pruned by this plan have volumes on it: {}; it goes the cycle after",
                list.join(", ")
            ))
        } else {
            StorageHold::Used(format!("volumes of {}", list.join(", ")))
        }
    }
}

/// What keeps a storage of ours from being pruned.
enum StorageHold {
    /// Nothing: it may go.
    Free,
    /// Guests the operator must move or declare it for (the anomaly's words).
    Used(String),
    /// Something that passes by itself: its users are pruned in this plan, or its content
    /// could not be read.
    Later(String),
}

/// Where a new API token's secret goes: encrypted to the age recipients of the cluster's SOPS
/// secrets file, then kept on the observed plane (the planes recorded) or written to its file
/// under the repository; or the code and reason why it has nowhere to go.
fn token_sink(
    options: &PlanOptions,
    cluster: &str,
    name: &str,
) -> Result<TokenSink, (&'static str, String)> {
    let file = match (&options.receipts, &options.token_files) {
        (Some(_), _) => None,
        (None, Some(root)) => {
            let shown = crate::objects::token::secret_file(cluster, name);
            Some((shown.clone(), root.join(shown)))
        }
        (None, None) => {
            return Err((
                super::TOKEN_NEEDS_PLANES,
                "PVE shows an API token's secret only when it creates it, and this plan has nowhere to keep it (encrypted): neither the observed plane nor a repository directory to write it under; run with --planes (the agent always does), or through the Reconciler".to_owned(),
            ));
        }
    };
    let recipients = token_recipients(options)?;
    Ok(TokenSink { recipients, file })
}

/// A new token's secret: encrypted to `recipients`, and written to `file` (shown, absolute)
/// when the planes are not recorded.
struct TokenSink {
    recipients: Vec<String>,
    file: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// The age recipients of the cluster's SOPS secrets file, or why there are none.
fn token_recipients(options: &PlanOptions) -> Result<Vec<String>, (&'static str, String)> {
    let secrets = options.secrets.as_ref().ok_or_else(|| {
        (
            super::TOKEN_NO_RECIPIENTS,
            "the cluster's SOPS secrets were not loaded: nothing to encrypt the token's secret to"
                .to_owned(),
        )
    })?;
    match secrets.recipients() {
        Ok(r) => Ok(r.to_vec()),
        Err(why) => Err((
            super::TOKEN_NO_RECIPIENTS,
            format!(
                "its secret is encrypted to the age recipients of the cluster's SOPS secrets file, and there are none: {why}"
            ),
        )),
    }
}

/// The key changes an update or adoption shows, sorted by key.
fn shown(found: &Found) -> Vec<KeyChange> {
    KeyChange::sorted(
        found
            .set
            .iter()
            .map(|(k, d, l)| KeyChange::set(k, l.as_ref().map(ToString::to_string), d.to_string())),
        found
            .unset
            .iter()
            .map(|(k, l)| KeyChange::deleted(k, l.to_string())),
    )
}

/// Whether two free-text values say the same once ProxOps's marks are taken out.
fn same_text(want: &ObjValue, have: Option<&ObjValue>) -> bool {
    let text = |v: Option<&ObjValue>| match v {
        Some(ObjValue::One(t)) => strip_marks(t),
        _ => String::new(),
    };
    text(Some(want)) == text(have)
}

/// The resource a mark of this cluster names (`proxops.<cluster>.<kind>.<name>`): a cluster
/// object's kind, or (a guest's firewall rules) a guest's.
fn key_of_mark(mark: &str, prefix: &str) -> Option<ResourceKey> {
    let rest = mark.strip_prefix(prefix)?;
    let (kind, name) = rest.split_once('.')?;
    let kind = ObjectClass::ALL
        .iter()
        .map(|c| c.kind())
        .chain(["VM", "LXC", "TemplateVM", "TemplateCT"])
        .find(|k| k.eq_ignore_ascii_case(kind))?;
    Some(ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

/// How an object is named in reasons: its class, or the firewall part its list holds.
fn word(d: &DesiredObject) -> &'static str {
    if d.class != ObjectClass::Firewall {
        return class_word(d.class);
    }
    match d.endpoints.list {
        "/cluster/firewall/aliases" => "firewall alias",
        "/cluster/firewall/ipset" => "IP set",
        "/cluster/firewall/ipset/{name}" => "IP set entry",
        "/cluster/firewall/groups" => "security group",
        _ => "firewall",
    }
}

/// How a class is named in reasons.
fn class_word(class: ObjectClass) -> &'static str {
    match class {
        ObjectClass::Storage => "storage",
        ObjectClass::Pool => "pool",
        ObjectClass::BackupJob => "backup job",
        ObjectClass::Mapping => "resource mapping",
        ObjectClass::User => "user",
        ObjectClass::Group => "group",
        ObjectClass::Role => "role",
        ObjectClass::Firewall => "firewall",
        ObjectClass::SdnZone => "SDN zone",
        ObjectClass::SdnVnet => "SDN VNet",
        ObjectClass::SdnSubnet => "SDN subnet",
        ObjectClass::ApiToken => "API token",
        _ => "ACL entry",
    }
}

/// What one declared object needs.
enum Planned {
    Create(DesiredObject),
    /// An API token's create, and where its secret goes.
    CreateToken(DesiredObject, TokenSink),
    Update(DesiredObject, Found),
    Adopt(DesiredObject, Found),
    Remove(DesiredObject),
    Rules(DesiredObject, rules::RuleDiff),
}

/// What the options of a singleton need: the keys the manifest sets that differ, and the keys
/// it set before (`previous`) and no longer does, removed.
fn options_change(
    d: &DesiredObject,
    previous: Option<&DesiredObject>,
    live: Option<&LiveParams>,
) -> Option<Planned> {
    let empty = LiveParams::new();
    let live = live.unwrap_or(&empty);
    let found = diff(d, previous, live);
    (!found.is_empty()).then(|| Planned::Update(d.clone(), found))
}

fn shown_all(d: &DesiredObject) -> Vec<KeyChange> {
    d.create_only
        .iter()
        .chain(&d.params)
        .map(|(k, v)| KeyChange::set(k, None, v.to_string()))
        .collect()
}

/// The parameter `name` of the endpoint that creates objects of `d`'s class.
fn create_param(d: &DesiredObject, name: &str) -> Option<&'static Param> {
    let method = if d.class == ObjectClass::Acl {
        "PUT"
    } else {
        "POST"
    };
    endpoint(method, d.endpoints.create)?
        .params
        .iter()
        .rev()
        .find(|p| p.name == name)
}

/// Whether PVE's update endpoint of `d`'s class takes `name` (`None`: the table does not know
/// the endpoint, so nothing is held back).
fn updatable(d: &DesiredObject, name: &str) -> Option<bool> {
    if d.class == ObjectClass::Acl {
        return Some(true);
    }
    let ep = endpoint("PUT", d.endpoints.item)?;
    Some(ep.params.iter().any(|p| p.name == name))
}

/// How `live` differs from `d` on the keys ProxOps owns; `previous` proves which keys it wrote.
pub(crate) fn diff(
    d: &DesiredObject,
    previous: Option<&DesiredObject>,
    live: &LiveParams,
) -> Found {
    let mut found = Found::default();
    for (k, want) in &d.create_only {
        if let Some(have) = live.get(k)
            && !same(create_param(d, k), want, have)
        {
            found
                .fixed
                .push(format!("its `{k}` is `{have}`, the manifest says `{want}`"));
        }
    }
    for (k, want) in &d.params {
        let have = live.get(k);
        if have.is_some_and(|h| same(create_param(d, k), want, h)) {
            continue;
        }
        if updatable(d, k) == Some(false) {
            found.fixed.push(format!(
                "its `{k}` is `{}`, the manifest says `{want}`",
                have.map(ToString::to_string).unwrap_or_default()
            ));
            continue;
        }
        found.set.push((k.clone(), want.clone(), have.cloned()));
    }
    for (k, _) in previous.map(|p| &p.params).into_iter().flatten() {
        if !d.params.contains_key(k)
            && let Some(have) = live.get(k)
        {
            found.unset.push((k.clone(), have.clone()));
        }
    }
    if !found.is_empty() {
        for k in carried(d) {
            let written =
                found.set.iter().any(|(s, _, _)| s == k) || found.unset.iter().any(|(u, _)| u == k);
            if !written && let Some(have) = live.get(k) {
                found.kept.push((k.to_owned(), have.clone()));
            }
        }
    }
    found
}

/// The desired objects of a driver's answer, if it is a cluster object's.
pub(super) fn as_objects(desired: &Desired) -> Option<&[DesiredObject]> {
    match desired {
        Desired::Objects(o) => Some(o),
        _ => None,
    }
}

impl Planner<'_> {
    /// `PUT /cluster/sdn` after ProxOps's SDN writes (or when a declared SDN object still waits
    /// for one): PVE keeps SDN changes pending until then. Whatever waited for an SDN write waits
    /// for the apply instead, so no guest starts on a VNet that is not there yet.
    pub(super) fn sdn_apply(&mut self, options: &PlanOptions) {
        let sdn_kinds = |kind: &str| ObjectClass::of_kind(kind).is_some_and(ObjectClass::is_sdn);
        let writes: BTreeSet<usize> = self
            .plan
            .actions
            .iter()
            .filter(|a| sdn_kinds(&a.kind) && matches!(a.op, Op::Object(_)))
            .map(|a| a.id)
            .collect();
        let graph = self.cx.graph;
        let waiting = graph.resources().any(|id| {
            let r = graph.resource(id);
            sdn_kinds(r.kind)
                && objects(self.cx.cluster, r).into_iter().flatten().any(|d| {
                    matches!(self.live_list(&d.endpoints.list_path()), Some(Ok(l)) if l.get(&d.id).is_some_and(crate::objects::pending))
                })
        });
        // A removal of ProxOps's whose apply failed: the object is no longer declared, PVE
        // still runs it, and its deletion is pending.
        let removing = options.previous.iter().flatten().any(|(key, resource)| {
            sdn_kinds(&key.kind)
                && graph.find(&key.kind, &key.name).is_none()
                && objects(self.cx.cluster, resource)
                    .into_iter()
                    .flatten()
                    .any(|d| {
                        self.objects
                            .get(&d.endpoints.list_path())
                            .is_some_and(|r| r.deleted.contains(&d.id))
                    })
        });
        if writes.is_empty() && !waiting && !removing {
            return;
        }
        let id = self.plan.actions.len();
        let reason = if writes.is_empty() {
            match (waiting, removing) {
                (true, true) => "SDN changes of declared objects, and a removal of ProxOps's, wait to be applied",
                (true, false) => "SDN changes of declared objects wait to be applied",
                _ => "the removal of an SDN object of ProxOps's waits to be applied",
            }
            .to_owned()
        } else {
            format!(
                "{} SDN change(s) planned: PVE applies them only with the SDN configuration (any change pending by hand is applied with them)",
                writes.len()
            )
        };
        for a in &mut self.plan.actions {
            if !writes.contains(&a.id) && a.after.iter().any(|p| writes.contains(p)) {
                a.after.push(id);
            }
        }
        // It comes after every action planned so far, so it is shown with the last level: a
        // plan reads level by level, never back.
        let level = self.plan.actions.iter().filter_map(|a| a.level).max();
        self.plan.actions.push(crate::plan::Action {
            id,
            level,
            kind: "SDN".to_owned(),
            name: "apply".to_owned(),
            node: String::new(),
            vmid: None,
            verb: Verb::Update,
            reason,
            changes: Vec::new(),
            resizes: Vec::new(),
            restart: false,
            after: writes.into_iter().collect(),
            op: Op::SdnApply,
        });
    }
}

impl Planner<'_> {
    /// A live guest's pool membership: into the pool its manifest names (moved out of another
    /// one), or out of the pool ProxOps put it in before (`previous`) and the manifest no longer
    /// names. A guest created this plan joins with its create (`pool` is a create parameter).
    pub(super) fn guest_pool_step(
        &mut self,
        step: StepId,
        vmid: u32,
        (want, previous): (Option<String>, Option<String>),
    ) {
        if self.blocked.contains(&step) {
            return;
        }
        let Some(live) = self.inventory.guest(vmid) else {
            return;
        };
        let have = live.pool.clone();
        let request = match (&want, &have) {
            (Some(w), h) if h.as_ref() != Some(w) => {
                let mut params = proxops_pve::Params::new().set("vms", vmid);
                if h.is_some() {
                    params.push("allow-move", 1);
                }
                let reason = match h {
                    Some(h) => format!("in pool `{h}`, the manifest says `{w}`: moved"),
                    None => format!("not in pool `{w}`: added"),
                };
                Some((w.clone(), params, reason))
            }
            (None, Some(h)) if previous.as_ref() == Some(h) => Some((
                h.clone(),
                proxops_pve::Params::new().set("vms", vmid).set("delete", 1),
                format!("the manifest no longer names pool `{h}`: taken out of it"),
            )),
            _ => None,
        };
        let Some((pool, params, reason)) = request else {
            return;
        };
        let path = format!(
            "/pools/{}",
            crate::objects::endpoints(ObjectClass::Pool, None)
                .item_path(&pool)
                .trim_start_matches("/pools/")
        );
        let op = Op::Object(proxops_pve::Request::new(
            proxops_pve::Method::PUT,
            "/pools/{poolid}",
            path,
            params,
        ));
        let after: Vec<usize> = self.step_actions.get(&step).copied().into_iter().collect();
        let node = live.node.clone();
        self.push(step, (&node, Some(vmid)), Verb::Update, reason, op, &after);
    }
}
