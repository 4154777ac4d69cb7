//! `POST /storage` as pve-storage `src/PVE/API2/Storage/Config.pm` `create` does it: the
//! plugin's required options, `storage ID 'x' already defined` under the storage config lock
//! ("create storage failed: ..."), the plugin's default content, shared for network storages,
//! and the storage on every node or on those `nodes` names.

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::schema::split_list;
use crate::state::Storage;

/// (type, options `check_config` requires on create, default content, shared by nature): the
/// plugins' `options` (`fixed`/non-optional) and `plugindata` `content` defaults.
const PLUGINS: &[(&str, &[&str], &[&str], bool)] = &[
    ("dir", &["path"], &["images", "rootdir"], false),
    ("btrfs", &["path"], &["images", "rootdir"], false),
    ("nfs", &["server", "export"], &["images"], true),
    ("cifs", &["server", "share"], &["images"], true),
    ("cephfs", &[], &["vztmpl", "iso", "backup"], true),
    ("glusterfs", &["server", "volume"], &["images"], true),
    ("lvm", &["vgname"], &["images"], false),
    (
        "lvmthin",
        &["vgname", "thinpool"],
        &["images", "rootdir"],
        false,
    ),
    ("zfspool", &["pool"], &["images", "rootdir"], false),
    ("rbd", &["pool"], &["images"], true),
    ("iscsi", &["portal", "target"], &["images"], true),
    ("pbs", &["server", "datastore"], &["backup"], true),
];

/// `DELETE /storage/{storage}` (`delete`): "delete storage failed: storage 'x' does not exist".
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/storage", "Datastore.Allocate")?;
    let storeid = ctx.req("storage")?;
    let mut st = ctx.state();
    let mut found = false;
    for n in st.nodes.iter_mut() {
        let before = n.storages.len();
        n.storages.retain(|s| s.storage != storeid);
        found |= n.storages.len() != before;
    }
    if !found {
        return Err(ApiError::fail(format!(
            "delete storage failed: storage '{storeid}' does not exist"
        )));
    }
    for pool in st.pools.values_mut() {
        pool.storage.retain(|s| *s != storeid);
    }
    Ok(Value::Null)
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/storage", "Datastore.Allocate")?;
    let storeid = ctx.req("storage")?;
    let kind = ctx.req("type")?;
    let Some(&(_, required, default_content, network)) = PLUGINS.iter().find(|(t, ..)| *t == kind)
    else {
        return Err(ApiError::param("type", format!("unknown type '{kind}'")));
    };
    for key in required {
        ctx.req(key)?;
    }
    let content: Vec<String> = match ctx.p("content") {
        Some(c) => split_list(c),
        None => default_content.iter().map(|c| (*c).to_owned()).collect(),
    };
    let shared_flag = ctx.flag("shared").unwrap_or(false);
    let nodes = ctx.p("nodes").map(split_list).filter(|n| !n.is_empty());
    let mut st = ctx.state();
    if st
        .nodes
        .iter()
        .any(|n| n.storages.iter().any(|s| s.storage == storeid))
    {
        return Err(ApiError::fail(format!(
            "create storage failed: storage ID '{storeid}' already defined"
        )));
    }
    let storage = Storage {
        storage: storeid.clone(),
        kind: kind.clone(),
        shared: network || shared_flag,
        content,
        ..Storage::default()
    };
    for n in st.nodes.iter_mut() {
        if nodes.as_ref().is_none_or(|list| list.contains(&n.node)) {
            n.storages.push(storage.clone());
        }
    }
    Ok(json!({ "storage": storeid, "type": kind }))
}
