//! `proxops adopt --kind <Kind>`: manifests for cluster objects ProxOps did not create
//! (storages, pools, backup jobs, resource mappings, users, groups, roles, ACL entries, SDN
//! zones, VNets and subnets, the cluster's firewall), from one read of their list. Reads only: the next plan finds each one matching its manifest and
//! takes it over without rewriting it (it writes only ProxOps's mark, where PVE has a field for
//! one).

use super::error::AdoptError;
use crate::objects::{
    Endpoints, FirewallPart, LiveParams, OPTIONS, ObjValue, endpoints, firewall, marks_in, read,
};
use proxops_model::Cluster;
use proxops_model::kinds::ObjectClass;
use proxops_model::kinds::object::{MappingType, StorageType, object_id};
use proxops_model::manifest::Spec;
use proxops_model::names::is_valid_name;
use proxops_pve::PveClient;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// One object's manifest, ready to write.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AdoptedObject {
    /// Its kind.
    pub kind: &'static str,
    /// Its `metadata.name`.
    pub name: String,
    /// Its PVE id (an ACL's: `path` and principal).
    pub id: String,
    /// The manifest document.
    pub manifest: Value,
    /// What the manifest leaves out, and why.
    pub notes: Vec<String>,
}

impl AdoptedObject {
    /// The manifest's repository path: `<root>/<cluster>/<name>.yaml`.
    pub fn path(&self, cluster: &str) -> PathBuf {
        let root = proxops_model::Registry::builtin()
            .get(self.kind)
            .map_or_else(|| self.kind.to_ascii_lowercase(), |k| k.root().to_owned());
        PathBuf::from(root)
            .join(cluster)
            .join(format!("{}.yaml", self.name))
    }

    /// The manifest file's text.
    pub fn to_yaml(&self) -> String {
        let mut out = format!(
            "# Adopted from {} `{}` by `proxops adopt`.\n",
            self.kind, self.id
        );
        for note in &self.notes {
            out.push_str(&format!("# note: {note}\n"));
        }
        out.push_str(&proxops_store::canonical::to_yaml(&self.manifest));
        out
    }
}

/// One object's outcome.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ObjectOutcome {
    /// Adopted.
    Adopted(AdoptedObject),
    /// Left alone, with why.
    Refused {
        /// The object's id.
        id: String,
        /// Why.
        reason: String,
    },
}

/// Adopts the objects of `class` that `ids` name (all of them when `None`): each one not
/// declared by the cluster and without a ProxOps mark. Reads only.
pub async fn adopt_objects(
    client: &PveClient,
    cluster: &Cluster,
    class: ObjectClass,
    ids: Option<&[String]>,
) -> Result<Vec<ObjectOutcome>, AdoptError> {
    if class == ObjectClass::ApiToken {
        // Its secret is known only to whoever made it: ProxOps would manage a token it cannot
        // hand to anyone. A manifest that matches it is taken over by the next plan.
        let reason = "API tokens are not adopted: ProxOps would not hold their secret; declare the token in a manifest that matches it and the next plan takes it over (its mark written, nothing else)".to_owned();
        let ids: Vec<String> = ids.map_or_else(|| vec!["*".to_owned()], <[String]>::to_vec);
        return Ok(ids
            .into_iter()
            .map(|id| ObjectOutcome::Refused {
                id,
                reason: reason.clone(),
            })
            .collect());
    }
    if class == ObjectClass::Firewall {
        return adopt_firewall(client, cluster, ids).await;
    }
    let lists: Vec<(Option<MappingType>, Endpoints)> = match class {
        ObjectClass::Mapping => [MappingType::Pci, MappingType::Usb]
            .into_iter()
            .map(|m| (Some(m), endpoints(class, Some(m))))
            .collect(),
        // Subnets are listed under their VNet: every VNet's.
        ObjectClass::SdnSubnet => read(client, &endpoints(ObjectClass::SdnVnet, None))
            .await?
            .into_keys()
            .map(|vnet| {
                let mut e = endpoints(class, None);
                e.vars = vec![("vnet", vnet)];
                (None, e)
            })
            .collect(),
        other => vec![(None, endpoints(other, None))],
    };
    let declared = declared_ids(cluster, class);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (mapping, e) in lists {
        // As the plan reads them: users with their groups, SDN objects as they will be once
        // applied.
        for (id, mut live) in read(client, &e).await? {
            if let Some((_, vnet)) = e.vars.iter().find(|(k, _)| *k == "vnet") {
                live.entry("vnet".to_owned())
                    .or_insert_with(|| ObjValue::One(vnet.clone()));
            }
            if ids.is_some_and(|want| !want.iter().any(|w| *w == id || acl_named(w, &id))) {
                continue;
            }
            seen.insert(id.clone());
            let marker = e.marker.and_then(|f| match live.get(f) {
                Some(ObjValue::One(t)) => marks_in(t).first().map(|m| (*m).to_owned()),
                _ => None,
            });
            let refused = if let Some(mark) = marker {
                Some(format!(
                    "it carries ProxOps's mark `[{mark}]`: it is managed already"
                ))
            } else if declared.contains(&id) {
                Some("the repository declares it already".to_owned())
            } else {
                builtin(class, &id, &live)
            };
            out.push(match refused {
                Some(reason) => ObjectOutcome::Refused { id, reason },
                None => ObjectOutcome::Adopted(manifest(class, mapping, &id, &live)),
            });
        }
    }
    for want in ids.into_iter().flatten() {
        if !seen.iter().any(|id| id == want || acl_named(want, id)) {
            out.push(ObjectOutcome::Refused {
                id: want.clone(),
                reason: format!("no {} `{want}` on the cluster", class.kind()),
            });
        }
    }
    Ok(group_acl(out))
}

/// Whether `want` (`path` or `path|principal`) names ACL entry `id`.
fn acl_named(want: &str, id: &str) -> bool {
    id.starts_with(&format!("{want}|"))
}

/// The ids of `class` the cluster's resources declare.
fn declared_ids(cluster: &Cluster, class: ObjectClass) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in cluster.resources.iter().filter(|r| r.kind == class.kind()) {
        if let Some(objs) = crate::objects::objects(&cluster.name, r) {
            out.extend(objs.into_iter().map(|o| o.id));
        }
        if let Spec::Object(s) = &r.spec
            && let Some(id) = object_id(s, r.name())
        {
            out.insert(id.to_owned());
        }
    }
    out
}

/// Why an object is not adopted: PVE defines it (its built-in roles, `root@pam`), or its kind
/// cannot declare it (a storage of a type it does not know).
fn builtin(class: ObjectClass, id: &str, live: &LiveParams) -> Option<String> {
    match class {
        ObjectClass::Role if matches!(live.get("special"), Some(ObjValue::One(s)) if s == "1") => {
            Some("a role PVE defines, which cannot be changed".to_owned())
        }
        ObjectClass::User if id == "root@pam" => {
            Some("PVE's superuser, which nothing should manage".to_owned())
        }
        ObjectClass::Storage => {
            let kind = text(live, "type").unwrap_or_default();
            serde_json::from_value::<StorageType>(json!(kind))
                .is_err()
                .then(|| format!("a `{kind}` storage, which the Storage kind does not declare"))
        }
        _ => None,
    }
}

fn text(live: &LiveParams, key: &str) -> Option<String> {
    match live.get(key) {
        Some(ObjValue::One(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn list(live: &LiveParams, key: &str) -> Vec<String> {
    match live.get(key) {
        Some(ObjValue::One(s)) => s
            .split([',', ';', ' '])
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(ObjValue::Many(items)) => items.clone(),
        None => Vec::new(),
    }
}

fn flag(live: &LiveParams, key: &str) -> Option<bool> {
    text(live, key).and_then(|v| proxops_pve_schema::parse_bool(&v))
}

/// A resource name for PVE id `id`: the id itself when it is one, else a lowercase spelling of
/// it (the manifest then names the id in `id:`).
fn name_for(id: &str) -> (String, bool) {
    if is_valid_name(id) {
        return (id.to_owned(), false);
    }
    let mut name = String::new();
    for c in id.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.ends_with('-') && !name.is_empty() {
            name.push('-');
        }
    }
    let name = name.trim_end_matches('-');
    let name: String = name.chars().take(63).collect();
    let name = name.trim_end_matches('-').to_owned();
    (
        if name.is_empty() {
            "adopted".to_owned()
        } else {
            name
        },
        true,
    )
}

/// The keys a list row has that are not settings (state PVE computes).
const COMPUTED: &[&str] = &[
    "digest",
    "type",
    "next-run",
    "special",
    "tokens",
    "members",
    "realm-type",
    "tfa-locked-until",
    "totp-locked",
    "users",
    "checks",
];

fn manifest(
    class: ObjectClass,
    mapping: Option<MappingType>,
    id: &str,
    live: &LiveParams,
) -> AdoptedObject {
    // A subnet's network is no name, nor unique across VNets: named after both.
    let (name, explicit) = match (class, live.get("vnet")) {
        (ObjectClass::SdnSubnet, Some(ObjValue::One(vnet))) => name_for(&format!("{vnet} {id}")),
        _ => name_for(id),
    };
    let mut spec = Map::new();
    let mut notes = Vec::new();
    let mut put = |k: &str, v: Value| {
        spec.insert(k.to_owned(), v);
    };
    // Only the kinds whose spec has an `id:` (a user's is its `userid`, an ACL entry's and a
    // subnet's are their fields).
    if explicit
        && !matches!(
            class,
            ObjectClass::User | ObjectClass::Acl | ObjectClass::SdnSubnet
        )
    {
        put("id", json!(id));
    }
    let mut used: Vec<&str> = COMPUTED.to_vec();
    match class {
        ObjectClass::Storage => {
            put("type", json!(text(live, "type").unwrap_or_default()));
            let content = list(live, "content");
            if !content.is_empty() {
                put("content", json!(content));
            }
            let nodes = list(live, "nodes");
            if !nodes.is_empty() {
                put("nodes", json!(nodes));
            }
            // Only some plugins take `shared` (dir, LVM): PVE sets it for network storages.
            let settable =
                proxops_pve_schema::storage_plugin(&text(live, "type").unwrap_or_default())
                    .is_some_and(|p| p.option("shared").is_some());
            for k in ["shared", "disable"] {
                if let Some(b) = flag(live, k)
                    && (k != "shared" || settable)
                {
                    put(k, json!(b));
                }
            }
            used.extend(["storage", "content", "nodes", "shared", "disable"]);
            options(&mut put, live, &used, ("POST", "/storage"), &mut notes);
        }
        ObjectClass::Pool => {
            if let Some(c) = text(live, "comment") {
                put("comment", json!(c));
            }
        }
        ObjectClass::BackupJob => {
            for k in ["schedule", "storage", "pool", "node", "comment"] {
                if let Some(v) = text(live, k) {
                    put(k, json!(v));
                }
            }
            if flag(live, "all") == Some(true) {
                put("all", json!(true));
            }
            for k in ["vmid", "exclude"] {
                let ids: Vec<u64> = list(live, k)
                    .iter()
                    .filter_map(|v| v.parse().ok())
                    .collect();
                if !ids.is_empty() {
                    put(if k == "vmid" { "vmids" } else { k }, json!(ids));
                }
            }
            if let Some(m) = text(live, "mode") {
                put("mode", json!(m));
            }
            if let Some(b) = flag(live, "enabled") {
                put("enabled", json!(b));
            }
            if let Some(p) = text(live, "prune-backups") {
                let mut retention = Map::new();
                for part in p.split(',') {
                    if let Some((k, v)) = part.split_once('=') {
                        let value = if k == "keep-all" {
                            json!(proxops_pve_schema::parse_bool(v) == Some(true))
                        } else {
                            v.parse::<u64>().map_or_else(|_| json!(v), |n| json!(n))
                        };
                        retention.insert(k.to_owned(), value);
                    }
                }
                put("retention", Value::Object(retention));
            }
            used.extend([
                "id",
                "schedule",
                "storage",
                "pool",
                "node",
                "comment",
                "all",
                "vmid",
                "exclude",
                "mode",
                "enabled",
                "prune-backups",
            ]);
            options(
                &mut put,
                live,
                &used,
                ("POST", "/cluster/backup"),
                &mut notes,
            );
        }
        ObjectClass::Mapping => {
            put("type", json!(mapping.unwrap_or(MappingType::Pci).as_str()));
            if let Some(d) = text(live, "description") {
                put("description", json!(d));
            }
            let entries: Vec<Value> = list_items(live, "map")
                .iter()
                .map(|e| {
                    let m: Map<String, Value> = e
                        .split(',')
                        .filter_map(|p| p.split_once('='))
                        .map(|(k, v)| (k.to_owned(), json!(v)))
                        .collect();
                    Value::Object(m)
                })
                .collect();
            put("map", Value::Array(entries));
            for k in ["mdev", "live-migration-capable"] {
                if let Some(b) = flag(live, k) {
                    put(k, json!(b));
                }
            }
        }
        ObjectClass::User => {
            put("userid", json!(id));
            for k in ["comment", "email", "firstname", "lastname"] {
                if let Some(v) = text(live, k) {
                    put(k, json!(v));
                }
            }
            if let Some(b) = flag(live, "enable") {
                put("enable", json!(b));
            }
            if let Some(e) = text(live, "expire")
                .and_then(|e| e.parse::<u64>().ok())
                .filter(|e| *e > 0)
            {
                put("expire", json!(e));
            }
            let groups = list(live, "groups");
            if !groups.is_empty() {
                put("groups", json!(groups));
            }
        }
        ObjectClass::Group => {
            if let Some(c) = text(live, "comment") {
                put("comment", json!(c));
            }
        }
        ObjectClass::Role => {
            put("privs", json!(list(live, "privs")));
        }
        ObjectClass::SdnZone => {
            put("type", json!(text(live, "type").unwrap_or_default()));
            used.extend(["zone", "state"]);
            let create = ("POST", "/cluster/sdn/zones");
            options(&mut put, live, &used, create, &mut notes);
        }
        ObjectClass::SdnVnet => {
            put("zone", json!(text(live, "zone").unwrap_or_default()));
            if let Some(t) = text(live, "tag").and_then(|t| t.parse::<u32>().ok()) {
                put("tag", json!(t));
            }
            if let Some(a) = text(live, "alias") {
                put("alias", json!(a));
            }
            used.extend(["vnet", "zone", "tag", "alias", "state"]);
            let create = ("POST", "/cluster/sdn/vnets");
            options(&mut put, live, &used, create, &mut notes);
        }
        ObjectClass::SdnSubnet => {
            put("vnet", json!(text(live, "vnet").unwrap_or_default()));
            put("subnet", json!(id));
            if let Some(g) = text(live, "gateway") {
                put("gateway", json!(g));
            }
            if let Some(b) = flag(live, "snat") {
                put("snat", json!(b));
            }
            // `subnet` is listed as `<zone>-<network>-<mask>`, the network as `cidr`, and
            // `network`, `mask` and `zone` are derived from it and the VNet.
            used.extend([
                "subnet", "cidr", "network", "mask", "vnet", "zone", "gateway", "snat", "state",
                "id",
            ]);
            let create = ("POST", "/cluster/sdn/vnets/{vnet}/subnets");
            options(&mut put, live, &used, create, &mut notes);
        }
        _ => {
            // One ACL entry (`path|type|ugid|role`); [`group_acl`] joins the roles of a path
            // and principal into one manifest.
            let parts: Vec<&str> = id.rsplitn(4, '|').collect();
            if let [role, ugid, kind, path] = parts[..] {
                put("path", json!(path));
                put("roles", json!([role]));
                put(&format!("{kind}s"), json!([ugid]));
                put("propagate", json!(flag(live, "propagate").unwrap_or(true)));
            }
        }
    }
    let manifest = json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": class.kind(),
        "metadata": { "name": name },
        "spec": Value::Object(spec),
    });
    AdoptedObject {
        kind: class.kind(),
        name,
        id: id.to_owned(),
        manifest,
        notes,
    }
}

/// The cluster's firewall, one manifest named after the cluster: its options, and the aliases,
/// IP sets (with their entries) and security groups without a ProxOps mark. Rules are left out
/// (noted): a rule without ProxOps's mark is the operator's, never changed, moved or deleted,
/// and one declared would be added anew beside it.
async fn adopt_firewall(
    client: &PveClient,
    cluster: &Cluster,
    ids: Option<&[String]>,
) -> Result<Vec<ObjectOutcome>, AdoptError> {
    const ID: &str = "cluster firewall";
    let refused = |reason: &str| {
        Ok(vec![ObjectOutcome::Refused {
            id: ID.to_owned(),
            reason: reason.to_owned(),
        }])
    };
    if ids.is_some_and(|i| !i.is_empty()) {
        return refused("the cluster has one firewall, adopted whole: use --all");
    }
    if cluster.resources.iter().any(|r| r.kind == "Firewall") {
        return refused("the repository declares the cluster's firewall already");
    }
    let mut notes = Vec::new();
    // A part carrying a mark is ProxOps's already (or another cluster's): left out.
    let unmarked = |part: &str, id: &str, live: &LiveParams, notes: &mut Vec<String>| {
        let mark = match live.get("comment") {
            Some(ObjValue::One(t)) => marks_in(t).first().map(|m| (*m).to_owned()),
            _ => None,
        };
        if let Some(m) = &mark {
            notes.push(format!("{part} `{id}` carries the mark `[{m}]`: left out"));
        }
        mark.is_none()
    };
    let comment = |live: &LiveParams, item: &mut Map<String, Value>| {
        if let Some(c) = text(live, "comment") {
            item.insert("comment".to_owned(), json!(c));
        }
    };
    let mut spec = Map::new();
    let options = read(client, &firewall(FirewallPart::Options, &[])).await?;
    let options: Map<String, Value> = options
        .get(OPTIONS)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != "digest")
        .filter_map(|(k, v)| match v {
            ObjValue::One(s) => Some((k.clone(), json!(s))),
            ObjValue::Many(_) => None,
        })
        .collect();
    if !options.is_empty() {
        spec.insert("options".to_owned(), Value::Object(options));
    }
    let mut aliases = Vec::new();
    for (name, live) in read(client, &firewall(FirewallPart::Aliases, &[])).await? {
        if unmarked("alias", &name, &live, &mut notes) {
            let mut a = Map::new();
            a.insert("name".to_owned(), json!(name));
            a.insert(
                "cidr".to_owned(),
                json!(text(&live, "cidr").unwrap_or_default()),
            );
            comment(&live, &mut a);
            aliases.push(Value::Object(a));
        }
    }
    let mut ipsets = Vec::new();
    for (name, live) in read(client, &firewall(FirewallPart::IpSets, &[])).await? {
        if !unmarked("IP set", &name, &live, &mut notes) {
            continue;
        }
        let mut set = Map::new();
        set.insert("name".to_owned(), json!(name));
        comment(&live, &mut set);
        let mut entries = Vec::new();
        let part = firewall(FirewallPart::IpSetEntries, &[("name", name.clone())]);
        for (cidr, live) in read(client, &part).await? {
            if unmarked("IP set entry", &cidr, &live, &mut notes) {
                let mut e = Map::new();
                e.insert("cidr".to_owned(), json!(cidr));
                if let Some(b) = flag(&live, "nomatch") {
                    e.insert("nomatch".to_owned(), json!(b));
                }
                comment(&live, &mut e);
                entries.push(Value::Object(e));
            }
        }
        if !entries.is_empty() {
            set.insert("entries".to_owned(), Value::Array(entries));
        }
        ipsets.push(Value::Object(set));
    }
    let mut groups = Vec::new();
    for (name, live) in read(client, &firewall(FirewallPart::Groups, &[])).await? {
        if !unmarked("security group", &name, &live, &mut notes) {
            continue;
        }
        let mut g = Map::new();
        g.insert("name".to_owned(), json!(name));
        comment(&live, &mut g);
        groups.push(Value::Object(g));
        let part = firewall(FirewallPart::GroupRules, &[("group", name.clone())]);
        let rules = read(client, &part).await?.len();
        if rules > 0 {
            notes.push(format!(
                "the {rules} rule(s) of security group `{name}` are not declared: rules without ProxOps's mark stay the operator's, never touched"
            ));
        }
    }
    let rules = read(client, &firewall(FirewallPart::Rules, &[]))
        .await?
        .len();
    if rules > 0 {
        notes.push(format!(
            "the cluster's {rules} rule(s) are not declared: rules without ProxOps's mark stay the operator's, never touched"
        ));
    }
    for (k, v) in [("aliases", aliases), ("ipsets", ipsets), ("groups", groups)] {
        if !v.is_empty() {
            spec.insert(k.to_owned(), Value::Array(v));
        }
    }
    if spec.is_empty() {
        return refused("the cluster firewall has no options, aliases, IP sets or groups");
    }
    let (name, _) = name_for(&cluster.name);
    let manifest = json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": "Firewall",
        "metadata": { "name": name },
        "spec": Value::Object(spec),
    });
    Ok(vec![ObjectOutcome::Adopted(AdoptedObject {
        kind: "Firewall",
        name,
        id: ID.to_owned(),
        manifest,
        notes,
    })])
}

/// A list field's items: an array's, or one string's.
fn list_items(live: &LiveParams, key: &str) -> Vec<String> {
    match live.get(key) {
        Some(ObjValue::Many(items)) => items.clone(),
        Some(ObjValue::One(s)) if !s.is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// The row's other keys that the create endpoint takes, as `options`; the rest noted.
fn options(
    put: &mut impl FnMut(&str, Value),
    live: &LiveParams,
    used: &[&str],
    (method, path): (&str, &str),
    notes: &mut Vec<String>,
) {
    let ep = proxops_pve_schema::endpoint(method, path);
    let mut opts = Map::new();
    for (k, v) in live {
        if used.contains(&k.as_str()) {
            continue;
        }
        let known = ep.is_some_and(|e| e.params.iter().any(|p| p.name == k));
        match v {
            ObjValue::One(s) if known => {
                opts.insert(k.clone(), json!(s));
            }
            _ => notes.push(format!(
                "`{k}` is not declared: `{method} {path}` does not take it"
            )),
        }
    }
    if !opts.is_empty() {
        put("options", Value::Object(opts));
    }
}

/// ACL entries of one path and principal with the same `propagate`, joined into one manifest
/// named after them.
fn group_acl(outcomes: Vec<ObjectOutcome>) -> Vec<ObjectOutcome> {
    let mut out: Vec<ObjectOutcome> = Vec::new();
    for o in outcomes {
        let ObjectOutcome::Adopted(a) = &o else {
            out.push(o);
            continue;
        };
        if a.kind != "Acl" {
            out.push(o);
            continue;
        }
        let spec = &a.manifest["spec"];
        let key = |s: &Value| {
            let principal = ["users", "groups", "tokens"]
                .iter()
                .find_map(|k| s.get(*k).map(|v| format!("{k}:{v}")));
            (s["path"].clone(), principal, s["propagate"].clone())
        };
        let mine = key(spec);
        let joined = out.iter_mut().find_map(|x| match x {
            ObjectOutcome::Adopted(b) if b.kind == "Acl" && key(&b.manifest["spec"]) == mine => {
                Some(b)
            }
            _ => None,
        });
        if let Some(b) = joined {
            if let (Some(roles), Some(more)) = (
                b.manifest["spec"]["roles"].as_array_mut(),
                spec["roles"].as_array(),
            ) {
                roles.extend(more.iter().cloned());
            }
            continue;
        }
        let mut a = a.clone();
        let path = spec["path"].as_str().unwrap_or("/");
        let principal = ["users", "groups", "tokens"]
            .iter()
            .find_map(|k| spec[*k][0].as_str())
            .unwrap_or("");
        let (name, _) = name_for(&format!("{} {principal}", path.trim_matches('/')));
        a.id = format!("{path} {principal}");
        a.name.clone_from(&name);
        a.manifest["metadata"]["name"] = json!(name);
        out.push(ObjectOutcome::Adopted(a));
    }
    out
}
