//! `/access/groups/{groupid}` and `POST /access/groups`, as pve-access-control
//! `src/PVE/API2/Group.pm` defines them (`create_group`, `read_group`, `update_group`,
//! `delete_group`). Members join and leave through the users (`groups`, `append`:
//! [`super::access_write`]); the list is [`super::access::groups`].

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::state::AccessGroup;

/// `POST /access/groups` (`create_group`): `Group.Allocate` on `/access/groups`; under the
/// user.cfg lock, "create group failed: group 'x' already exists".
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access/groups", "Group.Allocate")?;
    let id = ctx.req("groupid")?;
    let mut st = ctx.state();
    if st.groups.contains_key(&id) {
        return Err(ApiError::fail(format!(
            "create group failed: group '{id}' already exists"
        )));
    }
    let group = AccessGroup {
        // `comment` is kept only when true in Perl's sense.
        comment: ctx
            .p("comment")
            .filter(|c| !c.is_empty() && *c != "0")
            .map(str::to_owned),
        ..AccessGroup::default()
    };
    st.groups.insert(id, group);
    Ok(Value::Null)
}

/// `GET /access/groups/{groupid}` (`read_group`): `Sys.Audit` or `Group.Allocate` on
/// `/access/groups`; `members` and `comment`.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require_any("/access/groups", &["Sys.Audit", "Group.Allocate"])?;
    let id = ctx.req("groupid")?;
    let st = ctx.state();
    let Some(g) = st.groups.get(&id) else {
        return Err(ApiError::fail(format!("group '{id}' does not exist")));
    };
    let mut out = json!({ "members": g.users });
    if let Some(c) = &g.comment {
        out["comment"] = c.clone().into();
    }
    Ok(out)
}

/// `PUT /access/groups/{groupid}` (`update_group`): `Group.Allocate` on `/access/groups`; the
/// comment (an empty one is gone once user.cfg is read back).
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access/groups", "Group.Allocate")?;
    let id = ctx.req("groupid")?;
    let comment = ctx.p("comment").map(str::to_owned);
    let mut st = ctx.state();
    let Some(g) = st.groups.get_mut(&id) else {
        return Err(ApiError::fail(format!(
            "update group failed: group '{id}' does not exist"
        )));
    };
    if let Some(c) = comment {
        g.comment = (!c.is_empty()).then_some(c);
    }
    Ok(Value::Null)
}

/// `DELETE /access/groups/{groupid}` (`delete_group`): `Group.Allocate` on `/access/groups`;
/// the group's ACL entries go with it (`delete_group_acl`).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/access/groups", "Group.Allocate")?;
    let id = ctx.req("groupid")?;
    let mut st = ctx.state();
    if st.groups.remove(&id).is_none() {
        return Err(ApiError::fail(format!(
            "delete group failed: group '{id}' does not exist"
        )));
    }
    let principal = format!("@{id}");
    st.acl.retain(|e| e.principal != principal);
    Ok(Value::Null)
}
