//! The engine's side of the git planes ([`proxops_store`]): a thin adapter that publishes a
//! cluster's desired plane before a cycle executes and, after it, receipts for what the cycle
//! reconciled and teardown evidence for what it deleted; and the read side of `get` and
//! `status`.
//!
//! A cycle with planes:
//!
//! 1. [`Planes::publish_desired`] publishes the loaded cluster (no commit when byte-identical)
//!    through the cluster's change gate and keeps the live desired commit it published or
//!    found, which the receipts pin. With gate `pullRequest` the change becomes a candidate
//!    branch ([`PublishedDesired::candidate`]) and the cycle goes on from the live head: only
//!    the live desired ref is ever reconciled.
//! 2. Plan and execute as usual ([`crate::cycle`], [`crate::execute()`]).
//! 3. [`Planes::publish_receipts`] publishes one batch ([`observation_batch`]):
//!    - a receipt for each desired resource whose actions all succeeded (`created` when one of
//!      them created or downloaded it, `updated` otherwise), with the actions' UPIDs;
//!    - a receipt (`inSync`) for each resource the plan had nothing to do for and that was not
//!      skipped or anomalous, unless its receipt is already current (nothing to write, as
//!      `planes-spec.md` section 3.4 says for a duplicate receipt);
//!    - a teardown record for each succeeded delete of a guest that a deletion intent of the
//!      desired plane names (kind, name and vmid must match: the intent's fence).
//!
//!    Resources with a failed, deferred or unstarted action get no receipt: they stay READY.
//!    Except a snapshot-guarded update that failed and was rolled back ([`crate::guard`]): its
//!    receipt (`rolledBack`) pins the document it tried, with the failure, the snapshot and
//!    the document the guest is back at (`guard`).
//!
//!    Receipts of ISO, CTTemplate and DiskImage carry a `DownloadedFile` artifact `file`: the
//!    volume id per node, as the plan placed it; [`enrich`] adds what PVE says (sizes, a
//!    guest's MAC addresses and, for a running guest that can tell them, its `ip-addresses`:
//!    [`addresses`]).
//!
//!    A current receipt of a running guest whose `ip-addresses` are missing or incomplete is
//!    published again, unchanged but for the artifact, in the first cycle the guest reports
//!    them ([`BuiltBatch::awaiting`]).

use crate::execute::{CycleReport, Outcome as ActionOutcome};
use crate::plan::{ClusterPlan, Verb};

pub mod addresses;
mod batch;
pub mod deleting;
pub(crate) mod facts;
mod list;
mod promotion_check;
mod refs;
pub use addresses::agent_enabled;
pub use batch::BuiltBatch;
pub use facts::enrich;
pub use list::*;
pub use promotion_check::unresolvable_promotions;
pub use refs::{PlannedRefs, has_references, plan_references};

use proxops_model::{Repository, ResourceKey};
use proxops_store::desired::{DesiredPublication, DesiredState};
use proxops_store::documents::{DesiredPin, GuardRecord, Outcome, Receipt, hex, utc_timestamp};
use proxops_store::observed::{DEFAULT_ATTEMPTS, Observation, ObservedState, Stored};
use proxops_store::{
    Candidate, DesiredOptions, ObjectId, PlaneRefs, Publication, Store, StoreError, TeardownRecord,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

/// One cluster's planes in one store.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Planes {
    /// The repository holding the planes.
    pub store: Store,
    /// The cluster's plane refs.
    pub refs: PlaneRefs,
    /// The kinds resolved reference values are decoded with.
    pub registry: Arc<proxops_model::Registry>,
    /// The drivers that render materialized payloads ([`crate::materialize`]).
    pub drivers: Arc<crate::desired::Drivers>,
}

/// What [`Planes::publish_desired`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PublishedDesired {
    /// The ref update and what changed.
    pub publication: DesiredPublication,
    /// The desired plane at the live head (published, unchanged, or left alone by a gated
    /// publication): what this cycle reconciles and its receipts pin. Shared: a converged
    /// cluster's head does not move, and its plane is the one read before publishing.
    pub state: Arc<DesiredState>,
}

/// Where a desired publication went.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Destination {
    /// Nothing to publish: the live head already holds the tree.
    Unchanged,
    /// A new commit on the live desired ref.
    Live,
    /// A candidate branch (gate `pullRequest`); the live ref did not move.
    Candidate(Candidate),
}

impl PublishedDesired {
    /// Where the publication went.
    pub fn destination(&self) -> Destination {
        match (
            &self.publication.candidate,
            self.publication.publication.published,
        ) {
            (Some(c), _) => Destination::Candidate(c.clone()),
            (None, true) => Destination::Live,
            (None, false) => Destination::Unchanged,
        }
    }

    /// The candidate ref, if the change was gated.
    pub fn candidate(&self) -> Option<&Candidate> {
        self.publication.candidate.as_ref()
    }
}

/// What [`Planes::publish_receipts`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PublishedReceipts {
    /// The observed ref update (`None` when there was nothing to record).
    pub publication: Option<Publication>,
    /// Receipts written.
    pub receipts: usize,
    /// Teardowns recorded.
    pub teardowns: usize,
    /// Resources left without a receipt this cycle, with why.
    pub withheld: Vec<(ResourceKey, String)>,
}

impl Planes {
    /// The default planes of `cluster` in `store`.
    pub fn for_cluster(store: Store, cluster: &str) -> Result<Planes, StoreError> {
        Ok(Planes {
            store,
            refs: PlaneRefs::for_cluster(cluster)?,
            registry: Arc::new(proxops_model::Registry::builtin()),
            drivers: Arc::new(crate::desired::Drivers::builtin()),
        })
    }

    /// The planes of `cluster` as its configuration in `repository` names them (branches and
    /// change gate, `pve.clusters.<cluster>.planes`).
    pub fn from_config(
        store: Store,
        repository: &Repository,
        cluster: &str,
    ) -> Result<Planes, StoreError> {
        let entry = repository.cluster(cluster).and_then(|c| c.entry.as_ref());
        Ok(Planes {
            store,
            refs: PlaneRefs::from_config(cluster, entry)?,
            registry: Arc::new(proxops_model::Registry::builtin()),
            drivers: Arc::new(crate::desired::Drivers::builtin()),
        })
    }

    /// Decodes resolved reference values with `registry` (an embedder's kinds).
    pub fn with_registry(mut self, registry: Arc<proxops_model::Registry>) -> Self {
        self.registry = registry;
        self
    }

    /// Renders materialized payloads with `drivers` (an embedder's kinds).
    pub fn with_drivers(mut self, drivers: Arc<crate::desired::Drivers>) -> Self {
        self.drivers = drivers;
        self
    }

    /// How this cluster's desired plane is published: its kinds, and payloads rendered by its
    /// drivers.
    pub fn desired_options(&self) -> DesiredOptions {
        let materializer = crate::materialize::Materializer::new(
            Arc::clone(&self.registry),
            Arc::clone(&self.drivers),
        );
        DesiredOptions::default()
            .with_registry(Arc::clone(&self.registry))
            .with_materializer(Arc::new(materializer))
    }

    /// Publishes the cluster as loaded from the source at `source_revision`.
    pub fn publish_desired(
        &self,
        repository: &Repository,
        source_revision: ObjectId,
    ) -> Result<PublishedDesired, StoreError> {
        self.publish_desired_over(repository, source_revision, None)
    }

    /// [`Planes::publish_desired`] where `prior` is the desired plane as read before: when the
    /// live head stays where `prior` was read (nothing changed, or the change went to a
    /// candidate), `prior` is the plane at the head and is not read and parsed a second time.
    pub fn publish_desired_over(
        &self,
        repository: &Repository,
        source_revision: ObjectId,
        prior: Option<&Arc<DesiredState>>,
    ) -> Result<PublishedDesired, StoreError> {
        let publication = self.store.publish_desired_over(
            &self.refs,
            repository,
            source_revision,
            &self.desired_options(),
            prior,
        )?;
        let head = publication.publication.head;
        let state = match prior
            .filter(|p| p.plane.commit.id == head && p.plane.refname == self.refs.desired)
        {
            Some(p) => Arc::clone(p),
            None => Arc::new(
                self.store
                    .read_desired(&self.refs, Some(head))?
                    .ok_or_else(|| StoreError::Invalid("the desired plane vanished".to_owned()))?,
            ),
        };
        Ok(PublishedDesired { publication, state })
    }

    /// Publishes what a cycle reconciled against `desired` (see the module docs). `report` is
    /// `None` when nothing was executed (an empty plan); `started` is when the cycle started.
    pub fn publish_receipts(
        &self,
        desired: &DesiredState,
        plan: &ClusterPlan,
        report: Option<&CycleReport>,
        started: SystemTime,
    ) -> Result<PublishedReceipts, StoreError> {
        let built = self.prepare_receipts(desired, plan, report, started)?;
        self.publish_batch(built)
    }

    /// The receipts and teardowns a cycle earns, against the observed plane as it is now.
    pub fn prepare_receipts(
        &self,
        desired: &DesiredState,
        plan: &ClusterPlan,
        report: Option<&CycleReport>,
        started: SystemTime,
    ) -> Result<BuiltBatch, StoreError> {
        let observed = self.store.read_observed(&self.refs, None)?;
        Ok(observation_batch(
            desired,
            observed.as_ref(),
            plan,
            report,
            started,
            SystemTime::now(),
        ))
    }

    /// Publishes a prepared batch (nothing when it is empty).
    pub fn publish_batch(&self, built: BuiltBatch) -> Result<PublishedReceipts, StoreError> {
        let receipts = built.batch.observations.len();
        let teardowns = built.batch.teardowns.len();
        let publication = if receipts + teardowns == 0 {
            None
        } else {
            Some(
                self.store
                    .publish_observations(&self.refs, &built.batch, DEFAULT_ATTEMPTS)?,
            )
        };
        Ok(PublishedReceipts {
            publication,
            receipts,
            teardowns,
            withheld: built.withheld,
        })
    }

    /// Records a cycle: prepares its receipts, adds what PVE says about the resources
    /// ([`enrich`]: file sizes, MAC addresses), and publishes them; the git work runs off the
    /// async threads.
    pub async fn record_cycle(
        &self,
        client: &proxops_pve::PveClient,
        desired: &Arc<DesiredState>,
        plan: &ClusterPlan,
        report: Option<&CycleReport>,
        started: SystemTime,
    ) -> Result<PublishedReceipts, StoreError> {
        let joined = |e: tokio::task::JoinError| StoreError::Invalid(format!("task failed: {e}"));
        // The plane is shared with the blocking task, not copied (1,000 documents a cycle).
        let (planes, desired2, plan2, report2) = (
            self.clone(),
            Arc::clone(desired),
            plan.clone(),
            report.cloned(),
        );
        let mut built = tokio::task::spawn_blocking(move || {
            planes.prepare_receipts(&desired2, &plan2, report2.as_ref(), started)
        })
        .await
        .map_err(joined)??;
        enrich(client, &mut built).await;
        let planes = self.clone();
        tokio::task::spawn_blocking(move || planes.publish_batch(built))
            .await
            .map_err(joined)?
    }
}

/// One action of a resource, as the cycle ended it.
struct Acted<'a> {
    verb: Verb,
    restart: bool,
    vmid: Option<u32>,
    outcome: &'a ActionOutcome,
    upids: &'a [String],
    /// What it did as a step of a snapshot-guarded update.
    guard: Option<&'a crate::guard::GuardReport>,
    /// An API token's create: its secret, encrypted.
    token: Option<&'a crate::objects::token::SealedToken>,
}

fn key_of(kind: &str, name: &str) -> ResourceKey {
    ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// The receipts and teardowns a cycle earns (see the module docs). Pure: no I/O.
pub fn observation_batch(
    desired: &DesiredState,
    observed: Option<&ObservedState>,
    plan: &ClusterPlan,
    report: Option<&CycleReport>,
    started: SystemTime,
    finished: SystemTime,
) -> BuiltBatch {
    let started_at = utc_timestamp(started);
    let finished_at = utc_timestamp(finished);
    let revision = desired.revision();
    // Per resource: every action's outcome and UPIDs, in plan order.
    let mut acted: BTreeMap<ResourceKey, Vec<Acted<'_>>> = BTreeMap::new();
    let not_run = ActionOutcome::NotStarted;
    for action in &plan.actions {
        let result = report.and_then(|r| r.results.iter().find(|x| x.id == action.id));
        let (outcome, upids, guard, token) = match result {
            Some(r) => (
                &r.outcome,
                r.upids.as_slice(),
                r.guard.as_ref(),
                r.token.as_ref(),
            ),
            None => (&not_run, &[][..], None, None),
        };
        acted
            .entry(key_of(&action.kind, &action.name))
            .or_default()
            .push(Acted {
                verb: action.verb,
                restart: action.restart,
                vmid: action.vmid,
                outcome,
                upids,
                guard,
                token,
            });
    }
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    for s in &plan.skipped {
        held.insert(s.subject.clone(), format!("skipped: {}", s.reason));
    }
    for a in &plan.anomalies {
        held.insert(a.subject.clone(), format!("anomaly: {}", a.message));
    }

    let mut built = BuiltBatch::default();
    for (key, entry) in &desired.resources {
        let actions = acted.get(key).map(Vec::as_slice).unwrap_or_default();
        if let Some(why) = held.get(&key.to_string()) {
            built.withheld.push((key.clone(), why.clone()));
            continue;
        }
        if let Some(failed) = actions
            .iter()
            .find(|a| *a.outcome != ActionOutcome::Succeeded)
        {
            // A guarded update rolled back: the receipt says what failed and that the guest
            // is back at its snapshot ([`rolled_back`]).
            if let Some(observation) =
                rolled_back(entry, revision, observed, key, actions, failed, &started_at)
            {
                built.batch.observations.push(observation);
                continue;
            }
            let why = match failed.outcome {
                ActionOutcome::Failed { error } => format!("failed: {error}"),
                ActionOutcome::Deferred {
                    reason: Some(reason),
                    ..
                } => format!("deferred: {reason}"),
                ActionOutcome::Deferred { .. } => "deferred".to_owned(),
                _ => "not run".to_owned(),
            };
            built.withheld.push((key.clone(), why));
            continue;
        }
        let addressable = matches!(key.kind.as_str(), "VM" | "LXC")
            && entry
                .doc
                .spec
                .get("vmid")
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok())
                .is_some_and(|v| plan.addressable.contains(&v));
        let outcome = if actions.is_empty() {
            let current = observed.and_then(|o| {
                o.receipts
                    .get(key)
                    .filter(|r| is_current(r, entry.blob, &entry.doc.metadata.uid))
                    .map(|r| (o, r))
            });
            if let Some((o, receipt)) = current {
                if addressable && let Some(again) = awaiting_addresses(o, key, receipt) {
                    built.awaiting.push(again);
                }
                continue;
            }
            Outcome::InSync
        } else if actions
            .iter()
            .any(|a| matches!(a.verb, Verb::Create | Verb::Download))
        {
            Outcome::Created
        } else {
            Outcome::Updated
        };
        let mut observation = Observation::of(entry, revision, outcome);
        observation.upids = actions
            .iter()
            .flat_map(|a| a.upids.iter().cloned())
            .collect();
        observation.started_at = started_at.clone();
        observation.finished_at = finished_at.clone();
        observation.artifacts = downloaded_file(&entry.doc.kind, &entry.doc.spec)
            .into_iter()
            .collect();
        observation.guard = guarded(actions);
        if let Some(secret) = token_secret(observed, key, actions) {
            observation.artifacts.push(secret);
        }
        // A placed guest's node, and why it is there (found, or picked with the facts).
        if let Some(p) = plan
            .placements
            .iter()
            .rev()
            .find(|p| p.subject == key.to_string())
        {
            observation.artifacts.push((
                proxops_model::kinds::reach::PLACEMENT.to_owned(),
                "Placement".to_owned(),
                serde_json::json!({ "node": p.node, "reason": p.reason }),
            ));
        }
        let power_changed = actions.iter().any(|a| {
            matches!(
                a.verb,
                Verb::Create | Verb::Start | Verb::Stop | Verb::MarkTemplate | Verb::Delete
            ) || a.restart
        });
        if addressable && !power_changed {
            built.addresses.insert(key.clone());
        }
        built.batch.observations.push(observation);
    }

    // Teardowns: succeeded deletes of guests a deletion intent names.
    let mut done = BTreeSet::new();
    for (key, entry) in &desired.deletions {
        let fence = entry
            .intent
            .spec
            .pve_identity
            .get("vmid")
            .and_then(Value::as_u64);
        let Some(deletes) = acted.get(key) else {
            continue;
        };
        for a in deletes {
            let matches = a.verb == Verb::Delete
                && *a.outcome == ActionOutcome::Succeeded
                && a.vmid.map(u64::from) == fence;
            if matches && done.insert(key.clone()) {
                built.batch.teardowns.push(TeardownRecord {
                    subject: entry.intent.spec.subject.clone(),
                    intent: DesiredPin {
                        blob: hex(entry.blob),
                        revision: hex(revision),
                    },
                    upids: a.upids.to_vec(),
                    finished_at: finished_at.clone(),
                });
            }
        }
    }
    built
}

/// An API token's encrypted secret: the one its create made this cycle, else the one its
/// earlier receipt carries (a receipt's artifacts replace the earlier ones, and PVE never shows
/// the secret again).
fn token_secret(
    observed: Option<&ObservedState>,
    key: &ResourceKey,
    actions: &[Acted<'_>],
) -> Option<(String, String, Value)> {
    use crate::objects::token::{ARTIFACT, ARTIFACT_KIND};
    if let Some(t) = actions.iter().rev().find_map(|a| a.token) {
        return Some((ARTIFACT.to_owned(), ARTIFACT_KIND.to_owned(), t.payload()));
    }
    if key.kind != "ApiToken" {
        return None;
    }
    let earlier = observed?
        .artifacts
        .get(&(key.clone(), ARTIFACT.to_owned()))?;
    Some((
        ARTIFACT.to_owned(),
        earlier.doc.kind.clone(),
        earlier.doc.spec.clone(),
    ))
}

/// What the steps of a successful guarded update did (`None` without one): the snapshot, the
/// check's finding, the snapshots pruned.
fn guarded(actions: &[Acted<'_>]) -> Option<GuardRecord> {
    let mut record: Option<GuardRecord> = None;
    for g in actions.iter().filter_map(|a| a.guard) {
        let r = record.get_or_insert_with(|| GuardRecord {
            snapshot: g.snapshot.clone(),
            ..GuardRecord::default()
        });
        if g.verified.is_some() {
            r.verified.clone_from(&g.verified);
        }
        r.pruned.extend(g.pruned.iter().cloned());
    }
    record
}

/// The receipt of a resource whose guarded update failed and was rolled back: outcome
/// `rolledBack`, pinning the document it tried, with the failure, the snapshot and the
/// document the guest is back at (what the receipt before it pinned). `None` when `failed`
/// was not rolled back (a failure without a rollback, or a rollback that failed too: no
/// receipt, as for any failure).
fn rolled_back(
    entry: &proxops_store::desired::DesiredEntry,
    revision: ObjectId,
    observed: Option<&ObservedState>,
    key: &ResourceKey,
    actions: &[Acted<'_>],
    failed: &Acted<'_>,
    started_at: &str,
) -> Option<Observation> {
    let guard = failed.guard.filter(|g| g.rolled_back)?;
    let ActionOutcome::Failed { error } = failed.outcome else {
        return None;
    };
    let restored =
        observed
            .and_then(|o| o.receipts.get(key))
            .and_then(|r| match r.doc.spec.result.outcome {
                Outcome::RolledBack => r
                    .doc
                    .spec
                    .result
                    .guard
                    .as_ref()
                    .and_then(|g| g.restored.clone()),
                _ => Some(r.doc.spec.desired.clone()),
            });
    let mut observation = Observation::of(entry, revision, Outcome::RolledBack);
    observation.upids = actions
        .iter()
        .flat_map(|a| a.upids.iter().cloned())
        .collect();
    observation.started_at = started_at.to_owned();
    observation.guard = Some(GuardRecord {
        snapshot: guard.snapshot.clone(),
        failure: Some(error.to_string()),
        rolled_back: true,
        restored,
        ..GuardRecord::default()
    });
    Some(observation)
}

/// The `DownloadedFile` artifact of an ISO, CTTemplate or DiskImage spec: its volume id on
/// each node (`None` for other kinds or a spec without storage and filename).
pub fn downloaded_file(kind: &str, spec: &Value) -> Option<(String, String, Value)> {
    if !matches!(kind, "ISO" | "CTTemplate" | "DiskImage") {
        return None;
    }
    let storage = spec.get("storage")?.as_str()?;
    let filename = spec.get("filename")?.as_str()?;
    let volid = format!("{storage}:{}/{filename}", crate::desired::content_of(kind));
    let mut nodes: Vec<&str> = spec
        .get("nodes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(node) = spec.get("node").and_then(Value::as_str) {
        nodes.push(node);
    }
    nodes.sort_unstable();
    nodes.dedup();
    let per_node: serde_json::Map<String, Value> = nodes
        .into_iter()
        .map(|n| (n.to_owned(), serde_json::json!({ "volid": volid })))
        .collect();
    let mut payload = serde_json::json!({ "volid": volid, "nodes": per_node });
    // The checksum PVE verified the download against, when the manifest gave one.
    if let Some(sum) = spec.get("checksum").filter(|c| c.is_object()) {
        payload["checksum"] = sum.clone();
    }
    Some((
        proxops_model::kinds::reach::FILE_ARTIFACT.to_owned(),
        "DownloadedFile".to_owned(),
        payload,
    ))
}

/// A current receipt rebuilt as it is (result and artifacts), when its `ip-addresses` artifact
/// is missing or not [`addresses::complete`]: the one to publish again with the guest's
/// addresses.
fn awaiting_addresses(
    observed: &ObservedState,
    key: &ResourceKey,
    receipt: &Stored<Receipt>,
) -> Option<Observation> {
    let artifact = |name: &str| observed.artifacts.get(&(key.clone(), name.to_owned()));
    if artifact(addresses::NAME).is_some_and(|a| addresses::complete(&a.doc.spec)) {
        return None;
    }
    let spec = &receipt.doc.spec;
    let mut artifacts = Vec::new();
    for (name, descriptor) in &spec.result.artifacts {
        // An artifact the receipt names but the plane lacks: leave the receipt alone.
        let stored = artifact(name)?;
        artifacts.push((
            name.clone(),
            descriptor.kind.clone(),
            stored.doc.spec.clone(),
        ));
    }
    Some(Observation {
        subject: spec.subject.clone(),
        desired: spec.desired.clone(),
        materialized: spec.materialized.clone(),
        outcome: spec.result.outcome,
        pve_identity: spec.result.pve_identity.clone(),
        upids: spec.result.upids.clone(),
        started_at: spec.result.started_at.clone(),
        finished_at: spec.result.finished_at.clone(),
        artifacts,
        guard: spec.result.guard.clone(),
    })
}

fn is_current(receipt: &Stored<Receipt>, blob: ObjectId, uid: &str) -> bool {
    receipt.doc.spec.desired.blob == hex(blob) && receipt.doc.spec.subject.uid == uid
}

// ---------------------------------------------------------------------------------------------
// Reading: `get` and `status`.

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn artifacts_get_a_downloaded_file_with_their_volid_per_node() {
        let spec =
            serde_json::json!({"nodes": ["pve2", "pve1"], "storage": "local", "filename": "d.iso"});
        let (name, kind, payload) = downloaded_file("ISO", &spec).unwrap();
        assert_eq!((name.as_str(), kind.as_str()), ("file", "DownloadedFile"));
        assert_eq!(
            payload,
            serde_json::json!({"volid": "local:iso/d.iso",
                "nodes": {"pve1": {"volid": "local:iso/d.iso"}, "pve2": {"volid": "local:iso/d.iso"}}})
        );
        assert!(downloaded_file("VM", &spec).is_none());
    }
}
