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
    DesiredObject, Endpoints, Found, LiveList, LiveParams, ObjValue, create_request,
    delete_request, endpoints_of_class, marks_in, objects, read, same, strip_marks, update_request,
};
use crate::plan::{Op, Skipped, Verb};
use proxops_graph::StepId;
use proxops_model::kinds::ObjectClass;
use proxops_model::{Resource, ResourceKey};
use proxops_pve::PveClient;
use proxops_pve_schema::{Param, endpoint};
use std::collections::{BTreeMap, BTreeSet};

/// The lists read this plan, by list path.
pub(super) type ObjectLists = BTreeMap<&'static str, Result<LiveList, String>>;

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
    /// plane (prune candidates).
    pub(super) async fn read_objects(&mut self, client: &PveClient, options: &PlanOptions) {
        let mut needed: BTreeSet<Endpoints> = BTreeSet::new();
        let graph = self.cx.graph;
        for id in graph.resources() {
            if let Some(objs) = objects(self.cx.cluster, graph.resource(id)) {
                needed.extend(objs.iter().map(|o| o.endpoints));
            }
        }
        for (key, resource) in options.previous.iter().flatten() {
            if graph.find(&key.kind, &key.name).is_none()
                && let Some(objs) = objects(self.cx.cluster, resource)
            {
                needed.extend(objs.iter().map(|o| o.endpoints));
            }
        }
        for e in needed {
            let read = read(client, &e).await.map_err(|e| e.to_string());
            self.objects.insert(e.list, read);
        }
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
            let live = match self.objects.get(d.endpoints.list) {
                Some(Ok(list)) => list.get(&d.id),
                Some(Err(e)) => {
                    let why = format!("cannot read {}: {e}", d.endpoints.list);
                    return self.block(step, why, false);
                }
                None => None,
            };
            let previous = before.and_then(|b| b.iter().find(|p| p.id == d.id));
            let Some(live) = live else {
                changes.push(Planned::Create(d.clone()));
                continue;
            };
            let claim = match self.object_claim(&key, d, live, receipted && previous.is_some()) {
                Ok(c) => c,
                Err(why) => return self.block(step, why, true),
            };
            let found = diff(d, previous, live);
            if let Some(why) = found.fixed.first() {
                let why = format!(
                    "{} `{}`: {why}; PVE cannot change it in place: remove the object and let ProxOps create it again, or declare what it has",
                    class_word(d.class),
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
                            class_word(d.class),
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
        // ACL entries the resource granted before and no longer does (its own, by its receipt).
        if receipted {
            for p in before.unwrap_or_default() {
                let gone = !desired.iter().any(|d| d.id == p.id);
                let live = matches!(self.objects.get(p.endpoints.list), Some(Ok(l)) if l.contains_key(&p.id));
                if gone && live && p.class == ObjectClass::Acl {
                    changes.push(Planned::Remove(p.clone()));
                }
            }
        }
        for c in changes {
            self.push_object(step, &key, c);
        }
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
            Some(other) => Err(format!(
                "{} `{}` carries the mark `[{other}]` of another resource: it is not {key}'s; give the manifest another id, or remove that mark by hand to let {key} take it over",
                class_word(d.class),
                d.id
            )),
        }
    }

    fn push_object(&mut self, step: StepId, key: &ResourceKey, planned: Planned) {
        let (verb, reason, request, shown) = match planned {
            Planned::Create(d) => {
                let reason = format!("{} `{}` does not exist", class_word(d.class), d.id);
                (Verb::Create, reason, create_request(&d), shown_all(&d))
            }
            Planned::Update(d, found) => {
                let reason = found.reason();
                let shown = found.shown();
                (Verb::Update, reason, update_request(&d, &found), shown)
            }
            Planned::Adopt(d, found) => {
                let reason = format!(
                    "not made by ProxOps and matches the manifest: writing its mark in `{}`",
                    d.endpoints.marker.unwrap_or_default()
                );
                let shown = found.shown();
                (Verb::Adopt, reason, update_request(&d, &found), shown)
            }
            Planned::Remove(p) => {
                let reason = format!("ACL entry `{}` is no longer granted by {key}", p.id);
                (Verb::Delete, reason, delete_request(&p), Vec::new())
            }
        };
        let id = self.push(step, ("", None), verb, reason, Op::Object(request), &[]);
        self.plan.actions[id].changes = shown;
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
            let subject = format!("{key} ({} `{}`)", class_word(d.class), d.id);
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
                self.storage_users(client, &d.id).await
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
                op: Op::Object(delete_request(&d)),
            };
            self.plan.actions.push(action);
        }
    }

    /// The objects of ours no declared resource holds: marked with an undeclared resource of
    /// this cluster, or receipted (no free-text field) for one.
    fn object_prune_candidates(&self, options: &PlanOptions) -> Vec<(ResourceKey, DesiredObject)> {
        let graph = self.cx.graph;
        let cluster = self.cx.cluster;
        // What the composition declares, by (list, id): never pruned whatever it carries.
        let mut declared: BTreeSet<(&str, String)> = BTreeSet::new();
        for id in graph.resources() {
            for d in objects(cluster, graph.resource(id)).into_iter().flatten() {
                declared.insert((d.endpoints.list, d.id));
            }
        }
        let mut out: BTreeMap<(&str, String), (ResourceKey, DesiredObject)> = BTreeMap::new();
        let prefix = format!("proxops.{cluster}.");
        for (key, resource) in options.previous.iter().flatten() {
            if graph.find(&key.kind, &key.name).is_some() {
                continue;
            }
            let receipted = options.receipts.as_ref().is_some_and(|r| r.contains(key));
            for d in objects(cluster, resource).into_iter().flatten() {
                let Some(Ok(list)) = self.objects.get(d.endpoints.list) else {
                    continue;
                };
                let Some(live) = list.get(&d.id) else {
                    continue;
                };
                let at = (d.endpoints.list, d.id.clone());
                if declared.contains(&at) {
                    continue;
                }
                let proven = match d.endpoints.marker {
                    Some(f) => {
                        let ours = identity_tag(cluster, &key.kind, &key.name);
                        matches!(live.get(f), Some(ObjValue::One(t)) if marks_in(t).contains(&ours.as_str()))
                    }
                    None => receipted,
                };
                if proven {
                    out.insert(at, (key.clone(), d));
                }
            }
        }
        // Marked objects of this cluster whose resources are not declared, whether or not the
        // planes remember them (a plan without the planes).
        for (list, read) in &self.objects {
            let Ok(read) = read else { continue };
            for (id, live) in read {
                let at = (*list, id.clone());
                if declared.contains(&at) || out.contains_key(&at) {
                    continue;
                }
                let Some(class) = class_of_list(list) else {
                    continue;
                };
                let e = endpoints_of_class(class, list);
                let Some(field) = e.marker else { continue };
                let Some(ObjValue::One(text)) = live.get(field) else {
                    continue;
                };
                let Some(mark) = marks_in(text).into_iter().find(|m| m.starts_with(&prefix)) else {
                    continue;
                };
                let Some(key) = key_of_mark(mark, &prefix, class) else {
                    continue;
                };
                if graph.find(&key.kind, &key.name).is_some() {
                    continue;
                }
                let d = DesiredObject::existing(class, e, id);
                out.insert(at, (key, d));
            }
        }
        let mut v: Vec<(ResourceKey, DesiredObject)> = out.into_values().collect();
        // Dependants first: a backup job before the storage and pool it names, ACL entries
        // before users, groups and roles.
        v.sort_by_key(|(k, d)| (std::cmp::Reverse(d.class), k.clone()));
        v
    }

    /// Why storage `id` must stay: the declared guests with a disk on it, or the live volumes
    /// of guests on it.
    async fn storage_users(&self, client: &PveClient, id: &str) -> Option<String> {
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
            .map(|r| r.key().to_string())
            .collect();
        if !declared.is_empty() {
            return Some(format!(
                "declared guests have disks on it: {}",
                declared.join(", ")
            ));
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
                    return Some(format!(
                        "cannot read its content on node `{node}` to see which guests use it: {e}"
                    ));
                }
            }
        }
        (!users.is_empty()).then(|| {
            let list: Vec<String> = users.iter().map(u32::to_string).collect();
            format!("guests have volumes on it: vmid {}", list.join(", "))
        })
    }
}

/// Whether two free-text values say the same once ProxOps's marks are taken out.
fn same_text(want: &ObjValue, have: Option<&ObjValue>) -> bool {
    let text = |v: Option<&ObjValue>| match v {
        Some(ObjValue::One(t)) => strip_marks(t),
        _ => String::new(),
    };
    text(Some(want)) == text(have)
}

/// The class whose list is `list`.
fn class_of_list(list: &str) -> Option<ObjectClass> {
    ObjectClass::ALL
        .into_iter()
        .find(|c| endpoints_of_class(*c, list).list == list)
}

/// The resource a mark of this cluster names, if its kind is `class`'s.
fn key_of_mark(mark: &str, prefix: &str, class: ObjectClass) -> Option<ResourceKey> {
    let rest = mark.strip_prefix(prefix)?;
    let (kind, name) = rest.split_once('.')?;
    (kind == class.kind().to_ascii_lowercase()).then(|| ResourceKey {
        kind: class.kind().to_owned(),
        name: name.to_owned(),
    })
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
        _ => "ACL entry",
    }
}

/// What one declared object needs.
enum Planned {
    Create(DesiredObject),
    Update(DesiredObject, Found),
    Adopt(DesiredObject, Found),
    Remove(DesiredObject),
}

fn shown_all(d: &DesiredObject) -> Vec<crate::plan::KeyChange> {
    d.create_only
        .iter()
        .chain(&d.params)
        .map(|(k, v)| crate::plan::KeyChange {
            key: k.clone(),
            from: None,
            to: Some(v.to_string()),
            delete: false,
            removed: Vec::new(),
        })
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
    found
}

/// The desired objects of a driver's answer, if it is a cluster object's.
pub(super) fn as_objects(desired: &Desired) -> Option<&[DesiredObject]> {
    match desired {
        Desired::Objects(o) => Some(o),
        _ => None,
    }
}
