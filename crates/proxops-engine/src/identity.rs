//! Which resource a live guest is, read back from its identity tags, and which vmids the
//! cluster declares: what the planner needs so that no declared guest is ever pruned and no
//! identity is ever carried by two guests.
//!
//! A guest carries `proxops` and `proxops.<cluster>.<kind>.<name>` ([`identity_tag`]). The tags
//! can lag behind the repository: a resource renamed at the same vmid, a kind changed, a clone
//! whose follow-up config write never happened (it still carries its template's identity). The
//! vmid is what both sides share, so [`Guests`] indexes the cluster by it.

use proxops_graph::Graph;
use proxops_model::{Registry, ResourceKey};
use proxops_pve::{GuestInfo, Inventory};
use std::collections::BTreeMap;

/// The PVE tag every guest ProxOps creates carries.
pub const OWNER_TAG: &str = "proxops";

/// The start of every identity tag.
pub const IDENTITY_PREFIX: &str = "proxops.";

/// The tag naming which resource a guest is: `proxops.<cluster>.<kind>.<name>`, all lowercase.
/// Cluster and resource names are lowercase words joined by hyphens and kinds are letters, so the
/// tag is a valid PVE tag and the three parts can be read back unambiguously.
pub fn identity_tag(cluster: &str, kind: &str, name: &str) -> String {
    format!(
        "{IDENTITY_PREFIX}{cluster}.{}.{name}",
        kind.to_ascii_lowercase()
    )
}

/// The resources of `cluster` whose identity tags `tags` holds, in tag order (see
/// [`KindNames::identities`]).
pub fn identities(cluster: &str, graph: &Graph, tags: &[String]) -> Vec<ResourceKey> {
    KindNames::new(graph).identities(cluster, tags)
}

/// Kind names as identity tags spell them (lower case), resolved once per plan: the graph's
/// kinds (embedders' kinds included), then the built-in kinds' names and aliases.
#[derive(Debug, Default)]
pub struct KindNames(BTreeMap<String, &'static str>);

impl KindNames {
    /// The kinds of `graph` and the built-in ones.
    pub fn new(graph: &Graph) -> KindNames {
        let mut names = BTreeMap::new();
        for kind in Registry::builtin().kinds() {
            for alias in kind.aliases() {
                names.insert(alias.to_ascii_lowercase(), kind.name());
            }
            names.insert(kind.name().to_ascii_lowercase(), kind.name());
        }
        for id in graph.resources() {
            let kind = graph.kind(id);
            names.insert(kind.to_ascii_lowercase(), kind);
        }
        KindNames(names)
    }

    /// The resources of `cluster` whose identity tags `tags` holds, in tag order; a tag whose
    /// kind is unknown names no resource.
    pub fn identities(&self, cluster: &str, tags: &[String]) -> Vec<ResourceKey> {
        let prefix = format!("{IDENTITY_PREFIX}{cluster}.");
        tags.iter()
            .filter_map(|t| t.strip_prefix(&prefix))
            .filter_map(|rest| rest.split_once('.'))
            .filter_map(|(kind, name)| {
                let known = self.0.get(&kind.to_ascii_lowercase())?;
                Some(ResourceKey {
                    kind: (*known).to_owned(),
                    name: name.to_owned(),
                })
            })
            .collect()
    }
}

/// Whether a guest carries the ownership tag.
pub fn owned_by_proxops(live: &GuestInfo) -> bool {
    live.tags.iter().any(|t| t == OWNER_TAG)
}

/// Whether a guest carries no ProxOps tag at all (made by hand): at a declared vmid it is
/// adopted when its config matches the manifest (planner `Claim::Adopt`).
pub fn untagged(live: &GuestInfo) -> bool {
    !live
        .tags
        .iter()
        .any(|t| t == OWNER_TAG || t.starts_with(IDENTITY_PREFIX))
}

/// A guest resource of the cluster, as its vmid declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Declared {
    /// `Kind/name`.
    pub key: ResourceKey,
    /// The vmid of the template it clones, if it clones one.
    pub clone_of: Option<u32>,
}

impl Declared {
    /// The resource `key`, cloning the template `clone_of` if any.
    pub fn new(key: ResourceKey, clone_of: Option<u32>) -> Declared {
        Declared { key, clone_of }
    }
}

/// The cluster's declared vmids and the live guests carrying each identity.
#[derive(Debug, Default)]
pub struct Guests {
    kinds: KindNames,
    declared: BTreeMap<u32, Declared>,
    vmid_of: BTreeMap<ResourceKey, u32>,
    carriers: BTreeMap<ResourceKey, Vec<u32>>,
}

impl Guests {
    /// Indexes `graph`'s guest steps and `inventory`'s tagged guests. `clone_of` gives a
    /// resource's clone source vmid (from its driver; `None` when it clones nothing or cannot
    /// be mapped).
    pub fn new(
        cluster: &str,
        graph: &Graph,
        inventory: &Inventory,
        clone_of: impl Fn(&ResourceKey) -> Option<u32>,
    ) -> Guests {
        let mut guests = Guests {
            kinds: KindNames::new(graph),
            ..Guests::default()
        };
        for step in graph.steps() {
            let Some(vmid) = step.vmid else { continue };
            let key = graph.key(step.resource);
            guests.vmid_of.insert(key.clone(), vmid);
            let clone_of = clone_of(&key);
            guests.declared.insert(vmid, Declared { key, clone_of });
        }
        for live in inventory.guests.values() {
            if !owned_by_proxops(live) {
                continue;
            }
            for key in guests.kinds.identities(cluster, &live.tags) {
                guests.carriers.entry(key).or_default().push(live.vmid);
            }
        }
        for vmids in guests.carriers.values_mut() {
            vmids.sort_unstable();
            vmids.dedup();
        }
        guests
    }

    /// The resources of `cluster` a guest's `tags` name.
    pub fn identities(&self, cluster: &str, tags: &[String]) -> Vec<ResourceKey> {
        self.kinds.identities(cluster, tags)
    }

    /// Whether any resource of the cluster declares `vmid`: such a guest is never pruned.
    pub fn is_declared(&self, vmid: u32) -> bool {
        self.declared.contains_key(&vmid)
    }

    /// The resource declared at `vmid`.
    pub fn declared_at(&self, vmid: u32) -> Option<&Declared> {
        self.declared.get(&vmid)
    }

    /// The vmid `key` declares.
    pub fn vmid_of(&self, key: &ResourceKey) -> Option<u32> {
        self.vmid_of.get(key).copied()
    }

    /// The guests other than vmid `own` that carry `key`'s identity, except clones of `key`
    /// (a template) at vmids their own resources declare: those are half-configured clones
    /// that their own step repairs.
    pub fn other_carriers(&self, key: &ResourceKey, own: u32) -> Vec<u32> {
        self.carriers
            .get(key)
            .into_iter()
            .flatten()
            .copied()
            .filter(|v| *v != own)
            .filter(|v| {
                self.declared
                    .get(v)
                    .is_none_or(|d| d.clone_of.is_none_or(|t| t != own))
            })
            .collect()
    }
}
