//! The API calls of cluster-object actions: create (`POST` of the collection; an ACL entry's
//! `PUT /access/acl`), update (`PUT` of the object, `delete` for keys removed) and delete.

use super::desired::DesiredObject;
use super::value::ObjValue;
use proxops_model::kinds::ObjectClass;
use proxops_pve::{Method, Params, Request};

/// How a live object differs from its manifest, on the keys ProxOps owns.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Keys to write: (key, desired, live).
    pub(crate) set: Vec<(String, ObjValue, Option<ObjValue>)>,
    /// Keys ProxOps wrote before that the manifest no longer sets: (key, live).
    pub(crate) unset: Vec<(String, ObjValue)>,
    /// Keys the update must carry though they match (see [`carried`]): (key, live).
    pub(crate) kept: Vec<(String, ObjValue)>,
    /// Keys PVE fixes at creation that differ, in words.
    pub(crate) fixed: Vec<String>,
}

/// The keys an update of `d` must send even when they do not change, their live value sent
/// back as PVE has it: what PVE's update requires besides the ids in its path (a USB
/// mapping's `map`), and the fields a firewall alias's or IP set entry's update replaces
/// (`update_alias`, `update_ip` in pve-firewall `API2/Firewall/Aliases.pm`, `IPSet.pm`: the
/// alias or entry becomes what the request gives, a field not given is gone).
pub(crate) fn carried(d: &DesiredObject) -> Vec<&'static str> {
    if d.class == ObjectClass::Firewall {
        match d.endpoints.list {
            "/cluster/firewall/aliases" => return vec!["cidr", "comment"],
            "/cluster/firewall/ipset/{name}" => return vec!["nomatch", "comment"],
            _ => {}
        }
    }
    let item = d.endpoints.item;
    proxops_pve_schema::endpoint("PUT", item)
        .map(|ep| ep.params)
        .unwrap_or_default()
        .iter()
        .filter(|p| !p.optional && !item.contains(&format!("{{{}}}", p.name)))
        .map(|p| p.name)
        .collect()
}

impl Found {
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty() && self.unset.is_empty()
    }

    pub(crate) fn reason(&self) -> String {
        let set: Vec<&str> = self.set.iter().map(|(k, _, _)| k.as_str()).collect();
        let unset: Vec<&str> = self.unset.iter().map(|(k, _)| k.as_str()).collect();
        match (set.is_empty(), unset.is_empty()) {
            (false, true) => format!("changed: {}", set.join(", ")),
            (true, false) => format!("removed: {}", unset.join(", ")),
            _ => format!("changed: {}; removed: {}", set.join(", "), unset.join(", ")),
        }
    }
}

/// One API call of a cluster-object action, as the client sends it.
pub(crate) type ObjectRequest = proxops_pve::Request;

fn push_value(p: &mut Params, k: &str, v: &ObjValue) {
    match v {
        ObjValue::One(s) => p.push(k, s),
        ObjValue::Many(items) => {
            for i in items {
                p.push(k, i);
            }
        }
    }
}

/// `(path, type, ugid, role)` of an ACL entry id.
fn acl_parts(id: &str) -> Option<(&str, &str, &str, &str)> {
    let mut it = id.rsplitn(4, '|');
    let role = it.next()?;
    let ugid = it.next()?;
    let kind = it.next()?;
    let path = it.next()?;
    Some((path, kind, ugid, role))
}

fn acl_params(id: &str) -> Params {
    let mut p = Params::new();
    if let Some((path, kind, ugid, role)) = acl_parts(id) {
        p.push("path", path);
        p.push("roles", role);
        p.push(&format!("{kind}s"), ugid);
    }
    p
}

pub(crate) fn create_request(d: &DesiredObject) -> Request {
    if d.class == ObjectClass::Acl {
        let mut params = acl_params(&d.id);
        for (k, v) in &d.params {
            push_value(&mut params, k, v);
        }
        return Request::new(Method::PUT, "/access/acl", "/access/acl".to_owned(), params);
    }
    let mut params = Params::new();
    let path = if d.endpoints.creates_at_item() {
        // The id is in the path (an API token's `{tokenid}`).
        d.endpoints.item_path(&d.id)
    } else {
        params.push(d.endpoints.id_param, &d.id);
        d.endpoints.create_path()
    };
    for (k, v) in d.create_only.iter().chain(&d.params) {
        push_value(&mut params, k, v);
    }
    Request::new(Method::POST, d.endpoints.create, path, params)
}

pub(crate) fn update_request(d: &DesiredObject, found: &Found) -> Request {
    if d.class == ObjectClass::Acl {
        return create_request(d);
    }
    if d.class == ObjectClass::Firewall {
        match d.endpoints.list {
            // An IP set or security group has no `PUT`: its comment is changed by its create
            // with `rename` set to its own name (`create_ipset`, `create_security_group`).
            "/cluster/firewall/ipset" | "/cluster/firewall/groups" => {
                let mut params = Params::new()
                    .set(d.endpoints.id_param, &d.id)
                    .set("rename", &d.id);
                for (k, v) in &d.params {
                    push_value(&mut params, k, v);
                }
                let path = d.endpoints.create_path();
                return Request::new(Method::POST, d.endpoints.create, path, params);
            }
            _ => {}
        }
    }
    let mut params = Params::new();
    for (k, v, _) in &found.set {
        push_value(&mut params, k, v);
    }
    for (k, v) in &found.kept {
        push_value(&mut params, k, v);
    }
    if !found.unset.is_empty() {
        let keys: Vec<&str> = found.unset.iter().map(|(k, _)| k.as_str()).collect();
        params.push("delete", keys.join(","));
    }
    Request::new(
        Method::PUT,
        d.endpoints.item,
        d.endpoints.item_path(d.path_id.as_deref().unwrap_or(&d.id)),
        params,
    )
}

pub(crate) fn delete_request(d: &DesiredObject) -> Request {
    if d.class == ObjectClass::Acl {
        let mut params = acl_params(&d.id);
        params.push("delete", 1);
        return Request::new(Method::PUT, "/access/acl", "/access/acl".to_owned(), params);
    }
    Request::new(
        Method::DELETE,
        d.endpoints.item,
        d.endpoints.item_path(d.path_id.as_deref().unwrap_or(&d.id)),
        Params::new(),
    )
}
