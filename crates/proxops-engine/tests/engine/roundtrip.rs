//! Desired state written to the simulator reads back as converged: the drivers' wire forms and
//! the comparison agree with PVE's canonical forms (as the simulator reproduces them). Then live
//! drift shows up as exactly the expected changes.

use crate::support::{homelab, simulator};
use proxops_engine::desired::{Context, DesiredGuest, artifact, guest};
use proxops_engine::diff::diff;
use proxops_graph::Graph;
use proxops_pve::{CloneRequest, ConfigChange, GuestRef, GuestType, PveClient, WaitOptions};
use proxops_pve_sim::{State, Volume};
use proxops_test_support::sim::node_with_default_storages;
use std::collections::BTreeMap;

/// The cluster's nodes with PVE's default storages, and every artifact already downloaded.
fn seeded(graph: &Graph, nodes: &[&str]) -> State {
    let mut state = State {
        nodes: nodes
            .iter()
            .map(|n| node_with_default_storages(n))
            .collect(),
        ..State::default()
    };
    for id in graph.resources() {
        let Some(a) = artifact(graph.resource(id)) else {
            continue;
        };
        let format = match a.content {
            "iso" => "iso".to_owned(),
            "vztmpl" => "tzst".to_owned(),
            _ => a.filename.rsplit('.').next().unwrap_or("raw").to_owned(),
        };
        for node in &a.nodes {
            state.volumes.push(Volume {
                node: node.clone(),
                storage: a.storage.clone(),
                volid: a.volid.clone(),
                content: a.content.into(),
                format: format.clone(),
                size: 2 << 30,
                ..Volume::default()
            });
        }
    }
    // The pools the guests name exist (the Pool resources themselves are not created here).
    for id in graph.resources() {
        let pool = match &graph.resource(id).spec {
            proxops_model::Spec::Vm(v) => v.pool.clone(),
            proxops_model::Spec::Lxc(l) => l.pool.clone(),
            _ => None,
        };
        if let Some(p) = pool {
            state.pools.entry(p).or_default();
        }
    }
    state
}

fn guest_ref(d: &DesiredGuest) -> GuestRef {
    match d.guest {
        GuestType::Qemu => GuestRef::qemu(&d.node, d.vmid),
        GuestType::Lxc => GuestRef::lxc(&d.node, d.vmid),
    }
}

/// Creates (or clones and configures) a guest as the executor will, and makes templates.
async fn create(client: &PveClient, d: &DesiredGuest) {
    let wait = WaitOptions::default();
    let target = guest_ref(d);
    if let Some(source) = &d.clone {
        let request = CloneRequest::new(d.vmid)
            .with_full(Some(true))
            .with_target((source.node != d.node).then(|| d.node.clone()));
        let upid = client
            .clone_guest(&GuestRef::qemu(&source.node, source.vmid), &request)
            .await
            .unwrap();
        client.wait_task(&upid, &wait).await.unwrap();
        // The clone brings the template's config; write what differs, as the executor will.
        let found = diff(d, &live(client, d).await);
        let change = found
            .changes
            .into_iter()
            .fold(ConfigChange::default(), |change, c| {
                change.set(&c.key, c.value)
            });
        client.set_config(&target, &change).await.unwrap();
    } else {
        let upid = client
            .create_guest(&target, &d.create_config())
            .await
            .unwrap();
        client.wait_task(&upid, &wait).await.unwrap();
    }
    if d.template
        && let Some(upid) = client.make_template(&target).await.unwrap()
    {
        client.wait_task(&upid, &wait).await.unwrap();
    }
}

async fn live(client: &PveClient, d: &DesiredGuest) -> BTreeMap<String, String> {
    client.guest_config(&guest_ref(d)).await.unwrap().values
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_homelab_guest_reads_back_converged() {
    let (_, graphs) = homelab();
    for (cluster, graph) in &graphs {
        let cx = Context::new(cluster, graph);
        let nodes: Vec<&str> = if cluster == "home" {
            vec!["pve1", "pve2"]
        } else {
            vec!["pve1"]
        };
        let (sim, client) = simulator(seeded(graph, &nodes)).await;
        let mut desired = Vec::new();
        for step in graph.steps() {
            let resource = graph.resource(step.resource);
            // Files and cluster objects are not guests: their own tests read them back.
            if artifact(resource).is_some()
                || matches!(resource.spec, proxops_model::Spec::Object(_))
            {
                continue;
            }
            let d = guest(&cx, resource).unwrap();
            create(&client, &d).await;
            desired.push((resource.key().to_string(), d));
        }
        assert!(!desired.is_empty());
        for (key, d) in &desired {
            let config = live(&client, d).await;
            let found = diff(d, &config);
            assert!(
                found.is_converged() && found.anomalies.is_empty(),
                "{cluster} {key} is not converged after create:\n{found:#?}\nlive: {config:#?}"
            );
        }
        sim.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_drift_becomes_exactly_the_expected_changes() {
    let (_, graphs) = homelab();
    let (cluster, graph) = graphs.iter().find(|(c, _)| c == "home").unwrap();
    let cx = Context::new(cluster, graph);
    let (sim, client) = simulator(seeded(graph, &["pve1", "pve2"])).await;
    // A VM with a sized disk (32GiB) and a container.
    let vm = guest(&cx, graph.resource(graph.find("VM", "jumpbox").unwrap())).unwrap();
    let ct = guest(&cx, graph.resource(graph.find("LXC", "pihole").unwrap())).unwrap();
    for d in [&vm, &ct] {
        create(&client, d).await;
    }
    // An operator edits the VM: memory, an extra tag of their own, a bigger first disk.
    let disk = vm
        .owned
        .iter()
        .find(|o| o.key.starts_with("scsi"))
        .unwrap()
        .key
        .clone();
    let live_disk = live(&client, &vm).await[&disk].clone();
    let grown = live_disk
        .replace(",size=", ",size=9")
        .replace("size=9", "size=99");
    let tags = live(&client, &vm).await["tags"].clone();
    let edit = ConfigChange::default()
        .set("memory", "9999")
        .set("tags", format!("{tags};operator-note"));
    client.set_config(&guest_ref(&vm), &edit).await.unwrap();
    sim.with_state(|st| {
        if let Some(g) = st.guests.get_mut(&vm.vmid) {
            g.config.insert(disk.clone(), grown.clone());
        }
    });
    let found = diff(&vm, &live(&client, &vm).await);
    let keys: Vec<&str> = found.changes.iter().map(|c| c.key.as_str()).collect();
    // Memory goes back (a restart makes it effective); the operator's tag is kept, ours are all
    // there, so tags do not change; the bigger disk is never shrunk.
    assert_eq!(keys, ["memory"], "{found:#?}");
    assert!(found.needs_restart());
    assert!(found.resizes.is_empty());
    assert_eq!(found.anomalies.len(), 1, "{found:#?}");
    assert!(
        found.anomalies[0].message.contains("never shrunk"),
        "{found:#?}"
    );

    // The container loses its ownership tag and its root disk is smaller than the manifest says.
    let ct_live = live(&client, &ct).await;
    let rootfs = ct_live["rootfs"].clone();
    let smaller = {
        let (head, _) = rootfs.split_once(",size=").unwrap();
        format!("{head},size=1G")
    };
    sim.with_state(|st| {
        if let Some(g) = st.guests.get_mut(&ct.vmid) {
            g.config.insert("rootfs".into(), smaller.clone());
            g.config.insert("tags".into(), "something-else".into());
        }
    });
    let found = diff(&ct, &live(&client, &ct).await);
    let keys: Vec<&str> = found.changes.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["tags"], "{found:#?}");
    assert!(
        found.changes[0].value.ends_with(";something-else"),
        "{found:#?}"
    );
    assert_eq!(found.resizes.len(), 1);
    assert_eq!(found.resizes[0].disk, "rootfs");
    assert_eq!(found.resizes[0].from, 1 << 30);
    sim.shutdown().await.unwrap();
}
