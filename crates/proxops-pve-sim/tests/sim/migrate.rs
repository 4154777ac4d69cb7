//! Migration as qemu-server `migrate_vm`/`QemuMigrate.pm` and pve-container
//! `migrate_vm`/`LXC/Migrate.pm` refuse and do it.

use crate::support::Sim;

async fn two_nodes() -> Sim {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        let mut second = st.nodes[0].clone();
        second.node = "pve2".into();
        st.nodes.push(second);
    });
    sim
}

#[tokio::test]
async fn a_vm_migrates_offline_with_its_local_disks_and_online_only_when_asked() {
    let sim = two_nodes().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:2")]).await;
    let m = "/nodes/pve1/qemu/100/migrate";
    let local = sim.post(m, &[("target", "pve1")]).await.errors();
    assert_eq!(local["target"], "target is local node.");
    let unknown = sim.post(m, &[("target", "pve9")]).await.fail(500);
    assert_eq!(unknown, "no such cluster node 'pve9'");
    // Offline: the local disk goes with it.
    let upid = sim.post(m, &[("target", "pve2")]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmigrate:100:"), "{upid}");
    sim.wait_ok(&upid).await;
    let state = sim.h.state();
    assert_eq!(state.guests[&100].node, "pve2");
    let disk = state
        .volumes
        .iter()
        .find(|v| v.volid == "local-lvm:vm-100-disk-0")
        .unwrap();
    assert_eq!(disk.node, "pve2");
    sim.get("/nodes/pve2/qemu/100/config").await.ok();
    // Running: only online, and local disks only with with-local-disks.
    sim.wait_ok(
        &sim.post("/nodes/pve2/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    let back = "/nodes/pve2/qemu/100/migrate";
    let offline = sim.post(back, &[("target", "pve1")]).await.fail(500);
    assert_eq!(offline, "can't migrate running VM without --online");
    let upid = sim
        .post(back, &[("target", "pve1"), ("online", "1")])
        .await
        .ok();
    let t = sim.wait(&upid).await;
    // `AbstractMigrate::migrate`: the reason in the log, `migration aborted` as the status.
    assert_eq!(t["exitstatus"], "migration aborted", "{t}");
    let log = sim.log(&upid).await;
    assert!(
        log.iter().any(|l| l.starts_with("ERROR: migration aborted")
            && l.contains(
                "can't live migrate attached local disks without with-local-disks option"
            )),
        "{log:?}"
    );
    sim.wait_ok(
        &sim.post(
            back,
            &[
                ("target", "pve1"),
                ("online", "1"),
                ("with-local-disks", "1"),
            ],
        )
        .await
        .ok(),
    )
    .await;
    let g = &sim.h.state().guests[&100];
    assert_eq!((g.node.as_str(), g.status.as_str()), ("pve1", "running"));
}
