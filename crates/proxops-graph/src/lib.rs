//! One cluster's dependency graph: what must exist before what, in which order to create, in which
//! order to prune, and what to skip when a step fails.
//!
//! - [`Graph::build`] takes the resources of one cluster (as the model loaded them) and the
//!   [`Registry`](proxops_model::Registry) that knows each kind's reference fields. Edges come from
//!   those fields and from the `proxops/depends-on` annotation, deduplicated with structured edges
//!   first ([`Dependency`]). It fails closed with a [`BuildError`] listing every [`Problem`]: a
//!   target that is not in the cluster, an artifact missing on the node of the guest that uses it,
//!   a duplicate identity, and each dependency cycle with all its members.
//! - The graph's unit of work is a [`Step`]: one per guest, one per (artifact, node) for artifacts
//!   placed on several nodes. Steps are numbered in create order ([`StepId`] compares in that
//!   order): by topological level, then node, then vmid (artifacts, which have none, first), then
//!   name, then kind. [`Graph::levels`], [`Graph::create_order`] and [`Graph::prune_order`]
//!   (dependants first) expose it; the order does not depend on the order of the input.
//! - [`Graph::defer`] answers the executor's question after failures: which steps to skip, each
//!   with the failed prerequisites that block it, and what can still run ([`Deferral`]).
//! - [`GraphReport`] is the JSON shape and [`Graph::to_dot`] the Graphviz rendering.
//! - [`check_repository`] builds every cluster of a loaded repository and adds cycle findings to
//!   its diagnostics, which is how `proxops validate` reports cycles.
//!
//! The crate is pure: no I/O.

mod check;
mod defer;
mod export;
mod graph;
mod problem;

pub use check::{ClusterGraph, check_repository};
pub use defer::{Deferral, Deferred};
pub use export::{
    GraphReport, ReportCluster, ReportDependency, ReportResource, ReportStep, to_dot,
};
pub use graph::{Dependency, Graph, ResourceId, Step, StepId};
pub use problem::{BuildError, Problem};
