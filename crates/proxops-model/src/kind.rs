//! The kind registry: one [`KindDef`] per manifest kind, consulted by the loader, validation and
//! (later) the graph and the engine, instead of per-kind special cases spread through the code.
//!
//! The seven built-in kinds are registered by [`Registry::builtin`]. An embedder adds its own kind
//! by implementing [`KindDef`] and calling [`Registry::register`].

use crate::de::{RequiredFields, Sink, decode_recovering};
use crate::diagnostic::Code;
use crate::manifest::{Metadata, Spec};
pub use crate::names::GuestType;
use crate::yaml::{Node, PathSeg};
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::sync::Arc;

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
}

impl ReferenceSource {
    /// Its name in reports (`structured`, `annotation`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceSource::Structured => "structured",
            ReferenceSource::Annotation => "annotation",
            ReferenceSource::Expression => "expression",
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
/// kind can (see [`KindDef::reference_views`]).
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
/// (see [`KindDef::placement_view`]).
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

/// What a kind definition gets to decode and check one manifest's `spec`.
pub struct SpecContext<'a> {
    pub(crate) spec: &'a Node,
    /// The `spec:` key, where a missing top-level field is labelled.
    pub(crate) spec_key: Option<crate::yaml::Span>,
    pub(crate) sink: &'a Sink,
    pub(crate) required: &'a RequiredFields,
    pub(crate) metadata: &'a Metadata,
}

impl<'a> SpecContext<'a> {
    /// The manifest's metadata.
    pub fn metadata(&self) -> &Metadata {
        self.metadata
    }

    /// The raw `spec` node.
    pub fn node(&self) -> &Node {
        self.spec
    }

    /// Decodes the spec into `T`, reporting every unknown field, missing field and bad value.
    /// Missing and invalid values are replaced by zero values so that the kind's checks can still
    /// run and report more; whenever anything was reported, the loader discards the result.
    pub fn decode<T: DeserializeOwned>(&self) -> Option<T> {
        decode_recovering(self.spec, self.spec_key, self.sink, self.required)
    }

    /// Reports an invalid value at `path` (relative to `spec`).
    pub fn invalid(&self, path: &[PathSeg], message: impl Into<String>, help: Option<String>) {
        self.report(Code::InvalidValue, path, message, "invalid value", help);
    }

    /// Reports something required that is absent; the label goes on the deepest existing node.
    pub fn report_missing(&self, path: &[PathSeg], message: impl Into<String>) {
        self.report(Code::MissingField, path, message, "required here", None);
    }

    /// Reports a problem with any code at `path` (relative to `spec`).
    pub fn report(
        &self,
        code: Code,
        path: &[PathSeg],
        message: impl Into<String>,
        label: &str,
        help: Option<String>,
    ) {
        let span = self.spec.span_at_from(path, self.spec_key);
        // A value already reported as missing or malformed was replaced by a zero value; checks
        // of that zero value would only repeat the problem.
        let repeated = match self.spec.missing_step(path, self.spec_key) {
            None => self.sink.has_span(span),
            Some((at, field)) => self.sink.is_placeholder(at, &field),
        };
        if repeated {
            return;
        }
        self.sink.push(crate::de::Problem {
            code,
            span,
            message: message.into(),
            label: label.to_owned(),
            help,
        });
    }

    /// The path of the entry `key` of the mapping at `base`.
    pub fn key_path(&self, base: &[PathSeg], key: &str) -> Vec<PathSeg> {
        let mut p = base.to_vec();
        p.push(PathSeg::Key(key.to_owned()));
        p
    }
}

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

/// Why an artifact a reference expression reads can never be there
/// ([`KindDef::artifact_unreachable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreachable {
    /// Why, in words (`it has no NIC `net5`: it has net0`).
    pub why: String,
    /// What the expression may read instead (artifact names, NIC slots, fields).
    pub accepted: Vec<String>,
}

/// Why a kind could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another kind already has this name, alias or directory root.
    #[error("kind `{kind}` clashes with registered kind `{existing}` on {what} `{value}`")]
    Clash {
        /// The kind being registered.
        kind: String,
        /// The kind already registered.
        existing: String,
        /// `name`, `alias` or `root`.
        what: &'static str,
        /// The clashing word.
        value: String,
    },
}

/// The set of kinds a repository may use.
#[derive(Clone)]
pub struct Registry {
    kinds: Vec<Arc<dyn KindDef>>,
    required: RequiredFields,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.kinds.iter().map(|k| k.name()))
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl Registry {
    /// A registry with no kinds.
    pub fn empty() -> Registry {
        let mut generator = generator();
        generator.subschema_for::<Metadata>();
        let mut required = RequiredFields::default();
        required.learn_definitions(generator.definitions());
        Registry {
            kinds: Vec::new(),
            required,
        }
    }

    /// The seven built-in kinds.
    pub fn builtin() -> Registry {
        use crate::kinds::{ArtifactKind, LxcKind, VmKind};
        let mut r = Registry::empty();
        let builtin: [Arc<dyn KindDef>; 7] = [
            Arc::new(VmKind::VM),
            Arc::new(VmKind::TEMPLATE),
            Arc::new(LxcKind::LXC),
            Arc::new(LxcKind::TEMPLATE),
            Arc::new(ArtifactKind::ISO),
            Arc::new(ArtifactKind::CT_TEMPLATE),
            Arc::new(ArtifactKind::DISK_IMAGE),
        ];
        for kind in builtin {
            // The built-in kinds do not clash with each other.
            let _ = r.register(kind);
        }
        r
    }

    /// Adds a kind. Its name, aliases and root must not clash (case-insensitively) with the
    /// kinds already registered.
    pub fn register(&mut self, kind: Arc<dyn KindDef>) -> Result<(), RegistryError> {
        for existing in &self.kinds {
            let words = |k: &dyn KindDef| -> Vec<(&'static str, String)> {
                std::iter::once(("name", k.name().to_ascii_lowercase()))
                    .chain(
                        k.aliases()
                            .iter()
                            .map(|a| ("alias", a.to_ascii_lowercase())),
                    )
                    .collect()
            };
            let theirs = words(existing.as_ref());
            for (what, word) in words(kind.as_ref()) {
                if theirs.iter().any(|(_, w)| *w == word) {
                    return Err(RegistryError::Clash {
                        kind: kind.name().to_owned(),
                        existing: existing.name().to_owned(),
                        what,
                        value: word,
                    });
                }
            }
            if existing.root().eq_ignore_ascii_case(kind.root()) {
                return Err(RegistryError::Clash {
                    kind: kind.name().to_owned(),
                    existing: existing.name().to_owned(),
                    what: "root",
                    value: kind.root().to_owned(),
                });
            }
        }
        let mut generator = generator();
        kind.spec_schema(&mut generator);
        self.required.learn_definitions(generator.definitions());
        self.kinds.push(kind);
        Ok(())
    }

    /// Every registered kind, in registration order.
    pub fn kinds(&self) -> impl Iterator<Item = &dyn KindDef> {
        self.kinds.iter().map(|k| k.as_ref())
    }

    /// The kind spelled exactly `name`.
    pub fn get(&self, name: &str) -> Option<&dyn KindDef> {
        self.kinds().find(|k| k.name() == name)
    }

    /// The kind that `word` most likely means: its name in another case, or an alias.
    pub fn guess(&self, word: &str) -> Option<&dyn KindDef> {
        let w = word.trim();
        self.kinds().find(|k| {
            k.name().eq_ignore_ascii_case(w)
                || k.aliases().iter().any(|a| a.eq_ignore_ascii_case(w))
        })
    }

    /// The kind whose directory root is `root`.
    pub fn by_root(&self, root: &str) -> Option<&dyn KindDef> {
        self.kinds().find(|k| k.root() == root)
    }

    /// Whether `dir` is some kind's directory root.
    pub fn is_root(&self, dir: &str) -> bool {
        self.by_root(dir).is_some()
    }

    pub(crate) fn required(&self) -> &RequiredFields {
        &self.required
    }
}

impl crate::expr::KindNames for Registry {
    fn canonical(&self, kind: &str) -> Result<&'static str, Option<&'static str>> {
        match self.get(kind) {
            Some(def) => Ok(def.name()),
            None => Err(self
                .guess(kind)
                .map(|k| k.name())
                .or_else(|| crate::diagnostic::did_you_mean(kind, self.kinds().map(|k| k.name())))),
        }
    }

    fn reference_fields(&self, kind: &str) -> Vec<&'static str> {
        self.get(kind)
            .map(|k| k.reference_fields().iter().map(|f| f.field).collect())
            .unwrap_or_default()
    }
}

/// The schema generator every schema of ProxOps is made with.
pub fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft07().into_generator()
}
