//! PVE's `lock` property (issue 30, point 3): a guest PVE locked for other work between plan and
//! execution (a nightly vzdump, a snapshot) is deferred with the lock's name and retried next
//! cycle, never failed and never written; once the work is done, the change goes through.
//! Engine + simulator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{apply, plan, sim, vm};
use proxops_engine::execute::{ExecOptions, Outcome, execute};
use proxops_pve::{Method, Params, PveClient};
use proxops_pve_sim::{SimHandle, TaskDurations};
use std::time::Duration;

/// Starts a vzdump of `vmid` that runs for about `secs` seconds; returns its UPID.
async fn start_backup(sim: &SimHandle, client: &PveClient, vmid: u32, secs: u64) -> String {
    let mut durations = TaskDurations::uniform(Duration::from_millis(10));
    durations
        .per_type
        .insert("vzdump".into(), Duration::from_secs(secs));
    sim.set_task_durations(durations);
    let upid = client
        .call_json(
            Method::POST,
            "/nodes/{node}/vzdump",
            "/nodes/pve1/vzdump",
            &Params::new()
                .set("vmid", vmid.to_string())
                .set("storage", "local"),
        )
        .await
        .unwrap();
    upid.as_str().unwrap().to_owned()
}

/// The vzdump worker takes the guest's lock after the POST answered with its UPID, as PVE's
/// `PVE::VZDump::exec_backup_task` does; waits (bounded) until it holds.
async fn wait_for_lock(sim: &SimHandle, vmid: u32, name: &str) {
    for _ in 0..500 {
        if config_of(sim, vmid).get("lock").map(String::as_str) == Some(name) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("guest {vmid} never got the lock '{name}'");
}

fn config_of(sim: &SimHandle, vmid: u32) -> std::collections::BTreeMap<String, String> {
    sim.with_state(|st| st.guests[&vmid].config.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_locked_by_a_backup_is_deferred_not_failed_and_not_written() {
    let (sim, client) = sim().await;
    sim.with_state(|st| {
        for n in &mut st.nodes {
            for s in &mut n.storages {
                if s.storage == "local" {
                    s.content.push("backup".into());
                }
            }
        }
    });
    let web = vm("web", 101, "node: pve1", "local-lvm", "");
    apply(&client, std::slice::from_ref(&web)).await;
    let bigger = web.replace("memory: 4GiB", "memory: 6GiB");
    // Planned while the guest is free; the nightly backup starts before the change is sent, and
    // outlasts the execution even on a loaded machine.
    let p = plan(&client, std::slice::from_ref(&bigger)).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let backup = start_backup(&sim, &client, 101, 8).await;
    wait_for_lock(&sim, 101, "backup").await;
    let before = config_of(&sim, 101);
    let report = execute(&client, &p, &ExecOptions::default()).await;
    match &report.results[0].outcome {
        Outcome::Deferred { reason, blocked_by } => {
            assert!(blocked_by.is_empty());
            assert_eq!(reason.as_deref(), Some("locked (backup)"));
        }
        other => panic!("a locked guest must be deferred, not {other:?}"),
    }
    assert!(!report.all_succeeded());
    assert_eq!(config_of(&sim, 101), before, "nothing written while locked");

    // The next cycle plans it as blocked while the backup runs, and applies it after.
    let blocked = plan(&client, std::slice::from_ref(&bigger)).await;
    assert!(blocked.actions.is_empty(), "{blocked:#?}");
    assert!(
        blocked
            .skipped
            .iter()
            .any(|s| s.reason.contains("locked (backup)")),
        "{blocked:#?}"
    );
    client
        .wait_task(
            &backup.parse().unwrap(),
            &proxops_pve::WaitOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(config_of(&sim, 101).get("lock"), None);
    apply(&client, std::slice::from_ref(&bigger)).await;
    assert_eq!(
        config_of(&sim, 101).get("memory").map(String::as_str),
        Some("6144")
    );
    // One archive, and no failed task of ProxOps's along the way.
    let failed: Vec<(String, Option<String>)> = sim.with_state(|st| {
        st.tasks
            .iter()
            .filter(|t| t.exitstatus.as_deref().is_some_and(|s| s != "OK"))
            .map(|t| (t.kind.clone(), t.exitstatus.clone()))
            .collect()
    });
    assert!(failed.is_empty(), "{failed:?}");
    sim.shutdown().await.unwrap();
}
