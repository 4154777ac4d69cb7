//! The typed endpoints, as methods of [`crate::PveClient`]: cluster-wide reads ([`cluster`]),
//! guest lifecycle and config ([`guest`]), a running guest's addresses ([`interfaces`]), HA resources and migration ([`ha`]), snapshots and the guest agent's ping ([`snapshots`]), storage content and downloads ([`storage`]).

pub mod cluster;
pub mod guest;
pub mod ha;
pub mod interfaces;
pub mod snapshots;
pub mod storage;

use crate::error::PveError;
use crate::upid::Upid;

/// Decodes a `data` that is a UPID string, or `null` for endpoints that may finish synchronously
/// (LXC template, older PVE's resize).
pub(crate) fn opt_upid(
    method: &str,
    path: &str,
    data: serde_json::Value,
) -> Result<Option<Upid>, PveError> {
    match data {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) if s.is_empty() => Ok(None),
        serde_json::Value::String(s) => s.parse::<Upid>().map(Some).map_err(|e| PveError::Decode {
            method: method.into(),
            path: path.into(),
            detail: e.to_string(),
        }),
        other => Err(PveError::Decode {
            method: method.into(),
            path: path.into(),
            detail: format!("expected a UPID or null, got {other}"),
        }),
    }
}
