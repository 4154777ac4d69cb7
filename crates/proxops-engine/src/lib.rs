//! The ProxOps engine: from a validated cluster and live PVE state to the actions that make PVE
//! match the repository.
//!
//! - [`desired`]: one [`desired::Driver`] per kind, found in a [`desired::Drivers`] registry by
//!   kind name (embedders register drivers for kinds of their own), turns a manifest into a
//!   [`desired::DesiredGuest`] (the PVE
//!   create parameters and the config keys the manifest owns, each with how to compare it) or a
//!   [`desired::DesiredArtifact`] (a file per node, fetched with download-url). Only what a
//!   manifest sets is owned, so fields PVE fills in never cause a diff.
//! - [`diff`]: compares a [`desired::DesiredGuest`] with a guest's live config in PVE's canonical
//!   forms (property strings through `proxops_pve::props`), giving the keys to set, disks to
//!   grow, whether a restart is needed, and anomalies that are never fixed automatically (disk
//!   shrink, storage moves).
//!
//! - [`planner`]: a cluster's graph and live inventory in, a [`plan::ClusterPlan`] out: create
//!   (a download per node for artifacts; create, or clone then configure, for guests), update,
//!   power, mark-template, delete (prune, bounded and guarded), anomalies and skips.
//!   [`compat`]: what the cluster's PVE would refuse, checked at plan time: its version's rules
//!   (`GET /version`, read once per connection) and storages without the content a step needs.
//! - [`execute`]: runs a plan in dependency order, in parallel where independent, deferring the
//!   dependants of a failure; [`execute::CycleReport`] says what happened. Config writes that
//!   allocate or import qemu disks go through PVE's asynchronous `POST .../config` (its task
//!   awaited); a write whose answer was lost (pveproxy's `596` after 30 s) is read back before
//!   anything is written again (`config_write`).
//! - [`planes`]: publishes the desired plane before a cycle and receipts after it
//!   ([`proxops_store`]), and reads both for `get` and `status`.
//! - [`reconcile`]: the [`Reconciler`], the one cycle every writer runs (`apply`, `converge`,
//!   the agent): the cluster's lease, the desired plane through its change gate, plan and
//!   execute (bounded by one prune budget per run), receipts; a [`ClusterRun`] says how it
//!   ended ([`RunResult`]: in sync, applied, stuck, ...). [`identity`] reads guests' identity
//!   tags back, so no declared guest is pruned and no identity is on two guests.
//! - [`cycle`]: plan-and-execute building blocks without planes or lease (tests, benchmarks).
//!   [`backend`] connects to a cluster's PVE, or starts a simulator seeded from the cluster.
//! - [`demo`]: `proxops demo`, the [`Reconciler`] on simulators in a private git copy of a
//!   repository: apply, receipts, drift restored, a prune recorded ([`demo::DemoReport`]).
//! - [`lease`]: a cluster's lease held for a cycle (renewed while it runs).
//! - [`agent`]: the long-running agent of `proxops run`: a pass over every cluster each
//!   interval, under a per-cluster lease, with an HTTP endpoint for health, metrics, status and
//!   control.
//! - [`secrets`]: a cluster's SOPS secrets, decrypted once per connection, for credentials and
//!   cloud-init references (`ssh-key-refs`, `ci-password-ref`), which plans show redacted.
//! - [`privileges`]: the PVE privileges and ACL paths the planner's reads and each planned action
//!   need (what `proxops doctor` checks a token against).
//!
//! Embedding: load a repository, build a cluster's graph, plan it against a simulator.
//!
//! ```
//! use proxops_engine::backend::{Backend, connect};
//! use proxops_engine::planner::{PlanOptions, plan_cluster};
//! use proxops_graph::Graph;
//! use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/homelab");
//! let registry = Registry::builtin();
//! let repo = load_repository(&FsSource::new(dir)?, &registry, &LoadOptions::default())?;
//! let lab = repo.cluster("lab").ok_or("no cluster `lab`")?;
//! let graph = Graph::build(&registry, &lab.resources)?;
//! let plan = tokio::runtime::Runtime::new()?.block_on(async {
//!     let backend = Backend::Sim { state_file: None, task_time: std::time::Duration::from_millis(10) };
//!     let connection = connect(&registry, lab, &backend).await?;
//!     let plan = plan_cluster(&connection.client, "lab", &graph, &PlanOptions::default()).await?;
//!     Ok::<_, Box<dyn std::error::Error>>(plan)
//! })?;
//! println!("{}", serde_json::to_string_pretty(&plan)?);
//! // An empty simulator: three downloads and two creates.
//! assert_eq!(plan.actions.len(), 5);
//! # Ok(())
//! # }
//! ```

pub mod adopt;
#[cfg(feature = "agent")]
pub mod agent;
pub mod backend;
pub mod compat;
mod config_write;
pub mod cycle;
#[cfg(feature = "sim")]
pub mod demo;
pub mod desired;
pub mod diff;
pub mod execute;
mod failure;
pub mod hotplug;
pub mod identity;
pub mod lease;
pub mod plan;
pub mod planes;
pub mod planner;
pub mod privileges;
pub mod reconcile;
pub mod secrets;

pub use backend::{Backend, Connection};
pub use desired::{Driver, Drivers};
pub use execute::CycleReport;
pub use plan::{ClusterPlan, PlanState};
pub use planner::PlanOptions;
pub use reconcile::{ClusterRun, Event, ReconcileOptions, Reconciler, RunError, RunResult, Source};
