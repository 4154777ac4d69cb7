//! Decoding Stack and StackTemplate files and checking each in itself (what needs no other
//! file: a template's own structure and expressions).

use super::expr::{self, Expression};
use super::spec::{
    ParameterType, STACK, STACK_TEMPLATE, StackDocument, StackSpec, StackTemplateSpec,
};
use crate::de::{Problem, RequiredFields, Sink, decode};
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::manifest::{API_VERSION, Metadata, to_diagnostics};
use crate::names::is_valid_name;
use crate::yaml::{Node, NodeValue, Span, parse_documents};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// What loading one Stack or StackTemplate file gave.
#[derive(Debug, Clone)]
pub struct LoadedStack {
    /// The document, if the file had no error.
    pub document: Option<Arc<StackDocument>>,
    /// Its findings.
    pub diagnostics: Vec<Diagnostic>,
}

pub(super) fn required() -> &'static RequiredFields {
    static REQUIRED: OnceLock<RequiredFields> = OnceLock::new();
    REQUIRED.get_or_init(|| {
        let mut generator = crate::kind::generator();
        generator.subschema_for::<Metadata>();
        generator.subschema_for::<StackSpec>();
        generator.subschema_for::<StackTemplateSpec>();
        let mut required = RequiredFields::default();
        required.learn_definitions(generator.definitions());
        required
    })
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

/// Decodes the Stack or StackTemplate in `file`; `kind` is [`STACK`] or [`STACK_TEMPLATE`], as
/// the file's directory root says.
pub fn load_stack_file(file: &Arc<SourceFile>, kind: &'static str) -> LoadedStack {
    let fail = |diagnostics| LoadedStack {
        document: None,
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
            Diagnostic::error(Code::MissingField, format!("the file holds no {kind}")).with_label(
                file,
                Span::new(0, 0),
                "empty",
            ),
        ]);
    };
    let mut diagnostics: Vec<Diagnostic> = docs
        .map(|extra| {
            Diagnostic::error(
                Code::MultipleDocuments,
                "a manifest file holds exactly one YAML document",
            )
            .with_label(file, extra.span, "another document")
        })
        .collect();
    let sink = Sink::default();
    let document = decode_document(doc, file, kind, &sink);
    diagnostics.extend(to_diagnostics(file, sink.take()));
    let failed = diagnostics.iter().any(Diagnostic::is_error);
    LoadedStack {
        document: document.filter(|_| !failed).map(Arc::new),
        diagnostics,
    }
}

fn decode_document(
    doc: Node,
    file: &Arc<SourceFile>,
    kind: &'static str,
    sink: &Sink,
) -> Option<StackDocument> {
    let Some(entries) = doc.as_map() else {
        sink.push(problem(
            Code::InvalidValue,
            doc.span,
            format!("a {kind} is a mapping, found {}", doc.type_word()),
            "not a mapping",
            None,
        ));
        return None;
    };
    for (k, _) in entries {
        let key = k.as_str().unwrap_or_default();
        if !["apiVersion", "kind", "metadata", "spec"].contains(&key) {
            sink.push(problem(
                Code::UnknownField,
                k.span,
                format!("unknown field `{key}`"),
                "unknown field",
                Some(format!("a {kind} has apiVersion, kind, metadata and spec")),
            ));
        }
    }
    let head = Span::new(doc.span.start, doc.span.start);
    match doc.get("apiVersion") {
        Some(v) if v.as_str() == Some(API_VERSION) => {}
        found => sink.push(problem(
            Code::ApiVersion,
            found.map_or(head, |v| v.span),
            "missing or unsupported `apiVersion`".to_owned(),
            "apiVersion",
            Some(format!("write `apiVersion: {API_VERSION}`")),
        )),
    }
    match doc.get("kind") {
        Some(v) if v.as_str() == Some(kind) => {}
        found => {
            let other = if kind == STACK { STACK_TEMPLATE } else { STACK };
            let root = if kind == STACK {
                super::spec::STACK_ROOT
            } else {
                super::spec::TEMPLATE_ROOT
            };
            let code = if found.is_some_and(|v| v.as_str() == Some(other)) {
                Code::WrongKindRoot
            } else {
                Code::UnknownKind
            };
            sink.push(problem(
                code,
                found.map_or(head, |v| v.span),
                format!("a file under `{root}/` holds a {kind}"),
                "kind does not match the directory",
                Some(format!("write `kind: {kind}`, or move the file")),
            ));
        }
    }
    let metadata = match doc.get("metadata") {
        Some(node) => decode::<Metadata>(node, sink, required()),
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
    }?;
    if !is_valid_name(&metadata.name) {
        sink.push(problem(
            Code::InvalidName,
            doc.span_at(&crate::path!["metadata", "name"]),
            format!("`{}` is not a valid {kind} name", metadata.name),
            "invalid name",
            Some("lowercase letters and digits in words joined by single hyphens".to_owned()),
        ));
    }
    let Some(spec) = doc.get("spec") else {
        sink.push(problem(
            Code::MissingField,
            head,
            "missing `spec`".to_owned(),
            "spec required",
            None,
        ));
        return None;
    };
    if kind == STACK {
        decode::<StackSpec>(spec, sink, required())?;
    } else {
        let decoded = decode::<StackTemplateSpec>(spec, sink, required())?;
        check_template(spec, &decoded, sink);
    }
    Some(StackDocument {
        kind,
        metadata,
        file: Arc::clone(file),
        json: expr::to_json(&doc),
        doc,
    })
}

/// A template's own rules: unique logical names, `dependsOn` inside the template, parameter
/// declarations and defaults, `forEach` over a list parameter, expressions well formed and
/// reading declared parameters.
fn check_template(spec: &Node, decoded: &StackTemplateSpec, sink: &Sink) {
    let params = spec.get("parameters");
    for (name, decl) in &decoded.parameters {
        let Some((key, node)) = params.and_then(|p| p.entry(name)) else {
            continue;
        };
        if !decl.items.is_empty() && decl.ty != ParameterType::List {
            let at = node.entry("items").map_or(key.span, |(k, _)| k.span);
            sink.push(problem(
                Code::StackTemplate,
                at,
                format!("parameter `{name}` declares `items` but is not a list"),
                "items of a non-list",
                Some("`items` types the fields of a `type: list` parameter's items".to_owned()),
            ));
        }
        if let Some(default) = node.get("default") {
            for (span, message) in super::params::type_errors(name, decl, default) {
                sink.push(problem(
                    Code::StackParameterType,
                    span,
                    message,
                    "default of the wrong type",
                    None,
                ));
            }
        }
    }
    let Some(NodeValue::Seq(items)) = spec.get("resources").map(|r| &r.value) else {
        return;
    };
    let logical: BTreeSet<&str> = decoded.resources.iter().map(|r| r.name.as_str()).collect();
    let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
    for (resource, node) in decoded.resources.iter().zip(items) {
        let name_span = node.get("name").map_or(node.span, |n| n.span);
        if seen.insert(&resource.name, name_span).is_some() {
            sink.push(problem(
                Code::StackTemplate,
                name_span,
                format!("the template has two resources named `{}`", resource.name),
                "used again here",
                Some("logical names are unique within a template".to_owned()),
            ));
        }
        if !is_valid_name(&resource.name) {
            sink.push(problem(
                Code::InvalidName,
                name_span,
                format!("`{}` is not a valid logical name", resource.name),
                "invalid name",
                None,
            ));
        }
        if let Some(NodeValue::Seq(deps)) = node.get("dependsOn").map(|d| &d.value) {
            for (dep, dep_node) in resource.depends_on.iter().zip(deps) {
                if !logical.contains(dep.as_str()) {
                    sink.push(problem(
                        Code::StackTemplate,
                        dep_node.span,
                        format!(
                            "`{}` depends on `{dep}`, which is not a resource of the template",
                            resource.name
                        ),
                        "no such resource",
                        Some(format!(
                            "the template's resources: {}",
                            logical.iter().copied().collect::<Vec<_>>().join(", ")
                        )),
                    ));
                }
            }
        }
        let for_each = node.get("forEach");
        if let Some(fe) = for_each {
            check_for_each(fe, decoded, sink);
        }
        if let Some(spec) = node.get("spec") {
            check_expressions(spec, decoded, for_each.is_some(), sink);
        }
    }
}

fn check_for_each(node: &Node, decoded: &StackTemplateSpec, sink: &Sink) {
    let not_list = |span, message: String| {
        sink.push(problem(
            Code::StackForEach,
            span,
            message,
            "not a list parameter",
            Some("`forEach: {fromParameter: {name: <a parameter of type list>}}`".to_owned()),
        ));
    };
    match expr::recognise(node) {
        Ok(Some(Expression::Parameter { name, span })) => match decoded.parameters.get(name) {
            Some(decl) if decl.ty == ParameterType::List => {}
            Some(decl) => not_list(
                span,
                format!(
                    "`forEach` over parameter `{name}`, a {}, not a list",
                    format!("{:?}", decl.ty).to_lowercase()
                ),
            ),
            None => sink.push(unknown_parameter(name, span, decoded)),
        },
        Ok(_) => not_list(
            node.span,
            "`forEach` takes a `fromParameter` expression naming a list parameter".to_owned(),
        ),
        Err(e) => sink.push(expression_problem(e)),
    }
}

pub(super) fn unknown_parameter(name: &str, span: Span, decoded: &StackTemplateSpec) -> Problem {
    let declared: Vec<&str> = decoded.parameters.keys().map(String::as_str).collect();
    problem(
        Code::StackParameterUnknown,
        span,
        format!("the template declares no parameter `{name}`"),
        "undeclared parameter",
        Some(if declared.is_empty() {
            "declare it under `spec.parameters`".to_owned()
        } else {
            format!("declared: {}", declared.join(", "))
        }),
    )
}

pub(super) fn expression_problem(e: expr::ExpressionError) -> Problem {
    let label = match e.code {
        Code::ExpressionKeys => "another key beside the expression",
        _ => "malformed expression",
    };
    problem(e.code, e.span, e.message, label, None)
}

fn check_expressions(node: &Node, decoded: &StackTemplateSpec, in_for_each: bool, sink: &Sink) {
    match expr::recognise(node) {
        Err(e) => sink.push(expression_problem(e)),
        Ok(Some(Expression::Parameter { name, span })) => {
            if !decoded.parameters.contains_key(name) {
                sink.push(unknown_parameter(name, span, decoded));
            }
        }
        Ok(Some(Expression::Item { span, .. })) => {
            if !in_for_each {
                sink.push(problem(
                    Code::StackForEach,
                    span,
                    "`fromItem` in a resource without `forEach`".to_owned(),
                    "no item here",
                    Some(
                        "add `forEach: {fromParameter: {name: <list>}}` to the resource".to_owned(),
                    ),
                ));
            }
        }
        Ok(Some(Expression::Other)) => {}
        Ok(None) => match &node.value {
            NodeValue::Seq(items) => {
                for item in items {
                    check_expressions(item, decoded, in_for_each, sink);
                }
            }
            NodeValue::Map(entries) => {
                for (_, v) in entries {
                    check_expressions(v, decoded, in_for_each, sink);
                }
            }
            NodeValue::Scalar(..) => {}
        },
    }
}
