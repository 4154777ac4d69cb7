//! The live cluster objects: one list request per list endpoint the plan needs, read into
//! objects by id with their parameters as [`ObjValue`]s.

use super::class::Endpoints;
use super::desired::acl_id;
use super::value::ObjValue;
use proxops_pve::{Method, Params, PveClient, PveError};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One live object's parameters, by name.
pub type LiveParams = BTreeMap<String, ObjValue>;

/// The objects of one list endpoint, by id.
pub type LiveList = BTreeMap<String, LiveParams>;

/// Reads the list of `endpoints` (ACL entries are read into `path|type|ugid|role` ids).
pub async fn read(client: &PveClient, endpoints: &Endpoints) -> Result<LiveList, PveError> {
    read_with_deletions(client, endpoints)
        .await
        .map(|(list, _)| list)
}

/// [`read`], and the ids of the SDN objects whose deletion waits for `PUT /cluster/sdn`.
pub async fn read_with_deletions(
    client: &PveClient,
    endpoints: &Endpoints,
) -> Result<(LiveList, BTreeSet<String>), PveError> {
    // Users are listed with everything PVE keeps of them (`full=1`: their groups).
    // Users with everything PVE keeps of them (`full=1`: their groups); SDN objects as they
    // will be once applied, with whether they are (`pending=1`).
    let params = if endpoints.list == "/access/users" {
        Params::new().set("full", 1)
    } else if endpoints.sdn {
        Params::new().set("pending", 1)
    } else {
        Params::new()
    };
    let path = endpoints.list_path();
    let data = client
        .call_json(Method::GET, endpoints.list, &path, &params)
        .await?;
    Ok(parse_with_deletions(endpoints, &data))
}

/// The options of a singleton's read (`GET .../firewall/options`) are kept under this id.
pub const OPTIONS: &str = "options";

/// The objects of a list response.
pub fn parse(endpoints: &Endpoints, data: &Value) -> LiveList {
    parse_with_deletions(endpoints, data).0
}

/// [`parse`], and the ids of the SDN objects whose deletion is pending (not in the list: they
/// are gone once applied).
pub fn parse_with_deletions(endpoints: &Endpoints, data: &Value) -> (LiveList, BTreeSet<String>) {
    let mut out = LiveList::new();
    let mut deleted = BTreeSet::new();
    if let Some(fields) = data.as_object() {
        let params = fields
            .iter()
            .filter_map(|(k, v)| value_of(v).map(|v| (k.clone(), v)))
            .collect();
        out.insert(OPTIONS.to_owned(), params);
        return (out, deleted);
    }
    for row in data.as_array().into_iter().flatten() {
        let Some(fields) = row.as_object() else {
            continue;
        };
        let text = |k: &str| fields.get(k).and_then(Value::as_str);
        let id = if endpoints.id_field.is_empty() {
            // `GET /access/acl`: one row per (path, principal, role).
            match (text("path"), text("type"), text("ugid"), text("roleid")) {
                (Some(p), Some(t), Some(u), Some(r)) => acl_id(p, t, u, r),
                _ => continue,
            }
        } else {
            // A rule's id is its position, a number.
            match fields.get(endpoints.id_field).and_then(ObjValue::from_json) {
                Some(ObjValue::One(id)) => id,
                // A subnet's `pending=1` row has no `cidr`: its id `<zone>-<network>-<mask>`
                // holds it (pve-network `SubnetPlugin`, zone ids have no `-`).
                _ => match endpoints.path_field.and_then(&text) {
                    Some(id) => {
                        match id.split_once('-').and_then(|(_, net)| net.rsplit_once('-')) {
                            Some((network, mask)) => format!("{network}/{mask}"),
                            None => continue,
                        }
                    }
                    None => continue,
                },
            }
        };
        let mut params: LiveParams = fields
            .iter()
            .filter(|(k, _)| k.as_str() != "pending")
            .filter_map(|(k, v)| value_of(v).map(|v| (k.clone(), v)))
            .collect();
        if endpoints.sdn {
            // `pending=1` (pve-network `PVE::Network::SDN::pending_config`): the running values,
            // what the files hold instead under `pending` (`deleted` for a key they dropped),
            // and a `state`. An object whose deletion is pending is gone already.
            if text("state") == Some("deleted") {
                deleted.insert(id);
                continue;
            }
            for (k, v) in fields
                .get("pending")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                match v.as_str() {
                    Some("deleted") => {
                        params.remove(k);
                    }
                    _ => {
                        if let Some(v) = value_of(v) {
                            params.insert(k.clone(), v);
                        }
                    }
                }
            }
        }
        out.insert(id, params);
    }
    (out, deleted)
}

/// Whether a live SDN object waits for `PUT /cluster/sdn` (its `state` under `pending=1`).
pub fn pending(live: &LiveParams) -> bool {
    live.contains_key("state")
}

/// A field of a list row: a scalar or array as [`ObjValue::from_json`] reads it; an object
/// (a backup job's `prune-backups`) as the property string PVE takes for it.
fn value_of(v: &Value) -> Option<ObjValue> {
    match v {
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .filter_map(|(k, v)| match ObjValue::from_json(v)? {
                    ObjValue::One(s) => Some(format!("{k}={s}")),
                    ObjValue::Many(_) => None,
                })
                .collect();
            Some(ObjValue::One(parts.join(",")))
        }
        other => ObjValue::from_json(other),
    }
}
