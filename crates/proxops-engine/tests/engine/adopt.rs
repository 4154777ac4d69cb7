//! Taking over a guest ProxOps did not create: `adopt` writes its manifest, and once that is
//! declared the planner tags the guest (and nothing else) only when the live config already
//! matches; it never deletes, re-creates or duplicates it.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::adopt::{AdoptContext, Outcome, Selection, adopt_live};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{DestroyOptions, GuestRef, PveClient, WaitOptions};
use proxops_pve_sim::SimHandle;

const CLUSTER: &str = "t";

const PROXY: &str = "#Reverse proxy\nagent: 1\nboot: order=scsi0;net0\ncores: 2\ncpu: x86-64-v2-AES\nmemory: 2048\nname: proxy\nnet0: virtio=BC:24:11:0A:01:01,bridge=vmbr0,firewall=1\nonboot: 1\nostype: l26\nscsi0: local-lvm:vm-101-disk-0,discard=on,iothread=1,size=16G\nscsihw: virtio-scsi-single\nsmbios1: uuid=3e1c5c8e-6f0e-4b57-9d1a-1f1c2a3b4c01\ntags: web\n";

/// A simulator holding vmid 101 as `conf` (on pve1), created by hand, not by ProxOps.
async fn seeded(conf: &str) -> (SimHandle, PveClient) {
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("nodes/pve1/qemu-server");
    std::fs::create_dir_all(&qs).unwrap();
    std::fs::write(qs.join("101.conf"), conf).unwrap();
    let mut state = one_node();
    proxops_pve_sim::seed_guest_configs(&mut state, dir.path()).unwrap();
    simulator(state).await
}

/// The manifest `adopt` writes for vmid 101.
async fn adopted(client: &PveClient) -> String {
    let ctx = AdoptContext::new(CLUSTER).with_nodes(vec!["pve1".into()]);
    let mut out = adopt_live(client, &ctx, &Selection::All).await.unwrap();
    assert_eq!(out.len(), 1);
    match out.remove(0).1 {
        Outcome::Adopted(a) => a.to_yaml(),
        Outcome::Refused(r) => panic!("{r}"),
        other => panic!("{other:?}"),
    }
}

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, CLUSTER, &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

async fn config(client: &PveClient) -> std::collections::BTreeMap<String, String> {
    client
        .guest_config(&GuestRef::qemu("pve1", 101))
        .await
        .unwrap()
        .values
}

fn no_create_or_delete(p: &ClusterPlan) {
    assert!(
        p.actions
            .iter()
            .all(|a| !matches!(a.verb, Verb::Create | Verb::Delete | Verb::Replace)),
        "{p:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untagged_guest_is_never_deleted_or_duplicated_whatever_the_repository_says() {
    let (sim, client) = seeded(PROXY).await;
    let manifest = adopted(&client).await;
    // Not declared (another guest is): never pruned.
    let other = manifest
        .replace("vmid: 101", "vmid: 150")
        .replace("name: proxy", "name: other");
    let p = plan(&client, &[&other]).await;
    assert!(p.actions.iter().all(|a| a.vmid != Some(101)), "{p:#?}");
    // Declared, but the live guest differs: an anomaly, no create, no delete, no write.
    let differs = manifest.replace("2048MiB", "4096MiB");
    let p = plan(&client, &[&differs]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    no_create_or_delete(&p);
    assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    assert!(p.anomalies[0].message.contains("memory"), "{p:#?}");
    assert!(!config(&client).await["tags"].contains("proxops"));
    // Declared started while it is stopped (the seeded guest is): also a difference, never
    // a start.
    assert!(manifest.contains("  state: stopped\n"), "{manifest}");
    let started = manifest.replace("  state: stopped\n", "");
    let p = plan(&client, &[&started]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(p.anomalies[0].message.contains("power state"), "{p:#?}");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_guest_gets_its_tags_and_nothing_else_then_is_in_sync() {
    let (sim, client) = seeded(PROXY).await;
    let before = config(&client).await;
    let manifest = adopted(&client).await;
    let p = plan(&client, &[&manifest]).await;
    assert!(p.anomalies.is_empty(), "{p:#?}");
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let a = &p.actions[0];
    assert_eq!((a.verb, a.name.as_str()), (Verb::Adopt, "proxy"), "{p:#?}");
    let keys: Vec<&str> = a.changes.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["tags"], "{p:#?}");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let after = config(&client).await;
    let tags: Vec<&str> = after["tags"].split(';').collect();
    for t in ["proxops", "proxops.t.vm.proxy", "web"] {
        assert!(tags.contains(&t), "{tags:?}");
    }
    for (k, v) in &before {
        if k != "tags" && k != "digest" {
            assert_eq!(after.get(k), Some(v), "{k} changed");
        }
    }
    let p = plan(&client, &[&manifest]).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

/// An adopted VM destroyed by hand: its manifest names the volumes it had (`disks[].volume`),
/// which went with it. The plan never creates a guest around them (that would fail, or worse
/// attach whatever holds the name): a coded plan error, nothing sent, and another guest of the
/// same plan is still created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_vm_that_is_gone_is_not_recreated_around_its_named_volumes() {
    let (sim, client) = seeded(PROXY).await;
    let manifest = adopted(&client).await;
    assert!(
        manifest.contains("volume: local-lvm:vm-101-disk-0"),
        "{manifest}"
    );
    let p = plan(&client, &[&manifest]).await;
    assert!(
        execute(&client, &p, &ExecOptions::default())
            .await
            .all_succeeded()
    );
    let upid = client
        .destroy(&GuestRef::qemu("pve1", 101), &DestroyOptions::default())
        .await
        .unwrap();
    client
        .wait_task(&upid, &WaitOptions::default())
        .await
        .unwrap();
    let fresh = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: fresh\nspec:\n  node: pve1\n  vmid: 150\n  memory: 512MiB\n  cpu: {type: host, cores: 1}\n  disks: [{storage: local-lvm, size: 4GiB}]\n";
    let p = plan(&client, &[&manifest, fresh]).await;
    assert_eq!(p.errors.len(), 1, "{p:#?}");
    assert_eq!(p.errors[0].code, "proxops::volume_without_guest");
    assert!(p.errors[0].reason.contains("scsi0"), "{p:#?}");
    assert!(p.actions.iter().all(|a| a.vmid != Some(101)), "{p:#?}");
    assert!(
        p.actions
            .iter()
            .any(|a| a.vmid == Some(150) && a.verb == Verb::Create),
        "{p:#?}"
    );
    sim.shutdown().await.unwrap();
}
