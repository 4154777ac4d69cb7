//! Synchronous work inside a call, guest config locks, and pveproxy's timeout.
//!
//! A config write that allocates or imports storage does that work inside the request:
//! qemu-server `src/PVE/API2/Qemu.pm` `update_vm_api` with `$sync` (PUT) runs `create_disks`
//! under `lock_config` before it answers; pve-container `src/PVE/API2/LXC/Config.pm`
//! `update_vm` (LXC has only PUT) allocates through `update_pct_config` →
//! `vmconfig_apply_pending` → `apply_pending_mountpoint` → `PVE::LXC::create_disks`, with no
//! worker. Both are `protected`, so pveproxy hands them to pvedaemon through `proxy_request`
//! (pve-http-server `src/PVE/APIServer/AnyEvent.pm`), which gives up after `timeout => 30`:
//! AnyEvent::HTTP then reports status 596 ("errors during TLS negotiation, request sending and
//! header processing") with the handle's error text, `Connection timed out` (ETIMEDOUT), and
//! pveproxy answers exactly that, with no body. pvedaemon knows nothing of it and finishes the
//! request: the change lands when the work is done. Here the work takes
//! [`crate::TaskDurations::sync_of`] per allocated or imported volume, and pveproxy waits
//! [`crate::TaskDurations::proxy_timeout`].

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use crate::api::{Ctx, disks, setconfig};
use crate::error::{ApiError, with_reason};
use crate::server::{Shared, lock};
use crate::state::{GuestType, State};

/// A guest's config lock, held across a config write and its work.
pub(crate) type GuestLock = tokio::sync::OwnedMutexGuard<()>;

/// The change of a synchronous call, made when its work is done.
pub(crate) type Apply = Box<dyn FnOnce(&mut State) -> Result<Value, ApiError> + Send>;

/// Work a handler left to be done before its call answers.
pub(crate) struct Deferred {
    /// How long the work takes.
    pub work: Duration,
    /// What it changes, and the call's answer.
    pub apply: Apply,
}

/// The lock file PVE names when a guest's config lock is not to be had.
pub(crate) fn lock_file(kind: GuestType, vmid: u32) -> String {
    match kind {
        GuestType::Qemu => format!("/var/lock/qemu-server/lock-{vmid}.conf"),
        GuestType::Lxc => format!("/run/lock/lxc/pve-config-{vmid}.lock"),
    }
}

/// Takes a guest's config lock, waiting at most [`crate::TaskDurations::lock_timeout`] (PVE's
/// 10 s, pve-guest-common `PVE/AbstractConfig.pm` `lock_config`), else PVE's refusal.
pub(crate) async fn lock_guest(
    shared: &Shared,
    kind: GuestType,
    vmid: u32,
) -> Result<GuestLock, ApiError> {
    let m = lock(&shared.config_locks).entry(vmid).or_default().clone();
    let wait = lock(&shared.durations).lock_timeout();
    tokio::time::timeout(wait, m.lock_owned())
        .await
        .map_err(|_| {
            ApiError::fail(format!(
                "can't lock file '{}' - got timeout",
                lock_file(kind, vmid)
            ))
        })
}

/// The config write routes that take the guest's config lock before their handler runs (the
/// synchronous ones; POST config takes it in its worker). Returns the guest.
pub(crate) fn locking_route(method: &str, template: &str) -> Option<GuestType> {
    match (method, template) {
        ("PUT", "/nodes/{node}/qemu/{vmid}/config") => Some(GuestType::Qemu),
        ("PUT", "/nodes/{node}/lxc/{vmid}/config") => Some(GuestType::Lxc),
        _ => None,
    }
}

/// The synchronous work of a config write: the sum over the volumes it allocates or imports.
pub(crate) fn work_of_request(ctx: &Ctx, kind: GuestType) -> Duration {
    let durations = lock(&ctx.shared.durations).clone();
    let version = lock(&ctx.shared.state).pve_version;
    setconfig::requested(ctx)
        .iter()
        .filter_map(|(k, v)| disks::work_of(version, kind, k, v))
        .map(|op| durations.sync_of(op))
        .sum()
}

/// A synchronous config write (PUT): made at once when it allocates nothing; otherwise checked
/// at once against a copy of the state (a refusal answers without delay) and left as
/// [`Deferred`] work that makes it again on the real state when the work is done.
pub(crate) fn write(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let work = work_of_request(ctx, kind);
    let mut st = ctx.state();
    if work.is_zero() {
        crate::api::qemu::set_config(ctx, &mut st, kind)?;
        return Ok(Value::Null);
    }
    let mut scratch = st.clone();
    drop(st);
    crate::api::qemu::set_config(ctx, &mut scratch, kind)?;
    let detached = ctx.detached();
    ctx.deferred = Some(Deferred {
        work,
        apply: Box::new(move |st: &mut State| {
            crate::api::qemu::set_config(&detached, st, kind).map(|()| Value::Null)
        }),
    });
    Ok(Value::Null)
}

/// pveproxy's answer when pvedaemon did not answer in time: AnyEvent::HTTP's status and reason,
/// no body.
pub(crate) fn timed_out() -> Response {
    let mut resp = StatusCode::from_u16(596)
        .unwrap_or(StatusCode::GATEWAY_TIMEOUT)
        .into_response();
    resp.extensions_mut()
        .insert(hyper::ext::ReasonPhrase::from_static(
            b"Connection timed out",
        ));
    resp
}

/// Does the deferred work in the background, to its end whatever happens to the call, holding
/// the guest's config lock until the change is made; answers with its result when it is done
/// by `deadline`, else with pveproxy's 596 at `deadline`.
pub(crate) async fn respond(
    shared: Arc<Shared>,
    deferred: Deferred,
    guard: Option<GuestLock>,
    deadline: Instant,
) -> Response {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let id = format!("sync:{}", crate::rng::uuid());
    let shared2 = shared.clone();
    let id2 = id.clone();
    let handle = tokio::spawn(async move {
        tokio::time::sleep(deferred.work).await;
        let result = {
            let mut st = lock(&shared2.state);
            let result = (deferred.apply)(&mut st);
            shared2.persist(&st);
            result
        };
        drop(guard);
        lock(&shared2.running).remove(&id2);
        let _ = tx.send(result);
    });
    lock(&shared.running).insert(id, handle.abort_handle());
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(Ok(data))) => with_reason(200, "OK", serde_json::json!({ "data": data })),
        Ok(Ok(Err(e))) => e.into_response(),
        // Aborted by a shutdown.
        Ok(Err(_)) => ApiError::fail("interrupted by a shutdown").into_response(),
        Err(_) => timed_out(),
    }
}

/// qemu-server `update_vm_api` with `background_delay`: waits up to that long for the worker;
/// answers `null` when it ended well, fails with `failed to update VM N: STATUS` when it did not,
/// and answers the UPID when it still runs.
pub(crate) async fn background_delay(
    shared: &Shared,
    upid_value: Value,
    upid: &str,
    wait: Duration,
    vmid: u32,
) -> Response {
    let deadline = Instant::now() + wait;
    loop {
        let ended = lock(&shared.state)
            .task_mut(upid)
            .filter(|t| t.status == "stopped")
            .map(|t| t.exitstatus.clone().unwrap_or_default());
        match ended {
            Some(status) if status == "OK" || status.starts_with("WARNINGS") => {
                return with_reason(200, "OK", serde_json::json!({ "data": null }));
            }
            Some(status) => {
                return ApiError::fail(format!("failed to update VM {vmid}: {status}"))
                    .into_response();
            }
            None if Instant::now() >= deadline => {
                return with_reason(200, "OK", serde_json::json!({ "data": upid_value }));
            }
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}
