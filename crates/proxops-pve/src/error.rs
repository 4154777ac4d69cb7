//! One error type, [`PveError`], classified by [`PveError::class`] into retryable and permanent
//! failures ([`ErrorClass`]), with a finer [`ErrorKind`]. Only retryable errors are retried.
//!
//! PVE answers most refusals with HTTP 500 and the text in the reason phrase (and, since
//! libpve-http-server-perl 5.2.0, in a JSON `message`). A 500 is retryable unless its text is one
//! of PVE's deterministic refusals (`already exists`, `does not exist`, `is running`, ...): trying
//! those again cannot succeed and would only delay the report.

use std::collections::BTreeMap;
use std::time::Duration;

/// Whether trying again can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// A transient condition: locks, server or proxy errors, resets, timeouts.
    Retryable,
    /// Trying again gives the same answer.
    Permanent,
}

/// What kind of failure an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `VM is locked (...)`, `CT is locked (...)`, `can't lock file ... - got timeout`.
    Locked,
    /// A 5xx that is not a known refusal.
    Server,
    /// 595/596: pveproxy could not reach, or timed out talking to, another node.
    Proxy,
    /// The connection failed or was reset.
    Connection,
    /// The request timed out.
    Timeout,
    /// 400: parameter verification failed ([`ApiFailure::errors`] has the per-parameter texts).
    BadRequest,
    /// 401: bad credentials or ticket.
    Unauthorized,
    /// 403: a privilege is missing ([`PveError::missing_privilege`]).
    Forbidden,
    /// 404.
    NotFound,
    /// 501: the method and path are not implemented (unknown path or older PVE).
    NotImplemented,
    /// A 5xx that PVE uses for a deterministic refusal (exists, missing, running, not allowed).
    Refused,
    /// Any other HTTP status.
    OtherStatus,
    /// The server certificate was refused.
    Tls,
    /// The response was not what the endpoint returns.
    Decode,
    /// The client was configured wrongly, or an input (UPID, property string) is invalid.
    Invalid,
    /// A write whose answer was lost and whose outcome reading the guest back could not settle.
    Unsettled,
    /// A task ended with an error.
    TaskFailed,
    /// A task did not end within the wait's timeout.
    TaskTimeout,
}

impl ErrorKind {
    /// The class of this kind.
    pub fn class(self) -> ErrorClass {
        match self {
            ErrorKind::Locked
            | ErrorKind::Server
            | ErrorKind::Proxy
            | ErrorKind::Connection
            | ErrorKind::Timeout => ErrorClass::Retryable,
            _ => ErrorClass::Permanent,
        }
    }
}

/// An HTTP error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The concrete path below `/api2/json`.
    pub path: String,
    /// HTTP status.
    pub status: u16,
    /// The message: JSON `message`, else the reason phrase (trimmed).
    pub message: String,
    /// Per-parameter messages of a 400, by parameter name.
    pub errors: BTreeMap<String, String>,
    /// The classification.
    pub kind: ErrorKind,
}

/// A failure of the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PveError {
    /// The API answered with an error status.
    #[error("{} {}: HTTP {} {}{}", .0.method, .0.path, .0.status, .0.message, param_list(&.0.errors))]
    Api(Box<ApiFailure>),
    /// The request did not get an answer (connection, TLS, timeout).
    #[error("{method} {path}: {detail}")]
    Transport {
        /// `GET`, `POST`, ...
        method: String,
        /// The concrete path.
        path: String,
        /// [`ErrorKind::Connection`], [`ErrorKind::Timeout`] or [`ErrorKind::Tls`].
        kind: ErrorKind,
        /// What failed, from the error chain.
        detail: String,
    },
    /// The response body did not decode as the endpoint's type.
    #[error("{method} {path}: unexpected response: {detail}")]
    Decode {
        /// `GET`, `POST`, ...
        method: String,
        /// The concrete path.
        path: String,
        /// What did not decode.
        detail: String,
    },
    /// Invalid configuration or input.
    #[error("{0}")]
    Config(String),
    /// A write whose answer was lost ([`PveError::outcome_unknown`]) and whose outcome reading
    /// the guest back did not settle (the guest holds what neither it held nor the write set,
    /// or nothing settled within the bounded re-reads): not written again.
    #[error("{method} {path}: {detail}")]
    Unsettled {
        /// `PUT`, `POST`.
        method: String,
        /// The concrete path.
        path: String,
        /// What was found, and the failure that lost the answer.
        detail: String,
    },
    /// A task ended with an error exit status.
    #[error("task {upid} failed: {exitstatus}{}", task_detail(.exitstatus, .log_tail))]
    TaskFailed {
        /// The task's UPID.
        upid: String,
        /// Its exit status (the error text).
        exitstatus: String,
        /// The last lines of its log.
        log_tail: Vec<String>,
    },
    /// A task was still running when the wait gave up.
    #[error("task {upid} still running after {waited:?}")]
    TaskTimeout {
        /// The task's UPID.
        upid: String,
        /// How long the wait lasted.
        waited: Duration,
    },
    /// An HA request (`hastart`/`hastop`) was queued, but the guest did not reach the state
    /// within the wait's timeout.
    #[error("guest {vmid} still {status} after {waited:?} (HA request for {want})")]
    HaStateTimeout {
        /// The guest.
        vmid: u32,
        /// The status asked for (`running`, `stopped`).
        want: String,
        /// The status last seen.
        status: String,
        /// How long the wait lasted.
        waited: Duration,
    },
}

fn param_list(errors: &BTreeMap<String, String>) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = errors
        .iter()
        .map(|(k, v)| format!("{k}: {}", v.trim_end()))
        .collect();
    format!(" ({})", parts.join("; "))
}

impl PveError {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PveError::Api(f) => f.kind,
            PveError::Transport { kind, .. } => *kind,
            PveError::Decode { .. } => ErrorKind::Decode,
            PveError::Config(_) => ErrorKind::Invalid,
            PveError::Unsettled { .. } => ErrorKind::Unsettled,
            PveError::TaskFailed {
                exitstatus,
                log_tail,
                ..
            } => {
                // A worker that could not take the guest's lock failed for a transient reason,
                // whether it said so in its status or (a migration) only in its log.
                if is_lock_message(exitstatus)
                    || is_lock_message(&task_detail(exitstatus, log_tail))
                {
                    ErrorKind::Locked
                } else {
                    ErrorKind::TaskFailed
                }
            }
            PveError::TaskTimeout { .. } | PveError::HaStateTimeout { .. } => {
                ErrorKind::TaskTimeout
            }
        }
    }

    /// Retryable or permanent.
    pub fn class(&self) -> ErrorClass {
        self.kind().class()
    }

    /// Whether trying again can help.
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Retryable
    }

    /// Whether a write that failed so may have been carried out all the same: pveproxy's 595/596
    /// (596 `Connection timed out` is its 30 s limit on a proxied call, pve-http-server
    /// `src/PVE/APIServer/AnyEvent.pm` `proxy_request`, while pvedaemon finishes the request),
    /// a reset connection or a timed-out request. Retrying such a write blindly can do it twice
    /// (a second disk allocated); read the guest back first.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Proxy | ErrorKind::Connection | ErrorKind::Timeout
        )
    }

    /// Whether PVE refused a write because the config changed since the digest it carried was
    /// read (qemu-server `update_vm_api`: `checksum mismatch`; pve-container and qemu's resize:
    /// `PVE::Tools::assert_if_modified`).
    pub fn is_digest_mismatch(&self) -> bool {
        self.api().is_some_and(|f| {
            let m = f.message.to_ascii_lowercase();
            m.contains("checksum mismatch") || m.contains("detected modified configuration")
        })
    }

    /// Whether pveproxy could not even hand the request on (595: AnyEvent::HTTP's "errors during
    /// connection establishment"), so it was not carried out.
    pub fn not_delivered(&self) -> bool {
        self.status() == Some(595)
    }

    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            PveError::Api(f) => Some(f.status),
            _ => None,
        }
    }

    /// The API failure, if this is one.
    pub fn api(&self) -> Option<&ApiFailure> {
        match self {
            PveError::Api(f) => Some(f),
            _ => None,
        }
    }

    /// For a 403 `Permission check failed (/vms/100, VM.Allocate)`: the path and privilege.
    pub fn missing_privilege(&self) -> Option<(String, String)> {
        let f = self.api().filter(|f| f.status == 403)?;
        let inner = f
            .message
            .split_once("Permission check failed (")?
            .1
            .split_once(')')?
            .0;
        let (path, privilege) = inner.rsplit_once(',')?;
        Some((path.trim().to_string(), privilege.trim().to_string()))
    }

    /// The message of an API error, else the error's text.
    pub fn message(&self) -> String {
        match self {
            PveError::Api(f) => f.message.clone(),
            other => other.to_string(),
        }
    }
}

/// Exit statuses that only sum up errors a worker logged: `migration aborted` and `migration
/// problems` (pve-guest-common `PVE/AbstractMigrate.pm` `migrate`), `job errors` (pve-manager
/// `PVE/VZDump.pm` `exec_backup`), and `unexpected status` (a multi-line error, pve-common
/// `upid_read_status`).
const SUMMARY_STATUSES: &[&str] = &[
    "migration aborted",
    "migration problems",
    "job errors",
    "unexpected status",
];

/// What a summary exit status stands for: the log tail's `ERROR:` lines and the refusals a
/// migration logs as warnings (`can't migrate local disk ...`, qemu-server
/// `PVE/QemuMigrate.pm` `scan_local_volumes`), without timestamps, at most the last three, as
/// ` (...)`; empty for any other status.
fn task_detail(exitstatus: &str, log_tail: &[String]) -> String {
    if !SUMMARY_STATUSES.contains(&exitstatus.trim()) {
        return String::new();
    }
    let errors: Vec<&str> = log_tail
        .iter()
        .filter(|l| !l.starts_with("TASK ERROR:"))
        .filter_map(|l| {
            // `2026-12-04 05:00:00 ` as AbstractMigrate stamps its lines.
            let stamped = l.len() > 20
                && l.as_bytes()[4] == b'-'
                && l.as_bytes()[13] == b':'
                && l.as_bytes()[19] == b' ';
            let text = if stamped { &l[20..] } else { l.as_str() };
            match text.split_once("ERROR: ") {
                Some((_, e)) => Some(e.trim()),
                None => text.starts_with("can't ").then_some(text.trim()),
            }
        })
        .filter(|e| !e.is_empty())
        .collect();
    let skip = errors.len().saturating_sub(3);
    if errors.is_empty() {
        return String::new();
    }
    format!(" ({})", errors[skip..].join("; "))
}

/// Whether a message says a guest or its config file is locked.
pub fn is_lock_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains(" is locked") || (m.contains("can't lock file") && m.contains("got timeout"))
}

/// Texts of 5xx answers that are deterministic refusals, not transient failures.
const REFUSALS: &[&str] = &[
    "already exists",
    "does not exist",
    "not exist",
    "is running",
    "not running",
    "not allowed",
    "you can't",
    "no such",
    "not a template",
    "is a template",
    "unable to parse",
    "not supported",
    "shrinking disks is not supported",
    "permission check failed",
    "parameter verification failed",
    // A stale digest: the same request fails again until the caller re-reads the config.
    // pve-container (and qemu's resize) say it through `PVE::Tools::assert_if_modified`;
    // qemu-server's config update (`update_vm_api`) in its own words.
    "detected modified configuration",
    "checksum mismatch (file change by other user?)",
    // pve-container `vm_start` refuses a running CT before forking a worker.
    "already running",
    // qemu-server / pve-container `clone_vm`: a guest on local storage stays on its node.
    "uses local storage)",
    "can't clone",
    // qemu-server `$check_vm_modify_config_perm`, `check_hostpci_perm`, `check_usb_perm` and
    // the serial checks: no privilege grants the key to anyone else.
    "only root can",
    // pve-container `destroy_vm` without `force`: final until the CT is stopped.
    "- container is running",
    // pve-common `validate_ssh_public_keys`, run by qemu-server's create and config update.
    "ssh public key validation error",
    // qemu-server `check_hostpci_perm`/`check_usb_perm`: a device without host or mapping.
    "either 'host' or 'mapping' must be set",
    // qemu-server `PVE::QemuServer::Agent::assert_agent_available`: no `agent` key in the
    // config (its "VM N is not running" and "QEMU guest agent is not running" match above).
    "no qemu guest agent configured",
];

/// Classifies an HTTP error answer.
pub fn classify(status: u16, message: &str) -> ErrorKind {
    if is_lock_message(message) {
        return ErrorKind::Locked;
    }
    match status {
        400 => ErrorKind::BadRequest,
        401 => ErrorKind::Unauthorized,
        403 => ErrorKind::Forbidden,
        404 => ErrorKind::NotFound,
        501 => ErrorKind::NotImplemented,
        595 | 596 => ErrorKind::Proxy,
        500..=599 => {
            let m = message.to_ascii_lowercase();
            if REFUSALS.iter().any(|r| m.contains(r)) {
                ErrorKind::Refused
            } else {
                ErrorKind::Server
            }
        }
        _ => ErrorKind::OtherStatus,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let retry = [
            (500, "VM is locked (backup)"),
            (500, "CT is locked (clone)"),
            (
                500,
                "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
            ),
            (500, "internal error"),
            (502, "Bad Gateway"),
            (503, "Service Unavailable"),
            (595, "Connection refused"),
            (596, "Connection timed out"),
        ];
        for (s, m) in retry {
            assert_eq!(classify(s, m).class(), ErrorClass::Retryable, "{s} {m}");
        }
        let permanent = [
            (400, "Parameter verification failed."),
            (401, "authentication failure"),
            (403, "Permission check failed (/vms/100, VM.Allocate)"),
            (404, "Not Found"),
            (501, "Method 'GET /x' not implemented"),
            (500, "VM 101 is running - destroy failed"),
            (500, "unable to create VM 100: config file already exists"),
            (
                500,
                "Configuration file 'nodes/pve1/qemu-server/9.conf' does not exist",
            ),
            (500, "checksum mismatch (file change by other user?)"),
            (500, "CT 200 already running"),
            (500, "can't clone VM to node 'pve2' (VM uses local storage)"),
            (500, "only root can set 'args' config"),
            (500, "only root can set 'hostpci0' config for real devices"),
            (500, "SSH public key validation error"),
            (500, "unable to destroy CT 200 - container is running"),
            // qemu-server `check_hostpci_perm`, `check_usb_perm`, `update_vm_api`'s serial
            // check; pve-container `check_ct_modify_config_perm` (`raise_perm_exc`, 403).
            (
                500,
                "only root can set 'hostpci0' config for non-mapped devices",
            ),
            (500, "only root can set 'usb0' config for real devices"),
            (
                500,
                "only root can modify 'serial1' config for real devices",
            ),
            (500, "either 'host' or 'mapping' must be set."),
            (500, "No QEMU guest agent configured"),
            (500, "QEMU guest agent is not running"),
            (500, "VM 100 is not running"),
            (
                403,
                "Permission check failed (mount point type bind is only allowed for root@pam)",
            ),
            (
                403,
                "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)",
            ),
            (
                403,
                "Permission check failed (/mapping/pci/hba, Mapping.Use)",
            ),
        ];
        for (s, m) in permanent {
            assert_eq!(classify(s, m).class(), ErrorClass::Permanent, "{s} {m}");
        }
    }

    #[test]
    fn missing_privilege() {
        let e = PveError::Api(Box::new(ApiFailure {
            method: "POST".into(),
            path: "/nodes/pve1/qemu".into(),
            status: 403,
            message: "Permission check failed (/vms/100, VM.Allocate)".into(),
            errors: BTreeMap::new(),
            kind: ErrorKind::Forbidden,
        }));
        assert_eq!(
            e.missing_privilege(),
            Some(("/vms/100".into(), "VM.Allocate".into()))
        );
    }

    #[test]
    fn a_summary_exit_status_shows_what_the_log_says() {
        let failed = |status: &str, log: &[&str]| PveError::TaskFailed {
            upid: "UPID:pve1:1:1:1:qmigrate:101:root@pam:".into(),
            exitstatus: status.into(),
            log_tail: log.iter().map(|l| l.to_string()).collect(),
        };
        let migration = failed(
            "migration aborted",
            &[
                "2026-12-04 05:00:00 starting migration of VM 101 to node 'pve2' (10.0.0.2)",
                "2026-12-04 05:00:00 can't migrate local disk 'local-lvm:vm-101-disk-0': non-migratable snapshot exists",
                "2026-12-04 05:00:00 ERROR: Problem found while scanning volumes - can't migrate VM - check log",
                "TASK ERROR: migration aborted",
            ],
        );
        assert_eq!(
            migration.to_string(),
            "task UPID:pve1:1:1:1:qmigrate:101:root@pam: failed: migration aborted (can't migrate local disk 'local-lvm:vm-101-disk-0': non-migratable snapshot exists; Problem found while scanning volumes - can't migrate VM - check log)"
        );
        assert_eq!(migration.kind(), ErrorKind::TaskFailed);
        // The config lock a migration could not take is transient.
        let locked = failed(
            "migration aborted",
            &[
                "2026-12-04 05:00:10 ERROR: migration aborted (duration 00:00:10): can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout",
            ],
        );
        assert_eq!(locked.kind(), ErrorKind::Locked);
        // Any other status stands alone.
        let plain = failed("unable to create VM", &["ERROR: something"]);
        assert!(plain.to_string().ends_with("failed: unable to create VM"));
    }
}
