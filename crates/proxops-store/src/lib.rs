//! ProxOps' git planes.
//!
//! - [`GitSource`] reads the source plane (the user's repository) at one exact commit, for
//!   [`proxops_model::load_repository`].
//!
//! Everything is built on gix: reading, object writing and local compare-and-swap ref
//! transactions. Errors are [`StoreError`].

pub mod error;
pub mod git;
pub mod source;

pub use error::{Result, StoreError};
pub use gix::ObjectId;
pub use source::GitSource;
