//! Materialized payloads: beside each resource document of the desired plane,
//! `materialized/<kind>/<name>.yaml` holds the PVE requests that document makes the engine send
//! (method, path, parameters; secrets as their SOPS reference), computed against the document
//! the resource's current receipt applied. A review of a desired commit or a candidate branch
//! thereby shows the PVE-level change, and a receipt names the payload it applied.
//!
//! The store cannot render requests (that is the engine's drivers' work): a publication asks a
//! [`Materializer`] once, for the resources whose document is new or changed, and carries the
//! payload of every unchanged document forward byte for byte.

use crate::documents::{
    self as docs, API_VERSION, NameOnly, ResourceDoc, Subject, canonical_bytes, hex,
};
pub use crate::documents::{ApiRequest, MaterializedDoc, MaterializedPin, MaterializedSpec};
use crate::error::Result;
use crate::git::{self, FileMap};
use crate::id::ObjectId;
use crate::observed::ObservedState;
use proxops_model::{Resource, ResourceKey};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a [`Materializer`] made of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Materialization {
    /// The requests, in order.
    pub requests: Vec<ApiRequest>,
    /// Notes for the reader.
    pub notes: Vec<String>,
}

impl Materialization {
    /// A payload of `requests` with `notes`.
    pub fn new(requests: Vec<ApiRequest>, notes: Vec<String>) -> Materialization {
        Materialization { requests, notes }
    }
}

/// What a publication asks its [`Materializer`].
#[derive(Debug)]
#[non_exhaustive]
pub struct MaterializeRequest<'a> {
    /// The cluster.
    pub cluster: &'a str,
    /// Every resource the publication holds, references resolved where they are: what the
    /// targets' names resolve against.
    pub resources: &'a [Arc<Resource>],
    /// The resources to render: new or changed documents, and documents without a payload.
    pub targets: &'a [ResourceKey],
    /// For targets with a receipt: the desired document it applied.
    pub applied: &'a BTreeMap<ResourceKey, ResourceDoc>,
}

/// Renders resources into the requests the engine would send (implemented by the engine).
pub trait Materializer: Send + Sync {
    /// The payload of each target, or why it cannot be rendered. A target missing from the
    /// answer gets no payload.
    fn materialize(
        &self,
        request: &MaterializeRequest<'_>,
    ) -> BTreeMap<ResourceKey, std::result::Result<Materialization, String>>;
}

/// `materialized/<kind>/<name>.yaml`.
pub fn materialized_path(key: &ResourceKey) -> Result<String> {
    docs::key_path(docs::MATERIALIZED_DIR, key)
}

/// The desired document a receipt's resource is at in PVE: the one it applied or, after a
/// rolled-back guarded update, the one it was restored to (`None`: unknown).
pub fn applied_blob(receipt: &docs::Receipt) -> Option<ObjectId> {
    let result = &receipt.spec.result;
    if result.outcome == docs::Outcome::RolledBack {
        result
            .guard
            .as_ref()
            .and_then(|g| g.restored.as_ref())
            .and_then(|pin| docs::parse_id(&pin.blob))
    } else {
        docs::parse_id(&receipt.spec.desired.blob)
    }
}

/// One resource of a build, for [`write`].
pub(crate) struct Written<'a> {
    pub key: ResourceKey,
    pub uid: &'a str,
    pub document: ObjectId,
    /// Whether it may be rendered: a resource waiting on its references keeps its previous
    /// document and, at most, that document's payload.
    pub render: bool,
}

/// Adds the payloads of a build to `files`: carried forward for unchanged documents, rendered
/// by `materializer` for the others (none without one). `observed` reads the observed plane,
/// only when something is rendered.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write(
    repo: &gix::Repository,
    observed: impl FnOnce() -> Result<Option<ObservedState>>,
    request: (&str, &[Arc<Resource>]),
    written: &[Written<'_>],
    previous: Option<&crate::desired::plane::DesiredState>,
    materializer: Option<&dyn Materializer>,
    files: &mut FileMap,
) -> Result<()> {
    let mut targets = Vec::new();
    for w in written {
        let carried = previous
            .and_then(|p| p.materialized.get(&w.key))
            .filter(|m| m.doc.spec.document == hex(w.document) && m.doc.spec.subject.uid == w.uid);
        match carried {
            Some(m) => {
                files.insert(m.path.clone(), m.blob);
            }
            None if w.render => targets.push(w),
            None => {}
        }
    }
    let Some(materializer) = materializer.filter(|_| !targets.is_empty()) else {
        return Ok(());
    };
    let mut applied = BTreeMap::new();
    if let Some(observed) = observed()? {
        for w in &targets {
            let Some(receipt) = observed.receipts.get(&w.key) else {
                continue;
            };
            if receipt.doc.spec.subject.uid != w.uid {
                continue;
            }
            let Some(blob) = applied_blob(&receipt.doc) else {
                continue;
            };
            // A document no longer readable: rendered as if nothing was applied.
            if let Ok(doc) = crate::store::read_resource_doc_in(repo, blob) {
                applied.insert(w.key.clone(), (blob, doc));
            }
        }
    }
    let keys: Vec<ResourceKey> = targets.iter().map(|w| w.key.clone()).collect();
    let docs_applied: BTreeMap<ResourceKey, ResourceDoc> = applied
        .iter()
        .map(|(k, (_, doc))| (k.clone(), doc.clone()))
        .collect();
    let (cluster, resources) = request;
    let mut rendered = materializer.materialize(&MaterializeRequest {
        cluster,
        resources,
        targets: &keys,
        applied: &docs_applied,
    });
    for w in targets {
        let Some(result) = rendered.remove(&w.key) else {
            continue;
        };
        let (requests, notes, error) = match result {
            Ok(m) => (m.requests, m.notes, None),
            Err(e) => (Vec::new(), Vec::new(), Some(e)),
        };
        let doc = MaterializedDoc {
            api_version: API_VERSION.to_owned(),
            kind: "Materialized".to_owned(),
            metadata: NameOnly {
                name: w.key.name.clone(),
            },
            spec: MaterializedSpec {
                subject: Subject {
                    kind: w.key.kind.clone(),
                    name: w.key.name.clone(),
                    uid: w.uid.to_owned(),
                },
                document: hex(w.document),
                against: applied.get(&w.key).map(|(blob, _)| hex(*blob)),
                requests,
                notes,
                error,
            },
        };
        let blob = git::write_blob(repo, &canonical_bytes(&doc)?)?;
        files.insert(materialized_path(&w.key)?, blob);
    }
    Ok(())
}
