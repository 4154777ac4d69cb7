//! HA resource reads and updates, groups (PVE 8; refused once migrated to rules on PVE 9), the
//! HA status whose service state follows a request a while later, and node memory that counts
//! the running guests.

use crate::support::Sim;
use proxops_pve_sim::PveVersion;
use serde_json::Value;
use std::time::Duration;

async fn guest_status(sim: &Sim, vmid: &str) -> String {
    let cur = sim
        .get(&format!("/nodes/pve1/qemu/{vmid}/status/current"))
        .await
        .ok();
    cur["status"].as_str().unwrap_or_default().to_owned()
}

async fn service(sim: &Sim, sid: &str) -> Value {
    let rows = sim.get("/cluster/ha/status/current").await.ok();
    rows.as_array()
        .into_iter()
        .flatten()
        .find(|r| r["sid"] == sid)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn update_changes_the_request_and_the_guest_follows_later() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[
            ("sid", "vm:100"),
            ("state", "stopped"),
            ("max_restart", "2"),
        ],
    )
    .await
    .ok();
    let one = sim.get("/cluster/ha/resources/vm:100").await.ok();
    assert_eq!(
        (
            one["sid"].as_str(),
            one["state"].as_str(),
            one["max_restart"].as_u64()
        ),
        (Some("vm:100"), Some("stopped"), Some(2))
    );
    let err = sim.get("/cluster/ha/resources/vm:101").await.fail(500);
    assert!(err.contains("no such resource 'vm:101'"), "{err}");
    // A stale digest is refused, a current one accepted.
    let err = sim
        .put(
            "/cluster/ha/resources/vm:100",
            &[("state", "started"), ("digest", "0000")],
        )
        .await
        .fail(500);
    assert!(err.contains("detected modified configuration"), "{err}");
    let digest = one["digest"].as_str().unwrap_or_default().to_owned();
    sim.put(
        "/cluster/ha/resources/vm:100",
        &[
            ("state", "started"),
            ("digest", &digest),
            ("delete", "max_restart"),
        ],
    )
    .await
    .ok();
    // Right after the write the request is there, the guest not yet running.
    let s = service(&sim, "vm:100").await;
    assert_eq!(s["request_state"], "started");
    assert_eq!(s["state"], "starting", "{s}");
    assert_eq!(guest_status(&sim, "100").await, "stopped");
    let mut started = false;
    for _ in 0..200 {
        if guest_status(&sim, "100").await == "running" {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(started, "the CRM never started vm:100");
    assert_eq!(service(&sim, "vm:100").await["state"], "started");
    let one = sim.get("/cluster/ha/resources/vm:100").await.ok();
    assert!(one.get("max_restart").is_none(), "{one}");
    // `disabled` stops it too.
    sim.put("/cluster/ha/resources/vm:100", &[("state", "disabled")])
        .await
        .ok();
    let mut stopped = false;
    for _ in 0..200 {
        if guest_status(&sim, "100").await == "stopped" {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(stopped, "the CRM never stopped vm:100");
    assert_eq!(service(&sim, "vm:100").await["state"], "disabled");
}

#[tokio::test]
async fn groups_on_pve8_and_migrated_to_rules_on_pve9() {
    let sim = Sim::of(PveVersion::V8_4).await;
    sim.create_vm("100", &[]).await;
    let errors = sim
        .post(
            "/cluster/ha/groups",
            &[("group", "prefer"), ("nodes", "nosuch:2")],
        )
        .await
        .errors();
    assert!(errors["nodes"].is_string(), "{errors}");
    sim.post(
        "/cluster/ha/groups",
        &[
            ("group", "prefer"),
            ("nodes", "pve1:2"),
            ("restricted", "1"),
        ],
    )
    .await
    .ok();
    let groups = sim.get("/cluster/ha/groups").await.ok();
    assert_eq!(groups[0]["group"], "prefer");
    assert_eq!(groups[0]["restricted"], 1);
    let err = sim
        .put("/cluster/ha/resources/vm:100", &[("group", "prefer")])
        .await
        .fail(500);
    assert!(err.contains("no such resource"), "{err}");
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped"), ("group", "prefer")],
    )
    .await
    .ok();
    let err = sim
        .put("/cluster/ha/resources/vm:100", &[("group", "other")])
        .await
        .fail(500);
    assert!(err.contains("HA group 'other' does not exist"), "{err}");
    let err = sim.delete("/cluster/ha/groups/prefer", &[]).await.fail(500);
    assert!(
        err.contains("ha group is used by service 'vm:100'"),
        "{err}"
    );
    assert_eq!(
        sim.get("/cluster/ha/resources/vm:100").await.ok()["group"],
        "prefer"
    );

    let sim = Sim::of(PveVersion::V9_1).await;
    sim.create_vm("100", &[]).await;
    let err = sim.get("/cluster/ha/groups").await.fail(500);
    assert!(
        err.contains("cannot index groups: ha groups have been migrated to rules"),
        "{err}"
    );
    let err = sim
        .post(
            "/cluster/ha/groups",
            &[("group", "prefer"), ("nodes", "pve1")],
        )
        .await
        .fail(500);
    assert!(err.contains("migrated to rules"), "{err}");
    let err = sim
        .post(
            "/cluster/ha/resources",
            &[("sid", "vm:100"), ("group", "prefer")],
        )
        .await
        .fail(500);
    assert!(err.contains("migrated to rules"), "{err}");
}

#[tokio::test]
async fn node_memory_counts_running_guests() {
    let sim = Sim::start().await;
    let used = |v: &Value| v["memory"]["used"].as_u64().unwrap_or_default();
    let before = sim.get("/nodes/pve1/status").await.ok();
    sim.create_vm("100", &[("memory", "4096")]).await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let after = sim.get("/nodes/pve1/status").await.ok();
    assert_eq!(used(&after) - used(&before), 2048 << 20, "{after}");
    assert_eq!(
        after["memory"]["free"].as_u64(),
        Some(after["memory"]["total"].as_u64().unwrap_or_default() - used(&after))
    );
    let rows = sim.get("/cluster/resources").await.ok();
    let node = rows
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"] == "node/pve1")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(node["mem"].as_u64(), Some(used(&after)));
}
