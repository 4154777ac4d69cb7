//! Snapshot-guarded disruptive updates (`spec.update-policy` with `snapshot: true`).
//!
//! The planner ([`crate::planner`]) turns a disruptive update of such a guest (one with a
//! change PVE applies only at the next start: CPU, machine type, cores, a NIC model, ...) into
//! visible steps: `snapshot` (a PVE snapshot named `proxops-<revision>`, described as
//! ProxOps's own), the `update` (and the restart or start it needs), `verify` (the QEMU guest
//! agent answers, or the guest runs, within `verify.timeout`) and `prune-snapshots` (ProxOps
//! snapshots beyond `keep`). The executor runs them in order; when the update, the start or the
//! check fails after the snapshot, it rolls the guest back to the snapshot (`POST
//! .../snapshot/{name}/rollback`, `start=1` when the guest ran) and marks the snapshot's
//! description with why, so that the same desired document is not tried again
//! ([`crate::refusals`], and the mark itself for a later process).
//!
//! What PVE cannot snapshot is an anomaly before anything is sent: pve-guest-common
//! `PVE/AbstractConfig.pm` `__snapshot_prepare` refuses ("snapshot feature is not available")
//! unless `has_feature('snapshot')` holds for every volume (qemu-server `PVE/QemuConfig.pm`:
//! every drive but CD-ROMs and the cloud-init drive; pve-container `PVE/LXC/Config.pm`: the
//! root and every mount point), which pve-storage `PVE/Storage.pm` `volume_has_feature` asks
//! each volume's storage plugin ([`volume_has_snapshots`]).

use crate::desired::DesiredGuest;
use crate::diff::{Change, Removal};
use crate::execute::guest_ops::{Edit, apply_changes, restart_guest, start_guest};
use crate::execute::options::{ExecOptions, wait};
// Defined with the executor's other reports (an action's result holds it); its path is here.
pub use crate::execute::report::GuardReport;
use crate::failure::{ActionError, FailureKind};
use crate::plan::{Action, Check, Guard, Op};
use proxops_pve::{
    GuestConfig, GuestRef, GuestType, Inventory, PveClient, PveError, SnapshotEntry,
    SnapshotRequest,
};
use proxops_secrets::REDACTED;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How the name of every snapshot ProxOps takes starts.
pub const SNAPSHOT_PREFIX: &str = "proxops-";

/// How the description of every snapshot ProxOps takes starts: with the name prefix, what
/// recognises a snapshot as ProxOps's own ([`is_ours`]).
pub const DESCRIPTION_MARKER: &str = "proxops: before applying ";

/// What ProxOps appends to the description of a snapshot it rolled back to.
const ROLLED_BACK: &str = "; rolled back: ";

/// Whether a snapshot is one ProxOps took: its name starts with [`SNAPSHOT_PREFIX`] and its
/// description with [`DESCRIPTION_MARKER`]. Only those are ever deleted.
pub fn is_ours(snapshot: &SnapshotEntry) -> bool {
    snapshot.name.starts_with(SNAPSHOT_PREFIX)
        && snapshot.description.starts_with(DESCRIPTION_MARKER)
}

/// A short, stable id of a desired document: FNV-1a (64 bits) of its spec's JSON, 12 hex
/// digits. The same manifest gives the same id on every run; a changed one, another.
pub(crate) fn document_id(spec: &impl Serialize) -> String {
    let text = serde_json::to_string(spec).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")[..12].to_owned()
}

/// The name of a new ProxOps snapshot: `proxops-<revision>` (PVE's `pve-snapshot-name`,
/// `[a-zA-Z][a-zA-Z0-9_\-]{1,39}`), `-2`, `-3`, ... appended while `existing` has it.
pub(crate) fn snapshot_name(revision: &str, existing: &[SnapshotEntry]) -> String {
    let short: String = revision
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect();
    let base = format!("{SNAPSHOT_PREFIX}{short}");
    let taken = |n: &str| existing.iter().any(|s| s.name == n);
    if !taken(&base) {
        return base;
    }
    (2..)
        .map(|i| format!("{base}-{i}"))
        .find(|n| !taken(n))
        .unwrap_or(base)
}

/// The description of a new ProxOps snapshot: the revision, the resource and its document.
pub(crate) fn description(revision: &str, subject: &str, document: &str) -> String {
    format!("{DESCRIPTION_MARKER}{revision} to {subject} (document {document})")
}

/// Why ProxOps rolled `document` back, if a snapshot of its own says it did.
pub(crate) fn rolled_back<'a>(snapshot: &'a SnapshotEntry, document: &str) -> Option<&'a str> {
    if !is_ours(snapshot)
        || !snapshot
            .description
            .contains(&format!("(document {document})"))
    {
        return None;
    }
    snapshot
        .description
        .split_once(ROLLED_BACK)
        .map(|(_, why)| why)
}

/// pve-storage `PVE/Storage.pm` `volume_has_feature($cfg, 'snapshot', $volid)`, from the
/// cluster's storage listing: a path (a passed-through `/dev/...` disk, a bind mount) has no
/// storage and no snapshots; a volume asks its plugin's `volume_has_feature` with the format
/// `parse_volname` reads:
/// - `LvmThinPlugin`, `ZFSPoolPlugin`, `ZFSPlugin`, `RBDPlugin`: every volume;
/// - `BTRFSPlugin`: raw, qcow2 and subvol volumes;
/// - `Plugin` (dir, nfs, cifs, cephfs, glusterfs) and `LVMPlugin` (thick LVM): qcow2 only;
/// - `ISCSIPlugin`, `ISCSIDirectPlugin`, `PBSPlugin`, `ESXiPlugin`: none.
///
/// `Err` says why not.
pub fn volume_has_snapshots(inventory: &Inventory, node: &str, volume: &str) -> Result<(), String> {
    if volume.starts_with('/') || !volume.contains(':') {
        return Err(format!(
            "`{volume}` is a path on the host, not a volume of a storage"
        ));
    }
    let (sid, name) = volume.split_once(':').unwrap_or_default();
    let Some(storage) = inventory.storage(node, sid) else {
        return Err(format!("its storage `{sid}` is not on node `{node}`"));
    };
    let plugin = storage.plugintype.as_deref().unwrap_or("");
    let format = if name.ends_with(".qcow2") {
        "qcow2"
    } else if name.ends_with(".vmdk") {
        "vmdk"
    } else if name.ends_with(".subvol") || name.contains("subvol-") {
        "subvol"
    } else {
        "raw"
    };
    let ok = match plugin {
        "lvmthin" | "zfspool" | "zfs" | "rbd" => true,
        "btrfs" => matches!(format, "raw" | "qcow2" | "subvol"),
        "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" | "lvm" => format == "qcow2",
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let why = match plugin {
        "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" => {
            format!(
                "`{sid}` is {plugin} storage, where only qcow2 files have snapshots, and it is {format}"
            )
        }
        "lvm" => format!(
            "`{sid}` is thick LVM, where only qcow2 volumes (PVE 9's `snapshot-as-volume-chain`) have snapshots"
        ),
        "btrfs" => format!("`{sid}` is btrfs storage and it is {format}"),
        "" => format!("the type of storage `{sid}` is unknown"),
        other => format!("`{sid}` is {other} storage, which has no snapshots"),
    };
    Err(why)
}

/// Why PVE would refuse to snapshot a guest with `config` on `node` (`None`: it would not):
/// each volume without snapshots, and, for a VM's memory, SEV, TDX and virtiofs (qemu-server
/// `PVE/QemuMigrate/Helpers.pm` `check_non_migratable_resources`).
pub(crate) fn snapshot_problem(
    inventory: &Inventory,
    node: &str,
    kind: GuestType,
    config: &BTreeMap<String, String>,
    vmstate: bool,
) -> Option<String> {
    let mut problems: Vec<String> = config
        .iter()
        .filter(|(k, v)| {
            crate::compat::is_disk_key(kind, k) && !v.split(',').any(|p| p == "media=cdrom")
        })
        .filter_map(|(k, v)| {
            let volume = v.split(',').next().unwrap_or_default();
            let volume = volume
                .strip_prefix("file=")
                .or_else(|| volume.strip_prefix("volume="))
                .unwrap_or(volume);
            volume_has_snapshots(inventory, node, volume)
                .err()
                .map(|why| format!("{k} ({why})"))
        })
        .collect();
    if vmstate && kind == GuestType::Qemu {
        let blockers: Vec<&str> = ["amd-sev", "intel-tdx"]
            .into_iter()
            .filter(|k| config.contains_key(*k))
            .chain(
                config
                    .keys()
                    .any(|k| {
                        k.strip_prefix("virtiofs")
                            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    })
                    .then_some("virtiofs"),
            )
            .collect();
        if !blockers.is_empty() {
            problems.push(format!(
                "its memory (`vmstate: true`): PVE saves none of a VM with {}",
                blockers.join(", ")
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// How one action of a guarded update ended.
pub(crate) struct Ran {
    pub result: Result<(), ActionError>,
    pub guard: Option<GuardReport>,
}

/// Runs `action` if it is a step of a guarded update (`None` otherwise: the executor runs it).
/// The caller holds the guest's mutation permit.
pub(crate) async fn run(
    client: &PveClient,
    action: &Action,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Option<Ran> {
    match &action.op {
        Op::Snapshot { guard, vmstate } => {
            let request = SnapshotRequest::new(guard.description.clone()).with_vmstate(*vmstate);
            let result = async {
                let upid = client
                    .snapshot_create(&guard.guest, &guard.snapshot, &request)
                    .await?;
                wait(client, options, upid, upids).await
            }
            .await;
            Some(Ran {
                result: result.map_err(ActionError::from),
                guard: Some(GuardReport::of(&guard.snapshot)),
            })
        }
        Op::Update {
            desired,
            changes,
            removals,
            resizes,
            restart,
            guard: Some(guard),
            ..
        } => {
            // The snapshot changed the config (`parent`, the snapshot section) and so its
            // digest: the write is guarded by a fresh one, after checking that the keys it
            // changes are still as planned.
            let digest = match unchanged_since_plan(client, &guard.guest, changes, removals).await {
                Ok(digest) => digest,
                // Nothing written: nothing to roll back (the snapshot stays, ProxOps's).
                Err(e) => {
                    return Some(Ran {
                        result: Err(e),
                        guard: Some(GuardReport::of(&guard.snapshot)),
                    });
                }
            };
            // A write PVE refused wrote nothing (its config lock, a refusal): nothing to roll
            // back, and a locked guest is tried again next cycle.
            if !changes.is_empty() || !removals.is_empty() {
                let write = crate::execute::config_write::Write {
                    target: &guard.guest,
                    desired,
                    changes,
                    removals,
                    digest,
                };
                if let Err(e) =
                    crate::execute::config_write::write(client, write, options, upids).await
                {
                    let error = ActionError::from(e);
                    if matches!(error.kind(), FailureKind::PveRefused | FailureKind::Locked) {
                        return Some(Ran {
                            result: Err(error),
                            guard: Some(GuardReport::of(&guard.snapshot)),
                        });
                    }
                    return Some(after(client, guard, Err(error), options, upids).await);
                }
            }
            let result = async {
                let edit = Edit {
                    desired,
                    changes: &[],
                    removals: &[],
                    resizes,
                    digest: None,
                };
                apply_changes(client, &guard.guest, edit, options, upids).await?;
                if *restart {
                    restart_guest(client, &guard.guest, options, upids).await?;
                }
                Ok::<(), PveError>(())
            }
            .await;
            Some(
                after(
                    client,
                    guard,
                    result.map_err(ActionError::from),
                    options,
                    upids,
                )
                .await,
            )
        }
        Op::GuardedStart { guest, guard } => {
            let result = start_guest(client, guest, options, upids).await;
            Some(
                after(
                    client,
                    guard,
                    result.map_err(ActionError::from),
                    options,
                    upids,
                )
                .await,
            )
        }
        Op::Verify {
            guard,
            check,
            timeout,
        } => {
            let mut report = GuardReport::of(&guard.snapshot);
            match verify(client, &guard.guest, *check, *timeout).await {
                Ok(found) => {
                    report.verified = Some(found);
                    Some(Ran {
                        result: Ok(()),
                        guard: Some(report),
                    })
                }
                Err(why) => {
                    let error = ActionError::new(FailureKind::CheckFailed, why);
                    Some(after(client, guard, Err(error), options, upids).await)
                }
            }
        }
        Op::PruneSnapshots {
            guest,
            snapshot,
            names,
            keep,
        } => {
            let mut report = GuardReport::of(snapshot);
            let result = prune(client, guest, names, *keep, options, upids, &mut report).await;
            Some(Ran {
                result: result.map_err(ActionError::from),
                guard: Some(report),
            })
        }
        _ => None,
    }
}

/// Rolls the guest back when `result` failed, and says so in the error and the report.
async fn after(
    client: &PveClient,
    guard: &Guard,
    result: Result<(), ActionError>,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Ran {
    let mut report = GuardReport::of(&guard.snapshot);
    let Err(error) = result else {
        return Ran {
            result: Ok(()),
            guard: Some(report),
        };
    };
    let message = match rollback(client, guard, error.message(), options, upids).await {
        Ok(()) => {
            report.rolled_back = true;
            format!(
                "{}; rolled back to snapshot `{}`{}",
                error.message(),
                guard.snapshot,
                if guard.running {
                    " and started again"
                } else {
                    ""
                }
            )
        }
        Err(e) => {
            report.rollback_failed = Some(e.to_string());
            format!(
                "{}; the rollback to snapshot `{}` FAILED too ({e}): vmid {} is as the failure left it, the snapshot holds the state before",
                error.message(),
                guard.snapshot,
                guard.guest.vmid
            )
        }
    };
    Ran {
        result: Err(error.with_message(message)),
        guard: Some(report),
    }
}

/// `POST .../snapshot/{name}/rollback` (`start=1` when the guest ran), awaited; then the
/// snapshot's description says why (a failure to say so is only logged: the rollback is done).
async fn rollback(
    client: &PveClient,
    guard: &Guard,
    failure: &str,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let upid = client
        .snapshot_rollback(&guard.guest, &guard.snapshot, guard.running)
        .await?;
    wait(client, options, upid, upids).await?;
    let why: String = failure.chars().take(300).collect();
    let marked = format!("{}{ROLLED_BACK}{why}", guard.description);
    if let Err(e) = client
        .snapshot_describe(&guard.guest, &guard.snapshot, &marked)
        .await
    {
        tracing::warn!(vmid = guard.guest.vmid, snapshot = %guard.snapshot, error = %e, "rolled back, but the snapshot's description could not say so");
    }
    Ok(())
}

/// The digest to write under, after checking that every key the update changes still holds
/// the value it was planned from (a secret's aside, which PVE reads back masked).
async fn unchanged_since_plan(
    client: &PveClient,
    guest: &GuestRef,
    changes: &[Change],
    removals: &[Removal],
) -> Result<Option<String>, ActionError> {
    let rows = client.guest_pending(guest).await?;
    let now = GuestConfig::from_pending(&rows);
    let moved: Vec<&str> = changes
        .iter()
        .filter(|c| c.secret.is_none() && c.live.as_deref() != Some(REDACTED))
        .filter(|c| now.values.get(&c.key) != c.live.as_ref())
        .map(|c| c.key.as_str())
        .chain(
            removals
                .iter()
                .filter(|r| r.live != REDACTED && now.values.get(&r.key) != Some(&r.live))
                .map(|r| r.key.as_str()),
        )
        .collect();
    if !moved.is_empty() {
        return Err(ActionError::new(
            FailureKind::PveRefused,
            format!(
                "vmid {}: {} changed since the plan was made; nothing written (the next cycle plans again)",
                guest.vmid,
                moved.join(", ")
            ),
        ));
    }
    Ok(now.digest)
}

/// Polls the check until it passes or `timeout` is over.
async fn verify(
    client: &PveClient,
    guest: &GuestRef,
    check: Check,
    timeout: Duration,
) -> Result<String, String> {
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let mut pause = Duration::from_millis(100);
    let mut last;
    loop {
        match check {
            Check::Agent => match client.agent_ping(&guest.node, guest.vmid).await {
                Ok(()) => {
                    return Ok(format!(
                        "the guest agent answered after {}",
                        seconds(started.elapsed())
                    ));
                }
                Err(e) => last = e.message().to_owned(),
            },
            Check::Running => match client.guest_status(guest).await {
                Ok(s) if s.status == "running" && s.qmpstatus.as_deref() != Some("paused") => {
                    return Ok(format!("it runs ({})", seconds(started.elapsed())));
                }
                Ok(s) => last = format!("it is {}", s.qmpstatus.unwrap_or(s.status)),
                Err(e) => last = e.message().to_owned(),
            },
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            let what = match check {
                Check::Agent => "the guest agent did not answer",
                Check::Running => "the guest does not run",
            };
            return Err(format!(
                "check failed: {what} within {} (last: {last})",
                seconds(timeout)
            ));
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 10_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}s", d.as_secs())
    }
}

/// Deletes the snapshots the plan named, each only if the guest's listing still shows it as
/// ProxOps's own ([`is_ours`]), and only while more than `keep` of ProxOps's remain.
async fn prune(
    client: &PveClient,
    guest: &GuestRef,
    names: &[String],
    keep: u32,
    options: &ExecOptions,
    upids: &mut Vec<String>,
    report: &mut GuardReport,
) -> Result<(), PveError> {
    let listed = client.snapshot_list(guest).await?;
    let mut ours = listed.iter().filter(|s| is_ours(s)).count();
    for name in names {
        if ours <= keep as usize {
            break;
        }
        if !listed.iter().any(|s| s.name == *name && is_ours(s)) {
            tracing::warn!(vmid = guest.vmid, snapshot = %name, "not ProxOps's any more: left alone");
            continue;
        }
        let upid = client.snapshot_delete(guest, name).await?;
        wait(client, options, upid, upids).await?;
        report.pruned.push(name.clone());
        ours -= 1;
    }
    Ok(())
}

/// The oldest of `ours` (ProxOps's snapshots, before the new one) to delete so that `keep`
/// remain with the new one: by time taken, then name.
pub(crate) fn to_prune(snapshots: &[SnapshotEntry], keep: u32) -> Vec<String> {
    let mut ours: Vec<&SnapshotEntry> = snapshots.iter().filter(|s| is_ours(s)).collect();
    ours.sort_by(|a, b| (a.snaptime, &a.name).cmp(&(b.snaptime, &b.name)));
    let excess = (ours.len() + 1).saturating_sub(keep.max(1) as usize);
    ours.iter().take(excess).map(|s| s.name.clone()).collect()
}

/// The guard an action of a guarded update carries (`None` for the snapshot itself, which
/// rolls nothing back, and for every other action).
pub(crate) fn guard_of(op: &Op) -> Option<&Guard> {
    match op {
        Op::Update { guard, .. } => guard.as_ref(),
        Op::GuardedStart { guard, .. } | Op::Verify { guard, .. } => Some(guard),
        _ => None,
    }
}

/// Whether a disruptive update of `d` is guarded by a snapshot, and how: its update policy.
pub(crate) fn policy(d: &DesiredGuest) -> Option<&proxops_model::kinds::UpdatePolicy> {
    d.update_policy
        .as_ref()
        .filter(|p| p.snapshot && !d.template)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proxops_pve::StorageEntry;

    fn inventory(storages: &[(&str, &str)]) -> Inventory {
        let mut inv = Inventory::from_resources(Vec::new());
        inv.storages = storages
            .iter()
            .map(|(name, kind)| StorageEntry {
                node: "pve1".into(),
                storage: (*name).into(),
                plugintype: Some((*kind).into()),
                content: vec!["images".into(), "rootdir".into()],
                shared: false,
                status: None,
            })
            .collect();
        inv
    }

    #[test]
    fn snapshots_exist_where_pve_storage_says_they_do() {
        let inv = inventory(&[
            ("thin", "lvmthin"),
            ("thick", "lvm"),
            ("zfs", "zfspool"),
            ("ceph", "rbd"),
            ("files", "dir"),
            ("nas", "nfs"),
            ("cow", "btrfs"),
            ("pbs", "pbs"),
        ]);
        let ok = |v: &str| volume_has_snapshots(&inv, "pve1", v).is_ok();
        assert!(ok("thin:vm-100-disk-0"));
        assert!(ok("zfs:subvol-100-disk-0"));
        assert!(ok("ceph:vm-100-disk-0"));
        assert!(ok("files:100/vm-100-disk-0.qcow2"));
        assert!(ok("nas:100/vm-100-disk-0.qcow2"));
        assert!(ok("cow:100/vm-100-disk-0.raw"));
        assert!(ok("thick:vm-100-disk-0.qcow2"));
        assert!(!ok("thick:vm-100-disk-0"));
        assert!(!ok("files:100/vm-100-disk-0.raw"));
        assert!(!ok("files:100/subvol-100-disk-0.subvol"));
        assert!(!ok("nas:100/vm-100-disk-0.vmdk"));
        assert!(!ok("pbs:backup/x"));
        assert!(!ok("/dev/disk/by-id/ata-1"));
        assert!(!ok("missing:vm-100-disk-0"));
        let config: BTreeMap<String, String> = [
            ("scsi0", "thin:vm-100-disk-0,size=8G"),
            ("ide2", "files:iso/d.iso,media=cdrom"),
            ("ide0", "thin:vm-100-cloudinit,media=cdrom"),
            ("scsi1", "/dev/sdb,size=1T"),
            ("efidisk0", "files:100/vm-100-disk-1.raw,size=4M"),
            ("net0", "virtio,bridge=vmbr0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let why = snapshot_problem(&inv, "pve1", GuestType::Qemu, &config, false).unwrap();
        assert!(why.starts_with("efidisk0 (`files` is dir storage"), "{why}");
        assert!(why.contains("scsi1 (`/dev/sdb` is a path"), "{why}");
        assert!(!why.contains("scsi0") && !why.contains("ide"), "{why}");
    }

    #[test]
    fn names_descriptions_and_what_is_pruned() {
        let theirs = SnapshotEntry::new("proxops-aaaa", "mine, not ProxOps's", 1);
        let old = SnapshotEntry::new("proxops-bbbb", description("bbbb", "VM/a", "d1"), 2);
        let newer = SnapshotEntry::new("proxops-cccc", description("cccc", "VM/a", "d2"), 3);
        let user = SnapshotEntry::new("before-upgrade", description("x", "VM/a", "d"), 0);
        assert!(!is_ours(&theirs) && !is_ours(&user) && is_ours(&old));
        let all = vec![theirs, old.clone(), newer, user];
        assert_eq!(
            snapshot_name("cccc0123456789", &all),
            "proxops-cccc01234567"
        );
        assert_eq!(snapshot_name("cccc", &all), "proxops-cccc-2");
        assert_eq!(to_prune(&all, 3), Vec::<String>::new());
        assert_eq!(to_prune(&all, 2), ["proxops-bbbb"]);
        assert_eq!(to_prune(&all, 1), ["proxops-bbbb", "proxops-cccc"]);
        let marked = SnapshotEntry::new(
            "proxops-bbbb",
            format!("{}{ROLLED_BACK}the agent did not answer", old.description),
            2,
        );
        assert_eq!(rolled_back(&marked, "d1"), Some("the agent did not answer"));
        assert_eq!(rolled_back(&marked, "d2"), None);
        assert_eq!(rolled_back(&old, "d1"), None);
        assert_eq!(document_id(&serde_json::json!({"a": 1})).len(), 12);
    }
}
