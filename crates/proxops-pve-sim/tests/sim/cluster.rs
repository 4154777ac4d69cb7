//! Cluster-wide endpoints and unknown paths.

use crate::support::Sim;
use serde_json::Value;

#[tokio::test]
async fn version_nodes_and_status() {
    let sim = Sim::start().await;
    let v = sim.get("/version").await.ok();
    assert_eq!(v["version"], proxops_pve_sim::VERSION);
    assert_eq!(v["release"], "8.4");
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
            .starts_with("pve-manager/8.4")
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
}
