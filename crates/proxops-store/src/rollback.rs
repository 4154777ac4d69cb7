//! Rollback: a historical desired snapshot published again as a new forward commit. Refs never
//! rewind.
//!
//! [`Store::rollback`] of cluster `C` to revision `REV`:
//!
//! 1. `REV` must be a strict ancestor of `C`'s desired head.
//! 2. Evidence: the observed history is walked newest first for a commit that held, for every
//!    resource of `REV`, a receipt of exactly `REV`'s document (its blob id); none means `REV`
//!    "was never fully clean in one observed snapshot" and the rollback is refused.
//! 3. The new tree holds `REV`'s cluster configuration, promotion record and resource
//!    documents, each keeping the UID of the incarnation that exists now: the current
//!    resource's, or the UID of a pending deletion intent (the intent is dropped: the resource
//!    is back before its teardown); a resource whose incarnation was torn down since gets a
//!    fresh UID. Current deletion intents are kept; a current resource that `REV` lacks becomes
//!    a deletion intent, as in `apply` (dropping it silently would orphan its guest).
//! 4. One commit whose parent is the current head, with the reason and the from/to revisions
//!    as trailers, published through the cluster's change gate.

use crate::desired::{
    Changes, DesiredBuild, DesiredPublication, DesiredState, SOURCE_TRAILER, VERSION_TRAILER,
    deletion_intent, mint_uid,
};
use crate::documents::{
    self as docs, CLUSTER_PATH, CONTROLLER_VERSION, PROMOTION_PATH, Receipt, canonical_bytes,
    from_value, hex,
};
use crate::error::{Result, StoreError};
use crate::git::{self, FileMap};
use crate::id::ObjectId;
use crate::refs::PlaneRefs;
use crate::store::{Plane, Store};
use serde::Serialize;
use std::collections::HashMap;

/// What to roll back.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RollbackRequest<'a> {
    /// The cluster's planes.
    pub refs: &'a PlaneRefs,
    /// The desired revision whose content to publish again.
    pub to: ObjectId,
    /// Why (recorded in the commit).
    pub reason: &'a str,
    /// Check and build, publish nothing.
    pub dry_run: bool,
}

impl<'a> RollbackRequest<'a> {
    /// Rolls the desired plane of `refs` back to `to`, for `reason`; not a dry run.
    pub fn new(refs: &'a PlaneRefs, to: ObjectId, reason: &'a str) -> Self {
        RollbackRequest {
            refs,
            to,
            reason,
            dry_run: false,
        }
    }

    /// Sets [`RollbackRequest::dry_run`].
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// Where a rollback comes from and goes to (printed by `--dry-run`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The cluster.
    pub cluster: String,
    /// Why.
    pub reason: String,
    /// The desired head rolled back from.
    pub from_desired_revision: String,
    /// The desired revision whose content is restored.
    pub target_desired_revision: String,
    /// The observed commit that saw every resource of the target clean (`null`: it has none).
    pub target_observed_revision: Option<String>,
    /// The resources restored, `Kind/name`.
    pub resources: Vec<String>,
    /// The resources whose materialized payload came along, `Kind/name`.
    pub materialized: Vec<String>,
}

/// What [`Store::rollback`] did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct RollbackOutcome {
    /// Where from, where to, on what evidence.
    pub provenance: Provenance,
    /// What differs from the current head.
    pub changes: Changes,
    /// The publication (`None` when dry).
    pub publication: Option<DesiredPublication>,
}

impl Store {
    /// Rolls `request.refs` back to `request.to` (see the module docs).
    pub fn rollback(&self, request: &RollbackRequest<'_>) -> Result<RollbackOutcome> {
        let refs = request.refs;
        let reason = request
            .reason
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if reason.is_empty() {
            return Err(StoreError::Invalid("a rollback needs a reason".to_owned()));
        }
        let mut repo = crate::pack::batch(&self.repo());
        let head = self.current_head(&repo, &refs.desired)?.ok_or_else(|| {
            StoreError::Invalid(format!("`{}` has no desired plane", refs.cluster))
        })?;
        if request.to == head || !git::is_ancestor(&repo, request.to, head)? {
            return Err(StoreError::NotAncestor {
                cluster: refs.cluster.clone(),
                revision: request.to,
                head,
            });
        }
        let current = DesiredState::read(&repo, &refs.desired, head)?;
        let target = DesiredState::read(&repo, &refs.desired, request.to)?;
        let observed = self.clean_snapshot(&repo, refs, &target)?;

        let mut changes = Changes::default();
        let mut files = FileMap::new();
        for path in [CLUSTER_PATH, PROMOTION_PATH] {
            if let Some(id) = target.plane.files.get(path) {
                files.insert(path.to_owned(), *id);
            }
        }
        // The target's Stacks and templates come with the resources that name them as owner.
        for entry in target.stacks.values() {
            files.insert(entry.path.clone(), entry.blob);
        }
        for entry in target.templates.values() {
            files.insert(entry.path.clone(), entry.blob);
        }
        let mut pending = current.deletions.clone();
        let mut materialized = Vec::new();
        for (key, entry) in &target.resources {
            let uid = if let Some(now) = current.resources.get(key) {
                now.doc.metadata.uid.clone()
            } else if let Some(intent) = pending.remove(key) {
                changes.restored.push(key.clone());
                intent.intent.spec.subject.uid
            } else {
                changes.created.push(key.clone());
                mint_uid(&refs.cluster, key, request.to, Some(head))
            };
            let blob = if uid == entry.doc.metadata.uid {
                entry.blob
            } else {
                let mut doc = entry.doc.clone();
                doc.metadata.uid = uid;
                git::write_blob(&repo, &canonical_bytes(&doc)?)?
            };
            if current.resources.get(key).is_some_and(|e| e.blob != blob) {
                changes.updated.push(key.clone());
            }
            files.insert(entry.path.clone(), blob);
            // The target's payload comes along when it is the one of this very document (its
            // `against` still names the observation it was rendered from).
            if blob == entry.blob
                && let Some(m) = target.materialized.get(key)
                && entry.materialized.is_some()
            {
                files.insert(m.path.clone(), m.blob);
                materialized.push(key.to_string());
            }
        }
        let source_revision = target.source_revision.unwrap_or(request.to);
        for (key, entry) in &current.resources {
            if !target.resources.contains_key(key) {
                let (path, blob) =
                    deletion_intent(&repo, &current, key, entry, source_revision, None)?;
                files.insert(path, blob);
                changes.deleting.push(key.clone());
            }
        }
        for entry in pending.values() {
            files.insert(entry.path.clone(), entry.blob);
        }

        let provenance = Provenance {
            cluster: refs.cluster.clone(),
            reason: reason.clone(),
            from_desired_revision: hex(head),
            target_desired_revision: hex(request.to),
            target_observed_revision: observed.map(hex),
            resources: target.resources.keys().map(ToString::to_string).collect(),
            materialized: materialized.clone(),
        };
        if request.dry_run {
            return Ok(RollbackOutcome {
                provenance,
                changes,
                publication: None,
            });
        }
        let mut message = format!("Rollback {} to {}\n\n", refs.cluster, hex(request.to));
        message.push_str(&crate::desired::change_lines(&changes));
        message.push_str(&format!(
            "From-Desired-Revision: {}\nTarget-Desired-Revision: {}\nTarget-Observed-Revision: {}\nReason: {reason}\n",
            hex(head),
            hex(request.to),
            observed.map_or_else(|| "None".to_owned(), hex),
        ));
        if !materialized.is_empty() {
            message.push_str(&format!(
                "Materialized-Units: {}\n",
                materialized.join(", ")
            ));
        }
        if let Some(source) = target.source_revision {
            message.push_str(&format!("{SOURCE_TRAILER}: {}\n", hex(source)));
        }
        message.push_str(&format!("{VERSION_TRAILER}: {CONTROLLER_VERSION}\n"));
        let build = DesiredBuild {
            head: Some(head),
            previous: Some(std::sync::Arc::new(current)),
            files,
            changes: changes.clone(),
            waits: Default::default(),
            resolved: Default::default(),
        };
        let publication = self.publish_build(&mut repo, refs, build, &message)?;
        Ok(RollbackOutcome {
            provenance,
            changes,
            publication: Some(publication),
        })
    }

    /// The newest observed commit holding a receipt of exactly `target`'s document for every
    /// resource of `target` (`None` when `target` has no resource).
    fn clean_snapshot(
        &self,
        repo: &gix::Repository,
        refs: &PlaneRefs,
        target: &DesiredState,
    ) -> Result<Option<ObjectId>> {
        if target.resources.is_empty() {
            return Ok(None);
        }
        let mut wanted = Vec::new();
        for (key, entry) in &target.resources {
            wanted.push((docs::receipt_path(key)?, hex(entry.blob)));
        }
        let history = match self.current_head(repo, &refs.observed)? {
            Some(h) => git::history(repo, h)?,
            None => Vec::new(),
        };
        // Receipt blob -> the desired blob it pins; most receipts recur across commits.
        let mut pins: HashMap<ObjectId, String> = HashMap::new();
        for commit in history {
            let plane = Plane::read(repo, &refs.observed, commit)?;
            let mut all = true;
            for (path, blob) in &wanted {
                let Some(id) = plane.files.get(path) else {
                    all = false;
                    break;
                };
                let pinned = match pins.get(id) {
                    Some(p) => p.clone(),
                    None => {
                        let receipt: Receipt =
                            from_value(plane.parse(repo, path, *id)?, &refs.observed, path)?;
                        let p = receipt.spec.desired.blob;
                        pins.insert(*id, p.clone());
                        p
                    }
                };
                if pinned != *blob {
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(Some(commit));
            }
        }
        Err(StoreError::NeverClean {
            cluster: refs.cluster.clone(),
            revision: target.revision(),
        })
    }
}
