//! The ProxOps engine: from a validated cluster and live PVE state to the actions that make PVE
//! match the repository.
//!
//! - [`desired`]: one driver per kind turns a manifest into a [`desired::DesiredGuest`] (the PVE
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
//! - [`execute`]: runs a plan in dependency order, in parallel where independent, deferring the
//!   dependants of a failure; [`execute::CycleReport`] says what happened.
//! - [`cycle`]: one reconcile cycle, and cycles until converged. [`backend`] connects to a
//!   cluster's PVE, or starts a simulator seeded from the cluster.

pub mod backend;
pub mod cycle;
pub mod desired;
pub mod diff;
pub mod execute;
pub mod plan;
pub mod planner;
