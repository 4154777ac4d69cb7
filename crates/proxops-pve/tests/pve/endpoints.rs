//! Every endpoint of the client against the simulator.

use crate::support::{CT_TEMPLATE, Sim, map, wait};
use proxops_pve::{
    CloneRequest, ConfigChange, DestroyOptions, DownloadUrl, ErrorKind, GuestRef, GuestType,
};
use proxops_test_support::serve_files;
use std::collections::HashMap;

#[tokio::test]
async fn cluster_reads() {
    let sim = Sim::start().await;
    let v = sim.c.version().await.unwrap();
    assert_eq!(
        v.version,
        proxops_pve_sim::PveVersion::default().manager_version()
    );
    assert_eq!(v.release_number(), Some((9, 1)));
    // Read once per client: the second ask is answered from memory.
    let before = sim.c.counters().count("GET", "/version");
    assert_eq!(sim.c.pve_version().await.unwrap(), v);
    assert_eq!(sim.c.pve_version().await.unwrap(), v);
    assert_eq!(sim.c.counters().count("GET", "/version"), before + 1);

    let nodes = sim.c.nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].node, "pve1");
    assert_eq!(nodes[0].status, "online");
    assert_eq!(
        nodes[0].ssl_fingerprint.as_deref(),
        Some(sim.h.fingerprint.as_str())
    );

    assert_eq!(sim.c.next_id(None).await.unwrap(), 100);
    sim.create_vm(100, &[]).await;
    assert_eq!(sim.c.next_id(None).await.unwrap(), 101);
    assert_eq!(sim.c.next_id(Some(150)).await.unwrap(), 150);
    let taken = sim.c.next_id(Some(100)).await.unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::BadRequest);
    assert!(taken.api().unwrap().errors.contains_key("vmid"), "{taken}");

    let rows = sim.c.cluster_resources(None).await.unwrap();
    assert!(
        rows.iter()
            .any(|r| r.kind == "node" && r.node.as_deref() == Some("pve1"))
    );
    assert!(
        rows.iter()
            .any(|r| r.kind == "storage" && r.storage.as_deref() == Some("local-lvm"))
    );
    assert!(rows.iter().any(|r| r.kind == "qemu" && r.vmid == Some(100)));
    let vms = sim.c.cluster_resources(Some("vm")).await.unwrap();
    assert!(vms.iter().all(|r| r.kind == "qemu" || r.kind == "lxc"));
    assert_eq!(vms.len(), 1);
}

#[tokio::test]
async fn qemu_lifecycle() {
    let sim = Sim::start().await;
    let g = sim
        .create_vm(
            100,
            &[
                ("name", "web"),
                ("memory", "2048"),
                ("cores", "2"),
                ("scsi0", "local-lvm:4"),
                ("net0", "virtio,bridge=vmbr0"),
                ("tags", "proxops;web"),
            ],
        )
        .await;

    let cfg = sim.c.guest_config(&g).await.unwrap();
    assert_eq!(cfg.get("name"), Some("web"));
    assert_eq!(cfg.get("memory"), Some("2048"));
    assert_eq!(cfg.get("scsi0"), Some("local-lvm:vm-100-disk-0,size=4G"));
    assert!(cfg.get("net0").unwrap().starts_with("virtio=BC:24:11:"));
    assert_eq!(cfg.tags(), ["proxops", "web"]);
    let digest = cfg.digest.clone().unwrap();

    // PUT with digest and delete=.
    sim.c
        .set_config(
            &g,
            &ConfigChange::default()
                .set("cores", "4")
                .set("description", "a b, c & d")
                .delete("tags")
                .digest(&digest),
        )
        .await
        .unwrap();
    let cfg2 = sim.c.guest_config(&g).await.unwrap();
    assert_eq!(cfg2.get("cores"), Some("4"));
    assert_eq!(cfg2.get("description"), Some("a b, c & d"));
    assert_eq!(cfg2.get("tags"), None);
    // A stale digest is refused and not retried.
    let before = sim.h.count("PUT", "/nodes/{node}/qemu/{vmid}/config");
    let stale = sim
        .c
        .set_config(
            &g,
            &ConfigChange::default().set("cores", "1").digest(&digest),
        )
        .await
        .unwrap_err();
    assert!(!stale.is_retryable(), "{stale}");
    assert_eq!(
        sim.h.count("PUT", "/nodes/{node}/qemu/{vmid}/config"),
        before + 1
    );

    // POST (async) config: a new disk needs a worker.
    let upid = sim
        .c
        .set_config_async(&g, &ConfigChange::default().set("scsi1", "local-lvm:2"))
        .await
        .unwrap();
    if let Some(upid) = upid {
        assert_eq!(upid.node, "pve1");
        sim.c.wait_task(&upid, &wait()).await.unwrap();
    }
    assert_eq!(
        sim.c.guest_config(&g).await.unwrap().get("scsi1"),
        Some("local-lvm:vm-100-disk-1,size=2G")
    );

    // Resize (grow).
    if let Some(u) = sim.c.resize(&g, "scsi0", "+1G", None).await.unwrap() {
        sim.c.wait_task(&u, &wait()).await.unwrap();
    }
    assert_eq!(
        sim.c.guest_config(&g).await.unwrap().get("scsi0"),
        Some("local-lvm:vm-100-disk-0,size=5G")
    );

    // Power.
    assert_eq!(sim.c.guest_status(&g).await.unwrap().status, "stopped");
    let u = sim.c.start(&g).await.unwrap();
    assert_eq!(u.kind, "qmstart");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let st = sim.c.guest_status(&g).await.unwrap();
    assert!(st.running());
    assert_eq!(st.vmid, Some(100));
    // Destroying a running VM is a permanent refusal.
    let running = sim
        .c
        .destroy(&g, &DestroyOptions::default())
        .await
        .unwrap_err();
    assert_eq!(running.kind(), ErrorKind::Refused, "{running}");
    let u = sim.c.shutdown(&g, Some(30), Some(true)).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(!sim.c.guest_status(&g).await.unwrap().running());
    let u = sim.c.start(&g).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let u = sim.c.stop(&g).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(!sim.c.guest_status(&g).await.unwrap().running());

    // Template, then a linked clone and a full clone.
    let u = sim
        .c
        .make_template(&g)
        .await
        .unwrap()
        .expect("qemu template is a task");
    assert_eq!(u.kind, "qmtemplate");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(sim.c.guest_status(&g).await.unwrap().template);
    let linked_storage = sim
        .c
        .clone_guest(
            &g,
            &CloneRequest::new(101).with_storage(Some("local-lvm".into())),
        )
        .await
        .unwrap_err();
    assert_eq!(
        linked_storage.kind(),
        ErrorKind::Refused,
        "{linked_storage}"
    );
    let u = sim
        .c
        .clone_guest(&g, &CloneRequest::new(101).with_name(Some("linked".into())))
        .await
        .unwrap();
    assert_eq!(u.kind, "qmclone");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let u = sim
        .c
        .clone_guest(
            &g,
            &CloneRequest::new(102)
                .with_name(Some("full".into()))
                .with_full(Some(true))
                .with_storage(Some("local-lvm".into())),
        )
        .await
        .unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let full = GuestRef::qemu("pve1", 102);
    assert_eq!(
        sim.c.guest_config(&full).await.unwrap().get("name"),
        Some("full")
    );

    // Destroy.
    for vmid in [101, 102, 100] {
        let u = sim
            .c
            .destroy(
                &GuestRef::qemu("pve1", vmid),
                &DestroyOptions::default()
                    .with_purge(Some(true))
                    .with_destroy_unreferenced_disks(Some(true)),
            )
            .await
            .unwrap();
        sim.c.wait_task(&u, &wait()).await.unwrap();
    }
    let gone = sim.c.guest_config(&g).await.unwrap_err();
    assert!(!gone.is_retryable(), "{gone}");
    assert!(sim.h.state().guests.is_empty());
}

#[tokio::test]
async fn lxc_lifecycle() {
    let sim = Sim::start().await;
    sim.add_ct_template();
    let g = GuestRef::lxc("pve1", 200);
    let u = sim
        .c
        .create_guest(
            &g,
            &map(&[
                ("ostemplate", CT_TEMPLATE),
                ("hostname", "ct1"),
                ("rootfs", "local-lvm:8"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("unprivileged", "1"),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(u.kind, "vzcreate");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let cfg = sim.c.guest_config(&g).await.unwrap();
    assert_eq!(cfg.get("rootfs"), Some("local-lvm:vm-200-disk-0,size=8G"));
    assert_eq!(cfg.get("unprivileged"), Some("1"));

    sim.c
        .set_config(
            &g,
            &ConfigChange::default()
                .set("memory", "1024")
                .set("tags", "proxops"),
        )
        .await
        .unwrap();
    assert_eq!(
        sim.c.guest_config(&g).await.unwrap().get("memory"),
        Some("1024")
    );
    let async_refused = sim
        .c
        .set_config_async(&g, &ConfigChange::default())
        .await
        .unwrap_err();
    assert_eq!(async_refused.kind(), ErrorKind::Invalid);

    if let Some(u) = sim.c.resize(&g, "rootfs", "10G", None).await.unwrap() {
        sim.c.wait_task(&u, &wait()).await.unwrap();
    }
    assert_eq!(
        sim.c.guest_config(&g).await.unwrap().get("rootfs"),
        Some("local-lvm:vm-200-disk-0,size=10G")
    );

    let u = sim.c.start(&g).await.unwrap();
    assert_eq!(u.kind, "vzstart");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(sim.c.guest_status(&g).await.unwrap().running());
    let u = sim.c.shutdown(&g, Some(10), None).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let u = sim.c.start(&g).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let u = sim.c.stop(&g).await.unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();

    let u = sim
        .c
        .clone_guest(
            &g,
            &CloneRequest::new(201)
                .with_name(Some("ct2".into()))
                .with_full(Some(true)),
        )
        .await
        .unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let clone = GuestRef::lxc("pve1", 201);
    assert_eq!(
        sim.c.guest_config(&clone).await.unwrap().get("hostname"),
        Some("ct2")
    );

    // LXC template answers null but forks a vztemplate worker: the node's task list names it.
    assert_eq!(sim.c.make_template(&clone).await.unwrap(), None);
    let filter = proxops_pve::TaskFilter::default()
        .with_vmid(Some(201))
        .with_typefilter(Some("vztemplate".into()))
        .with_source(Some("all".into()));
    let tasks = sim.c.node_tasks("pve1", &filter).await.unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].kind, "vztemplate");
    assert_eq!(tasks[0].id.as_deref(), Some("201"));
    let u: proxops_pve::Upid = tasks[0].upid.parse().unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(sim.c.guest_status(&clone).await.unwrap().template);
    // The per-node list shows it live.
    let listed = sim.c.node_guests("pve1", GuestType::Lxc).await.unwrap();
    let row = listed.iter().find(|r| r.vmid == 201).unwrap();
    assert!(row.template);
    assert_eq!(row.status.as_deref(), Some("stopped"));

    for g in [clone, g] {
        let u = sim.c.destroy(&g, &DestroyOptions::default()).await.unwrap();
        sim.c.wait_task(&u, &wait()).await.unwrap();
    }
    assert!(sim.h.state().guests.is_empty());
}

#[tokio::test]
async fn storage_content_and_download() {
    let sim = Sim::start().await;
    sim.add_ct_template();
    let list = sim.c.storage_content("pve1", "local", None).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].volid, CT_TEMPLATE);
    assert_eq!(list[0].format.as_deref(), Some("tzst"));
    assert_eq!(list[0].size, Some(120 << 20));
    assert!(
        sim.c
            .storage_content("pve1", "local", Some("iso"))
            .await
            .unwrap()
            .is_empty()
    );

    let body = b"not really an iso".to_vec();
    let files = serve_files(HashMap::from([("/d.iso".to_string(), body.clone())])).await;
    let u = sim
        .c
        .download_url(
            "pve1",
            "local",
            &DownloadUrl::new(format!("{}/d.iso", files.base), "iso", "d.iso"),
        )
        .await
        .unwrap();
    assert_eq!((u.kind.as_str(), u.id.as_str()), ("download", "d.iso"));
    let out = sim.c.wait_task(&u, &wait()).await.unwrap();
    assert_eq!(out.status.exitstatus.as_deref(), Some("OK"));
    let isos = sim
        .c
        .storage_content("pve1", "local", Some("iso"))
        .await
        .unwrap();
    assert_eq!(isos.len(), 1);
    assert_eq!(isos[0].volid, "local:iso/d.iso");
    assert_eq!(isos[0].size, Some(body.len() as u64));

    // A checksum without its algorithm: 400 naming the parameter.
    let bad = sim
        .c
        .download_url(
            "pve1",
            "local",
            &DownloadUrl::new(format!("{}/d.iso", files.base), "iso", "e.iso")
                .with_checksum(Some("00".into())),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::BadRequest, "{bad}");
    assert!(!bad.api().unwrap().errors.is_empty());

    // The file goes again: an `imgdel` task, the volid passed as one path segment.
    let u = sim
        .c
        .delete_volume("pve1", "local", "local:iso/d.iso")
        .await
        .unwrap()
        .expect("a task");
    assert_eq!(u.kind, "imgdel");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    assert!(
        sim.c
            .storage_content("pve1", "local", Some("iso"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn task_status_and_log() {
    let sim = Sim::start().await;
    let g = GuestRef::qemu("pve1", 100);
    let u = sim.c.create_guest(&g, &map(&[])).await.unwrap();
    assert_eq!(u.node, "pve1");
    assert_eq!(u.kind, "qmcreate");
    assert_eq!(u.id, "100");
    assert_eq!(u.user, sim.h.token.id);
    let st = sim.c.task_status(&u).await.unwrap();
    assert_eq!(st.upid, u.to_string());
    assert_eq!(st.kind, "qmcreate");
    sim.c.wait_task(&u, &wait()).await.unwrap();
    let st = sim.c.task_status(&u).await.unwrap();
    assert!(st.succeeded());
    let log = sim.c.task_log(&u, 0, 50).await.unwrap();
    assert!(!log.is_empty());
    assert_eq!(log[0].n, 1);
    assert_eq!(log.last().unwrap().t, "TASK OK");
    assert_eq!(sim.c.task_log(&u, 0, 1).await.unwrap().len(), 1);
    assert_eq!(GuestType::Qemu.as_str(), "qemu");
}

#[tokio::test]
async fn unknown_path_is_501_and_permanent() {
    let sim = Sim::start().await;
    let e = sim
        .c
        .call_json(
            proxops_pve::Method::GET,
            "/nodes/{node}/nothing",
            "/nodes/pve1/nothing",
            &proxops_pve::Params::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotImplemented);
    assert_eq!(e.status(), Some(501));
    assert!(e.message().contains("not implemented"), "{e}");
    assert_eq!(sim.c.counters().count("GET", "/nodes/{node}/nothing"), 1);
}

#[tokio::test]
async fn guest_interfaces_from_the_agent_and_from_a_container() {
    let cfg = crate::support::config().with_task_durations(
        proxops_pve_sim::TaskDurations::uniform(std::time::Duration::from_millis(20))
            .with_agent_start(std::time::Duration::from_millis(200)),
    );
    let sim = Sim::with(cfg).await;
    let vm = sim
        .create_vm(
            100,
            &[
                ("agent", "1"),
                ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
                ("ipconfig0", "ip=10.1.2.3/24"),
            ],
        )
        .await;
    // Stopped: PVE's refusal, permanent (not retried).
    let before = sim.c.counters().total();
    let stopped = sim.c.agent_interfaces("pve1", 100).await.unwrap_err();
    assert_eq!(stopped.kind(), ErrorKind::Refused, "{stopped}");
    assert_eq!(sim.c.counters().total(), before + 1, "not retried");
    let upid = sim.c.start(&vm).await.unwrap();
    sim.c.wait_task(&upid, &wait()).await.unwrap();
    let booting = sim.c.guest_interfaces(&vm).await.unwrap_err();
    assert!(
        booting
            .to_string()
            .contains("QEMU guest agent is not running"),
        "{booting}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let nics = sim.c.guest_interfaces(&vm).await.unwrap().unwrap();
    assert_eq!(nics[0].name, "lo");
    assert_eq!(nics[1].mac.as_deref(), Some("bc:24:11:00:00:01"));
    assert_eq!(nics[1].addresses[0].address, "10.1.2.3");
    assert_eq!(nics[1].addresses[0].prefix, Some(24));
    assert_eq!(nics[1].addresses[0].family, proxops_pve::IpFamily::Ipv4);

    sim.add_ct_template();
    let ct = GuestRef::lxc("pve1", 200);
    let upid = sim
        .c
        .create_guest(
            &ct,
            &map(&[
                ("ostemplate", CT_TEMPLATE),
                ("rootfs", "local-lvm:4"),
                (
                    "net0",
                    "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:02,ip=10.9.0.2/16",
                ),
            ]),
        )
        .await
        .unwrap();
    sim.c.wait_task(&upid, &wait()).await.unwrap();
    assert_eq!(sim.c.lxc_interfaces("pve1", 200).await.unwrap(), None);
    let upid = sim.c.start(&ct).await.unwrap();
    sim.c.wait_task(&upid, &wait()).await.unwrap();
    let nics = sim.c.guest_interfaces(&ct).await.unwrap().unwrap();
    assert_eq!(nics[1].name, "eth0");
    assert_eq!(nics[1].addresses[0].address, "10.9.0.2");
}
