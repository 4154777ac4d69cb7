//! The ProxOps engine: from a validated cluster and live PVE state to the actions that make PVE
//! match the repository.
//!
//! # The principal types, at the crate root
//!
//! - [`Reconciler`] (built with [`Reconciler::builder`], a [`ReconcilerBuilder`], run with
//!   [`ReconcileOptions`]): the one cycle every writer runs (`apply`, `converge`, the agent): the
//!   cluster's lease, the desired plane through its change gate, plan and execute (bounded by one
//!   prune budget per run), receipts. It reconciles a [`Source`] (a loaded repository, a
//!   cluster's graph, the commit); a [`ClusterRun`] says how it ended ([`RunResult`]: in sync,
//!   applied, stuck, ...; [`RunError`]s), each [`CycleRun`] what one cycle planned and did, and
//!   [`Event`]s tell each step as it happens.
//! - [`Backend`]: a cluster's PVE, or a simulator seeded from the cluster (feature `sim`);
//!   [`connect`] gives a [`Connection`] (the PVE client, the cluster's secrets) or a
//!   [`ConnectError`].
//! - [`plan_cluster`] with [`PlanOptions`] (or [`PlanError`]) gives a [`ClusterPlan`]: its
//!   [`Action`]s ([`Verb`]: create, update, power, mark-template, delete, ...), anomalies and
//!   skips; [`PlanState`] sums it up.
//! - [`execute()`] with [`ExecOptions`] runs a plan and gives a [`CycleReport`]: an
//!   [`ActionResult`] per action, whose [`Outcome`] is succeeded, deferred, not started or
//!   failed with an [`ActionError`] classified by its [`FailureKind`] (PVE refused, a task
//!   failed, unreachable, the answer lost, ...).
//! - [`Drivers`]: one [`Driver`] per kind, by kind name (embedders register drivers for kinds
//!   of their own), turning a manifest into a [`Desired`] resource: a [`DesiredGuest`] or a
//!   [`DesiredArtifact`].
//! - Adopting guests PVE already runs: [`adopt_live`] with an [`AdoptContext`] and a
//!   [`Selection`], one [`AdoptOutcome`] per guest ([`Adopted`], with its [`AdoptReport`], or an
//!   [`AdoptRefusal`]); [`AdoptError`]. [`LiveGuest`] is the input of [`adopt::adopt`].
//! - [`sim`] (feature `sim`): [`sim::SimSeed`].
//!
//! Public enums and the option and report structs are `#[non_exhaustive]`: options are built
//! with `Default` (or a constructor) and `with_*` setters, reports are read.
//!
//! # The modules
//!
//! - [`desired`]: the kind drivers. Only what a manifest sets is owned, so fields PVE fills in
//!   never cause a diff.
//! - [`diff`]: compares a [`DesiredGuest`] with a guest's live config in PVE's canonical forms
//!   (property strings through `proxops_pve::props`), giving the keys to set, disks to grow,
//!   whether a restart is needed, and anomalies that are never fixed automatically (disk
//!   shrink, storage moves).
//! - [`planner`]: a cluster's graph and live inventory in, a [`ClusterPlan`] out: create (a
//!   download per node for artifacts; create, or clone then configure, for guests), update,
//!   power, mark-template, delete (prune, bounded and guarded), anomalies and skips. It also
//!   checks what the cluster's PVE would refuse: its version's rules (`GET /version`, read once
//!   per connection) and storages without the content a step needs.
//! - [`mod@execute`]: runs a plan in dependency order, in parallel where independent, deferring the
//!   dependants of a failure. Config writes that allocate or import qemu disks go through PVE's
//!   asynchronous `POST .../config` (its task awaited); a write whose answer was lost
//!   (pveproxy's `596` after 30 s) is read back before anything is written again.
//! - [`planes`]: publishes the desired plane before a cycle and receipts after it
//!   ([`proxops_store`]), and reads both for `get` and `status`.
//! - [`reconcile`]: the [`Reconciler`] and its lease. [`identity`] reads guests' identity tags
//!   back, so no declared guest is pruned and no identity is on two guests.
//! - [`cycle`]: plan-and-execute building blocks without planes or lease (tests, benchmarks).
//!   [`backend`] connects to a cluster's PVE, or starts a simulator seeded from the cluster.
//! - [`init`]: `proxops init`, a new repository for one cluster (credentials encrypted with
//!   SOPS, validated, optionally adopting the live guests, first commit).
//! - [`secrets`]: a cluster's SOPS secrets, decrypted once per connection, for credentials and
//!   cloud-init references (`ssh-key-refs`, `ci-password-ref`), which plans show redacted.
//! - [`verify`]: `proxops verify`, live PVE against what the planes say was reconciled (only
//!   reads): in sync, drifted (the owned keys that differ), missing, or not verified.
//! - [`privileges`]: the PVE privileges and ACL paths the planner's reads and each planned action
//!   need (what `proxops doctor` checks a token against).
//!
//! Embedding: load a repository, build a cluster's graph, plan it against a simulator. The
//! whole cycle, planes and all, through [`Reconciler`]: `examples/embed` in the repository.
//! The agent of `proxops run` is such an embedder: the crate `proxops-agent`, on this public API.
//!
//! ```
//! use proxops_engine::{Backend, PlanOptions, connect, plan_cluster};
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
pub mod backend;
mod compat;
pub mod cycle;
pub mod desired;
pub mod diff;
pub mod doctor;
pub mod execute;
mod failure;
pub mod guard;
mod guest_config;
mod hotplug;
pub mod identity;
pub mod init;
mod lease;
pub mod materialize;
pub mod objects;
pub mod plan;
pub mod planes;
pub mod planner;
pub mod privileges;
pub mod reconcile;
pub mod refusals;
pub mod secrets;
pub mod verify;
pub mod workspace;

pub use adopt::{
    AdoptContext, AdoptError, AdoptRefusal, AdoptReport, Adopted, LiveGuest,
    Outcome as AdoptOutcome, Selection, adopt_live,
};
pub use backend::{Backend, ConnectError, Connection, connect};
pub use desired::{Desired, DesiredArtifact, DesiredGuest, Driver, Drivers};
pub use execute::{
    ActionError, ActionResult, CycleReport, ExecOptions, FailureKind, Outcome, execute,
};
pub use plan::{Action, ClusterPlan, PlanState, Verb};
pub use planner::{PlanError, PlanOptions, plan_cluster};
pub use reconcile::{
    ClusterRun, CycleRun, Event, ReconcileOptions, Reconciler, ReconcilerBuilder, RunError,
    RunResult, Source,
};

/// The simulator backend's seeding (feature `sim`); [`Backend::Sim`] starts a simulator.
#[cfg(feature = "sim")]
pub mod sim {
    pub use crate::backend::SimSeed;
}
