//! HA-managed guests: the resources API, `hastate` in /cluster/resources, power requests that
//! only queue for the HA manager (`hastart`/`hastop`) and destroy needing `purge`.

use crate::support::Sim;
use std::time::Duration;

async fn status(sim: &Sim, path: &str) -> String {
    let cur = sim.get(&format!("{path}/status/current")).await.ok();
    cur["status"].as_str().unwrap().to_string()
}

async fn wait_status(sim: &Sim, path: &str, want: &str) {
    for _ in 0..200 {
        if status(sim, path).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path} never became {want}");
}

#[tokio::test]
async fn resources_api_and_hastate() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    assert_eq!(
        sim.get("/cluster/ha/resources").await.ok(),
        serde_json::json!([])
    );
    let err = sim
        .post("/cluster/ha/resources", &[("sid", "vm:999")])
        .await
        .fail(500);
    assert!(
        err.contains("resource 'vm:999' does not exist in cluster"),
        "{err}"
    );
    let err = sim
        .post("/cluster/ha/resources", &[("sid", "ct:100")])
        .await
        .fail(500);
    assert!(
        err.contains("guest with ID 100 is not a container"),
        "{err}"
    );
    // A bare VMID is resolved through the VM list.
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "100"), ("state", "stopped")],
    )
    .await
    .ok();
    let err = sim
        .post("/cluster/ha/resources", &[("sid", "vm:100")])
        .await
        .fail(500);
    assert!(
        err.contains("resource ID 'vm:100' already defined"),
        "{err}"
    );
    let list = sim.get("/cluster/ha/resources").await.ok();
    assert_eq!(list[0]["sid"], "vm:100");
    assert_eq!(list[0]["type"], "vm");
    assert_eq!(list[0]["state"], "stopped");
    assert!(list[0]["digest"].is_string());
    assert_eq!(
        sim.req("GET", "/cluster/ha/resources", &[("type", "ct")])
            .await
            .ok(),
        serde_json::json!([])
    );
    let res = sim.get("/cluster/resources").await.ok();
    let row = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "qemu/100")
        .unwrap()
        .clone();
    assert_eq!(row["hastate"], "stopped");
    let cur = sim.get("/nodes/pve1/qemu/100/status/current").await.ok();
    assert_eq!(cur["ha"]["managed"], 1);
    sim.delete("/cluster/ha/resources/vm:100", &[]).await.ok();
    let err = sim
        .delete("/cluster/ha/resources/vm:100", &[])
        .await
        .fail(500);
    assert!(
        err.contains("cannot delete service 'vm:100', not HA managed!"),
        "{err}"
    );
    let res = sim.get("/cluster/resources").await.ok();
    assert!(
        res.as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("hastate").is_none())
    );
    // The resources survive in the state (persisted with it).
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
    )
    .await
    .ok();
    assert_eq!(sim.h.state().ha_resources["vm:100"].state, "stopped");
}

#[tokio::test]
async fn power_calls_on_ha_guests_queue_a_request() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
    )
    .await
    .ok();
    let path = "/nodes/pve1/qemu/100";
    let upid = sim.post(&format!("{path}/status/start"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":hastart:100:"), "{upid}");
    sim.wait_ok(&upid).await;
    // The task only queued the request: the guest runs a little later.
    assert_eq!(status(&sim, path).await, "stopped");
    assert_eq!(
        sim.get("/cluster/ha/resources").await.ok()[0]["state"],
        "started"
    );
    let node = upid
        .as_str()
        .unwrap()
        .split(':')
        .nth(1)
        .unwrap()
        .to_string();
    let log = sim
        .get(&format!(
            "/nodes/{node}/tasks/{}/log",
            crate::support::enc(upid.as_str().unwrap())
        ))
        .await
        .ok();
    assert_eq!(log[0]["t"], "Requesting HA start for VM 100");
    wait_status(&sim, path, "running").await;
    for op in ["shutdown", "stop"] {
        let upid = sim.post(&format!("{path}/status/{op}"), &[]).await.ok();
        assert!(upid.as_str().unwrap().contains(":hastop:100:"), "{upid}");
        sim.wait_ok(&upid).await;
        wait_status(&sim, path, "stopped").await;
    }
}

#[tokio::test]
async fn destroy_of_an_ha_guest_needs_purge() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
    )
    .await
    .ok();
    let err = sim.delete("/nodes/pve1/qemu/100", &[]).await.fail(500);
    assert!(
        err.contains("unable to remove VM 100 - used in HA resources and purge parameter not set."),
        "{err}"
    );
    let upid = sim
        .delete("/nodes/pve1/qemu/100", &[("purge", "1")])
        .await
        .ok();
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get("/cluster/ha/resources").await.ok(),
        serde_json::json!([])
    );
}

#[tokio::test]
async fn containers_use_ct_sids_and_ignored_resources_are_not_managed() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        st.guests.insert(
            200,
            proxops_pve_sim::Guest {
                vmid: 200,
                kind: proxops_pve_sim::GuestType::Lxc,
                node: "pve1".into(),
                status: "stopped".into(),
                ..Default::default()
            },
        );
    });
    let err = sim
        .post("/cluster/ha/resources", &[("sid", "vm:200")])
        .await
        .fail(500);
    assert!(err.contains("guest with ID 200 is not a VM"), "{err}");
    // Added as `started` (the default), the HA stack starts it without a power call.
    sim.post("/cluster/ha/resources", &[("sid", "200")])
        .await
        .ok();
    let path = "/nodes/pve1/lxc/200";
    wait_status(&sim, path, "running").await;
    let upid = sim.post(&format!("{path}/status/shutdown"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":hastop:200:"), "{upid}");
    sim.wait_ok(&upid).await;
    wait_status(&sim, path, "stopped").await;
    let err = sim.delete(path, &[]).await.fail(500);
    assert!(
        err.contains("unable to remove CT 200 - used in HA resources and purge parameter not set."),
        "{err}"
    );
    // An ignored resource behaves as if not HA managed (`service_check_ha_state`).
    sim.delete("/cluster/ha/resources/ct:200", &[]).await.ok();
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "ct:200"), ("state", "ignored")],
    )
    .await
    .ok();
    let upid = sim.post(&format!("{path}/status/start"), &[]).await.ok();
    assert!(upid.as_str().unwrap().contains(":vzstart:200:"), "{upid}");
    sim.wait_ok(&upid).await;
    assert_eq!(status(&sim, path).await, "running");
    let cur = sim.get(&format!("{path}/status/current")).await.ok();
    assert_eq!(cur["ha"]["managed"], 0);
}
