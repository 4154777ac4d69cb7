//! `/access/roles/{roleid}` and `POST /access/roles`, as pve-access-control
//! `src/PVE/API2/Role.pm` defines them (`create_role`, `read_role`, `update_role`,
//! `delete_role`) with `src/PVE/AccessControl.pm` (`add_role_privs`, `role_is_special`): the
//! built-in roles ([`crate::roles::builtin`]) are read-only, privileges must be the release's.
//! A role granted through `PUT /access/acl` grants its privileges of the moment
//! ([`crate::roles::ROLE_MARK`]); the list is [`super::access::roles`].

use serde_json::{Map, Value};
use std::collections::BTreeSet;

use super::Ctx;
use crate::error::ApiError;
use crate::schema::split_list;

/// `add_role_privs`: each privilege must be one of the release's ("invalid privilege").
fn privs(ctx: &Ctx) -> Result<BTreeSet<String>, String> {
    let valid = crate::auth::privileges(ctx.state().pve_version);
    let mut out = BTreeSet::new();
    for p in split_list(ctx.p("privs").unwrap_or_default()) {
        if !valid.contains(&p.as_str()) {
            return Err(format!("invalid privilege '{p}'"));
        }
        out.insert(p);
    }
    Ok(out)
}

/// Whether a role is one of the release's built-in ones (`role_is_special`).
fn special(ctx: &Ctx, role: &str) -> bool {
    crate::roles::builtin(ctx.state().pve_version).contains_key(role)
}

/// `POST /access/roles` (`create_role`): `Sys.Modify` on `/access`; no id in the `PVE`
/// namespace (any case), none that exists ("create role failed: role 'x' already exists").
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access", "Sys.Modify")?;
    let role = ctx.req("roleid")?;
    if role.to_ascii_lowercase().starts_with("pve") {
        return Err(ApiError::param(
            "roleid",
            "cannot use role ID starting with the (case-insensitive) 'PVE' namespace",
        ));
    }
    let failed = |m: String| ApiError::fail(format!("create role failed: {m}"));
    if special(ctx, &role) || ctx.state().roles.contains_key(&role) {
        return Err(failed(format!("role '{role}' already exists")));
    }
    let privs = privs(ctx).map_err(failed)?;
    ctx.state().roles.insert(role, privs);
    Ok(Value::Null)
}

/// `GET /access/roles/{roleid}` (`read_role`): anyone; the role's privileges as
/// `{privilege: 1}`.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let role = ctx.req("roleid")?;
    let version = ctx.state().pve_version;
    let privs: Vec<String> = match crate::roles::builtin(version).get(role.as_str()) {
        Some(p) => p.clone(),
        None => match ctx.state().roles.get(&role) {
            Some(p) => p.iter().cloned().collect(),
            None => return Err(ApiError::fail(format!("role '{role}' does not exist"))),
        },
    };
    Ok(Value::Object(
        privs
            .into_iter()
            .map(|p| (p, Value::from(1)))
            .collect::<Map<_, _>>(),
    ))
}

/// `PUT /access/roles/{roleid}` (`update_role`): `Sys.Modify` on `/access`; a built-in role
/// "cannot be modified"; `privs` replace the role's, or with `append` join them.
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access", "Sys.Modify")?;
    let role = ctx.req("roleid")?;
    if special(ctx, &role) {
        return Err(ApiError::fail(format!(
            "auto-generated role '{role}' cannot be modified"
        )));
    }
    let failed = |m: String| ApiError::fail(format!("update role failed: {m}"));
    if !ctx.state().roles.contains_key(&role) {
        return Err(failed(format!("role '{role}' does not exist")));
    }
    let append = ctx.flag("append").unwrap_or(false);
    let given = privs(ctx).map_err(failed)?;
    let mut st = ctx.state();
    if let Some(set) = st.roles.get_mut(&role) {
        if !append {
            set.clear();
        }
        set.extend(given);
    }
    Ok(Value::Null)
}

/// `DELETE /access/roles/{roleid}` (`delete_role`): `Sys.Modify` on `/access`; a built-in role
/// "cannot be deleted". Its ACL entries stay in user.cfg, where PVE ignores them.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access", "Sys.Modify")?;
    let role = ctx.req("roleid")?;
    if special(ctx, &role) {
        return Err(ApiError::fail(format!(
            "auto-generated role '{role}' cannot be deleted"
        )));
    }
    if ctx.state().roles.remove(&role).is_none() {
        return Err(ApiError::fail(format!(
            "delete role failed: role '{role}' does not exist"
        )));
    }
    Ok(Value::Null)
}
