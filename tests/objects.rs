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

/// A call PVE answers with a worker's UPID, waited for.
async fn task(client: &PveClient, method: Method, path: &str, params: Params) {
    let upid = client.call_json(method, path, path, &params).await.unwrap();
    let upid = upid.as_str().unwrap().parse().unwrap();
    client
        .wait_task(&upid, &proxops_pve::WaitOptions::default())
        .await
        .unwrap();
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
pub(crate) fn remembered(texts: &[String]) -> PlanOptions {
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
    // Only the operator can free it: an anomaly naming the guest, not a prune retried.
    assert!(p.deferred_prunes.is_empty(), "{p:#?}");
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.subject.starts_with("Storage/nas") && a.message.contains("VM/web")),
        "{p:#?}"
    );
    // The guest leaves the repository too but is still live when the plan is made: its
    // volume holds the storage this cycle; the cycle after the guest's prune frees it.
    let keep = vec![vm("other", 151, "node: pve1", "local-lvm", "")];
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
    // A guest made by hand with a disk on it, which ProxOps never prunes: the storage stays,
    // an anomaly names the guest (its name once pvestatd has broadcast it), until the operator
    // removes it.
    task(
        &client,
        Method::POST,
        "/nodes/pve1/qemu",
        Params::new()
            .set("vmid", "300")
            .set("name", "scratch")
            .set("scsi0", "nas:1"),
    )
    .await;
    let p = plan_with(&client, &keep, &remembered(&both)).await;
    assert!(p.actions.iter().all(|a| a.verb != Verb::Delete), "{p:#?}");
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.subject.starts_with("Storage/nas") && a.message.contains("vmid 300")),
        "{p:#?}"
    );
    task(
        &client,
        Method::DELETE,
        "/nodes/pve1/qemu/300",
        Params::new(),
    )
    .await;
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

/// A repository of cluster `t` (nodes pve1-pve3) listing `texts`, loaded.
pub(crate) fn repository(dir: &std::path::Path, texts: &[String]) -> proxops_model::Cluster {
    use proxops_model::{FsSource, LoadOptions, load_repository};
    let cluster = dir.join("clusters/t");
    std::fs::create_dir_all(&cluster).unwrap();
    std::fs::write(
        cluster.join("config.yaml"),
        "pve:\n  clusters:\n    t:\n      base-url: https://pve.invalid:8006\n      nodes: [pve1, pve2, pve3]\n",
    )
    .unwrap();
    let mut listed = String::from("resources:\n");
    for (i, t) in texts.iter().enumerate() {
        let registry = proxops_model::Registry::builtin();
        let kind = t
            .lines()
            .find_map(|l| l.strip_prefix("kind: "))
            .unwrap()
            .trim();
        let root = registry.get(kind).unwrap().root();
        std::fs::create_dir_all(dir.join(root).join("t")).unwrap();
        std::fs::write(dir.join(format!("{root}/t/m{i}.yaml")), t).unwrap();
        listed.push_str(&format!("  - ../../{root}/t/m{i}.yaml\n"));
    }
    std::fs::write(cluster.join("resources.yaml"), listed).unwrap();
    let repo = load_repository(
        &FsSource::new(dir).unwrap(),
        &proxops_model::Registry::builtin(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(repo.diagnostics.is_empty(), "{:#?}", repo.diagnostics);
    repo.cluster("t").unwrap().clone()
}

/// The manifests `proxops adopt --kind` writes for `class`, as texts.
pub(crate) async fn adopted(
    client: &PveClient,
    cluster: &proxops_model::Cluster,
    class: proxops_model::kinds::ObjectClass,
) -> Vec<String> {
    use proxops_engine::adopt::{ObjectOutcome, adopt_objects};
    adopt_objects(client, cluster, class, None)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|o| match o {
            ObjectOutcome::Adopted(a) => Some(a.to_yaml()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_writes_manifests_the_next_plan_takes_over_without_rewriting_anything() {
    let (_sim, client) = sim().await;
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new()
            .set("poolid", "Media_Pool")
            .set("comment", "films"),
    )
    .await;
    call(
        &client,
        Method::POST,
        "/cluster/mapping/pci",
        Params::new()
            .set("id", "gpu")
            .set("description", "the GPU")
            .set("map", "node=pve1,path=0000:01:00.0,id=10de:1b80"),
    )
    .await;
    call(
        &client,
        Method::POST,
        "/cluster/backup",
        Params::new()
            .set("id", "weekly")
            .set("schedule", "sun 03:00")
            .set("storage", "local")
            .set("vmid", "100,101")
            .set("mode", "stop")
            .set("prune-backups", "keep-last=3")
            .set("compress", "zstd"),
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let empty = repository(tmp.path(), &[]);
    use proxops_model::kinds::ObjectClass;
    let mut texts = Vec::new();
    for class in [
        ObjectClass::Pool,
        ObjectClass::Mapping,
        ObjectClass::BackupJob,
    ] {
        let found = adopted(&client, &empty, class).await;
        assert_eq!(found.len(), 1, "{class:?}: {found:#?}");
        texts.extend(found);
    }
    assert!(texts[0].contains("id: Media_Pool"), "{}", texts[0]);
    let before = (
        get(&client, "/pools").await,
        get(&client, "/cluster/mapping/pci").await,
        get(&client, "/cluster/backup").await,
    );
    // The adopted manifests load, and the plan only writes the marks.
    let tmp = tempfile::tempdir().unwrap();
    let cluster = repository(tmp.path(), &texts);
    assert_eq!(cluster.resources.len(), 3);
    let p = plan(&client, &texts).await;
    assert_eq!(
        verbs(&p),
        vec![Verb::Adopt, Verb::Adopt, Verb::Adopt],
        "{p:#?}"
    );
    for a in &p.actions {
        let keys: Vec<&str> = a.changes.iter().map(|c| c.key.as_str()).collect();
        assert!(keys == ["comment"] || keys == ["description"], "{a:#?}");
    }
    run(&client, &p).await;
    assert!(plan(&client, &texts).await.is_empty());
    let after = (
        get(&client, "/pools").await,
        get(&client, "/cluster/mapping/pci").await,
        get(&client, "/cluster/backup").await,
    );
    // Only the free-text fields changed.
    assert_eq!(
        row(&after.0, "poolid", "Media_Pool").unwrap()["comment"],
        "films [proxops.t.pool.media-pool]"
    );
    let job = |v: &Value| {
        let mut r = row(v, "id", "weekly").unwrap().clone();
        r.as_object_mut().unwrap().remove("comment");
        r.as_object_mut().unwrap().remove("next-run");
        r
    };
    assert_eq!(job(&before.2), job(&after.2));
    let map = |v: &Value| row(v, "id", "gpu").unwrap()["map"].clone();
    assert_eq!(map(&before.1), map(&after.1));
    // Adopting again finds them managed.
    let again = proxops_engine::adopt::adopt_objects(&client, &cluster, ObjectClass::Pool, None)
        .await
        .unwrap();
    assert!(
        again
            .iter()
            .all(|o| !matches!(o, proxops_engine::adopt::ObjectOutcome::Adopted(_))),
        "{again:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_joins_its_pool_with_its_create_and_is_put_back_when_moved_by_hand() {
    let (_sim, client) = sim().await;
    let web = vm("web", 150, "node: pve1", "local-lvm", "  pool: prod\n");
    let texts = vec![pool("prod", "production"), web.clone()];
    let p = apply(&client, &texts).await;
    // The pool first, the guest created in it.
    let order: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(order[0], ("Pool", Verb::Create), "{p:#?}");
    let member = |v: &Value| {
        v["members"]
            .as_array()
            .is_some_and(|m| m.iter().any(|g| g["vmid"] == 150))
    };
    assert!(member(&get(&client, "/pools/prod").await));
    assert!(plan(&client, &texts).await.is_empty());
    // Moved to another pool by hand: moved back.
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new().set("poolid", "other"),
    )
    .await;
    call(
        &client,
        Method::PUT,
        "/pools/other",
        Params::new().set("vms", 150).set("allow-move", 1),
    )
    .await;
    let p = apply(&client, &texts).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    assert!(member(&get(&client, "/pools/prod").await));
    assert!(!member(&get(&client, "/pools/other").await));
    // The manifest no longer names the pool: taken out of it (ProxOps put it there).
    let plain = vec![
        pool("prod", "production"),
        vm("web", 150, "node: pve1", "local-lvm", ""),
    ];
    let p = plan_with(&client, &plain, &remembered(&texts)).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    run(&client, &p).await;
    assert!(!member(&get(&client, "/pools/prod").await));
    // Without the planes, a pool the manifest does not name is left as it is.
    call(
        &client,
        Method::PUT,
        "/pools/other",
        Params::new().set("vms", 150),
    )
    .await;
    assert!(plan(&client, &plain).await.is_empty());
}

/// The storages of pool `poolid`, as PVE lists them.
async fn pool_storages(client: &PveClient, poolid: &str) -> Vec<String> {
    let params = Params::new().set("poolid", poolid).set("type", "storage");
    let rows = client
        .call_json(Method::GET, "/pools", "/pools", &params)
        .await
        .unwrap();
    rows[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["storage"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_joins_the_pool_it_names_is_put_back_and_leaves_only_a_pool_proxops_put_it_in() {
    let (_sim, client) = sim().await;
    let nas = |pool: &str| {
        manifest(
            "Storage",
            "nas",
            &format!("  type: dir\n  content: [iso]\n  options:\n    path: /mnt/nas\n{pool}"),
        )
    };
    let texts = vec![pool("media", "media storages"), nas("  pool: media\n")];
    // The pool first, then the storage, then its membership.
    let p = apply(&client, &texts).await;
    let order: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(
        order,
        [
            ("Pool", Verb::Create),
            ("Storage", Verb::Create),
            ("Storage", Verb::Update)
        ],
        "{p:#?}"
    );
    assert_eq!(pool_storages(&client, "media").await, ["nas"]);
    assert!(plan(&client, &texts).await.is_empty());

    // Taken out by hand: put back. Also put in another pool by hand: left there.
    call(
        &client,
        Method::PUT,
        "/pools/media",
        Params::new().set("storage", "nas").set("delete", 1),
    )
    .await;
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new().set("poolid", "backups"),
    )
    .await;
    call(
        &client,
        Method::PUT,
        "/pools/backups",
        Params::new().set("storage", "nas"),
    )
    .await;
    let p = apply(&client, &texts).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    assert!(
        p.actions[0].reason.contains("not in pool `media`"),
        "{p:#?}"
    );
    assert_eq!(pool_storages(&client, "media").await, ["nas"]);
    assert_eq!(pool_storages(&client, "backups").await, ["nas"]);
    assert!(plan(&client, &texts).await.is_empty());

    // The manifest drops `pool:`: taken out of `media`, which ProxOps put it in (the previous
    // document says so), never out of `backups`.
    let dropped = vec![pool("media", "media storages"), nas("")];
    let p = plan_with(&client, &dropped, &remembered(&texts)).await;
    assert_eq!(verbs(&p), vec![Verb::Update], "{p:#?}");
    run(&client, &p).await;
    assert!(pool_storages(&client, "media").await.is_empty());
    assert_eq!(pool_storages(&client, "backups").await, ["nas"]);
    assert!(
        plan_with(&client, &dropped, &remembered(&dropped))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_adopted_from_a_pool_keeps_it() {
    use proxops_engine::adopt::{AdoptContext, Outcome, Selection, adopt_live};
    let (_sim, client) = sim().await;
    call(
        &client,
        Method::POST,
        "/pools",
        Params::new().set("poolid", "prod"),
    )
    .await;
    task(
        &client,
        Method::POST,
        "/nodes/pve1/qemu",
        Params::new()
            .set("vmid", "300")
            .set("name", "legacy")
            .set("memory", "1024")
            .set("scsi0", "local-lvm:1")
            .set("pool", "prod"),
    )
    .await;
    let ctx = AdoptContext::new("t").with_nodes(vec!["pve1".into()]);
    let adopted = adopt_live(&client, &ctx, &Selection::Vmids(vec![300]))
        .await
        .unwrap();
    let Outcome::Adopted(a) = &adopted[0].1 else {
        panic!("{adopted:#?}");
    };
    assert_eq!(a.manifest["spec"]["pool"], "prod", "{}", a.to_yaml());
    // Taken over where it is: its identity written, no move out of its pool.
    let texts = vec![manifest("Pool", "prod", "  id: prod\n"), a.to_yaml()];
    let p = plan(&client, &texts).await;
    assert!(
        p.actions
            .iter()
            .all(|a| a.kind != "VM" || a.verb == Verb::Adopt),
        "{p:#?}"
    );
    run(&client, &p).await;
    let p = plan(&client, &texts).await;
    assert!(p.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    let members = get(&client, "/pools/prod").await;
    assert_eq!(members["members"][0]["vmid"], 300, "{members}");
}
