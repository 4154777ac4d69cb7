//! The [`KindDef`] trait: above the spec types (it decodes into [`Spec`]) and below the registry,
//! so a kind implements it without importing the registry that lists the built-in kinds.

use super::context::SpecContext;
use super::terms::{
    Identity, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceView,
    StorageUse, Unreachable,
};
use crate::manifest::spec::Spec;

/// The definition of one manifest kind.
pub trait KindDef: Send + Sync + 'static {
    /// The canonical name written in `kind:`.
    fn name(&self) -> &'static str;
    /// Other spellings seen in the wild; rejected with a hint naming [`KindDef::name`].
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// The directory root of the kind's manifests (`vm`, `lxc`, ...).
    fn root(&self) -> &'static str;
    /// How PVE identifies the kind's objects.
    fn identity(&self) -> Identity;
    /// The planes the kind appears in.
    fn planes(&self) -> &'static [Plane];
    /// The fields that name other resources.
    fn reference_fields(&self) -> &'static [ReferenceField];
    /// Decodes and checks a spec, reporting problems through `cx`; `None` if it is unusable.
    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec>;
    /// Nodes and vmid of a decoded spec.
    fn placement(&self, spec: &Spec) -> Placement;
    /// The structured references of a decoded spec.
    fn references(&self, spec: &Spec) -> Vec<Reference>;
    /// The storages a decoded spec puts data on, with the content type each needs (used to check
    /// and seed storages, and to name the storage privileges a plan needs). None by default.
    fn storages(&self, _spec: &Spec) -> Vec<StorageUse> {
        Vec::new()
    }
    /// [`KindDef::placement`] without paths. Override it to borrow from the spec: the graph
    /// calls it for every resource of a cluster.
    fn placement_view<'s>(&self, spec: &'s Spec) -> PlacementView<'s> {
        self.placement(spec).into()
    }
    /// [`KindDef::references`] without paths, the same references in the same order. Override
    /// it to borrow from the spec: the graph calls it for every resource of a cluster.
    fn reference_views<'s>(&self, spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        self.references(spec).into_iter().map(Into::into).collect()
    }
    /// The id PVE knows the object by when the spec sets one that differs from `metadata.name`
    /// (a storage's `id`, a user's `userid`): inferred references may name the resource by it.
    fn pve_id<'s>(&self, _spec: &'s Spec) -> Option<&'s str> {
        None
    }
    /// The JSON Schema of the spec (use `generator.subschema_for::<YourSpec>()`).
    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;
    /// Why artifact `name` of a resource with `spec` can never hold what `pointer` reads, when
    /// the kind knows its receipts' artifacts; `None` when it may, or when the kind does not
    /// say (the default). `validate` then refuses a consumer that would wait forever.
    fn artifact_unreachable(
        &self,
        _spec: &Spec,
        _name: &str,
        _pointer: &crate::pointer::Pointer,
    ) -> Option<Unreachable> {
        None
    }
}
