//! `ha.group` on PVE 9, which has rules instead of groups: the HA resource gets a node-affinity
//! rule of its own (`proxops-vm-<vmid>`), updated when its nodes change, removed when
//! `ha.group` is removed and the previous desired document proves it ours, and purged with
//! the HA resource; a rule ProxOps did not make is never removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{apply, plan_with, sim, verbs, vm};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::PlanOptions;
use proxops_model::{Registry, Resource, ResourceKey};
use proxops_pve::{Params, PveClient};
use std::collections::BTreeMap;
use std::sync::Arc;

fn previous(texts: &[String]) -> BTreeMap<ResourceKey, Arc<Resource>> {
    texts
        .iter()
        .map(|t| {
            let file = proxops_model::diagnostic::SourceFile::new("manifest.yaml", t.clone());
            let r = proxops_model::manifest::load_manifest(&file, &Registry::builtin(), None)
                .resource
                .unwrap();
            (r.key(), r)
        })
        .collect()
}

/// Plans `now` with `before` as the previous desired documents and applies it.
async fn apply_since(client: &PveClient, now: &[String], before: &[String]) -> ClusterPlan {
    let options = PlanOptions::default().with_previous(Some(previous(before)));
    let p = plan_with(client, now, &options).await;
    let report = execute(client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{p:#?}\n{report:#?}");
    p
}

async fn rule(client: &PveClient, id: &str) -> Option<proxops_pve::api::ha::HaRule> {
    client
        .ha_rules()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.rule == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_group_on_pve9_is_a_node_affinity_rule_made_changed_and_removed_with_its_resource() {
    let (sim, client) = sim().await;
    let ha = "  ha:\n    state: stopped\n    group: prefer\n";
    let web = vm("web", 100, "nodes: [pve2, pve1]", "ceph", ha);
    let p = apply(&client, std::slice::from_ref(&web)).await;
    assert!(p.anomalies.is_empty(), "{:#?}", p.anomalies);
    assert_eq!(
        verbs(&p),
        [Verb::Create, Verb::HaAdd, Verb::HaAdd],
        "{p:#?}"
    );
    let r = rule(&client, "proxops-vm-100").await.expect("the rule");
    assert_eq!(
        (r.kind.as_str(), r.resources.as_deref(), r.nodes.as_deref()),
        ("node-affinity", Some("vm:100"), Some("pve1,pve2"))
    );
    // The HA resource carries no group: PVE 9 refuses one.
    assert_eq!(client.ha_resources().await.unwrap()[0].group, None);
    // Converged: nothing more.
    let again = apply_since(
        &client,
        std::slice::from_ref(&web),
        std::slice::from_ref(&web),
    )
    .await;
    assert!(again.actions.is_empty(), "{again:#?}");

    // Its nodes change: the rule follows.
    let three = web.replace("nodes: [pve2, pve1]", "nodes: [pve1, pve2, pve3]");
    let p = apply_since(
        &client,
        std::slice::from_ref(&three),
        std::slice::from_ref(&web),
    )
    .await;
    assert_eq!(verbs(&p), [Verb::HaUpdate], "{p:#?}");
    assert_eq!(
        rule(&client, "proxops-vm-100")
            .await
            .unwrap()
            .nodes
            .as_deref(),
        Some("pve1,pve2,pve3")
    );

    // `ha.group` removed without a previous document declaring it: the rule is left alone.
    let plain = three.replace("    group: prefer\n", "");
    let options = PlanOptions::default().with_previous(None);
    let p = plan_with(&client, std::slice::from_ref(&plain), &options).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("HA rule proxops-vm-100 exists")),
        "{:?}",
        p.warnings
    );
    // With it: the rule goes, the HA resource stays.
    let p = apply_since(
        &client,
        std::slice::from_ref(&plain),
        std::slice::from_ref(&three),
    )
    .await;
    assert_eq!(verbs(&p), [Verb::HaRemove], "{p:#?}");
    assert!(rule(&client, "proxops-vm-100").await.is_none());
    assert_eq!(client.ha_resources().await.unwrap().len(), 1);

    // Back with the group, then `ha:` removed: the HA resource goes and PVE purges its rule.
    apply_since(
        &client,
        std::slice::from_ref(&three),
        std::slice::from_ref(&plain),
    )
    .await;
    assert!(rule(&client, "proxops-vm-100").await.is_some());
    let none = vm(
        "web",
        100,
        "nodes: [pve1, pve2, pve3]",
        "ceph",
        "  state: stopped\n",
    );
    let p = apply_since(
        &client,
        std::slice::from_ref(&none),
        std::slice::from_ref(&three),
    )
    .await;
    assert_eq!(verbs(&p), [Verb::HaRemove], "{p:#?}");
    assert!(client.ha_resources().await.unwrap().is_empty());
    assert!(client.ha_rules().await.unwrap().is_empty());
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_node_affinity_rule_is_an_anomaly_and_is_never_removed() {
    let (sim, client) = sim().await;
    let web = vm(
        "web",
        100,
        "node: pve1",
        "ceph",
        "  ha:\n    state: stopped\n",
    );
    apply(&client, std::slice::from_ref(&web)).await;
    // An operator's own rule for the resource.
    client
        .ha_rule_create(
            "mine",
            Params::new()
                .set("type", "node-affinity")
                .set("resources", "vm:100")
                .set("nodes", "pve2"),
        )
        .await
        .unwrap();
    let grouped = web.replace(
        "    state: stopped\n",
        "    state: stopped\n    group: prefer\n",
    );
    let options = PlanOptions::default().with_previous(Some(previous(std::slice::from_ref(&web))));
    let p = plan_with(&client, std::slice::from_ref(&grouped), &options).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(
        p.anomalies[0].message.contains("node-affinity rule `mine`"),
        "{:#?}",
        p.anomalies
    );
    // Group removed again, proven ours by the previous document: still only ours would go,
    // and there is none; `mine` stays.
    let p = apply_since(
        &client,
        std::slice::from_ref(&web),
        std::slice::from_ref(&grouped),
    )
    .await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(rule(&client, "mine").await.is_some());
    sim.shutdown().await.unwrap();
}
