//! ProxOps' git planes.
//!
//! - [`GitSource`] reads the source plane (the user's repository) at one exact commit, for
//!   [`proxops_model::load_repository`].
//! - [`Store`] is a repository holding the planes of every cluster, named by [`PlaneRefs`]
//!   (`proxops/desired/<cluster>`, `proxops/observed/<cluster>`).
//! - The desired plane ([`desired`]): [`Store::publish_desired`] writes a cluster's resolved,
//!   secret-free resources and configuration, mints each resource's UID at first publication,
//!   turns removed resources into [`documents::DeletionIntent`]s and drops those whose teardown
//!   was observed; [`DesiredState`] is what it reads back.
//! - The observed plane ([`observed`]): [`Store::publish_observations`] writes receipts,
//!   artifacts and teardown evidence, rebuilding on the newest head and retrying when another
//!   writer moved it; [`ObservedState`] is what it reads back.
//! - [`state::derive`] (and [`Store::view`]) join both planes: each resource is CLEAN, READY,
//!   WAIT or DELETING and each receipt and artifact current, stale or orphan, computed when
//!   read and never stored.
//! - Every document is serialised canonically ([`canonical`]): the same content, the same blob
//!   id. Refs move only by compare-and-swap; a lost race is
//!   [`StoreError::Conflict`], which [`StoreError::is_retryable`] says can be retried.
//!
//! - [`deletion`]: [`Store::request_deletion`] records `proxops delete`'s UID-fenced deletion
//!   intents for resources still composed; publication keeps them out of the plane until
//!   their teardown is observed and their manifests leave the composition.
//! - [`lease`]: a per-cluster [`Lease`] (a ref with holder and expiry) keeps two processes from
//!   reconciling one cluster at once; [`Store::break_lease`] recovers one whose holder is gone.
//! - Change gates ([`gate`]): with `pullRequest` a desired publication proposes a candidate
//!   branch `proxops/candidates/<cluster>/<id>` on the live head instead of moving it.
//! - [`Store::promote`] ([`promotion`]) builds a target cluster's desired plane from its own
//!   composition, pinned to a source cluster whose every resource has a current receipt, and
//!   records a `promotion.yaml`; [`Store::rollback`] ([`rollback`]) publishes a historical
//!   desired snapshot as a new forward commit, if one observed snapshot saw it all clean.
//! - A publication's new objects are written as one pack when there are many.
//! - With a remote ([`Store::with_remote`], [`remote`]) heads are read from it and
//!   publications pushed with `git push --atomic --force-with-lease`.
//!
//! Everything is built on gix: reading, object writing and local ref transactions; only
//! pushing and fetching run the git CLI. No gix type is part of this crate's API: commits,
//! trees and blobs are named by the store's own [`ObjectId`], and git failures reach callers
//! type-erased in [`StoreError`].

pub(crate) mod build;
pub mod canonical;
pub mod deletion;
pub mod desired;
pub mod documents;
pub mod error;
pub mod gate;
pub(crate) mod git;
mod id;
pub mod lease;
pub mod materialized;
pub mod observed;
pub(crate) mod pack;
pub mod promotion;
pub mod refs;
pub mod remote;
pub(crate) mod resolve;
pub mod rollback;
pub mod source;
pub mod stacks;
pub mod state;
pub mod store;

pub use desired::{DesiredOptions, DesiredPublication, DesiredState, Publication};
pub use error::{Result, StoreError};
pub use gate::Candidate;
pub use git::CommitInfo;
pub use id::{ObjectId, ParseIdError};
pub use lease::{Holder, Lease, LeaseRecord};
pub use observed::{Observation, ObservationBatch, ObservedState, TeardownRecord};
pub use promotion::{PromotionOutcome, PromotionRequest};
pub use refs::PlaneRefs;
pub use remote::{GitToken, Remote};
pub use rollback::{RollbackOutcome, RollbackRequest};
pub use source::GitSource;
pub use state::{ClusterView, Freshness, ObservationState, ResourceState};
pub use store::{Plane, Store};
