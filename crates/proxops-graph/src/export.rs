//! The graph as JSON ([`GraphReport`]) and as Graphviz DOT.

use crate::graph::{Graph, ResourceId, Step};
use proxops_model::kind::ReferenceSource;
use serde::Serialize;
use std::fmt::Write;

/// `{"apiVersion":"proxops/v1alpha1","kind":"Graph","clusters":[...]}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphReport {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `Graph`.
    pub kind: &'static str,
    /// One entry per cluster, in the order given.
    pub clusters: Vec<ReportCluster>,
}

/// The graph of one cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportCluster {
    /// The cluster's name.
    pub name: String,
    /// How many levels the create order has.
    pub levels: usize,
    /// Resources sorted by (kind, name).
    pub resources: Vec<ReportResource>,
    /// Steps in create order; `index` is the position.
    pub steps: Vec<ReportStep>,
}

/// One resource and its edges.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportResource {
    /// Canonical kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Highest level of its steps.
    pub level: u32,
    /// Indexes of its steps.
    pub steps: Vec<usize>,
    /// Its prerequisites: structured fields first, then the annotation.
    pub depends_on: Vec<ReportDependency>,
}

/// One edge.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportDependency {
    /// Kind of the prerequisite.
    pub kind: String,
    /// Name of the prerequisite.
    pub name: String,
    /// The field naming it, or `proxops/depends-on`.
    pub field: &'static str,
    /// `structured` or `annotation`.
    pub source: &'static str,
    /// Whether it is needed on the dependant's node.
    pub same_node: bool,
}

/// One step.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportStep {
    /// Position in create order.
    pub index: usize,
    /// Topological level.
    pub level: u32,
    /// Kind of the resource.
    pub kind: String,
    /// Name of the resource.
    pub name: String,
    /// PVE node, if any.
    pub node: Option<String>,
    /// vmid of a guest.
    pub vmid: Option<u32>,
    /// Indexes of the steps that must come first.
    pub after: Vec<usize>,
}

fn source_name(source: ReferenceSource) -> &'static str {
    source.as_str()
}

impl ReportCluster {
    /// The report of one cluster's graph.
    pub fn new(name: &str, graph: &Graph) -> ReportCluster {
        let resources = graph
            .resources()
            .map(|id| ReportResource {
                kind: graph.kind(id).to_owned(),
                name: graph.name(id).to_owned(),
                level: graph.level_of(id),
                steps: graph.steps_of(id).iter().map(|s| s.index()).collect(),
                depends_on: graph
                    .dependencies(id)
                    .iter()
                    .map(|d| ReportDependency {
                        kind: graph.kind(d.target).to_owned(),
                        name: graph.name(d.target).to_owned(),
                        field: d.field,
                        source: source_name(d.source),
                        same_node: d.same_node,
                    })
                    .collect(),
            })
            .collect();
        let steps = graph
            .steps()
            .iter()
            .map(|s| ReportStep {
                index: s.id.index(),
                level: s.level,
                kind: graph.kind(s.resource).to_owned(),
                name: graph.name(s.resource).to_owned(),
                node: s.node.as_deref().map(str::to_owned),
                vmid: s.vmid,
                after: graph
                    .prerequisites(s.id)
                    .iter()
                    .map(|p| p.index())
                    .collect(),
            })
            .collect();
        ReportCluster {
            name: name.to_owned(),
            levels: graph.level_count(),
            resources,
            steps,
        }
    }
}

impl GraphReport {
    /// The report of several clusters' graphs.
    pub fn new<'a>(graphs: impl IntoIterator<Item = (&'a str, &'a Graph)>) -> GraphReport {
        GraphReport {
            api_version: proxops_model::report::REPORT_API_VERSION,
            kind: "Graph",
            clusters: graphs
                .into_iter()
                .map(|(name, g)| ReportCluster::new(name, g))
                .collect(),
        }
    }
}

/// A DOT string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

fn step_label(graph: &Graph, step: &Step) -> String {
    let mut label = format!(
        "{}/{}",
        graph.kind(step.resource),
        graph.name(step.resource)
    );
    if let Some(vmid) = step.vmid {
        let _ = write!(label, " ({vmid})");
    }
    if let Some(node) = &step.node {
        let _ = write!(label, "\n{node}");
    }
    label
}

/// The edge of `dependant`'s resource that leads to `prerequisite`.
fn edge_of(
    graph: &Graph,
    dependant: ResourceId,
    prerequisite: ResourceId,
) -> Option<&crate::Dependency> {
    graph
        .dependencies(dependant)
        .iter()
        .find(|d| d.target == prerequisite)
}

/// Graphviz DOT of several clusters' graphs: one box per cluster, one rank per level, arrows from
/// prerequisite to dependant (the direction of creation), annotation edges dashed.
pub fn to_dot<'a>(graphs: impl IntoIterator<Item = (&'a str, &'a Graph)>) -> String {
    let mut out = String::from(
        "digraph proxops {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for (cluster, graph) in graphs {
        let id = |step: &Step| quote(&format!("{cluster}#{}", step.id.index()));
        let _ = writeln!(
            out,
            "  subgraph {} {{",
            quote(&format!("cluster_{cluster}"))
        );
        let _ = writeln!(out, "    label={};", quote(&format!("cluster {cluster}")));
        for (level, steps) in graph.levels().enumerate() {
            let _ = write!(out, "    {{ rank=same; /* level {level} */");
            for step in steps {
                let _ = write!(out, " {};", id(step));
            }
            out.push_str(" }\n");
        }
        for step in graph.steps() {
            let _ = writeln!(
                out,
                "    {} [label={}];",
                id(step),
                quote(&step_label(graph, step))
            );
        }
        for step in graph.steps() {
            for p in graph.prerequisites(step.id) {
                let before = graph.step(*p);
                let Some(edge) = edge_of(graph, step.resource, before.resource) else {
                    continue;
                };
                // Only what a manifest's author declared by hand is dashed.
                let style = if edge.source == ReferenceSource::Annotation {
                    ", style=dashed"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "    {} -> {} [label={}{style}];",
                    id(before),
                    id(step),
                    quote(edge.field)
                );
            }
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

impl Graph {
    /// This graph alone as Graphviz DOT (see [`to_dot`]).
    pub fn to_dot(&self, cluster: &str) -> String {
        to_dot([(cluster, self)])
    }
}
