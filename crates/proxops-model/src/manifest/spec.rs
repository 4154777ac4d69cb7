//! The decoded `spec` of a manifest, one variant per built-in spec type: above the kinds' spec
//! types and below their [`KindDef`](crate::kind::KindDef)s, which decode into it.

use crate::kinds::artifact_spec::ArtifactSpec;
use crate::kinds::lxc_spec::LxcSpec;
use crate::kinds::object_spec::ObjectSpec;
use crate::kinds::vm_spec::VmSpec;
use serde::Serialize;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A spec of an embedder-registered kind.
pub trait CustomSpec: Any + fmt::Debug + Send + Sync {
    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
    /// The spec as JSON (for output and the planes).
    fn to_json(&self) -> serde_json::Value;
}

/// The decoded `spec` of a manifest.
// Resources live behind an `Arc` each; boxing the large variants would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Spec {
    /// `VM` and `TemplateVM`.
    Vm(VmSpec),
    /// `LXC` and `TemplateCT`.
    Lxc(LxcSpec),
    /// `ISO`, `CTTemplate` and `DiskImage`.
    Artifact(ArtifactSpec),
    /// A cluster object: `Storage`, `Pool`, `BackupJob`, `ResourceMapping`, `User`, `Group`,
    /// `Role`, `Acl`.
    Object(ObjectSpec),
    /// A kind registered by an embedder.
    Custom(Arc<dyn CustomSpec>),
}

impl Serialize for Spec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Spec::Vm(v) => v.serialize(s),
            Spec::Lxc(v) => v.serialize(s),
            Spec::Artifact(v) => v.serialize(s),
            Spec::Object(v) => v.serialize(s),
            Spec::Custom(v) => v.to_json().serialize(s),
        }
    }
}
