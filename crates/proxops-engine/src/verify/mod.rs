//! `proxops verify`: whether what ProxOps reconciled is still so in PVE.
//!
//! [`verify_cluster`] reads one cluster's planes at their heads (the live desired plane, not the
//! repository's work tree) and, for every resource with a CURRENT receipt (`planes-spec.md`
//! section 3.2), compares its reconciled desired document with live PVE through the planner, the
//! same comparison `diff` and every cycle make (owned keys only, PVE's canonical forms, the
//! previous documents proving which keys ProxOps wrote). Each such resource is
//! [`VerifyState::InSync`], [`VerifyState::Drifted`] (the [`Difference`]s: owned keys with their
//! desired and live values; anomalies) or [`VerifyState::Missing`] (the guest or the artifact's
//! file is gone). A resource without a current receipt (never reconciled, a stale receipt, a
//! reference waiting, a deletion in progress) is [`VerifyState::NotVerified`], with why: that is
//! not drift.
//!
//! Verifying only reads: PVE is asked with `GET` requests alone (a ticket login's
//! `POST /access/ticket` aside), no lease is taken, no receipt or desired document is written.
//! Correcting drift stays the job of a cycle (`apply`, the agent; or only reported, `drift:
//! report`).

mod report;

use report::verifications;

use crate::backend::{Backend, ConnectError, connect_with, settings_for};
use crate::desired::Drivers;
use crate::planner::{PlanError, plan_cluster};
use crate::reconcile::{previous_documents, resource_of};
use proxops_graph::Graph;
use proxops_model::config::LogLevel;
use proxops_model::settings::FlagSettings;
use proxops_model::{Registry, Repository, ResourceKey};
use proxops_pve::Latency;
use proxops_store::documents::{hex, utc_timestamp};
use proxops_store::{PlaneRefs, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

/// `kind` of the document [`VerifyReport`] is.
pub const VERIFY_REPORT_KIND: &str = "VerifyReport";

/// How one resource compares with live PVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum VerifyState {
    /// Live PVE is as its reconciled desired document says.
    InSync,
    /// Owned keys (or power, node, HA, template state) differ from the reconciled document, or
    /// something ProxOps never fixes by itself (an anomaly) is found.
    Drifted,
    /// The guest, or the artifact's file on a node, is gone.
    Missing,
    /// Not compared: the resource has no current receipt (never reconciled, a stale receipt, a
    /// reference waiting, a deletion in progress), or PVE or its document could not be read.
    NotVerified,
}

impl VerifyState {
    /// The word tables show: `InSync`, `Drifted`, `Missing`, `NotVerified`.
    pub fn label(self) -> &'static str {
        match self {
            VerifyState::InSync => "InSync",
            VerifyState::Drifted => "Drifted",
            VerifyState::Missing => "Missing",
            VerifyState::NotVerified => "NotVerified",
        }
    }

    /// Whether PVE no longer matches what was reconciled ([`VerifyState::Drifted`] or
    /// [`VerifyState::Missing`]).
    pub fn is_drift(self) -> bool {
        matches!(self, VerifyState::Drifted | VerifyState::Missing)
    }
}

/// One thing that differs: a config key (or `state`, `node`, `template`, `ha.<option>`, a
/// disk's size) with the value the reconciled document wants and the live one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Difference {
    /// The config key, or what else differs.
    pub key: String,
    /// The value the desired document wants (`None`: the key should not be set).
    pub desired: Option<String>,
    /// The live value (`None`: not set, or not known).
    pub live: Option<String>,
}

impl Difference {
    /// `key` wants `desired` and is `live`.
    pub fn new(key: impl Into<String>, desired: Option<String>, live: Option<String>) -> Self {
        Difference {
            key: key.into(),
            desired,
            live,
        }
    }
}

/// How one resource of a cluster compares with live PVE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourceVerification {
    /// The kind.
    pub kind: String,
    /// The name.
    pub name: String,
    /// In sync, drifted, missing or not verified.
    pub state: VerifyState,
    /// Why, in words: what differs, what is gone, or why it was not verified.
    pub reason: String,
    /// What differs (drifted resources), in the planner's order.
    pub differences: Vec<Difference>,
}

impl ResourceVerification {
    /// `kind`/`name` in `state` because of `reason`, with no difference listed.
    pub fn new(
        kind: impl Into<String>,
        name: impl Into<String>,
        state: VerifyState,
        reason: impl Into<String>,
    ) -> Self {
        ResourceVerification {
            kind: kind.into(),
            name: name.into(),
            state,
            reason: reason.into(),
            differences: Vec::new(),
        }
    }

    /// `Kind/name`.
    pub fn subject(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// Why a cluster, or a resource of it, could not be verified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The cluster is not in the repository.
    #[error("cluster `{0}` is not in the repository")]
    NoCluster(String),
    /// The planes could not be read.
    #[error("reading the planes: {0}")]
    Planes(#[source] StoreError),
    /// The desired plane's documents do not make a graph.
    #[error("the desired plane's documents cannot be planned: {0}")]
    Graph(String),
    /// PVE could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// PVE's state could not be read.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// One resource cannot be compared until the repository or its secrets are fixed.
    #[error("{subject}: {reason}")]
    Resource {
        /// `Kind/name`.
        subject: String,
        /// The planner's stable code (`proxops::cloud_init_secret`, ...).
        code: String,
        /// What is wrong.
        reason: String,
    },
}

impl VerifyError {
    /// A stable code (`proxops::<area>::<name>`).
    pub fn code(&self) -> &str {
        match self {
            VerifyError::NoCluster(_) => "proxops::verify::no_cluster",
            VerifyError::Planes(_) => "proxops::planes::read",
            VerifyError::Graph(_) => "proxops::verify::graph",
            VerifyError::Connect(_) => "proxops::pve::connect",
            VerifyError::Plan(_) => "proxops::pve::inventory",
            VerifyError::Resource { code, .. } => code,
        }
    }
}

/// How one cluster compares with live PVE.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterVerification {
    /// The cluster.
    pub cluster: String,
    /// The desired commit verified against (`None`: no desired plane).
    pub desired_revision: Option<String>,
    /// The observed commit whose receipts said what is current.
    pub observed_revision: Option<String>,
    /// When PVE was read (RFC 3339, UTC).
    pub checked_at: String,
    /// Every resource and deletion intent of the desired plane, by (kind, name).
    pub resources: Vec<ResourceVerification>,
    /// What the operator should know (no desired plane yet, the planner's warnings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What kept resources from being verified.
    #[serde(serialize_with = "errors_out")]
    pub errors: Vec<VerifyError>,
    /// PVE requests sent, by endpoint (`GET /cluster/resources`).
    #[serde(skip)]
    pub requests: BTreeMap<String, u64>,
    /// Their durations.
    #[serde(skip)]
    pub latencies: BTreeMap<String, Latency>,
}

fn errors_out<S: serde::Serializer>(errors: &[VerifyError], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(errors.len()))?;
    for e in errors {
        seq.serialize_element(&serde_json::json!({"code": e.code(), "message": e.to_string()}))?;
    }
    seq.end()
}

impl ClusterVerification {
    /// A verification of `cluster` started at `checked_at`, with nothing found yet.
    pub fn new(cluster: impl Into<String>, checked_at: impl Into<String>) -> Self {
        ClusterVerification {
            cluster: cluster.into(),
            desired_revision: None,
            observed_revision: None,
            checked_at: checked_at.into(),
            resources: Vec::new(),
            warnings: Vec::new(),
            errors: Vec::new(),
            requests: BTreeMap::new(),
            latencies: BTreeMap::new(),
        }
    }

    /// The resources in `state`.
    pub fn count(&self, state: VerifyState) -> usize {
        self.resources.iter().filter(|r| r.state == state).count()
    }

    /// The drifted and missing resources.
    pub fn drifted(&self) -> impl Iterator<Item = &ResourceVerification> {
        self.resources.iter().filter(|r| r.state.is_drift())
    }
}

/// `{"apiVersion":"proxops/v1alpha1","kind":"VerifyReport","clusters":[...]}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct VerifyReport {
    /// Always `proxops/v1alpha1`.
    pub api_version: &'static str,
    /// Always `VerifyReport`.
    pub kind: &'static str,
    /// One entry per cluster, in name order.
    pub clusters: Vec<ClusterVerification>,
}

impl VerifyReport {
    /// A report of `clusters` (sorted by name).
    pub fn new(mut clusters: Vec<ClusterVerification>) -> VerifyReport {
        clusters.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        VerifyReport {
            api_version: proxops_model::report::REPORT_API_VERSION,
            kind: VERIFY_REPORT_KIND,
            clusters,
        }
    }

    /// Whether any resource drifted or is missing.
    pub fn has_drift(&self) -> bool {
        self.clusters.iter().any(|c| c.drifted().next().is_some())
    }

    /// Whether anything could not be verified because of an error.
    pub fn has_errors(&self) -> bool {
        self.clusters.iter().any(|c| !c.errors.is_empty())
    }
}

/// How [`verify_cluster`] runs. Build with [`VerifyOptions::default`] and the `with_*` setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// The kinds the desired documents are loaded with.
    pub registry: Arc<Registry>,
    /// The kind drivers (default: the built-in ones).
    pub drivers: Arc<Drivers>,
    /// The command line's settings layer.
    pub flags: FlagSettings,
    /// The log level when nothing configures one.
    pub default_log_level: LogLevel,
    /// Resources suspended from outside the repository, with why: not verified.
    pub suspended: BTreeMap<ResourceKey, String>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            registry: Arc::new(Registry::builtin()),
            drivers: Arc::new(Drivers::builtin()),
            flags: FlagSettings::default(),
            default_log_level: LogLevel::Warn,
            suspended: BTreeMap::new(),
        }
    }
}

impl VerifyOptions {
    /// Sets the kind registry (an embedder's kinds).
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = registry;
        self
    }
    /// Sets the kind drivers.
    pub fn with_drivers(mut self, drivers: Arc<Drivers>) -> Self {
        self.drivers = drivers;
        self
    }
    /// Sets the command line's settings layer.
    pub fn with_flags(mut self, flags: FlagSettings) -> Self {
        self.flags = flags;
        self
    }
    /// Sets the default log level.
    pub fn with_default_log_level(mut self, level: LogLevel) -> Self {
        self.default_log_level = level;
        self
    }
    /// Sets the externally suspended resources.
    pub fn with_suspended(mut self, suspended: BTreeMap<ResourceKey, String>) -> Self {
        self.suspended = suspended;
        self
    }
}

/// What the planes say, read off the async threads.
struct Read {
    desired: Option<proxops_store::DesiredState>,
    view: proxops_store::ClusterView,
    previous: BTreeMap<ResourceKey, Arc<proxops_model::Resource>>,
}

/// Verifies `cluster` of `repository` (its configuration says where its PVE and its plane
/// branches are; `dir` holds its SOPS files) against `backend`, with the planes of `store` at
/// their heads. Writes nothing; every failure is in the result's `errors`, and the resources it
/// kept from being compared are [`VerifyState::NotVerified`].
pub async fn verify_cluster(
    store: &Store,
    backend: &Backend,
    repository: &Repository,
    dir: &Path,
    cluster: &str,
    options: &VerifyOptions,
) -> ClusterVerification {
    let mut out = ClusterVerification::new(cluster, utc_timestamp(SystemTime::now()));
    let Some(found) = repository.cluster(cluster) else {
        out.errors.push(VerifyError::NoCluster(cluster.to_owned()));
        return out;
    };
    let refs = match PlaneRefs::from_config(cluster, found.entry.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            out.errors.push(VerifyError::Planes(e));
            return out;
        }
    };
    let read = {
        let (store, refs, registry) = (store.clone(), refs.clone(), Arc::clone(&options.registry));
        tokio::task::spawn_blocking(move || -> Result<Read, StoreError> {
            let desired = store.read_desired(&refs, None)?;
            let observed = store.read_observed(&refs, None)?;
            let view =
                proxops_store::state::derive(&refs.cluster, desired.as_ref(), observed.as_ref());
            let previous = previous_documents(&store, &refs, desired.as_ref(), &registry)?;
            Ok(Read {
                desired,
                view,
                previous,
            })
        })
        .await
        .map_err(|e| StoreError::Invalid(format!("task failed: {e}")))
        .and_then(|r| r)
    };
    let read = match read {
        Ok(r) => r,
        Err(e) => {
            out.errors.push(VerifyError::Planes(e));
            return out;
        }
    };
    out.desired_revision = read.view.desired_revision.map(hex);
    out.observed_revision = read.view.observed_revision.map(hex);
    let Some(desired) = &read.desired else {
        out.warnings.push(format!(
            "no desired plane `{}`: nothing was reconciled with the planes yet (`proxops apply` in the repository's git work tree records them)",
            refs.desired_branch()
        ));
        return out;
    };
    let current = read
        .view
        .resources
        .iter()
        .any(|r| r.state == proxops_store::ResourceState::Clean);
    if !current {
        // Nothing to compare: PVE is not asked.
        out.resources = verifications(&read.view, Err("no current receipt"));
        return out;
    }
    // The reconciled documents, as the planner plans them: the whole desired plane (a
    // resource's references to others must resolve), reported for the current ones only.
    let resources: Vec<Arc<proxops_model::Resource>> = desired
        .resources
        .values()
        .filter_map(|entry| resource_of(&entry.doc, &options.registry))
        .collect();
    let graph = match Graph::build(&options.registry, &resources) {
        Ok(g) => g,
        Err(e) => {
            let e = VerifyError::Graph(e.to_string());
            out.resources = verifications(&read.view, Err(&e.to_string()));
            out.errors.push(e);
            return out;
        }
    };
    let settings = settings_for(
        repository.config.as_ref(),
        found,
        &options.flags,
        options.default_log_level,
    );
    let conn = match connect_with(&options.registry, found, backend, settings, Some(dir)).await {
        Ok(c) => c,
        Err(e) => {
            let e = VerifyError::Connect(e);
            out.resources = verifications(&read.view, Err(&e.to_string()));
            out.errors.push(e);
            return out;
        }
    };
    out.warnings.extend(conn.warnings.iter().cloned());
    let mut plan_options = conn.plan_options(found);
    plan_options.drivers = Arc::clone(&options.drivers);
    plan_options.suspended = options.suspended.clone();
    plan_options.waiting = desired.waits.clone();
    plan_options.previous = Some(read.previous);
    let planned = plan_cluster(&conn.client, cluster, &graph, &plan_options).await;
    out.requests = conn.client.counters().snapshot();
    out.latencies = conn.client.counters().latencies();
    #[cfg(feature = "sim")]
    if let Some(sim) = conn.sim {
        let _ = sim.shutdown().await;
    }
    match planned {
        Ok(plan) => {
            out.resources = verifications(&read.view, Ok(&plan));
            out.warnings.extend(plan.warnings.iter().cloned());
            let verified: Vec<String> = read
                .view
                .resources
                .iter()
                .filter(|r| r.state == proxops_store::ResourceState::Clean)
                .map(|r| r.key.to_string())
                .collect();
            for e in plan.errors.iter().filter(|e| verified.contains(&e.subject)) {
                out.errors.push(VerifyError::Resource {
                    subject: e.subject.clone(),
                    code: e.code.clone(),
                    reason: e.reason.clone(),
                });
            }
        }
        Err(e) => {
            let e = VerifyError::Plan(e);
            out.resources = verifications(&read.view, Err(&e.to_string()));
            out.errors.push(e);
        }
    }
    out
}
