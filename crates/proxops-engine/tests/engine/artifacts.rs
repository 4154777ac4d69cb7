//! Changed artifacts are noticed: a file whose url or checksum changed under the same file name
//! is replaced (deleted, downloaded again), unless a guest uses it.

use crate::support::{graph_of, manifest, offline_simulator, one_node};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_model::{Resource, ResourceKey};
use proxops_pve::PveClient;
use std::collections::BTreeMap;
use std::sync::Arc;

const DELETE: (&str, &str) = ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}");
const VOLID: &str = "local:iso/installer.iso";

fn iso(url: &str, sha256: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: installer\nspec:\n  node: pve1\n  storage: local\n  filename: installer.iso\n  url: {url}\n  checksum:\n    algorithm: sha256\n    value: \"{sha256}\"\n"
    )
}

/// A VM with the ISO in its cdrom (`ide2`).
const VM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 4GiB\n  hardware:\n    cdrom:\n      iso: installer\n";

fn sum(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

fn previous(texts: &[&str]) -> Option<BTreeMap<ResourceKey, Arc<Resource>>> {
    Some(
        texts
            .iter()
            .map(|t| {
                let r = manifest(t);
                (r.key(), r)
            })
            .collect(),
    )
}

async fn plan(
    client: &PveClient,
    now: &[&str],
    before: Option<BTreeMap<ResourceKey, Arc<Resource>>>,
) -> ClusterPlan {
    let options = PlanOptions::default().with_previous(before);
    plan_cluster(client, "t", &graph_of(now), &options)
        .await
        .unwrap()
}

async fn apply(client: &PveClient, plan: &ClusterPlan) -> Vec<String> {
    let report = execute(client, plan, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    report.results.into_iter().flat_map(|r| r.upids).collect()
}

fn isos(sim: &proxops_pve_sim::SimHandle) -> Vec<String> {
    sim.state()
        .volumes
        .iter()
        .filter(|v| v.content == "iso")
        .map(|v| v.volid.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_checksum_under_the_same_file_name_replaces_the_file() {
    let (sim, client) = offline_simulator(one_node()).await;
    let url = "https://example.invalid/installer.iso";
    let (v1, v2) = (iso(url, &sum('a')), iso(url, &sum('b')));
    let first = plan(&client, &[&v1], None).await;
    assert_eq!(first.actions.len(), 1);
    assert_eq!(first.actions[0].verb, Verb::Download);
    apply(&client, &first).await;
    let p = plan(&client, &[&v2], previous(&[&v1])).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let a = &p.actions[0];
    assert_eq!(a.verb, Verb::Replace);
    assert_eq!(a.node, "pve1");
    assert_eq!(
        a.reason,
        "checksum changed under the same file name local:iso/installer.iso"
    );
    assert_eq!(serde_json::to_value(a).unwrap()["verb"], "replace");
    let upids = apply(&client, &p).await;
    // The old file was deleted, then the new one fetched.
    let kinds: Vec<&str> = upids
        .iter()
        .map(|u| u.split(':').nth(5).unwrap_or_default())
        .collect();
    assert_eq!(kinds, ["imgdel", "download"], "{upids:#?}");
    assert_eq!(sim.count(DELETE.0, DELETE.1), 1);
    assert_eq!(isos(&sim), [VOLID]);
    // Once the planes hold the new document, converged; and without planes, as before.
    assert!(plan(&client, &[&v2], previous(&[&v2])).await.is_empty());
    assert!(plan(&client, &[&v2], None).await.is_empty());
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_url_of_an_iso_in_a_cdrom_is_an_anomaly_and_nothing_is_deleted() {
    let (sim, client) = offline_simulator(one_node()).await;
    let v1 = iso("https://example.invalid/installer-1.iso", &sum('a'));
    let v2 = iso("https://example.invalid/installer-2.iso", &sum('a'));
    let first = plan(&client, &[&v1, VM], None).await;
    assert_eq!(first.actions.len(), 2, "{first:#?}");
    apply(&client, &first).await;
    let p = plan(&client, &[&v2, VM], previous(&[&v1, VM])).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    assert_eq!(p.anomalies[0].subject, "ISO/installer");
    let message = &p.anomalies[0].message;
    assert!(
        message.starts_with("the url of local:iso/installer.iso on `pve1` changed")
            && message.contains("vmid 120 (ide2) uses it: not replaced"),
        "{message}"
    );
    // The guest itself is planned as usual (nothing to do), not held back.
    assert!(p.skipped.is_empty(), "{p:#?}");
    assert_eq!(sim.count(DELETE.0, DELETE.1), 0);
    assert_eq!(isos(&sim), [VOLID]);
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_artifact_or_one_without_a_previous_document_plans_nothing() {
    let (sim, client) = offline_simulator(one_node()).await;
    let v1 = iso("https://example.invalid/installer.iso", &sum('a'));
    let v2 = iso("https://example.invalid/installer.iso", &sum('b'));
    apply(&client, &plan(&client, &[&v1], None).await).await;
    // The same document; no planes; planes without this resource: nothing can be proven.
    for (now, before) in [
        (&v1, previous(&[&v1])),
        (&v2, None),
        (&v2, Some(BTreeMap::new())),
    ] {
        let p = plan(&client, &[now], before).await;
        assert!(p.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    }
    assert_eq!(sim.count(DELETE.0, DELETE.1), 0);
    sim.shutdown().await.unwrap();
}
