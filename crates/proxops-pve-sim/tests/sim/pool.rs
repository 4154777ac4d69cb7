//! Resource pools as pve-manager `PVE/API2/Pool.pm` serves them.

use crate::support::Sim;

#[tokio::test]
async fn pools_hold_guests_and_storages_and_refuse_what_pve_refuses() {
    let sim = Sim::start().await;
    // `check_pool_exist`: a create into a pool that does not exist.
    let e = sim
        .post("/nodes/pve1/qemu", &[("vmid", "100"), ("pool", "web")])
        .await
        .fail(500);
    assert_eq!(e, "pool 'web' does not exist");
    sim.post("/pools", &[("poolid", "web"), ("comment", "front")])
        .await
        .ok();
    let dup = sim.post("/pools", &[("poolid", "web")]).await.fail(500);
    assert_eq!(dup, "pool 'web' already exists");
    let bad = sim.post("/pools", &[("poolid", "other/x")]).await.fail(500);
    assert_eq!(bad, "parent 'other' of pool 'other/x' does not exist");
    sim.create_vm("100", &[("pool", "web")]).await;
    sim.create_vm("101", &[]).await;
    sim.put(
        "/pools",
        &[("poolid", "web"), ("vms", "101"), ("storage", "local")],
    )
    .await
    .ok();
    let again = sim
        .put("/pools", &[("poolid", "web"), ("vms", "101")])
        .await
        .fail(500);
    assert_eq!(again, "VM 101 is already a pool member");
    let list = sim.get("/pools").await.ok();
    assert_eq!(
        list,
        serde_json::json!([{ "poolid": "web", "comment": "front" }])
    );
    let one = sim.get("/pools/web").await.ok();
    let ids: Vec<&str> = one["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["qemu/100", "qemu/101", "storage/pve1/local"]);
    let qemu_only = sim
        .req("GET", "/pools", &[("poolid", "web"), ("type", "qemu")])
        .await
        .ok();
    assert_eq!(qemu_only[0]["members"].as_array().unwrap().len(), 2);
    // Moving a guest to another pool needs allow-move.
    sim.post("/pools", &[("poolid", "db")]).await.ok();
    let no_move = sim
        .put("/pools", &[("poolid", "db"), ("vms", "100")])
        .await
        .fail(500);
    assert_eq!(
        no_move,
        "VM 100 belongs already to pool 'web' and 'allow-move' is not set"
    );
    sim.put(
        "/pools",
        &[("poolid", "db"), ("vms", "100"), ("allow-move", "1")],
    )
    .await
    .ok();
    let resources = sim.get("/cluster/resources?type=vm").await.ok();
    let pool_of = |vmid: u64| {
        resources
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["vmid"] == vmid)
            .map(|r| r["pool"].clone())
    };
    assert_eq!(pool_of(100), Some("db".into()));
    // Only an empty pool can go.
    let full = sim.delete("/pools", &[("poolid", "web")]).await.fail(500);
    assert_eq!(full, "pool 'web' is not empty (contains VM 101)");
    sim.put(
        "/pools/web",
        &[("vms", "101"), ("storage", "local"), ("delete", "1")],
    )
    .await
    .ok();
    sim.delete("/pools/web", &[]).await.ok();
    assert_eq!(
        sim.get("/pools").await.ok(),
        serde_json::json!([{ "poolid": "db" }])
    );
}
