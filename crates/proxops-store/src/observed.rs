//! The observed plane: publishing receipts, artifacts and teardown evidence (rebuilt on the
//! newest head and retried when another writer got there first), and reading it back.

use crate::desired::plane::{DesiredEntry, Publication, trailer};
use crate::documents::{
    self as docs, API_VERSION, Artifact, ArtifactDescriptor, CONTROLLER_VERSION, DesiredPin,
    NameOnly, Outcome, Receipt, ReceiptResult, ReceiptSpec, Subject, Teardown, TeardownSpec,
    canonical_bytes, from_value, hex,
};
use crate::error::{Result, StoreError};
use crate::git::{self, FileMap};
use crate::id::ObjectId;
use crate::refs::PlaneRefs;
use crate::store::{Plane, Store};
use proxops_model::ResourceKey;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The trailer naming a desired revision an observation publication refers to.
pub const DESIRED_TRAILER: &str = "Desired-Revision";

/// Attempts [`Store::publish_observations`] makes by default before giving up.
pub const DEFAULT_ATTEMPTS: u32 = 32;

/// One reconciled resource: its receipt's content and the artifacts published with it.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The incarnation reconciled.
    pub subject: Subject,
    /// The desired document reconciled.
    pub desired: DesiredPin,
    /// Its materialized payload, if the plane holds one.
    pub materialized: Option<crate::documents::MaterializedPin>,
    /// What happened.
    pub outcome: Outcome,
    /// PVE identity of what exists now.
    pub pve_identity: BTreeMap<String, Value>,
    /// The PVE tasks that ran.
    pub upids: Vec<String>,
    /// When reconciling started (RFC 3339, UTC; see [`docs::utc_timestamp`]).
    pub started_at: String,
    /// When it finished.
    pub finished_at: String,
    /// Artifacts: (name, kind, payload). They replace every earlier artifact of the resource.
    pub artifacts: Vec<(String, String, Value)>,
    /// What a snapshot-guarded update did ([`docs::GuardRecord`]).
    pub guard: Option<docs::GuardRecord>,
}

impl Observation {
    /// An observation of `entry` read from the desired commit `desired_revision`.
    pub fn of(entry: &DesiredEntry, desired_revision: ObjectId, outcome: Outcome) -> Observation {
        let now = docs::utc_timestamp(std::time::SystemTime::now());
        Observation {
            subject: Subject {
                kind: entry.doc.kind.clone(),
                name: entry.doc.metadata.name.clone(),
                uid: entry.doc.metadata.uid.clone(),
            },
            desired: DesiredPin {
                blob: hex(entry.blob),
                revision: hex(desired_revision),
            },
            materialized: entry.materialized.clone(),
            outcome,
            pve_identity: docs::pve_identity(&entry.doc.spec),
            upids: Vec::new(),
            started_at: now.clone(),
            finished_at: now,
            artifacts: Vec::new(),
            guard: None,
        }
    }
}

/// A teardown to record: the incarnation and the deletion intent acted on.
#[derive(Debug, Clone)]
pub struct TeardownRecord {
    /// The incarnation torn down.
    pub subject: Subject,
    /// The deletion intent's blob id and the desired commit it was read from.
    pub intent: DesiredPin,
    /// The PVE tasks that ran.
    pub upids: Vec<String>,
    /// When it finished.
    pub finished_at: String,
}

/// What one publication to the observed plane records.
#[derive(Debug, Clone, Default)]
pub struct ObservationBatch {
    /// Receipts (with artifacts) to write.
    pub observations: Vec<Observation>,
    /// Teardowns to record (each removes the resource's receipt and artifacts).
    pub teardowns: Vec<TeardownRecord>,
}

/// A change to apply to whatever the observed head holds: blobs are written once, before the
/// first attempt.
enum Edit {
    Receipt {
        key: ResourceKey,
        receipt: ObjectId,
        artifacts: Vec<(String, ObjectId)>,
    },
    Teardown {
        key: ResourceKey,
        path: String,
        blob: ObjectId,
    },
}

fn remove_resource_evidence(files: &mut FileMap, key: &ResourceKey) -> Result<()> {
    files.remove(&docs::receipt_path(key)?);
    let prefix = format!("{}/", docs::artifact_dir(key)?);
    let stale: Vec<String> = files
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .map(|(p, _)| p.clone())
        .collect();
    for path in stale {
        files.remove(&path);
    }
    Ok(())
}

/// A short pause before retrying, longer with every attempt and different per writer, so that
/// writers contending for one ref do not retry in lockstep.
fn backoff(attempt: u32) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = u64::from(nanos % 1000) * u64::from(attempt.min(10));
    std::thread::sleep(Duration::from_micros(200 + jitter));
}

impl Store {
    /// Publishes `batch` to the observed plane of `refs`, attempting up to `attempts` times:
    /// each attempt reads the newest head, applies the batch on top of it (so concurrent
    /// receipts of other resources are kept) and moves the ref by compare-and-swap.
    pub fn publish_observations(
        &self,
        refs: &PlaneRefs,
        batch: &ObservationBatch,
        attempts: u32,
    ) -> Result<Publication> {
        let mut repo = crate::pack::batch(&self.repo());
        let mut edits = Vec::new();
        let mut revisions = BTreeSet::new();
        for obs in &batch.observations {
            let key = obs.subject.key();
            let mut descriptors = BTreeMap::new();
            let mut artifacts = Vec::new();
            for (name, kind, spec) in &obs.artifacts {
                let doc = Artifact {
                    api_version: API_VERSION.to_owned(),
                    kind: kind.clone(),
                    metadata: NameOnly { name: name.clone() },
                    producer: obs.subject.clone(),
                    spec: spec.clone(),
                };
                let path = docs::artifact_path(&key, name)?;
                let blob = git::write_blob(&repo, &canonical_bytes(&doc)?)?;
                descriptors.insert(
                    name.clone(),
                    ArtifactDescriptor {
                        kind: kind.clone(),
                        path: path.clone(),
                        blob: hex(blob),
                    },
                );
                artifacts.push((path, blob));
            }
            let receipt = Receipt {
                api_version: API_VERSION.to_owned(),
                kind: "Receipt".to_owned(),
                metadata: NameOnly {
                    name: key.name.clone(),
                },
                spec: ReceiptSpec {
                    subject: obs.subject.clone(),
                    desired: obs.desired.clone(),
                    materialized: obs.materialized.clone(),
                    result: ReceiptResult {
                        outcome: obs.outcome,
                        pve_identity: obs.pve_identity.clone(),
                        upids: obs.upids.clone(),
                        started_at: obs.started_at.clone(),
                        finished_at: obs.finished_at.clone(),
                        controller_version: CONTROLLER_VERSION.to_owned(),
                        artifacts: descriptors,
                        guard: obs.guard.clone(),
                    },
                },
            };
            let receipt = git::write_blob(&repo, &canonical_bytes(&receipt)?)?;
            revisions.insert(obs.desired.revision.clone());
            edits.push(Edit::Receipt {
                key,
                receipt,
                artifacts,
            });
        }
        for t in &batch.teardowns {
            let key = t.subject.key();
            let doc = Teardown {
                api_version: API_VERSION.to_owned(),
                kind: "Teardown".to_owned(),
                metadata: NameOnly {
                    name: key.name.clone(),
                },
                spec: TeardownSpec {
                    subject: t.subject.clone(),
                    intent: t.intent.clone(),
                    upids: t.upids.clone(),
                    finished_at: t.finished_at.clone(),
                    controller_version: CONTROLLER_VERSION.to_owned(),
                },
            };
            revisions.insert(t.intent.revision.clone());
            edits.push(Edit::Teardown {
                path: docs::teardown_path(&key, &t.subject.uid)?,
                blob: git::write_blob(&repo, &canonical_bytes(&doc)?)?,
                key,
            });
        }
        let mut message = format!(
            "Observe {} receipt(s) and {} teardown(s) in {}\n\n",
            batch.observations.len(),
            batch.teardowns.len(),
            refs.cluster
        );
        for rev in &revisions {
            message.push_str(&format!("{DESIRED_TRAILER}: {rev}\n"));
        }
        message.push_str(&format!(
            "{}: {CONTROLLER_VERSION}\n",
            crate::desired::plane::VERSION_TRAILER
        ));

        let mut last = None;
        for attempt in 0..attempts.max(1) {
            if attempt > 0 {
                backoff(attempt);
            }
            let head = self.current_head(&repo, &refs.observed)?;
            let (mut files, head_tree) = match head {
                Some(h) => {
                    let plane = Plane::read(&repo, &refs.observed, h)?;
                    (plane.files, Some(plane.commit.tree))
                }
                None => (FileMap::new(), None),
            };
            for edit in &edits {
                match edit {
                    Edit::Receipt {
                        key,
                        receipt,
                        artifacts,
                    } => {
                        remove_resource_evidence(&mut files, key)?;
                        files.insert(docs::receipt_path(key)?, *receipt);
                        for (path, blob) in artifacts {
                            files.insert(path.clone(), *blob);
                        }
                    }
                    Edit::Teardown { key, path, blob } => {
                        remove_resource_evidence(&mut files, key)?;
                        files.insert(path.clone(), *blob);
                    }
                }
            }
            let tree = git::write_tree(&repo, &files)?;
            if let Some(h) = head
                && head_tree == Some(tree)
            {
                return Ok(Publication {
                    refname: refs.observed.clone(),
                    previous: Some(h),
                    head: h,
                    published: false,
                });
            }
            let commit = git::write_commit(&repo, tree, head, &message)?;
            crate::pack::flush(&mut repo)?;
            match self.move_ref(&repo, &refs.observed, head, (commit, tree), &message) {
                Ok(new) => {
                    return Ok(Publication {
                        refname: refs.observed.clone(),
                        previous: head,
                        head: new,
                        published: true,
                    });
                }
                Err(e) if e.is_retryable() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Exhausted {
            name: refs.observed.clone(),
            attempts,
            last: Box::new(last.unwrap_or(StoreError::Invalid("no attempt".to_owned()))),
        })
    }

    /// The observed plane of `refs` at its head (`at: None`) or at a commit.
    pub fn read_observed(
        &self,
        refs: &PlaneRefs,
        at: Option<ObjectId>,
    ) -> Result<Option<ObservedState>> {
        let repo = self.repo();
        let commit = match at {
            Some(id) => id,
            None => match self.current_head(&repo, &refs.observed)? {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        ObservedState::read(&repo, &refs.observed, commit).map(Some)
    }
}

/// A stored document with its path and blob id.
#[derive(Debug, Clone)]
pub struct Stored<T> {
    /// Its path.
    pub path: String,
    /// Its blob id.
    pub blob: ObjectId,
    /// The document.
    pub doc: T,
}

/// An observed plane as read from one commit.
#[derive(Debug, Clone)]
pub struct ObservedState {
    /// The commit and its files.
    pub plane: Plane,
    /// Receipts by (kind, name).
    pub receipts: BTreeMap<ResourceKey, Stored<Receipt>>,
    /// Artifacts by (producer kind, producer name, artifact name).
    pub artifacts: BTreeMap<(ResourceKey, String), Stored<Artifact>>,
    /// Teardown evidence.
    pub teardowns: Vec<Stored<Teardown>>,
}

impl ObservedState {
    /// Reads the observed plane at `commit`.
    pub(crate) fn read(
        repo: &gix::Repository,
        refname: &str,
        commit: ObjectId,
    ) -> Result<ObservedState> {
        let plane = Plane::read(repo, refname, commit)?;
        let mut receipts = BTreeMap::new();
        let mut artifacts = BTreeMap::new();
        let mut teardowns = Vec::new();
        for (path, id) in &plane.files {
            let corrupt = |reason: &str| StoreError::Corrupt {
                plane: refname.to_owned(),
                path: path.clone(),
                reason: reason.to_owned(),
            };
            let parts: Vec<&str> = path.split('/').collect();
            let value = plane.parse(repo, path, *id)?;
            match parts.as_slice() {
                [docs::RECEIPTS_DIR, kind, file] => {
                    let doc: Receipt = from_value(value, refname, path)?;
                    let key = doc.spec.subject.key();
                    if key.kind != *kind || file.strip_suffix(".yaml") != Some(key.name.as_str()) {
                        return Err(corrupt("subject differs from the path"));
                    }
                    if receipts.contains_key(&key) {
                        return Err(corrupt("a second receipt for one resource"));
                    }
                    let stored = Stored {
                        path: path.clone(),
                        blob: *id,
                        doc,
                    };
                    receipts.insert(key, stored);
                }
                [docs::ARTIFACTS_DIR, kind, name, file] => {
                    let doc: Artifact = from_value(value, refname, path)?;
                    let key = doc.producer.key();
                    let local = file.strip_suffix(".yaml").unwrap_or(file);
                    if key.kind != *kind || key.name != *name || doc.metadata.name != local {
                        return Err(corrupt("producer or name differs from the path"));
                    }
                    let stored = Stored {
                        path: path.clone(),
                        blob: *id,
                        doc,
                    };
                    artifacts.insert((key, local.to_owned()), stored);
                }
                [docs::TEARDOWNS_DIR, _, _, _] => {
                    let doc: Teardown = from_value(value, refname, path)?;
                    if docs::teardown_path(&doc.spec.subject.key(), &doc.spec.subject.uid)? != *path
                    {
                        return Err(corrupt("subject differs from the path"));
                    }
                    teardowns.push(Stored {
                        path: path.clone(),
                        blob: *id,
                        doc,
                    });
                }
                _ => return Err(corrupt("unexpected file in the observed plane")),
            }
        }
        Ok(ObservedState {
            plane,
            receipts,
            artifacts,
            teardowns,
        })
    }

    /// The observed commit.
    pub fn revision(&self) -> ObjectId {
        self.plane.commit.id
    }

    /// The desired revisions the head commit's message names.
    pub fn desired_revision_trailer(&self) -> Option<String> {
        trailer(&self.plane.commit.message, DESIRED_TRAILER)
    }
}
