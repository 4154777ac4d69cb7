//! LXC containers: create needs an existing ostemplate, config, template in a forked
//! `vztemplate` worker (which can fail), clone, power and destroy.

use crate::support::Sim;
use proxops_pve_sim::Volume;

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

async fn sim_with_template() -> Sim {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        })
    });
    sim
}

#[tokio::test]
async fn create_needs_an_existing_ostemplate() {
    let sim = sim_with_template().await;
    let missing = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", "local:vztmpl/nope.tar.zst"),
                ("rootfs", "local-lvm:8"),
            ],
        )
        .await;
    assert_eq!(
        missing.fail(500),
        "volume 'local:vztmpl/nope.tar.zst' does not exist"
    );
    let no_param = sim
        .post("/nodes/pve1/lxc", &[("vmid", "200")])
        .await
        .errors();
    assert_eq!(
        no_param["ostemplate"],
        "property is missing and it is not optional"
    );
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("hostname", "ct1"),
                ("rootfs", "local-lvm:8"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("unprivileged", "1"),
                ("tags", "proxops"),
            ],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":vzcreate:200:"));
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/lxc/200/config").await.ok();
    assert_eq!(c["rootfs"], "local-lvm:vm-200-disk-0,size=8G");
    let net = c["net0"].as_str().unwrap();
    assert!(
        net.starts_with("name=eth0,bridge=vmbr0,hwaddr=BC:24:11:")
            && net.ends_with(",ip=dhcp,type=veth"),
        "{net}"
    );
    assert_eq!(c["arch"], "amd64");
    assert_eq!(c["ostype"], "debian");
    assert_eq!(c["hostname"], "ct1");
    assert_eq!(c["unprivileged"], 1);
    let list = sim.get("/nodes/pve1/lxc").await.ok();
    assert_eq!(list[0]["vmid"], 200);
    assert_eq!(list[0]["type"], "lxc");
    let res = sim
        .req("GET", "/cluster/resources", &[("type", "vm")])
        .await
        .ok();
    assert_eq!(res[0]["id"], "lxc/200");
}

#[tokio::test]
async fn config_power_template_clone_destroy() {
    let sim = sim_with_template().await;
    sim.wait_ok(
        &sim.post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:4"),
            ],
        )
        .await
        .ok(),
    )
    .await;
    assert_eq!(
        sim.put(
            "/nodes/pve1/lxc/200/config",
            &[("memory", "1024"), ("cores", "2")]
        )
        .await
        .ok(),
        serde_json::Value::Null
    );
    let c = sim.get("/nodes/pve1/lxc/200/config").await.ok();
    assert_eq!(c["memory"], 1024);
    assert_eq!(c["cores"], 2);
    let root = sim
        .put("/nodes/pve1/lxc/200/config", &[("delete", "rootfs")])
        .await
        .errors();
    assert!(root["rootfs"].is_string());
    sim.wait_ok(&sim.post("/nodes/pve1/lxc/200/status/start", &[]).await.ok())
        .await;
    assert_eq!(
        sim.get("/nodes/pve1/lxc/200/status/current").await.ok()["status"],
        "running"
    );
    let refused = sim
        .post("/nodes/pve1/lxc/200/template", &[])
        .await
        .fail(500);
    assert_eq!(
        refused,
        "you can't convert a CT to template if the CT is running"
    );
    // pve-container `destroy_vm`: its own wording; `force` would stop it first.
    let destroy = sim.delete("/nodes/pve1/lxc/200", &[]).await.fail(500);
    assert_eq!(destroy, "unable to destroy CT 200 - container is running");
    let upid = sim
        .post("/nodes/pve1/lxc/200/status/shutdown", &[])
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":vzshutdown:200:"));
    sim.wait_ok(&upid).await;
    // LXC template answers null but forks a vztemplate worker, found in the task list.
    assert_eq!(
        sim.post("/nodes/pve1/lxc/200/template", &[]).await.ok(),
        serde_json::Value::Null
    );
    let upid = vztemplate_task(&sim, "200").await;
    sim.wait_ok(&upid).await;
    let again = sim
        .post("/nodes/pve1/lxc/200/template", &[])
        .await
        .fail(500);
    assert_eq!(again, "you can't convert a template to a template");
    let c = sim.get("/nodes/pve1/lxc/200/config").await.ok();
    assert_eq!(c["template"], 1);
    assert_eq!(c["rootfs"], "local-lvm:base-200-disk-0,size=4G");
    let upid = sim
        .post(
            "/nodes/pve1/lxc/200/clone",
            &[("newid", "201"), ("hostname", "c")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":vzclone:200:"));
    assert_eq!(
        sim.get("/nodes/pve1/lxc/201/config").await.ok()["lock"],
        "clone"
    );
    sim.wait_ok(&upid).await;
    let c = sim.get("/nodes/pve1/lxc/201/config").await.ok();
    assert_eq!(
        c["rootfs"],
        "local-lvm:base-200-disk-0/vm-201-disk-0,size=4G"
    );
    assert_eq!(c["hostname"], "c");
    let upid = sim.delete("/nodes/pve1/lxc/201", &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":vzdestroy:201:"));
    sim.wait_ok(&upid).await;
    sim.wait_ok(&sim.delete("/nodes/pve1/lxc/200", &[]).await.ok())
        .await;
    let gone = sim.get("/nodes/pve1/lxc/200/config").await.fail(500);
    assert_eq!(
        gone,
        "Configuration file 'nodes/pve1/lxc/200.conf' does not exist"
    );
    // Resize of an lxc volume.
    sim.wait_ok(
        &sim.post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "202"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:4"),
            ],
        )
        .await
        .ok(),
    )
    .await;
    sim.wait_ok(
        &sim.put(
            "/nodes/pve1/lxc/202/resize",
            &[("disk", "rootfs"), ("size", "+1G")],
        )
        .await
        .ok(),
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/lxc/202/config").await.ok()["rootfs"],
        "local-lvm:vm-202-disk-0,size=5G"
    );
    let idx = sim.get("/nodes/pve1/lxc/202").await.ok();
    assert!(
        idx.as_array()
            .unwrap()
            .iter()
            .any(|s| s["subdir"] == "status")
    );
    let pending = sim.get("/nodes/pve1/lxc/202/pending").await.ok();
    assert!(
        pending
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == "rootfs")
    );
}

// pve-container `PVE::LXC::Config::vmconfig_hotplug_pending`: `$LXC_FASTPLUG_OPTIONS` (cores,
// onboot, ...), memory and NICs apply to a running CT; `tty` or `features` stay pending
// until the next start.
#[tokio::test]
async fn running_ct_applies_fast_plug_keys_and_keeps_the_rest_pending() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        let mut g = proxops_pve_sim::Guest {
            vmid: 210,
            kind: proxops_pve_sim::GuestType::Lxc,
            node: "pve1".into(),
            status: "running".into(),
            ..Default::default()
        };
        for (k, v) in [
            ("hostname", "ct"),
            ("cores", "1"),
            ("tty", "2"),
            ("memory", "512"),
            // A token may change `features` of an unprivileged CT only.
            ("unprivileged", "1"),
        ] {
            g.config.insert(k.into(), v.into());
        }
        st.guests.insert(210, g);
    });
    sim.put(
        "/nodes/pve1/lxc/210/config",
        &[
            ("cores", "2"),
            ("memory", "1024"),
            ("onboot", "1"),
            ("tty", "4"),
            ("features", "nesting=1"),
        ],
    )
    .await
    .ok();
    let current = sim
        .req("GET", "/nodes/pve1/lxc/210/config", &[("current", "1")])
        .await
        .ok();
    assert_eq!(current["cores"], 2);
    assert_eq!(current["memory"], 1024);
    assert_eq!(current["onboot"], 1);
    assert_eq!(current["tty"], 2);
    assert!(current.get("features").is_none());
    let merged = sim.get("/nodes/pve1/lxc/210/config").await.ok();
    assert_eq!(merged["tty"], 4);
    sim.wait_ok(&sim.post("/nodes/pve1/lxc/210/status/stop", &[]).await.ok())
        .await;
    sim.wait_ok(&sim.post("/nodes/pve1/lxc/210/status/start", &[]).await.ok())
        .await;
    let after = sim
        .req("GET", "/nodes/pve1/lxc/210/config", &[("current", "1")])
        .await
        .ok();
    assert_eq!(after["tty"], 4);
    assert_eq!(after["features"], "nesting=1");
}

/// The newest `vztemplate` task of a CT on pve1 (what a caller of the null-answering template
/// call has to look up).
async fn vztemplate_task(sim: &Sim, vmid: &str) -> serde_json::Value {
    let list = sim
        .req(
            "GET",
            "/nodes/pve1/tasks",
            &[
                ("vmid", vmid),
                ("typefilter", "vztemplate"),
                ("source", "all"),
            ],
        )
        .await
        .ok();
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 1, "one vztemplate task: {list}");
    rows[0]["upid"].clone()
}

async fn stopped_ct(sim: &Sim, vmid: &str, rootfs: &str) {
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[("vmid", vmid), ("ostemplate", TEMPLATE), ("rootfs", rootfs)],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
}

#[tokio::test]
async fn template_worker_failure_is_the_tasks_and_leaves_the_ct_a_ct() {
    let mut cfg = crate::support::config();
    cfg.faults.failing_tasks = vec!["vztemplate".into()];
    let sim = Sim::with(cfg).await;
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        })
    });
    stopped_ct(&sim, "210", "local-lvm:4").await;
    // The call itself succeeds: the failure is only in the worker.
    assert_eq!(
        sim.post("/nodes/pve1/lxc/210/template", &[]).await.ok(),
        serde_json::Value::Null
    );
    let upid = vztemplate_task(&sim, "210").await;
    let status = sim.wait(&upid).await;
    assert!(
        status["exitstatus"]
            .as_str()
            .unwrap()
            .contains("injected task failure"),
        "{status}"
    );
    let c = sim.get("/nodes/pve1/lxc/210/config").await.ok();
    assert!(c.get("template").is_none(), "{c}");
    assert_eq!(c["rootfs"], "local-lvm:vm-210-disk-0,size=4G");
}

#[tokio::test]
async fn template_worker_refuses_storage_without_the_template_feature() {
    let sim = sim_with_template().await;
    sim.h.with_state(|st| {
        st.nodes[0].storages.push(proxops_pve_sim::Storage {
            storage: "thick".into(),
            kind: "lvm".into(),
            content: vec!["rootdir".into(), "images".into()],
            ..Default::default()
        })
    });
    stopped_ct(&sim, "211", "thick:4").await;
    assert_eq!(
        sim.post("/nodes/pve1/lxc/211/template", &[]).await.ok(),
        serde_json::Value::Null
    );
    let upid = vztemplate_task(&sim, "211").await;
    let status = sim.wait(&upid).await;
    assert_eq!(
        status["exitstatus"],
        "Template feature is not available for 'thick:vm-211-disk-0'"
    );
    let c = sim.get("/nodes/pve1/lxc/211/config").await.ok();
    assert!(c.get("template").is_none(), "{c}");
}

#[tokio::test]
async fn a_running_ct_is_destroyed_only_with_force_which_stops_it_first() {
    // pve-container `API2/LXC.pm` `destroy_vm` (`force`: "forced to stop CT ... before
    // destroying!").
    let sim = sim_with_template().await;
    stopped_ct(&sim, "200", "local-lvm:1").await;
    sim.wait_ok(&sim.post("/nodes/pve1/lxc/200/status/start", &[]).await.ok())
        .await;
    let refused = sim.delete("/nodes/pve1/lxc/200", &[]).await.fail(500);
    assert_eq!(refused, "unable to destroy CT 200 - container is running");
    let upid = sim
        .delete("/nodes/pve1/lxc/200", &[("force", "1")])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let log = sim
        .get(&format!("/nodes/pve1/tasks/{}/log", upid.as_str().unwrap()))
        .await
        .ok();
    assert!(
        log.to_string()
            .contains("forced to stop CT 200 before destroying!"),
        "{log}"
    );
    assert!(sim.h.state().guests.is_empty());
}
