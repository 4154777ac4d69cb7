//! Debug endpoints outside `/api2/json` (no auth; the simulator listens on loopback):
//! `GET /_sim/counters`, `DELETE /_sim/counters` (which clears the journal too),
//! `GET /_sim/journal`, `GET /_sim/state`.

use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{ApiError, with_reason};
use crate::server::{Shared, lock};

pub(crate) fn handle(shared: &Shared, method: &str, path: &str) -> Response {
    match (method, path.trim_end_matches('/')) {
        ("GET", "counters") => with_reason(200, "OK", json!({ "data": *lock(&shared.counters) })),
        ("DELETE", "counters") => {
            lock(&shared.counters).clear();
            lock(&shared.journal).clear();
            with_reason(200, "OK", json!({ "data": null }))
        }
        ("GET", "journal") => {
            let entries = lock(&shared.journal).entries();
            with_reason(200, "OK", json!({ "data": entries }))
        }
        ("GET", "state") => {
            let st = lock(&shared.state).clone();
            with_reason(200, "OK", json!({ "data": st }))
        }
        _ => ApiError::Status(404, format!("no debug endpoint '{method} /_sim/{path}'"))
            .into_response(),
    }
}
