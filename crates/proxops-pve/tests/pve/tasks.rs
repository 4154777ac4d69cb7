//! Task waits: growing poll intervals, success on OK and `WARNINGS: N`, failures with exit status
//! and log tail, overall timeouts.

use crate::support::{Sim, config, map, wait};
use proxops_pve::{ErrorKind, GuestRef, PveError, Upid, WaitOptions};
use proxops_pve_sim::{FaultConfig, Task, TaskDurations};
use std::time::{Duration, Instant};

#[tokio::test]
async fn wait_polls_with_backoff_not_a_fixed_interval() {
    let mut cfg = config();
    cfg.task_durations = TaskDurations::uniform(Duration::from_millis(1200));
    let sim = Sim::with(cfg).await;
    let u = sim
        .c
        .create_guest(&GuestRef::qemu("pve1", 100), &map(&[]))
        .await
        .unwrap();
    let opts = wait()
        .with_first_poll(Duration::from_millis(50))
        .with_max_poll(Duration::from_millis(800));
    let out = sim.c.wait_task(&u, &opts).await.unwrap();
    assert_eq!(out.status.exitstatus.as_deref(), Some("OK"));
    assert_eq!(out.warnings, 0);
    // A fixed 50 ms poll would take ~24 polls; growing intervals (50, 75, 112, ...) take ~8.
    assert!(out.polls <= 10, "{} polls", out.polls);
    assert!(
        out.waited >= Duration::from_millis(1100),
        "{:?}",
        out.waited
    );
    assert_eq!(
        sim.h.count("GET", "/nodes/{node}/tasks/{upid}/status"),
        u64::from(out.polls)
    );
}

#[tokio::test]
async fn warnings_are_success() {
    let sim = Sim::start().await;
    let u = Upid::new(
        "pve1",
        4242,
        777,
        1_700_000_000,
        "vzdump",
        "100",
        "root@pam",
    )
    .unwrap();
    sim.h.with_state(|st| {
        st.tasks.push(Task {
            upid: u.to_string(),
            node: "pve1".into(),
            pid: 4242,
            pstart: 777,
            starttime: 1_700_000_000,
            kind: "vzdump".into(),
            id: "100".into(),
            user: "root@pam".into(),
            status: "stopped".into(),
            exitstatus: Some("WARNINGS: 2".into()),
            endtime: Some(1_700_000_010),
            log: vec![
                "WARN: a".into(),
                "WARN: b".into(),
                "TASK WARNINGS: 2".into(),
            ],
        })
    });
    let out = sim.c.wait_task(&u, &wait()).await.unwrap();
    assert_eq!(out.warnings, 2);
    assert!(out.status.succeeded());
}

#[tokio::test]
async fn failure_carries_exit_status_and_log_tail() {
    let mut cfg = config();
    cfg.faults = FaultConfig::default()
        .with_seed(1)
        .with_task_failure_rate(1.0);
    let sim = Sim::with(cfg).await;
    let u = sim
        .c
        .create_guest(
            &GuestRef::qemu("pve1", 100),
            &map(&[("scsi0", "local-lvm:1")]),
        )
        .await
        .unwrap();
    let err = sim.c.wait_task(&u, &wait()).await.unwrap_err();
    let PveError::TaskFailed {
        upid,
        exitstatus,
        log_tail,
    } = &err
    else {
        panic!("expected TaskFailed, got {err}");
    };
    assert_eq!(upid, &u.to_string());
    assert_eq!(
        exitstatus,
        "command failed: exit code 1 (injected task failure)"
    );
    assert_eq!(
        log_tail.last().map(String::as_str),
        Some("TASK ERROR: command failed: exit code 1 (injected task failure)")
    );
    assert_eq!(err.kind(), ErrorKind::TaskFailed);
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn overall_timeout() {
    let mut cfg = config();
    cfg.task_durations = TaskDurations::uniform(Duration::from_secs(30));
    let sim = Sim::with(cfg).await;
    let u = sim
        .c
        .create_guest(&GuestRef::qemu("pve1", 100), &map(&[]))
        .await
        .unwrap();
    let t = Instant::now();
    let err = sim
        .c
        .wait_task(&u, &wait().timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TaskTimeout, "{err}");
    assert!(t.elapsed() < Duration::from_secs(2));
    // Per-type defaults: downloads may take long, power actions should not.
    assert!(WaitOptions::for_task("download").timeout > WaitOptions::for_task("qmstart").timeout);
}
