//! Cluster objects (issue 32) end to end, engine + simulator: pools, backup jobs, resource
//! mappings, users, groups, roles, ACL entries and storages are created, updated, restored after
//! a hand change, taken over when a hand-made one already matches, and pruned only when they
//! are provably ProxOps's; a storage a guest uses is never pruned.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{apply, plan, plan_with, sim, verbs, vm};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::PlanOptions;
use proxops_pve::{Method, Params, PveClient};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

fn manifest(kind: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

fn pool(name: &str, comment: &str) -> String {
    manifest("Pool", name, &format!("  comment: {comment}\n"))
}

async fn get(client: &PveClient, path: &str) -> Value {
    client
        .call_json(Method::GET, path, path, &Params::new())
        .await
        .unwrap()
}

async fn call(client: &PveClient, method: Method, path: &str, params: Params) {
    client.call_json(method, path, path, &params).await.unwrap();
}

fn row<'a>(list: &'a Value, field: &str, id: &str) -> Option<&'a Value> {
    list.as_array()?
        .iter()
        .find(|r| r.get(field).and_then(Value::as_str) == Some(id))
}

async fn run(client: &PveClient, p: &ClusterPlan) {
    let report = execute(client, p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{p:#?}\n{report:#?}");
}

/// What the planes would give the next plan after `texts` were applied: their documents as
/// the previous ones, every one receipted.
fn remembered(texts: &[String]) -> PlanOptions {
    let graph = crate::placement::graph_of(texts);
    let mut previous = BTreeMap::new();
    let mut receipts = BTreeSet::new();
    for id in graph.resources() {
        let r = graph.resource(id);
        previous.insert(r.key(), Arc::clone(r));
        receipts.insert(r.key());
    }
    PlanOptions::default()
        .with_previous(Some(previous))
        .with_receipts(Some(receipts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_is_created_marked_restored_and_pruned_only_when_it_is_ours() {
    let (_sim, client) = sim().await;
    let texts = vec![pool("prod", "production guests")];
    let p = apply(&client, &texts).await;
    assert_eq!(verbs(&p), vec![Verb::Create], "{p:#?}");
    let pools = get(&client, "/pools").await;
    let comment = row(&pools, "poolid", "prod").unwrap()["comment"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(comment, "production guests [proxops.t.pool.prod]");
    assert!(plan(&client, &texts).await.is_empty());

    // A hand change of the comment that keeps the mark is drift: restored.
    call(
        &client,
        Method::PUT,
        "/pools/prod",
        Params::new().set("comment", "edited by hand [proxops.t.pool.prod]"),
    )
    .await;
    let p = apply(&client, &texts).await;
    assert_eq!(verbs(&p), vec![Verb::Update]);
    assert!(plan(&client, &texts).await.is_empty());
    // One that edits the mark away: without the planes nothing proves the pool ours any more,
    // so it is left alone; with its receipt it is restored, mark and all.
    call(
        &client,
        Method::PUT,
        "/pools/prod",
        Params::new().set("comment", "edited by hand"),
    )
    .await;
    let p = plan(&client, &texts).await;
    assert!(p.actions.is_empty() && p.anomalies.len() == 1, "{p:#?}");
    let p = plan_with(&client, &texts, &remembered(&texts)).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    run(&client, &p).await;
    assert!(plan(&client, &texts).await.is_empty());

    // Pools made by hand, and one marked by another cluster: never touched or pruned.
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new()
            .set("poolid", "handmade")
            .set("comment", "mine"),
    )
    .await;
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new()
            .set("poolid", "elsewhere")
            .set("comment", "[proxops.other.pool.elsewhere]"),
    )
    .await;
    let gone = plan(&client, &[]).await;
    // An empty composition prunes nothing.
    assert!(gone.actions.is_empty(), "{gone:#?}");
    let other = vec![pool("qa", "qa")];
    let p = plan(&client, &other).await;
    let deletes: Vec<&str> = p
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Delete)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(deletes, vec!["prod"], "{p:#?}");
    run(&client, &p).await;
    let pools = get(&client, "/pools").await;
    assert!(row(&pools, "poolid", "prod").is_none());
    assert!(row(&pools, "poolid", "handmade").is_some());
    assert!(row(&pools, "poolid", "elsewhere").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_made_object_is_taken_over_only_when_it_already_matches() {
    let (_sim, client) = sim().await;
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new().set("poolid", "lab").set("comment", "the lab"),
    )
    .await;
    // Differs in the operator's text: an anomaly, nothing written.
    let p = plan(&client, &[pool("lab", "another text")]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    assert!(p.anomalies[0].message.contains("did not make it"), "{p:#?}");
    // Matches: adopted by writing the mark only.
    let texts = vec![pool("lab", "the lab")];
    let p = apply(&client, &texts).await;
    assert_eq!(verbs(&p), vec![Verb::Adopt], "{p:#?}");
    let pools = get(&client, "/pools").await;
    assert_eq!(
        row(&pools, "poolid", "lab").unwrap()["comment"],
        "the lab [proxops.t.pool.lab]"
    );
    assert!(plan(&client, &texts).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_without_a_receipt_is_never_changed_and_one_a_guest_uses_is_never_pruned() {
    let (_sim, client) = sim().await;
    let nas = manifest(
        "Storage",
        "nas",
        "  type: dir\n  content: [iso, backup]\n  options:\n    path: /mnt/nas\n",
    );
    let p = apply(&client, std::slice::from_ref(&nas)).await;
    assert_eq!(verbs(&p), vec![Verb::Create], "{p:#?}");
    assert!(plan(&client, std::slice::from_ref(&nas)).await.is_empty());
    // Without the planes nothing proves it ours: a change is an anomaly, not a write.
    let changed = nas.replace("[iso, backup]", "[iso]");
    let p = plan(&client, std::slice::from_ref(&changed)).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    // With its receipt it is ours: updated.
    let options = remembered(std::slice::from_ref(&nas));
    let p = plan_with(&client, std::slice::from_ref(&changed), &options).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    run(&client, &p).await;

    // A guest with a disk on it: the storage's prune is held back, naming the guest.
    let with_images = changed.replace("[iso]", "[iso, images]");
    let options = remembered(std::slice::from_ref(&changed));
    let p = plan_with(&client, std::slice::from_ref(&with_images), &options).await;
    run(&client, &p).await;
    let web = vm("web", 150, "node: pve1", "nas", "");
    let both = vec![with_images.clone(), web.clone()];
    let p = plan_with(
        &client,
        &both,
        &remembered(std::slice::from_ref(&with_images)),
    )
    .await;
    let order: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(order.first(), Some(&("VM", Verb::Create)), "{p:#?}");
    run(&client, &p).await;
    // The manifest of the storage leaves, the guest stays (declared): refused.
    let p = plan_with(&client, std::slice::from_ref(&web), &remembered(&both)).await;
    assert!(p.actions.iter().all(|a| a.verb != Verb::Delete), "{p:#?}");
    assert!(
        p.deferred_prunes
            .iter()
            .any(|d| d.reason.contains("VM/web")),
        "{p:#?}"
    );
    // The guest leaves the repository too but is still live when the plan is made: its
    // volume holds the storage this cycle; the cycle after the guest's prune frees it.
    let keep = vec![pool("other", "x")];
    let p = plan_with(&client, &keep, &remembered(&both)).await;
    let deleted: Vec<(&str, &str)> = p
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Delete)
        .map(|a| (a.kind.as_str(), a.name.as_str()))
        .collect();
    assert_eq!(deleted, vec![("VM", "web")], "{p:#?}");
    assert!(
        p.deferred_prunes
            .iter()
            .any(|d| d.subject.starts_with("Storage/nas") && d.reason.contains("vmid 150")),
        "{p:#?}"
    );
    run(&client, &p).await;
    let storages = get(&client, "/storage").await;
    assert!(row(&storages, "storage", "nas").is_some());
    let p = plan_with(&client, &keep, &remembered(&both)).await;
    let deleted: Vec<(&str, &str)> = p
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Delete)
        .map(|a| (a.kind.as_str(), a.name.as_str()))
        .collect();
    assert_eq!(deleted, vec![("Storage", "nas")], "{p:#?}");
    run(&client, &p).await;
    let storages = get(&client, "/storage").await;
    assert!(row(&storages, "storage", "nas").is_none());
}
