//! What the loader's parts share: the [`Loader`] whose methods they define, and the files the
//! compositions list. Below `loader` and its parts, which import it from here.

use crate::de::Sink;
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::kind::Registry;
use crate::manifest::LoadedManifest;
use crate::source::RepoSource;
use crate::stack::StackDocument;
use crate::yaml::Span;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The loading of one repository: what the clusters' compositions list and what was found.
pub(super) struct Loader<'a> {
    pub(super) source: &'a dyn RepoSource,
    pub(super) registry: &'a Registry,
    pub(super) diagnostics: Vec<Diagnostic>,
    /// Every file a composition lists (under a kind root): the clusters listing it, and the
    /// manifest if it was read.
    pub(super) files: BTreeMap<String, Listed>,
    /// How many threads may read and decode manifests.
    pub(super) threads: usize,
}

impl Loader<'_> {
    /// The entry of a listed file, created if new.
    pub(super) fn listed(&mut self, path: &str) -> &mut Listed {
        self.files.entry(path.to_owned()).or_default()
    }

    pub(super) fn push_problems(
        &mut self,
        file: &Arc<SourceFile>,
        sink: &Sink,
        cluster: Option<&str>,
    ) {
        for p in sink.take() {
            let d = Diagnostic {
                severity: if p.code == Code::UnknownAnnotation {
                    crate::diagnostic::Severity::Warning
                } else {
                    crate::diagnostic::Severity::Error
                },
                ..Diagnostic::error(p.code, p.message)
            };
            self.diagnostics.push(
                d.with_label(file, p.span, p.label)
                    .with_help_opt(p.help)
                    .in_cluster(cluster),
            );
        }
    }
}

/// A file some composition lists.
#[derive(Debug, Default)]
pub(super) struct Listed {
    pub(super) listers: Listers,
    /// The manifest, once read.
    pub(super) manifest: Option<LoadedManifest>,
    /// A Stack or StackTemplate, once read.
    pub(super) stack: Option<Arc<StackDocument>>,
}

/// The clusters whose compositions list one file, as positions among the repository's clusters;
/// one cluster needs no allocation.
#[derive(Debug, Default)]
pub(super) struct Listers {
    pub(super) first: Option<usize>,
    pub(super) more: Vec<usize>,
}

impl Listers {
    pub(super) fn insert(&mut self, cluster: usize) {
        match self.first {
            None => self.first = Some(cluster),
            Some(first) if first == cluster || self.more.contains(&cluster) => {}
            Some(_) => self.more.push(cluster),
        }
    }

    pub(super) fn contains(&self, cluster: usize) -> bool {
        self.first == Some(cluster) || self.more.contains(&cluster)
    }

    /// The cluster, if exactly one lists the file.
    pub(super) fn single(&self) -> Option<usize> {
        self.first.filter(|_| self.more.is_empty())
    }
}

/// A listed file to read.
#[derive(Clone)]
pub(super) struct Pending {
    pub(super) target: String,
    /// The composition entry listing it.
    pub(super) span: Span,
    pub(super) root_kind: Option<&'static str>,
    /// Whether to decode it (no other cluster's composition has loaded it yet).
    pub(super) load: bool,
}
