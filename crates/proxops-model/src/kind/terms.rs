//! The terms a [`KindDef`](super::KindDef) answers in: how PVE identifies a kind's objects, its
//! planes, references, storages and placement. Plain data below the kinds, which return them.

use crate::names::GuestType;
use crate::yaml::PathSeg;
use std::borrow::Cow;

/// How PVE identifies objects of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Identity {
    /// A guest in the cluster-wide vmid pool.
    Guest {
        /// QEMU (`qm`) or container (`lxc`).
        guest: GuestType,
        /// Whether the guest is a template.
        template: bool,
    },
    /// A file on a storage, identified by (node, storage, filename).
    StorageArtifact {
        /// PVE's content type (`iso`, `vztmpl`, `import`).
        content: &'static str,
    },
    /// A cluster-wide object PVE identifies by an id of its own (a storage, a pool, a backup
    /// job, a resource mapping, a user, a group, a role, an ACL entry).
    ClusterObject,
    /// Something else (embedder kinds).
    Other,
}

/// The git planes in which a kind's resources appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Plane {
    /// `proxops/desired/<cluster>`: the resolved resource.
    Desired,
    /// `proxops/observed/<cluster>`: receipts and artifacts.
    Observed,
}

/// A field of a kind that names another resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceField {
    /// The field, e.g. `hardware.cdrom.iso` or `disks[].image`.
    pub field: &'static str,
    /// The kind of resource it names.
    pub target: &'static str,
}

/// How a reference came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ReferenceSource {
    /// A structured spec field.
    Structured,
    /// The `proxops/depends-on` annotation.
    Annotation,
    /// A reference expression (`fromArtifact`, `fromReceipt`): the consumer reads what the
    /// producer became, so it is created after it and pruned before it.
    Expression,
    /// A value naming a cluster object that may or may not be declared (a disk's storage, a
    /// passthrough mapping, a backup job's pool): an edge when the target is declared, nothing
    /// when it is not (PVE's own `local`, an object made by hand).
    Inferred,
}

impl ReferenceSource {
    /// Its name in reports (`structured`, `annotation`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceSource::Structured => "structured",
            ReferenceSource::Annotation => "annotation",
            ReferenceSource::Expression => "expression",
            ReferenceSource::Inferred => "inferred",
        }
    }
}

/// One concrete reference from a resource to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The field it comes from (`hardware.cdrom.iso`, or `proxops/depends-on`).
    pub field: &'static str,
    /// The kind of the target.
    pub target_kind: String,
    /// The `metadata.name` of the target.
    pub target_name: String,
    /// Path of the node holding it, from the document root (for labels).
    pub path: Vec<PathSeg>,
    /// Whether the target must be placed on the referencing guest's node (artifacts used by a
    /// guest must be on its node).
    pub same_node: bool,
    /// Structured or annotation.
    pub source: ReferenceSource,
}

impl Reference {
    /// A structured reference from the spec field at `spec_path` (relative to `spec`).
    pub fn structured(
        field: &'static str,
        target_kind: &str,
        target_name: &str,
        spec_path: &[PathSeg],
        same_node: bool,
    ) -> Reference {
        let mut path = vec![PathSeg::from("spec")];
        path.extend_from_slice(spec_path);
        Reference {
            field,
            target_kind: target_kind.to_owned(),
            target_name: target_name.to_owned(),
            path,
            same_node,
            source: ReferenceSource::Structured,
        }
    }
}

impl Reference {
    /// The reference without its YAML path, borrowing its names.
    pub fn view(&self) -> ReferenceView<'_> {
        ReferenceView {
            field: self.field,
            target_kind: Cow::Borrowed(&self.target_kind),
            target_name: Cow::Borrowed(&self.target_name),
            same_node: self.same_node,
            source: self.source,
        }
    }
}

/// A reference as ordering needs it: no YAML path, names borrowed from the decoded spec where the
/// kind can (see [`KindDef::reference_views`](super::KindDef::reference_views)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceView<'a> {
    /// The field it comes from.
    pub field: &'static str,
    /// The kind of the target.
    pub target_kind: Cow<'a, str>,
    /// The `metadata.name` of the target.
    pub target_name: Cow<'a, str>,
    /// Whether the target must be on the referencing guest's node.
    pub same_node: bool,
    /// Structured or annotation.
    pub source: ReferenceSource,
}

impl From<Reference> for ReferenceView<'static> {
    fn from(r: Reference) -> Self {
        ReferenceView {
            field: r.field,
            target_kind: Cow::Owned(r.target_kind),
            target_name: Cow::Owned(r.target_name),
            same_node: r.same_node,
            source: r.source,
        }
    }
}

/// A storage a resource puts something on, and the PVE content type it needs enabled there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StorageUse {
    /// The storage id (`local`, `local-lvm`, ...).
    pub storage: String,
    /// PVE's content type: `images`, `rootdir`, `iso`, `vztmpl` or `import`.
    pub content: &'static str,
}

/// Nodes and vmid as ordering needs them: no YAML paths, node names borrowed where the kind can
/// (see [`KindDef::placement_view`](super::KindDef::placement_view)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementView<'a> {
    /// Node names, in manifest order.
    pub nodes: Vec<Cow<'a, str>>,
    /// The guest id.
    pub vmid: Option<u32>,
}

impl From<Placement> for PlacementView<'static> {
    fn from(p: Placement) -> Self {
        PlacementView {
            nodes: p.nodes.into_iter().map(|(n, _)| Cow::Owned(n)).collect(),
            vmid: p.vmid,
        }
    }
}

/// Where a resource lives on PVE: its nodes (with the path of each, relative to `spec`) and its
/// vmid if it has one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Nodes and the spec path naming each.
    pub nodes: Vec<(String, Vec<PathSeg>)>,
    /// The guest id.
    pub vmid: Option<u32>,
}

/// Why an artifact a reference expression reads can never be there
/// ([`KindDef::artifact_unreachable`](super::KindDef::artifact_unreachable)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreachable {
    /// Why, in words (`it has no NIC `net5`: it has net0`).
    pub why: String,
    /// What the expression may read instead (artifact names, NIC slots, fields).
    pub accepted: Vec<String>,
}
