//! Substituting `fromParameter` and `fromItem` on a template resource's YAML tree, and the
//! projected manifest built around the result.

use super::expr::{self, Expression};
use super::origin::StackValue;
use super::params::ParamValue;
use super::project::Projector;
use super::spec::StackDocument;
use crate::diagnostic::{Code, Diagnostic};
use crate::manifest::API_VERSION;
use crate::yaml::{Node, NodeValue, PathSeg, ScalarKind, Span};
use std::collections::BTreeMap;

pub(super) struct Substitution<'n, 'v> {
    pub(super) values: &'v BTreeMap<String, ParamValue<'n>>,
    pub(super) item: Option<(&'n Node, Option<Span>)>,
    pub(super) template: &'n StackDocument,
}

impl Substitution<'_, '_> {
    /// `node` with its `fromParameter` and `fromItem` expressions replaced by their values
    /// (spans of the expression), recording where the Stack wrote each.
    pub(super) fn substitute(
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

/// The manifest a template resource projects (`kind` and `name` are the template's nodes):
/// every node spanned in the template's file.
pub(super) fn projected_doc(kind: &Node, logical_name: &Node, name: &str, spec: Node) -> Node {
    let scalar = |text: &str, span: Span| Node {
        span,
        value: NodeValue::Scalar(text.to_owned(), ScalarKind::Plain),
    };
    let key = |text: &str, span: Span| scalar(text, span);
    let name_node = Node {
        span: logical_name.span,
        value: NodeValue::Scalar(name.to_owned(), ScalarKind::Quoted),
    };
    let span = Span::new(
        kind.span.start.min(logical_name.span.start),
        spec.span.end.max(kind.span.end),
    );
    Node {
        span,
        value: NodeValue::Map(vec![
            (key("apiVersion", kind.span), scalar(API_VERSION, kind.span)),
            (key("kind", kind.span), kind.clone()),
            (
                key("metadata", logical_name.span),
                Node {
                    span: logical_name.span,
                    value: NodeValue::Map(vec![(key("name", logical_name.span), name_node)]),
                },
            ),
            (key("spec", spec.span), spec),
        ]),
    }
}
