//! Config writes against pveproxy's 30 s limit (pve-http-server `src/PVE/APIServer/AnyEvent.pm`
//! `proxy_request`, `timeout => 30`: `596 Connection timed out` while pvedaemon finishes the
//! work). A qemu update that allocates a disk goes through `POST .../config` (qemu-server
//! `src/PVE/API2/Qemu.pm` `update_vm_async`: a `qmconfig` worker) and waits for its task; an LXC
//! mount point can only be added by PUT (pve-container `src/PVE/API2/LXC/Config.pm`
//! `update_vm`, allocating inside the call), so when its answer is cut the engine reads the
//! guest back and does not write it again.

use crate::support::{CT_TEMPLATE, graph_of, one_node_with_ct_template};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, PlanState, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{GuestRef, PveClient};
use proxops_pve_sim::{SimConfig, SimHandle, TaskDurations, start};
use proxops_test_support::sim::volumes_of;
use std::time::Duration;

const PROXY: Duration = Duration::from_millis(250);
const ALLOC: Duration = Duration::from_millis(700);
/// A simulator whose pveproxy gives up after `PROXY` and whose allocations take `ALLOC`.
async fn slow_storage() -> (SimHandle, PveClient) {
    let state = one_node_with_ct_template();
    let mut durations = TaskDurations::uniform(Duration::from_millis(20));
    durations.proxy_timeout = PROXY;
    durations.sync_work.insert("alloc".into(), ALLOC);
    let sim = start(
        SimConfig::default()
            .with_state(state)
            .with_task_durations(durations),
    )
    .await
    .unwrap();
    let client = proxops_test_support::sim::client(&sim);
    (sim, client)
}

fn vm(disks: &[u32]) -> String {
    let disks: String = disks
        .iter()
        .map(|gib| format!("    - storage: local-lvm\n      size: {gib}GiB\n"))
        .collect();
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n{disks}"
    )
}

fn ct(mount_point: bool) -> String {
    let mut t = String::from(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n",
    );
    if mount_point {
        t.push_str("  mount-points:\n    - storage: local-lvm\n      size: 2GiB\n      mount-point: /data\n");
    }
    t
}

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, "t", &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

async fn apply(client: &PveClient, p: &ClusterPlan) -> proxops_engine::execute::CycleReport {
    let report = execute(client, p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    report
}

// qemu-server `update_vm_async`: POST config forks a `qmconfig` worker, whose UPID the update
// waits for; the PUT would have been cut by the proxy (the allocation outlasts its timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_disk_to_a_vm_goes_through_post_and_waits_for_the_task() {
    let (sim, client) = slow_storage().await;
    apply(&client, &plan(&client, &[&vm(&[4])]).await).await;
    let p = plan(&client, &[&vm(&[4, 2])]).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert_eq!(p.actions[0].verb, Verb::Update);
    sim.reset_counters();
    let report = apply(&client, &p).await;
    assert_eq!(sim.count("POST", "/nodes/{node}/qemu/{vmid}/config"), 1);
    assert_eq!(sim.count("PUT", "/nodes/{node}/qemu/{vmid}/config"), 0);
    // The write's task first (then the restart the running VM needs for the new disk).
    let upids = &report.results[0].upids;
    assert!(upids[0].contains(":qmconfig:120:"), "{upids:?}");
    assert_eq!(
        upids.iter().filter(|u| u.contains(":qmconfig:")).count(),
        1,
        "{upids:?}"
    );
    assert!(sim.count("GET", "/nodes/{node}/tasks/{upid}/status") >= 1);
    // The task is done when the update is: the disk is there at once.
    let live = client
        .guest_config(&GuestRef::qemu("pve1", 120))
        .await
        .unwrap()
        .values;
    assert_eq!(live["scsi1"], "local-lvm:vm-120-disk-1,size=2G");
    assert_eq!(volumes_of(&sim, 120).len(), 2);
    let again = plan(&client, &[&vm(&[4, 2])]).await;
    assert_eq!(again.state(), PlanState::InSync, "{again:#?}");
    sim.shutdown().await.unwrap();
}

// The mount point's PUT outlasts the proxy: 596 at `PROXY`, the container's config gets the
// volume at `ALLOC`. The engine reads the container back until it sees it, and sends no second
// PUT (which would allocate a second volume and leave the first unused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_point_write_cut_by_the_proxy_is_read_back_not_written_twice() {
    let (sim, client) = slow_storage().await;
    apply(&client, &plan(&client, &[CT_TEMPLATE, &ct(false)]).await).await;
    let before = volumes_of(&sim, 200);
    let p = plan(&client, &[CT_TEMPLATE, &ct(true)]).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert_eq!(p.actions[0].verb, Verb::Update);
    sim.reset_counters();
    apply(&client, &p).await;
    assert_eq!(
        sim.count("PUT", "/nodes/{node}/lxc/{vmid}/config"),
        1,
        "no second write: {:#?}",
        sim.counters()
    );
    // The read right after the 596 saw nothing yet; a later one saw the volume.
    assert!(sim.count("GET", "/nodes/{node}/lxc/{vmid}/pending") >= 2);
    let live = client
        .guest_config(&GuestRef::lxc("pve1", 200))
        .await
        .unwrap()
        .values;
    assert_eq!(live["mp0"], "local-lvm:vm-200-disk-1,mp=/data,size=2G");
    assert!(!live.keys().any(|k| k.starts_with("unused")), "{live:?}");
    assert_eq!(volumes_of(&sim, 200).len(), before.len() + 1);
    let again = plan(&client, &[CT_TEMPLATE, &ct(true)]).await;
    assert_eq!(again.state(), PlanState::InSync, "{again:#?}");
    sim.shutdown().await.unwrap();
}

fn stopped_vm(memory_gib: u32) -> String {
    vm(&[4]).replace(
        "  memory: 1GiB\n",
        &format!("  state: stopped\n  memory: {memory_gib}GiB\n"),
    )
}

const PUT_QEMU: &str = "PUT /nodes/{node}/qemu/{vmid}/config";

/// A fault seed under which the first PUT of a config meets an injected `596` (drawn before the
/// write runs, so nothing lands) and the second does not.
fn seed_for_one_lost_put(rate: f64) -> u64 {
    (0..10_000)
        .find(|s| {
            let first = proxops_pve_sim::fault_draw(*s, "proxy", PUT_QEMU, 1);
            let second = proxops_pve_sim::fault_draw(*s, "proxy", PUT_QEMU, 2);
            (rate / 2.0..rate).contains(&first) && second >= rate
        })
        .expect("a seed")
}

fn options(watch: Duration) -> ExecOptions {
    ExecOptions::default().with_outcome_wait(watch)
}

// A 596 says nothing about whether pvedaemon ran the write. When the read-back still shows the
// old values after the watch, nothing landed: the write is sent again, guarded by the digest just
// read (were the first still at work, PVE would refuse it with `checksum mismatch`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_did_not_land_is_sent_again_under_the_fresh_digest() {
    let (sim, client) = slow_storage().await;
    apply(&client, &plan(&client, &[&stopped_vm(1)]).await).await;
    let p = plan(&client, &[&stopped_vm(2)]).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let rate = 0.5;
    sim.reset_counters();
    sim.set_faults(
        proxops_pve_sim::FaultConfig::default()
            .with_seed(seed_for_one_lost_put(rate))
            .with_proxy_error_rate(rate),
    );
    let report = execute(&client, &p, &options(Duration::from_millis(300))).await;
    sim.set_faults(proxops_pve_sim::FaultConfig::default());
    assert!(report.all_succeeded(), "{report:#?}");
    assert_eq!(sim.count("PUT", "/nodes/{node}/qemu/{vmid}/config"), 2);
    assert!(sim.count("GET", "/nodes/{node}/qemu/{vmid}/pending") >= 2);
    let live = client
        .guest_config(&GuestRef::qemu("pve1", 120))
        .await
        .unwrap()
        .values;
    assert_eq!(live["memory"], "2048");
    let again = plan(&client, &[&stopped_vm(2)]).await;
    assert_eq!(again.state(), PlanState::InSync, "{again:#?}");
    sim.shutdown().await.unwrap();
}

// If the key holds neither its old value nor the written one, someone else wrote it meanwhile:
// the write is not sent again, and the action fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_changed_by_someone_else_meanwhile_stops_the_write() {
    let (sim, client) = slow_storage().await;
    apply(&client, &plan(&client, &[&stopped_vm(1)]).await).await;
    let p = plan(&client, &[&stopped_vm(2)]).await;
    let rate = 0.5;
    sim.reset_counters();
    sim.set_faults(
        proxops_pve_sim::FaultConfig::default()
            .with_seed(seed_for_one_lost_put(rate))
            .with_proxy_error_rate(rate),
    );
    let options = options(Duration::from_secs(5));
    let (report, ()) = tokio::join!(execute(&client, &p, &options), async {
        for _ in 0..200 {
            if sim.count("PUT", "/nodes/{node}/qemu/{vmid}/config") > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        sim.with_state(|st| {
            if let Some(g) = st.guests.get_mut(&120) {
                g.config.insert("memory".into(), "4096".into());
            }
        });
    });
    sim.set_faults(proxops_pve_sim::FaultConfig::default());
    let error = match &report.results[0].outcome {
        proxops_engine::execute::Outcome::Failed { error } => error.clone(),
        other => panic!("{other:?}"),
    };
    let message = error.message();
    assert!(
        message.contains("memory is now 4096, neither 1024 nor the value written")
            && message.contains("596 Connection timed out")
            && message.contains("not written again"),
        "{error}"
    );
    assert_eq!(
        error.kind(),
        proxops_engine::execute::FailureKind::AnswerLost,
        "{error}"
    );
    assert_eq!(sim.count("PUT", "/nodes/{node}/qemu/{vmid}/config"), 1);
    sim.shutdown().await.unwrap();
}
