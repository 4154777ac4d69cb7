//! Fault injection. Every decision is a reproducible draw ([`seeded_f64`]) from the configured seed,
//! the fault kind, the request's `METHOD /template` and its number for that key, so the same
//! request sequence meets the same faults on every run.

use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::time::Duration;

use crate::config::EndpointClass;
use crate::error::{ApiError, with_reason};
use crate::reset;
use crate::rng::{fnv1a, seeded_f64};
use crate::server::{Shared, lock};
use crate::state::GuestType;

/// A reproducible draw in `[0, 1)` for (seed, fault kind, key, n).
pub fn draw(seed: u64, fault: &str, key: &str, n: u64) -> f64 {
    let mixed =
        seed ^ fnv1a(fault).rotate_left(21) ^ fnv1a(key) ^ n.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    seeded_f64(mixed)
}

/// The endpoint class of a `METHOD /template` key.
pub fn class_of(method: &str, key: &str) -> EndpointClass {
    if key.ends_with(" /access/ticket") {
        EndpointClass::Auth
    } else if key.contains("/tasks") {
        EndpointClass::Task
    } else if method == "GET" {
        EndpointClass::Read
    } else {
        EndpointClass::Write
    }
}

/// Faults that hit a request before it is handled: latency, reset, 595/596, 500.
pub(crate) async fn before_request(
    shared: &Shared,
    method: &str,
    key: &str,
    n: u64,
    peer: SocketAddr,
) -> Option<Response> {
    let f = &lock(&shared.faults).clone();
    if !f.any() {
        return None;
    }
    if let Some((min, max)) = f.latency {
        let span = max.saturating_sub(min).as_secs_f64();
        let wait = min + Duration::from_secs_f64(span * draw(f.seed, "latency", key, n));
        tokio::time::sleep(wait).await;
    }
    if f.reset_rate > 0.0 && draw(f.seed, "reset", key, n) < f.reset_rate {
        reset::kill(&shared.kills, peer);
        return Some(with_reason(
            500,
            "Connection reset",
            serde_json::Value::Null,
        ));
    }
    if f.proxy_error_rate > 0.0 {
        let d = draw(f.seed, "proxy", key, n);
        if d < f.proxy_error_rate {
            // 595: pveproxy could not reach the node; 596: it timed out talking to it.
            let (code, msg) = if d < f.proxy_error_rate / 2.0 {
                (595, "Connection refused")
            } else {
                (596, "Connection timed out")
            };
            return Some(with_reason(code, msg, serde_json::json!({ "data": null })));
        }
    }
    let rate = f
        .error_rate
        .get(&class_of(method, key))
        .copied()
        .unwrap_or(0.0);
    if rate > 0.0 && draw(f.seed, "error", key, n) < rate {
        return Some(ApiError::fail("internal error (injected fault)").into_response());
    }
    None
}

/// Lock contention on a guest mutation: `VM is locked (backup)` or a file-lock timeout.
pub(crate) fn lock_contention(
    shared: &Shared,
    key: &str,
    n: u64,
    kind: GuestType,
    vmid: u32,
) -> Result<(), ApiError> {
    let f = &lock(&shared.faults).clone();
    if f.lock_contention_rate <= 0.0 {
        return Ok(());
    }
    let d = draw(f.seed, "lock", key, n);
    if d >= f.lock_contention_rate {
        return Ok(());
    }
    if d < f.lock_contention_rate / 2.0 {
        return Err(ApiError::fail(format!(
            "{} is locked (backup)",
            kind.word()
        )));
    }
    Err(ApiError::fail(format!(
        "can't lock file '{}' - got timeout",
        crate::sync_work::lock_file(kind, vmid)
    )))
}

/// Whether the next task of a type fails (counted per task type for reproducibility).
pub(crate) fn task_fails(shared: &Shared, kind: &str, id: &str) -> bool {
    let f = &lock(&shared.faults).clone();
    let named = f
        .failing_tasks
        .iter()
        .any(|t| t == kind || *t == format!("{kind}:{id}"));
    if named {
        return true;
    }
    if f.task_failure_rate <= 0.0 {
        return false;
    }
    let n = {
        let mut counts = lock(&shared.task_counts);
        let c = counts.entry(kind.to_string()).or_insert(0);
        *c += 1;
        *c
    };
    draw(f.seed, "task", kind, n) < f.task_failure_rate
}
