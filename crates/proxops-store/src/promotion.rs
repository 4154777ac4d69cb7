//! Promotion: a target cluster's desired state built from its own composition, pinned to a
//! source cluster's desired and observed revisions that are known to be reconciled.
//!
//! [`Store::promote`] (from `A` to `B`):
//!
//! 1. `B`'s `promotion.allowed-sources` (its config at the specification revision) must list
//!    `A`.
//! 2. It pins `A`'s desired head, `A`'s observed head (`null` if none) and the specification
//!    revision.
//! 3. Evidence: every resource of `A`'s desired plane at the pinned revision must be CLEAN
//!    against the pinned observed plane (a receipt of exactly its live desired document); any
//!    READY, WAIT or DELETING resource refuses the promotion and is named with its state. The
//!    policy is this one rule and lives here, in code: there is no per-cluster setting, so the
//!    question which cluster's setting governs (planes-spec section 10.3) does not arise.
//! 4. `B`'s desired tree is built exactly as `apply` builds it, from `B`'s own composition at
//!    the specification revision (nothing is copied from `A`), plus the [`PromotionDoc`] at
//!    `promotion.yaml`, and published through `B`'s change gate. A tree equal to `B`'s head
//!    is not committed: `B` already contains this promotion.

use crate::desired::{Changes, DesiredOptions, DesiredPublication, DesiredState, SOURCE_TRAILER};
use crate::documents::{
    API_VERSION, CONTROLLER_VERSION, NameOnly, PROMOTION_PATH, PromotionDoc,
    PromotionEvidenceRecord, PromotionSource, PromotionSpec, canonical_bytes, hex,
};
use crate::error::{Result, StoreError};
use crate::git;
use crate::id::ObjectId;
use crate::observed::ObservedState;
use crate::refs::PlaneRefs;
use crate::state::{ClusterView, ResourceState, derive};
use crate::store::Store;
use proxops_model::Repository;
use proxops_model::config::PromotionEvidence;
use std::collections::BTreeMap;

/// What to promote.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PromotionRequest<'a> {
    /// The source cluster.
    pub from: &'a str,
    /// The target cluster.
    pub to: &'a str,
    /// The repository loaded at the specification revision (both clusters' configuration and
    /// the target's composition).
    pub repository: &'a Repository,
    /// The specification commit `repository` was loaded from.
    pub specification_revision: ObjectId,
    /// Check and build, publish nothing.
    pub dry_run: bool,
    /// How the target's desired plane is built (its kinds, its materializer).
    pub options: DesiredOptions,
}

impl<'a> PromotionRequest<'a> {
    /// Promotes `from` to `to` with `repository` as loaded at `specification_revision`; not a
    /// dry run.
    pub fn new(
        from: &'a str,
        to: &'a str,
        repository: &'a Repository,
        specification_revision: ObjectId,
    ) -> Self {
        PromotionRequest {
            from,
            to,
            repository,
            specification_revision,
            dry_run: false,
            options: DesiredOptions::default(),
        }
    }

    /// Sets [`PromotionRequest::options`].
    pub fn with_options(mut self, options: DesiredOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets [`PromotionRequest::dry_run`].
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// What [`Store::promote`] did (or, dry, would do).
#[derive(Debug, Clone)]
pub struct PromotionOutcome {
    /// The source cluster's planes.
    pub source: PlaneRefs,
    /// The target cluster's planes.
    pub target: PlaneRefs,
    /// The record written at `promotion.yaml`.
    pub record: PromotionDoc,
    /// Whether the target's desired head already holds exactly this tree (nothing to do).
    pub already: bool,
    /// What differs from the target's desired head.
    pub changes: Changes,
    /// The publication (`None` when dry or already promoted).
    pub publication: Option<DesiredPublication>,
}

/// The rows of `view` that are not CLEAN, as `Kind/name (STATE: reason)`.
pub fn unclean(view: &ClusterView) -> Vec<String> {
    view.resources
        .iter()
        .filter(|r| r.state != ResourceState::Clean)
        .map(|r| {
            let state = serde_json::to_value(r.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{} ({state}: {})", r.key, r.reason)
        })
        .collect()
}

impl Store {
    /// Promotes `request.from` into `request.to` (see the module docs).
    pub fn promote(&self, request: &PromotionRequest<'_>) -> Result<PromotionOutcome> {
        let repository = request.repository;
        let cluster = |name: &str| {
            repository
                .cluster(name)
                .ok_or_else(|| StoreError::Invalid(format!("no cluster `{name}` was loaded")))
        };
        let (from, to) = (cluster(request.from)?, cluster(request.to)?);
        if from.name == to.name {
            return Err(StoreError::Invalid(
                "a cluster cannot be promoted into itself".to_owned(),
            ));
        }
        let allowed = to
            .entry
            .as_ref()
            .and_then(|e| e.promotion.as_ref())
            .map(|p| p.allowed_sources.clone())
            .unwrap_or_default();
        if !allowed.contains(&from.name) {
            return Err(StoreError::PromotionNotAllowed {
                from: from.name.clone(),
                to: to.name.clone(),
                allowed: if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                },
            });
        }
        let source = PlaneRefs::from_config(&from.name, from.entry.as_ref())?;
        let target = PlaneRefs::from_config(&to.name, to.entry.as_ref())?;

        let mut repo = crate::pack::batch(&self.repo());
        let desired_head = self.current_head(&repo, &source.desired)?.ok_or_else(|| {
            StoreError::Invalid(format!(
                "promotion source `{}` has no desired plane ({})",
                from.name, source.desired
            ))
        })?;
        let observed_head = self.current_head(&repo, &source.observed)?;
        let desired = DesiredState::read(&repo, &source.desired, desired_head)?;
        let observed = match observed_head {
            Some(h) => Some(ObservedState::read(&repo, &source.observed, h)?),
            None => None,
        };
        let view = derive(&from.name, Some(&desired), observed.as_ref());
        let policy = to
            .entry
            .as_ref()
            .and_then(|e| e.promotion.as_ref())
            .and_then(|p| p.minimum_evidence)
            .unwrap_or_default();
        // With `materialized` evidence a resource not reconciled yet passes on the payload of
        // its current document, when that payload rendered.
        let mut on_payload = BTreeMap::new();
        if policy == PromotionEvidence::Materialized {
            for row in view
                .resources
                .iter()
                .filter(|r| r.state == ResourceState::Ready)
            {
                let payload = desired.resources.get(&row.key).and_then(|e| {
                    let pin = e.materialized.as_ref()?;
                    let ok = desired
                        .materialized
                        .get(&row.key)
                        .is_some_and(|m| m.doc.spec.error.is_none());
                    ok.then(|| pin.clone())
                });
                if let Some(pin) = payload {
                    on_payload.insert(row.key.to_string(), pin);
                }
            }
        }
        let mut offenders: Vec<String> = unclean(&view)
            .into_iter()
            .filter(|o| !on_payload.keys().any(|k| o.starts_with(&format!("{k} ("))))
            .collect();
        if desired.resources.is_empty() {
            offenders.push("its desired plane holds no resource".to_owned());
        }
        if !offenders.is_empty() {
            return Err(StoreError::NotReconciled {
                cluster: from.name.clone(),
                offenders,
            });
        }

        let record = PromotionDoc {
            api_version: API_VERSION.to_owned(),
            kind: "Promotion".to_owned(),
            metadata: NameOnly {
                name: from.name.clone(),
            },
            spec: PromotionSpec {
                source: PromotionSource {
                    cluster: from.name.clone(),
                    desired_ref: source.desired_branch().to_owned(),
                    desired_revision: hex(desired_head),
                    observed_ref: source.observed_branch().to_owned(),
                    observed_revision: observed_head.map(hex),
                },
                specification_revision: hex(request.specification_revision),
                evidence: (policy == PromotionEvidence::Materialized).then(|| {
                    PromotionEvidenceRecord {
                        minimum: "materialized".to_owned(),
                        materialized: on_payload.clone(),
                    }
                }),
            },
        };
        let mut build = self.build_desired_in(
            &repo,
            &target,
            repository,
            request.specification_revision,
            &request.options,
            None,
            Some(&desired),
        )?;
        build.files.insert(
            PROMOTION_PATH.to_owned(),
            git::write_blob(&repo, &canonical_bytes(&record)?)?,
        );
        let tree = git::write_tree(&repo, &build.files)?;
        let already = build
            .previous
            .as_ref()
            .is_some_and(|p| p.plane.commit.tree == tree);
        let changes = build.changes.clone();
        let mut outcome = PromotionOutcome {
            source,
            target,
            record,
            already,
            changes,
            publication: None,
        };
        if already || request.dry_run {
            return Ok(outcome);
        }
        let mut message = format!(
            "Promote {} to {} from {}\n\n",
            from.name,
            to.name,
            hex(desired_head)
        );
        message.push_str(&crate::desired::change_lines(&build.changes));
        message.push_str(&format!(
            "Promoted-From-Desired: {}\nPromoted-From-Observed: {}\n{SOURCE_TRAILER}: {}\n{}: {CONTROLLER_VERSION}\n",
            hex(desired_head),
            observed_head.map_or_else(|| "none".to_owned(), hex),
            hex(request.specification_revision),
            crate::desired::VERSION_TRAILER,
        ));
        outcome.publication =
            Some(self.publish_build(&mut repo, &outcome.target, build, &message)?);
        Ok(outcome)
    }
}
