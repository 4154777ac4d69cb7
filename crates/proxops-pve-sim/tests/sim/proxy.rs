//! pveproxy's timeout on synchronous calls. pve-http-server `src/PVE/APIServer/AnyEvent.pm`
//! `proxy_request` forwards every `protected` call to pvedaemon with `timeout => 30`; when no
//! answer comes in time AnyEvent::HTTP reports `596` with the handle's error text (`Connection
//! timed out`) and pveproxy answers that, with no body, while pvedaemon finishes the request.
//! A config write that allocates or imports storage works inside the call (qemu-server
//! `API2/Qemu.pm` `update_vm_api` with `$sync`; pve-container `API2/LXC/Config.pm` `update_vm`
//! through `update_pct_config` and `vmconfig_apply_pending`), so it can run into that limit;
//! POST config forks a `qmconfig` worker and answers its UPID at once.

use crate::support::{Resp, Sim, config};
use proxops_pve_sim::{PVE_PROXY_TIMEOUT, TaskDurations, Volume};
use proxops_test_support::sim::volumes_of;
use std::time::{Duration, Instant};

const PROXY: Duration = Duration::from_millis(300);
const ALLOC: Duration = Duration::from_millis(900);
const CT_TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// A simulator whose pveproxy gives up after 300 ms, and whose allocations take `alloc`.
async fn slow_storage(alloc: Duration) -> Sim {
    let mut cfg = config();
    cfg.task_durations.proxy_timeout = PROXY;
    cfg.task_durations.sync_work.insert("alloc".into(), alloc);
    cfg.task_durations.sync_work.insert("import".into(), alloc);
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    sim
}

/// Polls (bounded) until the config has `key`; returns its value and when it appeared.
async fn appears(sim: &Sim, path: &str, key: &str) -> (String, Instant) {
    for _ in 0..300 {
        let c = sim.get(path).await.ok();
        if let Some(v) = c[key].as_str() {
            return (v.to_string(), Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{key} never appeared in {path}");
}

fn assert_timed_out(r: &Resp) {
    assert_eq!(r.status, 596, "{} {} {}", r.status, r.reason, r.body);
    assert_eq!(r.reason, "Connection timed out");
    // pveproxy passes AnyEvent::HTTP's undefined body on: nothing.
    assert!(r.body.is_null(), "{}", r.body);
}

#[test]
fn the_proxy_timeout_follows_the_task_time() {
    // A task time d runs the simulator at d / 10 s of PVE's speed: 30 s become 3 d, the config
    // lock's 10 s become d.
    let d = TaskDurations::uniform(Duration::from_millis(50));
    assert_eq!(d.proxy_timeout, Duration::from_millis(150));
    assert_eq!(d.lock_timeout(), Duration::from_millis(50));
    assert_eq!(d.sync_of("alloc"), Duration::from_millis(50));
    let pve_speed = TaskDurations::uniform(Duration::from_secs(10));
    assert_eq!(pve_speed.proxy_timeout, PVE_PROXY_TIMEOUT);
    assert_eq!(
        TaskDurations::default().proxy_timeout,
        Duration::from_millis(600)
    );
}

#[tokio::test]
async fn a_slow_synchronous_allocation_answers_596_and_still_lands() {
    let sim = slow_storage(ALLOC).await;
    let before = volumes_of(&sim.h, 100);
    let sent = Instant::now();
    let r = sim
        .put("/nodes/pve1/qemu/100/config", &[("scsi1", "local-lvm:2")])
        .await;
    let took = sent.elapsed();
    assert_timed_out(&r);
    assert!(took >= PROXY && took < ALLOC, "answered after {took:?}");
    // The work goes on: nothing written yet, then the disk as PUT would have written it.
    let now = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(now.get("scsi1").is_none(), "{now}");
    let (scsi1, at) = appears(&sim, "/nodes/pve1/qemu/100/config", "scsi1").await;
    assert_eq!(scsi1, "local-lvm:vm-100-disk-1,size=2G");
    assert!(
        at.duration_since(sent) >= ALLOC,
        "landed after {:?}",
        at - sent
    );
    let after = volumes_of(&sim.h, 100);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
}

#[tokio::test]
async fn work_within_the_timeout_answers_when_done() {
    let sim = slow_storage(Duration::from_millis(150)).await;
    let sent = Instant::now();
    sim.put("/nodes/pve1/qemu/100/config", &[("scsi1", "local-lvm:2")])
        .await
        .ok();
    assert!(sent.elapsed() >= Duration::from_millis(150));
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["scsi1"], "local-lvm:vm-100-disk-1,size=2G");
    // A write without storage work answers at once.
    let sent = Instant::now();
    sim.put("/nodes/pve1/qemu/100/config", &[("cores", "2")])
        .await
        .ok();
    assert!(sent.elapsed() < Duration::from_millis(150));
    // A refusal answers at once too: the checks come before the work.
    let sent = Instant::now();
    let stale = sim
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("scsi2", "local-lvm:2"), ("digest", "0000")],
        )
        .await
        .fail(500);
    assert_eq!(stale, "checksum mismatch (file change by other user?)");
    assert!(sent.elapsed() < Duration::from_millis(150));
}

// pve-guest-common `PVE/AbstractConfig.pm` `lock_config`: the work holds the guest's config
// lock; another write waits 10 s for it (here a third of the proxy timeout), then gives up.
#[tokio::test]
async fn the_work_holds_the_config_lock() {
    let sim = slow_storage(ALLOC).await;
    let r = sim
        .put("/nodes/pve1/qemu/100/config", &[("scsi1", "local-lvm:2")])
        .await;
    assert_timed_out(&r);
    let locked = sim
        .put("/nodes/pve1/qemu/100/config", &[("cores", "2")])
        .await
        .fail(500);
    assert_eq!(
        locked,
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"
    );
    appears(&sim, "/nodes/pve1/qemu/100/config", "scsi1").await;
    sim.put("/nodes/pve1/qemu/100/config", &[("cores", "2")])
        .await
        .ok();
}

// qemu-server `update_vm_async`: POST forks a `qmconfig` worker at once, whatever the work; the
// worker writes the change when it is done.
#[tokio::test]
async fn post_config_answers_a_upid_and_is_not_cut() {
    let sim = slow_storage(ALLOC).await;
    let sent = Instant::now();
    let upid = sim
        .post("/nodes/pve1/qemu/100/config", &[("scsi1", "local-lvm:2")])
        .await
        .ok();
    assert!(
        sent.elapsed() < PROXY,
        "answered after {:?}",
        sent.elapsed()
    );
    assert!(upid.as_str().unwrap().contains(":qmconfig:100:"), "{upid}");
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(
        c.get("scsi1").is_none(),
        "not before the worker is done: {c}"
    );
    let status = sim.wait(&upid).await;
    assert_eq!(status["exitstatus"], "OK");
    assert!(sent.elapsed() >= ALLOC, "the task ran for the work");
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["scsi1"], "local-lvm:vm-100-disk-1,size=2G");
    let u = crate::support::enc(upid.as_str().unwrap());
    let log = sim.get(&format!("/nodes/pve1/tasks/{u}/log")).await.ok();
    assert_eq!(log[0]["t"], "update VM 100: -scsi1 local-lvm:2");
    // Its early checks answer at once.
    let stale = sim
        .post(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "2"), ("digest", "0000")],
        )
        .await
        .fail(500);
    assert_eq!(stale, "checksum mismatch (file change by other user?)");
}

// pve-container has no asynchronous config write: a new mount point is allocated inside the
// PUT (`apply_pending_mountpoint` → `PVE::LXC::create_disks`), so it is cut the same way.
#[tokio::test]
async fn an_lxc_mount_point_allocation_is_cut_and_lands() {
    let sim = slow_storage(ALLOC).await;
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: CT_TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        })
    });
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", CT_TEMPLATE),
                ("rootfs", "local-lvm:8"),
            ],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let r = sim
        .put(
            "/nodes/pve1/lxc/200/config",
            &[("mp0", "local-lvm:4,mp=/data")],
        )
        .await;
    assert_timed_out(&r);
    let (mp0, _) = appears(&sim, "/nodes/pve1/lxc/200/config", "mp0").await;
    assert_eq!(mp0, "local-lvm:vm-200-disk-1,mp=/data,size=4G");
    let locked = sim
        .put("/nodes/pve1/lxc/200/config", &[("memory", "1024")])
        .await;
    assert_eq!(locked.status, 200, "the lock is free once it landed");
}

// qemu-server `update_vm_api`: with `background_delay` (seconds, scaled like every PVE time
// here: 30 s are the proxy timeout) POST waits that long for its worker, answers `null` when it
// ended well, `failed to update VM N: ...` when it failed, and the UPID when it still runs.
#[tokio::test]
async fn background_delay_waits_for_the_worker() {
    let sim = slow_storage(Duration::from_millis(50)).await;
    let done = sim
        .post(
            "/nodes/pve1/qemu/100/config",
            &[("scsi1", "local-lvm:2"), ("background_delay", "30")],
        )
        .await
        .ok();
    assert!(done.is_null(), "{done}");
    let c = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(c["scsi1"], "local-lvm:vm-100-disk-1,size=2G");
    // 1 s at PVE speed is 10 ms here: the 50 ms allocation still runs.
    let running = sim
        .post(
            "/nodes/pve1/qemu/100/config",
            &[("scsi2", "local-lvm:2"), ("background_delay", "1")],
        )
        .await
        .ok();
    assert!(running.as_str().unwrap().contains(":qmconfig:100:"));
    sim.wait_ok(&running).await;
    sim.h.set_faults(
        proxops_pve_sim::FaultConfig::default().with_failing_tasks(vec!["qmconfig".into()]),
    );
    let failed = sim
        .post(
            "/nodes/pve1/qemu/100/config",
            &[("cores", "2"), ("background_delay", "30")],
        )
        .await
        .fail(500);
    assert_eq!(
        failed,
        "failed to update VM 100: command failed: exit code 1 (injected task failure)"
    );
}
