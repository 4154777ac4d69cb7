//! A cluster as the loader gives it: made by the loader's parts, which import it from here.

use crate::config::{ClusterEntry, ConfigFile};
use crate::manifest::Resource;
use crate::stack::StackInstance;
use std::sync::Arc;

/// A cluster as loaded: its endpoint entry and the resources its composition lists.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The name (its directory under `clusters/`).
    pub name: String,
    /// The `pve.clusters.<name>` entry, if the config was usable.
    pub entry: Option<ClusterEntry>,
    /// The cluster's whole config file, if usable: its `pve` and `reconcile` settings are
    /// layered over `proxops.yaml` ([`crate::settings::effective`]).
    pub config: Option<ConfigFile>,
    /// The resources of the composition that decoded without error, in path order, then
    /// those its Stacks projected, Stack by Stack.
    pub resources: Vec<Arc<Resource>>,
    /// The Stacks of the composition that projected without error, in path order.
    pub stacks: Vec<StackInstance>,
    /// Whether the cluster has no error (warnings allowed).
    pub valid: bool,
}
