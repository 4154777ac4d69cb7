//! What the planner gets for resources with reference expressions ([`proxops_model::expr`]).
//!
//! Their values are resolved when the desired plane is published (the store,
//! `proxops_store::desired`); the planner plans exactly what the live desired plane holds:
//!
//! - a resource the desired plane holds with `resolvedInputs` is planned with the values of
//!   that document (the manifest decoded again with them, so its checks ran), and only if the
//!   result is that document;
//! - a resource the plane lists in `waits.yaml`, or holds no resolved document for, WAITs: it
//!   is suspended (neither changed nor pruned, like `proxops/reconcile: disabled`), so a
//!   consumer whose producer is not observed yet is never created with a placeholder nor
//!   deleted because it is absent from the desired plane;
//! - in a dry run, a resource with no resolved document whose every expression has a
//!   `dryFallback` is planned with the fallbacks (nothing reaches PVE in a dry run);
//! - without planes, such resources stay unresolved and the planner refuses them
//!   (`proxops::reference::needs_planes`).

use proxops_graph::Graph;
use proxops_model::expr::Pointer;
use proxops_model::manifest::resolve_resource;
use proxops_model::{Cluster, Registry, Resource, ResourceKey};
use proxops_store::desired::DesiredState;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The resources to plan and the ones that wait, with why.
#[derive(Debug)]
#[non_exhaustive]
pub struct PlannedRefs {
    /// The graph of the resources to plan (resolved ones in place of their manifests).
    pub graph: Graph,
    /// Resources to suspend: `WAIT: <reason>`.
    pub waits: BTreeMap<ResourceKey, String>,
}

/// Whether `cluster` has a resource with reference expressions.
pub fn has_references(cluster: &Cluster) -> bool {
    cluster.resources.iter().any(|r| r.unresolved())
}

/// The resources of `cluster` to plan against `desired` (the live desired plane; `None`
/// without planes, see the module docs). `dry`: a dry run, where fallbacks may stand in.
pub fn plan_references(
    registry: &Registry,
    cluster: &Cluster,
    desired: Option<&DesiredState>,
    dry: bool,
) -> Result<PlannedRefs, String> {
    let mut waits = BTreeMap::new();
    let mut resources = Vec::with_capacity(cluster.resources.len());
    for r in &cluster.resources {
        if !r.unresolved() {
            resources.push(Arc::clone(r));
            continue;
        }
        let key = r.key();
        let from_plane = desired.map(|d| from_desired(registry, r, d));
        match from_plane {
            Some(Ok(resolved)) => resources.push(Arc::new(resolved)),
            Some(Err(why)) => match fallback(registry, r, dry) {
                Some(f) => resources.push(Arc::new(f)),
                None => {
                    waits.insert(key, why);
                    resources.push(Arc::clone(r));
                }
            },
            // No planes: the planner refuses it, unless a dry run has fallbacks.
            None => {
                resources.push(fallback(registry, r, dry).map_or_else(|| Arc::clone(r), Arc::new))
            }
        }
    }
    let graph = Graph::build(registry, &resources).map_err(|e| e.to_string())?;
    Ok(PlannedRefs { graph, waits })
}

/// `r` with the values its live desired document holds.
fn from_desired(
    registry: &Registry,
    r: &Resource,
    desired: &DesiredState,
) -> Result<Resource, String> {
    let key = r.key();
    if let Some(why) = desired.waits.get(&key) {
        return Err(why.clone());
    }
    let Some(entry) = desired
        .resources
        .get(&key)
        .filter(|e| e.doc.resolved_inputs.is_some())
    else {
        return Err("its references are not resolved in the desired plane yet".to_owned());
    };
    let values: Option<Vec<Value>> = r
        .exprs
        .iter()
        .map(|s| Pointer::of_path(&s.path).get(&entry.doc.spec).cloned())
        .collect();
    let stale =
        || "the desired plane was resolved from another revision of the manifest".to_owned();
    let values = values.ok_or_else(stale)?;
    let resolved = resolve_resource(r, registry, &values).map_err(|_| stale())?;
    // Plan exactly the published document, or nothing.
    match serde_json::to_value(&resolved.spec) {
        Ok(spec) if spec == entry.doc.spec => Ok(resolved),
        _ => Err(stale()),
    }
}

/// `r` with its fallbacks, in a dry run where every expression has one.
fn fallback(registry: &Registry, r: &Resource, dry: bool) -> Option<Resource> {
    if !dry {
        return None;
    }
    let values: Option<Vec<Value>> = r.exprs.iter().map(|s| s.dry_fallback.clone()).collect();
    resolve_resource(r, registry, &values?).ok()
}
