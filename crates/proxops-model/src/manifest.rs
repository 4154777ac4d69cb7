//! The manifest envelope (`apiVersion`, `kind`, `metadata`, `spec`) and decoding one manifest file
//! into a [`Resource`].

// Defined in children below the kinds (see each): re-exported at their public paths.
pub(crate) mod metadata;
pub(crate) mod spec;

pub use metadata::Metadata;
pub use spec::{CustomSpec, Spec};

use crate::de::{Problem, Sink, decode};
use crate::diagnostic::did_you_mean;
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::kind::{KindDef, Reference, ReferenceSource, Registry, SpecContext};
pub use crate::names::ResourceKey;
use crate::names::is_valid_name;
use crate::stack::origin::StackOrigin;
use crate::yaml::{Node, NodeValue, PathSeg, Span, SpanTree, parse_documents};
use std::sync::{Arc, OnceLock};

/// The only `apiVersion` manifests may carry.
pub const API_VERSION: &str = "proxops/v1alpha1";

/// The annotation that adds dependencies: `"Kind:name,Kind:name"`.
pub const DEPENDS_ON: &str = "proxops/depends-on";

/// The annotation that suspends reconciling a resource: `disabled` (or `enabled`, the default).
pub const RECONCILE: &str = "proxops/reconcile";

/// Annotations in the `proxops/` namespace that ProxOps understands.
pub const KNOWN_ANNOTATIONS: &[&str] = &[DEPENDS_ON, RECONCILE];

/// One decoded, individually valid manifest.
#[derive(Debug, Clone)]
pub struct Resource {
    /// The canonical kind name.
    pub kind: &'static str,
    /// `metadata`.
    pub metadata: Metadata,
    /// `spec`.
    pub spec: Spec,
    /// The file it came from.
    pub file: Arc<SourceFile>,
    /// Where each node of the document is, for labels: built from `file` the first time a label
    /// needs it (see [`Resource::spans`]).
    spans: OnceLock<SpanTree>,
    /// Dependencies from the `proxops/depends-on` annotation (and, for a resource a Stack
    /// projected, from its template's `dependsOn`).
    pub depends_on: Vec<Reference>,
    /// The Stack that projected it, if one did.
    origin: Option<Arc<StackOrigin>>,
    /// For a projected resource, its document as the Stack made it (`file` is the template's
    /// file, which holds the unsubstituted template): what [`resolve_resource`] decodes again.
    projected: Option<Arc<Node>>,
    /// The reference expressions of the spec ([`crate::expr`]), in document order.
    pub exprs: Vec<crate::expr::ExprSite>,
    /// Whether `spec` holds the expressions' resolved values ([`resolve_resource`]); when not,
    /// each site of a spec with expressions holds its `dryFallback` or its type's zero value,
    /// fit for checks and never for PVE.
    pub resolved: bool,
}

impl Resource {
    /// (kind, name).
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            kind: self.kind.to_owned(),
            name: self.metadata.name.clone(),
        }
    }

    /// Whether the spec holds expressions not resolved yet: such a resource is only published
    /// through the planes, never planned as it is.
    pub fn unresolved(&self) -> bool {
        !self.exprs.is_empty() && !self.resolved
    }

    /// How long the resource may wait for what its expressions read before the agent reports
    /// it: the shortest `waitTimeout` among them ([`crate::expr::DEFAULT_WAIT_TIMEOUT`] where
    /// one has none).
    pub fn wait_timeout(&self) -> std::time::Duration {
        self.exprs
            .iter()
            .map(|s| s.wait_timeout.unwrap_or(crate::expr::DEFAULT_WAIT_TIMEOUT))
            .min()
            .unwrap_or(crate::expr::DEFAULT_WAIT_TIMEOUT)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Whether `proxops/reconcile: disabled` suspends it: ProxOps then neither changes nor
    /// prunes it.
    pub fn reconcile_disabled(&self) -> bool {
        self.metadata
            .annotations
            .get(RECONCILE)
            .is_some_and(|v| v.trim() == "disabled")
    }

    /// The Stack that projected it, if one did.
    pub fn stack_origin(&self) -> Option<&StackOrigin> {
        self.origin.as_deref()
    }

    /// `d` with a label on the node at `path` (see [`Resource::span`]) reading `message`; for
    /// a resource a Stack projected, also one in the Stack's file: where the Stack wrote the
    /// value at `path`, or the Stack's entry for the resource.
    pub fn label(&self, d: Diagnostic, path: &[PathSeg], message: impl Into<String>) -> Diagnostic {
        let d = d.with_label(&self.file, self.span(path), message);
        match &self.origin {
            None => d,
            Some(origin) => {
                let (span, given) = origin.span_for(path);
                d.with_label(
                    &origin.stack_file,
                    span,
                    stack_label(origin, &self.key(), given),
                )
            }
        }
    }

    /// The span of the node at `path` from the document root (or its deepest existing parent).
    pub fn span(&self, path: &[PathSeg]) -> Span {
        self.spans().span_at(path)
    }

    /// Where each node of the manifest's document is.
    ///
    /// Only findings need spans, and a clean repository has none: so the parsed tree is dropped
    /// once the manifest is decoded, and the first call parses the file's text again (the same
    /// text with the same parser, so the same tree) and keeps its [`SpanTree`].
    pub fn spans(&self) -> &SpanTree {
        self.spans.get_or_init(|| {
            let doc = parse_documents(&self.file.text)
                .ok()
                .and_then(|docs| docs.into_iter().find(|d| !d.is_null()));
            match doc {
                Some(doc) => SpanTree::new(&doc),
                // Cannot happen: the text parsed when the resource was decoded.
                None => SpanTree::new(&Node {
                    span: Span::new(0, 0),
                    value: NodeValue::Map(Vec::new()),
                }),
            }
        })
    }
}

/// What decoding one manifest file produced: the resource if it is valid on its own, and every
/// problem found in it.
#[derive(Debug, Clone)]
pub struct LoadedManifest {
    /// The resource, if the file had no error.
    pub resource: Option<Arc<Resource>>,
    /// Errors and warnings of the file alone.
    pub diagnostics: Vec<Diagnostic>,
}

impl Diagnostic {
    /// Adds [`Resource::label`]'s labels: the node at `path` of `resource`, and for a resource
    /// a Stack projected, where the Stack gave it.
    pub fn with_resource_label(
        self,
        resource: &Resource,
        path: &[PathSeg],
        message: impl Into<String>,
    ) -> Diagnostic {
        resource.label(self, path, message)
    }
}

fn stack_label(origin: &StackOrigin, key: &ResourceKey, given: bool) -> String {
    if given {
        format!("value given by Stack `{}` for {key}", origin.stack)
    } else {
        format!("{key} is projected by Stack `{}`", origin.stack)
    }
}

/// Decodes a manifest a Stack projected: `doc` is spanned in the template's `file`, `origin`
/// says where the Stack is, `depends_on` holds the template's `dependsOn` mapped to projected
/// names. Every finding also gets a label in the Stack's file.
pub(crate) fn load_projected(
    doc: &Node,
    file: &Arc<SourceFile>,
    registry: &Registry,
    origin: StackOrigin,
    depends_on: Vec<Reference>,
) -> LoadedManifest {
    let sink = Sink::default();
    let resource = decode_envelope(doc, file, registry, None, &sink, None);
    let key = ResourceKey {
        kind: doc
            .get("kind")
            .and_then(Node::as_str)
            .unwrap_or_default()
            .to_owned(),
        name: doc
            .at(&crate::path!["metadata", "name"])
            .and_then(Node::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    let diagnostics: Vec<Diagnostic> = to_diagnostics(file, sink.take())
        .into_iter()
        .map(|d| {
            let (span, given) = d
                .labels
                .first()
                .map_or((origin.stack_span, false), |l| origin.span_at(l.span));
            d.with_label(&origin.stack_file, span, stack_label(&origin, &key, given))
        })
        .collect();
    let has_error = diagnostics.iter().any(Diagnostic::invalidates);
    let origin = Arc::new(origin);
    let resource = resource.filter(|_| !has_error).map(|mut r| {
        r.spans = OnceLock::from(SpanTree::new(doc));
        r.origin = Some(origin);
        if !r.exprs.is_empty() {
            r.projected = Some(Arc::new(doc.clone()));
        }
        for dep in depends_on {
            if !r
                .depends_on
                .iter()
                .any(|x| x.target_kind == dep.target_kind && x.target_name == dep.target_name)
            {
                r.depends_on.push(dep);
            }
        }
        Arc::new(r)
    });
    LoadedManifest {
        resource,
        diagnostics,
    }
}

pub(crate) fn to_diagnostics(file: &Arc<SourceFile>, problems: Vec<Problem>) -> Vec<Diagnostic> {
    problems
        .into_iter()
        .map(|p| {
            let d = if matches!(p.code, Code::UnknownAnnotation) {
                Diagnostic::warning(p.code, p.message)
            } else {
                Diagnostic::error(p.code, p.message)
            };
            d.with_label(file, p.span, p.label).with_help_opt(p.help)
        })
        .collect()
}

const ENVELOPE_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "spec"];

/// Decodes the manifest in `file`. `root_kind` is the kind whose directory root holds the file,
/// if any, to catch a manifest filed under the wrong root.
pub fn load_manifest(
    file: &Arc<SourceFile>,
    registry: &Registry,
    root_kind: Option<&str>,
) -> LoadedManifest {
    let fail = |diagnostics| LoadedManifest {
        resource: None,
        diagnostics,
    };
    let docs = match parse_documents(&file.text) {
        Ok(docs) => docs,
        Err(e) => {
            return fail(vec![
                Diagnostic::error(Code::YamlSyntax, format!("invalid YAML: {}", e.message))
                    .with_label(file, e.span, "here"),
            ]);
        }
    };
    let mut docs = docs.into_iter().filter(|d| !d.is_null());
    let Some(doc) = docs.next() else {
        return fail(vec![
            Diagnostic::error(Code::MissingField, "the file holds no manifest")
                .with_label(file, Span::new(0, 0), "empty")
                .with_help(
                    "a listed file must hold one manifest with apiVersion, kind, metadata and spec",
                ),
        ]);
    };
    let mut diagnostics = Vec::new();
    for extra in docs {
        diagnostics.push(
            Diagnostic::error(
                Code::MultipleDocuments,
                "a manifest file holds exactly one YAML document",
            )
            .with_label(file, extra.span, "another document")
            .with_help("move each manifest to a file of its own and list it in the composition"),
        );
    }
    let sink = Sink::default();
    let resource = decode_envelope(&doc, file, registry, root_kind, &sink, None);
    // The tree is freed while it is still in the cache; see `Resource::spans`.
    drop(doc);
    diagnostics.extend(to_diagnostics(file, sink.take()));
    let has_error = diagnostics.iter().any(Diagnostic::invalidates);
    LoadedManifest {
        resource: resource.filter(|_| !has_error).map(Arc::new),
        diagnostics,
    }
}

fn problem(code: Code, span: Span, message: String, label: &str, help: Option<String>) -> Problem {
    Problem {
        code,
        span,
        message,
        label: label.to_owned(),
        help,
    }
}

/// `resource` with its expressions replaced by `values` (one per [`Resource::exprs`] site, in
/// order) and decoded again, with every check a written value gets; findings on a resolved
/// value are labelled on its expression.
pub fn resolve_resource(
    resource: &Resource,
    registry: &Registry,
    values: &[serde_json::Value],
) -> Result<Resource, Vec<Diagnostic>> {
    let file = &resource.file;
    let fail = |message: &str| {
        vec![
            Diagnostic::error(Code::InvalidValue, message.to_owned()).with_label(
                file,
                Span::new(0, 0),
                "here",
            ),
        ]
    };
    if values.len() != resource.exprs.len() {
        return Err(fail("the values do not match the expressions"));
    }
    let doc = match &resource.projected {
        Some(doc) => Node::clone(doc),
        None => {
            let docs =
                parse_documents(&file.text).map_err(|_| fail("the manifest no longer parses"))?;
            docs.into_iter()
                .find(|d| !d.is_null())
                .ok_or_else(|| fail("the manifest no longer parses"))?
        }
    };
    let sink = Sink::default();
    let decoded = decode_envelope(&doc, file, registry, None, &sink, Some(values));
    let diagnostics = to_diagnostics(file, sink.take());
    if diagnostics.iter().any(Diagnostic::invalidates) {
        return Err(diagnostics);
    }
    let mut decoded = decoded.ok_or_else(|| fail("the resolved manifest does not decode"))?;
    if decoded.exprs != resource.exprs {
        return Err(fail("the manifest changed while it was resolved"));
    }
    decoded.resolved = true;
    if resource.origin.is_some() {
        // What the projection added besides the document: the Stack, the template's edges.
        decoded.origin = resource.origin.clone();
        decoded.projected = resource.projected.clone();
        decoded.depends_on = resource.depends_on.clone();
        decoded.spans = OnceLock::from(SpanTree::new(&doc));
    }
    Ok(decoded)
}

fn decode_envelope(
    doc: &Node,
    file: &Arc<SourceFile>,
    registry: &Registry,
    root_kind: Option<&str>,
    sink: &Sink,
    values: Option<&[serde_json::Value]>,
) -> Option<Resource> {
    let Some(entries) = doc.as_map() else {
        sink.push(problem(
            Code::InvalidValue,
            doc.span,
            format!("a manifest is a mapping, found {}", doc.type_word()),
            "not a mapping",
            None,
        ));
        return None;
    };
    for (k, _) in entries {
        let key = k.as_str().unwrap_or_default();
        if !ENVELOPE_FIELDS.contains(&key) {
            let help = did_you_mean(key, ENVELOPE_FIELDS.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .or_else(|| Some("a manifest has apiVersion, kind, metadata and spec".to_owned()));
            sink.push(problem(
                Code::UnknownField,
                k.span,
                format!("unknown field `{key}`"),
                "unknown field",
                help,
            ));
        }
    }
    let head = Span::new(doc.span.start, doc.span.start);
    match doc.get("apiVersion") {
        None => sink.push(problem(
            Code::ApiVersion,
            head,
            "missing `apiVersion`".to_owned(),
            "apiVersion required",
            Some(format!("add `apiVersion: {API_VERSION}`")),
        )),
        Some(v) if v.as_str() != Some(API_VERSION) => sink.push(problem(
            Code::ApiVersion,
            v.span,
            format!(
                "unsupported apiVersion `{}`",
                v.as_str().unwrap_or_default()
            ),
            "unsupported",
            Some(format!("the only supported apiVersion is `{API_VERSION}`")),
        )),
        Some(_) => {}
    }
    let kind = decode_kind(doc, registry, sink)?;
    if let Some(root) = root_kind
        && root != kind.name()
        && let Some(v) = doc.get("kind")
    {
        sink.push(problem(
            Code::WrongKindRoot,
            v.span,
            format!(
                "a {} manifest is filed under the `{}/` root",
                kind.name(),
                registry.get(root).map_or(root, |k| k.root())
            ),
            "kind does not match the directory",
            Some(format!(
                "move the file under `{}/` or fix `kind`",
                kind.root()
            )),
        ));
    }
    let metadata = match doc.get("metadata") {
        Some(node) => decode::<Metadata>(node, sink, registry.required()),
        None => {
            sink.push(problem(
                Code::MissingField,
                head,
                "missing `metadata`".to_owned(),
                "metadata required",
                None,
            ));
            None
        }
    };
    let metadata = metadata?;
    let mut depends_on = Vec::new();
    check_metadata(doc, &metadata, registry, sink, &mut depends_on);
    let Some((spec_key, spec_node)) = doc.entry("spec") else {
        sink.push(problem(
            Code::MissingField,
            head,
            "missing `spec`".to_owned(),
            "spec required",
            None,
        ));
        return None;
    };
    // Expressions are masked for the typed decoder, or replaced by their values (see
    // `crate::expr`).
    let found = crate::expr::extract(spec_node, kind.name(), registry, registry.required(), sink);
    let spec_node = match values {
        None => found.masked.clone(),
        Some(values) => {
            let pairs: Vec<(&[PathSeg], Node)> = found
                .sites
                .iter()
                .zip(values)
                .map(|(site, v)| (site.path.as_slice(), crate::expr::node_of(v, site.span)))
                .collect();
            crate::expr::substitute(spec_node, &pairs)
        }
    };
    let inner = Sink::default();
    let cx = SpecContext {
        spec: &spec_node,
        spec_key: Some(spec_key.span),
        sink: &inner,
        required: registry.required(),
        metadata: &metadata,
    };
    let spec = kind.decode(&cx);
    for p in inner.take() {
        // A masked site's type is checked once its value is known.
        if values.is_none() && found.covers(p.span) {
            continue;
        }
        sink.push(p);
    }
    Some(Resource {
        kind: kind.name(),
        metadata,
        spec: spec?,
        file: Arc::clone(file),
        spans: OnceLock::new(),
        depends_on,
        origin: None,
        projected: None,
        exprs: found.sites,
        resolved: false,
    })
}

fn decode_kind<'r>(doc: &Node, registry: &'r Registry, sink: &Sink) -> Option<&'r dyn KindDef> {
    let Some(node) = doc.get("kind") else {
        sink.push(problem(
            Code::UnknownKind,
            Span::new(doc.span.start, doc.span.start),
            "missing `kind`".to_owned(),
            "kind required",
            Some(format!("one of: {}", kind_list(registry))),
        ));
        return None;
    };
    let word = node.as_str().unwrap_or_default();
    if let Some(kind) = registry.get(word) {
        return Some(kind);
    }
    let help = match registry.guess(word) {
        Some(k) => format!("the canonical spelling is `{}`", k.name()),
        None => match did_you_mean(word, registry.kinds().map(|k| k.name())) {
            Some(k) => format!("did you mean `{k}`?"),
            None => format!("one of: {}", kind_list(registry)),
        },
    };
    sink.push(problem(
        Code::UnknownKind,
        node.span,
        format!("unknown kind `{word}`"),
        "unknown kind",
        Some(help),
    ));
    None
}

fn kind_list(registry: &Registry) -> String {
    registry
        .kinds()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_metadata(
    doc: &Node,
    metadata: &Metadata,
    registry: &Registry,
    sink: &Sink,
    depends_on: &mut Vec<Reference>,
) {
    if !is_valid_name(&metadata.name) {
        sink.push(problem(
            Code::InvalidName,
            doc.span_at(&[PathSeg::from("metadata"), PathSeg::from("name")]),
            format!("`{}` is not a valid resource name", metadata.name),
            "invalid name",
            Some("names are lowercase letters and digits in words joined by single hyphens, at most 63 characters, e.g. `web-01`".to_owned()),
        ));
    }
    let annotations_path = [PathSeg::from("metadata"), PathSeg::from("annotations")];
    for key in metadata.annotations.keys() {
        if key.starts_with("proxops/") && !KNOWN_ANNOTATIONS.contains(&key.as_str()) {
            let span = doc
                .at(&annotations_path)
                .and_then(|a| a.entry(key))
                .map_or(doc.span, |(k, _)| k.span);
            sink.push(Problem {
                code: Code::UnknownAnnotation,
                span,
                message: format!("unknown annotation `{key}`"),
                label: "unknown annotation".to_owned(),
                help: did_you_mean(key, KNOWN_ANNOTATIONS.iter().copied())
                    .map(|k| format!("did you mean `{k}`?")),
            });
        }
    }
    if let Some(value) = metadata.annotations.get(RECONCILE)
        && !matches!(value.trim(), "enabled" | "disabled")
    {
        let path: Vec<PathSeg> = annotations_path
            .iter()
            .cloned()
            .chain(std::iter::once(PathSeg::from(RECONCILE)))
            .collect();
        sink.push(problem(
            Code::InvalidAnnotation,
            doc.span_at(&path),
            format!("`{RECONCILE}` is `{value}`; it takes `enabled` or `disabled`"),
            "not enabled or disabled",
            Some("`disabled` suspends the resource: ProxOps neither changes nor prunes it".into()),
        ));
    }
    let Some(value) = metadata.annotations.get(DEPENDS_ON) else {
        return;
    };
    let path: Vec<PathSeg> = annotations_path
        .iter()
        .cloned()
        .chain(std::iter::once(PathSeg::from(DEPENDS_ON)))
        .collect();
    let span = doc.span_at(&path);
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let bad = |message: String, help: Option<String>| {
            sink.push(problem(
                Code::InvalidDependsOn,
                span,
                message,
                "in this annotation",
                help,
            ));
        };
        let Some((kind_word, name)) = item.split_once(':') else {
            bad(
                format!("`{item}` is not a `Kind:name` reference"),
                Some("e.g. `proxops/depends-on: \"ISO:installer,LXC:db-01\"`".into()),
            );
            continue;
        };
        let (kind_word, name) = (kind_word.trim(), name.trim());
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            bad(
                format!("`{item}` does not name a resource after the colon"),
                None,
            );
            continue;
        }
        let Some(kind) = registry
            .kinds()
            .find(|k| k.name().eq_ignore_ascii_case(kind_word))
        else {
            let help = registry
                .guess(kind_word)
                .map(|k| format!("write the canonical kind `{}`", k.name()))
                .or_else(|| {
                    did_you_mean(kind_word, registry.kinds().map(|k| k.name()))
                        .map(|k| format!("did you mean `{k}`?"))
                });
            bad(format!("`{kind_word}` in `{item}` is not a kind"), help);
            continue;
        };
        depends_on.push(Reference {
            field: DEPENDS_ON,
            target_kind: kind.name().to_owned(),
            target_name: name.to_owned(),
            path: path.clone(),
            same_node: false,
            source: ReferenceSource::Annotation,
        });
    }
}

/// Whether a YAML node is a scalar: used by composition parsing.
pub(crate) fn scalar_text(node: &Node) -> Option<&str> {
    match &node.value {
        NodeValue::Scalar(s, _) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_built_on_demand_from_the_same_document() {
        let text = "# comment\n---\n---\napiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  labels: {a: b}\nspec:\n  node: n1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n";
        let file = SourceFile::new("vm/a/web.yaml", text);
        let loaded = load_manifest(&file, &Registry::builtin(), Some("VM"));
        assert_eq!(loaded.diagnostics, Vec::new());
        let Some(resource) = loaded.resource else {
            panic!("the manifest decodes");
        };
        assert!(
            resource.spans.get().is_none(),
            "no spans before a label needs them"
        );
        let docs = parse_documents(text).unwrap_or_default();
        let Some(doc) = docs.iter().find(|d| !d.is_null()) else {
            panic!("a document");
        };
        let paths: Vec<Vec<PathSeg>> = vec![
            vec![],
            vec!["metadata".into(), "name".into()],
            vec!["metadata".into(), "labels".into(), "a".into()],
            vec!["spec".into(), "disks".into(), 0.into(), "size".into()],
            vec!["spec".into(), "disks".into(), 3.into()],
            vec!["spec".into(), "nope".into()],
        ];
        for path in &paths {
            assert_eq!(resource.span(path), doc.span_at(path), "{path:?}");
        }
        assert!(resource.spans.get().is_some());
    }
}
