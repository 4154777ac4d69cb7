//! Why an action failed: [`ActionError`], a [`FailureKind`] the executor tells apart, the
//! message as PVE or the client gave it, and the [`PveError`] behind it.
//!
//! Serialized (in an [`ActionResult`](crate::execute::ActionResult), flattened into
//! `{"outcome": "failed", ...}`) as `"kind"` (kebab-case), `"status"` when PVE answered with an
//! HTTP status, and `"error"`: the same message text as before kinds existed.

use proxops_pve::{ErrorKind, PveError};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// What kind of failure ended an action: what the executor can tell apart from the PVE client's
/// errors.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// PVE answered with an error status that trying again does not change: a 4xx (bad
    /// parameters, bad credentials, a missing privilege, not found), a 501, or one of the 5xx
    /// texts PVE uses for deterministic refusals (`already exists`, `is running`, ...).
    /// [`ActionError::status`] has the status.
    PveRefused,
    /// PVE answered with a 5xx that is not a known refusal (a server failure).
    PveServerError,
    /// The guest or its config file was locked by other work (`VM is locked`, `can't lock
    /// file`), in an answer or in a task's exit status.
    Locked,
    /// A PVE task ended with an error exit status (the message has it).
    TaskFailed,
    /// A task, or the guest state an HA request asks for, did not arrive within the wait.
    Timeout,
    /// PVE or the node did not answer: the connection failed or was reset, the request timed
    /// out, the certificate was refused, or pveproxy could not reach the node (595/596).
    Unreachable,
    /// A config write's answer was lost, and reading the guest back did not settle whether it
    /// landed; it was not written again.
    AnswerLost,
    /// PVE answered something the client could not read as the endpoint's answer (or an
    /// accepted request had none of the effects it should).
    UnexpectedAnswer,
    /// An input the action was built from, or the client's configuration, was invalid (a
    /// UPID, a property string).
    Invalid,
    /// The action's own task ended abnormally (a bug in the engine).
    Internal,
    /// The check after a snapshot-guarded update failed: the guest agent did not answer, or
    /// the guest did not run, within `update-policy.verify.timeout`.
    CheckFailed,
}

impl FailureKind {
    /// The kebab-case name (as serialized): `pve-refused`, `task-failed`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::PveRefused => "pve-refused",
            FailureKind::PveServerError => "pve-server-error",
            FailureKind::Locked => "locked",
            FailureKind::TaskFailed => "task-failed",
            FailureKind::Timeout => "timeout",
            FailureKind::Unreachable => "unreachable",
            FailureKind::AnswerLost => "answer-lost",
            FailureKind::UnexpectedAnswer => "unexpected-answer",
            FailureKind::Invalid => "invalid",
            FailureKind::Internal => "internal",
            FailureKind::CheckFailed => "check-failed",
        }
    }

    /// The kind of a PVE client error.
    pub fn of(error: &PveError) -> FailureKind {
        match error.kind() {
            ErrorKind::Locked => FailureKind::Locked,
            ErrorKind::Server => FailureKind::PveServerError,
            ErrorKind::Proxy | ErrorKind::Connection | ErrorKind::Timeout | ErrorKind::Tls => {
                FailureKind::Unreachable
            }
            ErrorKind::BadRequest
            | ErrorKind::Unauthorized
            | ErrorKind::Forbidden
            | ErrorKind::NotFound
            | ErrorKind::NotImplemented
            | ErrorKind::Refused
            | ErrorKind::OtherStatus => FailureKind::PveRefused,
            ErrorKind::Decode => FailureKind::UnexpectedAnswer,
            ErrorKind::Invalid => FailureKind::Invalid,
            ErrorKind::Unsettled => FailureKind::AnswerLost,
            ErrorKind::TaskFailed => FailureKind::TaskFailed,
            ErrorKind::TaskTimeout => FailureKind::Timeout,
            // A kind added to the client later: its class still tells a transient failure.
            #[allow(unreachable_patterns)]
            _ if error.is_retryable() => FailureKind::PveServerError,
            #[allow(unreachable_patterns)]
            _ => FailureKind::PveRefused,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an action failed: its [`FailureKind`], the message, and (from the PVE client) the error
/// behind it, as [`std::error::Error::source`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionError {
    kind: FailureKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(rename = "error")]
    message: String,
    #[serde(skip)]
    source: Option<Arc<PveError>>,
}

impl ActionError {
    /// An error of `kind` with `message` and no source (the executor's own failures).
    pub fn new(kind: FailureKind, message: impl Into<String>) -> ActionError {
        ActionError {
            kind,
            status: None,
            message: message.into(),
            source: None,
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The HTTP status PVE answered with, when it answered with one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The message: the PVE client error's text (method, path, status, PVE's message; a task's
    /// UPID and exit status).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with another message (what was done about it appended).
    pub(crate) fn with_message(mut self, message: String) -> ActionError {
        self.message = message;
        self
    }

    /// The PVE client error behind it, if it came from one.
    pub fn pve(&self) -> Option<&PveError> {
        self.source.as_deref()
    }

    /// Whether the PVE client classed the error as transient (a lock, a server error, the
    /// node unreachable): the next cycle may succeed without anything else changing.
    pub fn is_retryable(&self) -> bool {
        self.source.as_deref().is_some_and(PveError::is_retryable)
    }
}

impl From<PveError> for ActionError {
    fn from(error: PveError) -> ActionError {
        ActionError {
            kind: FailureKind::of(&error),
            status: error.status(),
            message: error.to_string(),
            source: Some(Arc::new(error)),
        }
    }
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ActionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

// Equal when they say the same: the source is the message's origin, not a further difference.
impl PartialEq for ActionError {
    fn eq(&self, other: &ActionError) -> bool {
        self.kind == other.kind && self.status == other.status && self.message == other.message
    }
}

impl Eq for ActionError {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proxops_pve::ApiFailure;
    use std::collections::BTreeMap;
    use std::error::Error as _;
    use std::time::Duration;

    fn api(status: u16, message: &str, kind: ErrorKind) -> PveError {
        PveError::Api(Box::new(ApiFailure {
            method: "POST".into(),
            path: "/nodes/pve1/qemu".into(),
            status,
            message: message.into(),
            errors: BTreeMap::new(),
            kind,
        }))
    }

    #[test]
    fn pve_errors_are_classified() {
        let cases = [
            (
                api(403, "Permission check failed", ErrorKind::Forbidden),
                FailureKind::PveRefused,
                Some(403),
            ),
            (
                api(500, "VM 100 already exists", ErrorKind::Refused),
                FailureKind::PveRefused,
                Some(500),
            ),
            (
                api(500, "got no worker", ErrorKind::Server),
                FailureKind::PveServerError,
                Some(500),
            ),
            (
                api(596, "Connection timed out", ErrorKind::Proxy),
                FailureKind::Unreachable,
                Some(596),
            ),
            (
                PveError::TaskFailed {
                    upid: "UPID:pve1:1:2:3:qmcreate:100:root@pam:".into(),
                    exitstatus: "unable to create VM".into(),
                    log_tail: Vec::new(),
                },
                FailureKind::TaskFailed,
                None,
            ),
            (
                PveError::TaskFailed {
                    upid: "UPID:pve1:1:2:3:qmstart:100:root@pam:".into(),
                    exitstatus: "VM is locked (backup)".into(),
                    log_tail: Vec::new(),
                },
                FailureKind::Locked,
                None,
            ),
            (
                PveError::TaskTimeout {
                    upid: "UPID:pve1:1:2:3:qmstart:100:root@pam:".into(),
                    waited: Duration::from_secs(1),
                },
                FailureKind::Timeout,
                None,
            ),
            (
                PveError::Unsettled {
                    method: "PUT".into(),
                    path: "/nodes/pve1/qemu/100/config".into(),
                    detail: "lost".into(),
                },
                FailureKind::AnswerLost,
                None,
            ),
            (
                PveError::Decode {
                    method: "GET".into(),
                    path: "/version".into(),
                    detail: "not JSON".into(),
                },
                FailureKind::UnexpectedAnswer,
                None,
            ),
        ];
        for (error, kind, status) in cases {
            let text = error.to_string();
            let e = ActionError::from(error);
            assert_eq!((e.kind(), e.status()), (kind, status), "{text}");
            assert_eq!(e.message(), text);
            assert_eq!(e.to_string(), text);
            assert!(e.source().is_some());
            assert!(e.pve().is_some());
        }
    }

    /// The message stays readable under `error`; the kind and status come beside it.
    #[test]
    fn serializes_kind_status_and_message() {
        let e = ActionError::from(api(403, "Permission check failed", ErrorKind::Forbidden));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "kind": "pve-refused",
                "status": 403,
                "error": "POST /nodes/pve1/qemu: HTTP 403 Permission check failed",
            })
        );
        let internal = ActionError::new(FailureKind::Internal, "panicked");
        assert_eq!(
            serde_json::to_value(&internal).unwrap(),
            serde_json::json!({"kind": "internal", "error": "panicked"})
        );
        assert!(internal.source().is_none());
        assert!(!internal.is_retryable());
    }

    /// In an action's result the failure stays `"outcome": "failed"` with the message under
    /// `"error"`, the kind and status beside it.
    #[test]
    fn a_failed_result_serializes_flat() {
        let result = crate::execute::ActionResult {
            id: 3,
            subject: "VM/web".into(),
            verb: crate::plan::Verb::Create,
            outcome: crate::execute::Outcome::Failed {
                error: ActionError::from(api(403, "Permission check failed", ErrorKind::Forbidden)),
            },
            upids: Vec::new(),
            millis: 7,
            guard: None,
            token: None,
        };
        let v = serde_json::to_value(&result).unwrap();
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["kind"], "pve-refused");
        assert_eq!(v["status"], 403);
        assert_eq!(
            v["error"],
            "POST /nodes/pve1/qemu: HTTP 403 Permission check failed"
        );
        assert_eq!(v["subject"], "VM/web");
    }
}
