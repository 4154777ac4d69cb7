//! Expressions in StackTemplates: recognising them, reading an RFC 6901 pointer, turning a YAML
//! tree into JSON.
//!
//! An expression is a mapping whose only key is one of [`crate::expr::EXPRESSION_KEYS`]. Stacks substitute
//! `fromParameter` and `fromItem` ([`Expression::Parameter`], [`Expression::Item`]); the other
//! forms are resolved against the planes and are left exactly as written.

use crate::de::CoreScalar;
use crate::yaml::{Node, NodeValue, ScalarKind, Span};
use serde_json::Value;

/// What a mapping node is, as far as Stacks are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expression<'n> {
    /// `{fromParameter: {name: x}}`.
    Parameter {
        /// The parameter.
        name: &'n str,
        /// The `name` value, for labels.
        span: Span,
    },
    /// `{fromItem: {pointer: /p}}` (no pointer: the whole item).
    Item {
        /// The pointer, `""` for the whole item.
        pointer: &'n str,
        /// The pointer's node (or the expression), for labels.
        span: Span,
    },
    /// Another form (`fromArtifact`, ...): left for its own resolution.
    Other,
}

/// Why a mapping with an expression key is not a valid expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionError {
    /// Which rule it breaks: [`crate::Code::ExpressionKeys`] (another key beside the
    /// expression key), [`crate::Code::UnknownField`] / [`crate::Code::MissingField`] (the
    /// arguments) or [`crate::Code::InvalidValue`].
    pub code: crate::Code,
    /// Where.
    pub span: Span,
    /// What is wrong.
    pub message: String,
}

/// The expression `node` is, if it is one: `Ok(None)` for any other node.
pub fn recognise(node: &Node) -> Result<Option<Expression<'_>>, ExpressionError> {
    let Some(entries) = node.as_map() else {
        return Ok(None);
    };
    let Some((key, args)) = entries.iter().find(|(k, _)| {
        k.as_str()
            .is_some_and(|k| crate::expr::EXPRESSION_KEYS.contains(&k))
    }) else {
        return Ok(None);
    };
    let word = key.as_str().unwrap_or_default();
    if let Some((other, _)) = entries.iter().find(|(k, _)| !std::ptr::eq(k, key)) {
        return Err(ExpressionError {
            code: crate::Code::ExpressionKeys,
            span: other.span,
            message: format!(
                "`{}` beside `{word}`: an expression is a mapping with that one key",
                other.as_str().unwrap_or_default()
            ),
        });
    }
    let (allowed, required): (&[&str], Option<&str>) = match word {
        "fromParameter" => (&["name"], Some("name")),
        "fromItem" => (&["pointer"], None),
        _ => return Ok(Some(Expression::Other)),
    };
    let arg_entries = match &args.value {
        NodeValue::Map(m) => m.as_slice(),
        _ if args.is_null() && required.is_none() => &[],
        _ => {
            return Err(ExpressionError {
                code: crate::Code::InvalidValue,
                span: args.span,
                message: format!("`{word}` takes a mapping, e.g. `{}`", example(word)),
            });
        }
    };
    for (k, _) in arg_entries {
        let name = k.as_str().unwrap_or_default();
        if !allowed.contains(&name) {
            return Err(ExpressionError {
                code: crate::Code::UnknownField,
                span: k.span,
                message: format!("`{word}` has no argument `{name}`: {}", example(word)),
            });
        }
    }
    let text = |field: &str| -> Result<Option<(&str, Span)>, ExpressionError> {
        let Some(v) = args.get(field) else {
            return Ok(None);
        };
        match &v.value {
            NodeValue::Scalar(s, _) if !v.is_null() => Ok(Some((s.as_str(), v.span))),
            _ => Err(ExpressionError {
                code: crate::Code::InvalidValue,
                span: v.span,
                message: format!("`{word}.{field}` is text"),
            }),
        }
    };
    if word == "fromParameter" {
        let Some((name, span)) = text("name")? else {
            return Err(ExpressionError {
                code: crate::Code::MissingField,
                span: key.span,
                message: format!("`fromParameter` needs `name`: {}", example(word)),
            });
        };
        return Ok(Some(Expression::Parameter { name, span }));
    }
    let (pointer, span) = text("pointer")?.unwrap_or(("", node.span));
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(ExpressionError {
            code: crate::Code::InvalidValue,
            span,
            message: format!("`{pointer}` is not a JSON pointer: it starts with `/`"),
        });
    }
    Ok(Some(Expression::Item { pointer, span }))
}

fn example(word: &str) -> &'static str {
    match word {
        "fromParameter" => "`{fromParameter: {name: <parameter>}}`",
        _ => "`{fromItem: {pointer: /<field>}}`",
    }
}

/// The node RFC 6901 `pointer` names inside `node` (`""`: `node` itself; a malformed pointer
/// names nothing).
pub fn pointer<'n>(node: &'n Node, pointer: &str) -> Option<&'n Node> {
    let mut at = node;
    for token in crate::pointer::Pointer::parse(pointer).ok()?.tokens() {
        at = match &at.value {
            NodeValue::Map(_) => at.get(&token)?,
            NodeValue::Seq(items) => items.get(crate::pointer::array_index(&token)?)?,
            NodeValue::Scalar(..) => return None,
        };
    }
    Some(at)
}

/// `node` with every span set to `span`: a value put in place of an expression is labelled at
/// the expression.
pub(crate) fn respan(node: &Node, span: Span) -> Node {
    let value = match &node.value {
        NodeValue::Scalar(s, k) => NodeValue::Scalar(s.clone(), *k),
        NodeValue::Seq(items) => NodeValue::Seq(items.iter().map(|n| respan(n, span)).collect()),
        NodeValue::Map(entries) => NodeValue::Map(
            entries
                .iter()
                .map(|(k, v)| (respan(k, span), respan(v, span)))
                .collect(),
        ),
    };
    Node { span, value }
}

/// The JSON a YAML 1.2 editor sees for `node` (plain scalars typed by the core schema).
pub fn to_json(node: &Node) -> Value {
    match &node.value {
        NodeValue::Scalar(s, ScalarKind::Quoted) => Value::String(s.clone()),
        NodeValue::Scalar(s, ScalarKind::Plain) => match CoreScalar::of(s) {
            CoreScalar::Null => Value::Null,
            CoreScalar::Bool(b) => Value::Bool(b),
            CoreScalar::Int(Some(i)) => i64::try_from(i)
                .map(Value::from)
                .or_else(|_| u64::try_from(i).map(Value::from))
                .unwrap_or_else(|_| Value::String(s.clone())),
            CoreScalar::Float(f) => serde_json::Number::from_f64(f)
                .map_or_else(|| Value::String(s.clone()), Value::Number),
            CoreScalar::Int(None) | CoreScalar::Str => Value::String(s.clone()),
        },
        NodeValue::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        NodeValue::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), to_json(v)))
                .collect(),
        ),
    }
}

/// The YAML type of a scalar as a parameter type sees it.
pub(crate) fn scalar_type(node: &Node) -> Option<super::spec::ItemFieldType> {
    use super::spec::ItemFieldType as T;
    match &node.value {
        NodeValue::Scalar(_, ScalarKind::Quoted) => Some(T::String),
        NodeValue::Scalar(s, ScalarKind::Plain) => match CoreScalar::of(s) {
            CoreScalar::Bool(_) => Some(T::Boolean),
            CoreScalar::Int(Some(_)) => Some(T::Integer),
            CoreScalar::Str | CoreScalar::Int(None) => Some(T::String),
            CoreScalar::Null | CoreScalar::Float(_) => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    fn node(text: &str) -> Node {
        parse_documents(text)
            .ok()
            .and_then(|d| d.into_iter().next())
            .unwrap_or(Node {
                span: Span::new(0, 0),
                value: NodeValue::Seq(Vec::new()),
            })
    }

    #[test]
    fn recognises_the_forms_and_refuses_a_second_key() {
        let n = node("{fromParameter: {name: node}}");
        assert!(matches!(
            recognise(&n),
            Ok(Some(Expression::Parameter { name: "node", .. }))
        ));
        let n = node("{fromItem: {pointer: /vmid}}");
        assert!(matches!(
            recognise(&n),
            Ok(Some(Expression::Item {
                pointer: "/vmid",
                ..
            }))
        ));
        let n = node("{fromArtifact: {resource: LXC/x, name: a, pointer: /p}}");
        assert_eq!(recognise(&n), Ok(Some(Expression::Other)));
        let n = node("{node: pve1}");
        assert_eq!(recognise(&n), Ok(None));
        let n = node("{fromParameter: {name: node}, extra: 1}");
        assert!(
            matches!(recognise(&n), Err(e) if e.code == crate::Code::ExpressionKeys && e.message.contains("`extra`"))
        );
        let n = node("{fromParameter: {nam: node}}");
        assert!(matches!(recognise(&n), Err(e) if e.code == crate::Code::UnknownField));
        let n = node("{fromItem: {pointer: vmid}}");
        assert!(matches!(recognise(&n), Err(e) if e.code == crate::Code::InvalidValue));
    }

    #[test]
    fn pointers_follow_rfc_6901() {
        let n = node("{a: {b/c: 1, 'd~e': 2}, l: [x, y]}");
        let text = |p: &str| pointer(&n, p).and_then(|n| n.as_str()).map(str::to_owned);
        assert_eq!(text("/a/b~1c").as_deref(), Some("1"));
        assert_eq!(text("/a/d~0e").as_deref(), Some("2"));
        assert_eq!(text("/l/1").as_deref(), Some("y"));
        assert_eq!(text("/l/01"), None);
        assert_eq!(text("/l/2"), None);
        assert_eq!(text("/missing"), None);
        assert_eq!(text("a"), None);
        assert!(pointer(&n, "").is_some());
    }
}
