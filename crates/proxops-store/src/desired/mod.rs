//! The desired plane: publishing a cluster's resolved resources, minting UIDs, recording and
//! cleaning up deletion intents; reading it back.

use crate::build::DocWriter;
use crate::documents::{
    self as docs, API_VERSION, CLUSTER_PATH, ClusterConfigDoc, ClusterConfigSpec, DeletionIntent,
    DeletionSpec, DesiredPin, NameOnly, PROMOTION_PATH, Subject, WAITS_PATH, WaitsDoc,
    canonical_bytes, hex,
};
use crate::error::{Result, StoreError};
use crate::git::{self, FileMap};
use crate::id::ObjectId;
use crate::materialized::Materializer;
use crate::refs::PlaneRefs;
use crate::stacks;
use crate::store::{Plane, Store};
use proxops_model::{Registry, Repository, Resource, ResourceKey};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub mod plane;
pub use plane::*;

/// How to publish.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct DesiredOptions {
    /// Publish even if the composition is empty while the plane holds resources (which turns
    /// every one of them into a deletion intent). Off by default: an empty composition is more
    /// often a mistake than an intent.
    pub allow_empty: bool,
    /// The kinds, to decode resolved reference values with (`None`: the built-in kinds).
    pub registry: Option<Arc<Registry>>,
    /// Renders the payload of new and changed documents into `materialized/` (`None`: no
    /// payload is written, and the plane keeps none).
    pub materializer: Option<Arc<dyn Materializer>>,
}

impl std::fmt::Debug for DesiredOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesiredOptions")
            .field("allow_empty", &self.allow_empty)
            .field("registry", &self.registry.is_some())
            .field("materializer", &self.materializer.is_some())
            .finish()
    }
}

/// The built-in kinds, for options that name none.
static BUILTIN: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(Registry::builtin);

/// The evidence references resolve against.
struct Evidence {
    observed: Option<crate::observed::ObservedState>,
    carried: Option<DesiredState>,
}

impl DesiredOptions {
    /// Sets [`DesiredOptions::allow_empty`].
    pub fn with_allow_empty(mut self, allow_empty: bool) -> Self {
        self.allow_empty = allow_empty;
        self
    }

    /// Sets [`DesiredOptions::registry`].
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Sets [`DesiredOptions::materializer`].
    pub fn with_materializer(mut self, materializer: Arc<dyn Materializer>) -> Self {
        self.materializer = Some(materializer);
        self
    }
}

/// The outcome of [`Store::publish_desired`].
#[derive(Debug, Clone)]
pub struct DesiredPublication {
    /// The live desired ref: moved when published directly, untouched when gated.
    pub publication: Publication,
    /// What changed.
    pub changes: Changes,
    /// With change gate `pullRequest`, the candidate proposing the change.
    pub candidate: Option<crate::gate::Candidate>,
    /// Resources whose references did not resolve, with why: each kept its previous document
    /// or, new, has none.
    pub waits: BTreeMap<ResourceKey, String>,
    /// Resources whose references resolved, holding the values.
    pub resolved: BTreeMap<ResourceKey, Arc<Resource>>,
}

/// A desired tree built from a cluster's composition, not yet published.
#[derive(Debug, Clone)]
pub struct DesiredBuild {
    /// The live desired head it was built on.
    pub head: Option<ObjectId>,
    /// The plane at that head.
    pub previous: Option<Arc<DesiredState>>,
    /// The new plane's files.
    pub files: FileMap,
    /// What differs from the head.
    pub changes: Changes,
    /// Resources whose references did not resolve, with why.
    pub waits: BTreeMap<ResourceKey, String>,
    /// Resources whose references resolved, holding the values.
    pub resolved: BTreeMap<ResourceKey, Arc<Resource>>,
}

/// The key a Stack's or StackTemplate's UID is minted from: the plane directory stands for
/// the kind, so that a Stack never shares a UID with a resource of the same name.
fn stack_key(dir: &str, name: &str) -> ResourceKey {
    ResourceKey {
        kind: dir.to_owned(),
        name: name.to_owned(),
    }
}

/// The allow-listed, non-secret configuration of `cluster`.
pub fn cluster_config(repo: &Repository, cluster: &str) -> Result<ClusterConfigDoc> {
    let c = repo
        .cluster(cluster)
        .ok_or_else(|| StoreError::Invalid(format!("no cluster `{cluster}` was loaded")))?;
    let mut spec = ClusterConfigSpec::default();
    if let Some(entry) = &c.entry {
        spec.base_url = Some(entry.base_url.clone());
        spec.nodes = entry.nodes.clone();
        spec.fingerprint = entry.fingerprint.clone();
        spec.ca_file = entry.ca_file.clone();
        spec.insecure = entry.insecure;
    }
    // The cluster's own config wins over the repository-wide one.
    for config in [c.config.as_ref(), repo.config.as_ref()]
        .into_iter()
        .flatten()
    {
        if spec.auth.is_none() {
            spec.auth = config
                .pve
                .as_ref()
                .and_then(|p| p.auth)
                .map(|a| format!("{a:?}").to_lowercase());
        }
        if let Some(r) = &config.reconcile {
            // The document quotes the configuration's text.
            let text = |d: &Option<proxops_model::config::ConfigDuration>| {
                d.as_ref().map(|d| d.text().to_owned())
            };
            spec.poll_interval = spec.poll_interval.take().or(text(&r.poll_interval));
            spec.task_timeout = spec.task_timeout.take().or(text(&r.task_timeout));
            spec.prune_budget = spec.prune_budget.or(r.prune_budget);
        }
    }
    Ok(ClusterConfigDoc {
        api_version: API_VERSION.to_owned(),
        kind: "ClusterConfig".to_owned(),
        metadata: NameOnly {
            name: cluster.to_owned(),
        },
        spec,
    })
}

/// Names for a commit message: at most 20, then a count.
pub(crate) fn list(keys: &[ResourceKey]) -> String {
    let mut names: Vec<String> = keys.iter().take(20).map(ToString::to_string).collect();
    if keys.len() > 20 {
        names.push(format!("and {} more", keys.len() - 20));
    }
    names.join(", ")
}

impl Store {
    /// The desired plane of `refs` at its head (`at: None`) or at a commit.
    pub fn read_desired(
        &self,
        refs: &PlaneRefs,
        at: Option<ObjectId>,
    ) -> Result<Option<DesiredState>> {
        let repo = self.repo();
        let commit = match at {
            Some(id) => id,
            None => match self.current_head(&repo, &refs.desired)? {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        DesiredState::read(&repo, &refs.desired, commit).map(Some)
    }

    /// Publishes the resources of `cluster` as loaded from the source at `source_revision`,
    /// through the cluster's change gate ([`crate::gate`]).
    ///
    /// The desired head is read once and is the compare-and-swap's expected value: if another
    /// publication moved it meanwhile, this one fails with [`StoreError::Conflict`] and writes
    /// no ref (re-run to publish on top of it). Nothing is committed when the new tree is
    /// byte-identical to the head's. A cluster with errors is refused: its resource list is
    /// incomplete, and publishing it would turn the missing ones into deletion intents.
    pub fn publish_desired(
        &self,
        refs: &PlaneRefs,
        repository: &Repository,
        source_revision: ObjectId,
        options: &DesiredOptions,
    ) -> Result<DesiredPublication> {
        self.publish_desired_over(refs, repository, source_revision, options, None)
    }

    /// [`Store::publish_desired`] given the desired plane as the caller read it before
    /// (`known`): when the head is still the one `known` was read at, its 1,000s of documents
    /// are not read and parsed again.
    pub fn publish_desired_over(
        &self,
        refs: &PlaneRefs,
        repository: &Repository,
        source_revision: ObjectId,
        options: &DesiredOptions,
        known: Option<&Arc<DesiredState>>,
    ) -> Result<DesiredPublication> {
        let mut repo = crate::pack::batch(&self.repo());
        let build = self.build_desired_in(
            &repo,
            refs,
            repository,
            source_revision,
            options,
            known,
            None,
        )?;
        let message = apply_message(&refs.cluster, source_revision, &build.changes);
        self.publish_build(&mut repo, refs, build, &message)
    }

    /// Publishes a built tree through the gate of `refs` with `message`.
    pub(crate) fn publish_build(
        &self,
        repo: &mut gix::Repository,
        refs: &PlaneRefs,
        build: DesiredBuild,
        message: &str,
    ) -> Result<DesiredPublication> {
        let tree = git::write_tree(repo, &build.files)?;
        let head_tree = build.previous.as_ref().map(|p| p.plane.commit.tree);
        let (publication, candidate) =
            crate::gate::publish(self, repo, refs, build.head, head_tree, tree, message)?;
        let changes = if publication.published || candidate.is_some() {
            build.changes
        } else {
            Changes::default()
        };
        Ok(DesiredPublication {
            publication,
            changes,
            candidate,
            waits: build.waits,
            resolved: build.resolved,
        })
    }

    /// What [`Store::publish_desired_over`] would publish: the desired tree of `cluster` as
    /// loaded from the source at `source_revision`, built on the live desired head and taking
    /// the plane at that head from `known` when it was read at that head. Writes nothing: the
    /// new blobs stay in memory and are dropped with the handle.
    pub fn build_desired_over(
        &self,
        refs: &PlaneRefs,
        repository: &Repository,
        source_revision: ObjectId,
        options: &DesiredOptions,
        known: Option<&Arc<DesiredState>>,
    ) -> Result<DesiredBuild> {
        let repo = crate::pack::batch(&self.repo());
        self.build_desired_in(
            &repo,
            refs,
            repository,
            source_revision,
            options,
            known,
            None,
        )
    }

    /// Builds the desired tree in `repo` (writing blobs there, moving nothing), taking the plane
    /// at the head from `known` when it was read at that head (a plane is a function of its
    /// commit).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_desired_in(
        &self,
        repo: &gix::Repository,
        refs: &PlaneRefs,
        repository: &Repository,
        source_revision: ObjectId,
        options: &DesiredOptions,
        known: Option<&Arc<DesiredState>>,
        promotion: Option<&DesiredState>,
    ) -> Result<DesiredBuild> {
        let cluster = repository.cluster(&refs.cluster).ok_or_else(|| {
            StoreError::Invalid(format!("no cluster `{}` was loaded", refs.cluster))
        })?;
        if !cluster.valid {
            return Err(StoreError::Invalid(format!(
                "cluster `{}` has errors; its desired state is not published",
                refs.cluster
            )));
        }
        let head = self.current_head(repo, &refs.desired)?;
        let previous = match head {
            Some(h) => Some(
                match known.filter(|k| k.plane.commit.id == h && k.plane.refname == refs.desired) {
                    Some(k) => Arc::clone(k),
                    None => Arc::new(DesiredState::read(repo, &refs.desired, h)?),
                },
            ),
            None => None,
        };
        if cluster.resources.is_empty()
            && !options.allow_empty
            && previous.as_ref().is_some_and(|p| !p.resources.is_empty())
        {
            return Err(StoreError::Invalid(format!(
                "the composition of `{}` is empty: publishing it would delete every resource \
                 (allow it explicitly)",
                refs.cluster
            )));
        }
        let torn_down = self.observed_teardowns(repo, refs)?;
        let mut changes = Changes::default();
        let mut files = FileMap::new();
        let config = canonical_bytes(&cluster_config(repository, &refs.cluster)?)?;
        files.insert(CLUSTER_PATH.to_owned(), git::write_blob(repo, &config)?);
        // A promotion record stays until the next promotion replaces it.
        if let Some(prev) = &previous
            && let Some(id) = prev.plane.files.get(PROMOTION_PATH)
        {
            files.insert(PROMOTION_PATH.to_owned(), *id);
        }

        // Pending intents, minus those whose teardown was observed. A deletion asked for with
        // `proxops delete` stays while its manifest is still composed, torn down or not: it
        // keeps the manifest from being published (and the guest created) again.
        let composed: BTreeSet<ResourceKey> = cluster.resources.iter().map(|r| r.key()).collect();
        let mut pending: BTreeMap<ResourceKey, DeletionEntry> = BTreeMap::new();
        if let Some(prev) = &previous {
            for (key, entry) in &prev.deletions {
                let subject = &entry.intent.spec.subject;
                let held = entry.intent.spec.requested.is_some() && composed.contains(key);
                if !held && torn_down.contains(&(key.clone(), subject.uid.clone())) {
                    changes.finalized.push(key.clone());
                } else {
                    pending.insert(key.clone(), entry.clone());
                }
            }
        }

        // Stacks and their templates keep their UIDs; their projected resources name the
        // Stack's UID as owner.
        let mut owners: BTreeMap<String, docs::OwnerReference> = BTreeMap::new();
        let mut written_templates = BTreeSet::new();
        for instance in &cluster.stacks {
            let template = &instance.template;
            let template_uid = previous
                .as_ref()
                .and_then(|p| p.templates.get(template.name()))
                .map(|t| t.doc.metadata.uid.clone())
                .unwrap_or_else(|| {
                    let key = stack_key(stacks::TEMPLATES_DIR, template.name());
                    mint_uid(&refs.cluster, &key, source_revision, head)
                });
            let template_doc = stacks::template_doc(template, template_uid)?;
            if written_templates.insert(template.name().to_owned()) {
                let blob = git::write_blob(repo, &canonical_bytes(&template_doc)?)?;
                files.insert(stacks::template_path(template.name())?, blob);
            }
            let name = instance.stack.name();
            let uid = previous
                .as_ref()
                .and_then(|p| p.stacks.get(name))
                .map(|s| s.doc.metadata.uid.clone())
                .unwrap_or_else(|| {
                    mint_uid(
                        &refs.cluster,
                        &stack_key(stacks::STACKS_DIR, name),
                        source_revision,
                        head,
                    )
                });
            let doc = stacks::stack_doc(instance, uid, &template_doc);
            owners.insert(name.to_owned(), stacks::owner_reference(&doc));
            let blob = git::write_blob(repo, &canonical_bytes(&doc)?)?;
            files.insert(stacks::stack_path(name)?, blob);
        }

        let mut present = BTreeSet::new();
        let mut unresolved: Vec<&Arc<Resource>> = Vec::new();
        let mut writer = DocWriter {
            repo,
            cluster: &refs.cluster,
            source_revision,
            head,
            previous: previous.as_deref(),
            owners: &owners,
            uids: BTreeMap::new(),
        };
        for resource in &cluster.resources {
            present.insert(resource.key());
            if pending
                .get(&resource.key())
                .is_some_and(|e| e.intent.spec.requested.is_some())
            {
                continue;
            }
            if resource.unresolved() {
                unresolved.push(resource);
                continue;
            }
            let blob = writer.write(resource, None, &mut pending, &mut changes)?;
            files.insert(docs::resource_path(&resource.key())?, blob);
        }
        let (waits, resolved) = if unresolved.is_empty() {
            (BTreeMap::new(), BTreeMap::new())
        } else {
            let evidence = self.evidence(repo, refs, previous.as_deref(), promotion)?;
            let inputs = crate::resolve::Inputs {
                observed: evidence.observed.as_ref(),
                promotion: promotion.or(evidence.carried.as_ref()),
                registry: options.registry.as_deref().unwrap_or(&BUILTIN),
            };
            writer.resolve_all(&inputs, unresolved, &mut files, &mut pending, &mut changes)?
        };
        if !waits.is_empty() {
            let doc = WaitsDoc {
                api_version: API_VERSION.to_owned(),
                kind: "Waits".to_owned(),
                spec: waits
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            };
            files.insert(
                WAITS_PATH.to_owned(),
                git::write_blob(repo, &canonical_bytes(&doc)?)?,
            );
        }

        self.write_materialized(
            repo,
            refs,
            cluster,
            (&writer.uids, &resolved),
            previous.as_deref(),
            options,
            &mut files,
        )?;

        if let Some(prev) = &previous {
            for (key, entry) in &prev.resources {
                if present.contains(key) {
                    continue;
                }
                let (path, blob) = deletion_intent(repo, prev, key, entry, source_revision, None)?;
                files.insert(path, blob);
                changes.deleting.push(key.clone());
            }
        }
        for entry in pending.values() {
            files.insert(entry.path.clone(), entry.blob);
        }
        Ok(DesiredBuild {
            head,
            previous,
            files,
            changes,
            waits,
            resolved,
        })
    }

    /// The evidence references resolve against: the observed plane at its head and, when the
    /// plane carries a promotion record and no promotion is being built, the source's desired
    /// plane at the pinned revision.
    fn evidence(
        &self,
        repo: &gix::Repository,
        refs: &PlaneRefs,
        previous: Option<&DesiredState>,
        promotion: Option<&DesiredState>,
    ) -> Result<Evidence> {
        let observed = match self.current_head(repo, &refs.observed)? {
            Some(h) => Some(crate::observed::ObservedState::read(
                repo,
                &refs.observed,
                h,
            )?),
            None => None,
        };
        let carried = match (promotion, previous.and_then(|p| p.promotion.as_ref())) {
            (None, Some(record)) => {
                let source = &record.spec.source;
                let revision = docs::parse_id(&source.desired_revision).ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "the promotion record names no desired revision of `{}`",
                        source.cluster
                    ))
                })?;
                Some(DesiredState::read(repo, &source.desired_ref, revision)?)
            }
            _ => None,
        };
        Ok(Evidence { observed, carried })
    }

    /// (kind, name, uid) of every teardown recorded at the observed head.
    /// The materialized payloads of a build ([`crate::materialized::write`]).
    #[allow(clippy::too_many_arguments)]
    fn write_materialized(
        &self,
        repo: &gix::Repository,
        refs: &PlaneRefs,
        cluster: &proxops_model::Cluster,
        (uids, resolved): (
            &BTreeMap<ResourceKey, String>,
            &BTreeMap<ResourceKey, Arc<Resource>>,
        ),
        previous: Option<&DesiredState>,
        options: &DesiredOptions,
        files: &mut FileMap,
    ) -> Result<()> {
        let mut resources = Vec::with_capacity(cluster.resources.len());
        let mut written = Vec::new();
        for resource in &cluster.resources {
            let key = resource.key();
            let resolved_now = resolved.get(&key);
            resources.push(Arc::clone(resolved_now.unwrap_or(resource)));
            let Some(document) = files.get(&docs::resource_path(&key)?).copied() else {
                continue;
            };
            let uid = uids.get(&key).or_else(|| {
                previous
                    .and_then(|p| p.resources.get(&key))
                    .map(|e| &e.doc.metadata.uid)
            });
            let Some(uid) = uid else { continue };
            let render = !resource.unresolved() || resolved_now.is_some();
            written.push(crate::materialized::Written {
                key,
                uid,
                document,
                render,
            });
        }
        let observed = || match self.current_head(repo, &refs.observed)? {
            Some(head) => {
                crate::observed::ObservedState::read(repo, &refs.observed, head).map(Some)
            }
            None => Ok(None),
        };
        crate::materialized::write(
            repo,
            observed,
            (&refs.cluster, &resources),
            &written,
            previous,
            options.materializer.as_deref(),
            files,
        )
    }

    fn observed_teardowns(
        &self,
        repo: &gix::Repository,
        refs: &PlaneRefs,
    ) -> Result<BTreeSet<(ResourceKey, String)>> {
        let Some(head) = self.current_head(repo, &refs.observed)? else {
            return Ok(BTreeSet::new());
        };
        let plane = Plane::read(repo, &refs.observed, head)?;
        Ok(plane
            .under(docs::TEARDOWNS_DIR)
            .filter_map(|(path, _)| {
                let rest = path.strip_prefix("teardowns/")?;
                let mut parts = rest.split('/');
                let (kind, name, file) = (parts.next()?, parts.next()?, parts.next()?);
                let uid = file.strip_suffix(".yaml")?;
                Some((
                    ResourceKey {
                        kind: kind.to_owned(),
                        name: name.to_owned(),
                    },
                    uid.to_owned(),
                ))
            })
            .collect())
    }
}

/// The deletion intent of `key`, whose last desired document was `entry` in `prev`, written as
/// a blob: (path, blob id).
pub(crate) fn deletion_intent(
    repo: &gix::Repository,
    prev: &DesiredState,
    key: &ResourceKey,
    entry: &DesiredEntry,
    source_revision: ObjectId,
    requested: Option<docs::DeletionRequest>,
) -> Result<(String, ObjectId)> {
    let intent = DeletionIntent {
        api_version: API_VERSION.to_owned(),
        kind: "DeletionIntent".to_owned(),
        metadata: NameOnly {
            name: key.name.clone(),
        },
        spec: DeletionSpec {
            subject: Subject {
                kind: key.kind.clone(),
                name: key.name.clone(),
                uid: entry.doc.metadata.uid.clone(),
            },
            pve_identity: docs::pve_identity(&entry.doc.spec),
            last_desired: DesiredPin {
                blob: hex(entry.blob),
                revision: hex(prev.revision()),
            },
            source_revision: hex(source_revision),
            requested,
        },
    };
    let blob = git::write_blob(repo, &canonical_bytes(&intent)?)?;
    Ok((docs::deletion_path(key)?, blob))
}

/// The message of a desired commit published from the source at `source_revision`.
pub(crate) fn apply_message(cluster: &str, source_revision: ObjectId, changes: &Changes) -> String {
    let short = &hex(source_revision)[..12];
    let mut message = format!("Publish desired state of {cluster} from {short}\n\n");
    message.push_str(&change_lines(changes));
    message.push_str(&format!(
        "{SOURCE_TRAILER}: {}\n{VERSION_TRAILER}: {}\n",
        hex(source_revision),
        docs::CONTROLLER_VERSION
    ));
    message
}

/// One `Label: names` line per kind of change, then a blank line (nothing if none).
pub(crate) fn change_lines(changes: &Changes) -> String {
    let mut out = String::new();
    for (label, keys) in [
        ("Created", &changes.created),
        ("Updated", &changes.updated),
        ("Deleting", &changes.deleting),
        ("Restored", &changes.restored),
        ("Finalized", &changes.finalized),
    ] {
        if !keys.is_empty() {
            out.push_str(&format!("{label}: {}\n", list(keys)));
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}
