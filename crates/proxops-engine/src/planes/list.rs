//! The read side of the planes: the rows of `proxops get` and the lines of `proxops status`.

use proxops_model::ResourceKey;
use proxops_store::documents::{hex, utc_timestamp};
use proxops_store::state::ResourceView;
use proxops_store::{ClusterView, PlaneRefs, ResourceState, Store, StoreError};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// `apiVersion` of the documents `get` and `status` print.
pub const LIST_API_VERSION: &str = proxops_model::report::REPORT_API_VERSION;

/// The desired side of a [`ResourceItem`].
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct DesiredRef {
    /// The desired commit.
    pub revision: String,
    /// The resource document's (or deletion intent's) blob id.
    pub blob: String,
}

/// The receipt side of a [`ResourceItem`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReceiptRef {
    /// The receipt's blob id.
    pub blob: String,
    /// `CURRENT`, `STALE` (or `N/A` for a deletion intent's leftover receipt).
    pub observation: String,
    /// The receipt's `spec`: subject, desired pin, result.
    pub spec: Value,
}

/// One row of `get`: a desired resource joined with its receipt.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ResourceItem {
    /// The cluster.
    pub cluster: String,
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
    /// `CLEAN`, `READY`, `WAIT` or `DELETING`.
    pub state: ResourceState,
    /// Why, in words.
    pub reason: String,
    /// The incarnation's UID.
    pub uid: String,
    /// The desired document.
    pub desired: DesiredRef,
    /// The receipt, if any.
    pub receipt: Option<ReceiptRef>,
    /// The Stack that projected it (`Stack/<name>`), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"ResourceList","items":[...]}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceList {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `ResourceList`.
    pub kind: &'static str,
    /// The rows, by (cluster, kind, name).
    pub items: Vec<ResourceItem>,
}

impl ResourceList {
    /// A list of `items`.
    pub fn new(items: Vec<ResourceItem>) -> ResourceList {
        ResourceList {
            api_version: LIST_API_VERSION,
            kind: "ResourceList",
            items,
        }
    }
}

/// Which resources `get` shows: `KIND[/NAME]`, the kind matched without regard to case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Selector {
    /// The kind (`None`: every kind).
    pub kind: Option<String>,
    /// The name (`None`: every name).
    pub name: Option<String>,
}

impl Selector {
    /// The resources of `kind` (`None`: every kind) named `name` (`None`: every name).
    pub fn new(kind: Option<String>, name: Option<String>) -> Selector {
        Selector { kind, name }
    }

    /// Parses `KIND`, `KIND/NAME` or `all`.
    pub fn parse(text: Option<&str>) -> Selector {
        match text {
            None | Some("all") => Selector::default(),
            Some(t) => match t.split_once('/') {
                Some((k, n)) => Selector {
                    kind: Some(k.to_owned()),
                    name: Some(n.to_owned()),
                },
                None => Selector {
                    kind: Some(t.to_owned()),
                    name: None,
                },
            },
        }
    }

    /// Whether `key` is selected.
    pub fn matches(&self, key: &ResourceKey) -> bool {
        self.kind
            .as_deref()
            .is_none_or(|k| k.eq_ignore_ascii_case(&key.kind))
            && self.name.as_deref().is_none_or(|n| n == key.name)
    }
}

/// The `get` rows of one cluster's view that `selector` selects.
pub fn resource_items(view: &ClusterView, selector: &Selector) -> Vec<ResourceItem> {
    let revision = view.desired_revision.map(hex).unwrap_or_default();
    view.resources
        .iter()
        .filter(|r| selector.matches(&r.key))
        .map(|r| item(&view.cluster, &revision, r))
        .collect()
}

fn item(cluster: &str, revision: &str, r: &ResourceView) -> ResourceItem {
    let observation = serde_json::to_value(r.observation)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let observation = if observation == "NOT_APPLICABLE" {
        "N/A".to_owned()
    } else {
        observation
    };
    ResourceItem {
        cluster: cluster.to_owned(),
        kind: r.key.kind.clone(),
        name: r.key.name.clone(),
        state: r.state,
        reason: r.reason.clone(),
        uid: r.uid.clone(),
        desired: DesiredRef {
            revision: revision.to_owned(),
            blob: hex(r.blob),
        },
        receipt: r.receipt.as_ref().map(|s| ReceiptRef {
            blob: hex(s.blob),
            observation,
            spec: serde_json::to_value(&s.doc.spec).unwrap_or(Value::Null),
        }),
        owner: r.owner.clone(),
    }
}

/// One plane's head, for `status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Head {
    /// The branch (`proxops/desired/<cluster>`).
    #[serde(rename = "ref")]
    pub refname: String,
    /// Its commit, if the branch exists.
    pub revision: Option<String>,
    /// The commit's first message line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The commit's time (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// Counts by state, for `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StateCounts {
    /// CLEAN resources.
    pub clean: usize,
    /// READY resources.
    pub ready: usize,
    /// WAIT resources.
    pub wait: usize,
    /// DELETING resources.
    pub deleting: usize,
}

/// One cluster's line of `status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterStatus {
    /// The cluster.
    pub cluster: String,
    /// The desired head.
    pub desired: Head,
    /// The source revision the desired head pins.
    pub source_revision: Option<String>,
    /// The observed head: its commit is the last cycle that recorded something.
    pub observed: Head,
    /// Resources by state.
    pub counts: StateCounts,
    /// Receipts: current, stale and orphan.
    pub receipts: BTreeMap<String, usize>,
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"ClusterStatusList","clusters":[...]}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StatusList {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `ClusterStatusList`.
    pub kind: &'static str,
    /// One entry per cluster.
    pub clusters: Vec<ClusterStatus>,
}

impl StatusList {
    /// A list of `clusters`.
    pub fn new(clusters: Vec<ClusterStatus>) -> StatusList {
        StatusList {
            api_version: LIST_API_VERSION,
            kind: "ClusterStatusList",
            clusters,
        }
    }
}

/// The status of one cluster's planes.
pub fn cluster_status(store: &Store, refs: &PlaneRefs) -> Result<ClusterStatus, StoreError> {
    let desired = store.read_desired(refs, None)?;
    let observed = store.read_observed(refs, None)?;
    let view = proxops_store::state::derive(&refs.cluster, desired.as_ref(), observed.as_ref());
    let head = |refname: &str, plane: Option<&proxops_store::Plane>| Head {
        refname: refname
            .strip_prefix("refs/heads/")
            .unwrap_or(refname)
            .to_owned(),
        revision: plane.map(|p| hex(p.commit.id)),
        subject: plane.map(|p| p.commit.message.lines().next().unwrap_or("").to_owned()),
        time: plane.map(|p| {
            let secs = u64::try_from(p.commit.time).unwrap_or(0);
            utc_timestamp(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        }),
    };
    let mut receipts = BTreeMap::new();
    for r in &view.receipts {
        let name = serde_json::to_value(r.freshness)
            .ok()
            .and_then(|v| v.as_str().map(str::to_lowercase))
            .unwrap_or_default();
        *receipts.entry(name).or_insert(0) += 1;
    }
    Ok(ClusterStatus {
        cluster: refs.cluster.clone(),
        desired: head(&refs.desired, desired.as_ref().map(|d| &d.plane)),
        source_revision: desired.as_ref().and_then(|d| d.source_revision.map(hex)),
        observed: head(&refs.observed, observed.as_ref().map(|o| &o.plane)),
        counts: StateCounts {
            clean: view.count(ResourceState::Clean),
            ready: view.count(ResourceState::Ready),
            wait: view.count(ResourceState::Wait),
            deleting: view.count(ResourceState::Deleting),
        },
        receipts,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn selectors() {
        let vm = ResourceKey {
            kind: "VM".to_owned(),
            name: "web".to_owned(),
        };
        assert!(Selector::parse(None).matches(&vm));
        assert!(Selector::parse(Some("all")).matches(&vm));
        assert!(Selector::parse(Some("vm")).matches(&vm));
        assert!(Selector::parse(Some("VM/web")).matches(&vm));
        assert!(!Selector::parse(Some("VM/db")).matches(&vm));
        assert!(!Selector::parse(Some("LXC")).matches(&vm));
    }
}

/// One materialized payload, for `get --materialized`.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct MaterializedItem {
    /// The cluster.
    pub cluster: String,
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
    /// Its path in the desired plane.
    pub path: String,
    /// Its blob id: what a receipt names.
    pub blob: String,
    /// The payload: the requests, what they were computed against, notes.
    pub spec: proxops_store::materialized::MaterializedSpec,
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"MaterializedList","items":[...]}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MaterializedList {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `MaterializedList`.
    pub kind: &'static str,
    /// The payloads, by (cluster, kind, name).
    pub items: Vec<MaterializedItem>,
}

impl MaterializedList {
    /// A list of `items`.
    pub fn new(items: Vec<MaterializedItem>) -> MaterializedList {
        MaterializedList {
            api_version: LIST_API_VERSION,
            kind: "MaterializedList",
            items,
        }
    }
}

/// The materialized payloads of the desired head of `refs` that `selector` selects (none when
/// the plane does not exist).
pub fn materialized_items(
    store: &Store,
    refs: &PlaneRefs,
    selector: &Selector,
) -> Result<Vec<MaterializedItem>, StoreError> {
    let Some(desired) = store.read_desired(refs, None)? else {
        return Ok(Vec::new());
    };
    Ok(desired
        .materialized
        .iter()
        .filter(|(key, _)| selector.matches(key))
        .map(|(key, m)| MaterializedItem {
            cluster: refs.cluster.clone(),
            kind: key.kind.clone(),
            name: key.name.clone(),
            path: m.path.clone(),
            blob: hex(m.blob),
            spec: m.doc.spec.clone(),
        })
        .collect())
}
