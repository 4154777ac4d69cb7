//! Taking over a guest ProxOps did not create: `adopt` writes its manifest, and once that is
//! declared the planner tags the guest (and nothing else) only when the live config already
//! matches; it never deletes, re-creates or duplicates it.

use crate::support::{graph_of, one_node, simulator};
use proxops_engine::adopt::{AdoptContext, Outcome, Selection, adopt_live};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{GuestRef, PveClient};
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
    let ctx = AdoptContext {
        cluster: CLUSTER.into(),
        nodes: vec!["pve1".into()],
        ..AdoptContext::default()
    };
    let mut out = adopt_live(client, &ctx, &Selection::All).await.unwrap();
    assert_eq!(out.len(), 1);
    match out.remove(0).1 {
        Outcome::Adopted(a) => a.to_yaml(),
        Outcome::Refused(r) => panic!("{r}"),
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

/// The corpus directory, or `None` (test skipped) when ../shared is absent and not required.
fn corpus() -> Option<std::path::PathBuf> {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pve-configs");
    if path.is_dir() {
        return Some(path);
    }
    assert!(
        std::env::var("PROXOPS_REQUIRE_SHARED").as_deref() != Ok("1"),
        "PROXOPS_REQUIRE_SHARED=1 but {} is missing",
        path.display()
    );
    eprintln!("skipping: {} is missing", path.display());
    None
}

/// Every QEMU config of the corpus, seeded as vmid 1000 + its number: adopted; each manifest
/// that loads plans exactly one `adopt` (the tags) and nothing after it. The count of those is
/// pinned so that a regression (or an improvement) shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_vms_adopt_with_one_tagging_action_then_nothing() {
    let Some(corpus) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("nodes/pve1/qemu-server");
    std::fs::create_dir_all(&qs).unwrap();
    let mut dirs: Vec<_> = std::fs::read_dir(corpus.join("qemu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for d in &dirs {
        let n: u32 = d.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let text = std::fs::read_to_string(d.join("config")).unwrap();
        std::fs::write(qs.join(format!("{}.conf", 1000 + n)), text).unwrap();
    }
    let mut state = one_node();
    proxops_pve_sim::seed_guest_configs(&mut state, dir.path()).unwrap();
    let (sim, client) = simulator(state).await;
    let ctx = AdoptContext {
        cluster: CLUSTER.into(),
        nodes: vec!["pve1".into()],
        ..AdoptContext::default()
    };
    let outcomes = adopt_live(&client, &ctx, &Selection::All).await.unwrap();
    assert_eq!(outcomes.len(), dirs.len());
    let (mut loads, mut clean) = (0, 0);
    let mut problems = Vec::new();
    // The manifests adopted so far stay declared: a tagged guest whose manifest is gone is
    // pruned by the normal deletion intent, which is not what this test is about.
    let mut declared: Vec<String> = Vec::new();
    for (vmid, outcome) in outcomes {
        let Outcome::Adopted(a) = outcome else {
            panic!("{vmid} refused")
        };
        let text = a.to_yaml();
        let file = proxops_model::diagnostic::SourceFile::new("m.yaml", text.clone());
        let loaded = proxops_model::manifest::load_manifest(
            &file,
            &proxops_model::Registry::builtin(),
            None,
        );
        if loaded.resource.is_none() {
            continue;
        }
        loads += 1;
        let mut texts: Vec<&str> = declared.iter().map(String::as_str).collect();
        texts.push(&text);
        let p = plan(&client, &texts).await;
        // Whatever the plan, an adopted guest is never deleted or re-created.
        no_create_or_delete(&p);
        let only_tags = p.actions.len() == 1
            && p.actions[0].verb == Verb::Adopt
            && p.actions[0].changes.iter().all(|c| c.key == "tags");
        if !only_tags {
            // Not adopted: it stays undeclared for the next guests' plans.
            problems.push(format!(
                "{vmid}: {:?} {:?}",
                p.actions.iter().map(|a| a.verb).collect::<Vec<_>>(),
                p.anomalies.iter().map(|a| &a.message).collect::<Vec<_>>()
            ));
            continue;
        }
        let report = execute(&client, &p, &ExecOptions::default()).await;
        assert!(report.all_succeeded(), "{vmid}: {report:#?}");
        let again = plan(&client, &texts).await;
        assert!(again.actions.is_empty(), "{vmid}: {again:#?}");
        clean += 1;
        declared.push(text);
    }
    eprintln!(
        "corpus VMs: {} adopted, {loads} load, {clean} tagged clean",
        dirs.len()
    );
    for p in &problems {
        eprintln!("  not clean: {p}");
    }
    assert!(clean > 0, "no corpus VM adopted clean: {problems:#?}");
    sim.shutdown().await.unwrap();
}
