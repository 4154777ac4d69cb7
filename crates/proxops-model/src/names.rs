//! Small facts every layer of the model shares, with no dependency inside the crate: the
//! names a manifest may use, a resource's identity, PVE's two guest types.

use serde::Serialize;
use std::fmt;

/// Whether `name` follows the resource naming rule: lowercase letters and digits in words joined
/// by single hyphens, at most 63 characters (a DNS label, so it can become a PVE guest name).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Whether `node` can be a PVE node name (a host name label).
pub fn is_valid_node(node: &str) -> bool {
    !node.is_empty()
        && node.len() <= 63
        && node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !node.starts_with('-')
        && !node.ends_with('-')
}

/// Whether `id` can be a PVE storage id.
pub fn is_valid_storage(id: &str) -> bool {
    id.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// (kind, name): a resource's identity within a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ResourceKey {
    /// The canonical kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// The two guest types PVE has (the one definition, in `proxops-pve-schema`).
pub use proxops_pve_schema::GuestType;

/// The Rust name of [`SecretSource`], which the decoder recognises to refuse a secret written
/// in place ([`crate::Code::PlainSecret`]) without echoing it.
pub(crate) const SECRET_SOURCE_STRUCT: &str = "SecretSource";
