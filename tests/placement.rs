//! Placement, migration and HA end to end (engine + simulator): a `nodes:` guest is created on
//! the node with room and stays where it is found among its nodes; a changed `node:` migrates
//! a running VM online (with `with-local-disks` for local disks); a passthrough device is an
//! anomaly before anything is sent; `ha:` creates the HA resource, a power change goes through
//! it, and removing the guest removes HA first; over a run of node changes with injected
//! failures no guest is ever duplicated.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_model::Registry;
use proxops_pve::{GuestRef, PveClient};
use proxops_pve_sim::{Node, SimConfig, SimHandle, State, Storage, TaskDurations, User, start};
use std::time::Duration;

fn storage(name: &str, kind: &str, content: &[&str], shared: bool) -> Storage {
    // The options storage.cfg has for each type on a fresh PVE (and a Ceph pool's name).
    let options: &[(&str, &str)] = match kind {
        "dir" => &[("path", "/var/lib/vz")],
        "lvmthin" => &[("vgname", "pve"), ("thinpool", "data")],
        "rbd" => &[("pool", name)],
        _ => &[],
    };
    Storage {
        storage: name.into(),
        kind: kind.into(),
        content: content.iter().map(|c| (*c).to_owned()).collect(),
        shared,
        options: options
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).into()))
            .collect(),
        ..Storage::default()
    }
}

/// Nodes pve1 (8 GiB), pve2 (32 GiB), pve3 (32 GiB, no local-lvm), each with `local-lvm`
/// (local, except pve3) and a shared `ceph`.
fn cluster() -> State {
    let node = |name: &str, gib: u64, lvm: bool| {
        let mut storages = vec![
            storage("local", "dir", &["iso", "vztmpl"], false),
            storage("ceph", "rbd", &["images", "rootdir"], true),
        ];
        if lvm {
            storages.push(storage(
                "local-lvm",
                "lvmthin",
                &["images", "rootdir"],
                false,
            ));
        }
        Node {
            node: name.into(),
            maxmem: gib << 30,
            storages,
            ..Node::default()
        }
    };
    State {
        nodes: vec![
            node("pve1", 8, true),
            node("pve2", 32, true),
            node("pve3", 32, false),
        ],
        ..State::default()
    }
}

pub(crate) async fn sim() -> (SimHandle, PveClient) {
    let sim = start(
        SimConfig::default()
            .with_state(cluster())
            .with_task_durations(TaskDurations::uniform(Duration::from_millis(10)))
            .with_users(vec![User {
                userid: "root@pam".into(),
                password: "root-password".into(),
            }]),
    )
    .await
    .unwrap();
    let client = crate::support::root_password_client(&sim);
    (sim, client)
}

/// A VM `name` at `vmid`: `place` is the node part of its spec (`node: pve1` or
/// `nodes: [..]`), `more` further spec lines.
pub(crate) fn vm(name: &str, vmid: u32, place: &str, storage: &str, more: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  {place}\n  vmid: {vmid}\n  memory: 4GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: {storage}\n      interface: scsi0\n      size: 4GiB\n{more}"
    )
}

pub(crate) fn graph_of(texts: &[String]) -> Graph {
    let resources: Vec<_> = texts
        .iter()
        .map(|t| {
            let file = proxops_model::diagnostic::SourceFile::new("manifest.yaml", t.clone());
            let loaded = proxops_model::manifest::load_manifest(&file, &Registry::builtin(), None);
            loaded
                .resource
                .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
        })
        .collect();
    Graph::build(&Registry::builtin(), &resources).unwrap()
}

pub(crate) async fn plan(client: &PveClient, texts: &[String]) -> ClusterPlan {
    plan_with(client, texts, &PlanOptions::default()).await
}

/// [`plan`] with `options` (a previous desired document, say).
pub(crate) async fn plan_with(
    client: &PveClient,
    texts: &[String],
    options: &PlanOptions,
) -> ClusterPlan {
    plan_cluster(client, "t", &graph_of(texts), options)
        .await
        .unwrap()
}

pub(crate) async fn apply(client: &PveClient, texts: &[String]) -> ClusterPlan {
    let p = plan(client, texts).await;
    let report = execute(client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{p:#?}\n{report:#?}");
    p
}

/// Where vmid `vmid` is, from /cluster/resources.
pub(crate) async fn node_of(client: &PveClient, vmid: u32) -> Option<String> {
    let inv = client.inventory().await.unwrap();
    inv.guest(vmid).map(|g| g.node.clone())
}

pub(crate) fn verbs(p: &ClusterPlan) -> Vec<Verb> {
    p.actions.iter().map(|a| a.verb).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placed_guest_goes_where_there_is_room_and_stays_where_it_is_found() {
    let (sim, client) = sim().await;
    // pve1 has 8 GiB (2 used by the host), pve2 32: the most free memory wins.
    let web = vm("web", 100, "nodes: [pve1, pve2]", "local-lvm", "");
    let p = apply(&client, std::slice::from_ref(&web)).await;
    assert_eq!(verbs(&p), [Verb::Create], "{p:#?}");
    assert_eq!(p.actions[0].node, "pve2");
    assert!(
        p.actions[0].reason.contains("placed on `pve2`"),
        "{}",
        p.actions[0].reason
    );
    assert_eq!(p.placements[0].node, "pve2");
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve2"));
    // Moved by hand to pve1 (another listed node): in place, nothing planned.
    let upid = client
        .migrate(
            &GuestRef::qemu("pve2", 100),
            &proxops_pve::api::ha::MigrateRequest::new("pve1")
                .with_online(true)
                .with_local_disks(true),
        )
        .await
        .unwrap();
    client
        .wait_task(&upid, &proxops_pve::WaitOptions::default())
        .await
        .unwrap();
    let p = plan(&client, std::slice::from_ref(&web)).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    assert_eq!(p.placements[0].node, "pve1");
    // A node without the storage is never picked: pve3 lacks local-lvm.
    let db = vm("db", 101, "nodes: [pve3, pve1]", "local-lvm", "");
    let p = plan(&client, &[web.clone(), db]).await;
    assert_eq!(p.actions[0].node, "pve1", "{p:#?}");
    assert!(
        p.actions[0].reason.contains("`pve3`"),
        "{}",
        p.actions[0].reason
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_node_migrates_online_and_with_local_disks() {
    let (sim, client) = sim().await;
    let shared = vm("web", 100, "node: pve1", "ceph", "");
    let local = vm("db", 101, "node: pve1", "local-lvm", "");
    apply(&client, &[shared.clone(), local.clone()]).await;
    let moved = [
        shared.replace("node: pve1", "node: pve2"),
        local.replace("node: pve1", "node: pve2"),
    ];
    let p = apply(&client, &moved).await;
    assert_eq!(verbs(&p), [Verb::Migrate, Verb::Migrate], "{p:#?}");
    let web = p.actions.iter().find(|a| a.name == "web").unwrap();
    assert!(
        web.reason.contains("online (running, storage shared)"),
        "{}",
        web.reason
    );
    let db = p.actions.iter().find(|a| a.name == "db").unwrap();
    assert!(
        db.reason.contains("online with its local disks"),
        "{}",
        db.reason
    );
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve2"));
    assert_eq!(node_of(&client, 101).await.as_deref(), Some("pve2"));
    // Both still run, and the next plan has nothing to do.
    let p = plan(&client, &moved).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    // A node without the local storage: an anomaly, nothing sent.
    let p = plan(
        &client,
        &[moved[0].clone(), local.replace("node: pve1", "node: pve3")],
    )
    .await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(p.anomalies[0].message.contains("does not have"), "{p:#?}");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passthrough_device_is_an_anomaly_not_a_failed_task() {
    let (sim, client) = sim().await;
    // Stopped, so the device written below applies at once (not pending until a restart).
    let web = vm("web", 100, "node: pve1", "ceph", "  state: stopped\n");
    apply(&client, std::slice::from_ref(&web)).await;
    // A USB device passed through by hand: PVE refuses even an offline migration.
    client
        .set_config(
            &GuestRef::qemu("pve1", 100),
            &proxops_pve::ConfigChange::default().set("usb0", "host=1234:5678"),
        )
        .await
        .unwrap();
    let p = plan(&client, &[web.replace("node: pve1", "node: pve2")]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(
        p.anomalies[0]
            .message
            .contains("local resources PVE cannot migrate (usb0)"),
        "{p:#?}"
    );
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve1"));
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_creates_the_resource_drives_power_and_goes_first_on_delete() {
    let (sim, client) = sim().await;
    let keep = vm("keep", 110, "node: pve1", "ceph", "  state: stopped\n");
    let web = vm(
        "web",
        100,
        "node: pve1",
        "ceph",
        "  ha:\n    max-restart: 2\n",
    );
    let p = apply(&client, &[keep.clone(), web.clone()]).await;
    assert!(verbs(&p).contains(&Verb::HaAdd), "{p:#?}");
    let ha = client.ha_resources().await.unwrap();
    assert_eq!(
        (
            ha[0].sid.as_str(),
            ha[0].state.as_deref(),
            ha[0].max_restart
        ),
        ("vm:100", Some("started"), Some(2))
    );
    let guest = GuestRef::qemu("pve1", 100);
    assert_eq!(client.guest_status(&guest).await.unwrap().status, "running");
    // Power through HA: `ha.state: stopped` is an HA update, never a direct stop.
    let stopped = web.replace("  ha:\n", "  ha:\n    state: stopped\n");
    let p = apply(&client, &[keep.clone(), stopped.clone()]).await;
    assert_eq!(verbs(&p), [Verb::HaUpdate], "{p:#?}");
    assert_eq!(client.guest_status(&guest).await.unwrap().status, "stopped");
    assert_eq!(
        client.ha_resources().await.unwrap()[0].state.as_deref(),
        Some("stopped")
    );
    // Back to started, then removed from the repository: HA goes first, then the guest.
    apply(&client, &[keep.clone(), web.clone()]).await;
    let p = apply(&client, std::slice::from_ref(&keep)).await;
    assert_eq!(verbs(&p), [Verb::Delete], "{p:#?}");
    assert!(client.ha_resources().await.unwrap().is_empty());
    assert_eq!(node_of(&client, 100).await, None);
    sim.shutdown().await.unwrap();
}

/// A run of node changes, some with the migration task failing (injected), never leaves a
/// guest's identity on two guests or the guest on two nodes; it ends where the manifest says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_guest_is_ever_duplicated_across_nodes() {
    let (sim, client) = sim().await;
    let nodes = ["pve1", "pve2", "pve1", "pve2", "pve2", "pve1"];
    let mut last = String::new();
    for (i, node) in nodes.iter().enumerate() {
        let text = vm("web", 100, &format!("node: {node}"), "local-lvm", "");
        // Every other step the migrate fails once (an injected task failure).
        sim.set_faults(
            proxops_pve_sim::FaultConfig::default()
                .with_seed(i as u64)
                .with_failing_tasks(if i % 2 == 1 {
                    vec!["qmigrate".into()]
                } else {
                    Vec::new()
                }),
        );
        let p = plan(&client, std::slice::from_ref(&text)).await;
        let _ = execute(&client, &p, &ExecOptions::default()).await;
        sim.set_faults(proxops_pve_sim::FaultConfig::default());
        let inv = client.inventory().await.unwrap();
        let carriers: Vec<u32> = inv
            .guests
            .values()
            .filter(|g| g.tags.iter().any(|t| t == "proxops.t.vm.web"))
            .map(|g| g.vmid)
            .collect();
        assert!(carriers.len() <= 1, "step {i}: {carriers:?}");
        last = text;
    }
    apply(&client, std::slice::from_ref(&last)).await;
    apply(&client, std::slice::from_ref(&last)).await;
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve1"));
    let inv = client.inventory().await.unwrap();
    assert_eq!(inv.guests.len(), 1, "{:?}", inv.guests);
    sim.shutdown().await.unwrap();
}
