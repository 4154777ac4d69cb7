//! PVE as it is: `/cluster/resources` serves guest stats up to 10 s old, so power state and the
//! template flag come from live sources; LXC template conversion runs in a forked `vztemplate`
//! worker whose failure is the action's.

use crate::support::{CT_TEMPLATE, graph_of, one_node_with_ct_template};
use proxops_engine::execute::{ExecOptions, FailureKind, Outcome, execute};
use proxops_engine::plan::Verb;
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::{GuestRef, PveClient};
use proxops_pve_sim::{FaultConfig, SimConfig, SimHandle, TaskDurations, start};
use std::time::Duration;

const CLUSTER: &str = "lab";

const TEMPLATE_CT: &str = "apiVersion: proxops/v1alpha1\nkind: TemplateCT\nmetadata:\n  name: base\nspec:\n  node: pve1\n  vmid: 9001\n  template: debian\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n";

const STARTED_VM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  state: started\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 4GiB\n";

const TEMPLATE_VM: &str = "apiVersion: proxops/v1alpha1\nkind: TemplateVM\nmetadata:\n  name: tpl\nspec:\n  node: pve1\n  vmid: 130\n  memory: 1GiB\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 4GiB\n";

/// A simulator whose stats refresh every `stats_interval`, with the CT template on `local`.
async fn simulator(stats_interval: Duration) -> (SimHandle, PveClient) {
    let state = one_node_with_ct_template();
    let sim = start(
        SimConfig::default()
            .with_state(state)
            .with_task_durations(TaskDurations::uniform(Duration::from_millis(20)))
            .with_offline_downloads(true)
            .with_stats_interval(stats_interval),
    )
    .await
    .unwrap();
    let client = proxops_test_support::sim::client(&sim);
    (sim, client)
}

async fn plan(client: &PveClient, texts: &[&str]) -> proxops_engine::plan::ClusterPlan {
    plan_cluster(client, CLUSTER, &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

/// Tasks of a type in the simulator's record.
fn tasks(sim: &SimHandle, kind: &str) -> usize {
    sim.state().tasks.iter().filter(|t| t.kind == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_stats_cache_never_makes_a_second_start_or_template() {
    // An hour: the cache taken by the first plan (no guests yet) is what every later plan
    // reads, as a second apply within pvestatd's 10 s would.
    let (sim, client) = simulator(Duration::from_secs(3600)).await;
    let all = [STARTED_VM, TEMPLATE_VM, CT_TEMPLATE, TEMPLATE_CT];
    let first = plan(&client, &all).await;
    let report = execute(&client, &first, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let rows = client.cluster_resources(Some("vm")).await.unwrap();
    assert!(
        rows.iter().all(|r| r.status.as_deref() == Some("unknown")),
        "the cache predates the guests: {rows:#?}"
    );
    let starts = (tasks(&sim, "qmstart"), tasks(&sim, "qmcreate"));
    let templates = (tasks(&sim, "qmtemplate"), tasks(&sim, "vztemplate"));
    assert_eq!(templates, (1, 1));
    let again = plan(&client, &all).await;
    assert!(again.is_empty(), "{again:#?}");
    assert!(
        again.anomalies.is_empty() && again.skipped.is_empty(),
        "{again:#?}"
    );
    let report = execute(&client, &again, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert_eq!((tasks(&sim, "qmstart"), tasks(&sim, "qmcreate")), starts);
    assert_eq!(
        (tasks(&sim, "qmtemplate"), tasks(&sim, "vztemplate")),
        templates
    );
    assert!(sim.state().guests[&120].running());
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_vztemplate_worker_fails_the_action_and_the_next_cycle_converts() {
    let (sim, client) = simulator(Duration::ZERO).await;
    sim.set_faults(FaultConfig::default().with_failing_tasks(vec!["vztemplate".into()]));
    let all = [CT_TEMPLATE, TEMPLATE_CT];
    let first = plan(&client, &all).await;
    let report = execute(&client, &first, &ExecOptions::default()).await;
    let create = report
        .results
        .iter()
        .find(|r| r.subject == "TemplateCT/base")
        .unwrap();
    match &create.outcome {
        Outcome::Failed { error } => {
            assert!(error.message().contains("injected task failure"), "{error}");
            assert_eq!(error.kind(), FailureKind::TaskFailed, "{error}");
        }
        other => panic!("the conversion failed in its worker, yet: {other:?}"),
    }
    assert!(
        create.upids.iter().any(|u| u.contains(":vztemplate:9001:")),
        "{create:?}"
    );
    let ct = GuestRef::lxc("pve1", 9001);
    let live = client.guest_config(&ct).await.unwrap().values;
    assert!(!live.contains_key("template"), "{live:#?}");
    // The fault gone, the next cycle makes it a template.
    sim.set_faults(FaultConfig::default());
    let next = plan(&client, &all).await;
    let verbs: Vec<Verb> = next.actions.iter().map(|a| a.verb).collect();
    assert!(verbs.contains(&Verb::MarkTemplate), "{next:#?}");
    let report = execute(&client, &next, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let live = client.guest_config(&ct).await.unwrap().values;
    assert_eq!(live.get("template").map(String::as_str), Some("1"));
    assert!(plan(&client, &all).await.is_empty());
    sim.shutdown().await.unwrap();
}
