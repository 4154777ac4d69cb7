//! The desired plane as read from one commit ([`DesiredState`] and its entries), what a
//! publication changed, and the UIDs it mints: the types every publisher (apply, deletion,
//! promotion, rollback) and reader shares, below all of them.

use crate::documents::{
    self as docs, CLUSTER_PATH, ClusterConfigDoc, DeletionIntent, MaterializedDoc, MaterializedPin,
    PROMOTION_PATH, PromotionDoc, ResourceDoc, WAITS_PATH, WaitsDoc, from_value, hex,
};
use crate::error::{Result, StoreError};
use crate::id::ObjectId;
use crate::stacks::{self, StackDoc, StackTemplateDoc};
use crate::store::Plane;
use proxops_model::ResourceKey;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The trailer pinning the source revision of a desired commit.
pub const SOURCE_TRAILER: &str = "Source-Revision";
/// The trailer naming the version of the store that wrote a commit.
pub const VERSION_TRAILER: &str = "Proxops-Version";

/// A desired plane as read from one commit.
#[derive(Debug, Clone)]
pub struct DesiredState {
    /// The commit and its files.
    pub plane: Plane,
    /// The source revision its message pins.
    pub source_revision: Option<ObjectId>,
    /// The cluster configuration.
    pub cluster: Option<ClusterConfigDoc>,
    /// Resources by (kind, name).
    pub resources: BTreeMap<ResourceKey, DesiredEntry>,
    /// Pending deletion intents by (kind, name).
    pub deletions: BTreeMap<ResourceKey, DeletionEntry>,
    /// The promotion record the plane carries, if any.
    pub promotion: Option<PromotionDoc>,
    /// Stacks by name.
    pub stacks: BTreeMap<String, StackEntry>,
    /// StackTemplates by name.
    pub templates: BTreeMap<String, TemplateEntry>,
    /// Resources whose references did not resolve at this publication, with why
    /// (`waits.yaml`).
    pub waits: BTreeMap<ResourceKey, String>,
    /// Materialized payloads by (kind, name) ([`crate::materialized`]).
    pub materialized: BTreeMap<ResourceKey, MaterializedEntry>,
}

/// One materialized payload of the desired plane.
#[derive(Debug, Clone)]
pub struct MaterializedEntry {
    /// Its path.
    pub path: String,
    /// Its blob id.
    pub blob: ObjectId,
    /// The document.
    pub doc: MaterializedDoc,
}

/// One Stack of the desired plane.
#[derive(Debug, Clone)]
pub struct StackEntry {
    /// Its path.
    pub path: String,
    /// Its blob id.
    pub blob: ObjectId,
    /// The document.
    pub doc: StackDoc,
}

/// One StackTemplate of the desired plane.
#[derive(Debug, Clone)]
pub struct TemplateEntry {
    /// Its path.
    pub path: String,
    /// Its blob id.
    pub blob: ObjectId,
    /// The document.
    pub doc: StackTemplateDoc,
}

/// One resource document of the desired plane.
#[derive(Debug, Clone)]
pub struct DesiredEntry {
    /// Its path.
    pub path: String,
    /// Its blob id: what receipts pin.
    pub blob: ObjectId,
    /// The document.
    pub doc: ResourceDoc,
    /// Its materialized payload, when the plane holds one rendered from this document.
    pub materialized: Option<MaterializedPin>,
}

/// One deletion intent of the desired plane.
#[derive(Debug, Clone)]
pub struct DeletionEntry {
    /// Its path.
    pub path: String,
    /// Its blob id.
    pub blob: ObjectId,
    /// The document.
    pub intent: DeletionIntent,
}

impl DesiredState {
    /// Reads the desired plane at `commit`.
    pub(crate) fn read(
        repo: &gix::Repository,
        refname: &str,
        commit: ObjectId,
    ) -> Result<DesiredState> {
        let plane = Plane::read(repo, refname, commit)?;
        let mut resources = BTreeMap::new();
        let mut deletions = BTreeMap::new();
        let mut cluster = None;
        let mut promotion = None;
        let mut stacks = BTreeMap::new();
        let mut templates = BTreeMap::new();
        let mut waits = BTreeMap::new();
        let mut materialized = BTreeMap::new();
        for (path, id) in &plane.files {
            let corrupt = |reason: &str| StoreError::Corrupt {
                plane: refname.to_owned(),
                path: path.clone(),
                reason: reason.to_owned(),
            };
            if path == CLUSTER_PATH {
                cluster = Some(from_value(plane.parse(repo, path, *id)?, refname, path)?);
            } else if path == WAITS_PATH {
                let doc: WaitsDoc = from_value(plane.parse(repo, path, *id)?, refname, path)?;
                for (key, why) in doc.spec {
                    let (kind, name) = key
                        .split_once('/')
                        .ok_or_else(|| corrupt("a waiting resource is not `Kind/name`"))?;
                    waits.insert(
                        ResourceKey {
                            kind: kind.to_owned(),
                            name: name.to_owned(),
                        },
                        why,
                    );
                }
            } else if path == PROMOTION_PATH {
                promotion = Some(from_value(plane.parse(repo, path, *id)?, refname, path)?);
            } else if let Some(key) = docs::key_of_path(docs::RESOURCES_DIR, path) {
                let doc: ResourceDoc = from_value(plane.parse(repo, path, *id)?, refname, path)?;
                if doc.kind != key.kind || doc.metadata.name != key.name {
                    return Err(corrupt("kind and name differ from the path"));
                }
                let entry = DesiredEntry {
                    path: path.clone(),
                    blob: *id,
                    doc,
                    materialized: None,
                };
                resources.insert(key, entry);
            } else if let Some(key) = docs::key_of_path(docs::MATERIALIZED_DIR, path) {
                let doc: MaterializedDoc =
                    from_value(plane.parse(repo, path, *id)?, refname, path)?;
                if doc.spec.subject.key() != key {
                    return Err(corrupt("subject differs from the path"));
                }
                let entry = MaterializedEntry {
                    path: path.clone(),
                    blob: *id,
                    doc,
                };
                materialized.insert(key, entry);
            } else if let Some(name) = stacks::name_of_path(stacks::STACKS_DIR, path) {
                let doc: StackDoc = from_value(plane.parse(repo, path, *id)?, refname, path)?;
                if doc.metadata.name != name {
                    return Err(corrupt("name differs from the path"));
                }
                let (path, blob) = (path.clone(), *id);
                stacks.insert(name.to_owned(), StackEntry { path, blob, doc });
            } else if let Some(name) = stacks::name_of_path(stacks::TEMPLATES_DIR, path) {
                let doc: StackTemplateDoc =
                    from_value(plane.parse(repo, path, *id)?, refname, path)?;
                if doc.metadata.name != name {
                    return Err(corrupt("name differs from the path"));
                }
                let (path, blob) = (path.clone(), *id);
                templates.insert(name.to_owned(), TemplateEntry { path, blob, doc });
            } else if let Some(key) = docs::key_of_path(docs::DELETIONS_DIR, path) {
                let intent: DeletionIntent =
                    from_value(plane.parse(repo, path, *id)?, refname, path)?;
                if intent.spec.subject.key() != key {
                    return Err(corrupt("subject differs from the path"));
                }
                let entry = DeletionEntry {
                    path: path.clone(),
                    blob: *id,
                    intent,
                };
                deletions.insert(key, entry);
            } else {
                return Err(corrupt("unexpected file in the desired plane"));
            }
        }
        stacks::check_graph(refname, &stacks, &templates, resources.iter())?;
        // A payload counts for the document it was rendered from, and only that one.
        for (key, m) in &materialized {
            if let Some(entry) = resources.get_mut(key)
                && m.doc.spec.document == hex(entry.blob)
                && m.doc.spec.subject.uid == entry.doc.metadata.uid
            {
                entry.materialized = Some(MaterializedPin {
                    path: m.path.clone(),
                    blob: hex(m.blob),
                });
            }
        }
        let source_revision =
            trailer(&plane.commit.message, SOURCE_TRAILER).and_then(|s| docs::parse_id(&s));
        Ok(DesiredState {
            stacks,
            templates,
            plane,
            source_revision,
            cluster,
            resources,
            deletions,
            promotion,
            waits,
            materialized,
        })
    }

    /// The desired commit.
    pub fn revision(&self) -> ObjectId {
        self.plane.commit.id
    }
}

/// The value of the last `key: value` trailer of a commit message.
pub fn trailer(message: &str, key: &str) -> Option<String> {
    message.lines().rev().find_map(|l| {
        l.strip_prefix(key)?
            .strip_prefix(':')
            .map(|v| v.trim().to_owned())
    })
}

/// What a publication changed, by (kind, name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Resources published for the first time (a UID was minted).
    pub created: Vec<ResourceKey>,
    /// Resources whose document changed.
    pub updated: Vec<ResourceKey>,
    /// Resources removed from the source: new deletion intents.
    pub deleting: Vec<ResourceKey>,
    /// Deletion intents dropped because the resource is back in the source (same UID).
    pub restored: Vec<ResourceKey>,
    /// Deletion intents dropped because their teardown was observed.
    pub finalized: Vec<ResourceKey>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty()
            && self.updated.is_empty()
            && self.deleting.is_empty()
            && self.restored.is_empty()
            && self.finalized.is_empty()
    }
}

/// The result of a publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The full ref name.
    pub refname: String,
    /// The head before.
    pub previous: Option<ObjectId>,
    /// The head after (the previous one when nothing was published).
    pub head: ObjectId,
    /// Whether a commit was made.
    pub published: bool,
}

/// A UID for a new incarnation: deterministic in its inputs, so that the same publication
/// yields the same bytes, and different for a resource recreated later (the parent desired
/// commit differs).
pub fn mint_uid(
    cluster: &str,
    key: &ResourceKey,
    source_revision: ObjectId,
    parent: Option<ObjectId>,
) -> String {
    let mut h = Sha256::new();
    for part in [
        "proxops/desired-uid/v1",
        cluster,
        &key.kind,
        &key.name,
        &hex(source_revision),
        &parent.map_or_else(|| "root".to_owned(), hex),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    format!("u1-{}", hex::encode(&digest[..16]))
}
