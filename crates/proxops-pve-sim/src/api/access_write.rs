//! The writes and single reads of `/access` the simulator serves besides the lists:
//! `PUT /access/acl` (pve-access-control `src/PVE/API2/ACL.pm` `update_acl`), the users
//! (`src/PVE/API2/User.pm` `read_user`, `create_user`, `update_user`, `delete_user`) and
//! `PUT /access/password` (`src/PVE/API2/AccessControl.pm` `change_password`).

use serde_json::{Value, json};

use super::Ctx;
use super::access::{known_users, token_row};
use crate::config::AclEntry;
use crate::error::ApiError;
use crate::schema::split_list;
use crate::state::UserAccount;

/// `PUT /access/acl`: grants (or with `delete=1` revokes) each role to each user and token on
/// `path`. The caller needs `check_perm_modify` on the path; what fails under the user.cfg lock
/// says "ACL update failed: ...".
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let path = normalize_path(&ctx.req("path")?).ok_or_else(|| {
        ApiError::param(
            "path",
            format!("invalid ACL path '{}'", ctx.p("path").unwrap_or_default()),
        )
    })?;
    super::pool::check_perm_modify(ctx, &path)?;
    let roles = split_list(&ctx.req("roles")?);
    let delete = ctx.flag("delete").unwrap_or(false);
    // `update_acl`: a grant propagates unless told otherwise; granting it again sets it.
    let propagate = ctx.flag("propagate").unwrap_or(true);
    let users = ctx.p("users").map(split_list).unwrap_or_default();
    let tokens = ctx.p("tokens").map(split_list).unwrap_or_default();
    let groups = ctx.p("groups").map(split_list).unwrap_or_default();
    let mut st = ctx.state();
    let (known, user_tokens) = known_users(&ctx.shared.config, &st.users);
    let version = st.pve_version;
    let builtin = crate::roles::builtin(version);
    let failed = |msg: String| ApiError::fail(format!("ACL update failed: {msg}"));
    let mut acl = st.acl.clone();
    for role in &roles {
        // A role made through the API is granted by name (see `crate::roles::ROLE_MARK`).
        let privs = match builtin.get(role.as_str()) {
            Some(privs) => privs.clone(),
            None if st.roles.contains_key(role) => {
                vec![format!("{}{role}", crate::roles::ROLE_MARK)]
            }
            None => return Err(failed(format!("role '{role}' does not exist"))),
        };
        let mut principals: Vec<String> = Vec::new();
        // Groups are ACL principals `@group`.
        for g in &groups {
            if !st.groups.contains_key(g) {
                return Err(failed(format!("group '{g}' does not exist")));
            }
            principals.push(format!("@{g}"));
        }
        for u in &users {
            if !known.contains(u) {
                return Err(failed(format!("user '{u}' does not exist")));
            }
            principals.push(u.clone());
        }
        for t in &tokens {
            let (user, name) = t.split_once('!').unwrap_or((t.as_str(), ""));
            // ACL.pm `update_acl` checks `check_token_exist` against user.cfg, which holds
            // the tokens made through the API as well as the configured ones.
            let exists = st.tokens.contains_key(t.as_str())
                || user_tokens
                    .get(user)
                    .is_some_and(|list| list.iter().any(|x| x.id == *t));
            if !exists {
                return Err(failed(format!("no such token '{name}' for user '{user}'")));
            }
            principals.push(t.clone());
        }
        for principal in principals {
            // A grant is the role's privileges on the path (the simulator keeps privileges;
            // `GET /access/acl` names the built-in role back).
            let entry = AclEntry {
                principal,
                path: path.clone(),
                privs: if *role == "Administrator" {
                    vec!["*".into()]
                } else {
                    privs.clone()
                },
                propagate,
            };
            acl.retain(|e| {
                !(e.principal == entry.principal && e.path == entry.path && e.privs == entry.privs)
            });
            if !delete {
                acl.push(entry);
            }
        }
    }
    st.acl = acl;
    Ok(Value::Null)
}

/// pve-access-control `normalize_path`: one leading slash, no doubled or trailing slashes.
fn normalize_path(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| {
        !p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c))
    }) {
        return None;
    }
    Some(format!("/{}", parts.join("/")))
}

/// A user's settings as `GET /access/users` and `GET /access/users/{userid}` show them.
pub(crate) fn user_fields(u: &UserAccount) -> Value {
    let mut out = json!({ "enable": u8::from(u.enable), "expire": u.expire });
    for (key, value) in [
        ("firstname", &u.firstname),
        ("lastname", &u.lastname),
        ("email", &u.email),
        ("comment", &u.comment),
        ("keys", &u.keys),
    ] {
        if let Some(v) = value {
            out[key] = json!(v);
        }
    }
    out
}

/// `GET /access/users/{userid}`: the user's settings and tokens; `no such user ('x')` for an
/// unknown one. The caller is the user, or holds `User.Modify` or `Sys.Audit` on
/// `/access/groups` (the `userid-group` check for a user in no group).
pub(crate) fn read_user(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    if ctx.who().userid != userid {
        ctx.require_any("/access/groups", &["User.Modify", "Sys.Audit"])?;
    }
    let st = ctx.state();
    let (known, tokens) = known_users(&ctx.shared.config, &st.users);
    if !known.contains(&userid) {
        return Err(ApiError::fail(format!("no such user ('{userid}')")));
    }
    let mut token_map = serde_json::Map::new();
    for t in tokens.get(&userid).into_iter().flatten() {
        let mut row = token_row(t);
        let name = row["tokenid"].as_str().unwrap_or_default().to_owned();
        if let Some(obj) = row.as_object_mut() {
            obj.remove("tokenid");
        }
        token_map.insert(name, row);
    }
    let account = st.users.get(&userid).cloned().unwrap_or(UserAccount {
        enable: true,
        ..Default::default()
    });
    let mut out = user_fields(&account);
    out["groups"] = json!(groups_of(&st, &userid));
    out["tokens"] = Value::Object(token_map);
    Ok(out)
}

/// The realm of `user@realm`.
fn realm_of(userid: &str) -> &str {
    userid.rsplit_once('@').map_or("", |(_, r)| r)
}

/// The permissions of a user write (`userid-param` `Realm.AllocateUser` on the user's realm and
/// `userid-group` `User.Modify` on `/access/groups` for a user in no group).
fn may_manage(ctx: &Ctx, userid: &str) -> Result<(), ApiError> {
    ctx.require(
        &format!("/access/realm/{}", realm_of(userid)),
        "Realm.AllocateUser",
    )?;
    ctx.require("/access/groups", "User.Modify")
}

/// The optional settings a create or update takes.
fn apply_fields(ctx: &Ctx, u: &mut UserAccount) {
    if let Some(e) = ctx.flag("enable") {
        u.enable = e;
    }
    if let Some(x) = ctx.int("expire") {
        u.expire = u64::try_from(x).unwrap_or(0);
    }
    for (key, slot) in [
        ("firstname", &mut u.firstname),
        ("lastname", &mut u.lastname),
        ("email", &mut u.email),
        ("comment", &mut u.comment),
        ("keys", &mut u.keys),
    ] {
        if let Some(v) = ctx.p(key) {
            *slot = Some(v.to_owned());
        }
    }
}

/// The groups listing a user, sorted.
pub(crate) fn groups_of(st: &crate::state::State, userid: &str) -> Vec<String> {
    st.groups
        .iter()
        .filter(|(_, g)| g.users.contains(userid))
        .map(|(id, _)| id.clone())
        .collect()
}

/// `User.pm`'s group handling of a create or update: without `append`, a `groups` given
/// replaces the user's groups (`delete_user_group`); each group named must exist ("no such
/// group"), and the user joins it (`add_user_group`). The groups are checked before any
/// changes, as PVE's failed request writes nothing.
fn set_groups(
    ctx: &Ctx,
    st: &mut crate::state::State,
    userid: &str,
    append: bool,
) -> Result<(), String> {
    let Some(list) = ctx.p("groups") else {
        return Ok(());
    };
    let list = split_list(list);
    if let Some(g) = list.iter().find(|g| !st.groups.contains_key(*g)) {
        return Err(format!("no such group '{g}'"));
    }
    if !append {
        for g in st.groups.values_mut() {
            g.users.remove(userid);
        }
    }
    for g in list {
        if let Some(group) = st.groups.get_mut(&g) {
            group.users.insert(userid.to_owned());
        }
    }
    Ok(())
}

/// `POST /access/users` (`User.pm` `create_user`): "create user failed: user 'x' already exists".
pub(crate) fn create_user(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    may_manage(ctx, &userid)?;
    let failed = |m: String| ApiError::fail(format!("create user failed: {m}"));
    let mut st = ctx.state();
    let (known, _) = known_users(&ctx.shared.config, &st.users);
    if known.contains(&userid) {
        return Err(failed(format!("user '{userid}' already exists")));
    }
    set_groups(ctx, &mut st, &userid, true).map_err(failed)?;
    let mut account = UserAccount {
        enable: true,
        password_sha256: ctx.p("password").map(UserAccount::hash),
        ..Default::default()
    };
    apply_fields(ctx, &mut account);
    st.users.insert(userid, account);
    Ok(Value::Null)
}

/// `PUT /access/users/{userid}` (`update_user`).
pub(crate) fn update_user(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    ctx.require("/access/groups", "User.Modify")?;
    let failed = |m: String| ApiError::fail(format!("update user failed: {m}"));
    let mut st = ctx.state();
    let (known, _) = known_users(&ctx.shared.config, &st.users);
    if !known.contains(&userid) {
        return Err(failed(format!("no such user ('{userid}')")));
    }
    let append = ctx.flag("append").unwrap_or(false);
    set_groups(ctx, &mut st, &userid, append).map_err(failed)?;
    let mut account = st.users.get(&userid).cloned().unwrap_or(UserAccount {
        enable: true,
        ..Default::default()
    });
    apply_fields(ctx, &mut account);
    st.users.insert(userid, account);
    Ok(Value::Null)
}

/// `DELETE /access/users/{userid}` (`delete_user`): the user and its ACL entries go (PVE does
/// not check that it existed).
pub(crate) fn delete_user(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    may_manage(ctx, &userid)?;
    let mut st = ctx.state();
    st.users.remove(&userid);
    st.acl.retain(|e| e.principal != userid);
    // `delete_user_group`.
    for g in st.groups.values_mut() {
        g.users.remove(&userid);
    }
    Ok(Value::Null)
}

/// `PUT /access/password` (`AccessControl.pm` `change_password`): a user changes their own,
/// root@pam anyone's; another user needs `Realm.AllocateUser` and `User.Modify`, and never
/// changes root@pam's or a `pam` user's. Tokens may not call it (`allowtoken => 0`).
pub(crate) fn change_password(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    let password = ctx.req("password")?;
    let who = ctx.who();
    if who.tokenid.is_some() {
        return Err(ApiError::Status(
            403,
            "Permission check failed (user != root@pam)".into(),
        ));
    }
    if !who.is_root() && who.userid != userid {
        may_manage(ctx, &userid)?;
        if userid == "root@pam" || realm_of(&userid) == "pam" {
            return Err(ApiError::Status(403, "Permission check failed".into()));
        }
    }
    let mut st = ctx.state();
    let (known, _) = known_users(&ctx.shared.config, &st.users);
    if !known.contains(&userid) {
        return Err(ApiError::fail(format!("no such user ('{userid}')")));
    }
    let account = st.users.entry(userid).or_insert(UserAccount {
        enable: true,
        ..Default::default()
    });
    account.password_sha256 = Some(UserAccount::hash(&password));
    Ok(Value::Null)
}
