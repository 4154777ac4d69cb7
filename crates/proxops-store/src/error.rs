//! Errors of the store.

use crate::id::ObjectId;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The repository could not be opened.
    #[error("cannot open the git repository at {path}: {source}")]
    Open {
        /// The path given.
        path: String,
        /// What git said.
        source: BoxError,
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
        /// What git said.
        source: BoxError,
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
    /// The target cluster does not list the source among its promotion sources.
    #[error("`{from}` is not an allowed promotion source for `{to}` (allowed: {allowed})")]
    PromotionNotAllowed {
        /// The source cluster.
        from: String,
        /// The target cluster.
        to: String,
        /// Its `promotion.allowed-sources`, joined.
        allowed: String,
    },
    /// A promotion source has resources without a current receipt.
    #[error("promotion source `{cluster}` is not fully reconciled: {}", offenders.join(", "))]
    NotReconciled {
        /// The source cluster.
        cluster: String,
        /// `Kind/name (STATE: reason)` of each resource that is not CLEAN.
        offenders: Vec<String>,
    },
    /// A reference expression that can never resolve here (`fromPromotion` outside a
    /// promotion, or naming a source resource or pointer the promotion source lacks).
    #[error("{resource}: {reason}")]
    Reference {
        /// The consumer, `Kind/name`.
        resource: String,
        /// Why.
        reason: String,
    },
    /// `proxops delete` was given a UID that is not the resource's current one: it changed
    /// since the user looked (a new incarnation).
    #[error(
        "{resource} of `{cluster}` is incarnation {actual} now, not {expected}: look again (`proxops get`) before deleting it"
    )]
    StaleUid {
        /// The cluster.
        cluster: String,
        /// `Kind/name`.
        resource: String,
        /// The UID given.
        expected: String,
        /// The UID in the desired plane.
        actual: String,
    },
    /// A rollback target is not a strict ancestor of the desired head.
    #[error("revision {revision} is not an ancestor of the desired head {head} of `{cluster}`")]
    NotAncestor {
        /// The cluster.
        cluster: String,
        /// The revision asked for.
        revision: ObjectId,
        /// The desired head.
        head: ObjectId,
    },
    /// No observed snapshot held current receipts for every resource of a rollback target.
    #[error(
        "rollback target {revision} of `{cluster}` was never fully clean in one observed snapshot"
    )]
    NeverClean {
        /// The cluster.
        cluster: String,
        /// The revision asked for.
        revision: ObjectId,
    },
    /// Any other git failure.
    #[error("git: {0}")]
    Git(#[source] BoxError),
    /// An I/O failure outside git.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl StoreError {
    /// A stable code for the user-facing kind of failure (`proxops::<area>::<name>`).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Open { .. } => "proxops::store::open",
            StoreError::Revision { .. } => "proxops::store::revision",
            StoreError::RefName { .. } => "proxops::store::ref_name",
            StoreError::Conflict { .. } => "proxops::store::conflict",
            StoreError::RefUpdate { .. } => "proxops::store::ref_update",
            StoreError::Corrupt { .. } => "proxops::store::corrupt",
            StoreError::Invalid(_) => "proxops::store::invalid",
            StoreError::Exhausted { .. } => "proxops::store::exhausted",
            StoreError::GitCli { .. } => "proxops::store::git_cli",
            StoreError::Leased { .. } => "proxops::store::leased",
            StoreError::PromotionNotAllowed { .. } => "proxops::promotion::not_allowed",
            StoreError::NotReconciled { .. } => "proxops::promotion::not_reconciled",
            StoreError::Reference { .. } => "proxops::reference::unresolvable",
            StoreError::StaleUid { .. } => "proxops::delete::stale_uid",
            StoreError::NotAncestor { .. } => "proxops::rollback::not_ancestor",
            StoreError::NeverClean { .. } => "proxops::rollback::never_clean",
            StoreError::Git(_) => "proxops::store::git",
            StoreError::Io(_) => "proxops::store::io",
        }
    }

    /// Whether re-reading the plane and trying again may succeed (a lost compare-and-swap or a
    /// contended ref lock).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Conflict { .. } | StoreError::RefUpdate { .. }
        )
    }
}

/// The underlying failure of the git library, type-erased so that the store's API does not
/// name the library.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// [`StoreError::Git`] of a gix failure; a function rather than a `From` impl, which would put
/// gix's error type into the store's public API.
pub(crate) fn git(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Git(Box::new(e))
}

fn show(id: &Option<ObjectId>) -> String {
    id.map_or_else(|| "no ref".to_owned(), |id| id.to_string())
}

/// Results of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
