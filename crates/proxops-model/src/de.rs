//! Serde decoding of typed values out of a [`Node`] tree that reports every problem, not the first.
//!
//! The deserializer records a [`Problem`] and carries on wherever serde lets it: an unknown field is
//! reported (with a did-you-mean) and skipped; a missing required field is reported and filled with
//! a placeholder; a scalar of the wrong type or an unknown enum variant is reported and replaced by
//! the type's zero value. A value decoded with problems is never used: the caller discards it. The
//! required fields of each struct come from its JSON Schema, so the schema and the decoder cannot
//! disagree about what is optional.

use crate::diagnostic::Code;
use crate::yaml::{Node, NodeValue, ScalarKind, Span, is_null_text};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

/// One problem found while decoding or validating a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The stable diagnostic code.
    pub code: Code,
    /// Where in the document.
    pub span: Span,
    /// What is wrong.
    pub message: String,
    /// The label text on the span.
    pub label: String,
    /// How to fix it, if we can tell.
    pub help: Option<String>,
}

/// Struct name (as serde sees it) -> the fields that must be present.
#[derive(Debug, Default, Clone)]
pub struct RequiredFields(HashMap<String, Vec<Shape>>);

/// One struct known by a type name: its field names and which of them are required. Two types
/// may share a name (an embedder's `Checksum` beside the built-in one); their fields tell them
/// apart.
#[derive(Debug, Clone, Default)]
struct Shape {
    fields: Vec<String>,
    required: Vec<String>,
}

impl RequiredFields {
    /// Learns from a schema generator's definitions (type name -> schema).
    pub fn learn_definitions(&mut self, definitions: &serde_json::Map<String, serde_json::Value>) {
        for (name, def) in definitions {
            let Some(req) = def.get("required").and_then(|r| r.as_array()) else {
                continue;
            };
            let required: Vec<String> = req
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            let mut fields: Vec<String> = def
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            fields.sort();
            let shapes = self.0.entry(name.clone()).or_default();
            // The same type learnt again (one generator per kind) replaces itself.
            shapes.retain(|s| s.fields != fields);
            shapes.push(Shape { fields, required });
        }
    }

    /// The required fields of the struct `name` whose fields are `fields`.
    fn of(&self, name: &str, fields: &[&str]) -> &[String] {
        let Some(shapes) = self.0.get(name) else {
            return &[];
        };
        if let [only] = shapes.as_slice() {
            return &only.required;
        }
        // Several types with this name: the one with the most fields in common.
        shapes
            .iter()
            .max_by_key(|s| {
                s.fields
                    .iter()
                    .filter(|f| fields.contains(&f.as_str()))
                    .count()
            })
            .map_or(&[], |s| s.required.as_slice())
    }
}

/// Newtype names whose text has a format the decoder checks itself (see [`crate::quantity`]).
pub(crate) const QUANTITY_NEWTYPE: &str = "proxops::Quantity";

/// The problems found so far in one document.
#[derive(Debug, Default)]
pub struct Sink {
    problems: RefCell<Vec<Problem>>,
    /// Fields filled with placeholders: (span where they are labelled, field name).
    placeholders: RefCell<Vec<(Span, String)>>,
}

impl Sink {
    /// Records a problem.
    pub fn push(&self, p: Problem) {
        self.problems.borrow_mut().push(p);
    }

    /// How many problems have been recorded.
    pub fn len(&self) -> usize {
        self.problems.borrow().len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a problem was already recorded at exactly `span`.
    pub fn has_span(&self, span: Span) -> bool {
        self.problems.borrow().iter().any(|p| p.span == span)
    }

    /// Whether `field`, labelled at `span`, was filled with a placeholder because it was missing
    /// or its container was malformed.
    pub fn is_placeholder(&self, span: Span, field: &str) -> bool {
        self.placeholders
            .borrow()
            .iter()
            .any(|(s, f)| *s == span && f == field)
    }

    fn placeholder(&self, span: Span, field: &str) {
        self.placeholders
            .borrow_mut()
            .push((span, field.to_owned()));
    }

    /// Takes every recorded problem.
    pub fn take(&self) -> Vec<Problem> {
        std::mem::take(&mut *self.problems.borrow_mut())
    }
}

/// Decodes `T` from `node`, recording problems in `sink`. Returns `None` if any problem was found
/// in this node (the partially recovered value is dropped).
pub fn decode<T: DeserializeOwned>(
    node: &Node,
    sink: &Sink,
    required: &RequiredFields,
) -> Option<T> {
    let before = sink.len();
    decode_recovering(node, None, sink, required).filter(|_| sink.len() == before)
}

/// Like [`decode`], but returns the recovered value even when problems were recorded (missing and
/// invalid values replaced by zero values), so that further checks can still run on it. The
/// caller must not use such a value for anything but checking. `key` is the span of the key
/// whose value `node` is, where missing fields are labelled.
pub fn decode_recovering<T: DeserializeOwned>(
    node: &Node,
    key: Option<Span>,
    sink: &Sink,
    required: &RequiredFields,
) -> Option<T> {
    let de = NodeDe {
        node: Some(node),
        span: node.span,
        key,
        sink,
        required,
    };
    match T::deserialize(de) {
        Ok(v) => Some(v),
        Err(e) => {
            // Errors that escape recovery come from our own types; report them at the node.
            if !e.recorded {
                sink.push(problem(Code::InvalidValue, node.span, e.message, None));
            }
            None
        }
    }
}

fn problem(code: Code, span: Span, message: String, help: Option<String>) -> Problem {
    Problem {
        code,
        span,
        label: match code {
            Code::UnknownField => "unknown field".to_owned(),
            Code::MissingField => "required field missing here".to_owned(),
            _ => "invalid value".to_owned(),
        },
        message,
        help,
    }
}

/// The error type of the node deserializer.
#[derive(Debug)]
pub struct DeError {
    message: String,
    recorded: bool,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            recorded: false,
        }
    }
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// A deserializer over one node; `node: None` is a placeholder for a missing field, which yields
/// the zero value of whatever is asked for without recording anything.
struct NodeDe<'n, 's> {
    node: Option<&'n Node>,
    span: Span,
    /// The key this node is the value of, where a missing field of it is labelled.
    key: Option<Span>,
    sink: &'s Sink,
    required: &'s RequiredFields,
}

impl<'n, 's> NodeDe<'n, 's> {
    fn child(&self, node: &'n Node) -> Self {
        NodeDe {
            node: Some(node),
            span: node.span,
            key: None,
            sink: self.sink,
            required: self.required,
        }
    }

    fn placeholder(&self) -> Self {
        NodeDe {
            node: None,
            span: self.span,
            key: None,
            sink: self.sink,
            required: self.required,
        }
    }

    fn invalid(&self, message: String, help: Option<String>) {
        self.sink
            .push(problem(Code::InvalidValue, self.span, message, help));
    }

    fn describe(&self) -> String {
        match self.node.map(|n| &n.value) {
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) if is_null_text(s) => "null".to_owned(),
            Some(NodeValue::Scalar(s, ScalarKind::Quoted)) => format!("the string \"{s}\""),
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) => format!("`{s}`"),
            Some(NodeValue::Seq(_)) => "a sequence".to_owned(),
            Some(NodeValue::Map(_)) => "a mapping".to_owned(),
            None => "nothing".to_owned(),
        }
    }

    /// The scalar text if this is a plain (untyped) scalar.
    fn plain(&self) -> Option<&'n str> {
        match self.node.map(|n| &n.value) {
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) => Some(s),
            _ => None,
        }
    }

    fn int<T: std::str::FromStr + Default>(&self, what: &str) -> T {
        let Some(node) = self.node else {
            return T::default();
        };
        if let Some(text) = self.plain() {
            let signless = text.strip_prefix('+').unwrap_or(text);
            // Copied only if there are digit separators to remove.
            let cleaned: std::borrow::Cow<'_, str> = if signless.contains('_') {
                signless.replace('_', "").into()
            } else {
                signless.into()
            };
            if let Ok(v) = cleaned.parse::<T>() {
                return v;
            }
            if cleaned.parse::<i128>().is_ok() {
                self.invalid(format!("{text} is out of range for {what}"), None);
                return T::default();
            }
        }
        let help = node
            .as_str()
            .filter(|_| matches!(node.value, NodeValue::Scalar(_, ScalarKind::Quoted)))
            .filter(|s| s.parse::<i128>().is_ok())
            .map(|_| "remove the quotes: numbers are written bare".to_owned());
        self.invalid(format!("expected {what}, found {}", self.describe()), help);
        T::default()
    }

    fn float(&self) -> f64 {
        if self.node.is_none() {
            return 0.0;
        }
        if let Some(v) = self.plain().and_then(|t| t.parse::<f64>().ok()) {
            return v;
        }
        self.invalid(
            format!("expected a number, found {}", self.describe()),
            None,
        );
        0.0
    }

    fn boolean(&self) -> bool {
        if self.node.is_none() {
            return false;
        }
        match self.plain() {
            Some("true" | "True" | "TRUE") => return true,
            Some("false" | "False" | "FALSE") => return false,
            _ => {}
        }
        let help = self
            .node
            .and_then(Node::as_str)
            .filter(|s| {
                matches!(
                    s.to_ascii_lowercase().as_str(),
                    "yes" | "no" | "on" | "off" | "1" | "0" | "true" | "false"
                )
            })
            .map(|_| "write `true` or `false` without quotes".to_owned());
        self.invalid(
            format!("expected true or false, found {}", self.describe()),
            help,
        );
        false
    }

    fn string(&self) -> String {
        match self.node.map(|n| &n.value) {
            None => String::new(),
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) if is_null_text(s) => {
                self.invalid("expected a string, found null".to_owned(), None);
                String::new()
            }
            Some(NodeValue::Scalar(s, _)) => s.clone(),
            Some(_) => {
                self.invalid(
                    format!("expected a string, found {}", self.describe()),
                    None,
                );
                String::new()
            }
        }
    }
}

macro_rules! de_int {
    ($($method:ident $visit:ident $ty:ty, $what:literal;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let v: $ty = self.int($what);
            visitor.$visit(v)
        }
    )*};
}

impl<'de, 'n, 's> de::Deserializer<'de> for NodeDe<'n, 's> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let Some(node) = self.node else {
            return visitor.visit_unit();
        };
        match &node.value {
            NodeValue::Scalar(s, ScalarKind::Plain) => {
                if is_null_text(s) {
                    visitor.visit_unit()
                } else if let Ok(b) = s.parse::<bool>() {
                    visitor.visit_bool(b)
                } else if let Ok(i) = s.parse::<i64>() {
                    visitor.visit_i64(i)
                } else if let Ok(f) = s
                    .parse::<f64>()
                    .map_err(|_| ())
                    .and_then(|f| if f.is_finite() { Ok(f) } else { Err(()) })
                {
                    visitor.visit_f64(f)
                } else {
                    visitor.visit_str(s)
                }
            }
            NodeValue::Scalar(s, ScalarKind::Quoted) => visitor.visit_str(s),
            NodeValue::Seq(_) => self.deserialize_seq(visitor),
            NodeValue::Map(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_bool(self.boolean())
    }

    de_int! {
        deserialize_i8 visit_i8 i8, "an integer";
        deserialize_i16 visit_i16 i16, "an integer";
        deserialize_i32 visit_i32 i32, "an integer";
        deserialize_i64 visit_i64 i64, "an integer";
        deserialize_u8 visit_u8 u8, "a non-negative integer";
        deserialize_u16 visit_u16 u16, "a non-negative integer";
        deserialize_u32 visit_u32 u32, "a non-negative integer";
        deserialize_u64 visit_u64 u64, "a non-negative integer";
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_f32(self.float() as f32)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_f64(self.float())
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let s = self.string();
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => visitor.visit_char(c),
            _ => {
                if self.node.is_some() {
                    self.invalid("expected a single character".to_owned(), None);
                }
                visitor.visit_char(' ')
            }
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_string(self.string())
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_string(self.string())
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_byte_buf(self.string().into_bytes())
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            None => visitor.visit_none(),
            Some(n) if n.is_null() => visitor.visit_none(),
            Some(_) => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if let Some(n) = self.node
            && !n.is_null()
        {
            self.invalid(format!("expected null, found {}", self.describe()), None);
        }
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if name == QUANTITY_NEWTYPE {
            let text = match self.node.map(|n| &n.value) {
                None => "0".to_owned(),
                Some(NodeValue::Scalar(s, _)) if !self.node.is_some_and(Node::is_null) => s.clone(),
                Some(_) => {
                    self.invalid(
                        format!("expected a size such as `8GiB`, found {}", self.describe()),
                        None,
                    );
                    "0".to_owned()
                }
            };
            let checked = match crate::quantity::Quantity::parse(&text) {
                Ok(_) => text,
                Err(e) => {
                    self.invalid(
                        e.to_string(),
                        Some(crate::quantity::QUANTITY_HELP.to_owned()),
                    );
                    "0".to_owned()
                }
            };
            return visitor.visit_newtype_struct(checked.into_deserializer());
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let items: &'n [Node] = match self.node.map(|n| &n.value) {
            Some(NodeValue::Seq(items)) => items,
            None => &[],
            Some(_) if self.node.is_some_and(Node::is_null) => &[],
            Some(_) => {
                self.invalid(format!("expected a list, found {}", self.describe()), None);
                &[]
            }
        };
        visitor.visit_seq(SeqAccess {
            items: items.iter(),
            parent: self,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let entries: &'n [(Node, Node)] = match self.node.map(|n| &n.value) {
            Some(NodeValue::Map(entries)) => entries,
            None => &[],
            Some(_) if self.node.is_some_and(Node::is_null) => &[],
            Some(_) => {
                self.invalid(
                    format!("expected a mapping, found {}", self.describe()),
                    None,
                );
                &[]
            }
        };
        visitor.visit_map(MapAccess {
            entries: entries.iter(),
            fields: None,
            filter: false,
            missing: [].iter(),
            value: None,
            parent: self,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let container_span = self
            .key
            .unwrap_or_else(|| self.node.map_or(self.span, Node::head));
        let required = self.required.of(name, fields);
        // The entries handed to the visitor: the known fields in source order, then a placeholder
        // for each required field that is absent (see `MapAccess`).
        let mut unknown = false;
        let entries: &'n [(Node, Node)] = match self.node.map(|n| &n.value) {
            Some(NodeValue::Map(entries)) => {
                for (k, _) in entries {
                    let key = k.as_str().unwrap_or_default();
                    if !fields.contains(&key) {
                        unknown = true;
                        let help = did_you_mean(key, fields.iter().copied())
                            .map(|s| format!("did you mean `{s}`?"))
                            .or_else(|| Some(format!("known fields: {}", fields.join(", "))));
                        self.sink.push(problem(
                            Code::UnknownField,
                            k.span,
                            format!("unknown field `{key}`"),
                            help,
                        ));
                    }
                }
                entries
            }
            None => &[],
            Some(_) if self.node.is_some_and(Node::is_null) => &[],
            Some(_) => {
                self.invalid(
                    format!("expected a mapping, found {}", self.describe()),
                    None,
                );
                // The mapping is reported as a whole; its fields become placeholders silently.
                for req in required {
                    self.sink.placeholder(container_span, req);
                }
                return visitor.visit_map(MapAccess {
                    entries: [].iter(),
                    fields: Some(fields),
                    filter: false,
                    missing: required.iter(),
                    value: None,
                    parent: self,
                });
            }
        };
        let mut missing = false;
        for req in required {
            if !is_present(entries, fields, req) {
                missing = true;
                // A placeholder struct (no node) fills its required fields silently.
                if self.node.is_some() {
                    self.sink.push(problem(
                        Code::MissingField,
                        container_span,
                        format!("missing required field `{req}`"),
                        None,
                    ));
                    self.sink.placeholder(container_span, req);
                }
            }
        }
        visitor.visit_map(MapAccess {
            entries: entries.iter(),
            fields: Some(fields),
            filter: unknown,
            missing: if missing { required } else { &[] }.iter(),
            value: None,
            parent: self,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let first = variants.first().copied().unwrap_or_default();
        let chosen: &str = match self.node.map(|n| &n.value) {
            None => first,
            Some(NodeValue::Scalar(s, _)) if variants.contains(&s.as_str()) => s,
            Some(NodeValue::Scalar(s, _)) => {
                let help = did_you_mean(s, variants.iter().copied())
                    .map(|v| format!("did you mean `{v}`?"));
                let list = variants
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                self.invalid(format!("`{s}` is not one of {list}"), help);
                first
            }
            Some(_) => {
                self.invalid(
                    format!(
                        "expected one of {}, found {}",
                        variants.join(", "),
                        self.describe()
                    ),
                    None,
                );
                first
            }
        };
        visitor.visit_enum(chosen.into_deserializer())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // Field names are compared, never kept: no need to copy them.
        match self.node.map(|n| &n.value) {
            Some(NodeValue::Scalar(s, _)) if !self.node.is_some_and(Node::is_null) => {
                visitor.visit_str(s)
            }
            _ => self.deserialize_str(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

/// Whether the struct entries hold the known field `req`.
fn is_present(entries: &[(Node, Node)], fields: &[&str], req: &str) -> bool {
    fields.contains(&req) && entries.iter().any(|(k, _)| k.as_str() == Some(req))
}

enum Entry<'n> {
    Present(&'n Node, &'n Node),
    Missing,
}

struct SeqAccess<'n, 's> {
    items: std::slice::Iter<'n, Node>,
    parent: NodeDe<'n, 's>,
}

impl<'de, 'n, 's> de::SeqAccess<'de> for SeqAccess<'n, 's> {
    type Error = DeError;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            Some(item) => seed.deserialize(self.parent.child(item)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        // Lets a `Vec` be allocated at its final size.
        Some(self.items.len())
    }
}

/// The entries of a mapping. For a struct (`fields` is set), only the entries whose keys are
/// known fields, then a placeholder for each required field that is not among them.
struct MapAccess<'n, 's> {
    entries: std::slice::Iter<'n, (Node, Node)>,
    fields: Option<&'static [&'static str]>,
    /// Whether some keys are not fields and must be skipped (they were reported already).
    filter: bool,
    /// The required fields to check for absence once the entries are done (empty when none is
    /// absent).
    missing: std::slice::Iter<'s, String>,
    value: Option<Entry<'n>>,
    parent: NodeDe<'n, 's>,
}

impl<'de, 'n, 's> de::MapAccess<'de> for MapAccess<'n, 's> {
    type Error = DeError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        for (k, v) in self.entries.by_ref() {
            if self.filter
                && let Some(fields) = self.fields
                && !fields.contains(&k.as_str().unwrap_or_default())
            {
                continue;
            }
            let key = seed.deserialize(self.parent.child(k))?;
            self.value = Some(Entry::Present(k, v));
            return Ok(Some(key));
        }
        let Some(fields) = self.fields else {
            return Ok(None);
        };
        // Presence is checked against the whole mapping (a non-mapping has no fields).
        let all: &[(Node, Node)] = match self.parent.node.map(|n| &n.value) {
            Some(NodeValue::Map(all)) => all,
            _ => &[],
        };
        for req in self.missing.by_ref() {
            if is_present(all, fields, req) {
                continue;
            }
            let key = seed.deserialize(req.as_str().into_deserializer())?;
            self.value = Some(Entry::Missing);
            return Ok(Some(key));
        }
        Ok(None)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DeError> {
        match self.value.take() {
            Some(Entry::Present(k, v)) => {
                let mut child = self.parent.child(v);
                child.key = Some(k.span);
                seed.deserialize(child)
            }
            Some(Entry::Missing) | None => seed.deserialize(self.parent.placeholder()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    #[test]
    fn integers_take_a_sign_and_digit_separators() {
        let docs = parse_documents("[1_000, +42, 7, '8', 1__0, 99999999999]").unwrap_or_default();
        let Some(doc) = docs.first() else {
            panic!("a document");
        };
        let sink = Sink::default();
        let values: Option<Vec<u32>> =
            decode_recovering(doc, None, &sink, &RequiredFields::default());
        assert_eq!(values, Some(vec![1000, 42, 7, 0, 10, 0]));
        let messages: Vec<String> = sink.take().into_iter().map(|p| p.message).collect();
        assert_eq!(
            messages,
            [
                "expected a non-negative integer, found the string \"8\"",
                "99999999999 is out of range for a non-negative integer",
            ]
        );
    }
}
