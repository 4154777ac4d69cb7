//! `proxops delete`: a deletion intent recorded for resources whose manifests are still
//! composed, fenced by each resource's UID, published through the cluster's change gate.
//!
//! The intent carries [`DeletionRequest`]: while it stands, [`Store::publish_desired`] does not
//! publish the resource again (its manifest is still in the source), and once the teardown is
//! observed it keeps the intent for as long as the manifest stays composed, so that nothing
//! re-creates what was deleted on purpose. The resource's Stack-projected siblings are
//! deleted with their Stack.

use crate::desired::{
    Changes, DesiredBuild, DesiredPublication, DesiredState, SOURCE_TRAILER, VERSION_TRAILER,
    deletion_intent,
};
use crate::documents::{CONTROLLER_VERSION, DeletionRequest, hex};
use crate::error::{Result, StoreError};
use crate::git::FileMap;
use crate::refs::PlaneRefs;
use crate::store::Store;
use proxops_model::ResourceKey;
use std::collections::BTreeSet;

/// What `proxops delete` names: a resource (or a Stack, `Stack/<name>`) and, optionally, the
/// UID the user saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeletionTarget {
    /// `Kind/name`; kind `Stack` names a Stack (its projected resources are deleted).
    pub key: ResourceKey,
    /// The UID it must still have (`None`: whatever it has now).
    pub uid: Option<String>,
}

impl DeletionTarget {
    /// A target without a UID fence.
    pub fn new(key: ResourceKey) -> Self {
        DeletionTarget { key, uid: None }
    }

    /// Fences the target by `uid`.
    pub fn with_uid(mut self, uid: Option<String>) -> Self {
        self.uid = uid;
        self
    }
}

/// A request to delete resources of one cluster.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeletionRequestOptions<'a> {
    /// The cluster's planes.
    pub refs: &'a PlaneRefs,
    /// What to delete.
    pub targets: Vec<DeletionTarget>,
    /// Why (recorded in the intents and the commit message).
    pub reason: Option<String>,
    /// Work it out and publish nothing.
    pub dry_run: bool,
}

impl<'a> DeletionRequestOptions<'a> {
    /// A request for `targets` of the cluster of `refs`.
    pub fn new(refs: &'a PlaneRefs, targets: Vec<DeletionTarget>) -> Self {
        DeletionRequestOptions {
            refs,
            targets,
            reason: None,
            dry_run: false,
        }
    }

    /// The reason.
    pub fn with_reason(mut self, reason: Option<String>) -> Self {
        self.reason = reason;
        self
    }

    /// Whether nothing is published.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// One resource a request marks, with its UID.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Marked {
    /// The resource.
    pub key: ResourceKey,
    /// Its UID (the incarnation the intent fences).
    pub uid: String,
    /// Whether it was being deleted on request already (nothing new for it).
    pub already: bool,
}

/// What [`Store::request_deletion`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeletionOutcome {
    /// The resources marked, in key order.
    pub marked: Vec<Marked>,
    /// The publication (`None`: a dry run, or nothing new to mark).
    pub publication: Option<DesiredPublication>,
}

impl Store {
    /// Marks the targets for deletion on the live desired head of `request.refs`: each must be
    /// a resource of that head (or a Stack, whose projected resources are marked), with the
    /// UID given if one was. The new desired tree holds no document for them and a
    /// [`DeletionIntent`](crate::documents::DeletionIntent) with [`DeletionRequest`] each; it goes through the change gate
    /// (`pullRequest`: a candidate). A resource already marked on request is left as it is.
    pub fn request_deletion(
        &self,
        request: &DeletionRequestOptions<'_>,
    ) -> Result<DeletionOutcome> {
        let refs = request.refs;
        let mut repo = crate::pack::batch(&self.repo());
        let head = self.current_head(&repo, &refs.desired)?.ok_or_else(|| {
            StoreError::Invalid(format!(
                "`{}` has no desired plane yet: nothing ProxOps reconciled can be deleted",
                refs.cluster
            ))
        })?;
        let current = DesiredState::read(&repo, &refs.desired, head)?;
        let mut wanted: BTreeSet<ResourceKey> = BTreeSet::new();
        let mut marked = Vec::new();
        for target in &request.targets {
            for key in expand(&current, target, &refs.cluster)? {
                if let Some(entry) = current.deletions.get(&key)
                    && entry.intent.spec.requested.is_some()
                {
                    if !marked.iter().any(|m: &Marked| m.key == key) {
                        marked.push(Marked {
                            uid: entry.intent.spec.subject.uid.clone(),
                            key,
                            already: true,
                        });
                    }
                    continue;
                }
                wanted.insert(key);
            }
        }
        for key in &wanted {
            if let Some(entry) = current.resources.get(key) {
                marked.push(Marked {
                    key: key.clone(),
                    uid: entry.doc.metadata.uid.clone(),
                    already: false,
                });
            }
        }
        marked.sort_by(|a, b| a.key.cmp(&b.key));
        if request.dry_run || wanted.is_empty() {
            return Ok(DeletionOutcome {
                marked,
                publication: None,
            });
        }
        let source_revision = current.source_revision.unwrap_or(head);
        let mut files: FileMap = current.plane.files.clone();
        let mut changes = Changes::default();
        for key in &wanted {
            let Some(entry) = current.resources.get(key) else {
                continue;
            };
            let requested = DeletionRequest {
                by: "proxops delete".to_owned(),
                reason: request.reason.clone(),
                stack: stacks_of(&current, entry),
            };
            files.remove(&entry.path);
            if let Some(m) = current.materialized.get(key) {
                files.remove(&m.path);
            }
            let (path, blob) = deletion_intent(
                &repo,
                &current,
                key,
                entry,
                source_revision,
                Some(requested),
            )?;
            files.insert(path, blob);
            changes.deleting.push(key.clone());
        }
        let names: Vec<String> = changes.deleting.iter().map(ToString::to_string).collect();
        let mut message = format!("Mark {} for deletion\n\n", names.join(", "));
        if let Some(reason) = &request.reason {
            message.push_str(&format!("Reason: {reason}\n"));
        }
        message.push_str(&format!(
            "Requested-By: proxops delete\n{SOURCE_TRAILER}: {}\n{VERSION_TRAILER}: {CONTROLLER_VERSION}\n",
            hex(source_revision)
        ));
        let build = DesiredBuild {
            head: Some(head),
            previous: Some(std::sync::Arc::new(current)),
            files,
            changes,
            waits: Default::default(),
            resolved: Default::default(),
        };
        let publication = self.publish_build(&mut repo, refs, build, &message)?;
        Ok(DeletionOutcome {
            marked,
            publication: Some(publication),
        })
    }
}

/// The resources a target names on `current`: itself, or a Stack's projected resources.
fn expand(
    current: &DesiredState,
    target: &DeletionTarget,
    cluster: &str,
) -> Result<Vec<ResourceKey>> {
    let key = &target.key;
    let fence = |actual: &str| match &target.uid {
        Some(expected) if expected != actual => Err(StoreError::StaleUid {
            cluster: cluster.to_owned(),
            resource: key.to_string(),
            expected: expected.clone(),
            actual: actual.to_owned(),
        }),
        _ => Ok(()),
    };
    if key.kind == "Stack" {
        let stack = current.stacks.get(&key.name).ok_or_else(|| {
            StoreError::Invalid(format!(
                "no Stack `{}` in the desired plane of `{cluster}`",
                key.name
            ))
        })?;
        fence(&stack.doc.metadata.uid)?;
        let uid = &stack.doc.metadata.uid;
        let mut owned: Vec<ResourceKey> = current
            .resources
            .iter()
            .filter(|(_, e)| {
                e.doc
                    .metadata
                    .owner_references
                    .iter()
                    .any(|o| &o.uid == uid)
            })
            .map(|(k, _)| k.clone())
            .collect();
        owned.extend(
            current
                .deletions
                .iter()
                .filter(|(_, e)| {
                    e.intent
                        .spec
                        .requested
                        .as_ref()
                        .and_then(|r| r.stack.as_deref())
                        == Some(key.name.as_str())
                })
                .map(|(k, _)| k.clone()),
        );
        return Ok(owned);
    }
    if let Some(entry) = current.resources.get(key) {
        fence(&entry.doc.metadata.uid)?;
        return Ok(vec![key.clone()]);
    }
    if let Some(entry) = current.deletions.get(key) {
        fence(&entry.intent.spec.subject.uid)?;
        if entry.intent.spec.requested.is_some() {
            return Ok(vec![key.clone()]);
        }
        return Err(StoreError::Invalid(format!(
            "{key} is being deleted already: its manifest left the composition of `{cluster}`"
        )));
    }
    Err(StoreError::Invalid(format!(
        "no {key} in the desired plane of `{cluster}` (only what ProxOps published can be deleted; `proxops get --cluster {cluster}` lists it)"
    )))
}

/// The Stack that projected `entry`, by its owner reference's UID.
fn stacks_of(current: &DesiredState, entry: &crate::desired::DesiredEntry) -> Option<String> {
    let owner = entry.doc.metadata.owner_references.first()?;
    current
        .stacks
        .iter()
        .find(|(_, s)| s.doc.metadata.uid == owner.uid)
        .map(|(name, _)| name.clone())
}
