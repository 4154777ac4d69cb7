//! Cluster-wide endpoints and unknown paths.

use crate::support::Sim;
use serde_json::Value;

#[tokio::test]
async fn version_nodes_and_status() {
    let sim = Sim::start().await;
    let v = sim.get("/version").await.ok();
    assert_eq!(v["release"], "9.1", "9.1 is the default");
    let nodes = sim.get("/nodes").await.ok();
    assert_eq!(nodes[0]["node"], "pve1");
    assert_eq!(nodes[0]["status"], "online");
    assert_eq!(nodes[0]["ssl_fingerprint"], sim.h.fingerprint.as_str());
    let st = sim.get("/cluster/status").await.ok();
    assert_eq!(st[0]["type"], "cluster");
    assert_eq!(st[0]["quorate"], 1);
    assert_eq!(st[1]["type"], "node");
    assert_eq!(st[1]["name"], "pve1");
    let ns = sim.get("/nodes/pve1/status").await.ok();
    assert!(
        ns["pveversion"]
            .as_str()
            .unwrap()
            .starts_with("pve-manager/9.1")
    );
    let missing = sim.get("/nodes/nope/status").await.fail(500);
    assert!(missing.starts_with("hostname lookup 'nope' failed"));
}

#[tokio::test]
async fn resources_with_type_filter() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("name", "web"), ("tags", "b;A")])
        .await;
    let all = sim.get("/cluster/resources").await.ok();
    let types: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"node") && types.contains(&"qemu") && types.contains(&"storage"));
    let vms = sim
        .req("GET", "/cluster/resources", &[("type", "vm")])
        .await
        .ok();
    let vms = vms.as_array().unwrap();
    assert_eq!(vms.len(), 1);
    assert_eq!(vms[0]["id"], "qemu/100");
    assert_eq!(vms[0]["vmid"], 100);
    assert_eq!(vms[0]["node"], "pve1");
    assert_eq!(vms[0]["template"], 0);
    assert_eq!(vms[0]["tags"], "a;b");
    assert_eq!(vms[0]["status"], "stopped");
    let storages = sim
        .req("GET", "/cluster/resources", &[("type", "storage")])
        .await
        .ok();
    assert!(
        storages
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["type"] == "storage")
    );
    assert_eq!(storages[0]["id"], "storage/pve1/local");
    let bad = sim
        .req("GET", "/cluster/resources", &[("type", "bogus")])
        .await
        .errors();
    assert!(bad["type"].as_str().unwrap().contains("enumeration"));
}

#[tokio::test]
async fn nextid_reserves_nothing() {
    let sim = Sim::start().await;
    assert_eq!(sim.get("/cluster/nextid").await.ok(), Value::from("100"));
    assert_eq!(sim.get("/cluster/nextid").await.ok(), Value::from("100"));
    sim.create_vm("100", &[]).await;
    assert_eq!(sim.get("/cluster/nextid").await.ok(), Value::from("101"));
    assert_eq!(
        sim.req("GET", "/cluster/nextid", &[("vmid", "250")])
            .await
            .ok(),
        Value::from("250")
    );
    let taken = sim
        .req("GET", "/cluster/nextid", &[("vmid", "100")])
        .await
        .errors();
    assert_eq!(taken["vmid"], "VM 100 already exists");
}

#[tokio::test]
async fn unknown_paths_and_methods_are_501() {
    let sim = Sim::start().await;
    let msg = sim.get("/nodes/pve1/frobnicate").await.fail(501);
    assert_eq!(msg, "Method 'GET /nodes/pve1/frobnicate' not implemented");
    let msg = sim.req("PATCH", "/version", &[]).await.fail(501);
    assert_eq!(msg, "Method 'PATCH /version' not implemented");
    assert_eq!(sim.h.count("GET", "<unknown>"), 1);
    // Authentication comes first, as in pveproxy.
    let anon = sim
        .send(
            "GET",
            "/nodes/pve1/frobnicate",
            &[],
            &crate::support::Auth::None,
        )
        .await;
    assert_eq!(anon.status, 401);
}

/// The guest rows of `/cluster/resources`, by vmid.
async fn resource_rows(sim: &Sim) -> std::collections::BTreeMap<u64, Value> {
    let rows = sim
        .req("GET", "/cluster/resources", &[("type", "vm")])
        .await
        .ok();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| (r["vmid"].as_u64().unwrap(), r.clone()))
        .collect()
}

#[tokio::test]
async fn cluster_resources_serves_a_stats_snapshot_the_state_file_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    // An hour: no refresh can happen during the test, whatever the machine's speed.
    let cfg = |interval: u64| {
        let mut c = crate::support::config();
        c.stats_interval = std::time::Duration::from_secs(interval);
        c.with_state_file(&path).unwrap()
    };
    let sim = Sim::with(cfg(3600)).await;
    assert!(resource_rows(&sim).await.is_empty(), "snapshot taken now");
    sim.create_vm("100", &[("name", "web"), ("tags", "a")])
        .await;
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;
    sim.h.with_state(|st| {
        st.guests
            .get_mut(&100)
            .unwrap()
            .config
            .insert("lock".into(), "backup".into())
    });
    // A guest new since the snapshot: identity and `status: unknown`; lock and tags are live.
    let row = &resource_rows(&sim).await[&100];
    assert_eq!(row["status"], "unknown", "{row}");
    assert!(
        row.get("template").is_none() && row.get("name").is_none(),
        "{row}"
    );
    assert_eq!(row["tags"], "a");
    assert_eq!(row["lock"], "backup");
    // The per-node list is live.
    let list = sim.get("/nodes/pve1/qemu").await.ok();
    assert_eq!(list[0]["status"], "running");
    assert_eq!(list[0]["name"], "web");
    // Another process on the same state file within the interval serves the same snapshot.
    sim.h.shutdown().await.unwrap();
    let sim = Sim::with(cfg(3600)).await;
    assert_eq!(resource_rows(&sim).await[&100]["status"], "unknown");
    sim.h.shutdown().await.unwrap();
    // Once the interval has passed (here: zero), the snapshot is current.
    let sim = Sim::with(cfg(0)).await;
    let row = &resource_rows(&sim).await[&100];
    assert_eq!(row["status"], "running");
    assert_eq!(row["name"], "web");
    assert_eq!(row["template"], 0);
}

#[tokio::test]
async fn a_stale_snapshot_keeps_the_old_status_and_template_flag() {
    let mut cfg = crate::support::config();
    cfg.stats_interval = std::time::Duration::from_secs(3600);
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    assert_eq!(resource_rows(&sim).await[&100]["status"], "stopped");
    sim.wait_ok(&sim.post("/nodes/pve1/qemu/100/template", &[]).await.ok())
        .await;
    let row = &resource_rows(&sim).await[&100];
    assert_eq!(row["template"], 0, "the snapshot predates the conversion");
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["template"],
        1
    );
    assert_eq!(sim.get("/nodes/pve1/qemu").await.ok()[0]["template"], 1);
}
