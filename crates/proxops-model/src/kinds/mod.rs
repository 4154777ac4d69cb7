//! The built-in kinds: spec types, their checks and their [`crate::kind::KindDef`]s.
//!
//! Layered so that no file imports one that imports it back: the shared facts (`basics`), value
//! types and checks (`placement`, `common`, ...), each kind's spec types (`*_spec`, which
//! [`crate::Spec`] holds), then each kind's checks and definition (`vm`, `lxc`, `artifact`, which
//! decode into `Spec` and re-export their spec types). The children import from each other's
//! defining file, never from this module's re-exports.

pub mod artifact;
pub(crate) mod artifact_spec;
mod basics;
pub mod common;
pub mod firewall_spec;
pub mod lxc;
pub(crate) mod lxc_spec;
pub mod object;
mod object_checks;
pub(crate) mod object_spec;
pub mod passthrough;
pub mod placement;
pub mod reach;
pub mod update_policy;
pub mod vm;
mod vm_checks;
pub mod vm_devices;
pub(crate) mod vm_spec;

pub use artifact::{ArtifactClass, ArtifactKind, ArtifactSpec, Checksum, ChecksumAlgorithm};
pub use common::PowerState;
pub use lxc::{LxcKind, LxcSpec};
pub use object::{ObjectClass, ObjectKind, ObjectSpec};
pub use object_checks::entry_string;
pub use placement::{HaSpec, HaState};
pub use update_policy::{UpdatePolicy, VerifyPolicy};
pub use vm::{VmKind, VmSpec};
pub use vm_checks::drive_slots;
