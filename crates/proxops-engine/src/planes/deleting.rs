//! What the planner gets for resources `proxops delete` marked ([`proxops_store::deletion`]).
//!
//! The live desired plane holds a requested deletion intent, and no document, for each; their
//! manifests may still be composed. The planner plans the graph without them, so their guests
//! are what the prune step deletes (ours by tags, within the prune budget, never locked or
//! protected ones). A marked resource that a resource still declared depends on (a clone of a
//! template, a VM whose CD-ROM holds an ISO) is kept, with an anomaly: its dependants go
//! first, or the deletion waits. Only guests are torn down: ProxOps never deletes a downloaded
//! file, so an artifact marked for deletion waits with an anomaly saying so.

use crate::plan::Anomaly;
use proxops_graph::Graph;
use proxops_model::{Registry, Resource, ResourceKey};
use proxops_store::desired::DesiredState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The resources of `desired` marked by `proxops delete`, with the reason given.
pub fn requested(desired: &DesiredState) -> BTreeMap<ResourceKey, Option<String>> {
    desired
        .deletions
        .iter()
        .filter_map(|(k, e)| {
            let request = e.intent.spec.requested.as_ref()?;
            Some((k.clone(), request.reason.clone()))
        })
        .collect()
}

/// The graph to plan: `graph` without the `marked` resources that can go, and an anomaly for
/// each one that cannot yet.
pub fn without_marked(
    registry: &Registry,
    graph: &Graph,
    marked: &BTreeMap<ResourceKey, Option<String>>,
) -> Result<(Graph, Vec<Anomaly>), String> {
    let mut anomalies = Vec::new();
    let mut leaving: BTreeSet<ResourceKey> = BTreeSet::new();
    for id in graph.resources() {
        let key = graph.key(id);
        if !marked.contains_key(&key) {
            continue;
        }
        if matches!(key.kind.as_str(), "ISO" | "CTTemplate" | "DiskImage") {
            anomalies.push(Anomaly::new(
                key.to_string(),
                "marked for deletion, but ProxOps never deletes a downloaded file: remove it by hand and take its manifest out of the composition (the intent then goes)",
            ));
            continue;
        }
        leaving.insert(key);
    }
    // A resource that stays and depends on a leaving one keeps it; repeat until stable, as a
    // kept one may hold another.
    let mut blocked: BTreeMap<ResourceKey, Vec<String>> = BTreeMap::new();
    loop {
        let mut changed = false;
        for id in graph.resources() {
            let key = graph.key(id);
            if leaving.contains(&key) {
                continue;
            }
            for dep in graph.dependencies(id) {
                let target = graph.key(dep.target);
                if leaving.remove(&target) {
                    changed = true;
                }
                if marked.contains_key(&target) && !leaving.contains(&target) {
                    let holders = blocked.entry(target).or_default();
                    if !holders.contains(&key.to_string()) {
                        holders.push(key.to_string());
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (key, holders) in &blocked {
        if matches!(key.kind.as_str(), "ISO" | "CTTemplate" | "DiskImage") {
            continue;
        }
        anomalies.push(Anomaly::new(
            key.to_string(),
            format!(
                "marked for deletion, but {} still declared and depending on it: delete {} too (`proxops delete`), or change {}; nothing is deleted until then",
                holders.join(", "),
                if holders.len() == 1 { "it" } else { "them" },
                if holders.len() == 1 { "it" } else { "them" },
            ),
        ));
    }
    Ok((rebuild(registry, graph, &leaving)?, anomalies))
}

fn rebuild(
    registry: &Registry,
    graph: &Graph,
    leaving: &BTreeSet<ResourceKey>,
) -> Result<Graph, String> {
    let kept: Vec<Arc<Resource>> = graph
        .resources()
        .filter(|id| !leaving.contains(&graph.key(*id)))
        .map(|id| Arc::clone(graph.resource(id)))
        .collect();
    Graph::build(registry, &kept).map_err(|e| e.to_string())
}

/// `validate`'s warnings: a resource `proxops delete` marked whose manifest the composition
/// still lists (it stays deleted, and the intent stays, until the manifest leaves it).
pub fn still_composed(
    store: Option<&proxops_store::Store>,
    repository: &proxops_model::Repository,
) -> Vec<proxops_model::Diagnostic> {
    use proxops_model::diagnostic::Code;
    use proxops_model::yaml::PathSeg;
    let Some(store) = store else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cluster in &repository.clusters {
        let desired = super::Planes::from_config(store.clone(), repository, &cluster.name)
            .and_then(|planes| planes.store.read_desired(&planes.refs, None));
        let Ok(Some(desired)) = desired else {
            continue;
        };
        let marked = requested(&desired);
        for resource in cluster
            .resources
            .iter()
            .filter(|r| marked.contains_key(&r.key()))
        {
            let span = resource
                .spans()
                .span_at(&[PathSeg::Key("metadata".into()), PathSeg::Key("name".into())]);
            out.push(
                proxops_model::Diagnostic::warning(
                    Code::DeletedStillComposed,
                    format!(
                        "{} was deleted with `proxops delete` and is not created again while cluster `{}` still lists it",
                        resource.key(),
                        cluster.name
                    ),
                )
                .with_label(&resource.file, span, "deleted on request")
                .with_help(format!(
                    "take it out of clusters/{}/resources.yaml (the deletion intent then goes), or keep it listed to keep it deleted",
                    cluster.name
                ))
                .in_cluster(Some(&cluster.name)),
            );
        }
    }
    out
}
