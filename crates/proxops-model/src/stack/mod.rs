//! Stacks: a `StackTemplate` (under `stacktemplate/base/` or `stacktemplate/<cluster>/`) declares
//! typed parameters and resource templates; a `Stack` (under `stack/<cluster>/`) names a template
//! and supplies its parameters. Each Stack projects resources named
//! `<stack>-<logical>[-<item>]` that the cluster then validates, orders and reconciles like
//! hand-written manifests.
//!
//! - `decode`: the two kinds' files, checked in themselves ([`load_stack_file`]).
//! - [`expr`]: `{fromParameter: {name: x}}` and `{fromItem: {pointer: /p}}` recognised and
//!   substituted on the YAML tree before the projected manifest is decoded, so the normal
//!   decoding and validation see plain values. Other expression forms (`fromArtifact`, ...)
//!   are left in place for their own resolution.
//! - `project`: one cluster's Stacks against its templates ([`project_cluster`]).
//!
//! Projected resources keep labels in the template's file (where each value is written, or the
//! expression that put it there) and carry a [`StackOrigin`] that adds a label in the Stack's
//! file: see [`crate::manifest::Resource::label`].

mod decode;
pub mod expr;
pub mod origin;
mod params;
mod project;
pub(crate) mod spec;
mod substitute;

pub use decode::{LoadedStack, load_stack_file};
pub use origin::{StackOrigin, StackValue};
pub use project::{ProjectedCluster, project_cluster};
// Defined below decoding and projection, which import them from there.
pub use spec::{
    ItemFieldType, ParameterDecl, ParameterType, STACK, STACK_ROOT, STACK_TEMPLATE, StackDocument,
    StackInstance, StackSpec, StackTemplateSpec, TEMPLATE_ROOT, TemplateResource, kind_of_root,
};
