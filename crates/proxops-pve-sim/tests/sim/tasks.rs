//! Tasks: UPID format, running then stopped, logs, list filters, stop.

use crate::support::{Sim, config, enc};
use proxops_pve_sim::tasks::Upid;
use std::time::Duration;

#[tokio::test]
async fn upid_running_then_stopped_with_log() {
    let mut cfg = config();
    cfg.task_durations
        .per_type
        .insert("qmcreate".into(), Duration::from_millis(300));
    let sim = Sim::with(cfg).await;
    let upid = sim.post("/nodes/pve1/qemu", &[("vmid", "100")]).await.ok();
    let u = upid.as_str().unwrap().to_string();
    let parts: Vec<&str> = u.split(':').collect();
    assert_eq!(parts.len(), 9, "{u}");
    assert_eq!(
        (parts[0], parts[1], parts[5], parts[6], parts[8]),
        ("UPID", "pve1", "qmcreate", "100", "")
    );
    assert_eq!(parts[7], "root@pam!proxops");
    for hex in &parts[2..5] {
        assert_eq!(hex.len(), 8);
        assert!(
            hex.chars()
                .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
        );
    }
    let parsed = Upid::parse(&u).unwrap();
    assert_eq!(parsed.format(), u);
    let path = format!("/nodes/pve1/tasks/{}/status", enc(&u));
    let running = sim.get(&path).await.ok();
    assert_eq!(running["status"], "running");
    assert!(running.get("exitstatus").is_none());
    assert_eq!(running["type"], "qmcreate");
    assert_eq!(running["upid"], u.as_str());
    let active = sim
        .req("GET", "/nodes/pve1/tasks", &[("source", "active")])
        .await
        .ok();
    assert_eq!(active.as_array().unwrap().len(), 1);
    let done = sim.wait(&upid).await;
    assert_eq!(done["exitstatus"], "OK");
    let log = sim
        .req("GET", &format!("/nodes/pve1/tasks/{}/log", enc(&u)), &[])
        .await;
    assert_eq!(log.body["total"], 1);
    assert_eq!(log.ok()[0], serde_json::json!({ "n": 1, "t": "TASK OK" }));
    let list = sim.get("/nodes/pve1/tasks").await.ok();
    assert_eq!(list[0]["upid"], u.as_str());
    assert_eq!(list[0]["status"], "OK");
    assert!(list[0]["endtime"].as_u64().unwrap() >= list[0]["starttime"].as_u64().unwrap());
}

#[tokio::test]
async fn list_filters_and_errors() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.create_vm("101", &[]).await;
    // A running VM's second start fails in qemu-server's worker.
    let started = sim
        .task_exit("/nodes/pve1/qemu/100/status/start", &[])
        .await;
    assert_eq!(started, "OK");
    let failed = sim
        .task_exit("/nodes/pve1/qemu/100/status/start", &[])
        .await;
    assert_eq!(failed, "VM 100 already running");
    let by_vm = sim
        .req("GET", "/nodes/pve1/tasks", &[("vmid", "101")])
        .await
        .ok();
    assert_eq!(by_vm.as_array().unwrap().len(), 1);
    let by_type = sim
        .req("GET", "/nodes/pve1/tasks", &[("typefilter", "qmstart")])
        .await
        .ok();
    assert_eq!(by_type.as_array().unwrap().len(), 2);
    let errors = sim
        .req("GET", "/nodes/pve1/tasks", &[("errors", "1")])
        .await
        .ok();
    assert_eq!(errors.as_array().unwrap().len(), 1);
    assert_eq!(errors[0]["status"], "VM 100 already running");
    let limited = sim
        .req(
            "GET",
            "/nodes/pve1/tasks",
            &[("limit", "2"), ("start", "1")],
        )
        .await;
    assert_eq!(limited.body["total"], 4);
    assert_eq!(limited.ok().as_array().unwrap().len(), 2);
    let bad = sim.get("/nodes/pve1/tasks/nonsense/status").await.fail(500);
    assert_eq!(bad, "unable to parse worker upid 'nonsense'");
}

#[tokio::test]
async fn stopping_a_running_task() {
    let mut cfg = config();
    cfg.task_durations
        .per_type
        .insert("qmstart".into(), Duration::from_secs(30));
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[]).await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    let u = enc(upid.as_str().unwrap());
    assert_eq!(
        sim.delete(&format!("/nodes/pve1/tasks/{u}"), &[])
            .await
            .ok(),
        serde_json::Value::Null
    );
    let st = sim.wait(&upid).await;
    assert_eq!(st["exitstatus"], "interrupted by signal");
    assert_eq!(sim.h.tasks_running(), 0);
}
