//! LXC `unprivileged`: sent at create whether declared or not (`true` unless the manifest says
//! `false`), and never updated: PVE cannot change it, so a container in the other mode is an
//! anomaly.

use crate::support::{CT_TEMPLATE, graph_of, one_node_with_ct_template, simulator};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, PlanState, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{GuestRef, PveClient};

fn ct(unprivileged: Option<bool>) -> String {
    let mut t = String::from(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n",
    );
    if let Some(b) = unprivileged {
        t.push_str(&format!("  options:\n    unprivileged: {b}\n"));
    }
    t
}

async fn sim() -> (proxops_pve_sim::SimHandle, PveClient) {
    let state = one_node_with_ct_template();
    simulator(state).await
}

async fn plan(client: &PveClient, ct: &str) -> ClusterPlan {
    plan_cluster(
        client,
        "t",
        &graph_of(&[CT_TEMPLATE, ct]),
        &PlanOptions::default(),
    )
    .await
    .unwrap()
}

async fn create(client: &PveClient, text: &str) -> String {
    let p = plan(client, text).await;
    assert_eq!(p.actions[0].verb, Verb::Create, "{p:#?}");
    let report = execute(client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    client
        .guest_config(&GuestRef::lxc("pve1", 200))
        .await
        .unwrap()
        .values
        .get("unprivileged")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_are_created_unprivileged_unless_declared_otherwise() {
    let (s, client) = sim().await;
    assert_eq!(create(&client, &ct(None)).await, "1");
    assert_eq!(plan(&client, &ct(None)).await.state(), PlanState::InSync);
    s.shutdown().await.unwrap();
    let (s, client) = sim().await;
    // pve-container `create_vm` writes `unprivileged: 1` only (`$conf->{unprivileged} = 1 if
    // $unprivileged`): a privileged container has no such key, which reads as PVE's 0.
    assert_eq!(create(&client, &ct(Some(false))).await, "");
    assert_eq!(
        plan(&client, &ct(Some(false))).await.state(),
        PlanState::InSync
    );
    s.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_in_the_other_mode_is_an_anomaly_never_an_update() {
    let (s, client) = sim().await;
    create(&client, &ct(Some(false))).await;
    // The default (unprivileged) and an explicit `true` both differ from the live container.
    for text in [ct(None), ct(Some(true))] {
        let p = plan(&client, &text).await;
        assert!(p.actions.is_empty(), "{p:#?}");
        assert_eq!(p.state(), PlanState::Stuck, "{p:#?}");
        assert!(
            p.anomalies.iter().any(|a| a
                .message
                .contains("the container is privileged but the manifest wants it unprivileged")),
            "{p:#?}"
        );
    }
    s.shutdown().await.unwrap();
}
