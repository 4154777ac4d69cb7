//! Authentication and authorization as PVE does them: API tokens in the `Authorization` header,
//! tickets from `POST /access/ticket` in the `PVEAuthCookie` cookie with the
//! `CSRFPreventionToken` header on writes, and a simple ACL (principal -> privileges on path
//! prefixes) answering 403 `Permission check failed (PATH, PRIV)`.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::dispatch::percent_decode;
use crate::error::ApiError;
use crate::rng::base64;
use crate::server::Shared;

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
        let known = std::iter::once(&shared.config.token)
            .chain(shared.config.extra_tokens.iter())
            .find(|t| t.id == id);
        return match known {
            None => Err(unauthorized(&format!(
                "no such token '{name}' for user '{user}'"
            ))),
            Some(t) if t.secret != secret => Err(unauthorized("invalid token value!")),
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
    shared
        .config
        .users
        .iter()
        .any(|u| u.userid == username && u.password == password)
}

fn covers(acl_path: &str, path: &str) -> bool {
    acl_path == "/"
        || path == acl_path
        || path
            .strip_prefix(acl_path.trim_end_matches('/'))
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether a principal holds a privilege on a path.
pub(crate) fn allowed(shared: &Shared, who: &Principal, path: &str, privilege: &str) -> bool {
    let cfg = &shared.config;
    // The principal token is a token of root@pam without privilege separation: it holds every
    // privilege (pve-access-control `PVE::RPCEnvironment::permissions` gives such a token its
    // user's), yet it is not root@pam for the root-only checks ([`Principal::is_root`]).
    if who.tokenid.as_deref() == Some(cfg.token.id.as_str()) || who.is_root() {
        return true;
    }
    // A token named in the ACL has its own privileges; otherwise it has its user's.
    let name = match &who.tokenid {
        Some(t) if cfg.acl.iter().any(|e| e.principal == *t) => t.as_str(),
        _ => who.userid.as_str(),
    };
    cfg.acl.iter().any(|e| {
        e.principal == name
            && covers(&e.path, path)
            && e.privs.iter().any(|p| p == "*" || p == privilege)
    })
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
pub(crate) fn privileges_at(shared: &Shared, who: &Principal, path: &str) -> Vec<String> {
    let version = crate::server::lock(&shared.state).pve_version;
    let mut names: Vec<String> = privileges(version)
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    names.extend(
        shared
            .config
            .acl
            .iter()
            .flat_map(|e| e.privs.iter())
            .filter(|p| *p != "*")
            .cloned(),
    );
    names.sort();
    names.dedup();
    names.retain(|p| allowed(shared, who, path, p));
    names
}

/// 403 unless the principal holds one of the privileges: pve-access-control
/// `PVE::RPCEnvironment::check_any`, "Permission check failed (PATH, A|B)".
pub(crate) fn require_any(
    shared: &Shared,
    who: &Principal,
    path: &str,
    privileges: &[&str],
) -> Result<(), ApiError> {
    if privileges.iter().any(|p| allowed(shared, who, path, p)) {
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
    who: &Principal,
    path: &str,
    privilege: &str,
) -> Result<(), ApiError> {
    if allowed(shared, who, path, privilege) {
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
