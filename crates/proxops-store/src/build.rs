//! Writing the resource documents of a desired tree: UIDs, and the resources whose reference
//! expressions are resolved in this build ([`crate::resolve`]), producers before consumers.

use crate::desired::plane::{Changes, DeletionEntry, DesiredState, mint_uid};
use crate::documents::{
    self as docs, API_VERSION, DesiredMetadata, ResolvedInputs, ResourceDoc, canonical_bytes,
};
use crate::error::{Result, StoreError};
use crate::git::{self, FileMap};
use crate::id::ObjectId;
use crate::resolve::{Candidate, Inputs, Resolution, resolve};
use proxops_model::{Resource, ResourceKey};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Resources waiting (with why) and resources resolved in one build.
pub(crate) type Resolved = (
    BTreeMap<ResourceKey, String>,
    BTreeMap<ResourceKey, Arc<Resource>>,
);

/// Writes resource documents of one build.
pub(crate) struct DocWriter<'a> {
    pub repo: &'a gix::Repository,
    pub cluster: &'a str,
    pub source_revision: ObjectId,
    pub head: Option<ObjectId>,
    pub previous: Option<&'a DesiredState>,
    /// The owner reference of each Stack of the build, by Stack name.
    pub owners: &'a BTreeMap<String, docs::OwnerReference>,
    /// The UID of each document written.
    pub uids: BTreeMap<ResourceKey, String>,
}

impl DocWriter<'_> {
    /// Writes `resource`'s document (keeping its UID, restoring a pending incarnation, or
    /// minting one) and returns its blob.
    pub fn write(
        &mut self,
        resource: &Resource,
        inputs: Option<ResolvedInputs>,
        pending: &mut BTreeMap<ResourceKey, DeletionEntry>,
        changes: &mut Changes,
    ) -> Result<ObjectId> {
        let key = resource.key();
        let prev_entry = self.previous.and_then(|p| p.resources.get(&key));
        let uid = if let Some(e) = prev_entry {
            e.doc.metadata.uid.clone()
        } else if let Some(intent) = pending.remove(&key) {
            // Back before its teardown: the same incarnation still exists in PVE.
            changes.restored.push(key.clone());
            intent.intent.spec.subject.uid
        } else {
            changes.created.push(key.clone());
            mint_uid(self.cluster, &key, self.source_revision, self.head)
        };
        let spec = serde_json::to_value(&resource.spec)
            .map_err(|e| StoreError::Invalid(format!("{key}: spec does not serialise: {e}")))?;
        let doc = ResourceDoc {
            api_version: API_VERSION.to_owned(),
            kind: key.kind.clone(),
            metadata: DesiredMetadata {
                name: key.name.clone(),
                uid,
                labels: resource.metadata.labels.clone(),
                annotations: resource.metadata.annotations.clone(),
                owner_references: resource
                    .stack_origin()
                    .and_then(|o| self.owners.get(&o.stack))
                    .cloned()
                    .into_iter()
                    .collect(),
            },
            spec,
            resolved_inputs: inputs,
        };
        let blob = git::write_blob(self.repo, &canonical_bytes(&doc)?)?;
        self.uids.insert(key.clone(), doc.metadata.uid);
        if prev_entry.is_some_and(|e| e.blob != blob) {
            changes.updated.push(key);
        }
        Ok(blob)
    }

    /// Resolves and writes the `unresolved` resources, producers first: a consumer whose
    /// producer is unresolved too is retried after it. A consumer that cannot resolve waits:
    /// its previous document stays (never a deletion intent), or it has none if it is new.
    pub fn resolve_all(
        &mut self,
        inputs: &Inputs<'_>,
        unresolved: Vec<&Arc<Resource>>,
        files: &mut FileMap,
        pending: &mut BTreeMap<ResourceKey, DeletionEntry>,
        changes: &mut Changes,
    ) -> Result<Resolved> {
        let mut waits = BTreeMap::new();
        let mut resolved = BTreeMap::new();
        let mut left: BTreeSet<ResourceKey> = unresolved.iter().map(|r| r.key()).collect();
        let mut queue = unresolved;
        // Each round settles at least one resource or stops: at most `queue.len()` rounds.
        while !queue.is_empty() {
            let mut deferred = Vec::new();
            let mut settled = 0usize;
            for resource in std::mem::take(&mut queue) {
                let key = resource.key();
                let candidate = |k: &ResourceKey| {
                    if left.contains(k) && *k != key {
                        return Candidate::Pending;
                    }
                    match docs::resource_path(k).ok().and_then(|p| files.get(&p)) {
                        Some(blob) => Candidate::Written(*blob),
                        None => Candidate::Absent,
                    }
                };
                match resolve(resource, inputs, &candidate)? {
                    Resolution::Defer => {
                        deferred.push(resource);
                        continue;
                    }
                    Resolution::Resolved(r, record) => {
                        let blob = self.write(&r, Some(record), pending, changes)?;
                        files.insert(docs::resource_path(&key)?, blob);
                        resolved.insert(key.clone(), Arc::new(*r));
                    }
                    Resolution::Wait(why) => self.hold(&key, why, files, &mut waits)?,
                }
                left.remove(&key);
                settled += 1;
            }
            if settled == 0 {
                // No progress: what is left reads producers that cannot settle first.
                for r in std::mem::take(&mut deferred) {
                    let key = r.key();
                    let why = "a producer it reads waits too".to_owned();
                    self.hold(&key, why, files, &mut waits)?;
                }
            }
            queue = deferred;
        }
        Ok((waits, resolved))
    }

    /// Keeps `key`'s previous document, if any, and records why it waits.
    fn hold(
        &self,
        key: &ResourceKey,
        why: String,
        files: &mut FileMap,
        waits: &mut BTreeMap<ResourceKey, String>,
    ) -> Result<()> {
        if let Some(prev) = self.previous.and_then(|p| p.resources.get(key)) {
            files.insert(docs::resource_path(key)?, prev.blob);
        }
        waits.insert(key.clone(), why);
        Ok(())
    }
}
