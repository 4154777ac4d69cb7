//! Errors of the store.

use gix::ObjectId;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The repository could not be opened.
    #[error("cannot open the git repository at {path}: {source}")]
    Open {
        /// The path given.
        path: String,
        /// What gix said.
        source: Box<gix::Error>,
    },
    /// A revision did not resolve to a commit.
    #[error("revision `{revision}` does not name a commit: {reason}")]
    Revision {
        /// The revision as given.
        revision: String,
        /// Why not.
        reason: String,
    },
    /// A ref name is not usable for a plane.
    #[error("invalid plane ref `{name}`: {reason}")]
    RefName {
        /// The name as given.
        name: String,
        /// Why not.
        reason: String,
    },
    /// Compare-and-swap lost: the ref moved since the caller read it. Re-read and retry.
    #[error(
        "ref {name} moved: expected {}, found {}",
        show(expected),
        show(actual)
    )]
    Conflict {
        /// The full ref name.
        name: String,
        /// The value the caller authorized the change against (`None`: must not exist).
        expected: Option<ObjectId>,
        /// The value found.
        actual: Option<ObjectId>,
    },
    /// The ref transaction failed although the ref still has the expected value (typically a
    /// lock held by a concurrent writer). Retrying may succeed.
    #[error("cannot update ref {name}: {source}")]
    RefUpdate {
        /// The full ref name.
        name: String,
        /// What gix said.
        source: Box<gix::Error>,
    },
    /// A plane holds something this version cannot read.
    #[error("{path} in {plane}: {reason}")]
    Corrupt {
        /// The plane (ref) read.
        plane: String,
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Another live process holds the cluster's lease.
    #[error(
        "cluster `{cluster}` is being reconciled by {holder} (pid {pid} on {host}) until {expires}"
    )]
    Leased {
        /// The cluster.
        cluster: String,
        /// The holder's name.
        holder: String,
        /// The holder's host.
        host: String,
        /// The holder's process id.
        pid: u32,
        /// When the lease expires unless renewed.
        expires: String,
    },
    /// Invalid input from the caller (a name that cannot be a path segment, ...).
    #[error("{0}")]
    Invalid(String),
    /// Publishing gave up after retries.
    #[error("gave up publishing to {name} after {attempts} attempts: {last}")]
    Exhausted {
        /// The full ref name.
        name: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last conflict.
        last: Box<StoreError>,
    },
    /// The git CLI (used for pushing) failed.
    #[error("git {command} failed: {stderr}")]
    GitCli {
        /// The subcommand.
        command: String,
        /// Its standard error.
        stderr: String,
    },
    /// Any other git failure.
    #[error("git: {0}")]
    Git(#[from] Box<gix::Error>),
    /// An I/O failure outside git.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// Whether re-reading the plane and trying again may succeed (a lost compare-and-swap or a
    /// contended ref lock).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Conflict { .. } | StoreError::RefUpdate { .. }
        )
    }
}

impl From<gix::Error> for StoreError {
    fn from(e: gix::Error) -> Self {
        StoreError::Git(Box::new(e))
    }
}

fn show(id: &Option<ObjectId>) -> String {
    id.map_or_else(|| "no ref".to_owned(), |id| id.to_string())
}

/// Results of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
