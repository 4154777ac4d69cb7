//! What a cluster-object manifest asks of PVE: one [`DesiredObject`] (an ACL manifest: one per
//! (principal, role)), its parameters as the create endpoint takes them.

use super::class::{Endpoints, FirewallPart, endpoints, firewall, guest_firewall};
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
    /// For [`Shape::Rules`](super::Shape::Rules): the rules in order, each with its comment marked
    /// `[<owner>#<index>]`.
    pub rules: Vec<BTreeMap<String, ObjValue>>,
    /// The identity of the resource it belongs to (`proxops.<cluster>.<kind>.<name>`): what
    /// its mark, and its rules' marks, name.
    pub owner: String,
    /// The name of the live object in its own path, when it is not the id (a subnet's
    /// `<zone>-<network>-<mask>`, read from its list).
    pub path_id: Option<String>,
}

impl DesiredObject {
    /// A live object known only by its class and id: what a prune deletes.
    pub fn existing(class: ObjectClass, endpoints: Endpoints, id: &str) -> DesiredObject {
        DesiredObject::new(class, endpoints, id, String::new())
    }

    fn new(class: ObjectClass, endpoints: Endpoints, id: &str, owner: String) -> DesiredObject {
        DesiredObject {
            class,
            endpoints,
            id: id.to_owned(),
            params: BTreeMap::new(),
            create_only: BTreeMap::new(),
            rules: Vec::new(),
            owner,
            path_id: None,
        }
    }
}

/// The mark ProxOps writes in an object's free-text field: `[proxops.<cluster>.<kind>.<name>]`,
/// the guests' identity tag in brackets.
pub fn mark(cluster: &str, kind: &str, name: &str) -> String {
    format!("[{}]", crate::identity::identity_tag(cluster, kind, name))
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
        ObjectSpec::SdnZone(z) => {
            create_only.insert("type".to_owned(), one(&z.zone_type));
            for (k, v) in &z.options {
                put(k, one(v));
            }
            (ObjectClass::SdnZone, None)
        }
        ObjectSpec::SdnVnet(v) => {
            put("zone", one(&v.zone));
            if let Some(t) = v.tag {
                put("tag", one(t));
            }
            if let Some(a) = &v.alias {
                put("alias", one(a));
            }
            for (k, val) in &v.options {
                put(k, one(val));
            }
            (ObjectClass::SdnVnet, None)
        }
        ObjectSpec::SdnSubnet(sn) => {
            create_only.insert("type".to_owned(), one("subnet"));
            if let Some(g) = &sn.gateway {
                put("gateway", one(g));
            }
            if let Some(b) = sn.snat {
                put("snat", flag(b));
            }
            for (k, v) in &sn.options {
                put(k, one(v));
            }
            let owner = crate::identity::identity_tag(cluster, resource.kind, name);
            let mut e = endpoints(ObjectClass::SdnSubnet, None);
            e.vars = vec![("vnet", sn.vnet.clone())];
            let mut o = DesiredObject::new(ObjectClass::SdnSubnet, e, &sn.subnet, owner);
            o.params = params;
            o.create_only = create_only;
            return Some(vec![o]);
        }
        ObjectSpec::ApiToken(t) => {
            // Every key owned, with PVE's defaults when the manifest leaves one out: a token
            // whose privilege separation was turned off by hand holds its user's rights, and
            // PVE's update cannot remove `expire` (only `comment`), so "never" is `0`.
            put("comment", one(marked(t.comment.as_deref(), &mark)));
            put("privsep", flag(t.privsep.unwrap_or(true)));
            put("expire", one(t.expire.unwrap_or(0)));
            let owner = crate::identity::identity_tag(cluster, resource.kind, name);
            let mut e = endpoints(ObjectClass::ApiToken, None);
            e.vars = vec![("userid", t.userid.clone())];
            let mut o = DesiredObject::new(ObjectClass::ApiToken, e, &t.token, owner);
            o.params = params;
            return Some(vec![o]);
        }
        ObjectSpec::Acl(a) => return Some(acl_entries(a)),
        ObjectSpec::Firewall(f) => {
            let owner = crate::identity::identity_tag(cluster, resource.kind, name);
            return Some(firewall_objects(f, &owner));
        }
        _ => return None,
    };
    let id = object_id(spec, name)?.to_owned();
    let owner = crate::identity::identity_tag(cluster, resource.kind, name);
    let mut o = DesiredObject::new(class, endpoints(class, mapping), &id, owner);
    o.params = params;
    o.create_only = create_only;
    Some(vec![o])
}

/// A map of PVE values as parameters.
fn values(map: &proxops_model::pve_config::PveConfig) -> BTreeMap<String, ObjValue> {
    map.iter().map(|(k, v)| (k.clone(), one(v))).collect()
}

/// Rules with their comments marked `[<owner>#<index>]`.
fn marked_rules(
    rules: &[proxops_model::pve_config::PveConfig],
    owner: &str,
) -> Vec<BTreeMap<String, ObjValue>> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut params = values(r);
            // PVE creates a rule disabled unless told otherwise.
            params
                .entry("enable".to_owned())
                .or_insert_with(|| flag(true));
            let text = r.get("comment").map(|c| c.as_str().to_owned());
            params.insert(
                "comment".to_owned(),
                one(marked(text.as_deref(), &format!("[{owner}#{i}]"))),
            );
            params
        })
        .collect()
}

/// The parts of the cluster's firewall: options, aliases, IP sets and their entries, groups and
/// their rules, the cluster's rules. PVE keeps alias, set and group names in lower case.
fn firewall_objects(
    f: &proxops_model::kinds::firewall_spec::FirewallSpec,
    owner: &str,
) -> Vec<DesiredObject> {
    let mark = format!("[{owner}]");
    let class = ObjectClass::Firewall;
    let mut out = Vec::new();
    if !f.options.is_empty() {
        let mut o = DesiredObject::new(
            class,
            firewall(FirewallPart::Options, &[]),
            "options",
            owner.to_owned(),
        );
        o.params = values(&f.options);
        out.push(o);
    }
    for a in &f.aliases {
        let name = a.name.to_ascii_lowercase();
        let mut o = DesiredObject::new(
            class,
            firewall(FirewallPart::Aliases, &[]),
            &name,
            owner.to_owned(),
        );
        o.params.insert("cidr".to_owned(), one(&a.cidr));
        o.params.insert(
            "comment".to_owned(),
            one(marked(a.comment.as_deref(), &mark)),
        );
        out.push(o);
    }
    for s in &f.ipsets {
        let name = s.name.to_ascii_lowercase();
        let mut o = DesiredObject::new(
            class,
            firewall(FirewallPart::IpSets, &[]),
            &name,
            owner.to_owned(),
        );
        o.params.insert(
            "comment".to_owned(),
            one(marked(s.comment.as_deref(), &mark)),
        );
        out.push(o);
        let vars = [("name", name.clone())];
        for e in &s.entries {
            let mut entry = DesiredObject::new(
                class,
                firewall(FirewallPart::IpSetEntries, &vars),
                &e.cidr,
                owner.to_owned(),
            );
            if let Some(b) = e.nomatch {
                entry.params.insert("nomatch".to_owned(), flag(b));
            }
            entry.params.insert(
                "comment".to_owned(),
                one(marked(e.comment.as_deref(), &mark)),
            );
            out.push(entry);
        }
    }
    for g in &f.groups {
        let name = g.name.to_ascii_lowercase();
        let mut o = DesiredObject::new(
            class,
            firewall(FirewallPart::Groups, &[]),
            &name,
            owner.to_owned(),
        );
        o.params.insert(
            "comment".to_owned(),
            one(marked(g.comment.as_deref(), &mark)),
        );
        out.push(o);
        let vars = [("group", name.clone())];
        let mut rules = DesiredObject::new(
            class,
            firewall(FirewallPart::GroupRules, &vars),
            &format!("{name} rules"),
            owner.to_owned(),
        );
        rules.rules = marked_rules(&g.rules, owner);
        out.push(rules);
    }
    let mut rules = DesiredObject::new(
        class,
        firewall(FirewallPart::Rules, &[]),
        "rules",
        owner.to_owned(),
    );
    rules.rules = marked_rules(&f.rules, owner);
    out.push(rules);
    out
}

/// A guest's own firewall (its manifest's `firewall:`): its options and its rules, owned by the
/// guest's resource (`owner`).
pub fn guest_firewall_objects(
    f: &proxops_model::kinds::firewall_spec::GuestFirewall,
    owner: &str,
    lxc: bool,
    node: &str,
    vmid: u32,
) -> Vec<DesiredObject> {
    let class = ObjectClass::Firewall;
    let mut out = Vec::new();
    if !f.options.is_empty() {
        let mut o = DesiredObject::new(
            class,
            guest_firewall(false, lxc, node, vmid),
            "options",
            owner.to_owned(),
        );
        o.params = values(&f.options);
        out.push(o);
    }
    let mut rules = DesiredObject::new(
        class,
        guest_firewall(true, lxc, node, vmid),
        "rules",
        owner.to_owned(),
    );
    rules.rules = marked_rules(&f.rules, owner);
    out.push(rules);
    out
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
            let mut o = DesiredObject::new(
                ObjectClass::Acl,
                endpoints(ObjectClass::Acl, None),
                &acl_id(&a.path, kind, ugid, role),
                String::new(),
            );
            o.params.insert("propagate".to_owned(), flag(propagate));
            out.push(o);
        }
    }
    out.sort_by(|x, y| x.id.cmp(&y.id));
    out.dedup_by(|x, y| x.id == y.id);
    out
}
