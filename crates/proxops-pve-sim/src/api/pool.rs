//! Resource pools, as pve-manager `PVE/API2/Pool.pm` serves them from `user.cfg`: `GET /pools`
//! (all pools the user may audit, or one pool's members with `poolid`), `POST /pools`, `PUT
//! /pools` (comment, members added or with `delete` removed, `allow-move`), `DELETE /pools`,
//! and the older `/pools/{poolid}` forms. A guest's pool is its [`crate::state::Guest::pool`].

use serde_json::{Value, json};

use super::Ctx;
use super::cluster::guest_row;
use crate::error::ApiError;
use crate::schema::split_list;
use crate::state::{Pool, State};

fn missing(poolid: &str) -> ApiError {
    ApiError::fail(format!("pool '{poolid}' does not exist"))
}

/// pve-access-control `PVE::RPCEnvironment::check_pool_exist`, as a guest create, clone or
/// vzdump with `pool` calls it: a permission exception, "Permission check failed (pool 'x'
/// does not exist)".
pub(crate) fn check_pool_exists(st: &State, poolid: &str) -> Result<(), ApiError> {
    if st.pools.contains_key(poolid) {
        Ok(())
    } else {
        Err(ApiError::Status(
            403,
            format!("Permission check failed (pool '{poolid}' does not exist)"),
        ))
    }
}

/// What fails under pve-access-control `lock_user_config($code, $errmsg)` dies as
/// "$errmsg: $err", a permission exception included (a plain 500 then).
fn under_user_config_lock(
    what: &str,
    work: impl FnOnce() -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    work().map_err(|e| ApiError::fail(format!("{what}: {}", e.text())))
}

/// `PVE::RPCEnvironment::check_perm_modify`: `Permissions.Modify`, or the allocation privilege
/// of the path's kind.
pub(crate) fn check_perm_modify(ctx: &Ctx, path: &str) -> Result<(), ApiError> {
    let own = [
        ("/storage/", "Datastore.Allocate"),
        ("/vms/", "VM.Allocate"),
        ("/pool/", "Pool.Allocate"),
    ]
    .into_iter()
    .find(|(prefix, _)| path.len() > prefix.len() && path.starts_with(prefix))
    .map(|(_, p)| p);
    match own {
        Some(own) => ctx.require_any(path, &["Permissions.Modify", own]),
        None => ctx.require(path, "Permissions.Modify"),
    }
}

fn members(st: &State, poolid: &str, only: Option<&str>) -> Vec<Value> {
    let now = crate::auth::now();
    let mut out: Vec<Value> = st
        .guests
        .values()
        .filter(|g| g.pool.as_deref() == Some(poolid))
        .filter(|g| {
            only.is_none_or(|t| match g.kind {
                crate::GuestType::Qemu => t == "qemu",
                crate::GuestType::Lxc => t == "lxc",
            })
        })
        .map(|g| guest_row(st.pve_version, g, now))
        .collect();
    if only.is_none_or(|t| t == "storage")
        && let Some(pool) = st.pools.get(poolid)
    {
        for sid in &pool.storage {
            let node = st
                .nodes
                .iter()
                .find(|n| n.storages.iter().any(|s| s.storage == *sid));
            if let Some(n) = node {
                out.push(json!({
                    "id": format!("storage/{}/{sid}", n.node),
                    "type": "storage",
                    "node": n.node,
                    "storage": sid,
                }));
            }
        }
    }
    out
}

/// `GET /pools`.
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    if let Some(poolid) = ctx.p("poolid") {
        ctx.require(&format!("/pool/{poolid}"), "Pool.Audit")?;
        let pool = st.pools.get(poolid).ok_or_else(|| missing(poolid))?;
        let mut entry = json!({ "poolid": poolid, "members": members(&st, poolid, ctx.p("type")) });
        if let Some(c) = &pool.comment {
            entry["comment"] = json!(c);
        }
        return Ok(json!([entry]));
    }
    let mut out = Vec::new();
    for (poolid, pool) in &st.pools {
        if !ctx.allowed(&format!("/pool/{poolid}"), "Pool.Audit") {
            continue;
        }
        let mut entry = json!({ "poolid": poolid });
        if let Some(c) = &pool.comment {
            entry["comment"] = json!(c);
        }
        out.push(entry);
    }
    Ok(Value::Array(out))
}

/// `GET /pools/{poolid}` (`read_pool`).
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let poolid = ctx.req("poolid")?;
    ctx.require(&format!("/pool/{poolid}"), "Pool.Audit")?;
    let st = ctx.state();
    let pool = st.pools.get(&poolid).ok_or_else(|| missing(&poolid))?;
    let mut out = json!({ "members": members(&st, &poolid, ctx.p("type")) });
    if let Some(c) = &pool.comment {
        out["comment"] = json!(c);
    }
    Ok(out)
}

/// `POST /pools`.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let poolid = ctx.req("poolid")?;
    ctx.require(&format!("/pool/{poolid}"), "Pool.Allocate")?;
    let comment = ctx.p("comment").map(str::to_string);
    let mut st = ctx.state();
    under_user_config_lock("create pool failed", || {
        if st.pools.contains_key(&poolid) {
            return Err(ApiError::fail(format!("pool '{poolid}' already exists")));
        }
        // Nested pools (`parent/child`) need their parent; every level starts with a letter.
        if let Some((parent, leaf)) = poolid.rsplit_once('/') {
            if !st.pools.contains_key(parent) {
                return Err(ApiError::fail(format!(
                    "parent '{parent}' of pool '{poolid}' does not exist"
                )));
            }
            if !leaf.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Err(ApiError::fail("pool name must start with a letter"));
            }
        } else if !poolid.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(ApiError::fail("pool name must start with a letter"));
        }
        st.pools.insert(
            poolid.clone(),
            Pool {
                comment,
                ..Pool::default()
            },
        );
        Ok(Value::Null)
    })
}

/// `PUT /pools` and `PUT /pools/{poolid}` (`update_pool`).
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let poolid = ctx.req("poolid")?;
    ctx.require(&format!("/pool/{poolid}"), "Pool.Allocate")?;
    let delete = ctx.flag("delete").unwrap_or(false);
    let allow_move = ctx.flag("allow-move").unwrap_or(false);
    let vms = ctx.p("vms").map(split_list).unwrap_or_default();
    let storages = ctx.p("storage").map(split_list).unwrap_or_default();
    let comment = ctx.p("comment").map(str::to_string);
    let mut st = ctx.state();
    under_user_config_lock("update pools failed", || {
        // Checked whole before anything changes: a failure leaves user.cfg as it was.
        let mut staged = st.clone();
        if !staged.pools.contains_key(&poolid) {
            return Err(missing(&poolid));
        }
        if let Some(c) = comment
            && let Some(pool) = staged.pools.get_mut(&poolid)
        {
            pool.comment = Some(c);
        }
        // `update_pool`: VMs first, then storages, each checked (`check_perm_modify`) as it
        // comes.
        for vmid in &vms {
            check_perm_modify(ctx, &format!("/vms/{vmid}"))?;
            let id: u32 = vmid.parse().unwrap_or(0);
            let Some(g) = staged.guests.get_mut(&id) else {
                return Err(ApiError::fail(format!("VM {vmid} does not exist")));
            };
            match (g.pool.clone(), delete) {
                (Some(p), true) if p == poolid => g.pool = None,
                (_, true) => {
                    return Err(ApiError::fail(format!("VM {vmid} is not a pool member")));
                }
                (Some(p), false) if p == poolid => {
                    return Err(ApiError::fail(format!(
                        "VM {vmid} is already a pool member"
                    )));
                }
                (Some(p), false) => {
                    if !allow_move {
                        return Err(ApiError::fail(format!(
                            "VM {vmid} belongs already to pool '{p}' and 'allow-move' is not set"
                        )));
                    }
                    // Moving takes the guest out of its pool: `Pool.Allocate` there.
                    ctx.require(&format!("/pool/{p}"), "Pool.Allocate")?;
                    g.pool = Some(poolid.clone());
                }
                (None, false) => g.pool = Some(poolid.clone()),
            }
        }
        for sid in &storages {
            check_perm_modify(ctx, &format!("/storage/{sid}"))?;
            let Some(pool) = staged.pools.get_mut(&poolid) else {
                return Err(missing(&poolid));
            };
            let member = pool.storage.contains(sid);
            match (delete, member) {
                (true, false) => {
                    return Err(ApiError::fail(format!(
                        "Storage '{sid}' is not a pool member"
                    )));
                }
                (false, true) => {
                    return Err(ApiError::fail(format!(
                        "Storage '{sid}' is already a pool member"
                    )));
                }
                (true, true) => pool.storage.retain(|s| s != sid),
                (false, false) => pool.storage.push(sid.clone()),
            }
        }
        *st = staged;
        Ok(Value::Null)
    })
}

/// `DELETE /pools` and `DELETE /pools/{poolid}`: only an empty pool.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let poolid = ctx.req("poolid")?;
    ctx.require(&format!("/pool/{poolid}"), "Pool.Allocate")?;
    let mut st = ctx.state();
    under_user_config_lock("delete pool failed", || {
        let pool = st.pools.get(&poolid).ok_or_else(|| missing(&poolid))?;
        let prefix = format!("{poolid}/");
        if let Some(sub) = st.pools.keys().find(|k| k.starts_with(&prefix)) {
            return Err(ApiError::fail(format!(
                "pool '{poolid}' is not empty (contains pool '{sub}')"
            )));
        }
        if let Some(g) = st
            .guests
            .values()
            .find(|g| g.pool.as_deref() == Some(&poolid))
        {
            return Err(ApiError::fail(format!(
                "pool '{poolid}' is not empty (contains VM {})",
                g.vmid
            )));
        }
        if let Some(sid) = pool.storage.first() {
            return Err(ApiError::fail(format!(
                "pool '{poolid}' is not empty (contains storage '{sid}')"
            )));
        }
        st.pools.remove(&poolid);
        Ok(Value::Null)
    })
}
