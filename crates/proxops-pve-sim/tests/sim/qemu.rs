//! QEMU guests: create, config read/write (sync and async, delete=, digest, pending), power,
//! clone (full/linked, target rules, clone lock), template, resize, destroy, import-from.

use crate::support::Sim;
use serde_json::Value;

fn conf_str(c: &Value, k: &str) -> String {
    c[k].as_str()
        .unwrap_or_else(|| panic!("{k} missing in {c}"))
        .to_string()
}

#[tokio::test]
async fn create_stores_config_as_pve_does() {
    let sim = Sim::start().await;
    let upid = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "100"),
                ("name", "web"),
                ("memory", "2048"),
                ("cores", "2"),
                ("scsi0", "local-lvm:32,iothread=1"),
                ("net0", "virtio,bridge=vmbr0"),
                ("tags", "Prod, web;prod"),
                ("onboot", "true"),
                ("ide2", "none,media=cdrom"),
            ],
        )
        .await
        .ok();
    let upid_s = upid.as_str().unwrap();
    assert!(
        upid_s.starts_with("UPID:pve1:")
            && upid_s.ends_with(&format!(":qmcreate:100:{}:", sim.h.token.id))
    );
    // While the task runs the VM exists, locked.
    let during = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(during["lock"], "create");
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(
        conf_str(&c, "scsi0"),
        "local-lvm:vm-100-disk-0,iothread=1,size=32G"
    );
    let net = conf_str(&c, "net0");
    assert!(
        net.starts_with("virtio=BC:24:11:") && net.ends_with(",bridge=vmbr0"),
        "{net}"
    );
    assert_eq!(c["tags"], "prod;web");
    assert_eq!(c["onboot"], 1);
    assert_eq!(c["cores"], 2);
    assert_eq!(
        c["memory"], "2048",
        "memory is a property string in 8.4, so a string"
    );
    assert_eq!(c["boot"], "order=scsi0;ide2;net0");
    assert!(conf_str(&c, "smbios1").starts_with("uuid="));
    assert!(c["vmgenid"].is_string() && conf_str(&c, "meta").starts_with("creation-qemu="));
    assert_eq!(conf_str(&c, "digest").len(), 40);
    assert!(c.get("lock").is_none());
    let content = sim.get("/nodes/pve1/storage/local-lvm/content").await.ok();
    assert_eq!(content[0]["volid"], "local-lvm:vm-100-disk-0");
    assert_eq!(content[0]["size"], 32u64 << 30);
    assert_eq!(content[0]["vmid"], 100);
    let list = sim.get("/nodes/pve1/qemu").await.ok();
    assert_eq!(list[0]["vmid"], 100);
    assert_eq!(list[0]["name"], "web");
    assert_eq!(list[0]["maxdisk"], 32u64 << 30);
    // Creating it again fails, synchronously.
    let again = sim
        .post("/nodes/pve1/qemu", &[("vmid", "100")])
        .await
        .fail(500);
    assert_eq!(again, "VM 100 already exists on node 'pve1'");
    let nostorage = sim
        .post("/nodes/pve1/qemu", &[("vmid", "101"), ("scsi0", "nope:8")])
        .await
        .fail(500);
    assert_eq!(nostorage, "storage 'nope' does not exist");
    let wrongcontent = sim
        .post("/nodes/pve1/qemu", &[("vmid", "101"), ("scsi0", "local:8")])
        .await
        .errors();
    assert_eq!(
        wrongcontent["storage"],
        "storage 'local' does not support vm images"
    );
}

#[tokio::test]
async fn config_put_post_delete_digest_and_pending() {
    let sim = Sim::start().await;
    sim.create_vm(
        "100",
        &[
            ("memory", "1024"),
            ("scsi0", "local-lvm:8"),
            ("description", "x"),
        ],
    )
    .await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    let digest = conf_str(&c, "digest");
    // PUT is synchronous (null); a stale digest is refused.
    assert_eq!(
        sim.put(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "4"), ("digest", &digest)]
        )
        .await
        .ok(),
        Value::Null
    );
    let stale = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "2"), ("digest", &digest)],
        )
        .await
        .fail(500);
    // qemu-server's own wording (`update_vm_api`), not pve-container's.
    assert_eq!(stale, "checksum mismatch (file change by other user?)");
    // POST answers a UPID (qmconfig).
    let upid = sim
        .post(
            "/nodes/pve1/qemu/100/config",
            &[("name", "renamed"), ("delete", "description")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":qmconfig:100:"));
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["cores"], 4);
    assert_eq!(c["name"], "renamed");
    assert!(c.get("description").is_none());
    let both = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("name", "a"), ("delete", "name")],
        )
        .await
        .errors();
    assert!(both["name"].is_string());
    // Deleting a disk keeps its volume as unused0; deleting unused0 removes the volume.
    sim.put("/nodes/pve1/qemu/100/config", &[("delete", "scsi0")])
        .await
        .ok();
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["unused0"], "local-lvm:vm-100-disk-0");
    sim.put("/nodes/pve1/qemu/100/config", &[("delete", "unused0")])
        .await
        .ok();
    assert_eq!(
        sim.get("/nodes/pve1/storage/local-lvm/content")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // On a running VM, memory is pending until the next start; name applies at once.
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[("memory", "4096"), ("name", "hot")],
    )
    .await
    .ok();
    let pending = sim.get("/nodes/pve1/qemu/100/pending").await.ok();
    let mem = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "memory")
        .unwrap();
    assert_eq!(mem["value"], "1024");
    assert_eq!(mem["pending"], "4096");

    let name = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "name")
        .unwrap();
    assert!(name.get("pending").is_none());
    let current = sim
        .req("GET", "/nodes/pve1/qemu/100/config", &[("current", "1")])
        .await
        .ok();
    assert_eq!(current["memory"], "1024");
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["memory"],
        "4096"
    );
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok())
        .await;
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    assert_eq!(
        sim.req("GET", "/nodes/pve1/qemu/100/config", &[("current", "1")])
            .await
            .ok()["memory"],
        "4096"
    );
    let missing = sim.get("/nodes/pve1/qemu/999/config").await.fail(500);
    assert_eq!(
        missing,
        "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    );
}

#[tokio::test]
async fn power_status_and_task_errors() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    let cur = sim.get("/nodes/pve1/qemu/100/status/current").await.ok();
    assert_eq!(cur["status"], "stopped");
    assert_eq!(cur["qmpstatus"], "stopped");
    assert_eq!(cur["vmid"], 100);
    // qemu-server `_do_vm_stop` returns at once for a VM that does not run: the task is OK.
    let shut = sim
        .task_exit("/nodes/pve1/qemu/100/status/shutdown", &[])
        .await;
    assert_eq!(shut, "OK");
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/status/current").await.ok()["status"],
        "running"
    );
    let again = sim
        .wait(
            &sim.post("/nodes/pve1/qemu/100/status/start", &[])
                .await
                .ok(),
        )
        .await;
    assert_eq!(again["exitstatus"], "VM 100 already running");
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/shutdown", &[])
            .await
            .ok(),
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/status/current").await.ok()["status"],
        "stopped"
    );
    let idx = sim.get("/nodes/pve1/qemu/100").await.ok();
    assert!(
        idx.as_array()
            .unwrap()
            .iter()
            .any(|s| s["subdir"] == "config")
    );
}

#[tokio::test]
async fn resize_grows_only() {
    let sim = Sim::start().await;
    sim.create_vm(
        "100",
        &[("scsi0", "local-lvm:8"), ("ide2", "none,media=cdrom")],
    )
    .await;
    let upid = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "+2G")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":resize:100:"));
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["scsi0"],
        "local-lvm:vm-100-disk-0,size=10G"
    );
    sim.wait_ok(
        &sim.put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "12G")],
        )
        .await
        .ok(),
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/storage/local-lvm/content").await.ok()[0]["size"],
        12u64 << 30
    );
    let shrink = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "4G")],
        )
        .await
        .fail(500);
    assert_eq!(shrink, "shrinking disks is not supported");
    let cd = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "ide2"), ("size", "+1G")],
        )
        .await
        .fail(500);
    assert_eq!(cd, "you can't resize a cdrom");
    let none = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi5"), ("size", "+1G")],
        )
        .await
        .fail(500);
    assert_eq!(none, "disk 'scsi5' does not exist");
    let bad = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "+lots")],
        )
        .await
        .errors();
    assert!(bad["size"].is_string());
}

#[tokio::test]
async fn destroy_rules() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    let running = sim.delete("/nodes/pve1/qemu/100", &[]).await.fail(500);
    assert_eq!(running, "VM 100 is running - destroy failed");
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok())
        .await;
    sim.put("/nodes/pve1/qemu/100/config", &[("protection", "1")])
        .await
        .ok();
    let prot = sim.delete("/nodes/pve1/qemu/100", &[]).await.fail(500);
    assert_eq!(prot, "can't remove VM 100 - protection mode enabled");
    sim.put("/nodes/pve1/qemu/100/config", &[("delete", "protection")])
        .await
        .ok();
    // An orphan volume with the VMID goes only with destroy-unreferenced-disks.
    sim.h.with_state(|st| {
        let mut v = st.volumes[0].clone();
        v.volid = "local-lvm:vm-100-disk-9".into();
        st.volumes.push(v);
    });
    let upid = sim
        .delete(
            "/nodes/pve1/qemu/100",
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":qmdestroy:100:"));
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        sim.get("/nodes/pve1/storage/local-lvm/content")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let gone = sim.delete("/nodes/pve1/qemu/100", &[]).await.fail(500);
    assert_eq!(
        gone,
        "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"
    );
}

#[tokio::test]
async fn import_from_an_import_volume() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        st.volumes.push(proxops_pve_sim::Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: "local:import/disk.qcow2".into(),
            content: "import".into(),
            format: "qcow2".into(),
            size: 3 << 30,
            ..Default::default()
        });
    });
    sim.create_vm(
        "100",
        &[("scsi0", "local-lvm:0,import-from=local:import/disk.qcow2")],
    )
    .await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["scsi0"], "local-lvm:vm-100-disk-0,size=3G");
    let sized = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "101"),
                ("scsi0", "local-lvm:8,import-from=local:import/disk.qcow2"),
            ],
        )
        .await
        .errors();
    assert!(
        sized["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("'import-from' requires special syntax")
    );
    let missing = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "101"),
                ("scsi0", "local-lvm:0,import-from=local:import/nope.qcow2"),
            ],
        )
        .await
        .fail(500);
    assert_eq!(missing, "volume 'local:import/nope.qcow2' does not exist");
    assert!(!sim.h.state().guests.contains_key(&101));
}

// qemu-server `API2/Qemu.pm` `$check_storage_access`: import sources are image or import
// volumes; an ISO is refused, and so is a whole OVA appliance.
#[tokio::test]
async fn import_from_refuses_isos_and_whole_ovas() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        for (volid, content, format) in [
            ("local:iso/installer.iso", "iso", "iso"),
            ("local:import/appliance.ova", "import", "ova"),
        ] {
            st.volumes.push(proxops_pve_sim::Volume {
                node: "pve1".into(),
                storage: "local".into(),
                volid: volid.into(),
                content: content.into(),
                format: format.into(),
                size: 1 << 30,
                ..Default::default()
            });
        }
    });
    let iso = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "102"),
                ("scsi0", "local-lvm:0,import-from=local:iso/installer.iso"),
            ],
        )
        .await
        .errors();
    assert_eq!(
        iso["scsi0"],
        "local:iso/installer.iso has wrong type 'iso' - needs to be 'images' or 'import'"
    );
    let ova = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "103"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:import/appliance.ova",
                ),
            ],
        )
        .await
        .errors();
    assert!(
        ova["scsi0"].as_str().unwrap().contains("whole OVA"),
        "{ova}"
    );
    assert!(sim.h.state().guests.is_empty());
}

#[tokio::test]
async fn locks_snapshots_and_skiplock() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    sim.h.with_state(|st| {
        let g = st.guests.get_mut(&100).unwrap();
        g.config.insert("lock".into(), "backup".into());
        g.snapshots.push("before-upgrade".into());
    });
    // qemu-server `vm_start` checks the lock in its worker: the task fails.
    let locked = sim
        .task_exit("/nodes/pve1/qemu/100/status/start", &[])
        .await;
    assert_eq!(locked, "VM is locked (backup)");
    let locked = sim.delete("/nodes/pve1/qemu/100", &[]).await.fail(500);
    assert_eq!(locked, "VM is locked (backup)");
    // skiplock passes the lock, for the user root@pam only (not its tokens).
    let token = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "2"), ("skiplock", "1")],
        )
        .await
        .errors();
    assert_eq!(token["skiplock"], "Only root may use this option.");
    let login = sim
        .send(
            "POST",
            "/access/ticket",
            &[
                ("username", "root@pam"),
                ("password", crate::support::PASSWORD),
            ],
            &crate::support::Auth::None,
        )
        .await
        .ok();
    let root = crate::support::Auth::Ticket {
        ticket: login["ticket"].as_str().unwrap().into(),
        csrf: Some(login["CSRFPreventionToken"].as_str().unwrap().into()),
    };
    sim.send(
        "PUT",
        "/nodes/pve1/qemu/100/config",
        &[("cores", "2"), ("skiplock", "1")],
        &root,
    )
    .await
    .ok();
    sim.h.with_state(|st| {
        st.guests.get_mut(&100).unwrap().config.remove("lock");
    });
    let snap = sim
        .post("/nodes/pve1/qemu/100/template", &[])
        .await
        .fail(500);
    assert_eq!(
        snap,
        "unable to create template, because VM contains snapshots"
    );
    let res = sim
        .req("GET", "/cluster/resources", &[("type", "vm")])
        .await
        .ok();
    assert!(res[0].get("lock").is_none());
}

#[tokio::test]
async fn huge_sizes_do_not_overflow() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    let upid = sim
        .put(
            "/nodes/pve1/qemu/100/resize",
            &[("disk", "scsi0"), ("size", "+99999999999999999999T")],
        )
        .await
        .ok();
    sim.wait(&upid).await;
    assert_eq!(sim.get("/version").await.status, 200);
}

#[tokio::test]
async fn cloudinit_and_efi_drives() {
    let sim = Sim::start().await;
    sim.create_vm(
        "100",
        &[
            ("ide2", "local-lvm:cloudinit"),
            ("efidisk0", "local-lvm:1,efitype=4m"),
            ("tpmstate0", "local-lvm:1,version=v2.0"),
            ("ipconfig0", "ip=dhcp"),
        ],
    )
    .await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["ide2"], "local-lvm:vm-100-cloudinit,media=cdrom");
    assert_eq!(c["efidisk0"], "local-lvm:vm-100-disk-0,efitype=4m,size=4M");
    assert_eq!(
        c["tpmstate0"],
        "local-lvm:vm-100-disk-1,size=4M,version=v2.0"
    );
    assert_eq!(c["ipconfig0"], "ip=dhcp");
    let vols = sim.get("/nodes/pve1/storage/local-lvm/content").await.ok();
    assert_eq!(vols.as_array().unwrap().len(), 3);
    sim.wait_ok(&sim.delete("/nodes/pve1/qemu/100", &[]).await.ok())
        .await;
    assert_eq!(
        sim.get("/nodes/pve1/storage/local-lvm/content")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// One row of `GET .../pending`.
async fn pending_row(sim: &Sim, path: &str, key: &str) -> Value {
    let rows = sim.get(path).await.ok();
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} not in {rows}"))
}

async fn start_guest(sim: &Sim, path: &str) {
    sim.wait_ok(&sim.post(path, &[]).await.ok()).await;
}

// qemu-server `vmconfig_hotplug_pending`: fast-plug keys and the enabled hotplug classes apply
// to a running VM at once; the rest (cores, enabling the agent, a disk's cache mode) stays
// pending until a start applies it.
#[tokio::test]
async fn running_vm_applies_hotpluggable_keys_and_keeps_the_rest_pending() {
    let sim = Sim::start().await;
    // The node has a second bridge for the NIC to move to.
    sim.h
        .with_state(|st| st.nodes[0].bridges.push("vmbr1".into()));
    sim.create_vm(
        "100",
        &[
            ("cores", "2"),
            ("scsi0", "local-lvm:8"),
            ("net0", "virtio,bridge=vmbr0"),
        ],
    )
    .await;
    start_guest(&sim, "/nodes/pve1/qemu/100/status/start").await;
    let scsi0 = conf_str(&sim.get("/nodes/pve1/qemu/100/config").await.ok(), "scsi0");
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[
            ("cores", "4"),
            ("agent", "1"),
            ("cpulimit", "2"),
            ("shares", "500"),
            ("scsi0", &format!("{scsi0},cache=writeback")),
        ],
    )
    .await
    .ok();
    let p = "/nodes/pve1/qemu/100/pending";
    for key in ["cores", "agent", "scsi0"] {
        let row = pending_row(&sim, p, key).await;
        assert!(
            row.get("pending").is_some(),
            "{key} should be pending: {row}"
        );
    }
    for key in ["cpulimit", "shares"] {
        let row = pending_row(&sim, p, key).await;
        assert!(row.get("pending").is_none(), "{key} should apply: {row}");
    }
    let current = sim
        .req("GET", "/nodes/pve1/qemu/100/config", &[("current", "1")])
        .await
        .ok();
    assert_eq!(current["cores"], 2);
    assert!(current.get("agent").is_none());
    assert_eq!(current["cpulimit"], 2.0);
    // Without `current`, the pending values are merged in.
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["cores"],
        4
    );

    // With hotplug off, a NIC model change is pending; a bridge change still applies.
    sim.put("/nodes/pve1/qemu/100/config", &[("hotplug", "0")])
        .await
        .ok();
    let net0 = conf_str(&current, "net0");
    let mac = net0
        .split(',')
        .next()
        .and_then(|m| m.split_once('='))
        .map(|(_, mac)| mac.to_string())
        .unwrap();
    // `hotplug` itself applies at once (no cpu or memory in it).
    assert!(
        pending_row(&sim, p, "hotplug")
            .await
            .get("pending")
            .is_none()
    );
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[("net0", &format!("e1000={mac},bridge=vmbr0"))],
    )
    .await
    .ok();
    assert!(pending_row(&sim, p, "net0").await.get("pending").is_some());
    sim.put("/nodes/pve1/qemu/100/config", &[("revert", "net0")])
        .await
        .ok();
    sim.put(
        "/nodes/pve1/qemu/100/config",
        &[("net0", &format!("virtio={mac},bridge=vmbr1"))],
    )
    .await
    .ok();
    assert!(pending_row(&sim, p, "net0").await.get("pending").is_none());

    // A stop keeps the pending changes; the start applies them.
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/100/status/stop", &[]).await.ok())
        .await;
    assert!(pending_row(&sim, p, "cores").await.get("pending").is_some());
    start_guest(&sim, "/nodes/pve1/qemu/100/status/start").await;
    let rows = sim.get(p).await.ok();
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("pending").is_none() && r.get("delete").is_none()),
        "{rows}"
    );
    let after = sim
        .req("GET", "/nodes/pve1/qemu/100/config", &[("current", "1")])
        .await
        .ok();
    assert_eq!(after["cores"], 4);
    assert_eq!(after["agent"], "1");
    assert!(conf_str(&after, "scsi0").contains("cache=writeback"));
}

// PVE's digest is the SHA-1 of the whole config file, `[PENDING]` section included: a change
// left pending makes an older digest stale.
#[tokio::test]
async fn a_pending_write_changes_the_digest() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("cores", "1")]).await;
    start_guest(&sim, "/nodes/pve1/qemu/100/status/start").await;
    let before = conf_str(&sim.get("/nodes/pve1/qemu/100/config").await.ok(), "digest");
    sim.put("/nodes/pve1/qemu/100/config", &[("cores", "2")])
        .await
        .ok();
    assert!(pending_row(&sim, "/nodes/pve1/qemu/100/pending", "cores").await["pending"] == "2");
    let stale = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "3"), ("digest", &before)],
        )
        .await
        .fail(500);
    assert_eq!(stale, "checksum mismatch (file change by other user?)");
}

#[tokio::test]
async fn reboot_reset_suspend_and_resume_as_qemu_server_does_them() {
    // qemu-server `API2/Qemu.pm` `vm_reboot`, `vm_reset`, `vm_suspend`, `vm_resume`: each needs
    // a running VM; a reboot (shutdown and start in one worker) applies pending changes, a
    // reset does not; a suspended VM stays `running` with `qmpstatus: paused`.
    let sim = Sim::start().await;
    sim.create_vm("100", &[("memory", "1024")]).await;
    let base = "/nodes/pve1/qemu/100/status";
    let refused = sim.post(&format!("{base}/reboot"), &[]).await.fail(500);
    assert_eq!(refused, "VM 100 not running");
    sim.wait_ok(&sim.post(&format!("{base}/start"), &[]).await.ok())
        .await;
    // Memory without hotplug waits for a restart.
    sim.put("/nodes/pve1/qemu/100/config", &[("memory", "2048")])
        .await
        .ok();
    let upid = sim.post(&format!("{base}/reset"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmreset:100:"));
    sim.wait_ok(&upid).await;
    let current = sim.get("/nodes/pve1/qemu/100/config?current=1").await.ok();
    assert_eq!(
        current["memory"], "1024",
        "a reset keeps the pending change pending"
    );
    let upid = sim.post(&format!("{base}/reboot"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":qmreboot:100:"));
    sim.wait_ok(&upid).await;
    let current = sim.get("/nodes/pve1/qemu/100/config?current=1").await.ok();
    assert_eq!(current["memory"], "2048", "the reboot applied it");
    sim.wait_ok(&sim.post(&format!("{base}/suspend"), &[]).await.ok())
        .await;
    let s = sim.get(&format!("{base}/current")).await.ok();
    assert_eq!(
        (s["status"].as_str(), s["qmpstatus"].as_str()),
        (Some("running"), Some("paused"))
    );
    sim.wait_ok(&sim.post(&format!("{base}/resume"), &[]).await.ok())
        .await;
    let s = sim.get(&format!("{base}/current")).await.ok();
    assert_eq!(s["qmpstatus"], "running");
}

#[tokio::test]
async fn the_guest_agent_answers_once_configured_and_running() {
    // qemu-server `PVE::QemuServer::Agent::assert_agent_available` and `API2/Qemu/Agent.pm`.
    let sim = Sim::start().await;
    sim.h
        .with_state(|st| st.nodes[0].bridges.push("vmbr1".into()));
    sim.create_vm(
        "100",
        &[
            ("name", "web"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("net1", "virtio=BC:24:11:00:00:02,bridge=vmbr1"),
            ("ipconfig0", "ip=10.1.2.3/24,gw=10.1.2.1"),
            ("ipconfig1", "ip=dhcp"),
        ],
    )
    .await;
    let agent = "/nodes/pve1/qemu/100/agent";
    let none = sim.post(&format!("{agent}/ping"), &[]).await.fail(500);
    assert_eq!(none, "No QEMU guest agent configured");
    sim.put("/nodes/pve1/qemu/100/config", &[("agent", "1")])
        .await
        .ok();
    let stopped = sim
        .get(&format!("{agent}/network-get-interfaces"))
        .await
        .fail(500);
    assert_eq!(stopped, "VM 100 is not running");
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    // The guest boots before its agent answers (`TaskDurations::agent_start`).
    let mut ping = sim.post(&format!("{agent}/ping"), &[]).await;
    for _ in 0..200 {
        if ping.status == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        ping = sim.post(&format!("{agent}/ping"), &[]).await;
    }
    assert_eq!(ping.ok(), serde_json::json!({ "result": {} }));
    let nics = sim
        .get(&format!("{agent}/network-get-interfaces"))
        .await
        .ok();
    let nics = nics["result"].as_array().unwrap();
    assert_eq!(nics.len(), 3);
    assert_eq!(nics[1]["name"], "eth0");
    assert_eq!(nics[1]["hardware-address"], "bc:24:11:00:00:01");
    assert_eq!(nics[1]["ip-addresses"][0]["ip-address"], "10.1.2.3");
    assert_eq!(nics[1]["ip-addresses"][0]["prefix"], 24);
    // A lease derived from the MAC.
    assert_eq!(nics[2]["ip-addresses"][0]["ip-address"], "10.0.0.2");
    let host = sim.get(&format!("{agent}/get-host-name")).await.ok();
    assert_eq!(host["result"]["host-name"], "web");
    let os = sim.get(&format!("{agent}/get-osinfo")).await.ok();
    assert_eq!(os["result"]["id"], "linux");
}

#[tokio::test]
async fn move_disk_keeps_or_deletes_the_source_and_unlink_detaches_or_destroys() {
    // qemu-server `API2/Qemu.pm` `move_vm_disk` (`$load_and_check_move`, the `qmmove` worker)
    // and `unlink` (`update_vm` with `delete`, `force` destroying).
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        st.nodes[0].storages.push(proxops_pve_sim::Storage {
            storage: "fast".into(),
            kind: "lvmthin".into(),
            content: vec!["images".into()],
            ..proxops_pve_sim::Storage::default()
        });
    });
    sim.create_vm("100", &[("scsi0", "local-lvm:2"), ("scsi1", "local-lvm:1")])
        .await;
    let mv = "/nodes/pve1/qemu/100/move_disk";
    let same = sim
        .post(mv, &[("disk", "scsi0"), ("storage", "local-lvm")])
        .await
        .fail(500);
    assert_eq!(same, "you can't move to the same storage with same format");
    let iso = sim
        .post(mv, &[("disk", "scsi0"), ("storage", "local")])
        .await
        .errors();
    assert_eq!(iso["storage"], "storage 'local' does not support vm images");
    let upid = sim
        .post(mv, &[("disk", "scsi0"), ("storage", "fast")])
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":qmmove:100:"));
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(
        c["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("fast:vm-100-disk-"),
        "{c}"
    );
    assert_eq!(c["unused0"], "local-lvm:vm-100-disk-0");
    // unlink: scsi1 kept as unused; with force, unused0 destroyed.
    sim.put("/nodes/pve1/qemu/100/unlink", &[("idlist", "scsi1")])
        .await
        .ok();
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(c.get("scsi1").is_none());
    assert_eq!(c["unused1"], "local-lvm:vm-100-disk-1");
    sim.put(
        "/nodes/pve1/qemu/100/unlink",
        &[("idlist", "unused0"), ("force", "1")],
    )
    .await
    .ok();
    let state = sim.h.state();
    assert!(
        !state
            .volumes
            .iter()
            .any(|v| v.volid == "local-lvm:vm-100-disk-0")
    );
    assert!(
        state
            .volumes
            .iter()
            .any(|v| v.volid == "local-lvm:vm-100-disk-1")
    );
}
