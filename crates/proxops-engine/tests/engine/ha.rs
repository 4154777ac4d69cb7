//! HA-managed guests against the simulator: a start or stop returns an `hastart`/`hastop` task
//! that only queues the request, so the action waits for the guest's live status; a delete of
//! an HA guest goes through because the engine sends `purge=1`.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{GuestRef, Method, Params, PveClient, PveError, WaitOptions};
use proxops_pve_sim::TaskDurations;
use std::time::Duration;

fn vm(state: &str) -> String {
    named("web", 120, state)
}

/// `db` (121) stays declared, so that a plan without `web` may delete it.
fn db() -> String {
    named("db", 121, "stopped")
}

fn named(name: &str, vmid: u32, state: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: pve1\n  vmid: {vmid}\n  state: {state}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 4GiB\n"
    )
}

fn web() -> GuestRef {
    GuestRef::qemu("pve1", 120)
}

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, "t", &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

/// Quick polls, so that an engine waiting only for the task returns well before the HA stack
/// acts (one more `hastart` task time after the task).
fn options() -> ExecOptions {
    ExecOptions::default().with_wait(Some(WaitOptions {
        first_poll: Duration::from_millis(10),
        max_poll: Duration::from_millis(20),
        ..WaitOptions::default().timeout(Duration::from_secs(10))
    }))
}

async fn add_ha(client: &PveClient, sid: &str) {
    let params = Params::new().set("sid", sid).set("state", "stopped");
    client
        .call_json(
            Method::POST,
            "/cluster/ha/resources",
            "/cluster/ha/resources",
            &params,
        )
        .await
        .unwrap();
}

/// A simulator with `web` created stopped and made HA-managed, HA tasks taking 300 ms.
async fn ha_web() -> (proxops_pve_sim::SimHandle, PveClient) {
    let (sim, client) = simulator(one_node()).await;
    let report = execute(
        &client,
        &plan(&client, &[&vm("stopped"), &db()]).await,
        &options(),
    )
    .await;
    assert!(report.all_succeeded(), "{report:#?}");
    add_ha(&client, "vm:120").await;
    let mut durations = TaskDurations::uniform(Duration::from_millis(20));
    for kind in ["hastart", "hastop"] {
        durations
            .per_type
            .insert(kind.into(), Duration::from_millis(300));
    }
    sim.set_task_durations(durations);
    (sim, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ha_guest_declared_started_is_started_through_ha() {
    let (sim, client) = ha_web().await;
    let p = plan(&client, &[&vm("started"), &db()]).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert_eq!(p.actions[0].verb, Verb::Start, "{p:#?}");
    let report = execute(&client, &p, &options()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let upids = &report.results[0].upids;
    assert!(upids[0].contains(":hastart:120:"), "{upids:?}");
    // The action ended only once the guest ran, not when the request was queued.
    assert_eq!(client.guest_status(&web()).await.unwrap().status, "running");
    // And stopping goes through HA the same way.
    let p = plan(&client, &[&vm("stopped"), &db()]).await;
    let report = execute(&client, &p, &options()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(report.results[0].upids[0].contains(":hastop:120:"));
    assert_eq!(client.guest_status(&web()).await.unwrap().status, "stopped");
    sim.shutdown().await.unwrap();
}

// The wait for the HA stack is bounded: a guest that does not get there fails the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_a_status_that_does_not_come_times_out() {
    let (sim, client) = ha_web().await;
    let opts = WaitOptions::default().timeout(Duration::from_millis(200));
    let err = client
        .wait_guest_status(&web(), "running", &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PveError::HaStateTimeout { vmid: 120, status, .. } if status == "stopped"),
        "{err}"
    );
    sim.shutdown().await.unwrap();
}

// PVE refuses to destroy an HA-managed guest without `purge`; the engine's delete sends it,
// and the HA resource goes with the guest. The guest runs: its stop is an HA request too, so
// the destroy waits until it stopped (PVE refuses a running guest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_ha_guest_purges_it() {
    let (sim, client) = ha_web().await;
    let refused = client
        .destroy(&web(), &proxops_pve::DestroyOptions::default())
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("used in HA resources and purge parameter not set"),
        "{refused}"
    );
    let p = plan(&client, &[&vm("started"), &db()]).await;
    let report = execute(&client, &p, &options()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let p = plan(&client, &[&db()]).await;
    assert!(p.actions.iter().any(|a| a.verb == Verb::Delete), "{p:#?}");
    let report = execute(&client, &p, &options()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(client.guest_status(&web()).await.is_err());
    assert!(sim.state().ha_resources.is_empty());
    sim.shutdown().await.unwrap();
}
