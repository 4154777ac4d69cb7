//! The built-in kinds: spec types, their checks and their [`crate::kind::KindDef`]s.

pub mod artifact;
mod basics;
pub mod common;
pub mod lxc;
pub mod passthrough;
pub mod placement;
pub mod reach;
pub mod update_policy;
pub mod vm;
mod vm_checks;
pub mod vm_devices;

pub use artifact::{ArtifactClass, ArtifactKind, ArtifactSpec, Checksum, ChecksumAlgorithm};
pub use common::PowerState;
pub use lxc::{LxcKind, LxcSpec};
pub use placement::{HaSpec, HaState};
pub use update_policy::{UpdatePolicy, VerifyPolicy};
pub use vm::{VmKind, VmSpec};
pub use vm_checks::drive_slots;
