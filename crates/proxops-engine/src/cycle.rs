//! Plan-and-execute building blocks: one cycle of one cluster against a client, and repeated
//! cycles until a plan is empty, without planes, lease or budget across cycles. Writers use
//! [`crate::Reconciler`], which adds those guarantees; these serve tests, benchmarks and the
//! demo's in-memory simulators.

use crate::execute::{CycleReport, ExecOptions, execute};
use crate::plan::ClusterPlan;
use crate::planner::{PlanError, PlanOptions, plan_cluster};
use proxops_graph::Graph;
use proxops_model::Cluster;
use proxops_pve::PveClient;

/// Planner options for a cluster from its config: its node allowlist and prune budget.
pub fn plan_options(cluster: &Cluster, prune_budget: Option<u32>) -> PlanOptions {
    PlanOptions {
        prune_budget: prune_budget.unwrap_or(3),
        allowed_nodes: cluster
            .entry
            .as_ref()
            .map(|e| e.nodes.clone())
            .unwrap_or_default(),
        ..PlanOptions::default()
    }
}

/// What one cycle did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Cycle {
    /// The plan it made.
    pub plan: ClusterPlan,
    /// What executing it did (`None` for a dry run or an empty plan).
    pub report: Option<CycleReport>,
}

/// Plans one cluster and, unless `dry_run`, executes the plan.
pub async fn reconcile(
    client: &PveClient,
    cluster: &str,
    graph: &Graph,
    plan: &PlanOptions,
    exec: &ExecOptions,
    dry_run: bool,
) -> Result<Cycle, PlanError> {
    let planned = plan_cluster(client, cluster, graph, plan).await?;
    let report = if dry_run || planned.is_empty() {
        None
    } else {
        Some(execute(client, &planned, exec).await)
    };
    Ok(Cycle {
        plan: planned,
        report,
    })
}

/// Cycles until a plan is empty or `max_cycles` ran; returns every cycle.
pub async fn converge(
    client: &PveClient,
    cluster: &str,
    graph: &Graph,
    plan: &PlanOptions,
    exec: &ExecOptions,
    max_cycles: usize,
) -> Result<Vec<Cycle>, PlanError> {
    let mut cycles = Vec::new();
    for _ in 0..max_cycles.max(1) {
        let cycle = reconcile(client, cluster, graph, plan, exec, false).await?;
        let done = cycle.plan.is_empty();
        cycles.push(cycle);
        if done {
            break;
        }
    }
    Ok(cycles)
}
