//! What a guest's snapshots hold, for the migrations PVE refuses because of them.
//!
//! qemu-server `PVE/QemuMigrate.pm` `scan_local_volumes` walks every volume of the config and
//! of its snapshots (`foreach_volid`); a volume on local storage that a snapshot references
//! stops the migration: always for a running VM ("online storage migration not possible if
//! non-replicated snapshot exists"), and for a stopped one unless the storage can carry
//! snapshots over (`zfspool`, a raw volume on `btrfs`, a qcow2 file: "non-migratable snapshot
//! exists"). pve-container `PVE/LXC/Migrate.pm` `prepare` refuses a container's the same way
//! unless the storage is `zfspool` or `btrfs` (a running one migrates in restart mode, so its
//! power does not matter). Only the guests a plan may migrate are read: one listing and one
//! config read per snapshot.

use proxops_pve::{GuestRef, GuestType, PveClient, StorageEntry};
use std::collections::BTreeMap;

/// Each volume (`local-lvm:vm-101-disk-0`) the snapshots reference, with their names.
pub(super) type SnapshotVolumes = BTreeMap<String, Vec<String>>;

/// The snapshot volumes of each of `guests`; a read that failed keeps its error.
pub(super) async fn read(
    client: &PveClient,
    guests: Vec<GuestRef>,
) -> BTreeMap<u32, Result<SnapshotVolumes, String>> {
    let mut out = BTreeMap::new();
    for g in guests {
        out.insert(g.vmid, volumes_of(client, &g).await);
    }
    out
}

async fn volumes_of(client: &PveClient, g: &GuestRef) -> Result<SnapshotVolumes, String> {
    let mut volumes = SnapshotVolumes::new();
    for name in client.guest_snapshots(g).await.map_err(|e| e.to_string())? {
        let config = client
            .guest_snapshot_config(g, &name)
            .await
            .map_err(|e| e.to_string())?;
        for (key, value) in &config.values {
            // The saved RAM of a snapshot is not checked (`is_vmstate`).
            if key == "vmstate" || !crate::compat::is_disk_key(g.kind, key) {
                continue;
            }
            let volume = value.split(',').next().unwrap_or_default();
            if volume.is_empty() || volume == "none" || !volume.contains(':') {
                continue;
            }
            volumes
                .entry(volume.to_owned())
                .or_default()
                .push(name.clone());
        }
    }
    Ok(volumes)
}

/// Why PVE refuses to migrate `volume` (on local storage `storage`) that snapshots `names`
/// reference, if it does.
pub(super) fn refusal(
    kind: GuestType,
    volume: &str,
    names: &[String],
    storage: Option<&StorageEntry>,
    running: bool,
) -> Option<String> {
    let held = format!("`{volume}` is in snapshot(s) {}", names.join(", "));
    if kind == GuestType::Lxc {
        let plugin = storage.and_then(|s| s.plugintype.as_deref()).unwrap_or("");
        return (plugin != "zfspool" && plugin != "btrfs").then(|| {
            format!(
                "{held} on `{plugin}` storage: PVE refuses `non-migratable snapshot exists` (only zfspool and btrfs carry a container's snapshots over)"
            )
        });
    }
    if running {
        return Some(format!(
            "{held}: PVE refuses `online storage migration not possible if non-replicated snapshot exists`"
        ));
    }
    let kind = storage.and_then(|s| s.plugintype.as_deref()).unwrap_or("");
    let qcow2 = volume.ends_with(".qcow2");
    let raw = !qcow2 && !volume.ends_with(".vmdk");
    let carried = kind == "zfspool" || (kind == "btrfs" && raw) || qcow2;
    (!carried).then(|| {
        format!(
            "{held} on `{kind}` storage: PVE refuses `non-migratable snapshot exists` (only zfspool, raw on btrfs and qcow2 files carry snapshots over)"
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn storage(kind: &str) -> StorageEntry {
        StorageEntry {
            node: "pve1".into(),
            storage: "s".into(),
            plugintype: Some(kind.into()),
            content: vec!["images".into()],
            shared: false,
            status: None,
        }
    }

    #[test]
    fn snapshots_stop_a_migration_as_scan_local_volumes_does() {
        let names = ["a".to_owned()];
        let refused = |vol: &str, kind: &str, running: bool| {
            refusal(GuestType::Qemu, vol, &names, Some(&storage(kind)), running).is_some()
        };
        let ct = |kind: &str| {
            refusal(
                GuestType::Lxc,
                "s:subvol-1-disk-0",
                &names,
                Some(&storage(kind)),
                true,
            )
            .is_some()
        };
        assert!(
            !ct("zfspool") && !ct("btrfs"),
            "a container's, restart mode"
        );
        assert!(ct("lvmthin") && ct("dir"));
        assert!(refused("s:vm-1-disk-0", "zfspool", true), "running: always");
        assert!(!refused("s:vm-1-disk-0", "zfspool", false));
        assert!(!refused("s:vm-1-disk-0", "btrfs", false), "raw on btrfs");
        assert!(!refused("s:1/vm-1-disk-0.qcow2", "dir", false));
        assert!(refused("s:1/vm-1-disk-0.raw", "dir", false));
        assert!(refused("s:vm-1-disk-0", "lvmthin", false));
        assert!(refused("s:vm-1-disk-0", "lvm", false));
    }
}
