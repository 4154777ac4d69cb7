//! Resource pools as pve-manager `PVE/API2/Pool.pm` serves them.

use crate::support::Sim;

#[tokio::test]
async fn pools_hold_guests_and_storages_and_refuse_what_pve_refuses() {
    let sim = Sim::start().await;
    // `check_pool_exist`: a create into a pool that does not exist.
    let e = sim
        .post("/nodes/pve1/qemu", &[("vmid", "100"), ("pool", "web")])
        .await
        .fail(403);
    assert_eq!(e, "Permission check failed (pool 'web' does not exist)");
    sim.post("/pools", &[("poolid", "web"), ("comment", "front")])
        .await
        .ok();
    let dup = sim.post("/pools", &[("poolid", "web")]).await.fail(500);
    // Failures under `lock_user_config` carry its message.
    assert_eq!(dup, "create pool failed: pool 'web' already exists");
    let bad = sim.post("/pools", &[("poolid", "other/x")]).await.fail(500);
    assert_eq!(
        bad,
        "create pool failed: parent 'other' of pool 'other/x' does not exist"
    );
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
    assert_eq!(
        again,
        "update pools failed: VM 101 is already a pool member"
    );
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
        "update pools failed: VM 100 belongs already to pool 'web' and 'allow-move' is not set"
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
    assert_eq!(
        full,
        "delete pool failed: pool 'web' is not empty (contains VM 101)"
    );
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

/// A token holding a pool's privileges and `VM.Allocate` on its guests only.
async fn pool_admin() -> (Sim, crate::support::Auth) {
    use proxops_pve_sim::{AclEntry, ApiToken};
    let mut cfg = crate::support::config();
    let ops = ApiToken::new("ops@pve!pools", "s");
    cfg.extra_tokens.push(ops.clone());
    let grant = |path: &str, privs: &[&str]| AclEntry {
        principal: ops.id.clone(),
        path: path.into(),
        privs: privs.iter().map(|p| (*p).to_owned()).collect(),
        propagate: true,
    };
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        grant(
            "/pool/web",
            &["Pool.Allocate", "Pool.Audit", "VM.Audit", "VM.Allocate"],
        ),
        grant("/pool/db", &["Pool.Allocate"]),
        grant("/vms/102", &["VM.Allocate"]),
    ]);
    let sim = Sim::with(cfg).await;
    for pool in ["web", "db", "other"] {
        sim.post("/pools", &[("poolid", pool)]).await.ok();
    }
    sim.create_vm("100", &[("pool", "web")]).await;
    sim.create_vm("101", &[("pool", "other")]).await;
    sim.create_vm("102", &[]).await;
    (sim, crate::support::Auth::Header(ops.header()))
}

// pve-access-control `RPCEnvironment.pm` `$compile_acl_path` (pool roles reach the pool's
// guests) and `check_perm_modify`; pve-manager `PVE/API2/Pool.pm` `update_pool` (`allow-move`
// needs `Pool.Allocate` on the pool the guest leaves).
#[tokio::test]
async fn pool_grants_reach_members_and_moves_need_both_pools() {
    let (sim, ops) = pool_admin().await;
    // The pool's VM.Audit reaches VM 100, not VM 102.
    let ok = sim
        .send("GET", "/nodes/pve1/qemu/100/config", &[], &ops)
        .await;
    assert_eq!(ok.status, 200);
    let denied = sim
        .send("GET", "/nodes/pve1/qemu/102/config", &[], &ops)
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/vms/102, VM.Audit)"
    );
    // VM.Allocate (not Permissions.Modify) lets it add VM 102 to db.
    let put = |params: Vec<(&'static str, &'static str)>| {
        let (sim, ops) = (&sim, &ops);
        async move { sim.send("PUT", "/pools", &params, ops).await }
    };
    put(vec![("poolid", "db"), ("vms", "102")]).await.ok();
    // Moving VM 100 from web to db: Pool.Allocate on web, held.
    put(vec![("poolid", "db"), ("vms", "100"), ("allow-move", "1")])
        .await
        .ok();
    // Moving VM 101 out of `other` needs Pool.Allocate there first: VM.Allocate on it is
    // missing, so check_perm_modify refuses, under the user.cfg lock.
    let refused = put(vec![("poolid", "db"), ("vms", "101"), ("allow-move", "1")]).await;
    assert_eq!(
        refused.fail(500),
        "update pools failed: Permission check failed (/vms/101, Permissions.Modify|VM.Allocate)"
    );
    // Nothing of a refused update stays.
    let st = sim.h.state();
    assert_eq!(st.guests[&101].pool.as_deref(), Some("other"));
    assert_eq!(st.guests[&100].pool.as_deref(), Some("db"));
}

#[tokio::test]
async fn a_move_out_of_a_pool_without_pool_allocate_is_refused() {
    use proxops_pve_sim::{AclEntry, ApiToken};
    let mut cfg = crate::support::config();
    let ops = ApiToken::new("ops@pve!mover", "s");
    cfg.extra_tokens.push(ops.clone());
    let grant = |path: &str, privs: &[&str]| AclEntry {
        principal: ops.id.clone(),
        path: path.into(),
        privs: privs.iter().map(|p| (*p).to_owned()).collect(),
        propagate: true,
    };
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        grant("/pool/db", &["Pool.Allocate"]),
        grant("/vms", &["VM.Allocate"]),
    ]);
    let sim = Sim::with(cfg).await;
    sim.post("/pools", &[("poolid", "web")]).await.ok();
    sim.post("/pools", &[("poolid", "db")]).await.ok();
    sim.create_vm("100", &[("pool", "web")]).await;
    let refused = sim
        .send(
            "PUT",
            "/pools",
            &[("poolid", "db"), ("vms", "100"), ("allow-move", "1")],
            &crate::support::Auth::Header(ops.header()),
        )
        .await;
    assert_eq!(
        refused.fail(500),
        "update pools failed: Permission check failed (/pool/web, Pool.Allocate)"
    );
}
