//! What a kind's decoder and checks report through ([`SpecContext`]): below the kinds, so the
//! checks of every kind and of `pve_config` can take it without importing the registry.

use crate::de::{RequiredFields, Sink, decode_recovering};
use crate::diagnostic::Code;
use crate::manifest::metadata::Metadata;
use crate::yaml::{Node, PathSeg};
use serde::de::DeserializeOwned;

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
