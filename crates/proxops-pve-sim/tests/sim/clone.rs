//! Template and clone: linked/full rules, the clone lock window, target nodes and shared storage.

use crate::support::{Sim, config};
use proxops_pve_sim::{State, Storage};

#[tokio::test]
async fn template_clone_rules_and_clone_lock() {
    let mut cfg = config();
    cfg.task_durations
        .per_type
        .insert("qmclone".into(), std::time::Duration::from_millis(300));
    let sim = Sim::with(cfg).await;
    sim.create_vm(
        "100",
        &[
            ("name", "base"),
            ("scsi0", "local-lvm:8"),
            ("net0", "virtio,bridge=vmbr0"),
        ],
    )
    .await;
    // Linked clone of a non-template is refused; storage only for full clones.
    let linked = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            &[("newid", "101"), ("full", "0")],
        )
        .await
        .fail(500);
    assert_eq!(
        linked,
        "Linked clone feature is not supported for drive 'scsi0'"
    );
    // A running VM cannot become a template.
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    let running = sim
        .post("/nodes/pve1/qemu/100/template", &[])
        .await
        .fail(500);
    assert_eq!(
        running,
        "you can't convert a VM to template if VM is running"
    );
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok())
        .await;
    let upid = sim.post("/nodes/pve1/qemu/100/template", &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmtemplate:100:"));
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["template"], 1);
    assert_eq!(c["scsi0"], "local-lvm:base-100-disk-0,size=8G");
    // qemu-server `vm_start` refuses a template in its worker.
    let start = sim
        .task_exit("/nodes/pve1/qemu/100/status/start", &[])
        .await;
    assert_eq!(start, "you can't start a vm if it's a template");
    let st = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            &[("newid", "101"), ("full", "0"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(
        st.fail(500),
        "parameter 'storage' not allowed for linked clones"
    );
    // A template's clone is linked by default; the new VM is locked until the task ends.
    let upid = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            &[("newid", "101"), ("name", "c1")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":qmclone:100:"));
    let during = sim.get("/nodes/pve1/qemu/101/config").await.ok();
    assert_eq!(during["lock"], "clone");
    let locked = sim
        .put("/nodes/pve1/qemu/101/config", &[("cores", "2")])
        .await
        .fail(500);
    assert_eq!(locked, "VM is locked (clone)");
    let res = sim
        .req("GET", "/cluster/resources", &[("type", "vm")])
        .await
        .ok();
    assert!(
        res.as_array()
            .unwrap()
            .iter()
            .any(|r| r["vmid"] == 101 && r["lock"] == "clone")
    );
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/101/config").await.ok();
    assert!(c.get("lock").is_none());
    assert_eq!(c["name"], "c1");
    assert_eq!(
        c["scsi0"],
        "local-lvm:base-100-disk-0/vm-101-disk-0,size=8G"
    );
    assert_ne!(
        c["net0"],
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["net0"],
        "a clone gets a new MAC"
    );
    // An existing newid.
    let exists = sim
        .post("/nodes/pve1/qemu/100/clone", &[("newid", "101")])
        .await
        .fail(500);
    assert_eq!(
        exists,
        "unable to create VM 101: config file already exists"
    );
    // Full clone to another storage.
    sim.wait_ok(
        &sim.post(
            "/nodes/pve1/qemu/100/clone",
            &[("newid", "102"), ("full", "1"), ("storage", "local-lvm")],
        )
        .await
        .ok(),
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/102/config").await.ok()["scsi0"],
        "local-lvm:vm-102-disk-0,size=8G"
    );
    // The template's base volume is in use by the linked clone: its destroy task fails.
    let d = sim
        .wait(&sim.delete("/nodes/pve1/qemu/100", &[]).await.ok())
        .await;
    assert_eq!(
        d["exitstatus"],
        "base volume 'local-lvm:base-100-disk-0' is still in use by linked cloned"
    );
}

fn two_nodes() -> State {
    let mut st = State::demo();
    let mut n2 = st.nodes[0].clone();
    n2.node = "pve2".into();
    for n in [&mut st.nodes[0], &mut n2] {
        n.storages.push(Storage {
            storage: "nfs".into(),
            kind: "nfs".into(),
            shared: true,
            content: vec!["images".into(), "iso".into()],
            ..Storage::default()
        });
    }
    st.nodes.push(n2);
    st
}

#[tokio::test]
async fn clone_to_another_node_needs_shared_storage() {
    let mut cfg = config();
    cfg.state = two_nodes();
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    sim.create_vm("200", &[("scsi0", "nfs:4")]).await;
    let local = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            &[("newid", "101"), ("target", "pve2")],
        )
        .await
        .fail(500);
    assert_eq!(
        local,
        "can't clone VM to node 'pve2' (VM uses local storage)"
    );
    sim.wait_ok(
        &sim.post(
            "/nodes/pve1/qemu/200/clone",
            &[("newid", "201"), ("target", "pve2")],
        )
        .await
        .ok(),
    )
    .await;
    let c = sim.get("/nodes/pve2/qemu/201/config").await.ok();
    assert_eq!(c["scsi0"], "nfs:201/vm-201-disk-0.raw,size=4G");
    // The shared storage shows the same content from both nodes.
    let a = sim.get("/nodes/pve1/storage/nfs/content").await.ok();
    let b = sim.get("/nodes/pve2/storage/nfs/content").await.ok();
    assert_eq!(a, b);
    assert_eq!(a.as_array().unwrap().len(), 2);
    let wrong_node = sim.get("/nodes/pve1/qemu/201/config").await.fail(500);
    assert_eq!(
        wrong_node,
        "Configuration file 'nodes/pve1/qemu-server/201.conf' does not exist"
    );
}

#[tokio::test]
async fn a_clone_gets_its_own_cloud_init_drive() {
    // qemu-server `clone_vm`: the cloud-init drive is cloned as `vm-<newid>-cloudinit`, not
    // shared with the template (a clone pointing at the template's drive would lose its
    // cloud-init settings when either is regenerated).
    let sim = Sim::start().await;
    sim.create_vm(
        "9000",
        &[("scsi0", "local-lvm:2"), ("ide2", "local-lvm:cloudinit")],
    )
    .await;
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/9000/template", &[]).await.ok())
        .await;
    for (newid, full) in [("101", "1"), ("102", "0")] {
        let upid = sim
            .post(
                "/nodes/pve1/qemu/9000/clone",
                &[("newid", newid), ("full", full)],
            )
            .await
            .ok();
        sim.wait_ok(&upid).await;
        let c = sim
            .get(&format!("/nodes/pve1/qemu/{newid}/config"))
            .await
            .ok();
        assert_eq!(
            c["ide2"],
            format!("local-lvm:vm-{newid}-cloudinit,media=cdrom"),
            "{c}"
        );
        let volumes = sim.h.state().volumes;
        assert!(
            volumes
                .iter()
                .any(|v| v.volid == format!("local-lvm:vm-{newid}-cloudinit")
                    && v.vmid == Some(newid.parse().unwrap())),
            "{volumes:?}"
        );
    }
    let t = sim.get("/nodes/pve1/qemu/9000/config").await.ok();
    assert_eq!(t["ide2"], "local-lvm:vm-9000-cloudinit,media=cdrom");
}
