//! Reference expressions: a mapping anywhere in a manifest's `spec` whose only key is
//! `fromArtifact`, `fromReceipt`, `fromPromotion`, `fromParameter` or `fromItem`.
//!
//! - `{fromArtifact: {resource: LXC/pihole, name: ip-addresses, pointer: /net0/ipv4/0}}`: a value
//!   of an artifact the producer's current receipt lists (`pointer` is RFC 6901 into its `spec`).
//! - `{fromReceipt: {resource: VM/web, pointer: /outcome}}`: a value of the producer's current
//!   receipt (`pointer` into its `spec.result`).
//! - `{fromPromotion: {}}` (optional `resource`, `pointer`): the same field of the same resource
//!   in the pinned source of the promotion being built.
//! - Each may carry `dryFallback:`, used only by dry runs while the reference is unavailable.
//!
//! Design (why the typed decoder never sees an expression): the loader finds the expression
//! sites first (`extract`) and decodes the spec with each site *masked* (replaced by its
//! `dryFallback`, or by `null`), dropping the decoder's findings inside a masked site: the
//! field's type is checked when the real value is known. Publishing the desired plane resolves
//! each site against the observed plane and decodes the spec again with the values in place
//! ([`crate::manifest::resolve_resource`]), so the resolved value gets every check a written one
//! gets, labelled on the expression. Expressions may not stand for a PVE identity field (`vmid`,
//! `node`, `nodes`, `storage`, `filename`) nor for a field naming another resource: identity and
//! graph edges are fixed when the repository is loaded, before anything is observed.
//!
//! `fromParameter` and `fromItem` belong to StackTemplates, which substitute them when a Stack
//! is projected: any left in a manifest at validation is an error.

use crate::de::{Problem, RequiredFields, Sink, decode};
use crate::diagnostic::Code;
use crate::diagnostic::did_you_mean;
use crate::names::ResourceKey;
use crate::names::is_valid_name;
pub use crate::pointer::Pointer;
use crate::yaml::{Node, NodeValue, PathSeg, ScalarKind, Span};
use serde_json::Value;

/// The keys that make a mapping an expression.
pub const EXPRESSION_KEYS: &[&str] = &[
    "fromArtifact",
    "fromReceipt",
    "fromPromotion",
    "fromParameter",
    "fromItem",
];

/// How long a consumer waits before the agent reports it (`waitTimeout`'s default).
pub const DEFAULT_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Spec fields (top level) that identify what a resource is in PVE: never an expression.
const IDENTITY_FIELDS: &[&str] = &["vmid", "node", "nodes", "storage", "filename"];

/// What an expression reads.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Expr {
    /// A value of artifact `name` that `producer`'s current receipt lists (pointer into its
    /// `spec`).
    Artifact {
        /// The producing resource.
        producer: ResourceKey,
        /// The artifact's local name.
        name: String,
        /// Into the artifact's `spec`.
        pointer: Pointer,
    },
    /// A value of `producer`'s current receipt (pointer into its `spec.result`).
    Receipt {
        /// The producing resource.
        producer: ResourceKey,
        /// Into the receipt's `spec.result`.
        pointer: Pointer,
    },
    /// A value of the promotion source's desired document.
    Promotion {
        /// The source resource (`None`: the same kind and name as the consumer).
        resource: Option<ResourceKey>,
        /// Into the source's `spec` (`None`: the pointer of the field holding the expression).
        pointer: Option<Pointer>,
    },
}

impl Expr {
    /// The key it is written with.
    pub fn key(&self) -> &'static str {
        match self {
            Expr::Artifact { .. } => "fromArtifact",
            Expr::Receipt { .. } => "fromReceipt",
            Expr::Promotion { .. } => "fromPromotion",
        }
    }

    /// The resource it makes the consumer depend on (none for `fromPromotion`, which reads
    /// another cluster).
    pub fn producer(&self) -> Option<&ResourceKey> {
        match self {
            Expr::Artifact { producer, .. } | Expr::Receipt { producer, .. } => Some(producer),
            Expr::Promotion { .. } => None,
        }
    }
}

/// One expression in a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprSite {
    /// Where, relative to `spec`.
    pub path: Vec<PathSeg>,
    /// What it reads.
    pub expr: Expr,
    /// The value dry runs use while the reference is unavailable.
    pub dry_fallback: Option<Value>,
    /// How long the consumer may wait for it before the agent reports the wait as an anomaly
    /// (`waitTimeout: 30m`; `None`: [`DEFAULT_WAIT_TIMEOUT`]).
    pub wait_timeout: Option<std::time::Duration>,
    /// The expression's node.
    pub span: Span,
}

impl ExprSite {
    /// The site's path from the document root (for labels).
    pub fn doc_path(&self) -> Vec<PathSeg> {
        std::iter::once(PathSeg::from("spec"))
            .chain(self.path.iter().cloned())
            .collect()
    }
}

/// The expressions of a spec and the spec with each of them masked.
#[derive(Debug)]
pub(crate) struct Extracted {
    /// The spec with each site replaced by its mask.
    pub masked: Node,
    /// The sites, in document order.
    pub sites: Vec<ExprSite>,
    /// Spans of every expression node, well-formed or not: findings inside them are dropped.
    pub covered: Vec<Span>,
}

impl Extracted {
    /// Whether a decoder finding at `span` lies inside an expression.
    pub fn covers(&self, span: Span) -> bool {
        self.covered
            .iter()
            .any(|c| c.start <= span.start && span.end <= c.end)
    }
}

fn push(sink: &Sink, code: Code, span: Span, message: String, label: &str, help: Option<String>) {
    sink.push(Problem {
        code,
        span,
        message,
        label: label.to_owned(),
        help,
    });
}

/// What the expression walker needs to know of the kinds: the kind registry implements it, so
/// that expressions sit below the registry rather than beside it.
pub(crate) trait KindNames {
    /// The canonical name of `kind`, or the closest known name as a guess (`Err(None)`: none).
    fn canonical(&self, kind: &str) -> Result<&'static str, Option<&'static str>>;
    /// The fields of `kind` that name other resources (`disks[].image`).
    fn reference_fields(&self, kind: &str) -> Vec<&'static str>;
}

/// Finds the expressions of `spec` (a manifest of kind `kind`), reporting malformed ones, and
/// masks them.
pub(crate) fn extract(
    spec: &Node,
    kind: &str,
    registry: &dyn KindNames,
    required: &RequiredFields,
    sink: &Sink,
) -> Extracted {
    let reference_fields = registry.reference_fields(kind);
    let mut walk = Walk {
        registry,
        required,
        sink,
        reference_fields,
        sites: Vec::new(),
        covered: Vec::new(),
    };
    let mut path = Vec::new();
    let masked = walk.node(spec, &mut path);
    Extracted {
        masked,
        sites: walk.sites,
        covered: walk.covered,
    }
}

struct Walk<'a> {
    registry: &'a dyn KindNames,
    required: &'a RequiredFields,
    sink: &'a Sink,
    reference_fields: Vec<&'static str>,
    sites: Vec<ExprSite>,
    covered: Vec<Span>,
}

/// The dotted form of a spec path as [`crate::kind::ReferenceField`] writes it
/// (`disks[].image`).
fn dotted(path: &[PathSeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSeg::Index(_) => out.push_str("[]"),
        }
    }
    out
}

impl Walk<'_> {
    fn node(&mut self, node: &Node, path: &mut Vec<PathSeg>) -> Node {
        match &node.value {
            NodeValue::Map(entries) => {
                if entries
                    .iter()
                    .any(|(k, _)| k.as_str().is_some_and(|k| EXPRESSION_KEYS.contains(&k)))
                {
                    return self.expression(node, entries, path);
                }
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    path.push(PathSeg::Key(k.as_str().unwrap_or_default().to_owned()));
                    out.push((k.clone(), self.node(v, path)));
                    path.pop();
                }
                Node {
                    span: node.span,
                    value: NodeValue::Map(out),
                }
            }
            NodeValue::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    path.push(PathSeg::Index(i));
                    out.push(self.node(v, path));
                    path.pop();
                }
                Node {
                    span: node.span,
                    value: NodeValue::Seq(out),
                }
            }
            NodeValue::Scalar(..) => node.clone(),
        }
    }

    /// An expression mapping: reported if malformed, recorded if not; masked either way.
    fn expression(&mut self, node: &Node, entries: &[(Node, Node)], path: &[PathSeg]) -> Node {
        self.covered.push(node.span);
        let null = Node {
            span: node.span,
            value: NodeValue::Scalar(String::new(), ScalarKind::Plain),
        };
        if entries.len() != 1 {
            let variant = entries
                .iter()
                .find_map(|(k, _)| k.as_str().filter(|k| EXPRESSION_KEYS.contains(k)))
                .unwrap_or_default();
            for (k, _) in entries {
                if k.as_str() != Some(variant) {
                    push(
                        self.sink,
                        Code::ExpressionKeys,
                        k.span,
                        format!(
                            "a `{variant}` expression must be the only key of its mapping; `{}` is beside it",
                            k.as_str().unwrap_or_default()
                        ),
                        "another key beside the expression",
                        Some("a reference expression stands for the whole value: move the other keys out, or write the value itself".to_owned()),
                    );
                }
            }
            return null;
        }
        let (key, body) = (&entries[0].0, &entries[0].1);
        let word = key.as_str().unwrap_or_default();
        if matches!(word, "fromParameter" | "fromItem") {
            push(
                self.sink,
                Code::ReferenceContext,
                key.span,
                format!("`{word}` is only expanded inside a StackTemplate"),
                "outside a StackTemplate",
                Some("a Stack substitutes its template's parameters and items when it projects resources; a manifest cannot use them".to_owned()),
            );
            return null;
        }
        let top = match path.first() {
            Some(PathSeg::Key(k)) => k.as_str(),
            _ => "",
        };
        let field = dotted(path);
        // The site is a reference field, lies inside one, or holds one.
        let within = |outer: &str, inner: &str| {
            inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        let on_reference = self
            .reference_fields
            .iter()
            .any(|f| within(&field, f) || within(f, &field));
        if IDENTITY_FIELDS.contains(&top) || on_reference || path.is_empty() {
            push(
                self.sink,
                Code::ReferenceField,
                node.span,
                format!(
                    "`{}` cannot be a reference expression",
                    if field.is_empty() { "spec" } else { &field }
                ),
                "not allowed here",
                Some("a resource's PVE identity (vmid, node, nodes, storage, filename) and the fields naming other resources are fixed when the repository is loaded: write them as values".to_owned()),
            );
            return null;
        }
        let Some(site) = self.parse(word, key, body, path, node.span) else {
            return null;
        };
        let mask = site
            .dry_fallback
            .as_ref()
            .map_or(null, |v| node_of(v, node.span));
        self.sites.push(site);
        mask
    }

    fn parse(
        &self,
        word: &str,
        key: &Node,
        body: &Node,
        path: &[PathSeg],
        span: Span,
    ) -> Option<ExprSite> {
        let (fields, required): (&[&str], &[&str]) = match word {
            "fromArtifact" => (
                &["resource", "name", "pointer", "dryFallback", "waitTimeout"],
                &["resource", "name"],
            ),
            "fromReceipt" => (
                &["resource", "pointer", "dryFallback", "waitTimeout"],
                &["resource"],
            ),
            _ => (&["resource", "pointer", "dryFallback"], &[]),
        };
        let entries = match &body.value {
            NodeValue::Map(m) => m.as_slice(),
            _ if body.is_null() && required.is_empty() => &[],
            _ => {
                push(
                    self.sink,
                    Code::ReferenceShape,
                    body.span,
                    format!("`{word}` takes a mapping, found {}", body.type_word()),
                    "not a mapping",
                    Some(format!("e.g. `{word}: {{{}}}`", example(word))),
                );
                return None;
            }
        };
        let mut ok = true;
        for (k, _) in entries {
            let name = k.as_str().unwrap_or_default();
            if !fields.contains(&name) {
                ok = false;
                push(
                    self.sink,
                    Code::ReferenceShape,
                    k.span,
                    format!("unknown field `{name}` in `{word}`"),
                    "unknown field",
                    Some(did_you_mean(name, fields.iter().copied()).map_or_else(
                        || format!("`{word}` takes {}", fields.join(", ")),
                        |s| format!("did you mean `{s}`?"),
                    )),
                );
            }
        }
        for r in required {
            if body.get(r).is_none() {
                ok = false;
                push(
                    self.sink,
                    Code::ReferenceShape,
                    key.span,
                    format!("`{word}` needs `{r}`"),
                    "required field missing",
                    Some(format!("e.g. `{word}: {{{}}}`", example(word))),
                );
            }
        }
        let text = |field: &str| -> Option<(&str, Span)> {
            let node = body.get(field)?;
            match &node.value {
                NodeValue::Scalar(s, _) => Some((s.as_str(), node.span)),
                _ => {
                    push(
                        self.sink,
                        Code::ReferenceShape,
                        node.span,
                        format!("`{word}.{field}` is text, found {}", node.type_word()),
                        "not text",
                        None,
                    );
                    None
                }
            }
        };
        let resource = match text("resource") {
            Some((t, at)) => match self.resource(t) {
                Ok(k) => Some(k),
                Err(help) => {
                    ok = false;
                    push(
                        self.sink,
                        Code::ReferenceTarget,
                        at,
                        format!("`{t}` is not a `Kind/name` resource reference"),
                        "malformed resource reference",
                        Some(help),
                    );
                    None
                }
            },
            None => {
                ok &= body.get("resource").is_none();
                None
            }
        };
        let pointer = match text("pointer") {
            Some((t, at)) => {
                match Pointer::parse(t) {
                    Ok(p) => Some(p),
                    Err(why) => {
                        ok = false;
                        push(
                        self.sink,
                        Code::ReferencePointer,
                        at,
                        why,
                        "not an RFC 6901 pointer",
                        Some("e.g. `/net0/ipv4/0`; `~1` stands for `/` and `~0` for `~` in a key".to_owned()),
                    );
                        None
                    }
                }
            }
            None => {
                ok &= body.get("pointer").is_none();
                None
            }
        };
        let name = match word {
            "fromArtifact" => match text("name") {
                Some((t, _)) if is_valid_name(t) => Some(t.to_owned()),
                Some((t, at)) => {
                    ok = false;
                    push(
                        self.sink,
                        Code::ReferenceShape,
                        at,
                        format!("`{t}` is not an artifact name"),
                        "invalid artifact name",
                        Some("artifact names are lowercase words joined by hyphens, e.g. `ip-addresses`".to_owned()),
                    );
                    None
                }
                None => None,
            },
            _ => None,
        };
        let dry_fallback = match body.get("dryFallback") {
            Some(node) => {
                let inner = Sink::default();
                let value = decode::<Value>(node, &inner, self.required);
                if value.as_ref().is_some_and(contains_expression) {
                    ok = false;
                    push(
                        self.sink,
                        Code::ReferenceShape,
                        node.span,
                        "a `dryFallback` is a plain value, not another expression".to_owned(),
                        "expression in a fallback",
                        None,
                    );
                }
                value
            }
            None => None,
        };
        let wait_timeout = match text("waitTimeout") {
            Some((t, at)) => match crate::quantity::parse_duration(t) {
                Some(d) if !d.is_zero() => Some(d),
                _ => {
                    ok = false;
                    push(
                        self.sink,
                        Code::ReferenceShape,
                        at,
                        format!("`{t}` is not a duration"),
                        "not a duration",
                        Some(
                            "e.g. `waitTimeout: 30m` (units ms, s, m, h; more than zero)"
                                .to_owned(),
                        ),
                    );
                    None
                }
            },
            None => {
                ok &= body.get("waitTimeout").is_none();
                None
            }
        };
        if !ok {
            return None;
        }
        let expr = match word {
            "fromArtifact" => Expr::Artifact {
                producer: resource?,
                name: name?,
                pointer: pointer.unwrap_or_else(|| Pointer(String::new())),
            },
            "fromReceipt" => Expr::Receipt {
                producer: resource?,
                pointer: pointer.unwrap_or_else(|| Pointer(String::new())),
            },
            _ => Expr::Promotion { resource, pointer },
        };
        Some(ExprSite {
            path: path.to_vec(),
            expr,
            dry_fallback,
            wait_timeout,
            span,
        })
    }

    /// `Kind/name` with a registered kind and a valid name; the error is a help text.
    fn resource(&self, text: &str) -> Result<ResourceKey, String> {
        let Some((kind, name)) = text.split_once('/') else {
            return Err("write the producer as `Kind/name`, e.g. `LXC/pihole`".to_owned());
        };
        let canonical = match self.registry.canonical(kind) {
            Ok(name) => name,
            Err(guess) => {
                return Err(match guess {
                    Some(k) => format!("`{kind}` is not a kind; did you mean `{k}`?"),
                    None => format!("`{kind}` is not a kind"),
                });
            }
        };
        if !is_valid_name(name) {
            return Err(format!("`{name}` is not a valid resource name"));
        }
        Ok(ResourceKey {
            kind: canonical.to_owned(),
            name: name.to_owned(),
        })
    }
}

fn example(word: &str) -> &'static str {
    match word {
        "fromArtifact" => "resource: LXC/pihole, name: ip-addresses, pointer: /net0/ipv4/0",
        "fromReceipt" => "resource: VM/web, pointer: /outcome",
        _ => "",
    }
}

/// Whether a value holds an expression mapping anywhere.
pub fn contains_expression(value: &Value) -> bool {
    match value {
        Value::Object(m) => {
            m.keys().any(|k| EXPRESSION_KEYS.contains(&k.as_str()))
                || m.values().any(contains_expression)
        }
        Value::Array(items) => items.iter().any(contains_expression),
        _ => false,
    }
}

/// A JSON value as a YAML node, every part labelled at `span` (the expression it replaces).
pub(crate) fn node_of(value: &Value, span: Span) -> Node {
    let scalar = |text: String, kind| Node {
        span,
        value: NodeValue::Scalar(text, kind),
    };
    match value {
        Value::Null => scalar("null".to_owned(), ScalarKind::Plain),
        Value::Bool(b) => scalar(b.to_string(), ScalarKind::Plain),
        Value::Number(n) => scalar(n.to_string(), ScalarKind::Plain),
        Value::String(s) => scalar(s.clone(), ScalarKind::Quoted),
        Value::Array(items) => Node {
            span,
            value: NodeValue::Seq(items.iter().map(|v| node_of(v, span)).collect()),
        },
        Value::Object(m) => Node {
            span,
            value: NodeValue::Map(
                m.iter()
                    .map(|(k, v)| (scalar(k.clone(), ScalarKind::Quoted), node_of(v, span)))
                    .collect(),
            ),
        },
    }
}

/// `node` with the node at each `(path, value)` replaced by `value`.
pub(crate) fn substitute(node: &Node, values: &[(&[PathSeg], Node)]) -> Node {
    fn go(node: &Node, path: &mut Vec<PathSeg>, values: &[(&[PathSeg], Node)]) -> Node {
        if let Some((_, v)) = values.iter().find(|(p, _)| *p == path.as_slice()) {
            return v.clone();
        }
        match &node.value {
            NodeValue::Map(entries) => Node {
                span: node.span,
                value: NodeValue::Map(
                    entries
                        .iter()
                        .map(|(k, v)| {
                            path.push(PathSeg::Key(k.as_str().unwrap_or_default().to_owned()));
                            let out = (k.clone(), go(v, path, values));
                            path.pop();
                            out
                        })
                        .collect(),
                ),
            },
            NodeValue::Seq(items) => Node {
                span: node.span,
                value: NodeValue::Seq(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            path.push(PathSeg::Index(i));
                            let out = go(v, path, values);
                            path.pop();
                            out
                        })
                        .collect(),
                ),
            },
            NodeValue::Scalar(..) => node.clone(),
        }
    }
    go(node, &mut Vec::new(), values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_follow_rfc_6901() {
        let doc = json!({"a/b": {"m~n": [10, 20]}, "": 1});
        let at = |p: &str| Pointer::parse(p).ok().and_then(|p| p.get(&doc).cloned());
        assert_eq!(at(""), Some(doc.clone()));
        assert_eq!(at("/a~1b/m~0n/1"), Some(json!(20)));
        assert_eq!(at("/a~1b/m~0n/01"), None, "no leading zeros");
        assert_eq!(at("/a~1b/m~0n/2"), None);
        assert_eq!(at("/"), Some(json!(1)));
        assert!(Pointer::parse("a/b").is_err());
        assert!(Pointer::parse("/a~2").is_err());
        assert!(Pointer::parse("/a~").is_err());
        let path = [PathSeg::from("x/y"), PathSeg::from(3)];
        assert_eq!(Pointer::of_path(&path).as_str(), "/x~1y/3");
    }

    #[test]
    fn expressions_inside_values_are_found() {
        assert!(contains_expression(&json!([{"fromItem": {}}])));
        assert!(!contains_expression(&json!({"from": 1})));
    }
}
