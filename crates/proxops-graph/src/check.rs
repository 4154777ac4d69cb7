//! The graph step of validation: build every cluster's graph and report what stops it.

use crate::graph::Graph;
use crate::problem::Problem;
use proxops_model::{Registry, Repository};

/// One cluster's graph, when it could be built.
#[derive(Debug)]
pub struct ClusterGraph {
    /// The cluster's name.
    pub name: String,
    /// The graph; `None` when the cluster is invalid.
    pub graph: Option<Graph>,
}

/// Builds the graph of every cluster of `repo`, adds the findings to its diagnostics and marks
/// the clusters concerned invalid. Cycles are reported even in clusters with other errors, so a
/// user sees every problem at once; problems the model's validation already reports (duplicates,
/// unknown references, missing placements) are not repeated for clusters it found invalid.
pub fn check_repository(registry: &Registry, repo: &mut Repository) -> Vec<ClusterGraph> {
    let mut graphs = Vec::with_capacity(repo.clusters.len());
    for cluster in &mut repo.clusters {
        let graph = match Graph::build(registry, &cluster.resources) {
            Ok(graph) => Some(graph),
            Err(e) => {
                for p in &e.problems {
                    if cluster.valid || matches!(p, Problem::Cycle { .. }) {
                        repo.diagnostics
                            .push(p.to_diagnostic(Some(cluster.name.as_str())));
                    }
                }
                cluster.valid = false;
                None
            }
        };
        graphs.push(ClusterGraph {
            name: cluster.name.clone(),
            graph: graph.filter(|_| cluster.valid),
        });
    }
    repo.diagnostics
        .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    repo.diagnostics.dedup();
    graphs
}
