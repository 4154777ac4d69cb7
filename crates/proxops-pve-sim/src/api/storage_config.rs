//! The storage configuration (`/etc/pve/storage.cfg`), `/storage[/{storage}]`, as pve-storage
//! `src/PVE/API2/Storage/Config.pm` serves it (`index`, `read`, `create`, `update`, `delete`)
//! with the plugins' `options` (`src/PVE/Storage/*Plugin.pm`) and `PVE::SectionConfig`'s
//! `check_config`: every option given is kept and read back as PVE lists it; the sensitive
//! ones (`password`, `encryption-key`, `keyring`, `master-pubkey`: `extract_sensitive_params`)
//! are kept apart, as PVE keeps them under `/etc/pve/priv`, and never returned.

use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::Ctx;
use crate::error::ApiError;
use crate::schema::split_list;
use crate::state::{State, Storage};
use crate::version::PveVersion;
use proxops_pve_schema::{SENSITIVE_STORAGE_OPTIONS as SENSITIVE, StoragePlugin as Plugin};

/// Parameters that steer a request rather than set an option.
const CONTROL: &[&str] = &["storage", "type", "digest", "delete"];

fn plugin(kind: &str) -> Option<&'static Plugin> {
    proxops_pve_schema::storage_plugin(kind)
}

/// The first node's copy of each storage, by id.
fn configs(st: &State) -> BTreeMap<String, Storage> {
    let mut out = BTreeMap::new();
    for n in &st.nodes {
        for s in &n.storages {
            out.entry(s.storage.clone()).or_insert_with(|| s.clone());
        }
    }
    out
}

/// The storage.cfg digest (changes with every write).
fn digest(st: &State) -> String {
    let cfg: Vec<Value> = configs(st)
        .into_values()
        .map(|s| json!([s.storage, s.kind, s.shared, s.content, s.options]))
        .collect();
    crate::hashes::sha1_hex(serde_json::to_string(&cfg).unwrap_or_default().as_bytes())
}

/// `$api_storage_config`: the section's options with `storage`, `type`, `content`, `shared`
/// (set for a shared one) and the config `digest`.
fn entry(s: &Storage, digest: &str) -> Value {
    let mut out = json!({
        "storage": s.storage,
        "type": s.kind,
        "content": s.content.join(","),
        "digest": digest,
    });
    if s.shared {
        out["shared"] = 1.into();
    }
    for (k, v) in &s.options {
        out[k] = v.clone();
    }
    out
}

/// `GET /storage` (`index`): the storages the caller holds `Datastore.Audit` on, of the `type`
/// asked for, as `$api_storage_config` gives them: `nodes` and `shared` only when the config
/// has them. A storage the state puts on some nodes only lists them, as its `nodes` would.
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    let digest = digest(&st);
    let kind = ctx.p("type");
    let rows = configs(&st)
        .values()
        .filter(|s| ctx.allowed(&format!("/storage/{}", s.storage), "Datastore.Audit"))
        .filter(|s| kind.is_none_or(|k| s.kind == k))
        .map(|s| {
            let mut row = entry(s, &digest);
            let nodes: Vec<&str> = st
                .nodes
                .iter()
                .filter(|m| m.storages.iter().any(|x| x.storage == s.storage))
                .map(|m| m.node.as_str())
                .collect();
            if nodes.len() < st.nodes.len() {
                row["nodes"] = nodes.join(",").into();
            }
            row
        })
        .collect();
    Ok(Value::Array(rows))
}

/// `GET /storage/{storage}` (`read`): `Datastore.Allocate` on `/storage/<storage>`.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let sid = ctx.req("storage")?;
    ctx.require(&format!("/storage/{sid}"), "Datastore.Allocate")?;
    let st = ctx.state();
    let cfg = configs(&st);
    let s = cfg
        .get(&sid)
        .ok_or_else(|| ApiError::fail(format!("storage '{sid}' does not exist")))?;
    let mut s = s.clone();
    s.content.sort();
    Ok(entry(&s, &digest(&st)))
}

/// A given option as the config keeps it: the schema's booleans as 1/0, integers as numbers.
fn value(ctx: &Ctx, version: PveVersion, key: &str, v: &str) -> Value {
    let ty = crate::schema::endpoint(&ctx.method, ctx.template)
        .and_then(|ep| ep.param(version.schema(), key))
        .map(|p| p.ty);
    match ty {
        Some(crate::schema::Ty::Bool) => {
            u8::from(crate::schema::parse_bool(v).unwrap_or(false)).into()
        }
        Some(crate::schema::Ty::Int) => ctx.int(key).map_or_else(|| v.into(), Value::from),
        _ if key == "nodes" => {
            let mut nodes = split_list(v);
            nodes.sort();
            nodes.dedup();
            nodes.join(",").into()
        }
        _ => v.into(),
    }
}

/// `check_config`: the options given (not the sensitive ones), each one of the plugin's
/// ("unexpected property"), none fixed on update ("can't change value of fixed parameter").
fn check_config(
    ctx: &Ctx,
    version: PveVersion,
    p: &Plugin,
    create: bool,
) -> Result<BTreeMap<String, Value>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in &ctx.params {
        if CONTROL.contains(&k.as_str()) || SENSITIVE.contains(&k.as_str()) {
            continue;
        }
        let flags = p.option(k).map(|o| (o.fixed, o.optional));
        if !create && flags.is_some_and(|(fixed, _)| fixed) {
            return Err(format!("can't change value of fixed parameter '{k}'"));
        }
        if flags.is_none() {
            return Err(format!("unexpected property '{k}'"));
        }
        out.insert(k.clone(), value(ctx, version, k, v));
    }
    Ok(out)
}

/// The sensitive options given (`extract_sensitive_params`).
fn secrets(ctx: &Ctx) -> BTreeMap<String, String> {
    SENSITIVE
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), ctx.p(k)?.to_owned())))
        .collect()
}

/// Puts the storage on the nodes its `nodes` names (every node without), in place where a
/// node has it already.
fn place(st: &mut State, storage: &Storage) {
    let only: Option<Vec<String>> = storage
        .options
        .get("nodes")
        .and_then(Value::as_str)
        .map(split_list);
    for n in st.nodes.iter_mut() {
        let wanted = only.as_ref().is_none_or(|l| l.contains(&n.node));
        match n.storages.iter().position(|s| s.storage == storage.storage) {
            Some(i) if wanted => {
                let total = n.storages[i].total;
                n.storages[i] = Storage {
                    total,
                    ..storage.clone()
                };
            }
            Some(i) => {
                n.storages.remove(i);
            }
            None if wanted => n.storages.push(storage.clone()),
            None => {}
        }
    }
}

/// `POST /storage` (`create`): the plugin's options, its required ones
/// (`missing value for required option`), a network share's `path` under `/mnt/pve`, the
/// plugin's default content, shared for network storages; "storage ID 'x' already defined"
/// under the storage config lock ("create storage failed: ...").
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/storage", "Datastore.Allocate")?;
    let storeid = ctx.req("storage")?;
    let kind = ctx.req("type")?;
    let Some(p) = plugin(&kind) else {
        return Err(ApiError::fail(format!("unknown section type '{kind}'")));
    };
    let version = ctx.state().pve_version;
    let mut opts = check_config(ctx, version, p, true).map_err(ApiError::fail)?;
    // `delete $param->{nodes} if !$param->{nodes}`.
    if opts.get("nodes").and_then(Value::as_str) == Some("") {
        opts.remove("nodes");
    }
    // NFSPlugin, CIFSPlugin, CephFSPlugin (and GlusterfsPlugin) `check_config`.
    if matches!(kind.as_str(), "nfs" | "cifs" | "cephfs" | "glusterfs") {
        opts.entry("path".into())
            .or_insert_with(|| format!("/mnt/pve/{storeid}").into());
    }
    let given = secrets(ctx);
    if let Some(k) = p
        .options
        .iter()
        .find(|o| !o.optional && !opts.contains_key(o.name) && !given.contains_key(o.name))
        .map(|o| o.name)
    {
        return Err(ApiError::fail(format!(
            "missing value for required option '{k}'"
        )));
    }
    let mut st = ctx.state();
    if configs(&st).contains_key(&storeid) {
        return Err(ApiError::fail(format!(
            "create storage failed: storage ID '{storeid}' already defined"
        )));
    }
    let content = match opts.remove("content") {
        Some(c) => split_list(c.as_str().unwrap_or_default()),
        None => p.default_content.iter().map(|c| (*c).to_owned()).collect(),
    };
    let shared = opts.remove("shared").is_some_and(|v| v == 1);
    let storage = Storage {
        storage: storeid.clone(),
        kind: kind.clone(),
        shared: p.shared_by_nature || shared,
        content,
        options: opts,
        secrets: given,
        ..Storage::default()
    };
    place(&mut st, &storage);
    Ok(json!({ "storage": storeid, "type": kind }))
}

/// `PUT /storage/{storage}` (`update`): `Datastore.Allocate` on `/storage`; under the lock
/// ("update storage failed: ..."): the digest, the storage, the options given (none fixed),
/// then `delete` (optional options only, not set in the same request); `nodes` moves it.
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/storage", "Datastore.Allocate")?;
    let storeid = ctx.req("storage")?;
    let mut st = ctx.state();
    let failed = |m: String| ApiError::fail(format!("update storage failed: {m}"));
    if let Some(d) = ctx.p("digest")
        && d != digest(&st)
    {
        return Err(failed(
            "detected modified configuration - file changed by other user? Try again.".into(),
        ));
    }
    let Some(mut s) = configs(&st).remove(&storeid) else {
        return Err(failed(format!("storage '{storeid}' does not exist")));
    };
    let Some(p) = plugin(&s.kind) else {
        return Err(failed(format!("unknown section type '{}'", s.kind)));
    };
    let opts = check_config(ctx, st.pve_version, p, false).map_err(failed)?;
    let delete = split_list(ctx.p("delete").unwrap_or_default());
    for k in &delete {
        let Some(&proxops_pve_schema::StorageOption {
            fixed, optional, ..
        }) = p.option(k)
        else {
            return Err(failed(format!("no such option '{k}'")));
        };
        if !optional {
            return Err(failed(format!("unable to delete required option '{k}'")));
        }
        if fixed {
            return Err(failed(format!("unable to delete fixed option '{k}'")));
        }
        if opts.contains_key(k) {
            return Err(failed(format!(
                "cannot set and delete property '{k}' at the same time!"
            )));
        }
    }
    for k in &delete {
        match k.as_str() {
            "content" => s.content = p.default_content.iter().map(|c| (*c).to_owned()).collect(),
            "shared" => s.shared = p.shared_by_nature,
            k if SENSITIVE.contains(&k) => {
                s.secrets.remove(k);
            }
            k => {
                s.options.remove(k);
            }
        }
    }
    for (k, v) in opts {
        match k.as_str() {
            "content" => s.content = split_list(v.as_str().unwrap_or_default()),
            "shared" => s.shared = p.shared_by_nature || v == 1,
            _ => {
                s.options.insert(k, v);
            }
        }
    }
    s.secrets.extend(secrets(ctx));
    place(&mut st, &s);
    Ok(json!({ "storage": storeid, "type": s.kind }))
}

/// `DELETE /storage/{storage}` (`delete`): "delete storage failed: storage 'x' does not
/// exist"; a storage another one is based on (an LVM `base` on it) stays. Guests whose
/// volumes are on it are not checked, as in PVE: their configs keep the volumes. The storage
/// leaves its pools and its ACL paths go (`PVE::AccessControl::remove_storage_access`).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/storage", "Datastore.Allocate")?;
    let storeid = ctx.req("storage")?;
    let mut st = ctx.state();
    let cfg = configs(&st);
    if !cfg.contains_key(&storeid) {
        return Err(ApiError::fail(format!(
            "delete storage failed: storage '{storeid}' does not exist"
        )));
    }
    let base = format!("{storeid}:");
    if cfg.values().any(|s| {
        s.options
            .get("base")
            .and_then(Value::as_str)
            .is_some_and(|b| b.starts_with(&base))
    }) {
        return Err(ApiError::fail(
            "delete storage failed: can't remove storage - storage is used as base of another storage",
        ));
    }
    for n in st.nodes.iter_mut() {
        n.storages.retain(|s| s.storage != storeid);
    }
    for pool in st.pools.values_mut() {
        pool.storage.retain(|s| *s != storeid);
    }
    let path = format!("/storage/{storeid}");
    st.acl
        .retain(|e| e.path != path && !e.path.starts_with(&format!("{path}/")));
    Ok(Value::Null)
}
