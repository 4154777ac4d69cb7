//! Snapshot-guarded disruptive updates (`update-policy`, issue 33 point 4), against the
//! simulator: a failed check rolls the guest back to exactly what it was and the same desired
//! document is not tried again; a success keeps the snapshot and prunes ProxOps's own beyond
//! `keep`, never another's; a guest PVE could not snapshot is an anomaly before anything is
//! written.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::execute::{CycleReport, ExecOptions, Outcome, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_engine::refusals::Refusals;
use proxops_pve::{GuestRef, Method, Params, PveClient, SnapshotRequest, WaitOptions};
use proxops_pve_sim::SimHandle;
use std::collections::BTreeMap;

const CLUSTER: &str = "t";

/// VM `web` (vmid 120) on `storage`, with its guest agent, snapshot-guarded updates (`keep`
/// ProxOps snapshots, a check of 1 s) and `cores` cores.
fn vm(cores: u32, keep: u32, storage: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  update-policy:\n    snapshot: true\n    keep: {keep}\n    verify:\n      timeout: 1s\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: {cores}\n  disks:\n    - storage: {storage}\n      interface: scsi0\n      size: 4GiB\n  options:\n    agent: true\n"
    )
}

fn web() -> GuestRef {
    GuestRef::qemu("pve1", 120)
}

async fn plan(client: &PveClient, text: &str, refusals: &Refusals) -> ClusterPlan {
    let mut options = PlanOptions::default();
    options.refused_updates = refusals.updates_of(CLUSTER);
    plan_cluster(client, CLUSTER, &graph_of(&[text]), &options)
        .await
        .unwrap()
}

async fn run(client: &PveClient, plan: &ClusterPlan, refusals: &Refusals) -> CycleReport {
    let report = execute(client, plan, &ExecOptions::default()).await;
    refusals.record(CLUSTER, plan, &report);
    report
}

fn verbs(p: &ClusterPlan) -> Vec<Verb> {
    p.actions.iter().map(|a| a.verb).collect()
}

/// `web` created running from `vm(1, keep, storage)`, its agent answering.
async fn running_web(storage: &str, keep: u32) -> (SimHandle, PveClient) {
    let (sim, client) = simulator(one_node()).await;
    let refusals = Refusals::default();
    let p = plan(&client, &vm(1, keep, storage), &refusals).await;
    assert_eq!(verbs(&p), [Verb::Create], "creating is not guarded: {p:#?}");
    let report = run(&client, &p, &refusals).await;
    assert!(report.all_succeeded(), "{report:#?}");
    (sim, client)
}

/// The guest as the simulator holds it: config, pending changes, power.
fn guest_state(sim: &SimHandle) -> (BTreeMap<String, String>, BTreeMap<String, String>, String) {
    let g = sim.state().guests[&120].clone();
    (g.config, g.pending, g.status)
}

/// Snapshot names and descriptions, as PVE lists them.
async fn snapshots(client: &PveClient) -> Vec<(String, String)> {
    client
        .snapshot_list(&web())
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.description))
        .collect()
}

/// How many tasks of `kind` the simulator ran.
fn tasks(sim: &SimHandle, kind: &str) -> usize {
    sim.state().tasks.iter().filter(|t| t.kind == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_whose_agent_never_answers_is_rolled_back_and_not_tried_again() {
    let (sim, client) = running_web("local-lvm", 3).await;
    // The update will break the guest: its OS never brings the agent up again.
    sim.with_state(|st| st.guests.get_mut(&120).map(|g| g.agent_missing = true));
    let (config, pending, status) = guest_state(&sim);
    assert_eq!(status, "running");
    let refusals = Refusals::default();
    let p = plan(&client, &vm(2, 3, "local-lvm"), &refusals).await;
    assert_eq!(
        verbs(&p),
        [Verb::Snapshot, Verb::Update, Verb::Verify],
        "{p:#?}"
    );
    let name = p.actions[0]
        .reason
        .split('`')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(name.starts_with("proxops-"), "{p:#?}");
    assert!(
        p.actions[0]
            .reason
            .starts_with("before a disruptive update (cores)"),
        "{}",
        p.actions[0].reason
    );
    assert!(p.actions[1].restart, "{p:#?}");
    assert_eq!(p.actions[1].after, [0]);
    assert_eq!(p.actions[2].after, [1]);
    assert!(
        p.actions[2]
            .reason
            .contains(&format!("else roll back to `{name}` and start it again")),
        "{}",
        p.actions[2].reason
    );
    let report = run(&client, &p, &refusals).await;
    assert_eq!(report.results[0].outcome, Outcome::Succeeded, "{report:#?}");
    assert_eq!(report.results[1].outcome, Outcome::Succeeded, "{report:#?}");
    let Outcome::Failed { error } = &report.results[2].outcome else {
        panic!("the check passed: {report:#?}");
    };
    assert_eq!(error.kind().as_str(), "check-failed");
    assert!(
        error
            .message()
            .contains("the guest agent did not answer within 1.0s")
            && error.message().contains(&format!(
                "rolled back to snapshot `{name}` and started again"
            )),
        "{error}"
    );
    let guard = report.results[2].guard.as_ref().unwrap();
    assert!(guard.rolled_back && guard.rollback_failed.is_none());
    // Exactly what it was, but for `parent`, which PVE points at the snapshot.
    let (after, after_pending, after_status) = guest_state(&sim);
    let mut expected = config.clone();
    expected.insert("parent".into(), name.clone());
    assert_eq!(after, expected);
    assert_eq!(after_pending, pending);
    assert_eq!(after_status, "running");
    assert_eq!(after["cores"], "1");
    let listed = snapshots(&client).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].1.contains("; rolled back: check failed"),
        "the snapshot says why: {listed:?}"
    );

    // Not tried again: no snapshot, no config write, cycle after cycle; an anomaly says why.
    let snapshots_taken = tasks(&sim, "qmsnapshot");
    let writes = client
        .counters()
        .count("PUT", "/nodes/{node}/qemu/{vmid}/config")
        + client
            .counters()
            .count("POST", "/nodes/{node}/qemu/{vmid}/config");
    for remembered in [refusals.clone(), Refusals::default()] {
        // In memory (a converge, the agent), and from the snapshot's mark (a new process).
        let p = plan(&client, &vm(2, 3, "local-lvm"), &remembered).await;
        assert!(p.actions.is_empty(), "{p:#?}");
        assert!(
            p.anomalies.iter().any(|a| a.subject == "VM/web"
                && a.message
                    .contains("not tried again until the manifest changes")),
            "{p:#?}"
        );
        run(&client, &p, &remembered).await;
    }
    assert_eq!(tasks(&sim, "qmsnapshot"), snapshots_taken);
    assert_eq!(
        client
            .counters()
            .count("PUT", "/nodes/{node}/qemu/{vmid}/config")
            + client
                .counters()
                .count("POST", "/nodes/{node}/qemu/{vmid}/config"),
        writes
    );
    assert_eq!(guest_state(&sim).0, expected);
    // Deleting the snapshot it rolled back to lets the same document be tried again.
    let upid = client.snapshot_delete(&web(), &name).await.unwrap();
    client
        .wait_task(&upid, &WaitOptions::default())
        .await
        .unwrap();
    let p = plan(&client, &vm(2, 3, "local-lvm"), &refusals).await;
    assert_eq!(
        verbs(&p),
        [Verb::Snapshot, Verb::Update, Verb::Verify],
        "{p:#?}"
    );

    // A changed manifest is tried again; this time the guest comes back.
    sim.with_state(|st| st.guests.get_mut(&120).map(|g| g.agent_missing = false));
    let p = plan(&client, &vm(3, 3, "local-lvm"), &refusals).await;
    assert_eq!(
        verbs(&p),
        [Verb::Snapshot, Verb::Update, Verb::Verify],
        "{p:#?}"
    );
    let report = run(&client, &p, &refusals).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(
        report.results[2]
            .guard
            .as_ref()
            .unwrap()
            .verified
            .as_deref()
            .is_some_and(|v| v.starts_with("the guest agent answered after")),
        "{report:#?}"
    );
    assert_eq!(guest_state(&sim).0["cores"], "3");
    assert!(
        refusals.updates_of(CLUSTER).is_empty(),
        "forgotten once it went through"
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_update_keeps_its_snapshot_and_prunes_only_its_own_beyond_keep() {
    let (sim, client) = running_web("local-lvm", 2).await;
    // Snapshots someone else took: one of their own, one whose name looks like ProxOps's.
    for (name, description) in [
        ("before-upgrade", "taken by hand"),
        ("proxops-byhand", "not ProxOps's, whatever its name"),
    ] {
        let upid = client
            .snapshot_create(&web(), name, &SnapshotRequest::new(description))
            .await
            .unwrap();
        client
            .wait_task(&upid, &WaitOptions::default())
            .await
            .unwrap();
    }
    let refusals = Refusals::default();
    let mut ours = Vec::new();
    for cores in 2..=4 {
        let p = plan(&client, &vm(cores, 2, "local-lvm"), &refusals).await;
        let name = p.actions[0].reason.split('`').nth(1).unwrap().to_owned();
        let expected: &[Verb] = if cores < 4 {
            &[Verb::Snapshot, Verb::Update, Verb::Verify]
        } else {
            &[
                Verb::Snapshot,
                Verb::Update,
                Verb::Verify,
                Verb::PruneSnapshots,
            ]
        };
        assert_eq!(verbs(&p), expected, "{p:#?}");
        if cores == 4 {
            assert_eq!(
                p.actions[3].reason,
                format!("keep the newest 2 ProxOps snapshots: delete {}", ours[0])
            );
            assert_eq!(p.actions[3].after, [2]);
        }
        let report = run(&client, &p, &refusals).await;
        assert!(report.all_succeeded(), "{report:#?}");
        ours.push(name);
        assert_eq!(guest_state(&sim).0["cores"], cores.to_string());
    }
    let mut left: Vec<String> = snapshots(&client).await.into_iter().map(|s| s.0).collect();
    left.sort();
    let mut expected = vec![
        "before-upgrade".to_owned(),
        "proxops-byhand".to_owned(),
        ours[1].clone(),
        ours[2].clone(),
    ];
    expected.sort();
    assert_eq!(left, expected);
    // Converged: nothing more to snapshot, check or prune.
    let p = plan(&client, &vm(4, 2, "local-lvm"), &refusals).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

/// Every request that writes, by `METHOD /template`.
fn writes(client: &PveClient) -> BTreeMap<String, u64> {
    client
        .counters()
        .snapshot()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("GET "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_pve_cannot_snapshot_is_an_anomaly_and_nothing_is_written() {
    let mut state = one_node();
    state.nodes[0].storages.push(proxops_pve_sim::Storage {
        storage: "files".into(),
        kind: "dir".into(),
        content: vec!["images".into()],
        ..proxops_pve_sim::Storage::default()
    });
    let (sim, client) = simulator(state).await;
    let refusals = Refusals::default();
    let text =
        |cores| vm(cores, 3, "files").replace("size: 4GiB\n", "size: 4GiB\n      format: raw\n");
    let p = plan(&client, &text(1), &refusals).await;
    assert!(run(&client, &p, &refusals).await.all_succeeded());
    // A raw file on dir storage: PVE refuses ("snapshot feature is not available").
    client.counters().reset();
    let before = guest_state(&sim);
    let p = plan(&client, &text(2), &refusals).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    let anomaly = &p.anomalies[0];
    assert_eq!(anomaly.subject, "VM/web");
    assert!(
        anomaly.message.contains("PVE cannot snapshot vmid 120 first (\"snapshot feature is not available\"): scsi0 (`files` is dir storage, where only qcow2 files have snapshots, and it is raw)"),
        "{anomaly:?}"
    );
    run(&client, &p, &refusals).await;
    assert_eq!(writes(&client), BTreeMap::new());
    assert_eq!(guest_state(&sim), before);
    // A passed-through host disk beside a volume that has snapshots: the same.
    let p = plan(
        &client,
        &vm(1, 3, "local-lvm")
            .replace("vmid: 120", "vmid: 121")
            .replace("name: web", "name: db"),
        &refusals,
    )
    .await;
    assert!(run(&client, &p, &refusals).await.all_succeeded());
    sim.with_state(|st| {
        st.guests.get_mut(&121).map(|g| {
            g.config
                .insert("scsi5".into(), "/dev/disk/by-id/ata-hdd,size=1T".into())
        })
    });
    client.counters().reset();
    let db = vm(2, 3, "local-lvm")
        .replace("vmid: 120", "vmid: 121")
        .replace("name: web", "name: db");
    let p = plan(&client, &db, &refusals).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(
        p.anomalies[0]
            .message
            .contains("scsi5 (`/dev/disk/by-id/ata-hdd` is a path on the host"),
        "{p:#?}"
    );
    run(&client, &p, &refusals).await;
    assert_eq!(writes(&client), BTreeMap::new());
    // The simulator refuses such a snapshot as PVE does.
    let upid = client
        .call_json(
            Method::POST,
            "/nodes/{node}/qemu/{vmid}/snapshot",
            "/nodes/pve1/qemu/121/snapshot",
            &Params::new().set("snapname", "try"),
        )
        .await
        .unwrap();
    let err = client
        .wait_task(
            &upid.as_str().unwrap().parse().unwrap(),
            &WaitOptions::default(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("snapshot feature is not available"), "{err}");
    sim.shutdown().await.unwrap();
}

/// A container: checked by running; a start that fails is rolled back and the container is
/// started again as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_whose_restart_fails_is_rolled_back() {
    let (sim, client) = simulator(crate::support::one_node_with_ct_template()).await;
    let ct = |nesting: bool| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian\n  update-policy:\n    snapshot: true\n    verify:\n      timeout: 1s\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  options:\n    nesting: {nesting}\n"
        )
    };
    let refusals = Refusals::default();
    let graph = |t: &str| graph_of(&[crate::support::CT_TEMPLATE, t]);
    let plan_ct = |text: String| {
        let client = client.clone();
        let refusals = refusals.clone();
        async move {
            let mut options = PlanOptions::default();
            options.refused_updates = refusals.updates_of(CLUSTER);
            plan_cluster(&client, CLUSTER, &graph(&text), &options)
                .await
                .unwrap()
        }
    };
    let p = plan_ct(ct(false)).await;
    assert!(run(&client, &p, &refusals).await.all_succeeded(), "{p:#?}");
    let (config, _, status) = sim
        .state()
        .guests
        .get(&200)
        .map(|g| (g.config.clone(), (), g.status.clone()))
        .unwrap();
    assert_eq!(status, "running");
    sim.set_faults(
        proxops_pve_sim::FaultConfig::default().with_failing_tasks(vec!["vzstart:200".into()]),
    );
    let p = plan_ct(ct(true)).await;
    assert_eq!(
        verbs(&p),
        [Verb::Snapshot, Verb::Update, Verb::Verify],
        "{p:#?}"
    );
    let report = run(&client, &p, &refusals).await;
    let Outcome::Failed { error } = &report.results[1].outcome else {
        panic!("{report:#?}");
    };
    assert!(
        error.message().contains("rolled back to snapshot"),
        "{error}"
    );
    assert!(matches!(
        report.results[2].outcome,
        Outcome::Deferred { .. }
    ));
    let g = sim.state().guests[&200].clone();
    let mut expected = config;
    expected.insert("parent".into(), g.config["parent"].clone());
    assert_eq!(g.config, expected);
    assert_eq!(g.status, "running");
    sim.set_faults(proxops_pve_sim::FaultConfig::default());
    let p = plan_ct(ct(true)).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

/// A key changed by hand between the plan and the update is neither written over nor rolled
/// back: the update fails before writing, the hand change stays, and the next cycle plans
/// again (a new snapshot name beside the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_changed_after_the_plan_is_neither_written_over_nor_rolled_back() {
    let (sim, client) = simulator(one_node()).await;
    let refusals = Refusals::default();
    let stopped = |cores| {
        vm(cores, 3, "local-lvm").replace("  vmid: 120\n", "  vmid: 120\n  state: stopped\n")
    };
    let p = plan(&client, &stopped(1), &refusals).await;
    assert!(run(&client, &p, &refusals).await.all_succeeded());
    let p = plan(&client, &stopped(2), &refusals).await;
    assert_eq!(verbs(&p), [Verb::Snapshot, Verb::Update], "{p:#?}");
    client
        .set_config(
            &web(),
            &proxops_pve::ConfigChange::default().set("cores", "3"),
        )
        .await
        .unwrap();
    let report = run(&client, &p, &refusals).await;
    assert_eq!(report.results[0].outcome, Outcome::Succeeded);
    let Outcome::Failed { error } = &report.results[1].outcome else {
        panic!("{report:#?}");
    };
    assert!(
        error
            .message()
            .contains("cores changed since the plan was made; nothing written"),
        "{error}"
    );
    assert!(!report.results[1].guard.as_ref().unwrap().rollback_tried());
    assert_eq!(guest_state(&sim).0["cores"], "3", "the hand change stays");
    assert!(refusals.updates_of(CLUSTER).is_empty());
    let p = plan(&client, &stopped(2), &refusals).await;
    assert_eq!(verbs(&p), [Verb::Snapshot, Verb::Update], "{p:#?}");
    assert!(
        p.actions[0].reason.contains("-2`"),
        "{}",
        p.actions[0].reason
    );
    sim.shutdown().await.unwrap();
}
