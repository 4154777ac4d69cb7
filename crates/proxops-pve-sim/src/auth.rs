//! Authentication and authorization as PVE does them: API tokens in the `Authorization` header,
//! tickets from `POST /access/ticket` in the `PVEAuthCookie` cookie with the
//! `CSRFPreventionToken` header on writes, and an ACL (principal -> privileges on a path and
//! below, and through pools on their members; privilege-separated tokens intersected with their
//! user) answering 403 `Permission check failed (PATH, PRIV)`.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::AclEntry;
use crate::dispatch::percent_decode;
use crate::error::ApiError;
use crate::rng::base64;
use crate::server::{Shared, lock};
use crate::state::State;
use std::collections::BTreeMap;

/// Ticket lifetime (PVE: two hours).
const TICKET_LIFETIME: u64 = 7200;

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `user@realm`.
    pub userid: String,
    /// `user@realm!tokenid` for token auth.
    pub tokenid: Option<String>,
}

impl Principal {
    /// The user as task UPIDs record it (`root@pam!ci` for a token).
    pub fn task_user(&self) -> String {
        self.tokenid.clone().unwrap_or_else(|| self.userid.clone())
    }

    /// Whether the checks reserved to `root@pam` pass: only for the user itself, never for a
    /// token, not even `root@pam!name` (pve-manager `PVE/HTTPServer.pm` `auth_handler` makes the
    /// token id the request's user, and qemu-server and pve-container compare
    /// `$authuser eq 'root@pam'`).
    pub fn is_root(&self) -> bool {
        self.tokenid.is_none() && self.userid == "root@pam"
    }
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn sign(shared: &Shared, what: &str) -> String {
    let mut h = Sha256::new();
    h.update(&shared.ticket_secret);
    h.update(what.as_bytes());
    base64(&h.finalize())
}

/// A fresh ticket and CSRF token for a user.
pub(crate) fn issue_ticket(shared: &Shared, userid: &str) -> (String, String) {
    let stamp = format!("{:08X}", now());
    let plain = format!("PVE:{userid}:{stamp}");
    let ticket = format!("{plain}::{}", sign(shared, &plain));
    let csrf = format!(
        "{stamp}:{}",
        sign(shared, &format!("CSRF:{userid}:{stamp}"))
    );
    (ticket, csrf)
}

fn verify_ticket(shared: &Shared, ticket: &str) -> Option<(String, String)> {
    let (plain, sig) = ticket.split_once("::")?;
    let mut parts = plain.splitn(3, ':');
    let (tag, userid, stamp) = (parts.next()?, parts.next()?, parts.next()?);
    let issued = u64::from_str_radix(stamp, 16).ok()?;
    let fresh = issued <= now() + 300 && now() <= issued + TICKET_LIFETIME;
    (tag == "PVE" && fresh && sign(shared, plain) == sig)
        .then(|| (userid.to_string(), stamp.to_string()))
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == name).then(|| percent_decode(v, false))
        })
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::Status(401, msg.into())
}

/// Authenticates a request by token or ticket.
pub(crate) fn authenticate(
    shared: &Shared,
    method: &str,
    headers: &HeaderMap,
    upload: bool,
) -> Result<Principal, ApiError> {
    if let Some(value) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let rest = value
            .trim()
            .strip_prefix("PVEAPIToken")
            .ok_or_else(|| unauthorized("authentication failure"))?;
        let rest = rest
            .strip_prefix(['=', ' '])
            .ok_or_else(|| unauthorized("authentication failure"))?;
        let (id, secret) = rest
            .trim()
            .split_once('=')
            .ok_or_else(|| unauthorized("authentication failure"))?;
        let (user, name) = id
            .split_once('!')
            .ok_or_else(|| unauthorized("authentication failure"))?;
        let configured = std::iter::once(&shared.config.token)
            .chain(shared.config.extra_tokens.iter())
            .find(|t| t.id == id)
            .map(|t| (t.secret.clone(), 0));
        // Tokens made through the API (pve-access-control `AccessControl.pm` `verify_token`:
        // existence, expiry, then the value).
        let known = configured.or_else(|| {
            lock(&shared.state)
                .tokens
                .get(id)
                .map(|t| (t.secret.clone(), t.expire))
        });
        return match known {
            None => Err(unauthorized(&format!(
                "no such token '{name}' for user '{user}'"
            ))),
            Some((_, expire)) if expire != 0 && expire < now() => {
                Err(unauthorized(&format!("token '{name}' access expired")))
            }
            Some((known, _)) if known != secret => Err(unauthorized("invalid token value!")),
            Some(_) => Ok(Principal {
                userid: user.to_string(),
                tokenid: Some(id.to_string()),
            }),
        };
    }
    let Some(ticket) = cookie(headers, "PVEAuthCookie") else {
        return Err(unauthorized("No ticket"));
    };
    let Some((userid, stamp)) = verify_ticket(shared, &ticket) else {
        return Err(unauthorized("permission denied - invalid PVE ticket"));
    };
    if method != "GET" && !upload {
        let csrf = headers
            .get("CSRFPreventionToken")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let want = format!(
            "{stamp}:{}",
            sign(shared, &format!("CSRF:{userid}:{stamp}"))
        );
        if csrf != want {
            return Err(unauthorized("Permission denied - invalid csrf token"));
        }
    }
    Ok(Principal {
        userid,
        tokenid: None,
    })
}

/// Checks a password login (`POST /access/ticket`).
pub(crate) fn login(shared: &Shared, username: &str, password: &str) -> bool {
    let st = crate::server::lock(&shared.state);
    st.users.get(username).is_some_and(|u| {
        u.enable && u.password_sha256.as_deref() == Some(&crate::state::UserAccount::hash(password))
    })
}

fn covers(acl_path: &str, path: &str) -> bool {
    acl_path == "/"
        || path == acl_path
        || path
            .strip_prefix(acl_path.trim_end_matches('/'))
            .is_some_and(|rest| rest.starts_with('/'))
}

/// What a request's permission checks read, taken when the request starts, as
/// pve-access-control's `PVE::RPCEnvironment` reads `user.cfg` in `init_request`: the ACL and
/// the pool each guest and storage belongs to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access {
    acl: Vec<AclEntry>,
    /// The privilege separation of the tokens made through the API.
    token_privsep: BTreeMap<String, bool>,
    /// `/vms/N` and `/storage/S` -> the pools holding them.
    pools: BTreeMap<String, Vec<String>>,
    /// A user's groups, as ACL principals (`@group`).
    groups: BTreeMap<String, Vec<String>>,
}

impl Access {
    /// The snapshot of `st`.
    pub(crate) fn of(st: &State) -> Access {
        let mut pools: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for g in st.guests.values() {
            if let Some(p) = &g.pool {
                pools
                    .entry(format!("/vms/{}", g.vmid))
                    .or_default()
                    .push(p.clone());
            }
        }
        for (poolid, pool) in &st.pools {
            for sid in &pool.storage {
                pools
                    .entry(format!("/storage/{sid}"))
                    .or_default()
                    .push(poolid.clone());
            }
        }
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, g) in &st.groups {
            for user in &g.users {
                groups
                    .entry(user.clone())
                    .or_default()
                    .push(format!("@{id}"));
            }
        }
        // Custom roles grant their privileges of now.
        let acl = st
            .acl
            .iter()
            .map(|e| AclEntry {
                privs: crate::roles::expand(&st.roles, &e.privs),
                ..e.clone()
            })
            .collect();
        Access {
            groups,
            acl,
            token_privsep: st
                .tokens
                .iter()
                .map(|(id, t)| (id.clone(), t.privsep))
                .collect(),
            pools,
        }
    }

    /// The ACL paths with a grant.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &str> {
        self.acl.iter().map(|e| e.path.as_str())
    }

    /// Privilege names any grant lists.
    fn granted_names(&self) -> impl Iterator<Item = &String> {
        self.acl.iter().flat_map(|e| e.privs.iter())
    }

    /// Whether ACL entries of `principal` grant `privilege` on `path`: on it or (propagating)
    /// on a path above, or on a pool holding it (pve-access-control
    /// `RPCEnvironment.pm` `$compile_acl_path`: pool roles apply to the pool's guests and
    /// storages).
    fn grants(&self, principal: &str, path: &str, privilege: &str) -> bool {
        // A user holds what its groups are granted too (a token only its own grants).
        let groups = self.groups.get(principal).map_or(&[][..], Vec::as_slice);
        let on = |p: &str| {
            self.acl.iter().any(|e| {
                (e.principal == principal || groups.contains(&e.principal))
                    && covers(&e.path, p)
                    && (e.propagate || e.path == p)
                    && e.privs.iter().any(|x| x == "*" || x == privilege)
            })
        };
        on(path)
            || self
                .pools
                .get(path)
                .is_some_and(|pools| pools.iter().any(|pool| on(&format!("/pool/{pool}"))))
    }
}

/// Whether a principal holds a privilege on a path (pve-access-control
/// `PVE::RPCEnvironment::permissions`).
pub(crate) fn allowed(
    shared: &Shared,
    access: &Access,
    who: &Principal,
    path: &str,
    privilege: &str,
) -> bool {
    let cfg = &shared.config;
    // The principal token is a token of root@pam without privilege separation: it holds every
    // privilege, yet it is not root@pam for the root-only checks ([`Principal::is_root`]).
    if who.tokenid.as_deref() == Some(cfg.token.id.as_str()) || who.is_root() {
        return true;
    }
    let Some(tokenid) = &who.tokenid else {
        return access.grants(&who.userid, path, privilege);
    };
    let privsep = match cfg.extra_tokens.iter().find(|t| t.id == *tokenid) {
        Some(token) => token.privsep,
        None => match access.token_privsep.get(tokenid) {
            Some(privsep) => *privsep,
            None => return false,
        },
    };
    let user_holds = who.userid == "root@pam" || access.grants(&who.userid, path, privilege);
    // A privilege-separated token holds what is granted to it and its user alike (root@pam's
    // tokens: what is granted to them); one without separation holds its user's.
    if privsep {
        user_holds && access.grants(tokenid, path, privilege)
    } else {
        user_holds
    }
}

/// Every privilege of PVE 8.4 (`pveum role list`'s Administrator role); 9.1 differs by
/// [`privileges`].
pub(crate) const PRIVILEGES: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "Group.Allocate",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "SDN.Allocate",
    "SDN.Audit",
    "SDN.Use",
    "Sys.AccessNetwork",
    "Sys.Audit",
    "Sys.Console",
    "Sys.Incoming",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "User.Modify",
    "VM.Allocate",
    "VM.Audit",
    "VM.Backup",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Cloudinit",
    "VM.Config.Disk",
    "VM.Config.HWType",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Console",
    "VM.Migrate",
    "VM.Monitor",
    "VM.PowerMgmt",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];

/// Every privilege of `version`: pve-access-control `src/PVE/AccessControl.pm` `$privgroups`.
/// PVE 9 replaced `VM.Monitor` by the `VM.GuestAgent.*` privileges and added `VM.Replicate`.
pub(crate) fn privileges(version: crate::version::PveVersion) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = PRIVILEGES.to_vec();
    if version >= crate::version::PveVersion::V9_1 {
        out.retain(|p| *p != "VM.Monitor");
        out.extend([
            "VM.GuestAgent.Audit",
            "VM.GuestAgent.FileRead",
            "VM.GuestAgent.FileSystemMgmt",
            "VM.GuestAgent.FileWrite",
            "VM.GuestAgent.Unrestricted",
            "VM.Replicate",
        ]);
        out.sort_unstable();
    }
    out
}

/// The privileges a principal holds on a path (what `GET /access/permissions` reports), in name
/// order: the release's list, plus any other name an ACL entry grants there.
pub(crate) fn privileges_at(
    shared: &Shared,
    access: &Access,
    version: crate::version::PveVersion,
    who: &Principal,
    path: &str,
) -> Vec<String> {
    let mut names: Vec<String> = privileges(version)
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    names.extend(access.granted_names().filter(|p| *p != "*").cloned());
    names.sort();
    names.dedup();
    names.retain(|p| allowed(shared, access, who, path, p));
    names
}

/// The capabilities a ticket carries (pve-access-control `RPCEnvironment.pm`
/// `compute_api_permission`): for each top-level area, the privileges of that area the user
/// holds on its root paths or any ACL path below; a pool's `VM.*` and `Datastore.*` count for
/// `vms` and `storage`.
pub(crate) fn capabilities(
    shared: &Shared,
    access: &Access,
    version: crate::version::PveVersion,
    who: &Principal,
) -> serde_json::Value {
    let areas: [(&str, &[&str]); 7] = [
        ("vms", &["VM.", "Permissions.Modify"]),
        ("access", &["User.", "Group.", "Permissions.Modify"]),
        ("storage", &["Datastore.", "Permissions.Modify"]),
        ("nodes", &["Sys.", "Permissions.Modify"]),
        ("sdn", &["SDN.", "Permissions.Modify"]),
        ("dc", &["Sys.Audit", "Sys.Modify", "SDN."]),
        ("mapping", &["Mapping.", "Permissions.Modify"]),
    ];
    let mut cap: BTreeMap<&str, BTreeMap<String, u8>> =
        areas.iter().map(|(a, _)| (*a, BTreeMap::new())).collect();
    let mut paths: Vec<String> = [
        "/",
        "/nodes",
        "/access/groups",
        "/vms",
        "/storage",
        "/sdn",
        "/mapping",
    ]
    .iter()
    .map(|p| (*p).to_owned())
    .collect();
    paths.extend(access.paths().map(str::to_owned));
    paths.sort();
    paths.dedup();
    for path in &paths {
        let held = privileges_at(shared, access, version, who, path);
        let top = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .filter(|t| !t.is_empty())
            .unwrap_or("dc");
        for p in held {
            let into: &[&str] = if top == "pool" {
                if p.starts_with("VM.") {
                    &["vms"]
                } else if p.starts_with("Datastore.") {
                    &["storage"]
                } else if p == "Permissions.Modify" {
                    &["storage", "vms"]
                } else {
                    &[]
                }
            } else {
                match areas.iter().find(|(a, _)| *a == top) {
                    Some((a, prefixes)) if prefixes.iter().any(|x| p.starts_with(x)) => {
                        std::slice::from_ref(a)
                    }
                    _ => &[],
                }
            };
            for area in into {
                if let Some(m) = cap.get_mut(area) {
                    m.insert(p.clone(), 1);
                }
            }
        }
    }
    serde_json::json!(cap)
}

/// 403 unless the principal holds one of the privileges: pve-access-control
/// `PVE::RPCEnvironment::check_any`, "Permission check failed (PATH, A|B)".
pub(crate) fn require_any(
    shared: &Shared,
    access: &Access,
    who: &Principal,
    path: &str,
    privileges: &[&str],
) -> Result<(), ApiError> {
    if privileges
        .iter()
        .any(|p| allowed(shared, access, who, path, p))
    {
        Ok(())
    } else {
        Err(ApiError::Status(
            403,
            format!("Permission check failed ({path}, {})", privileges.join("|")),
        ))
    }
}

/// 403 unless the principal holds the privilege.
pub(crate) fn require(
    shared: &Shared,
    access: &Access,
    who: &Principal,
    path: &str,
    privilege: &str,
) -> Result<(), ApiError> {
    if allowed(shared, access, who, path, privilege) {
        Ok(())
    } else {
        Err(ApiError::Status(
            403,
            format!("Permission check failed ({path}, {privilege})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::privileges;
    use crate::version::PveVersion;

    #[test]
    fn each_release_has_its_own_privileges() {
        let v8 = privileges(PveVersion::V8_4);
        let v9 = privileges(PveVersion::V9_1);
        assert!(v8.contains(&"VM.Monitor") && !v8.contains(&"VM.GuestAgent.Audit"));
        assert!(!v9.contains(&"VM.Monitor"));
        for p in [
            "VM.GuestAgent.Audit",
            "VM.GuestAgent.Unrestricted",
            "VM.Replicate",
        ] {
            assert!(v9.contains(&p), "{p}");
        }
        assert!(v9.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    }
}
