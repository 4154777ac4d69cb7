//! Projecting one cluster's Stacks: parameters checked against the template, the subset
//! checked for closure, `fromParameter`/`fromItem` substituted on the YAML tree, and each
//! projected manifest decoded like a hand-written one.

use super::decode::unknown_parameter;
use super::expr::{self, Expression};
use super::{
    ItemFieldType, ParameterDecl, ParameterType, STACK, STACK_TEMPLATE, StackDocument,
    StackInstance, StackOrigin, StackTemplateSpec, StackValue,
};
use crate::de::{Sink, decode, did_you_mean};
use crate::diagnostic::{Code, Diagnostic};
use crate::kind::{Reference, ReferenceSource, Registry};
use crate::manifest::{API_VERSION, DEPENDS_ON, Resource, load_projected};
use crate::yaml::{Node, NodeValue, PathSeg, ScalarKind, Span};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What projecting a cluster's Stacks gave.
#[derive(Debug, Clone, Default)]
pub struct ProjectedCluster {
    /// The projected resources of every Stack without errors.
    pub resources: Vec<Arc<Resource>>,
    /// Those Stacks.
    pub stacks: Vec<StackInstance>,
    /// Every finding.
    pub diagnostics: Vec<Diagnostic>,
}

/// The type problems of `value` as a value of parameter `name`: (span, message) each.
pub(crate) fn type_errors(name: &str, decl: &ParameterDecl, value: &Node) -> Vec<(Span, String)> {
    let noun = |t: ItemFieldType| match t {
        ItemFieldType::String => "text",
        ItemFieldType::Integer => "an integer",
        ItemFieldType::Boolean => "a boolean",
    };
    let scalar = |want: ItemFieldType, node: &Node, what: &str| -> Option<(Span, String)> {
        (expr::scalar_type(node) != Some(want)).then(|| {
            let quote = if want == ItemFieldType::String && expr::scalar_type(node).is_some() {
                " (quote it to make it text)"
            } else {
                ""
            };
            (
                node.span,
                format!("{what} is {}, found {}{quote}", noun(want), describe(node)),
            )
        })
    };
    let what = format!("parameter `{name}`");
    match decl.ty {
        ParameterType::String => scalar(ItemFieldType::String, value, &what).into_iter().collect(),
        ParameterType::Integer => scalar(ItemFieldType::Integer, value, &what).into_iter().collect(),
        ParameterType::Boolean => scalar(ItemFieldType::Boolean, value, &what).into_iter().collect(),
        ParameterType::List => {
            let NodeValue::Seq(items) = &value.value else {
                return vec![(
                    value.span,
                    format!("{what} is a list of mappings, found {}", describe(value)),
                )];
            };
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Some(entries) = item.as_map() else {
                    out.push((
                        item.span,
                        format!("item {i} of {what} is a mapping, found {}", describe(item)),
                    ));
                    continue;
                };
                if decl.items.is_empty() {
                    continue;
                }
                for (field, ty) in &decl.items {
                    match item.get(field) {
                        Some(v) => out.extend(scalar(*ty, v, &format!("`{field}` of item {i}"))),
                        None => out.push((item.head(), format!("item {i} of {what} has no `{field}`"))),
                    }
                }
                for (k, _) in entries {
                    let key = k.as_str().unwrap_or_default();
                    if !decl.items.contains_key(key) {
                        out.push((k.span, format!("item {i} of {what} has no field `{key}` in its declaration")));
                    }
                }
            }
            out
        }
    }
}

fn describe(node: &Node) -> String {
    match &node.value {
        NodeValue::Scalar(s, ScalarKind::Quoted) => format!("the text \"{s}\""),
        NodeValue::Scalar(s, ScalarKind::Plain) if !node.is_null() => format!("`{s}`"),
        _ => node.type_word().to_owned(),
    }
}

/// A parameter's value: the node, and where the Stack wrote it (`None`: the default).
type Value<'n> = (&'n Node, Option<Span>);

/// Projects every Stack of `documents` (one cluster's Stacks and StackTemplates) against the
/// templates among them. `incomplete`: a Stack or StackTemplate file the cluster lists did not
/// load (its errors are reported), so a template not found may be that one and is not
/// reported again.
pub fn project_cluster(
    registry: &Registry,
    cluster: &str,
    documents: &[Arc<StackDocument>],
    incomplete: bool,
) -> ProjectedCluster {
    let mut out = ProjectedCluster::default();
    let templates: BTreeMap<&str, &Arc<StackDocument>> = documents
        .iter()
        .filter(|d| d.kind == STACK_TEMPLATE)
        .map(|d| (d.name(), d))
        .collect();
    let mut names = BTreeMap::new();
    for d in documents {
        if let Some(first) = names.insert((d.kind, d.name()), d) {
            out.diagnostics.push(
                Diagnostic::error(
                    Code::DuplicateResource,
                    format!("duplicate {} `{}` in cluster `{cluster}`", d.kind, d.name()),
                )
                .with_label(&d.file, name_span(d), "defined again here")
                .with_label(&first.file, name_span(first), "first defined here")
                .in_cluster(Some(cluster)),
            );
        }
    }
    for stack in documents.iter().filter(|d| d.kind == STACK) {
        let mut projector = Projector {
            registry,
            cluster,
            stack,
            incomplete,
            diagnostics: Vec::new(),
        };
        let projected = projector.project(&templates);
        let failed = projector.diagnostics.iter().any(Diagnostic::is_error);
        out.diagnostics.append(&mut projector.diagnostics);
        if let Some((template, resources)) = projected.filter(|_| !failed) {
            out.stacks.push(StackInstance {
                stack: Arc::clone(stack),
                template: Arc::clone(template),
                resources: resources.iter().map(|r| r.key()).collect(),
            });
            out.resources.extend(resources);
        }
    }
    for d in &mut out.diagnostics {
        d.cluster = Some(cluster.to_owned());
    }
    out
}

fn name_span(d: &StackDocument) -> Span {
    d.doc.span_at(&crate::path!["metadata", "name"])
}

struct Projector<'a> {
    registry: &'a Registry,
    cluster: &'a str,
    stack: &'a Arc<StackDocument>,
    incomplete: bool,
    diagnostics: Vec<Diagnostic>,
}

/// One template resource with its node.
struct Template<'n> {
    kind: &'n Node,
    name: &'n Node,
    logical: &'n str,
    spec: &'n Node,
    for_each: Option<&'n str>,
    depends_on: &'n [String],
}

impl<'a> Projector<'a> {
    fn error(&mut self, code: Code, message: String, span: Span, label: &str) -> &mut Diagnostic {
        self.diagnostics.push(
            Diagnostic::error(code, message).with_label(&self.stack.file, span, label),
        );
        let last = self.diagnostics.len() - 1;
        &mut self.diagnostics[last]
    }

    fn project(
        &mut self,
        templates: &BTreeMap<&str, &'a Arc<StackDocument>>,
    ) -> Option<(&'a Arc<StackDocument>, Vec<Arc<Resource>>)> {
        let stack = self.stack;
        let spec = stack.doc.get("spec")?;
        let in_cluster_dir = stack.file.path.split('/').nth(1) == Some(self.cluster);
        if !in_cluster_dir {
            let help = format!(
                "move it to `stack/{}/`: a Stack belongs to one cluster",
                self.cluster
            );
            self.error(
                Code::WrongKindRoot,
                format!("Stack `{}` is not under `stack/{}/`", stack.name(), self.cluster),
                name_span(stack),
                "filed elsewhere",
            )
            .help = Some(help);
        }
        let template_node = spec.get("template")?;
        let template_name = template_node.as_str().unwrap_or_default();
        let Some(template) = templates.get(template_name).copied() else {
            if self.incomplete {
                return None;
            }
            let help = match did_you_mean(template_name, templates.keys().copied()) {
                Some(t) => format!("did you mean `{t}`?"),
                None => format!(
                    "add the StackTemplate's file (under stacktemplate/base/ or stacktemplate/{}/) to clusters/{}/resources.yaml",
                    self.cluster, self.cluster
                ),
            };
            self.error(
                Code::UnknownStackTemplate,
                format!(
                    "Stack `{}` names StackTemplate `{template_name}`, which cluster `{}` does not list",
                    stack.name(),
                    self.cluster
                ),
                template_node.span,
                "unknown template",
            )
            .help = Some(help);
            return None;
        };
        let tspec_node = template.doc.get("spec")?;
        let decoded: StackTemplateSpec =
            decode(tspec_node, &Sink::default(), super::decode::required())?;
        let values = self.parameters(spec, template, tspec_node, &decoded);
        let resource_nodes: Vec<&Node> = match tspec_node.get("resources").map(|r| &r.value) {
            Some(NodeValue::Seq(items)) => items.iter().collect(),
            _ => Vec::new(),
        };
        let mut all = Vec::new();
        for (r, node) in decoded.resources.iter().zip(resource_nodes) {
            let for_each = match node.get("forEach").map(expr::recognise) {
                Some(Ok(Some(Expression::Parameter { name, .. }))) => Some(name),
                _ => None,
            };
            all.push(Template {
                kind: node.get("kind")?,
                name: node.get("name")?,
                logical: r.name.as_str(),
                spec: node.get("spec")?,
                for_each,
                depends_on: &r.depends_on,
            });
        }
        let chosen = self.subset(spec, template, &all)?;
        let values = values?;
        // Projected names first: `dependsOn` maps to every resource a logical one projects.
        let mut instances: Vec<(&Template<'_>, Option<(&Node, Option<Span>, String)>, String)> =
            Vec::new();
        let mut projected: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for t in all.iter().filter(|t| chosen.contains(t.logical)) {
            let items: Vec<Option<(&Node, Option<Span>, String)>> = match t.for_each {
                None => vec![None],
                Some(list) => {
                    let Some((list_node, from_stack)) = values.get(list).copied() else {
                        continue;
                    };
                    let mut items = Vec::new();
                    for item in seq(list_node) {
                        match item.get("name").and_then(|n| n.as_str()).filter(|_| {
                            expr::scalar_type(item.get("name").unwrap_or(item))
                                == Some(ItemFieldType::String)
                        }) {
                            Some(name) => items.push(Some((
                                item,
                                from_stack.map(|_| item.span),
                                name.to_owned(),
                            ))),
                            None => {
                                let (file, span) = match from_stack {
                                    Some(_) => (&self.stack.file, item.head()),
                                    None => (&template.file, item.head()),
                                };
                                self.diagnostics.push(
                                    Diagnostic::error(
                                        Code::StackForEach,
                                        format!(
                                            "an item of `{list}` has no text `name`: `forEach` names each resource after its item"
                                        ),
                                        )
                                        .with_label(file, span, "item without a name")
                                        .with_label(&template.file, t.name.span, "projected per item here"),
                                );
                            }
                        }
                    }
                    items
                }
            };
            for item in items {
                let name = match &item {
                    Some((_, _, item_name)) => {
                        format!("{}-{}-{item_name}", stack.name(), t.logical)
                    }
                    None => format!("{}-{}", stack.name(), t.logical),
                };
                projected
                    .entry(t.logical)
                    .or_default()
                    .push((t.kind.as_str().unwrap_or_default().to_owned(), name.clone()));
                instances.push((t, item, name));
            }
        }
        let mut resources = Vec::new();
        for (t, item, name) in instances {
            let mut values_out = Vec::new();
            let mut path = vec![PathSeg::from("spec")];
            let cx = Substitution {
                values: &values,
                item: item.as_ref().map(|(n, s, _)| (*n, *s)),
                template,
            };
            let spec = cx.substitute(t.spec, &mut path, &mut values_out, self);
            let deps: Vec<Reference> = t
                .depends_on
                .iter()
                .flat_map(|logical| projected.get(logical.as_str()).into_iter().flatten())
                .map(|(kind, target)| Reference {
                    field: DEPENDS_ON,
                    target_kind: kind.clone(),
                    target_name: target.clone(),
                    path: crate::path!["metadata", "name"].to_vec(),
                    same_node: false,
                    source: ReferenceSource::Annotation,
                })
                .collect();
            let stack_span = item
                .as_ref()
                .and_then(|(_, s, _)| *s)
                .unwrap_or_else(|| name_span(stack));
            let origin = StackOrigin {
                stack: stack.name().to_owned(),
                template: template.name().to_owned(),
                logical: t.logical.to_owned(),
                item: item.as_ref().map(|(_, _, n)| n.clone()),
                stack_file: Arc::clone(&stack.file),
                stack_span,
                values: values_out,
            };
            let doc = projected_doc(t, &name, spec);
            let loaded = load_projected(&doc, &template.file, self.registry, origin, deps);
            self.diagnostics.extend(loaded.diagnostics);
            resources.extend(loaded.resource);
        }
        Some((template, resources))
    }

    /// The value of every declared parameter, or `None` after reporting what is wrong.
    fn parameters<'n>(
        &mut self,
        spec: &'n Node,
        template: &'n StackDocument,
        tspec: &'n Node,
        decoded: &StackTemplateSpec,
    ) -> Option<BTreeMap<String, Value<'n>>> {
        let decls = tspec.get("parameters");
        let decl_span = |name: &str| {
            decls
                .and_then(|d| d.entry(name))
                .map_or(tspec.head(), |(k, _)| k.span)
        };
        let supplied = spec.entry("parameters");
        let mut values = BTreeMap::new();
        let mut ok = true;
        for (k, v) in supplied.and_then(|(_, p)| p.as_map()).unwrap_or_default() {
            let name = k.as_str().unwrap_or_default();
            let Some(decl) = decoded.parameters.get(name) else {
                let mut p = unknown_parameter(name, k.span, decoded);
                if let Some(t) = did_you_mean(name, decoded.parameters.keys().map(String::as_str)) {
                    p.help = Some(format!("did you mean `{t}`?"));
                }
                self.diagnostics.push(
                    Diagnostic::error(
                        p.code,
                        format!(
                            "Stack `{}` supplies parameter `{name}`, which StackTemplate `{}` does not declare",
                            self.stack.name(),
                            template.name()
                        ),
                    )
                    .with_label(&self.stack.file, k.span, "not a parameter of the template")
                    .with_label(&template.file, decls.map_or(tspec.head(), |d| d.span), "the template's parameters")
                    .with_help_opt(p.help),
                );
                ok = false;
                continue;
            };
            for (span, message) in type_errors(name, decl, v) {
                self.diagnostics.push(
                    Diagnostic::error(Code::StackParameterType, message)
                        .with_label(&self.stack.file, span, "wrong type")
                        .with_label(&template.file, decl_span(name), "declared here"),
                );
                ok = false;
            }
            values.insert(name.to_owned(), (v, Some(v.span)));
        }
        for (name, _) in &decoded.parameters {
            if values.contains_key(name) || !ok && supplied.is_some_and(|(_, p)| p.get(name).is_some()) {
                continue;
            }
            match decls.and_then(|d| d.get(name)).and_then(|d| d.get("default")) {
                Some(default) => {
                    values.insert(name.clone(), (default, None));
                }
                None => {
                    let at = supplied.map_or_else(|| self.stack.doc.span_at(&crate::path!["spec"]), |(k, _)| k.span);
                    self.diagnostics.push(
                        Diagnostic::error(
                            Code::StackParameterMissing,
                            format!(
                                "Stack `{}` does not supply parameter `{name}`, which has no default",
                                self.stack.name()
                            ),
                        )
                        .with_label(&self.stack.file, at, format!("`{name}` missing"))
                        .with_label(&template.file, decl_span(name), "declared here")
                        .with_help(format!("add `{name}:` under `spec.parameters`")),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(values)
    }

    /// The logical resources to project: the Stack's `resources`, checked to be known and
    /// dependency-closed, or every one.
    fn subset(
        &mut self,
        spec: &Node,
        template: &StackDocument,
        all: &[Template<'_>],
    ) -> Option<BTreeSet<String>> {
        let Some(list) = spec.get("resources") else {
            return Some(all.iter().map(|t| t.logical.to_owned()).collect());
        };
        let known: BTreeSet<&str> = all.iter().map(|t| t.logical).collect();
        let mut chosen = BTreeSet::new();
        let mut ok = true;
        let mut spans = BTreeMap::new();
        for item in seq(list) {
            let name = item.as_str().unwrap_or_default();
            if !known.contains(name) {
                let help = format!(
                    "StackTemplate `{}` has: {}",
                    template.name(),
                    known.iter().copied().collect::<Vec<_>>().join(", ")
                );
                self.error(
                    Code::StackSubset,
                    format!("the subset names `{name}`, which is not a resource of the template"),
                    item.span,
                    "no such resource",
                )
                .help = Some(help);
                ok = false;
                continue;
            }
            chosen.insert(name.to_owned());
            spans.insert(name.to_owned(), item.span);
        }
        for t in all.iter().filter(|t| chosen.contains(t.logical)) {
            for dep in t.depends_on.iter().filter(|d| !chosen.contains(d.as_str())) {
                let span = spans.get(t.logical).copied().unwrap_or(list.span);
                let d = self.error(
                    Code::StackSubset,
                    format!(
                        "the subset holds `{}` but not `{dep}`, which it depends on",
                        t.logical
                    ),
                    span,
                    "its dependency is left out",
                );
                d.help = Some(format!("add `{dep}` to `spec.resources`: a subset is dependency-closed"));
                let label_span = t.name.span;
                d.labels.push(crate::diagnostic::Label {
                    file: Arc::clone(&template.file),
                    span: label_span,
                    message: format!("`{}` depends on `{dep}`", t.logical),
                });
                ok = false;
            }
        }
        ok.then_some(chosen)
    }
}

fn seq(node: &Node) -> &[Node] {
    match &node.value {
        NodeValue::Seq(items) => items,
        _ => &[],
    }
}

struct Substitution<'n, 'v> {
    values: &'v BTreeMap<String, Value<'n>>,
    item: Option<(&'n Node, Option<Span>)>,
    template: &'n StackDocument,
}

impl Substitution<'_, '_> {
    /// `node` with its `fromParameter` and `fromItem` expressions replaced by their values
    /// (spans of the expression), recording where the Stack wrote each.
    fn substitute(
        &self,
        node: &Node,
        path: &mut Vec<PathSeg>,
        out: &mut Vec<StackValue>,
        projector: &mut Projector<'_>,
    ) -> Node {
        match expr::recognise(node) {
            Ok(Some(Expression::Parameter { name, .. })) => {
                let Some((value, stack_span)) = self.values.get(name).copied() else {
                    return node.clone();
                };
                if let Some(stack_span) = stack_span {
                    out.push(StackValue {
                        path: path.clone(),
                        template_span: node.span,
                        stack_span,
                    });
                }
                expr::respan(value, node.span)
            }
            Ok(Some(Expression::Item { pointer, span })) => {
                let Some((item, from_stack)) = self.item else {
                    return node.clone();
                };
                let Some(value) = expr::pointer(item, pointer) else {
                    let file = if from_stack.is_some() {
                        &projector.stack.file
                    } else {
                        &self.template.file
                    };
                    projector.diagnostics.push(
                        Diagnostic::error(
                            Code::StackForEach,
                            format!("the item has nothing at `{pointer}`"),
                        )
                        .with_label(&self.template.file, span, "read here")
                        .with_label(file, item.head(), "this item"),
                    );
                    return node.clone();
                };
                if from_stack.is_some() {
                    out.push(StackValue {
                        path: path.clone(),
                        template_span: node.span,
                        stack_span: value.span,
                    });
                }
                expr::respan(value, node.span)
            }
            Ok(Some(Expression::Other)) | Err(_) => node.clone(),
            Ok(None) => {
                let value = match &node.value {
                    NodeValue::Scalar(..) => node.value.clone(),
                    NodeValue::Seq(items) => NodeValue::Seq(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, n)| {
                                path.push(PathSeg::Index(i));
                                let n = self.substitute(n, path, out, projector);
                                path.pop();
                                n
                            })
                            .collect(),
                    ),
                    NodeValue::Map(entries) => NodeValue::Map(
                        entries
                            .iter()
                            .map(|(k, v)| {
                                path.push(PathSeg::Key(k.as_str().unwrap_or_default().to_owned()));
                                let v = self.substitute(v, path, out, projector);
                                path.pop();
                                (k.clone(), v)
                            })
                            .collect(),
                    ),
                };
                Node {
                    span: node.span,
                    value,
                }
            }
        }
    }
}

/// The manifest a template resource projects: every node spanned in the template's file.
fn projected_doc(t: &Template<'_>, name: &str, spec: Node) -> Node {
    let scalar = |text: &str, span: Span| Node {
        span,
        value: NodeValue::Scalar(text.to_owned(), ScalarKind::Plain),
    };
    let key = |text: &str, span: Span| scalar(text, span);
    let name_node = Node {
        span: t.name.span,
        value: NodeValue::Scalar(name.to_owned(), ScalarKind::Quoted),
    };
    let span = Span::new(t.kind.span.start.min(t.name.span.start), spec.span.end.max(t.kind.span.end));
    Node {
        span,
        value: NodeValue::Map(vec![
            (key("apiVersion", t.kind.span), scalar(API_VERSION, t.kind.span)),
            (key("kind", t.kind.span), t.kind.clone()),
            (
                key("metadata", t.name.span),
                Node {
                    span: t.name.span,
                    value: NodeValue::Map(vec![(key("name", t.name.span), name_node)]),
                },
            ),
            (key("spec", spec.span), spec),
        ]),
    }
}
