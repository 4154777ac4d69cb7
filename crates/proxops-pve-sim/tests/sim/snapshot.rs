//! Snapshots as pve-guest-common `AbstractConfig` makes them (qemu-server `API2/Qemu.pm`,
//! pve-container `API2/LXC/Snapshot.pm`): a copy of the config that becomes the current state's
//! `parent`; delete reparents; rollback stops the guest and restores the config.

use crate::support::Sim;
use serde_json::Value;

fn names(list: &Value) -> Vec<(String, Option<String>)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["parent"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn snapshot_rollback_and_delete_keep_the_chain() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:2"), ("memory", "1024")])
        .await;
    let base = "/nodes/pve1/qemu/100/snapshot";
    let upid = sim
        .post(base, &[("snapname", "s1"), ("description", "before")])
        .await
        .ok();
    assert!(
        upid.as_str().unwrap().contains(":qmsnapshot:100:"),
        "{upid}"
    );
    sim.wait_ok(&upid).await;
    sim.put("/nodes/pve1/qemu/100/config", &[("memory", "2048")])
        .await
        .ok();
    sim.wait_ok(&sim.post(base, &[("snapname", "s2")]).await.ok())
        .await;
    let list = sim.get(base).await.ok();
    assert_eq!(
        names(&list),
        [
            ("s1".into(), None),
            ("s2".into(), Some("s1".into())),
            ("current".into(), Some("s2".into()))
        ]
    );
    assert_eq!(list[2]["description"], "You are here!");
    let s1 = sim.get(&format!("{base}/s1/config")).await.ok();
    assert_eq!(s1["memory"], "1024");
    assert_eq!(s1["description"], "before");
    // A name in use, a reserved one.
    let dup = sim
        .wait(&sim.post(base, &[("snapname", "s1")]).await.ok())
        .await;
    assert_eq!(dup["exitstatus"], "snapshot name 's1' already used");
    let reserved = sim.post(base, &[("snapname", "current")]).await.fail(500);
    assert_eq!(
        reserved,
        "unable to use snapshot name 'current' (reserved name)"
    );
    // Rollback of a running VM stops it and restores the snapshot's config.
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    let upid = sim.post(&format!("{base}/s1/rollback"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmrollback:100:"));
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["memory"], "1024");
    assert_eq!(c["parent"], "s1");
    let status = sim.get("/nodes/pve1/qemu/100/status/current").await.ok();
    assert_eq!(status["status"], "stopped");
    // Deleting s1 gives s2 and the current state s1's parent (none).
    let upid = sim.delete(&format!("{base}/s1"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmdelsnapshot:100:"));
    sim.wait_ok(&upid).await;
    assert_eq!(
        names(&sim.get(base).await.ok()),
        [("s2".into(), None), ("current".into(), None)]
    );
    let gone = sim.get(&format!("{base}/s1/config")).await.fail(500);
    assert_eq!(gone, "snapshot 's1' does not exist");
    // With snapshots the VM cannot become a template.
    let t = sim
        .post("/nodes/pve1/qemu/100/template", &[])
        .await
        .fail(500);
    assert!(t.contains("contains snapshots"), "{t}");
}

#[tokio::test]
async fn raw_files_cannot_be_snapshotted_and_qcow2_files_can() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        if let Some(n) = st.nodes.first_mut() {
            n.storages.push(proxops_pve_sim::Storage {
                storage: "files".into(),
                kind: "dir".into(),
                content: vec!["images".into()],
                ..proxops_pve_sim::Storage::default()
            });
        }
    });
    sim.create_vm("101", &[("scsi0", "files:1,format=raw")])
        .await;
    let t = sim
        .wait(
            &sim.post("/nodes/pve1/qemu/101/snapshot", &[("snapname", "snap1")])
                .await
                .ok(),
        )
        .await;
    assert_eq!(t["exitstatus"], "snapshot feature is not available");
    sim.create_vm("102", &[("scsi0", "files:1,format=qcow2")])
        .await;
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/102/snapshot", &[("snapname", "snap1")])
            .await
            .ok(),
    )
    .await;
}

/// pve-storage `PVE/Storage.pm` `volume_has_feature`: a path has no storage, so a VM with a
/// passed-through disk or a container with a bind mount cannot be snapshotted at all; thick LVM
/// has snapshots for qcow2 volumes only (PVE 9's volume chains), btrfs for raw volumes too.
#[tokio::test]
async fn paths_and_thick_lvm_cannot_be_snapshotted() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        if let Some(n) = st.nodes.first_mut() {
            for (name, kind) in [("thick", "lvm"), ("cow", "btrfs")] {
                n.storages.push(proxops_pve_sim::Storage {
                    storage: name.into(),
                    kind: kind.into(),
                    content: vec!["images".into(), "rootdir".into()],
                    ..proxops_pve_sim::Storage::default()
                });
            }
        }
    });
    sim.create_vm("101", &[("scsi0", "local-lvm:1")]).await;
    sim.h.with_state(|st| {
        if let Some(g) = st.guests.get_mut(&101) {
            g.config
                .insert("scsi1".into(), "/dev/disk/by-id/ata-disk1,size=1G".into());
        }
    });
    let s = &sim;
    let exit = |path: &'static str| async move {
        let upid = s.post(path, &[("snapname", "s1")]).await.ok();
        s.wait(&upid).await["exitstatus"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        exit("/nodes/pve1/qemu/101/snapshot").await,
        "snapshot feature is not available"
    );
    sim.create_vm("102", &[("scsi0", "thick:1")]).await;
    assert_eq!(
        exit("/nodes/pve1/qemu/102/snapshot").await,
        "snapshot feature is not available"
    );
    sim.create_vm("103", &[("scsi0", "cow:1,format=raw")]).await;
    assert_eq!(exit("/nodes/pve1/qemu/103/snapshot").await, "OK");
    // A CD-ROM and the cloud-init drive are left out (`drive_is_cdrom`).
    sim.create_vm(
        "104",
        &[("scsi0", "local-lvm:1"), ("ide2", "none,media=cdrom")],
    )
    .await;
    assert_eq!(exit("/nodes/pve1/qemu/104/snapshot").await, "OK");
}

/// qemu-server `snapshot`: `check_non_migratable_resources` refuses saving the memory of a
/// VM with SEV, TDX or virtiofs before it forks; without `vmstate` the snapshot is taken.
#[tokio::test]
async fn memory_of_a_sev_guest_is_not_saved() {
    let sim = Sim::start().await;
    sim.create_vm("105", &[("scsi0", "local-lvm:1")]).await;
    sim.h.with_state(|st| {
        if let Some(g) = st.guests.get_mut(&105) {
            g.config.insert("amd-sev".into(), "type=std".into());
        }
    });
    let refused = sim
        .post(
            "/nodes/pve1/qemu/105/snapshot",
            &[("snapname", "s1"), ("vmstate", "1")],
        )
        .await
        .fail(500);
    assert_eq!(
        refused,
        "Cannot live-migrate, snapshot (with RAM), or hibernate a VM with: amd-sev"
    );
    let upid = sim
        .post("/nodes/pve1/qemu/105/snapshot", &[("snapname", "s1")])
        .await
        .ok();
    sim.wait_ok(&upid).await;
}
