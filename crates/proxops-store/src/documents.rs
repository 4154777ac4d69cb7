//! The documents the planes hold, their paths and their canonical bytes.
//!
//! Desired plane (`proxops/desired/<cluster>`):
//! - `cluster.yaml`: [`ClusterConfigDoc`], the cluster's resolved non-secret configuration;
//! - `resources/<kind>/<name>.yaml`: a resolved resource (`apiVersion`, `kind`, `metadata` with
//!   the UID minted at first publication, `spec`);
//! - `deletions/<kind>/<name>.yaml`: [`DeletionIntent`]s;
//! - `stacks/<name>.yaml` and `stack-templates/<name>.yaml`: the cluster's Stacks and their
//!   templates ([`crate::stacks`]); a resource a Stack projected names it in
//!   `metadata.ownerReferences`;
//! - `promotion.yaml`: the [`PromotionDoc`] of the promotion the plane descends from, carried
//!   unchanged by later publications;
//! - `waits.yaml`: [`WaitsDoc`], the resources whose reference expressions did not resolve at
//!   this publication, with why (absent when none).
//!
//! Observed plane (`proxops/observed/<cluster>`):
//! - `receipts/<kind>/<name>.yaml`: [`Receipt`]s;
//! - `artifacts/<kind>/<name>/<artifact>.yaml`: [`Artifact`]s;
//! - `teardowns/<kind>/<name>/<uid>.yaml`: [`Teardown`] evidence.

use crate::canonical::to_yaml;
use crate::error::{Result, StoreError};
use crate::id::ObjectId;
use crate::refs::check_segment;
use proxops_model::ResourceKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `apiVersion` of every plane document.
pub const API_VERSION: &str = proxops_model::manifest::API_VERSION;
/// The version of the controller writing receipts, recorded in them.
pub const CONTROLLER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Path of the cluster configuration in the desired plane.
pub const CLUSTER_PATH: &str = "cluster.yaml";
/// Path of the promotion record in the desired plane.
pub const PROMOTION_PATH: &str = "promotion.yaml";
/// Path of the record of resources waiting for a reference, in the desired plane.
pub const WAITS_PATH: &str = "waits.yaml";
/// Directory of resources in the desired plane.
pub const RESOURCES_DIR: &str = "resources";
/// Directory of deletion intents in the desired plane.
pub const DELETIONS_DIR: &str = "deletions";
/// Directory of receipts in the observed plane.
pub const RECEIPTS_DIR: &str = "receipts";
/// Directory of artifacts in the observed plane.
pub const ARTIFACTS_DIR: &str = "artifacts";
/// Directory of teardown evidence in the observed plane.
pub const TEARDOWNS_DIR: &str = "teardowns";
/// Directory of the desired plane's materialized payloads ([`crate::materialized`]).
pub const MATERIALIZED_DIR: &str = "materialized";

pub(crate) fn key_path(dir: &str, key: &ResourceKey) -> Result<String> {
    check_segment(&key.kind, "kind")?;
    check_segment(&key.name, "resource name")?;
    Ok(format!("{dir}/{}/{}.yaml", key.kind, key.name))
}

/// `resources/<kind>/<name>.yaml`.
pub fn resource_path(key: &ResourceKey) -> Result<String> {
    key_path(RESOURCES_DIR, key)
}

/// `deletions/<kind>/<name>.yaml`.
pub fn deletion_path(key: &ResourceKey) -> Result<String> {
    key_path(DELETIONS_DIR, key)
}

/// `receipts/<kind>/<name>.yaml`.
pub fn receipt_path(key: &ResourceKey) -> Result<String> {
    key_path(RECEIPTS_DIR, key)
}

/// `artifacts/<kind>/<name>` (the directory of one resource's artifacts).
pub fn artifact_dir(key: &ResourceKey) -> Result<String> {
    check_segment(&key.kind, "kind")?;
    check_segment(&key.name, "resource name")?;
    Ok(format!("{ARTIFACTS_DIR}/{}/{}", key.kind, key.name))
}

/// `artifacts/<kind>/<name>/<artifact>.yaml`.
pub fn artifact_path(key: &ResourceKey, artifact: &str) -> Result<String> {
    check_segment(artifact, "artifact name")?;
    Ok(format!("{}/{artifact}.yaml", artifact_dir(key)?))
}

/// `teardowns/<kind>/<name>/<uid>.yaml`.
pub fn teardown_path(key: &ResourceKey, uid: &str) -> Result<String> {
    check_segment(&key.kind, "kind")?;
    check_segment(&key.name, "resource name")?;
    check_segment(uid, "uid")?;
    Ok(format!(
        "{TEARDOWNS_DIR}/{}/{}/{uid}.yaml",
        key.kind, key.name
    ))
}

/// The (kind, name) a `<dir>/<kind>/<name>.yaml` path names.
pub fn key_of_path(dir: &str, path: &str) -> Option<ResourceKey> {
    let rest = path.strip_prefix(dir)?.strip_prefix('/')?;
    let (kind, file) = rest.split_once('/')?;
    let name = file.strip_suffix(".yaml")?;
    (!name.contains('/')).then(|| ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

/// The canonical bytes of a serialisable document.
pub fn canonical_bytes<T: Serialize>(doc: &T) -> Result<Vec<u8>> {
    let value = serde_json::to_value(doc)
        .map_err(|e| StoreError::Invalid(format!("document does not serialise: {e}")))?;
    Ok(to_yaml(&value).into_bytes())
}

/// Reads a typed document out of its parsed value.
pub fn from_value<T: for<'de> Deserialize<'de>>(
    value: Value,
    plane: &str,
    path: &str,
) -> Result<T> {
    serde_json::from_value(value).map_err(|e| StoreError::Corrupt {
        plane: plane.to_owned(),
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// The identity of one incarnation of a resource: (kind, name) and the UID minted when it was
/// first published.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subject {
    /// The kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// The UID of this incarnation.
    pub uid: String,
}

impl Subject {
    /// (kind, name).
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            kind: self.kind.clone(),
            name: self.name.clone(),
        }
    }
}

/// `metadata` of a desired resource document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesiredMetadata {
    /// The name.
    pub name: String,
    /// The UID minted at first publication.
    pub uid: String,
    /// Labels of the manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// The Stack that projected the resource (at most one), by UID.
    #[serde(
        default,
        rename = "ownerReferences",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
}

/// A reference from an owned document to its owner's incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Stack`.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's UID.
    pub uid: String,
}

/// A resolved, secret-free resource document of the desired plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// Name, UID, labels, annotations.
    pub metadata: DesiredMetadata,
    /// The spec as the model serialises it (secret references, never secret values).
    pub spec: Value,
    /// Where the values of the spec's reference expressions came from (absent without any):
    /// the receipt and artifact blob ids, so the document, and with it the freshness of its
    /// receipt, changes when an input does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_inputs: Option<ResolvedInputs>,
}

/// The inputs a desired document's reference expressions were resolved from.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedInputs {
    /// `Kind/name` of each producer read by `fromReceipt` -> its receipt's blob id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub receipts: BTreeMap<String, String>,
    /// `Kind/name/artifact` read by `fromArtifact` -> the receipt and artifact blob ids.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, ArtifactInput>,
    /// `Kind/name#pointer` read by `fromPromotion` -> the blob id of the promotion source's
    /// desired document.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub promotion: BTreeMap<String, String>,
}

/// One artifact a reference read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactInput {
    /// The producer's receipt that listed it.
    pub receipt: String,
    /// The artifact.
    pub artifact: String,
}

/// The resources of a publication whose references did not resolve (`waits.yaml`): each keeps
/// its previous desired document, or has none if it is new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitsDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Waits`.
    pub kind: String,
    /// `Kind/name` -> why it waits.
    pub spec: BTreeMap<String, String>,
}

/// The cluster's resolved non-secret configuration (`cluster.yaml`). Only fields on an allow
/// list are copied: credentials and the SOPS key mapping never are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfigDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `ClusterConfig`.
    pub kind: String,
    /// The cluster's name.
    pub metadata: NameOnly,
    /// Endpoint and policy.
    pub spec: ClusterConfigSpec,
}

/// `metadata` with just a name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameOnly {
    /// The name.
    pub name: String,
}

/// `spec` of [`ClusterConfigDoc`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfigSpec {
    /// The API endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The node allowlist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Pinned certificate fingerprint (public).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// CA bundle path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Whether certificate verification is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// `token` or `ticket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// Time between cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<String>,
    /// Longest wait for one PVE task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_timeout: Option<String>,
    /// Most guests deleted per cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_budget: Option<u32>,
}

/// A resource removed from the source that still exists in PVE until its teardown is
/// observed: fenced by kind, name, UID and the PVE identity it was created with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionIntent {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `DeletionIntent`.
    pub kind: String,
    /// The resource's name.
    pub metadata: NameOnly,
    /// What to delete.
    pub spec: DeletionSpec,
}

/// `spec` of a [`DeletionIntent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionSpec {
    /// The incarnation to delete.
    pub subject: Subject,
    /// Its PVE identity (`vmid`, `node`, `nodes`, `storage`, `filename` as its spec had them).
    pub pve_identity: BTreeMap<String, Value>,
    /// The last desired document of the resource.
    pub last_desired: DesiredPin,
    /// The source revision whose publication removed it (for a requested deletion: the source
    /// revision of the desired head it was requested on).
    pub source_revision: String,
    /// Set when `proxops delete` asked for it, rather than the manifest leaving the
    /// composition: the resource is not published again while the intent stands, even though
    /// its manifest is still composed, and the intent stays after the teardown until the
    /// manifest leaves the composition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<DeletionRequest>,
}

/// Who asked for a deletion and why (`proxops delete`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletionRequest {
    /// The tool that recorded it (`proxops delete`).
    pub by: String,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The Stack whose deletion marked this resource (one of its projected resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

/// The record of a promotion (`promotion.yaml` at the desired tree root): which source
/// revisions the target's desired state was promoted from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Promotion`.
    pub kind: String,
    /// The source cluster's name.
    pub metadata: NameOnly,
    /// The pinned revisions.
    pub spec: PromotionSpec,
}

/// `spec` of a [`PromotionDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSpec {
    /// The source cluster's planes at the pinned revisions.
    pub source: PromotionSource,
    /// The specification (source repository) commit the target was built from.
    pub specification_revision: String,
    /// The evidence the target asked for, when it accepts more than receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<PromotionEvidenceRecord>,
}

/// `spec.evidence` of a [`PromotionDoc`]: a target with `minimum-evidence: materialized`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionEvidenceRecord {
    /// `materialized`.
    pub minimum: String,
    /// The source resources promoted on their payload rather than a receipt, `Kind/name` to
    /// the payload of their document in the pinned source desired revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub materialized: BTreeMap<String, MaterializedPin>,
}

/// `spec.source` of a [`PromotionDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSource {
    /// The source cluster.
    pub cluster: String,
    /// Its desired branch.
    pub desired_ref: String,
    /// Its desired head, pinned.
    pub desired_revision: String,
    /// Its observed branch.
    pub observed_ref: String,
    /// Its observed head, pinned (`null` when it had none).
    pub observed_revision: Option<String>,
}

/// A desired document pinned by blob id and desired commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredPin {
    /// The document's blob id.
    pub blob: String,
    /// The desired commit it was read from.
    pub revision: String,
}

/// The fields of a spec that identify what it made in PVE.
pub const PVE_IDENTITY_FIELDS: &[&str] = &["vmid", "node", "nodes", "storage", "filename"];

/// The PVE identity of a spec: the [`PVE_IDENTITY_FIELDS`] it has.
pub fn pve_identity(spec: &Value) -> BTreeMap<String, Value> {
    PVE_IDENTITY_FIELDS
        .iter()
        .filter_map(|f| spec.get(*f).map(|v| ((*f).to_owned(), v.clone())))
        .collect()
}

/// What reconciling one desired document achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Outcome {
    /// The resource was created.
    Created,
    /// The resource was changed to match.
    Updated,
    /// Nothing needed doing: PVE already matched.
    InSync,
    /// A snapshot-guarded update to this document failed (a task, or the check after it) and
    /// the guest was rolled back to the snapshot taken before it: PVE has what it had, not this
    /// document. [`ReceiptResult::guard`] says what failed; the document is not tried again
    /// until it changes.
    RolledBack,
}

/// Evidence that one desired document was reconciled (`receipts/<kind>/<name>.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Receipt`.
    pub kind: String,
    /// The subject's name.
    pub metadata: NameOnly,
    /// Subject, desired pin and result.
    pub spec: ReceiptSpec,
}

/// `spec` of a [`Receipt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptSpec {
    /// The incarnation reconciled.
    pub subject: Subject,
    /// The exact desired document reconciled: freshness compares its blob id.
    pub desired: DesiredPin,
    /// The materialized payload of that document ([`crate::materialized`]), when the plane
    /// holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub materialized: Option<MaterializedPin>,
    /// What happened.
    pub result: ReceiptResult,
}

/// `spec.result` of a [`Receipt`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptResult {
    /// What reconciling achieved.
    pub outcome: Outcome,
    /// The PVE identity of what exists now (vmid, node, volid, ...).
    pub pve_identity: BTreeMap<String, Value>,
    /// The PVE tasks that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upids: Vec<String>,
    /// When reconciling started (RFC 3339, UTC).
    pub started_at: String,
    /// When it finished.
    pub finished_at: String,
    /// The controller's version.
    pub controller_version: String,
    /// Artifacts published with the receipt: name -> descriptor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, ArtifactDescriptor>,
    /// A snapshot-guarded update (`update-policy`): its snapshot, what the check found or what
    /// failed, the rollback, the snapshots pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardRecord>,
}

/// `spec.result.guard` of a [`Receipt`]: what a snapshot-guarded update did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardRecord {
    /// The PVE snapshot taken before the update (`proxops-<revision>`).
    pub snapshot: String,
    /// What the check after the update found, when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<String>,
    /// What failed: the task or the check, with PVE's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Whether the guest was rolled back to the snapshot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rolled_back: bool,
    /// After a rollback: the desired document the guest is back at (the one the receipt before
    /// it pinned), which still proves what ProxOps owns on it; absent when none was pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<DesiredPin>,
    /// ProxOps snapshots deleted beyond `keep` after a successful update.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pruned: Vec<String>,
}

/// How a receipt points at one of its artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactDescriptor {
    /// The artifact's kind.
    pub kind: String,
    /// Its path in the observed plane.
    pub path: String,
    /// Its blob id.
    pub blob: String,
}

/// Typed, immutable evidence a driver publishes with a receipt
/// (`artifacts/<kind>/<name>/<artifact>.yaml`): a downloaded file's volid, size and checksum
/// per node, a VM's MAC addresses, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// The artifact kind (`DownloadedFile`, `MacAddresses`, ...).
    pub kind: String,
    /// The artifact's local name.
    pub metadata: NameOnly,
    /// The resource that produced it.
    pub producer: Subject,
    /// The payload.
    pub spec: Value,
}

/// Evidence that an incarnation was torn down (`teardowns/<kind>/<name>/<uid>.yaml`).
/// Publishing it removes the resource's receipt and artifacts; the next desired publication
/// then drops the deletion intent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Teardown {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Teardown`.
    pub kind: String,
    /// The resource's name.
    pub metadata: NameOnly,
    /// What was torn down.
    pub spec: TeardownSpec,
}

/// `spec` of a [`Teardown`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeardownSpec {
    /// The incarnation.
    pub subject: Subject,
    /// The deletion intent acted on (blob id) and the desired commit it was read from.
    pub intent: DesiredPin,
    /// The PVE tasks that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upids: Vec<String>,
    /// When the teardown finished (RFC 3339, UTC).
    pub finished_at: String,
    /// The controller's version.
    pub controller_version: String,
}

/// An object id as a document field.
pub fn hex(id: ObjectId) -> String {
    id.to_string()
}

/// Parses a 40-hex object id out of a document field.
pub fn parse_id(text: &str) -> Option<ObjectId> {
    if text.len() != 40 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    text.parse().ok()
}

/// `now` as RFC 3339 UTC with seconds (`2026-11-30T12:00:00Z`).
pub fn utc_timestamp(now: std::time::SystemTime) -> String {
    // Before 1970 (a clock set wrong) reads as the epoch, as it always did.
    let ts = match now.duration_since(std::time::UNIX_EPOCH) {
        Ok(_) => jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        Err(_) => jiff::Timestamp::UNIX_EPOCH,
    };
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            utc_timestamp(UNIX_EPOCH + Duration::from_secs(1_709_210_096)),
            "2024-02-29T12:34:56Z"
        );
    }

    #[test]
    fn validate_knows_every_field_of_a_receipt_result() {
        // `validate` refuses a `fromReceipt` pointer into a field not in its list: the list
        // must be exactly what a receipt's result holds when every field is filled.
        let result = ReceiptResult {
            outcome: Outcome::Created,
            pve_identity: BTreeMap::from([("vmid".to_owned(), Value::from(100))]),
            upids: vec!["UPID:pve1:1:2:3:qmcreate:100:root@pam:".to_owned()],
            started_at: "2026-01-01T00:00:00Z".to_owned(),
            finished_at: "2026-01-01T00:00:01Z".to_owned(),
            controller_version: "0.1.0".to_owned(),
            guard: Some(GuardRecord {
                snapshot: "proxops-1".to_owned(),
                ..GuardRecord::default()
            }),
            artifacts: BTreeMap::from([(
                "mac-addresses".to_owned(),
                ArtifactDescriptor {
                    kind: "MacAddresses".to_owned(),
                    path: "artifacts/VM/a/mac-addresses.yaml".to_owned(),
                    blob: "0".repeat(40),
                },
            )]),
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        let mut fields: Vec<&str> = value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        fields.sort_unstable();
        let mut known = proxops_model::kinds::reach::RECEIPT_RESULT_FIELDS.to_vec();
        known.sort_unstable();
        assert_eq!(fields, known);
    }

    #[test]
    fn paths_round_trip() {
        let key = ResourceKey {
            kind: "VM".into(),
            name: "jumpbox".into(),
        };
        let path = resource_path(&key).ok();
        assert_eq!(path.as_deref(), Some("resources/VM/jumpbox.yaml"));
        assert_eq!(
            key_of_path(RESOURCES_DIR, "resources/VM/jumpbox.yaml"),
            Some(key)
        );
        assert_eq!(key_of_path(RESOURCES_DIR, "resources/VM/a/b.yaml"), None);
        let bad = ResourceKey {
            kind: "VM".into(),
            name: "../x".into(),
        };
        assert!(resource_path(&bad).is_err());
    }
}

/// `materialized/<kind>/<name>.yaml`: what one desired document makes ProxOps send to PVE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MaterializedDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Materialized`.
    pub kind: String,
    /// The resource's name.
    pub metadata: NameOnly,
    /// The payload.
    pub spec: MaterializedSpec,
}

/// `spec` of a [`MaterializedDoc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MaterializedSpec {
    /// The incarnation.
    pub subject: Subject,
    /// The blob id of the desired document rendered: a payload belongs to exactly one.
    pub document: String,
    /// The blob id of the desired document the resource's receipt applied when this was
    /// rendered: the requests are what it takes from there. Absent: nothing applied yet (the
    /// requests create it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// The requests, in the order the engine sends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<ApiRequest>,
    /// What the requests alone do not say (a restart that follows, values PVE merges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Why the document could not be rendered (the plan refuses it for the same reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One API request of a payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiRequest {
    /// `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// The path below `/api2/json`.
    pub path: String,
    /// The form fields, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

/// How a receipt names the payload it applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaterializedPin {
    /// Its path in the desired plane.
    pub path: String,
    /// Its blob id.
    pub blob: String,
}
