//! API tokens written through the API, `/access/users/{userid}/token[/{tokenid}]`, as
//! pve-access-control `src/PVE/API2/User.pm` (`token_index`, `read_token`, `generate_token`,
//! `update_token_info`, `remove_token`) defines them for the schemas served. A token made here authenticates like a
//! configured one ([`crate::auth::authenticate`]), with its expiry and privilege separation.

use serde_json::{Value, json};

use super::Ctx;
use super::access::known_users;
use crate::error::ApiError;
use crate::state::UserToken;

/// The endpoints' check, `['or', ['userid-param', 'self'], ['userid-group', ['User.Modify']]]`
/// (`PVE::RPCEnvironment::exec_api2_perm_check`): the user itself (a token is not its user),
/// or `User.Modify` on `/access/groups` (not narrowed to the user's groups). Both
/// branches need the user to exist: a missing one is refused as a permission failure.
fn check(ctx: &Ctx, userid: &str) -> Result<(), ApiError> {
    let accounts = ctx.state().users.clone();
    let (ids, _) = known_users(&ctx.shared.config, &accounts);
    let who = ctx.who();
    let exists = ids.contains(userid);
    if exists && who.tokenid.is_none() && who.userid == userid {
        return Ok(());
    }
    if exists && ctx.allowed("/access/groups", "User.Modify") {
        return Ok(());
    }
    Err(ApiError::Status(403, "Permission check failed".into()))
}

fn full_id(userid: &str, tokenid: &str) -> String {
    format!("{userid}!{tokenid}")
}

fn info(t: &UserToken) -> Value {
    let mut v = json!({ "privsep": u8::from(t.privsep), "expire": t.expire });
    if let Some(c) = &t.comment {
        v["comment"] = c.clone().into();
    }
    v
}

/// The token, or `check_token_exist`'s message.
fn existing(ctx: &Ctx, userid: &str, tokenid: &str) -> Result<UserToken, ApiError> {
    ctx.state()
        .tokens
        .get(&full_id(userid, tokenid))
        .cloned()
        .ok_or_else(|| ApiError::fail(format!("no such token '{tokenid}' for user '{userid}'")))
}

/// `GET /access/users/{userid}/token`: the user's tokens made through the API, each with its
/// `tokenid`.
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    check(ctx, &userid)?;
    let prefix = format!("{userid}!");
    let rows = ctx
        .state()
        .tokens
        .iter()
        .filter_map(|(id, t)| {
            let name = id.strip_prefix(&prefix)?;
            let mut row = info(t);
            row["tokenid"] = name.into();
            Some(row)
        })
        .collect();
    Ok(Value::Array(rows))
}

/// `GET /access/users/{userid}/token/{tokenid}`.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    let tokenid = ctx.req("tokenid")?;
    check(ctx, &userid)?;
    Ok(info(&existing(ctx, &userid, &tokenid)?))
}

/// `POST /access/users/{userid}/token/{tokenid}`: the secret is returned once (`value`);
/// an existing token is refused as a parameter error, as PVE's `raise_param_exc` does.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    let tokenid = ctx.req("tokenid")?;
    check(ctx, &userid)?;
    let id = full_id(&userid, &tokenid);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    if st.tokens.contains_key(&id)
        || std::iter::once(&shared.config.token)
            .chain(&shared.config.extra_tokens)
            .any(|t| t.id == id)
    {
        return Err(ApiError::param("tokenid", "Token already exists."));
    }
    let token = UserToken {
        secret: crate::rng::uuid(),
        privsep: ctx.flag("privsep").unwrap_or(true),
        expire: ctx
            .int("expire")
            .map_or(0, |e| u64::try_from(e).unwrap_or(0)),
        comment: ctx
            .p("comment")
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
    };
    let out = json!({ "info": info(&token), "value": token.secret, "full-tokenid": id });
    st.tokens.insert(id, token);
    shared.persist(&st);
    Ok(out)
}

/// `PUT /access/users/{userid}/token/{tokenid}`: `privsep`, `expire`, `comment` (an empty one
/// removes it) and, from 9.1, `delete=comment`. (`regenerate` came in a pve-access-control
/// newer than the 9.1.3 schema the simulator serves: its parameter check refuses it.)
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    let tokenid = ctx.req("tokenid")?;
    check(ctx, &userid)?;
    let mut token = existing(ctx, &userid, &tokenid)?;
    if let Some(b) = ctx.flag("privsep") {
        token.privsep = b;
    }
    if let Some(e) = ctx.int("expire") {
        token.expire = u64::try_from(e).unwrap_or(0);
    }
    if let Some(c) = ctx.p("comment") {
        token.comment = (!c.is_empty()).then(|| c.to_owned());
    }
    for key in crate::schema::split_list(ctx.p("delete").unwrap_or_default()) {
        if key != "comment" {
            return Err(ApiError::param("delete", format!("unknown option '{key}'")));
        }
        token.comment = None;
    }
    let id = full_id(&userid, &tokenid);
    let out = info(&token);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    st.tokens.insert(id, token);
    shared.persist(&st);
    Ok(out)
}

/// `DELETE /access/users/{userid}/token/{tokenid}`: the token stops authenticating at once.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    let tokenid = ctx.req("tokenid")?;
    check(ctx, &userid)?;
    existing(ctx, &userid, &tokenid)?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    st.tokens.remove(&full_id(&userid, &tokenid));
    shared.persist(&st);
    Ok(Value::Null)
}
