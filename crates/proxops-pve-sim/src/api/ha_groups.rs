//! HA groups (PVE 8): `GET`/`POST /cluster/ha/groups` and `GET`/`PUT`/`DELETE
//! /cluster/ha/groups/{group}` as pve-ha-manager `src/PVE/API2/HA/Groups.pm` answers them. On
//! PVE 9 groups are migrated to rules: with none left, every call is refused with PVE's words.

use serde_json::{Value, json};

use super::Ctx;
use super::ha::groups_migrated;
use crate::error::ApiError;
use crate::state::{HaGroup, State};

/// `Groups.pm`'s refusal once groups have been migrated (`what`: `index`, `read`, ...).
fn migrated(st: &State, what: &str) -> Result<(), ApiError> {
    if groups_migrated(st) {
        return Err(ApiError::fail(format!(
            "cannot {what}: ha groups have been migrated to rules"
        )));
    }
    Ok(())
}

fn digest(st: &State) -> String {
    let text = serde_json::to_string(&st.ha_groups).unwrap_or_default();
    crate::hashes::sha1_hex(text.as_bytes())
}

/// `$api_copy_config`: the group's config with `group`, `type` and `digest`.
fn row(name: &str, g: &HaGroup, digest: &str) -> Value {
    let mut v = json!({ "group": name, "type": "group", "nodes": g.nodes, "digest": digest });
    if g.restricted {
        v["restricted"] = 1.into();
    }
    if g.nofailback {
        v["nofailback"] = 1.into();
    }
    if let Some(c) = &g.comment {
        v["comment"] = c.clone().into();
    }
    v
}

/// `PVE::HA::Groups` `nodes` (`pve-ha-group-node-list`): `node[:priority]`, comma-separated,
/// each node a cluster member.
fn check_nodes(st: &State, nodes: &str) -> Result<(), ApiError> {
    for entry in nodes.split([',', ';', ' ']).filter(|e| !e.is_empty()) {
        let (node, prio) = entry.split_once(':').unwrap_or((entry, "0"));
        if prio.parse::<u32>().is_err() || st.node(node).is_none() {
            return Err(ApiError::param(
                "nodes",
                format!("value '{entry}' does not look like a valid node name"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    migrated(&st, "index groups")?;
    let d = digest(&st);
    Ok(Value::Array(
        st.ha_groups.iter().map(|(n, g)| row(n, g, &d)).collect(),
    ))
}

pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let name = ctx.req("group")?;
    let st = ctx.state();
    migrated(&st, "read group")?;
    match st.ha_groups.get(&name) {
        Some(g) => Ok(row(&name, g, &digest(&st))),
        None => Err(ApiError::fail(format!("no such ha group '{name}'"))),
    }
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let name = ctx.req("group")?;
    let nodes = ctx.req("nodes")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    migrated(&st, "create group")?;
    if let Some(t) = ctx.p("type")
        && t != "group"
    {
        return Err(ApiError::fail("types does not match"));
    }
    check_nodes(&st, &nodes)?;
    if st.ha_groups.contains_key(&name) {
        return Err(ApiError::fail(format!(
            "create ha group failed: ha group ID '{name}' already defined"
        )));
    }
    let group = HaGroup {
        nodes,
        restricted: ctx.flag("restricted").unwrap_or(false),
        nofailback: ctx.flag("nofailback").unwrap_or(false),
        comment: ctx.p("comment").map(str::to_string),
    };
    st.ha_groups.insert(name, group);
    shared.persist(&st);
    Ok(Value::Null)
}

pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let name = ctx.req("group")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    migrated(&st, "update group")?;
    if let Some(d) = ctx.p("digest")
        && d != digest(&st)
    {
        return Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    if let Some(nodes) = ctx.p("nodes") {
        check_nodes(&st, nodes)?;
    }
    let Some(g) = st.ha_groups.get_mut(&name) else {
        return Err(ApiError::fail(format!(
            "update ha group failed: no such ha group '{name}'"
        )));
    };
    for key in ctx.p("delete").unwrap_or_default().split([',', ';', ' ']) {
        match key {
            "" => {}
            "comment" => g.comment = None,
            "restricted" => g.restricted = false,
            "nofailback" => g.nofailback = false,
            "nodes" => return Err(ApiError::fail("unable to delete required option 'nodes'")),
            other => return Err(ApiError::fail(format!("no such option '{other}'"))),
        }
    }
    if let Some(n) = ctx.p("nodes") {
        g.nodes = n.to_owned();
    }
    if let Some(b) = ctx.flag("restricted") {
        g.restricted = b;
    }
    if let Some(b) = ctx.flag("nofailback") {
        g.nofailback = b;
    }
    if let Some(c) = ctx.p("comment") {
        g.comment = Some(c.to_owned());
    }
    shared.persist(&st);
    Ok(Value::Null)
}

/// `delete`: refused while a resource uses the group (`lock_ha_domain`'s message prefix).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let name = ctx.req("group")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    migrated(&st, "delete group")?;
    if let Some((sid, _)) = st
        .ha_resources
        .iter()
        .find(|(_, r)| r.group.as_deref() == Some(name.as_str()))
    {
        return Err(ApiError::fail(format!(
            "delete ha group failed: ha group is used by service '{sid}'"
        )));
    }
    // PVE deletes a group that is not there without complaint.
    st.ha_groups.remove(&name);
    shared.persist(&st);
    Ok(Value::Null)
}
