//! The guest operations both the executor and a snapshot-guarded update ([`crate::guard`]) run:
//! power changes waited for, and one update's config write and resizes. Here, below both, so
//! the guard does not import the executor that calls it.

use super::config_write;
use super::options::{ExecOptions, wait};
use crate::desired::DesiredGuest;
use crate::diff::{Change, Removal, Resize};
use proxops_pve::props::format_size;
use proxops_pve::{GuestRef, PveClient, PveError, Upid, WaitOptions};

/// Waits for a power task; after an HA request (`hastart`/`hastop`, which only queues the
/// request to the HA manager) also for the guest's live status to reach `want`, within the
/// same timeout, so the action succeeds only once the guest runs (or stopped).
pub(crate) async fn wait_power(
    client: &PveClient,
    options: &ExecOptions,
    guest: &GuestRef,
    upid: Upid,
    want: &str,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let opts = options
        .wait
        .clone()
        .unwrap_or_else(|| WaitOptions::for_task(&upid.kind));
    let ha = upid.is_ha_request();
    wait(client, options, upid, upids).await?;
    if ha {
        client.wait_guest_status(guest, want, &opts).await?;
    }
    Ok(())
}

/// Shuts a guest down and starts it again, waiting for each.
pub(crate) async fn restart_guest(
    client: &PveClient,
    target: &GuestRef,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let upid = client
        .shutdown(target, Some(options.shutdown_timeout), Some(true))
        .await?;
    wait_power(client, options, target, upid, "stopped", upids).await?;
    start_guest(client, target, options, upids).await
}

/// Starts a guest and waits until it runs.
pub(crate) async fn start_guest(
    client: &PveClient,
    guest: &GuestRef,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let upid = client.start(guest).await?;
    wait_power(client, options, guest, upid, "running", upids).await
}

/// What one update writes to a guest.
pub(crate) struct Edit<'a> {
    /// What the guest should be.
    pub desired: &'a DesiredGuest,
    pub changes: &'a [Change],
    pub removals: &'a [Removal],
    pub resizes: &'a [Resize],
    /// The digest of the config read the edit was computed from.
    pub digest: Option<String>,
}

pub(crate) async fn apply_changes(
    client: &PveClient,
    target: &GuestRef,
    edit: Edit<'_>,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let Edit {
        desired,
        changes,
        removals,
        resizes,
        digest,
    } = edit;
    if !changes.is_empty() || !removals.is_empty() {
        // One write, so the digest guards the deletions too; POST when it allocates or imports
        // qemu disks, read back when its answer is lost.
        let write = config_write::Write {
            target,
            desired,
            changes,
            removals,
            digest,
        };
        config_write::write(client, write, options, upids).await?;
    }
    for r in resizes {
        if let Some(upid) = client
            .resize(target, &r.disk, &format_size(r.to), None)
            .await?
        {
            wait(client, options, upid, upids).await?;
        }
    }
    Ok(())
}
