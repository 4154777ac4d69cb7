//! Why a graph cannot be built, as errors and as diagnostics with labels on the YAML nodes.

use proxops_model::diagnostic::{Code, Diagnostic};
use proxops_model::kind::Reference;
use proxops_model::yaml::PathSeg;
use proxops_model::{Resource, ResourceKey};
use std::fmt;
use std::sync::Arc;

/// One edge inside a cycle, kept for labels.
#[derive(Debug, Clone)]
pub struct CycleEdge {
    /// The dependant.
    pub from: Arc<Resource>,
    /// The prerequisite.
    pub to: ResourceKey,
    /// The field of the edge.
    pub field: &'static str,
    /// The YAML path of the reference in `from`.
    pub path: Vec<PathSeg>,
}

/// One reason the graph of a cluster cannot be built.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Two resources share a kind and name.
    #[error("duplicate resource {key}")]
    Duplicate {
        /// The shared identity.
        key: ResourceKey,
        /// The one kept.
        first: Arc<Resource>,
        /// The one dropped.
        again: Arc<Resource>,
    },
    /// A reference names a resource that is not in the cluster.
    #[error("{} references unknown {}/{} through `{}`: it is not in the cluster", resource.key(), reference.target_kind, reference.target_name, reference.field)]
    UnknownTarget {
        /// The dependant.
        resource: Arc<Resource>,
        /// The unresolved reference.
        reference: Reference,
    },
    /// An artifact a guest needs on its own node is not placed there.
    #[error("{}/{} is not placed on node `{node}`, where {} runs", reference.target_kind, reference.target_name, resource.key())]
    NotOnNode {
        /// The guest.
        resource: Arc<Resource>,
        /// The reference to the artifact.
        reference: Reference,
        /// The guest's node.
        node: String,
    },
    /// Resources depend on each other in a cycle.
    #[error("dependency cycle between {}", join(members))]
    Cycle {
        /// Every member, sorted by (kind, name).
        members: Vec<ResourceKey>,
        /// The edges between members, by dependant then field order.
        edges: Vec<CycleEdge>,
    },
}

fn join(keys: &[ResourceKey]) -> String {
    keys.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Problem {
    /// The stable diagnostic code.
    pub fn code(&self) -> Code {
        match self {
            Problem::Duplicate { .. } => Code::DuplicateResource,
            Problem::UnknownTarget { .. } => Code::UnknownReference,
            Problem::NotOnNode { .. } => Code::ReferenceNotOnNode,
            Problem::Cycle { .. } => Code::DependencyCycle,
        }
    }

    /// The problem as a diagnostic of `cluster`, labelled on the YAML nodes involved.
    pub fn to_diagnostic(&self, cluster: Option<&str>) -> Diagnostic {
        let name_path = [PathSeg::from("metadata"), PathSeg::from("name")];
        let d = Diagnostic::error(self.code(), self.to_string());
        let d = match self {
            Problem::Duplicate { first, again, .. } => d
                .with_label(&again.file, again.span(&name_path), "defined again here")
                .with_label(&first.file, first.span(&name_path), "first defined here")
                .with_help("a kind and name identify one resource per cluster"),
            Problem::UnknownTarget {
                resource,
                reference,
            } => {
                d.with_label(
                    &resource.file,
                    resource.span(&reference.path),
                    format!(
                        "{}/{} is not in this cluster",
                        reference.target_kind, reference.target_name
                    ),
                )
                .with_help("add the target's file to the cluster's resources.yaml, or fix the name")
            }
            Problem::NotOnNode {
                resource,
                reference,
                node,
            } => d
                .with_label(
                    &resource.file,
                    resource.span(&reference.path),
                    format!("needed on `{node}`"),
                )
                .with_help(format!(
                    "add `{node}` to the `nodes` of {}/{}",
                    reference.target_kind, reference.target_name
                )),
            Problem::Cycle { edges, .. } => {
                let mut d =
                    d.with_help("dependencies must form a DAG: remove one of the references");
                for e in edges {
                    d = d.with_label(
                        &e.from.file,
                        e.from.span(&e.path),
                        format!("{} depends on {}", e.from.key(), e.to),
                    );
                }
                d
            }
        };
        d.in_cluster(cluster)
    }
}

/// Every problem that keeps a cluster's graph from being built.
#[derive(Debug, Clone, thiserror::Error)]
pub struct BuildError {
    /// The problems: duplicates and unresolved references first, then cycles, then placements.
    pub problems: Vec<Problem>,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the dependency graph cannot be built:")?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}
