//! Resolving reference expressions ([`proxops_model::expr`]) while a desired tree is built,
//! against the observed plane and, for `fromPromotion`, the promotion source.
//!
//! A producer's receipt counts only if it is *current against the candidate*: it pins the blob
//! of the producer's document as this very publication writes it. So a producer changed in the
//! same publication makes its consumers wait until its new receipt exists (`converge` closes
//! that loop), and a consumer never reads what an older incarnation of the producer became.
//!
//! Unavailable inputs (no receipt, a stale one, an artifact or pointer not there yet, a value
//! the field refuses) make the consumer WAIT: it keeps its previous desired document, or is
//! left out if it is new, and `waits.yaml` says why. `fromPromotion` without a promotion, or
//! naming what the pinned source lacks, is an error for the whole publication: waiting would
//! never help.

use crate::desired::plane::DesiredState;
use crate::documents::{ArtifactInput, ResolvedInputs, hex};
use crate::error::{Result, StoreError};
use crate::id::ObjectId;
use crate::observed::ObservedState;
use proxops_model::expr::{Expr, Pointer};
use proxops_model::{Registry, Resource, ResourceKey};
use serde_json::Value;

/// Where a producer stands in the tree being built.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Candidate {
    /// Its document in this build: blob and UID.
    Written(ObjectId),
    /// A consumer itself, not resolved yet in this build: try again later.
    Pending,
    /// No document in this build (new and waiting).
    Absent,
}

/// What resolving one resource came to.
#[derive(Debug)]
pub(crate) enum Resolution {
    /// Every expression resolved; the resource holds the values.
    Resolved(Box<Resource>, ResolvedInputs),
    /// An input is not available (yet): why.
    Wait(String),
    /// A producer is itself unresolved in this build.
    Defer,
}

/// The evidence references read.
pub(crate) struct Inputs<'a> {
    pub observed: Option<&'a ObservedState>,
    /// The promotion source's desired plane at its pinned revision, when building a promotion
    /// (or a plane that carries one).
    pub promotion: Option<&'a DesiredState>,
    pub registry: &'a Registry,
}

/// Resolves `resource`'s expressions; `candidate` says where each producer stands.
pub(crate) fn resolve(
    resource: &Resource,
    inputs: &Inputs<'_>,
    candidate: &dyn Fn(&ResourceKey) -> Candidate,
) -> Result<Resolution> {
    let mut values = Vec::with_capacity(resource.exprs.len());
    let mut record = ResolvedInputs::default();
    for site in &resource.exprs {
        let value = match &site.expr {
            Expr::Receipt { producer, pointer } => {
                let receipt = match current_receipt(producer, inputs, candidate) {
                    Ok(r) => r,
                    Err(step) => return Ok(step),
                };
                let result = serde_json::to_value(&receipt.doc.spec.result)
                    .map_err(|e| StoreError::Invalid(format!("receipt of {producer}: {e}")))?;
                let Some(v) = pointer.get(&result).cloned() else {
                    return Ok(Resolution::Wait(format!(
                        "the receipt of {producer} has no `{pointer}`"
                    )));
                };
                record
                    .receipts
                    .insert(producer.to_string(), hex(receipt.blob));
                v
            }
            Expr::Artifact {
                producer,
                name,
                pointer,
            } => {
                let receipt = match current_receipt(producer, inputs, candidate) {
                    Ok(r) => r,
                    Err(step) => return Ok(step),
                };
                let Some(descriptor) = receipt.doc.spec.result.artifacts.get(name) else {
                    return Ok(Resolution::Wait(format!(
                        "the receipt of {producer} lists no artifact `{name}`"
                    )));
                };
                let artifact = inputs
                    .observed
                    .and_then(|o| o.artifacts.get(&(producer.clone(), name.clone())))
                    .filter(|a| hex(a.blob) == descriptor.blob && a.path == descriptor.path);
                let Some(artifact) = artifact else {
                    return Ok(Resolution::Wait(format!(
                        "artifact `{name}` of {producer} is not the one its receipt lists"
                    )));
                };
                let Some(v) = pointer.get(&artifact.doc.spec).cloned() else {
                    return Ok(Resolution::Wait(format!(
                        "artifact `{name}` of {producer} has no `{pointer}`"
                    )));
                };
                record.artifacts.insert(
                    format!("{producer}/{name}"),
                    ArtifactInput {
                        receipt: hex(receipt.blob),
                        artifact: hex(artifact.blob),
                    },
                );
                v
            }
            Expr::Promotion {
                resource: source,
                pointer,
            } => {
                let (value, key, blob) = promoted(
                    resource,
                    source.as_ref(),
                    pointer.as_ref(),
                    &site.path,
                    inputs,
                )?;
                record.promotion.insert(key, blob);
                value
            }
            // A future expression kind this store cannot read: never guess a value.
            _ => {
                return Err(StoreError::Reference {
                    resource: resource.key().to_string(),
                    reason: format!("`{}` is not resolved by this version", site.expr.key()),
                });
            }
        };
        // A value that reads as an expression would be one when the document is loaded again.
        if proxops_model::expr::contains_expression(&value) {
            return Ok(Resolution::Wait(format!(
                "the value `{}` reads holds a reference expression",
                site.expr.key()
            )));
        }
        values.push(value);
    }
    match proxops_model::manifest::resolve_resource(resource, inputs.registry, &values) {
        Ok(r) => Ok(Resolution::Resolved(Box::new(r), record)),
        Err(diagnostics) => {
            let why = diagnostics
                .iter()
                .find(|d| d.is_error())
                .map_or_else(|| "invalid".to_owned(), |d| d.message.clone());
            Ok(Resolution::Wait(format!(
                "a resolved value is refused: {why}"
            )))
        }
    }
}

/// The producer's receipt, if it is current against the candidate; else what to do.
fn current_receipt<'a>(
    producer: &ResourceKey,
    inputs: &Inputs<'a>,
    candidate: &dyn Fn(&ResourceKey) -> Candidate,
) -> std::result::Result<&'a crate::observed::Stored<crate::documents::Receipt>, Resolution> {
    let blob = match candidate(producer) {
        Candidate::Written(blob) => blob,
        Candidate::Pending => return Err(Resolution::Defer),
        Candidate::Absent => {
            return Err(Resolution::Wait(format!(
                "{producer} has no desired document yet"
            )));
        }
    };
    let Some(receipt) = inputs.observed.and_then(|o| o.receipts.get(producer)) else {
        return Err(Resolution::Wait(format!("{producer} has no receipt yet")));
    };
    if receipt.doc.spec.desired.blob != hex(blob) {
        return Err(Resolution::Wait(format!(
            "the receipt of {producer} is stale: it changed since it was reconciled"
        )));
    }
    if receipt.doc.spec.result.outcome == crate::documents::Outcome::RolledBack {
        return Err(Resolution::Wait(format!(
            "the update of {producer} to its desired document was rolled back: PVE does not have it"
        )));
    }
    Ok(receipt)
}

/// The value a `fromPromotion` reads: (value, fingerprint key, source document blob).
fn promoted(
    consumer: &Resource,
    source: Option<&ResourceKey>,
    pointer: Option<&Pointer>,
    path: &[proxops_model::yaml::PathSeg],
    inputs: &Inputs<'_>,
) -> Result<(Value, String, String)> {
    let fail = |reason: String| StoreError::Reference {
        resource: consumer.key().to_string(),
        reason,
    };
    let Some(plane) = inputs.promotion else {
        return Err(fail(
            "`fromPromotion` is only resolved by `promote`, or in a cluster promoted before"
                .to_owned(),
        ));
    };
    let key = source.cloned().unwrap_or_else(|| consumer.key());
    // An inferred pointer reads the same field, which means something only in the same kind.
    if pointer.is_none() && key.kind != consumer.kind {
        return Err(fail(format!(
            "`fromPromotion` from {key} needs a `pointer`: the kinds differ"
        )));
    }
    let pointer = pointer.cloned().unwrap_or_else(|| Pointer::of_path(path));
    let Some(entry) = plane.resources.get(&key) else {
        return Err(fail(format!(
            "the promotion source `{}` has no {key}",
            plane
                .cluster
                .as_ref()
                .map_or("?", |c| c.metadata.name.as_str())
        )));
    };
    let Some(value) = pointer.get(&entry.doc.spec) else {
        return Err(fail(format!(
            "{key} in the promotion source has no `{pointer}`"
        )));
    };
    Ok((value.clone(), format!("{key}#{pointer}"), hex(entry.blob)))
}
