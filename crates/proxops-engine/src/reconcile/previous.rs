//! What the planes remember for the planner: the previous desired document of each resource
//! (which keys ProxOps owned), and clusters whose desired plane outlived their directory.

use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_model::{Registry, Resource, ResourceKey};
use proxops_store::desired::DesiredState;
use proxops_store::documents::{ResourceDoc, parse_id};
use proxops_store::{ObjectId, PlaneRefs, Store, StoreError};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The previous desired document of each resource of `refs`' cluster: the one its latest
/// receipt pins (what ProxOps last reconciled), else the one `prior` (the desired head before
/// this cycle published) holds. A document that no longer loads is left out: its keys are then
/// not proven ours, which only ever keeps a key, never removes one. A receipt of a guarded
/// update that was rolled back (`rolledBack`) pins the document it tried, which PVE does not
/// have: the document the guest is back at (its `guard.restored`) is the previous one then,
/// and without one none is (not even `prior`'s).
pub fn previous_documents(
    store: &Store,
    refs: &PlaneRefs,
    prior: Option<&DesiredState>,
    registry: &Registry,
) -> Result<BTreeMap<ResourceKey, Arc<Resource>>, StoreError> {
    previous_and_receipted(store, refs, prior, registry).map(|(previous, _)| previous)
}

/// Resources by key.
pub type Documents = BTreeMap<ResourceKey, Arc<Resource>>;

/// [`previous_documents`], and the resources with a receipt on the observed plane (what
/// ProxOps reconciled: the ownership proof of a cluster object PVE gives no free-text field),
/// from one read of the plane.
pub fn previous_and_receipted(
    store: &Store,
    refs: &PlaneRefs,
    prior: Option<&DesiredState>,
    registry: &Registry,
) -> Result<(Documents, BTreeSet<ResourceKey>), StoreError> {
    // Each document is read and turned into a resource on its own, and `prior`'s are borrowed:
    // no map of every document of the cluster is built on the side (with 1,000 resources
    // that was megabytes per cycle and cluster).
    let mut unproven = std::collections::BTreeSet::new();
    let pinned: BTreeMap<ResourceKey, Option<ObjectId>> = match store.read_observed(refs, None)? {
        Some(observed) => observed
            .receipts
            .iter()
            .map(|(key, receipt)| {
                let result = &receipt.doc.spec.result;
                let blob = if result.outcome == proxops_store::documents::Outcome::RolledBack {
                    let restored = result.guard.as_ref().and_then(|g| g.restored.as_ref());
                    if restored.is_none() {
                        unproven.insert(key.clone());
                    }
                    restored.and_then(|pin| parse_id(&pin.blob))
                } else {
                    parse_id(&receipt.doc.spec.desired.blob)
                };
                (key.clone(), blob)
            })
            .collect(),
        None => BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    let mut keep = |key: &ResourceKey, doc: &ResourceDoc| {
        if let Some(resource) = resource_of(doc, registry)
            && resource.key() == *key
        {
            out.insert(key.clone(), resource);
        }
    };
    // A receipt's document wins; a receipt whose document cannot be read leaves the prior
    // one, as a missing receipt does.
    let mut from_receipts = std::collections::BTreeSet::new();
    for (key, blob) in &pinned {
        let Some(blob) = blob else { continue };
        match store.read_resource_doc(*blob) {
            Ok(doc) => {
                keep(key, &doc);
                from_receipts.insert(key);
            }
            Err(e) => {
                tracing::debug!(resource = %key, error = %e, "the document a receipt pins cannot be read");
            }
        }
    }
    if let Some(prior) = prior {
        for (key, entry) in &prior.resources {
            if !from_receipts.contains(key) && !unproven.contains(key) {
                keep(key, &entry.doc);
            }
        }
    }
    Ok((out, pinned.into_keys().collect()))
}

/// A desired document as a resource, through the manifest loader (the document is the model's
/// own serialisation, so it loads as a manifest does).
pub(crate) fn resource_of(doc: &ResourceDoc, registry: &Registry) -> Option<Arc<Resource>> {
    let manifest = serde_json::json!({
        "apiVersion": doc.api_version,
        "kind": doc.kind,
        "metadata": {
            "name": doc.metadata.name,
            "labels": doc.metadata.labels,
            "annotations": doc.metadata.annotations,
        },
        "spec": doc.spec,
    });
    let text = serde_json::to_string(&manifest).ok()?;
    let file = SourceFile::new(format!("desired/{}/{}", doc.kind, doc.metadata.name), text);
    let loaded = load_manifest(&file, registry, None);
    if loaded.diagnostics.iter().any(|d| d.invalidates()) {
        tracing::debug!(kind = %doc.kind, name = %doc.metadata.name, "a previous desired document does not load as a manifest");
        return None;
    }
    loaded.resource
}

/// A cluster whose desired plane exists while the repository has no such cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Vanished {
    /// The cluster.
    pub cluster: String,
    /// Its desired branch.
    pub branch: String,
}

impl std::fmt::Display for Vanished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cluster `{}` is gone from the repository (no clusters/{}/), but its desired plane `{}` exists: its guests are left alone. Restore the directory to manage them again, or delete the branch once they are dealt with",
            self.cluster, self.cluster, self.branch
        )
    }
}

/// The default-named desired branches (`proxops/desired/<c>`) of clusters not in `known` (the
/// names of every cluster directory of the repository, valid or not: load it with no cluster
/// selection, or every cluster looks vanished but the selected ones).
pub fn vanished_clusters(store: &Store, known: &[&str]) -> Vec<Vanished> {
    let prefix = "proxops/desired/";
    let branches = match store.branches_under(prefix) {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!(error = %e, "cannot list desired branches");
            return Vec::new();
        }
    };
    branches
        .into_iter()
        .filter_map(|branch| {
            let cluster = branch.strip_prefix(prefix)?.to_owned();
            (!cluster.contains('/') && !known.contains(&cluster.as_str()))
                .then_some(Vanished { cluster, branch })
        })
        .collect()
}
