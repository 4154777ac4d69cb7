//! The writes and single reads of `/access` the simulator serves besides the lists:
//! `PUT /access/acl` (pve-access-control `src/PVE/API2/ACL.pm` `update_acl`) and
//! `GET /access/users/{userid}` (`src/PVE/API2/User.pm` `read_user`).

use serde_json::{Value, json};

use super::Ctx;
use super::access::{known_users, token_row};
use crate::config::AclEntry;
use crate::error::ApiError;
use crate::schema::split_list;

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
    let users = ctx.p("users").map(split_list).unwrap_or_default();
    let tokens = ctx.p("tokens").map(split_list).unwrap_or_default();
    if let Some(groups) = ctx.p("groups").map(split_list)
        && let Some(g) = groups.first()
    {
        // The simulator has no groups (`GET /access/groups` lists none).
        return Err(ApiError::fail(format!(
            "ACL update failed: group '{g}' does not exist"
        )));
    }
    let (known, user_tokens) = known_users(&ctx.shared.config);
    let mut st = ctx.state();
    let version = st.pve_version;
    let builtin = crate::roles::builtin(version);
    let failed = |msg: String| ApiError::fail(format!("ACL update failed: {msg}"));
    let mut acl = st.acl.clone();
    for role in &roles {
        let privs = builtin
            .get(role.as_str())
            .cloned()
            .ok_or_else(|| failed(format!("role '{role}' does not exist")))?;
        let mut principals: Vec<String> = Vec::new();
        for u in &users {
            if !known.contains(u) {
                return Err(failed(format!("user '{u}' does not exist")));
            }
            principals.push(u.clone());
        }
        for t in &tokens {
            let (user, name) = t.split_once('!').unwrap_or((t.as_str(), ""));
            let exists = user_tokens
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

/// `GET /access/users/{userid}`: the user's settings and tokens; `no such user ('x')` for an
/// unknown one. The caller is the user, or holds `User.Modify` or `Sys.Audit` on
/// `/access/groups` (the `userid-group` check for a user in no group).
pub(crate) fn read_user(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let userid = ctx.req("userid")?;
    if ctx.who().userid != userid {
        ctx.require_any("/access/groups", &["User.Modify", "Sys.Audit"])?;
    }
    let (known, tokens) = known_users(&ctx.shared.config);
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
    Ok(json!({ "enable": 1, "expire": 0, "groups": [], "tokens": token_map }))
}
