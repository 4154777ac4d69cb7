//! Where a projected resource came from ([`StackOrigin`]): what a manifest of a Stack carries,
//! with nothing of the Stack machinery.

use crate::diagnostic::SourceFile;
use crate::yaml::{PathSeg, Span};
use std::sync::Arc;

/// Where a projected resource comes from: its Stack, and where the Stack gave its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackOrigin {
    /// The Stack's `metadata.name`.
    pub stack: String,
    /// The template's `metadata.name`.
    pub template: String,
    /// The template resource's logical name.
    pub logical: String,
    /// The `forEach` item's name, if any.
    pub item: Option<String>,
    /// The Stack's file.
    pub stack_file: Arc<SourceFile>,
    /// What stands for the resource in the Stack: its `forEach` item, or its `metadata.name`.
    pub stack_span: Span,
    /// The values the Stack wrote into the projected document.
    pub values: Vec<StackValue>,
}

/// One value a Stack wrote into a projected document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackValue {
    /// Its path from the projected document's root.
    pub path: Vec<PathSeg>,
    /// The expression it replaced, in the template's file.
    pub template_span: Span,
    /// Where the Stack wrote it.
    pub stack_span: Span,
}

impl StackOrigin {
    /// Where in the Stack's file the value at `path` (of the projected document) was written,
    /// and `true`; else the Stack's entry for the resource, and `false`.
    pub fn span_for(&self, path: &[PathSeg]) -> (Span, bool) {
        self.values
            .iter()
            .filter(|v| path.starts_with(&v.path))
            .max_by_key(|v| v.path.len())
            .map_or((self.stack_span, false), |v| (v.stack_span, true))
    }

    /// [`StackOrigin::span_for`] for a label at `span` of the template's file.
    pub fn span_at(&self, span: Span) -> (Span, bool) {
        self.values
            .iter()
            .find(|v| v.template_span == span)
            .map_or((self.stack_span, false), |v| (v.stack_span, true))
    }
}
