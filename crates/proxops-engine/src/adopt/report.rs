//! What adopting one guest made of each of its config keys, and why a guest is refused.

use serde::Serialize;

/// Where one live config key went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "to")]
#[non_exhaustive]
pub enum Placement {
    /// Written as the typed manifest field `field` (its path under `spec`, or `kind`).
    Typed {
        /// The field's path.
        field: String,
    },
    /// Written under `pve-config`, verbatim.
    PveConfig,
    /// Not written to the manifest: why (and, where there is one, what to do).
    Reported {
        /// The reason.
        reason: String,
    },
}

/// One config key of the live guest and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KeyPlacement {
    /// The config key (`cores`, `net0`, `lxc.idmap`, `snapshot:pre-upgrade`).
    pub key: String,
    /// Where it went.
    #[serde(flatten)]
    pub placement: Placement,
}

/// The report of adopting one guest: every config key, in key order, and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AdoptReport {
    /// The guest's vmid.
    pub vmid: u32,
    /// The manifest kind written (`VM`, `TemplateVM`, `LXC`, `TemplateCT`).
    pub kind: String,
    /// The resource name (`metadata.name`).
    pub name: String,
    /// Every key of the live config, and where it went.
    pub keys: Vec<KeyPlacement>,
    /// Relationships the manifest cannot express (a linked clone's template).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl AdoptReport {
    /// How many keys went to typed fields, to `pve-config`, and were reported.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for k in &self.keys {
            match k.placement {
                Placement::Typed { .. } => c.0 += 1,
                Placement::PveConfig => c.1 += 1,
                Placement::Reported { .. } => c.2 += 1,
            }
        }
        c
    }

    /// The keys that were not written to the manifest, with why.
    pub fn reported(&self) -> impl Iterator<Item = (&str, &str)> {
        self.keys.iter().filter_map(|k| match &k.placement {
            Placement::Reported { reason } => Some((k.key.as_str(), reason.as_str())),
            _ => None,
        })
    }
}

/// Why a guest is not adopted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptRefusal {
    /// The guest already carries a ProxOps identity tag.
    #[error(
        "vmid {vmid} already carries the ProxOps identity `{tag}`: it is managed (or claimed by another cluster or resource), not adoptable"
    )]
    Claimed {
        /// The vmid.
        vmid: u32,
        /// The identity tag it carries.
        tag: String,
    },
    /// The guest's node is not in the cluster's node allowlist.
    #[error(
        "vmid {vmid} is on node `{node}`, which is not in cluster `{cluster}`'s node allowlist"
    )]
    NodeNotAllowed {
        /// The vmid.
        vmid: u32,
        /// Its node.
        node: String,
        /// The cluster.
        cluster: String,
    },
    /// The repository already declares a resource at this vmid.
    #[error("vmid {vmid} is already declared by `{resource}` in the repository")]
    VmidDeclared {
        /// The vmid.
        vmid: u32,
        /// The declaring resource (`Kind/name`).
        resource: String,
    },
}
