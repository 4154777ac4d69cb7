//! `GET /access/permissions`: the effective privileges of the caller (or of a user or token it
//! may look at), per ACL path, as PVE's `PVE::API2::AccessControl` answers them.

use serde_json::{Map, Value};

use super::Ctx;
use crate::auth::{self, Principal};
use crate::error::ApiError;

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
    let privileges = |path: &str| -> Map<String, Value> {
        // The simulator's ACL entries always propagate.
        auth::privileges_at(&shared, &who, path)
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
    paths.extend(shared.config.acl.iter().map(|e| e.path.as_str()));
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
