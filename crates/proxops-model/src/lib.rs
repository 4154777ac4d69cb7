//! The ProxOps manifest model: what a GitOps repository for Proxmox VE says, and whether it says
//! it correctly.
//!
//! - [`loader::load_repository`] reads a repository through a [`source::RepoSource`] (a directory,
//!   or a git commit in the store crate): `proxops.yaml`, each `clusters/<c>/config.yaml`
//!   ([`config::ConfigFile`]) and composition, and every manifest the compositions list, into a
//!   [`loader::Repository`] of [`loader::Cluster`]s holding [`manifest::Resource`]s.
//! - Each manifest is parsed into a span-carrying [`yaml::Node`] tree and decoded by its kind's
//!   [`kind::KindDef`] from the [`kind::Registry`] (the seven built-in kinds live in [`kinds`]; an
//!   embedder can register more). Decoding ([`de`]) and validation ([`validate`]) report every
//!   problem as a [`diagnostic::Diagnostic`] with a stable [`diagnostic::Code`] and labels on the
//!   exact YAML nodes; [`report::ValidationReport`] is their JSON shape.
//! - [`schema`] emits JSON Schema (draft-07) for editors, from the same types the decoder uses.
//!
//! The model reads only the files it is given; it does no network or git I/O.

/// Builds an array of [`yaml::PathSeg`] from keys (`&str`) and indices (`usize`).
#[macro_export]
macro_rules! path {
    ($($seg:expr),* $(,)?) => {
        [$($crate::yaml::PathSeg::from($seg)),*]
    };
}

pub mod config;
pub mod de;
pub mod diagnostic;
pub mod expr;
pub mod kind;
pub mod kinds;
pub mod loader;
pub mod manifest;
pub mod names;
pub mod pointer;
pub mod pve_config;
pub mod quantity;
pub mod report;
pub mod schema;
pub mod settings;
pub mod source;
pub mod stack;
pub mod validate;
pub mod yaml;

pub use diagnostic::{Code, Diagnostic, Severity};
pub use kind::{KindDef, Registry};
pub use loader::{Cluster, LoadError, LoadOptions, Repository, load_repository, read_config_file};
pub use manifest::{Resource, ResourceKey, Spec};
pub use source::{FsSource, RepoSource};
