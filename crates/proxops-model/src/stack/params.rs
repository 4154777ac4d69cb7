//! Parameter values checked against their declarations.

use super::expr;
use super::spec::{ItemFieldType, ParameterDecl, ParameterType};
use crate::yaml::{Node, NodeValue, ScalarKind, Span};

/// A parameter's value: the node, and where the Stack wrote it (`None`: the default).
pub(super) type ParamValue<'n> = (&'n Node, Option<Span>);

/// The type problems of `value` as a value of parameter `name`: (span, message) each.
pub(super) fn type_errors(name: &str, decl: &ParameterDecl, value: &Node) -> Vec<(Span, String)> {
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
        ParameterType::String => scalar(ItemFieldType::String, value, &what)
            .into_iter()
            .collect(),
        ParameterType::Integer => scalar(ItemFieldType::Integer, value, &what)
            .into_iter()
            .collect(),
        ParameterType::Boolean => scalar(ItemFieldType::Boolean, value, &what)
            .into_iter()
            .collect(),
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
                        None => {
                            out.push((item.head(), format!("item {i} of {what} has no `{field}`")))
                        }
                    }
                }
                for (k, _) in entries {
                    let key = k.as_str().unwrap_or_default();
                    if !decl.items.contains_key(key) {
                        out.push((
                            k.span,
                            format!("item {i} of {what} has no field `{key}` in its declaration"),
                        ));
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
