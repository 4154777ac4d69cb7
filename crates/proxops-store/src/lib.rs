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
//! - Every document is serialised canonically ([`canonical`]): the same content, the same blob
//!   id. Refs move only by compare-and-swap ([`git::compare_and_swap`]); a lost race is
//!   [`StoreError::Conflict`], which [`StoreError::is_retryable`] says can be retried.
//!
//! Everything is built on gix: reading, object writing and local ref transactions.

pub mod canonical;
pub mod desired;
pub mod documents;
pub mod error;
pub mod git;
pub mod refs;
pub mod source;
pub mod store;

pub use desired::{DesiredOptions, DesiredPublication, DesiredState, Publication};
pub use error::{Result, StoreError};
pub use gix::ObjectId;
pub use refs::PlaneRefs;
pub use source::GitSource;
pub use store::{Plane, Store};
