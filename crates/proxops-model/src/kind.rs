//! The kind registry: one [`KindDef`] per manifest kind, consulted by the loader, validation and
//! (later) the graph and the engine, instead of per-kind special cases spread through the code.
//!
//! The built-in kinds are registered by [`Registry::builtin`]. An embedder adds its own kind
//! by implementing [`KindDef`] and calling [`Registry::register`].
//!
//! The trait, the terms it answers in and [`SpecContext`] are defined in child modules below the
//! kinds; this module is the registry above them, and re-exports them at their public paths.

pub(crate) mod context;
pub(crate) mod def;
pub(crate) mod terms;

pub use context::SpecContext;
pub use def::KindDef;
pub use terms::{
    Identity, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceSource,
    ReferenceView, StorageUse, Unreachable,
};

use crate::de::RequiredFields;
use crate::manifest::metadata::Metadata;
pub use crate::names::GuestType;
use std::sync::Arc;

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

    /// The built-in kinds: the seven guest and artifact kinds, then the cluster objects.
    pub fn builtin() -> Registry {
        use crate::kinds::artifact::ArtifactKind;
        use crate::kinds::lxc::LxcKind;
        use crate::kinds::vm::VmKind;
        let mut r = Registry::empty();
        use crate::kinds::object::ObjectKind;
        let builtin: [Arc<dyn KindDef>; 7] = [
            Arc::new(VmKind::VM),
            Arc::new(VmKind::TEMPLATE),
            Arc::new(LxcKind::LXC),
            Arc::new(LxcKind::TEMPLATE),
            Arc::new(ArtifactKind::ISO),
            Arc::new(ArtifactKind::CT_TEMPLATE),
            Arc::new(ArtifactKind::DISK_IMAGE),
        ];
        let objects = ObjectKind::all().map(|k| Arc::new(k) as Arc<dyn KindDef>);
        for kind in builtin.into_iter().chain(objects) {
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
