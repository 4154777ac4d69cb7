//! [`Value`] and [`Document`]: the decrypted tree, in file order, every scalar redacted in `Debug`.

use crate::Secret;
use crate::cipher::format_float;
use std::fmt;

/// A decrypted value. Strings are [`Secret`]s; `Debug` redacts every scalar and shows only the
/// shape (mapping keys are not secret: sops keeps them in clear text).
#[derive(Clone, PartialEq)]
pub enum Value {
    /// `null` (or an empty value).
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string (also timestamps, which sops keeps as text).
    Str(Secret),
    /// A mapping, in file order.
    Map(Vec<(String, Value)>),
    /// A sequence.
    Seq(Vec<Value>),
}

impl Value {
    /// The value under `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at a path of mapping keys.
    pub fn get_path(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(self, |v, key| v.get(key))
    }

    /// A scalar as text (numbers and booleans stringified), `None` for null and collections.
    pub fn as_secret(&self) -> Option<Secret> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(Secret::new(i.to_string())),
            Value::Float(f) => Some(Secret::new(format_float(*f))),
            Value::Bool(b) => Some(Secret::new(b.to_string())),
            Value::Null | Value::Map(_) | Value::Seq(_) => None,
        }
    }

    /// Whether this is a string, number or boolean.
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Value::Null | Value::Map(_) | Value::Seq(_))
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(_) => f.write_str("Bool([redacted])"),
            Value::Int(_) => f.write_str("Int([redacted])"),
            Value::Float(_) => f.write_str("Float([redacted])"),
            Value::Str(_) => f.write_str("Str([redacted])"),
            Value::Map(entries) => f
                .debug_map()
                .entries(entries.iter().map(|(k, v)| (k, v)))
                .finish(),
            Value::Seq(items) => f.debug_list().entries(items).finish(),
        }
    }
}

/// A decrypted SOPS document: the tree without its `sops` metadata.
#[derive(Clone, PartialEq)]
pub struct Document {
    pub(crate) root: Value,
}

impl Document {
    /// A document built in memory (tests, or an embedder that keeps its secrets elsewhere).
    pub fn new(root: Value) -> Document {
        Document { root }
    }

    /// The root mapping.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// The value at a path of mapping keys, e.g. `["secrets", "proxops-token"]`.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        self.root.get_path(path)
    }
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("root", &self.root)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_shape_only() {
        let v = Value::Map(vec![
            ("token".into(), Value::Str(Secret::new("abc123"))),
            ("port".into(), Value::Int(8006)),
            (
                "list".into(),
                Value::Seq(vec![Value::Bool(true), Value::Null]),
            ),
        ]);
        let shown = format!("{:?}", Document { root: v.clone() });
        assert!(shown.contains("token") && shown.contains("list"), "{shown}");
        assert!(!shown.contains("abc123") && !shown.contains("8006") && !shown.contains("true"));
        assert_eq!(
            v.get_path(&["port"])
                .and_then(Value::as_secret)
                .unwrap()
                .expose(),
            "8006"
        );
        assert!(v.get_path(&["token", "x"]).is_none());
    }
}
