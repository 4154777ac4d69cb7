//! What a cluster-object manifest asks of PVE: one [`DesiredObject`] (an ACL manifest: one per
//! (principal, role)), its parameters as the create endpoint takes them.

use super::class::{Endpoints, endpoints};
use super::value::ObjValue;
use proxops_model::kinds::object::{AclSpec, ObjectClass, ObjectSpec, object_id};
use proxops_model::{Resource, Spec};
use std::collections::BTreeMap;

/// One cluster object as the manifest asks for it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DesiredObject {
    /// Its class.
    pub class: ObjectClass,
    /// Where PVE keeps it.
    pub endpoints: Endpoints,
    /// Its PVE id (an ACL entry: `path|type|ugid|role`).
    pub id: String,
    /// The parameters ProxOps owns, by name, as the create endpoint takes them; the marker
    /// field among them, with the mark.
    pub params: BTreeMap<String, ObjValue>,
    /// Parameters sent only at creation (PVE fixes them then: a storage's `type`).
    pub create_only: BTreeMap<String, ObjValue>,
}

impl DesiredObject {
    /// A live object known only by its class and id: what a prune deletes.
    pub fn existing(class: ObjectClass, endpoints: Endpoints, id: &str) -> DesiredObject {
        DesiredObject {
            class,
            endpoints,
            id: id.to_owned(),
            params: BTreeMap::new(),
            create_only: BTreeMap::new(),
        }
    }
}

/// The mark ProxOps writes in an object's free-text field: `[proxops.<cluster>.<kind>.<name>]`,
/// the guests' identity tag in brackets.
pub fn mark(cluster: &str, kind: &str, name: &str) -> String {
    format!("[{}]", crate::desired::identity_tag(cluster, kind, name))
}

/// The marks in `text` (`proxops.<cluster>.<kind>.<name>`, without brackets).
pub fn marks_in(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("[proxops.") {
        let after = &rest[at + 1..];
        let Some(end) = after.find(']') else { break };
        out.push(&after[..end]);
        rest = &after[end..];
    }
    out
}

/// `text` without ProxOps's marks, trimmed: the operator's own text.
pub fn strip_marks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("[proxops.") {
        out.push_str(&rest[..at]);
        match rest[at..].find(']') {
            Some(end) => rest = &rest[at + end + 1..],
            None => {
                rest = &rest[at..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` with the mark appended (on its own when there is no text).
fn marked(text: Option<&str>, mark: &str) -> String {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => format!("{t} {mark}"),
        None => mark.to_owned(),
    }
}

fn one(v: impl ToString) -> ObjValue {
    ObjValue::One(v.to_string())
}

fn flag(b: bool) -> ObjValue {
    ObjValue::One(if b { "1" } else { "0" }.to_owned())
}

/// The objects a cluster-object resource asks for; `None` when `resource` is not one.
pub fn objects(cluster: &str, resource: &Resource) -> Option<Vec<DesiredObject>> {
    let Spec::Object(spec) = &resource.spec else {
        return None;
    };
    let name = resource.name();
    let mark = mark(cluster, resource.kind, name);
    let mut params: BTreeMap<String, ObjValue> = BTreeMap::new();
    let mut create_only = BTreeMap::new();
    let mut put = |k: &str, v: ObjValue| {
        params.insert(k.to_owned(), v);
    };
    let (class, mapping) = match spec {
        ObjectSpec::Storage(s) => {
            create_only.insert("type".to_owned(), one(s.storage_type.as_str()));
            if !s.content.is_empty() {
                put("content", one(s.content.join(",")));
            }
            if !s.nodes.is_empty() {
                put("nodes", one(s.nodes.join(",")));
            }
            if let Some(b) = s.shared {
                put("shared", flag(b));
            }
            if let Some(b) = s.disable {
                put("disable", flag(b));
            }
            for (k, v) in &s.options {
                put(k, one(v));
            }
            (ObjectClass::Storage, None)
        }
        ObjectSpec::Pool(p) => {
            put("comment", one(marked(p.comment.as_deref(), &mark)));
            (ObjectClass::Pool, None)
        }
        ObjectSpec::BackupJob(j) => {
            put("schedule", one(&j.schedule));
            put("storage", one(&j.storage));
            if j.all {
                put("all", flag(true));
            }
            if !j.vmids.is_empty() {
                let ids: Vec<String> = j.vmids.iter().map(u32::to_string).collect();
                put("vmid", one(ids.join(",")));
            }
            if let Some(pool) = &j.pool {
                put("pool", one(pool));
            }
            if !j.exclude.is_empty() {
                let ids: Vec<String> = j.exclude.iter().map(u32::to_string).collect();
                put("exclude", one(ids.join(",")));
            }
            if let Some(m) = j.mode {
                put("mode", one(m.as_str()));
            }
            if let Some(node) = &j.node {
                put("node", one(node));
            }
            if let Some(b) = j.enabled {
                put("enabled", flag(b));
            }
            if let Some(r) = &j.retention {
                put("prune-backups", one(r.property_string()));
            }
            put("comment", one(marked(j.comment.as_deref(), &mark)));
            for (k, v) in &j.options {
                put(k, one(v));
            }
            (ObjectClass::BackupJob, None)
        }
        ObjectSpec::Mapping(m) => {
            put("description", one(marked(m.description.as_deref(), &mark)));
            let map = m
                .map
                .iter()
                .map(proxops_model::kinds::entry_string)
                .collect();
            put("map", ObjValue::Many(map));
            if let Some(b) = m.mdev {
                put("mdev", flag(b));
            }
            if let Some(b) = m.live_migration_capable {
                put("live-migration-capable", flag(b));
            }
            (ObjectClass::Mapping, Some(m.mapping_type))
        }
        ObjectSpec::User(u) => {
            put("comment", one(marked(u.comment.as_deref(), &mark)));
            for (k, v) in [
                ("email", &u.email),
                ("firstname", &u.firstname),
                ("lastname", &u.lastname),
            ] {
                if let Some(v) = v {
                    put(k, one(v));
                }
            }
            if let Some(b) = u.enable {
                put("enable", flag(b));
            }
            if let Some(e) = u.expire {
                put("expire", one(e));
            }
            if !u.groups.is_empty() {
                put("groups", one(u.groups.join(",")));
            }
            (ObjectClass::User, None)
        }
        ObjectSpec::Group(g) => {
            put("comment", one(marked(g.comment.as_deref(), &mark)));
            (ObjectClass::Group, None)
        }
        ObjectSpec::Role(r) => {
            put("privs", one(r.privs.join(",")));
            (ObjectClass::Role, None)
        }
        ObjectSpec::Acl(a) => return Some(acl_entries(a)),
        _ => return None,
    };
    let id = object_id(spec, name)?.to_owned();
    Some(vec![DesiredObject {
        class,
        endpoints: endpoints(class, mapping),
        id,
        params,
        create_only,
    }])
}

/// The id of one ACL entry.
pub fn acl_id(path: &str, kind: &str, ugid: &str, role: &str) -> String {
    format!("{path}|{kind}|{ugid}|{role}")
}

/// One entry per (principal, role) of an ACL manifest.
fn acl_entries(a: &AclSpec) -> Vec<DesiredObject> {
    let propagate = a.propagate.unwrap_or(true);
    let principals = a
        .users
        .iter()
        .map(|u| ("user", u))
        .chain(a.groups.iter().map(|g| ("group", g)))
        .chain(a.tokens.iter().map(|t| ("token", t)));
    let mut out = Vec::new();
    for (kind, ugid) in principals {
        for role in &a.roles {
            let mut params = BTreeMap::new();
            params.insert("propagate".to_owned(), flag(propagate));
            out.push(DesiredObject {
                class: ObjectClass::Acl,
                endpoints: endpoints(ObjectClass::Acl, None),
                id: acl_id(&a.path, kind, ugid, role),
                params,
                create_only: BTreeMap::new(),
            });
        }
    }
    out.sort_by(|x, y| x.id.cmp(&y.id));
    out.dedup_by(|x, y| x.id == y.id);
    out
}
