//! Projecting one cluster's Stacks: parameters checked against the template, the subset
//! checked for closure, `fromParameter`/`fromItem` substituted on the YAML tree, and each
//! projected manifest decoded like a hand-written one.

use super::decode::unknown_parameter;
use super::expr::{self, Expression};
use super::origin::StackOrigin;
use super::params::{ParamValue, type_errors};
use super::spec::{
    ItemFieldType, STACK, STACK_TEMPLATE, StackDocument, StackInstance, StackTemplateSpec,
};
use super::substitute::{Substitution, projected_doc};
use crate::de::{Sink, decode};
use crate::diagnostic::did_you_mean;
use crate::diagnostic::{Code, Diagnostic};
use crate::kind::{Reference, ReferenceSource, Registry};
use crate::manifest::{DEPENDS_ON, Resource, load_projected};
use crate::yaml::{Node, NodeValue, PathSeg, Span};
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

pub(super) struct Projector<'a> {
    registry: &'a Registry,
    cluster: &'a str,
    pub(super) stack: &'a Arc<StackDocument>,
    incomplete: bool,
    pub(super) diagnostics: Vec<Diagnostic>,
}

/// One item of a `forEach` list: its node, where the Stack wrote it (`None`: a default), and its
/// name.
struct Item<'n> {
    node: &'n Node,
    stack_span: Option<Span>,
    name: String,
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
        self.diagnostics
            .push(Diagnostic::error(code, message).with_label(&self.stack.file, span, label));
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
                format!(
                    "Stack `{}` is not under `stack/{}/`",
                    stack.name(),
                    self.cluster
                ),
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
        let mut instances: Vec<(&Template<'_>, Option<Item<'_>>, String)> = Vec::new();
        let mut projected: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for t in all.iter().filter(|t| chosen.contains(t.logical)) {
            let items: Vec<Option<Item<'_>>> = match t.for_each {
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
                            Some(name) => items.push(Some(Item {
                                node: item,
                                stack_span: from_stack.map(|_| item.span),
                                name: name.to_owned(),
                            })),
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
                    Some(Item {
                        name: item_name, ..
                    }) => {
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
                item: item.as_ref().map(|i| (i.node, i.stack_span)),
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
                .and_then(|i| i.stack_span)
                .unwrap_or_else(|| name_span(stack));
            let origin = StackOrigin {
                stack: stack.name().to_owned(),
                template: template.name().to_owned(),
                logical: t.logical.to_owned(),
                item: item.as_ref().map(|i| i.name.clone()),
                stack_file: Arc::clone(&stack.file),
                stack_span,
                values: values_out,
            };
            let doc = projected_doc(t.kind, t.name, &name, spec);
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
    ) -> Option<BTreeMap<String, ParamValue<'n>>> {
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
        for name in decoded.parameters.keys() {
            if values.contains_key(name)
                || !ok && supplied.is_some_and(|(_, p)| p.get(name).is_some())
            {
                continue;
            }
            match decls
                .and_then(|d| d.get(name))
                .and_then(|d| d.get("default"))
            {
                Some(default) => {
                    values.insert(name.clone(), (default, None));
                }
                None => {
                    let at = supplied.map_or_else(
                        || self.stack.doc.span_at(&crate::path!["spec"]),
                        |(k, _)| k.span,
                    );
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
                d.help = Some(format!(
                    "add `{dep}` to `spec.resources`: a subset is dependency-closed"
                ));
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
