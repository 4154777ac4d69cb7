//! Whole cycles against a simulator seeded from the example repository: converge from empty,
//! stay converged, prune what is no longer declared (within budget and guards), never touch a
//! guest that is not ours, and defer the dependants of a failure.

use crate::support::{homelab, homelab_options};
use proxops_engine::backend::{Backend, connect};
use proxops_engine::cycle::{converge, plan_options, reconcile};
use proxops_engine::execute::{ExecOptions, Outcome};
use proxops_engine::plan::Verb;
use proxops_graph::Graph;
use proxops_model::{Registry, Repository};
use std::time::Duration;

fn sim() -> Backend {
    Backend::Sim {
        state_file: None,
        task_time: Duration::from_millis(10),
    }
}

fn cluster<'r>(
    repo: &'r Repository,
    graphs: &'r [(String, Graph)],
    name: &str,
) -> (&'r proxops_model::Cluster, &'r Graph) {
    let c = repo.cluster(name).unwrap();
    let g = &graphs.iter().find(|(n, _)| n == name).unwrap().1;
    (c, g)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn homelab_converges_in_one_cycle_and_stays_converged() {
    let (repo, graphs) = homelab();
    let registry = Registry::builtin();
    for name in ["home", "lab"] {
        let (c, graph) = cluster(&repo, &graphs, name);
        let conn = connect(&registry, c, &sim()).await.unwrap();
        let (options, _tokens) = homelab_options(c, None);
        let cycles = converge(
            &conn.client,
            name,
            graph,
            &options,
            &ExecOptions::default(),
            5,
        )
        .await
        .unwrap();
        assert_eq!(
            cycles.len(),
            2,
            "{name}: {:#?}",
            cycles.iter().map(|c| &c.plan).collect::<Vec<_>>()
        );
        let first = &cycles[0];
        let report = first.report.as_ref().unwrap();
        assert!(report.all_succeeded(), "{name}: {report:#?}");
        // Every step of the graph has its action: a download per (artifact, node), a create per
        // guest (an HA guest's create has its ha-add besides, a guest's own firewall its writes),
        // a create per cluster object (a firewall's parts one each).
        for step in graph.steps() {
            let r = graph.resource(step.resource);
            let acted = first.plan.actions.iter().any(|a| {
                a.kind == r.kind
                    && a.name == r.name()
                    && step.node.as_deref().is_none_or(|n| a.node == n)
            });
            assert!(acted, "{name}: no action for {} ({:?})", r.key(), step.node);
        }
        // One create per guest, never two.
        let creates = first
            .plan
            .actions
            .iter()
            .filter(|a| a.verb == Verb::Create && a.vmid.is_some())
            .count();
        let guests = graph.steps().iter().filter(|s| s.vmid.is_some()).count();
        assert_eq!(creates, guests, "{name}");
        assert!(
            first.plan.anomalies.is_empty() && first.plan.skipped.is_empty(),
            "{:#?}",
            first.plan
        );
        // Running guests as declared.
        let sim = conn.sim.as_ref().unwrap();
        let state = sim.state();
        let running = state
            .guests
            .values()
            .filter(|g| g.status == "running")
            .count();
        let templates = state
            .guests
            .values()
            .filter(|g| g.config.get("template").is_some_and(|t| t == "1"))
            .count();
        assert!(running > 0 && running + templates <= state.guests.len());
        let second = &cycles[1];
        assert!(
            second.plan.is_empty() && second.report.is_none(),
            "{name}: {:#?}",
            second.plan
        );
        conn.sim.unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_resources_are_pruned_within_budget_and_foreign_guests_never() {
    let (repo, graphs) = homelab();
    let registry = Registry::builtin();
    let (c, graph) = cluster(&repo, &graphs, "home");
    let conn = connect(&registry, c, &sim()).await.unwrap();
    let exec = ExecOptions::default();
    converge(
        &conn.client,
        "home",
        graph,
        &plan_options(c, None),
        &exec,
        3,
    )
    .await
    .unwrap();
    let sim = conn.sim.as_ref().unwrap();
    // A guest someone made by hand, with a vmid the repository does not use.
    sim.with_state(|st| {
        let mut g = st.guests.values().next().unwrap().clone();
        g.vmid = 777;
        g.config.insert("tags".into(), "handmade".into());
        st.guests.insert(777, g);
    });
    // The repository drops every guest but the TemplateVM: 8 guests of ours go away.
    let kept: Vec<_> = c
        .resources
        .iter()
        .filter(|r| r.kind != "VM" && r.kind != "LXC" && r.kind != "TemplateCT")
        .cloned()
        .collect();
    let smaller = Graph::build(&registry, &kept).unwrap();
    let plan = reconcile(
        &conn.client,
        "home",
        &smaller,
        &plan_options(c, Some(2)),
        &exec,
        true,
    )
    .await
    .unwrap()
    .plan;
    let deletes: Vec<&str> = plan
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Delete)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(deletes.len(), 2, "{plan:#?}");
    assert_eq!(plan.deferred_prunes.len(), 7, "{plan:#?}");
    // pihole is protected in PVE (`protection: true`); the budget is used before truenas (also
    // protected) is reached, so six wait for budget.
    let budget = plan
        .deferred_prunes
        .iter()
        .filter(|d| d.reason.contains("prune budget"))
        .count();
    assert_eq!(budget, 6, "{plan:#?}");
    let cycle = reconcile(
        &conn.client,
        "home",
        &smaller,
        &plan_options(c, Some(0)),
        &exec,
        false,
    )
    .await
    .unwrap();
    let report = cycle.report.as_ref().unwrap();
    assert!(report.all_succeeded(), "{report:#?}");
    // The manifests of pihole (200) and truenas (140) set `protection: true`: PVE's flag is
    // honoured and reported, never cleared.
    let protected: Vec<&str> = cycle
        .plan
        .deferred_prunes
        .iter()
        .map(|d| d.subject.as_str())
        .collect();
    assert_eq!(
        protected,
        ["LXC/pihole (vmid 200)", "VM/truenas (vmid 140)"],
        "{:#?}",
        cycle.plan
    );
    assert!(
        cycle
            .plan
            .deferred_prunes
            .iter()
            .all(|d| d.reason.contains("protection"))
    );
    let left: Vec<u32> = sim.state().guests.keys().copied().collect();
    assert_eq!(
        left,
        [140, 200, 777, 9000],
        "the protected guests, the handmade one and the template stay"
    );
    // A repository that declares no guest at all deletes nothing (probable bad push).
    let artifacts_only: Vec<_> = c
        .resources
        .iter()
        .filter(|r| {
            r.kind != "TemplateVM" && r.kind != "VM" && r.kind != "LXC" && r.kind != "TemplateCT"
        })
        .cloned()
        .collect();
    let empty = Graph::build(&registry, &artifacts_only).unwrap();
    let plan = reconcile(
        &conn.client,
        "home",
        &empty,
        &plan_options(c, Some(0)),
        &exec,
        true,
    )
    .await
    .unwrap()
    .plan;
    assert!(plan.actions.is_empty(), "{plan:#?}");
    // The two protected guests and the template are left, each with the guard's reason.
    assert_eq!(plan.deferred_prunes.len(), 3, "{plan:#?}");
    assert!(
        plan.deferred_prunes
            .iter()
            .all(|d| d.reason.contains("declares no guests"))
    );
    conn.sim.unwrap().shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_at_our_vmid_that_is_not_ours_is_an_anomaly_and_its_dependants_wait() {
    let (repo, graphs) = homelab();
    let registry = Registry::builtin();
    let (c, graph) = cluster(&repo, &graphs, "home");
    let conn = connect(&registry, c, &sim()).await.unwrap();
    let sim = conn.sim.as_ref().unwrap();
    // Someone already has vmid 200 (the pihole container that docker-host depends on).
    sim.with_state(|st| {
        st.guests.insert(
            200,
            proxops_pve_sim::Guest {
                vmid: 200,
                kind: proxops_pve_sim::GuestType::Lxc,
                node: "pve1".into(),
                status: "running".into(),
                config: [("hostname".to_owned(), "someone-else".to_owned())].into(),
                ..Default::default()
            },
        );
    });
    let (options, _tokens) = homelab_options(c, None);
    let plan = reconcile(
        &conn.client,
        "home",
        graph,
        &options,
        &ExecOptions::default(),
        true,
    )
    .await
    .unwrap()
    .plan;
    assert_eq!(plan.anomalies.len(), 1, "{plan:#?}");
    assert!(
        plan.anomalies[0].message.contains("ProxOps did not create"),
        "{plan:#?}"
    );
    assert!(
        plan.actions
            .iter()
            .all(|a| a.name != "pihole" && a.name != "docker-host")
    );
    assert_eq!(plan.skipped.len(), 1, "{plan:#?}");
    assert_eq!(plan.skipped[0].subject, "VM/docker-host");
    assert!(plan.skipped[0].reason.contains("LXC/pihole"));
    conn.sim.unwrap().shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_download_defers_its_dependants_and_the_next_cycle_finishes() {
    let (repo, graphs) = homelab();
    let registry = Registry::builtin();
    let (c, graph) = cluster(&repo, &graphs, "lab");
    let conn = connect(&registry, c, &sim()).await.unwrap();
    let sim = conn.sim.as_ref().unwrap();
    // Every task fails this cycle: the downloads come first.
    sim.set_faults(
        proxops_pve_sim::FaultConfig::default()
            .with_seed(7)
            .with_task_failure_rate(1.0),
    );
    let exec = ExecOptions::default();
    let cycle = reconcile(
        &conn.client,
        "lab",
        graph,
        &plan_options(c, None),
        &exec,
        false,
    )
    .await
    .unwrap();
    let report = cycle.report.unwrap();
    let failed = report.count(|o| matches!(o, Outcome::Failed { .. }));
    let deferred = report.count(|o| matches!(o, Outcome::Deferred { .. }));
    assert_eq!(failed, 3, "{report:#?}");
    // The VM waits for its disk image, the container for its template.
    assert_eq!(deferred, 2, "{report:#?}");
    sim.set_faults(proxops_pve_sim::FaultConfig::default());
    let cycles = converge(&conn.client, "lab", graph, &plan_options(c, None), &exec, 3)
        .await
        .unwrap();
    assert_eq!(cycles.len(), 2);
    assert!(cycles[0].report.as_ref().unwrap().all_succeeded());
    conn.sim.unwrap().shutdown().await.unwrap();
}

/// An embedder's driver: here one that serves a built-in kind through the public mapping
/// functions, as a driver for a kind of one's own would.
struct Delegate(&'static str);

impl proxops_engine::desired::Driver for Delegate {
    fn kind(&self) -> &'static str {
        self.0
    }

    fn desired(
        &self,
        cx: &proxops_engine::desired::Context<'_>,
        resource: &proxops_model::Resource,
    ) -> Result<proxops_engine::desired::Desired, proxops_engine::desired::DesiredError> {
        use proxops_engine::desired::{Desired, artifact, guest};
        match artifact(resource) {
            Some(a) => Ok(Desired::Artifact(a)),
            None => guest(cx, resource).map(|g| Desired::Guest(Box::new(g))),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_are_planned_through_registered_drivers() {
    use proxops_engine::desired::Drivers;
    use std::sync::Arc;
    let mut builtin = Drivers::builtin();
    assert!(
        builtin.register(Arc::new(Delegate("VM"))).is_err(),
        "VM has a driver already"
    );
    let (repo, graphs) = homelab();
    let registry = Registry::builtin();
    let (c, graph) = cluster(&repo, &graphs, "lab");
    let conn = connect(&registry, c, &sim()).await.unwrap();
    // Every kind of the lab cluster but LXC.
    let mut drivers = Drivers::empty();
    for kind in ["VM", "ISO", "CTTemplate", "DiskImage"] {
        drivers.register(Arc::new(Delegate(kind))).unwrap();
    }
    let mut options = plan_options(c, None);
    options.drivers = Arc::new(drivers);
    let plan = reconcile(
        &conn.client,
        "lab",
        graph,
        &options,
        &ExecOptions::default(),
        true,
    )
    .await
    .unwrap()
    .plan;
    assert_eq!(plan.actions.len(), 4, "{plan:#?}");
    assert_eq!(plan.skipped.len(), 1);
    assert_eq!(plan.skipped[0].subject, "LXC/ci-runner-01");
    assert!(
        plan.skipped[0].reason.contains("no driver for kind `LXC`"),
        "{plan:#?}"
    );
    conn.sim.unwrap().shutdown().await.unwrap();
}
