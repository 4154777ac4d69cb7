//! What can go wrong adopting: reading PVE, or writing the manifests.

use proxops_pve::PveError;
use std::path::PathBuf;

/// Errors reading guests for adoption.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// A PVE read failed.
    #[error("reading from PVE: {0}")]
    Pve(#[from] PveError),
    /// A listed vmid is not a guest of the cluster.
    #[error("vmid {0} is not a guest of the cluster")]
    NoSuchGuest(u32),
    /// Writing the repository failed.
    #[error("writing {0}: {1}")]
    Write(PathBuf, String),
}
