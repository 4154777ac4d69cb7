//! Changes PVE keeps pending on a running guest: the planner compares what the guest runs with
//! (`current=1`), so a pending change is never converged; it plans the restart PVE needs, stops
//! a guest declared stopped before writing, and reports "pending until restart" (a stuck plan)
//! when it may not restart.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, PlanState, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{ConfigChange, GuestRef, PveClient};

const CLUSTER: &str = "t";

fn vm(agent: bool, state: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  state: {state}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 4GiB\n  options:\n    agent: {agent}\n"
    )
}

async fn plan_with(client: &PveClient, text: &str, restarts: bool) -> ClusterPlan {
    let options = PlanOptions::default().with_restarts(restarts);
    plan_cluster(client, CLUSTER, &graph_of(&[text]), &options)
        .await
        .unwrap()
}

async fn run(client: &PveClient, plan: &ClusterPlan) {
    let report = execute(client, plan, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
}

fn web() -> GuestRef {
    GuestRef::qemu("pve1", 120)
}

/// A simulator with `web` created from `vm(false, "started")`, running.
async fn running_web() -> (proxops_pve_sim::SimHandle, PveClient) {
    let (sim, client) = simulator(one_node()).await;
    let p = plan_with(&client, &vm(false, "started"), true).await;
    run(&client, &p).await;
    assert_eq!(client.guest_status(&web()).await.unwrap().status, "running");
    (sim, client)
}

async fn nothing_pending(client: &PveClient) {
    let rows = client.guest_pending(&web()).await.unwrap();
    assert!(rows.iter().all(|r| !r.is_pending()), "{rows:#?}");
}

// Enabling the agent on a running VM waits for its next start (qemu-server
// `vmconfig_update_agent`): the update restarts the VM, after which nothing is pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_pve_keeps_pending_is_applied_by_a_planned_restart() {
    let (sim, client) = running_web().await;
    let p = plan_with(&client, &vm(true, "started"), true).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let a = &p.actions[0];
    assert_eq!(a.verb, Verb::Update);
    assert!(a.restart, "{p:#?}");
    run(&client, &p).await;
    nothing_pending(&client).await;
    let live = client.guest_config(&web()).await.unwrap().values;
    assert_eq!(live["agent"], "1");
    assert_eq!(client.guest_status(&web()).await.unwrap().status, "running");
    let again = plan_with(&client, &vm(true, "started"), true).await;
    assert_eq!(again.state(), PlanState::InSync, "{again:#?}");
    sim.shutdown().await.unwrap();
}

// A change someone left pending (written while the VM ran) is not converged: the VM runs
// without it. The plan restarts the VM so that it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_left_pending_is_not_converged() {
    let (sim, client) = running_web().await;
    client
        .set_config(&web(), &ConfigChange::default().set("agent", "1"))
        .await
        .unwrap();
    let rows = client.guest_pending(&web()).await.unwrap();
    assert!(
        rows.iter().any(|r| r.key == "agent" && r.is_pending()),
        "{rows:#?}"
    );
    let p = plan_with(&client, &vm(true, "started"), true).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert!(p.actions[0].restart, "{p:#?}");
    run(&client, &p).await;
    nothing_pending(&client).await;
    assert_eq!(
        client.guest_config(&web()).await.unwrap().values["agent"],
        "1"
    );
    sim.shutdown().await.unwrap();
}

// When restarts are not allowed the change is reported, pending until restart: the plan has no
// action for it and is stuck, so `apply` exits non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_restarts_a_pending_change_is_reported_and_stuck() {
    let (sim, client) = running_web().await;
    client
        .set_config(&web(), &ConfigChange::default().set("agent", "1"))
        .await
        .unwrap();
    for text in [vm(true, "started"), vm(false, "started")] {
        let p = plan_with(&client, &text, false).await;
        assert_eq!(p.state(), PlanState::Stuck, "{p:#?}");
        assert!(p.actions.is_empty(), "{p:#?}");
        assert!(
            p.anomalies
                .iter()
                .any(|a| a.message.contains("agent: pending until restart")),
            "{p:#?}"
        );
    }
    sim.shutdown().await.unwrap();
}

// A running VM declared stopped is stopped before the write, so PVE applies the change at
// once: nothing is left pending for a start that is not wanted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_declared_stopped_is_stopped_before_the_write() {
    let (sim, client) = running_web().await;
    let p = plan_with(&client, &vm(true, "stopped"), true).await;
    let verbs: Vec<Verb> = p.actions.iter().map(|a| a.verb).collect();
    assert_eq!(verbs, [Verb::Stop, Verb::Update], "{p:#?}");
    assert!(!p.actions[1].restart, "{p:#?}");
    run(&client, &p).await;
    nothing_pending(&client).await;
    assert_eq!(client.guest_status(&web()).await.unwrap().status, "stopped");
    assert_eq!(
        client.guest_config(&web()).await.unwrap().values["agent"],
        "1"
    );
    let again = plan_with(&client, &vm(true, "stopped"), true).await;
    assert_eq!(again.state(), PlanState::InSync, "{again:#?}");
    sim.shutdown().await.unwrap();
}
