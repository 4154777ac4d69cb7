//! The access reads: `GET /access/permissions` (the effective privileges of the caller, or of a
//! user or token it may look at, per ACL path, as PVE's `PVE::API2::AccessControl` answers
//! them), users, groups, realms, the ACL and its roles.

use serde_json::{Map, Value};

use super::Ctx;
use crate::auth::{self, Principal};
use crate::error::ApiError;
use crate::state::UserAccount;

/// Paths PVE always dumps when no `path` is given (its default ACL tree), besides the ACL's own.
const TREE: &[&str] = &[
    "/", "/access", "/nodes", "/pool", "/sdn", "/storage", "/vms",
];

/// The principal a `userid` parameter names (`user@realm` or `user@realm!token`).
fn principal_of(userid: &str) -> Principal {
    match userid.split_once('!') {
        Some((user, _)) => Principal {
            userid: user.to_owned(),
            tokenid: Some(userid.to_owned()),
        },
        None => Principal {
            userid: userid.to_owned(),
            tokenid: None,
        },
    }
}

/// `{path: {privilege: 1}}` for one path, or for every path of the tree (those with privileges).
pub(crate) fn permissions(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let caller = ctx.who();
    let who = match ctx.p("userid") {
        None => caller,
        Some(userid) => {
            let target = principal_of(userid);
            // Anyone may look at themselves, and a user at their own tokens.
            let own = match &caller.tokenid {
                Some(token) => target.tokenid.as_deref() == Some(token.as_str()),
                None => target.userid == caller.userid,
            };
            if !own {
                ctx.require("/access", "Sys.Audit")?;
            }
            target
        }
    };
    let shared = ctx.shared.clone();
    // The snapshot of the state, whoever asks (a root caller's request carries none).
    let (access, version) = {
        let st = ctx.state();
        (auth::Access::of(&st), st.pve_version)
    };
    let privileges = |path: &str| -> Map<String, Value> {
        auth::privileges_at(&shared, &access, version, &who, path)
            .into_iter()
            .map(|p| (p, Value::from(1)))
            .collect()
    };
    let mut out = Map::new();
    if let Some(path) = ctx.p("path") {
        out.insert(path.to_owned(), Value::Object(privileges(path)));
        return Ok(Value::Object(out));
    }
    let mut paths: Vec<&str> = TREE.to_vec();
    paths.extend(access.paths());
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        let held = privileges(path);
        if !held.is_empty() {
            out.insert(path.to_owned(), Value::Object(held));
        }
    }
    Ok(Value::Object(out))
}

/// The users PVE would list: `root@pam`, the login users and the owners of the accepted
/// tokens; and each user's tokens.
pub(crate) fn known_users<'c>(
    cfg: &'c crate::SimConfig,
    accounts: &std::collections::BTreeMap<String, UserAccount>,
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeMap<String, Vec<&'c crate::ApiToken>>,
) {
    let mut tokens: std::collections::BTreeMap<String, Vec<&'c crate::ApiToken>> =
        Default::default();
    for t in std::iter::once(&cfg.token).chain(&cfg.extra_tokens) {
        if let Some((user, _)) = t.id.split_once('!') {
            tokens.entry(user.to_owned()).or_default().push(t);
        }
    }
    let mut ids: std::collections::BTreeSet<String> = accounts.keys().cloned().collect();
    ids.insert("root@pam".into());
    ids.extend(tokens.keys().cloned());
    (ids, tokens)
}

/// A token as `GET /access/users?full=1` lists it.
pub(crate) fn token_row(t: &crate::ApiToken) -> Value {
    let name = t.id.split_once('!').map_or(t.id.as_str(), |(_, n)| n);
    serde_json::json!({ "tokenid": name, "privsep": u8::from(t.privsep), "expire": 0 })
}

/// `GET /access/users` (pve-access-control `PVE/API2/User.pm` `index`): `root@pam`, the login
/// users and the owners of the accepted tokens, each `enable: 1`; with `full=1` their tokens.
pub(crate) fn users(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let cfg = &ctx.shared.config;
    let (accounts, made, groups) = {
        let st = ctx.state();
        (st.users.clone(), st.tokens.clone(), st.groups.clone())
    };
    let (ids, tokens) = known_users(cfg, &accounts);
    let full = ctx.flag("full").unwrap_or(false);
    let rows = ids
        .into_iter()
        .filter(|id| {
            ctx.allowed(&format!("/access/users/{id}"), "User.Modify")
                || ctx.allowed("/access", "Sys.Audit")
                || *id == ctx.who().userid
        })
        .map(|id| {
            // A token's owner without an account of its own reads as PVE's defaults.
            let account = accounts.get(&id).cloned().unwrap_or(UserAccount {
                enable: true,
                ..Default::default()
            });
            let mut row = super::access_write::user_fields(&account);
            row["userid"] = Value::from(id.clone());
            if full {
                // Its groups, comma-separated (`$extract_user_data` with `full`).
                let mine: Vec<&str> = groups
                    .iter()
                    .filter(|(_, g)| g.users.contains(&id))
                    .map(|(g, _)| g.as_str())
                    .collect();
                row["groups"] = Value::from(mine.join(","));
                let prefix = format!("{id}!");
                let mut list: Vec<Value> = tokens
                    .get(&id)
                    .into_iter()
                    .flatten()
                    .map(|t| token_row(t))
                    .collect();
                // Tokens made through the API (`/access/users/{userid}/token/{tokenid}`).
                list.extend(made.iter().filter_map(|(full, t)| {
                    let name = full.strip_prefix(&prefix)?;
                    let mut row = serde_json::json!({
                        "tokenid": name,
                        "privsep": u8::from(t.privsep),
                        "expire": t.expire,
                    });
                    if let Some(c) = &t.comment {
                        row["comment"] = c.clone().into();
                    }
                    Some(row)
                }));
                row["tokens"] = Value::Array(list);
            }
            row
        })
        .collect();
    Ok(Value::Array(rows))
}

/// `GET /access/groups` (pve-access-control `src/PVE/API2/Group.pm` `index`): the groups the
/// caller holds `User.Modify`, `Sys.Audit` or `Group.Allocate` on (`/access/groups/<group>`),
/// each with its members comma-separated (`users`, empty for none) and its comment.
pub(crate) fn groups(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let groups = ctx.state().groups.clone();
    let privs = ["User.Modify", "Sys.Audit", "Group.Allocate"];
    Ok(Value::Array(
        groups
            .iter()
            .filter(|(id, _)| {
                let path = format!("/access/groups/{id}");
                privs.iter().any(|p| ctx.allowed(&path, p))
            })
            .map(|(id, g)| {
                let users: Vec<&str> = g.users.iter().map(String::as_str).collect();
                let mut row = serde_json::json!({ "groupid": id, "users": users.join(",") });
                if let Some(c) = &g.comment {
                    row["comment"] = c.clone().into();
                }
                row
            })
            .collect(),
    ))
}

/// `GET /access/domains` (`PVE/API2/Domains.pm`): the two realms every PVE has.
pub(crate) fn domains(_ctx: &mut Ctx) -> Result<Value, ApiError> {
    Ok(serde_json::json!([
        { "realm": "pam", "type": "pam", "comment": "Linux PAM standard authentication" },
        { "realm": "pve", "type": "pve", "comment": "Proxmox VE authentication server" },
    ]))
}

/// The role of a grant: `Administrator` for every privilege, else the custom role holding
/// exactly its privileges (the simulator grants privilege lists; PVE grants roles, so each
/// distinct list is served as a role of its own, named after its content).
fn role_of(privs: &[String], version: crate::version::PveVersion) -> (String, Vec<String>) {
    if let Some(custom) = crate::roles::custom_of(privs) {
        return (custom.to_owned(), Vec::new());
    }
    if privs.iter().any(|p| p == "*") {
        let all = auth::privileges(version)
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        return ("Administrator".to_owned(), all);
    }
    let mut sorted = privs.to_vec();
    sorted.sort();
    sorted.dedup();
    if let Some(id) = crate::roles::named(version, &sorted) {
        return (id.to_owned(), sorted);
    }
    let id = format!(
        "SimRole-{:08x}",
        crate::rng::fnv1a(&sorted.join(",")) as u32
    );
    (id, sorted)
}

/// `GET /access/acl` (pve-access-control `PVE/API2/ACL.pm` `read_acl`): every grant, as PVE
/// lists them, restricted to the paths where the caller may modify permissions unless it
/// holds `Sys.Audit` on `/access`.
pub(crate) fn acl(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let audit = ctx.allowed("/access", "Sys.Audit");
    let version = ctx.state().pve_version;
    let (acl, custom) = {
        let st = ctx.state();
        (st.acl.clone(), st.roles.clone())
    };
    let rows = acl
        .iter()
        .filter(|e| audit || ctx.allowed(&e.path, "Permissions.Modify"))
        // A grant of a deleted role is ignored, as PVE ignores its line in user.cfg.
        .filter(|e| crate::roles::custom_of(&e.privs).is_none_or(|r| custom.contains_key(r)))
        .map(|e| {
            let (kind, ugid) = if let Some(group) = e.principal.strip_prefix('@') {
                ("group", group)
            } else if e.principal.contains('!') {
                ("token", e.principal.as_str())
            } else {
                ("user", e.principal.as_str())
            };
            serde_json::json!({
                "path": e.path,
                "type": kind,
                "ugid": ugid,
                "roleid": role_of(&e.privs, version).0,
                "propagate": u8::from(e.propagate),
            })
        })
        .collect();
    Ok(Value::Array(rows))
}

/// `GET /access/roles` (`PVE/API2/Role.pm` `index`): the release's built-in roles
/// ([`crate::roles`]), the roles made through the API, and the role of each other distinct grant (see [`role_of`]), with their
/// privileges comma-separated as PVE lists them.
pub(crate) fn roles(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let mut roles: std::collections::BTreeMap<String, (Vec<String>, bool)> = Default::default();
    let version = ctx.state().pve_version;
    for (id, privs) in crate::roles::builtin(version) {
        roles.insert(id.to_owned(), (privs, true));
    }
    let (acl, custom) = {
        let st = ctx.state();
        (st.acl.clone(), st.roles.clone())
    };
    // The roles made through the API (`POST /access/roles`).
    for (id, privs) in &custom {
        roles.insert(id.clone(), (privs.iter().cloned().collect(), false));
    }
    for e in &acl {
        if crate::roles::custom_of(&e.privs).is_some() {
            continue;
        }
        let (id, privs) = role_of(&e.privs, version);
        roles.entry(id).or_insert((privs, false));
    }
    Ok(Value::Array(
        roles
            .into_iter()
            .map(|(id, (privs, special))| {
                serde_json::json!({ "roleid": id, "privs": privs.join(","), "special": u8::from(special) })
            })
            .collect(),
    ))
}
