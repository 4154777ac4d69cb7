//! Derived state: desired joined with observed. Current, stale and orphan are computed here,
//! when read, and never stored.

use crate::desired::DesiredState;
use crate::documents::{Receipt, hex};
use crate::id::ObjectId;
use crate::observed::{ObservedState, Stored};
use crate::refs::PlaneRefs;
use crate::store::Store;
use proxops_model::ResourceKey;
use serde::Serialize;
use std::collections::BTreeSet;

/// How a receipt or artifact relates to the desired plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum Freshness {
    /// It observed the live desired document.
    Current,
    /// It observed an earlier desired document of the resource.
    Stale,
    /// No desired resource (or no receipt, for an artifact) matches it.
    Orphan,
}

/// What a desired resource's receipt says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ObservationState {
    /// The receipt pins the live desired document.
    Current,
    /// The receipt pins an earlier document.
    Stale,
    /// There is no receipt.
    Missing,
    /// Not applicable (a deletion intent).
    NotApplicable,
}

/// What a resource needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ResourceState {
    /// Reconciled: a current receipt.
    Clean,
    /// To reconcile: no receipt, or a stale one.
    Ready,
    /// Nothing to do until something else happens: a reference expression whose input is not
    /// available yet, or a teardown observed whose intent a desired publication has not yet
    /// cleaned up.
    Wait,
    /// A deletion intent waits for its teardown.
    Deleting,
}

/// One row of the joined view.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceView {
    /// (kind, name).
    pub key: ResourceKey,
    /// The incarnation's UID.
    pub uid: String,
    /// The desired document's blob id (or the deletion intent's).
    #[serde(serialize_with = "id_text")]
    pub blob: ObjectId,
    /// The receipt's freshness.
    pub observation: ObservationState,
    /// The state.
    pub state: ResourceState,
    /// Why, in words.
    pub reason: String,
    /// The receipt, if any.
    #[serde(skip)]
    pub receipt: Option<Stored<Receipt>>,
    /// The Stack that projected it (`Stack/<name>`), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A receipt's derived freshness.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiptView {
    /// Its subject (kind, name).
    pub key: ResourceKey,
    /// Its freshness.
    pub freshness: Freshness,
}

/// An artifact's derived freshness.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactView {
    /// Its producer (kind, name).
    pub producer: ResourceKey,
    /// Its local name.
    pub name: String,
    /// Current when a current receipt describes it, stale when a stale one does, orphan
    /// otherwise.
    pub freshness: Freshness,
}

/// One cluster's planes joined.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterView {
    /// The cluster.
    pub cluster: String,
    /// The desired commit read.
    #[serde(serialize_with = "opt_id_text")]
    pub desired_revision: Option<ObjectId>,
    /// The observed commit read.
    #[serde(serialize_with = "opt_id_text")]
    pub observed_revision: Option<ObjectId>,
    /// Every desired resource and deletion intent, by (kind, name).
    pub resources: Vec<ResourceView>,
    /// Every receipt.
    pub receipts: Vec<ReceiptView>,
    /// Every artifact.
    pub artifacts: Vec<ArtifactView>,
}

impl ClusterView {
    /// The rows in `state`.
    pub fn count(&self, state: ResourceState) -> usize {
        self.resources.iter().filter(|r| r.state == state).count()
    }

    /// The row of (kind, name).
    pub fn resource(&self, kind: &str, name: &str) -> Option<&ResourceView> {
        self.resources
            .iter()
            .find(|r| r.key.kind == kind && r.key.name == name)
    }
}

fn id_text<S: serde::Serializer>(id: &ObjectId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(*id))
}

fn opt_id_text<S: serde::Serializer>(id: &Option<ObjectId>, s: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => s.serialize_str(&hex(*id)),
        None => s.serialize_none(),
    }
}

/// The reason of a resource whose guarded update to the live document was rolled back.
fn rolled_back_reason(receipt: Option<&Stored<Receipt>>) -> String {
    let guard = receipt.and_then(|r| r.doc.spec.result.guard.as_ref());
    let snapshot = guard.map_or("its snapshot", |g| g.snapshot.as_str());
    let failure = guard
        .and_then(|g| g.failure.as_deref())
        .unwrap_or("a task or the check failed");
    format!(
        "rolled back to {snapshot}: {failure}; not tried again until the desired document changes"
    )
}

/// Joins a desired and an observed plane (either may be absent).
pub fn derive(
    cluster: &str,
    desired: Option<&DesiredState>,
    observed: Option<&ObservedState>,
) -> ClusterView {
    let mut resources = Vec::new();
    let torn_down: BTreeSet<(ResourceKey, String)> = observed
        .map(|o| {
            o.teardowns
                .iter()
                .map(|t| (t.doc.spec.subject.key(), t.doc.spec.subject.uid.clone()))
                .collect()
        })
        .unwrap_or_default();
    let receipt_of = |key: &ResourceKey| observed.and_then(|o| o.receipts.get(key)).cloned();
    let freshness_of = |r: &Stored<Receipt>| -> Freshness {
        let key = r.doc.spec.subject.key();
        match desired.and_then(|d| d.resources.get(&key)) {
            None => Freshness::Orphan,
            Some(entry) if r.doc.spec.desired.blob == hex(entry.blob) => Freshness::Current,
            Some(_) => Freshness::Stale,
        }
    };
    if let Some(d) = desired {
        for (key, entry) in &d.resources {
            let receipt = receipt_of(key);
            let rolled_back = receipt
                .as_ref()
                .filter(|r| r.doc.spec.result.outcome == crate::documents::Outcome::RolledBack);
            let why_rolled_back;
            let (observation, state, reason) = match receipt.as_ref().map(freshness_of) {
                // A guarded update to the live document was rolled back: PVE does not have it.
                Some(Freshness::Current) if rolled_back.is_some() => {
                    why_rolled_back = rolled_back_reason(rolled_back);
                    (
                        ObservationState::Current,
                        ResourceState::Ready,
                        why_rolled_back.as_str(),
                    )
                }
                Some(Freshness::Current) => (
                    ObservationState::Current,
                    ResourceState::Clean,
                    "observation matches desired state",
                ),
                Some(_) => (
                    ObservationState::Stale,
                    ResourceState::Ready,
                    "desired document changed since its last receipt",
                ),
                None => (
                    ObservationState::Missing,
                    ResourceState::Ready,
                    "no observation receipt",
                ),
            };
            // A reference that did not resolve holds the resource, whatever its receipt says.
            let (state, reason) = match d.waits.get(key) {
                Some(why) => (ResourceState::Wait, why.clone()),
                None => (state, reason.to_owned()),
            };
            resources.push(ResourceView {
                key: key.clone(),
                uid: entry.doc.metadata.uid.clone(),
                blob: entry.blob,
                observation,
                state,
                reason,
                receipt,
                owner: entry
                    .doc
                    .metadata
                    .owner_references
                    .first()
                    .map(|o| format!("{}/{}", o.kind, o.name)),
            });
        }
        // New resources waiting for a reference have no document yet.
        for (key, why) in &d.waits {
            if d.resources.contains_key(key) || d.deletions.contains_key(key) {
                continue;
            }
            resources.push(ResourceView {
                key: key.clone(),
                uid: String::new(),
                blob: ObjectId::NULL,
                observation: ObservationState::Missing,
                state: ResourceState::Wait,
                reason: why.clone(),
                receipt: receipt_of(key),
                owner: None,
            });
        }
        for (key, entry) in &d.deletions {
            let uid = entry.intent.spec.subject.uid.clone();
            let requested = entry.intent.spec.requested.is_some();
            let (state, reason) = match (torn_down.contains(&(key.clone(), uid.clone())), requested)
            {
                (true, true) => (
                    ResourceState::Wait,
                    "deleted with `proxops delete`; the intent stays until its manifest leaves the composition",
                ),
                (true, false) => (
                    ResourceState::Wait,
                    "teardown observed; the next desired publication cleans the intent up",
                ),
                (false, true) => (
                    ResourceState::Deleting,
                    "`proxops delete` asked for it; awaits teardown",
                ),
                (false, false) => (ResourceState::Deleting, "deletion intent awaits teardown"),
            };
            resources.push(ResourceView {
                key: key.clone(),
                uid,
                blob: entry.blob,
                observation: ObservationState::NotApplicable,
                state,
                reason: reason.to_owned(),
                receipt: receipt_of(key),
                owner: None,
            });
        }
    }
    resources.sort_by(|a, b| a.key.cmp(&b.key));
    let mut receipts = Vec::new();
    let mut artifacts = Vec::new();
    if let Some(o) = observed {
        for (key, r) in &o.receipts {
            receipts.push(ReceiptView {
                key: key.clone(),
                freshness: freshness_of(r),
            });
        }
        for ((producer, name), a) in &o.artifacts {
            let described = o.receipts.get(producer).filter(|r| {
                r.doc
                    .spec
                    .result
                    .artifacts
                    .get(name)
                    .is_some_and(|d| d.path == a.path && d.blob == hex(a.blob))
            });
            artifacts.push(ArtifactView {
                producer: producer.clone(),
                name: name.clone(),
                freshness: described.map_or(Freshness::Orphan, freshness_of),
            });
        }
    }
    ClusterView {
        cluster: cluster.to_owned(),
        desired_revision: desired.map(DesiredState::revision),
        observed_revision: observed.map(ObservedState::revision),
        resources,
        receipts,
        artifacts,
    }
}

impl Store {
    /// The joined view of one cluster's planes at their heads.
    pub fn view(&self, refs: &PlaneRefs) -> crate::Result<ClusterView> {
        let desired = self.read_desired(refs, None)?;
        let observed = self.read_observed(refs, None)?;
        Ok(derive(&refs.cluster, desired.as_ref(), observed.as_ref()))
    }
}
