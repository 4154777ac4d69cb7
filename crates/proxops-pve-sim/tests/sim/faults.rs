//! Fault injection: each kind is observable by a client and reproducible from its seed.

use crate::support::{Sim, config, read};
use proxops_pve_sim::{EndpointClass, FaultConfig, fault_draw};
use std::time::{Duration, Instant};

async fn with_faults(faults: FaultConfig) -> Sim {
    let mut cfg = config();
    cfg.faults = faults;
    Sim::with(cfg).await
}

async fn error_pattern(seed: u64) -> Vec<u16> {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(seed)
            .with_error_rate([(EndpointClass::Read, 0.4)].into()),
    )
    .await;
    let mut out = Vec::new();
    for _ in 0..30 {
        let r = sim.get("/version").await;
        if r.status == 500 {
            assert_eq!(r.reason, "internal error (injected fault)");
        }
        out.push(r.status);
    }
    // Writes are another class: unaffected.
    let upid = sim.post("/nodes/pve1/qemu", &[("vmid", "100")]).await;
    assert_eq!(upid.status, 200);
    out
}

#[tokio::test]
async fn error_rate_is_reproducible_and_predictable() {
    let a = error_pattern(7).await;
    assert_eq!(a, error_pattern(7).await);
    assert!(a.contains(&200) && a.contains(&500), "{a:?}");
    assert_ne!(a, error_pattern(8).await);
    // A client can predict the pattern from the seed: request n of "GET /version" fails when
    // its draw is below the rate.
    let predicted: Vec<u16> = (1..=30)
        .map(|n| {
            if fault_draw(7, "error", "GET /version", n) < 0.4 {
                500
            } else {
                200
            }
        })
        .collect();
    assert_eq!(a, predicted);
}

#[tokio::test]
async fn added_latency() {
    let ms = Duration::from_millis(80);
    let sim = with_faults(FaultConfig::default().with_latency(Some((ms, ms)))).await;
    let t = Instant::now();
    assert_eq!(sim.get("/version").await.status, 200);
    assert!(t.elapsed() >= ms);
}

#[tokio::test]
async fn task_failures_undo_what_they_staged() {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(1)
            .with_task_failure_rate(1.0),
    )
    .await;
    let upid = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("scsi0", "local-lvm:4")],
        )
        .await
        .ok();
    let st = sim.wait(&upid).await;
    assert_eq!(
        st["exitstatus"],
        "command failed: exit code 1 (injected task failure)"
    );
    assert!(sim.h.state().guests.is_empty());
    assert!(sim.h.state().volumes.is_empty());
    let log = sim
        .get(&format!(
            "/nodes/pve1/tasks/{}/log",
            crate::support::enc(upid.as_str().unwrap())
        ))
        .await
        .ok();
    assert_eq!(
        log[0]["t"],
        "TASK ERROR: command failed: exit code 1 (injected task failure)"
    );
}

async fn lock_messages(seed: u64) -> Vec<String> {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(seed)
            .with_lock_contention_rate(0.7),
    )
    .await;
    sim.create_vm("100", &[]).await;
    let mut out = Vec::new();
    for i in 0..20 {
        let r = sim
            .put(
                "/nodes/pve1/qemu/100/config",
                &[("cores", &(1 + i % 4).to_string())],
            )
            .await;
        out.push(if r.status == 200 {
            "ok".to_string()
        } else {
            r.fail(500)
        });
    }
    out
}

#[tokio::test]
async fn lock_contention_reproducible() {
    let a = lock_messages(3).await;
    assert_eq!(a, lock_messages(3).await);
    let kinds = [
        "ok",
        "VM is locked (backup)",
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
    ];
    for k in kinds {
        assert!(a.iter().any(|m| m == k), "{k} never seen in {a:?}");
    }
    assert!(a.iter().all(|m| kinds.contains(&m.as_str())));
}

async fn reset_pattern(seed: u64) -> Vec<bool> {
    let sim = with_faults(FaultConfig::default().with_seed(seed).with_reset_rate(0.5)).await;
    let mut out = Vec::new();
    for _ in 0..16 {
        let r = sim
            .client
            .get(sim.url("/version"))
            .header("Authorization", sim.h.token.header())
            .send()
            .await;
        let ok = match r {
            Ok(resp) => read(resp).await.status == 200,
            Err(e) => {
                assert!(!e.is_timeout(), "{e}");
                false
            }
        };
        out.push(ok);
    }
    out
}

#[tokio::test]
async fn connection_resets_reproducible() {
    let a = reset_pattern(11).await;
    assert!(a.contains(&true) && a.contains(&false), "{a:?}");
    assert_eq!(a, reset_pattern(11).await);
}

#[tokio::test]
async fn proxy_errors_595_596() {
    let sim = with_faults(
        FaultConfig::default()
            .with_seed(5)
            .with_proxy_error_rate(1.0),
    )
    .await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..12 {
        let r = sim.get("/nodes").await;
        match r.status {
            595 => assert_eq!(r.reason, "Connection refused"),
            596 => assert_eq!(r.reason, "Connection timed out"),
            other => panic!("unexpected {other}"),
        }
        seen.insert(r.status);
    }
    assert_eq!(seen.len(), 2);
}

#[tokio::test]
async fn request_counters_in_process_and_at_debug_endpoint() {
    let sim = crate::support::Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.get("/nodes/pve1/qemu/100/config").await.ok();
    sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(sim.h.count("GET", "/nodes/{node}/qemu/{vmid}/config"), 2);
    assert_eq!(sim.h.count("POST", "/nodes/{node}/qemu"), 1);
    assert!(sim.h.count("GET", "/nodes/{node}/tasks/{upid}/status") >= 1);
    let resp = sim
        .client
        .get(format!("{}/_sim/counters", sim.h.root_url()))
        .send()
        .await
        .unwrap();
    let body = read(resp).await.ok();
    assert_eq!(body["GET /nodes/{node}/qemu/{vmid}/config"], 2);
    assert_eq!(
        body.as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        sim.h.total_requests()
    );
    sim.h.reset_counters();
    assert_eq!(sim.h.total_requests(), 0);
}

#[tokio::test]
async fn faults_and_durations_change_while_running() {
    let sim = crate::support::Sim::start().await;
    sim.create_vm("100", &[]).await;
    sim.h
        .set_faults(FaultConfig::default().with_lock_contention_rate(1.0));
    let r = sim
        .put("/nodes/pve1/qemu/100/config", &[("cores", "2")])
        .await
        .fail(500);
    assert!(
        r == "VM is locked (backup)" || r.starts_with("can't lock file"),
        "{r}"
    );
    sim.h.set_faults(FaultConfig::default());
    sim.h
        .set_task_durations(proxops_pve_sim::TaskDurations::uniform(
            Duration::from_millis(300),
        ));
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    assert_eq!(sim.h.tasks_running(), 1);
    assert!(!sim.h.wait_tasks_idle(Duration::from_millis(20)).await);
    assert!(sim.h.wait_tasks_idle(Duration::from_secs(10)).await);
    assert_eq!(sim.wait(&upid).await["exitstatus"], "OK");
}
