//! Serde decoding of typed values out of a [`Node`] tree that reports every problem, not the first.
//!
//! The deserializer records a [`Problem`] and carries on wherever serde lets it: an unknown field is
//! reported (with a did-you-mean) and skipped; a missing required field is reported and filled with
//! a placeholder; a scalar of the wrong type or an unknown enum variant is reported and replaced by
//! the type's zero value. A value decoded with problems is never used: the caller discards it. The
//! required fields of each struct come from its JSON Schema, so the schema and the decoder cannot
//! disagree about what is optional.
//!
//! Plain scalars are typed as YAML 1.2's core schema types them (`CoreScalar`), which is how a
//! YAML 1.2 editor turns a manifest into the JSON it checks against that schema: a manifest is
//! accepted here exactly when such an editor accepts it. So `node: 1` is refused (a number where
//! a string is expected: quote it), `vmid: 1_000` is refused (a string in YAML 1.2: write
//! `1000`), and `vmid: 1e2` is accepted (an integral float, which JSON Schema's `integer` takes).

use crate::diagnostic::Code;
pub use crate::diagnostic::did_you_mean;
use crate::quantity::{QUANTITY_HELP, QUANTITY_NEWTYPE, Quantity, QuantityError};
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

/// What a plain scalar is under YAML 1.2's core schema: what a YAML 1.2 editor (and the JSON it
/// checks against the manifest schemas) sees. The decoder types plain scalars the same way, so
/// that a manifest the editor marks as wrong is refused here too, and the other way round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CoreScalar {
    /// `~`, `null`, `Null`, `NULL` or nothing.
    Null,
    /// `true`/`True`/`TRUE`, `false`/`False`/`FALSE`.
    Bool(bool),
    /// `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+` (`None`: too large for 128 bits).
    Int(Option<i128>),
    /// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, `[-+]?\.inf`, `.nan`.
    Float(f64),
    /// Anything else, e.g. `1_000` (digit separators are YAML 1.1), `0b101`, `1.2.3`, `pve01`.
    Str,
}

impl CoreScalar {
    /// Types a plain scalar's text.
    pub(crate) fn of(text: &str) -> CoreScalar {
        match text {
            _ if is_null_text(text) => return CoreScalar::Null,
            "true" | "True" | "TRUE" => return CoreScalar::Bool(true),
            "false" | "False" | "FALSE" => return CoreScalar::Bool(false),
            ".nan" | ".NaN" | ".NAN" => return CoreScalar::Float(f64::NAN),
            _ => {}
        }
        let radix = |digits: &str, radix: u32, ok: fn(&u8) -> bool| {
            if !digits.is_empty() && digits.bytes().all(|b| ok(&b)) {
                CoreScalar::Int(i128::from_str_radix(digits, radix).ok())
            } else {
                CoreScalar::Str
            }
        };
        if let Some(octal) = text.strip_prefix("0o") {
            return radix(octal, 8, |b| matches!(b, b'0'..=b'7'));
        }
        if let Some(hex) = text.strip_prefix("0x") {
            return radix(hex, 16, u8::is_ascii_hexdigit);
        }
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
            return CoreScalar::Float(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
            // `i128::from_str` takes the sign as YAML writes it.
            return CoreScalar::Int(text.parse::<i128>().ok());
        }
        // The float form: a mantissa with at least one digit and at most one point, then an
        // optional exponent with at least one digit.
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
            None => (unsigned, None),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let mantissa_ok =
            (!whole.is_empty() || !fraction.is_empty()) && digits(whole) && digits(fraction);
        let exponent_ok = exponent.is_none_or(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && digits(e)
        });
        match text.parse::<f64>() {
            Ok(f) if mantissa_ok && exponent_ok => CoreScalar::Float(f),
            _ => CoreScalar::Str,
        }
    }

    /// The integer this is, if it is one: an integer, or a float with no fractional part (JSON
    /// Schema's `integer` accepts `100.0` and `1e2`).
    fn integer(self) -> Option<i128> {
        match self {
            CoreScalar::Int(i) => i,
            // `as` saturates: a huge float stays out of range for every integer field.
            CoreScalar::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(f as i128),
            _ => None,
        }
    }

    /// What the value is, for messages: "the number `42`".
    fn noun(self) -> &'static str {
        match self {
            CoreScalar::Null => "null",
            CoreScalar::Bool(_) => "the boolean",
            CoreScalar::Int(_) | CoreScalar::Float(_) => "the number",
            CoreScalar::Str => "the text",
        }
    }
}

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
        is_key: false,
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

/// A deserializer over one node; `node: None` is a placeholder for a missing field, which yields
/// the zero value of whatever is asked for without recording anything.
struct NodeDe<'n, 's> {
    node: Option<&'n Node>,
    span: Span,
    /// The key this node is the value of, where a missing field of it is labelled.
    key: Option<Span>,
    /// Whether this node is a mapping key: keys are strings in JSON whatever YAML types them as
    /// (`2024: x` has the key `"2024"`), so a number or boolean is taken as its text.
    is_key: bool,
    sink: &'s Sink,
    required: &'s RequiredFields,
}

impl<'n, 's> NodeDe<'n, 's> {
    fn child(&self, node: &'n Node) -> Self {
        NodeDe {
            node: Some(node),
            span: node.span,
            key: None,
            is_key: false,
            sink: self.sink,
            required: self.required,
        }
    }

    fn placeholder(&self) -> Self {
        NodeDe {
            node: None,
            span: self.span,
            key: None,
            is_key: false,
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

    /// An integer. Plain scalars are typed as YAML 1.2 types them, and the schema's `integer`
    /// decides what is accepted:
    /// - `+42`, `0x2a` and `0o52` are YAML 1.2 integers: accepted;
    /// - `100.0` and `1e2` are floats with no fractional part, which JSON Schema's `integer`
    ///   accepts (JSON does not tell `100.0` from `100`): accepted, as the integer;
    /// - `1_000` is a string in YAML 1.2 (digit separators were YAML 1.1), which the schema
    ///   refuses: refused, with a help saying to write `1000`;
    /// - a quoted number is a string: refused, with a help saying to remove the quotes.
    fn int<T: TryFrom<i128> + Default>(&self, what: &str) -> T {
        let Some(node) = self.node else {
            return T::default();
        };
        if let Some(text) = self.plain() {
            let core = CoreScalar::of(text);
            if let Some(i) = core.integer() {
                if let Ok(v) = T::try_from(i) {
                    return v;
                }
                self.invalid(format!("{text} is out of range for {what}"), None);
                return T::default();
            }
            if core == CoreScalar::Int(None) {
                self.invalid(format!("{text} is out of range for {what}"), None);
                return T::default();
            }
            if core == CoreScalar::Str && text.contains('_') {
                let joined: String = text.chars().filter(|&c| c != '_').collect();
                if CoreScalar::of(&joined).integer().is_some() {
                    self.invalid(
                        format!("expected {what}, found `{text}`"),
                        Some(format!(
                            "write `{joined}`: YAML 1.2 numbers have no `_` digit separators, \
                             so `{text}` is a string"
                        )),
                    );
                    return T::default();
                }
            }
        }
        let help = node
            .as_str()
            .filter(|_| matches!(node.value, NodeValue::Scalar(_, ScalarKind::Quoted)))
            .filter(|s| CoreScalar::of(s).integer().is_some())
            .map(|_| "remove the quotes: numbers are written bare".to_owned());
        self.invalid(format!("expected {what}, found {}", self.describe()), help);
        T::default()
    }

    /// A number: a YAML 1.2 integer or finite float (`.inf` and `.nan` have no JSON form).
    fn float(&self) -> f64 {
        if self.node.is_none() {
            return 0.0;
        }
        if let Some(text) = self.plain() {
            let v = match CoreScalar::of(text) {
                CoreScalar::Int(Some(i)) => Some(i as f64),
                CoreScalar::Int(None) => text.parse::<f64>().ok(),
                CoreScalar::Float(f) => Some(f),
                _ => None,
            };
            if let Some(v) = v.filter(|v| v.is_finite()) {
                return v;
            }
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

    /// A string. A plain scalar that YAML 1.2 reads as a number or a boolean (`node: 1`,
    /// `tags: [2024]`, `pve-description: true`) is not one: the schema refuses it as a YAML 1.2
    /// editor sees it, so it is refused here too, with a help saying to quote it. Mapping keys
    /// are exempt (JSON keys are strings).
    fn string(&self) -> String {
        match self.node.map(|n| &n.value) {
            None => String::new(),
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) if is_null_text(s) => {
                self.invalid("expected a string, found null".to_owned(), None);
                String::new()
            }
            Some(NodeValue::Scalar(s, ScalarKind::Plain))
                if !self.is_key && CoreScalar::of(s) != CoreScalar::Str =>
            {
                let noun = CoreScalar::of(s).noun();
                self.invalid(
                    format!("expected a string, found {noun} `{s}`"),
                    Some(quote_help(s)),
                );
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

    /// The text of a size (see [`crate::quantity`]), checked; `"0"` after a problem. A plain
    /// scalar is typed as YAML 1.2 types it, like the schema's `anyOf` of a pattern-checked string
    /// and a non-negative integer sees it:
    /// - a string is parsed as `<digits><unit>`;
    /// - a non-negative integer is a number of bytes, whatever its spelling: `+1073741824`,
    ///   `0x40000000`, and integral floats such as `1e9` or `1048576.0` (JSON Schema's `integer`
    ///   accepts them); the text becomes its plain digits;
    /// - a negative or fractional number, `.inf`, `.nan` and booleans are refused.
    ///
    /// Memory and swap must further be whole MiB (checked by the kinds; the schema says so with
    /// `multipleOf`, see [`crate::quantity::MemorySize`]).
    fn quantity_text(&self) -> String {
        let text = match self.node.map(|n| &n.value) {
            None => return "0".to_owned(),
            Some(NodeValue::Scalar(s, ScalarKind::Plain)) if !is_null_text(s) => {
                match CoreScalar::of(s) {
                    CoreScalar::Str => s.clone(),
                    CoreScalar::Bool(_) => {
                        self.invalid(
                            format!("expected a size such as `8GiB`, found the boolean `{s}`"),
                            None,
                        );
                        return "0".to_owned();
                    }
                    core => {
                        let e = match core.integer() {
                            Some(i) if i >= 0 => match u64::try_from(i) {
                                Ok(bytes) => return self.quantity_checked(bytes.to_string()),
                                Err(_) => QuantityError::Overflow(s.clone()),
                            },
                            None if core == CoreScalar::Int(None) && !s.starts_with('-') => {
                                QuantityError::Overflow(s.clone())
                            }
                            // Negative, fractional, infinite or not a number.
                            _ => QuantityError::Syntax(s.clone()),
                        };
                        self.invalid(e.to_string(), Some(QUANTITY_HELP.to_owned()));
                        return "0".to_owned();
                    }
                }
            }
            Some(NodeValue::Scalar(s, ScalarKind::Quoted)) => s.clone(),
            Some(_) => {
                self.invalid(
                    format!("expected a size such as `8GiB`, found {}", self.describe()),
                    None,
                );
                return "0".to_owned();
            }
        };
        self.quantity_checked(text)
    }

    /// `text` if it is a size, otherwise `"0"` after reporting why not.
    fn quantity_checked(&self, text: String) -> String {
        match Quantity::parse(&text) {
            Ok(_) => text,
            Err(e) => {
                self.invalid(e.to_string(), Some(QUANTITY_HELP.to_owned()));
                "0".to_owned()
            }
        }
    }
}

/// The help for a plain scalar that YAML 1.2 does not read as a string.
fn quote_help(text: &str) -> String {
    let what = match CoreScalar::of(text) {
        CoreScalar::Bool(_) => "a boolean",
        CoreScalar::Null => "null",
        _ => "a number",
    };
    format!("quote the value to make it a string: `\"{text}\"` (unquoted, YAML reads it as {what})")
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
            // Typed as YAML 1.2 types it; a key stays text.
            NodeValue::Scalar(s, ScalarKind::Plain) if self.is_key => visitor.visit_str(s),
            NodeValue::Scalar(s, ScalarKind::Plain) => match CoreScalar::of(s) {
                CoreScalar::Null => visitor.visit_unit(),
                CoreScalar::Bool(b) => visitor.visit_bool(b),
                CoreScalar::Int(Some(i)) => match (i64::try_from(i), u64::try_from(i)) {
                    (Ok(i), _) => visitor.visit_i64(i),
                    (_, Ok(u)) => visitor.visit_u64(u),
                    _ => visitor.visit_i128(i),
                },
                CoreScalar::Int(None) => visitor.visit_str(s),
                CoreScalar::Float(f) if f.is_finite() => visitor.visit_f64(f),
                CoreScalar::Float(_) | CoreScalar::Str => visitor.visit_str(s),
            },
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
            return visitor.visit_newtype_struct(self.quantity_text().into_deserializer());
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
            // A secret written where its source should be named: refused without echoing it.
            Some(NodeValue::Scalar(..)) if name == crate::names::SECRET_SOURCE_STRUCT => {
                self.sink.push(Problem {
                    code: Code::PlainSecret,
                    span: self.span,
                    label: "a secret written in the file (masked here)".to_owned(),
                    message: "secrets are never written in configuration files: name where \
                              this one comes from"
                        .to_owned(),
                    help: Some(
                        "e.g. `{env: PROXOPS_SLACK_URL}` (an environment variable), \
                         `{file: /etc/proxops/slack.url}` or `{sops: slack-url}` (a key of the \
                         sink's SOPS `secrets-file`)"
                            .to_owned(),
                    ),
                });
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
            // A variant spelt like a YAML 1.2 number or boolean must be quoted to be a string.
            Some(NodeValue::Scalar(s, ScalarKind::Plain))
                if variants.contains(&s.as_str())
                    && !self.is_key
                    && CoreScalar::of(s) != CoreScalar::Str =>
            {
                let noun = CoreScalar::of(s).noun();
                self.invalid(
                    format!("expected a string, found {noun} `{s}`"),
                    Some(quote_help(s)),
                );
                first
            }
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
            let mut child = self.parent.child(k);
            child.is_key = true;
            let key = seed.deserialize(child)?;
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

    /// Decodes `T` from the single document `text`: the value and the problems as (message,
    /// help).
    fn decoded<T: DeserializeOwned>(text: &str) -> (Option<T>, Vec<(String, Option<String>)>) {
        let docs = parse_documents(text).unwrap_or_default();
        let Some(doc) = docs.first() else {
            panic!("a document in {text:?}");
        };
        let sink = Sink::default();
        let value = decode_recovering(doc, None, &sink, &RequiredFields::default());
        let problems = sink
            .take()
            .into_iter()
            .map(|p| (p.message, p.help))
            .collect();
        (value, problems)
    }

    fn messages(problems: &[(String, Option<String>)]) -> Vec<&str> {
        problems.iter().map(|(m, _)| m.as_str()).collect()
    }

    #[test]
    fn plain_scalars_are_typed_by_yaml_1_2_core_schema() {
        use CoreScalar::*;
        for (text, want) in [
            ("", Null),
            ("~", Null),
            ("NULL", Null),
            ("true", Bool(true)),
            ("False", Bool(false)),
            ("42", Int(Some(42))),
            ("+42", Int(Some(42))),
            ("-42", Int(Some(-42))),
            ("007", Int(Some(7))),
            ("0x2a", Int(Some(42))),
            ("0o52", Int(Some(42))),
            ("1.5", Float(1.5)),
            ("1.", Float(1.0)),
            (".5", Float(0.5)),
            ("-1e2", Float(-100.0)),
            ("1E+2", Float(100.0)),
            ("+.inf", Float(f64::INFINITY)),
            ("-.Inf", Float(f64::NEG_INFINITY)),
            // YAML 1.1 forms and other look-alikes are strings in YAML 1.2.
            ("1_000", Str),
            ("yes", Str),
            ("on", Str),
            ("0b101", Str),
            ("-0x2a", Str),
            ("0x", Str),
            ("1e", Str),
            ("e2", Str),
            (".", Str),
            ("+", Str),
            ("inf", Str),
            ("nan", Str),
            ("1.2.3", Str),
            ("v2.0", Str),
            ("8GiB", Str),
            (" 1", Str),
        ] {
            assert_eq!(CoreScalar::of(text), want, "{text:?}");
        }
        assert!(matches!(CoreScalar::of(".nan"), Float(f) if f.is_nan()));
        assert_eq!(
            CoreScalar::of("99999999999999999999999999999999999999999"),
            Int(None)
        );
    }

    #[test]
    fn integers_are_yaml_1_2_integers_or_integral_floats() {
        let (values, problems) =
            decoded::<Vec<u32>>("[+42, 7, 0x2a, 0o52, 100.0, 1e2, 1E+2, '8', 99999999999]");
        assert_eq!(values, Some(vec![42, 7, 42, 42, 100, 100, 100, 0, 0]));
        assert_eq!(
            problems,
            [
                (
                    "expected a non-negative integer, found the string \"8\"".to_owned(),
                    Some("remove the quotes: numbers are written bare".to_owned())
                ),
                (
                    "99999999999 is out of range for a non-negative integer".to_owned(),
                    None
                ),
            ]
        );
        let (_, problems) = decoded::<Vec<u8>>("[1.5, -1, 1e3, .inf, .nan, 1e400]");
        assert_eq!(
            messages(&problems),
            [
                "expected a non-negative integer, found `1.5`",
                "-1 is out of range for a non-negative integer",
                "1e3 is out of range for a non-negative integer",
                "expected a non-negative integer, found `.inf`",
                "expected a non-negative integer, found `.nan`",
                "expected a non-negative integer, found `1e400`",
            ]
        );
        let (values, problems) = decoded::<Vec<i64>>("[-1e2, -0.0, +7]");
        assert_eq!((values, problems), (Some(vec![-100, 0, 7]), vec![]));
    }

    #[test]
    fn digit_separators_are_refused_with_the_number_to_write() {
        let (values, problems) = decoded::<Vec<u32>>("[1_000, 1__0, 1_0.5, _1, '1_000']");
        assert_eq!(values, Some(vec![0, 0, 0, 0, 0]));
        assert_eq!(
            problems,
            [
                (
                    "expected a non-negative integer, found `1_000`".to_owned(),
                    Some(
                        "write `1000`: YAML 1.2 numbers have no `_` digit separators, so \
                         `1_000` is a string"
                            .to_owned()
                    )
                ),
                (
                    "expected a non-negative integer, found `1__0`".to_owned(),
                    Some(
                        "write `10`: YAML 1.2 numbers have no `_` digit separators, so `1__0` \
                         is a string"
                            .to_owned()
                    )
                ),
                (
                    "expected a non-negative integer, found `1_0.5`".to_owned(),
                    None
                ),
                (
                    "expected a non-negative integer, found `_1`".to_owned(),
                    Some(
                        "write `1`: YAML 1.2 numbers have no `_` digit separators, so `_1` is a \
                         string"
                            .to_owned()
                    )
                ),
                (
                    "expected a non-negative integer, found the string \"1_000\"".to_owned(),
                    None
                ),
            ]
        );
    }

    #[test]
    fn numbers_and_booleans_are_not_strings_unless_quoted() {
        let (values, problems) = decoded::<Vec<String>>(
            "[pve01, 1, 2024, 1.5, 0x1f, true, '42', \"true\", 1_000, v1.2]",
        );
        assert_eq!(
            values,
            Some(
                ["pve01", "", "", "", "", "", "42", "true", "1_000", "v1.2"]
                    .map(str::to_owned)
                    .to_vec()
            )
        );
        let quote = |text: &str, what: &str| {
            Some(format!(
                "quote the value to make it a string: `\"{text}\"` (unquoted, YAML reads it as \
                 {what})"
            ))
        };
        assert_eq!(
            problems,
            [
                (
                    "expected a string, found the number `1`".to_owned(),
                    quote("1", "a number")
                ),
                (
                    "expected a string, found the number `2024`".to_owned(),
                    quote("2024", "a number")
                ),
                (
                    "expected a string, found the number `1.5`".to_owned(),
                    quote("1.5", "a number")
                ),
                (
                    "expected a string, found the number `0x1f`".to_owned(),
                    quote("0x1f", "a number")
                ),
                (
                    "expected a string, found the boolean `true`".to_owned(),
                    quote("true", "a boolean")
                ),
            ]
        );
    }

    #[test]
    fn mapping_keys_are_text_whatever_yaml_types_them() {
        // JSON object keys are strings: `2024: x` has the key "2024"; its value is still checked.
        let (values, problems) =
            decoded::<std::collections::BTreeMap<String, String>>("{2024: x, true: y, tier: 1}");
        let values = values.unwrap_or_default();
        assert_eq!(
            values.keys().map(String::as_str).collect::<Vec<_>>(),
            ["2024", "tier", "true"]
        );
        assert_eq!(
            messages(&problems),
            ["expected a string, found the number `1`"]
        );
    }

    #[test]
    fn an_enum_variant_spelt_like_a_number_must_be_quoted() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        enum Version {
            #[serde(rename = "1")]
            One,
            #[serde(rename = "v2.0")]
            Two,
        }
        let (values, problems) = decoded::<Vec<Version>>("['1', v2.0, 1]");
        assert_eq!(values, Some(vec![Version::One, Version::Two, Version::One]));
        assert_eq!(
            problems,
            [(
                "expected a string, found the number `1`".to_owned(),
                Some(
                    "quote the value to make it a string: `\"1\"` (unquoted, YAML reads it as a \
                     number)"
                        .to_owned()
                )
            )]
        );
    }

    #[test]
    fn sizes_take_any_yaml_1_2_spelling_of_a_whole_number_of_bytes() {
        use crate::quantity::Quantity;
        let (values, problems) = decoded::<Vec<Quantity>>(
            "[8GiB, '512MiB', 1073741824, +1073741824, 0x40000000, 1e9, 1048576.0, '1024']",
        );
        let texts: Vec<String> = values
            .unwrap_or_default()
            .iter()
            .map(|q| q.as_str().to_owned())
            .collect();
        assert_eq!(
            texts,
            [
                "8GiB",
                "512MiB",
                "1073741824",
                "1073741824",
                "1073741824",
                "1000000000",
                "1048576",
                "1024"
            ]
        );
        assert_eq!(problems, []);
        let (_, problems) = decoded::<Vec<Quantity>>(
            "[-1, 1.5, .inf, .nan, true, 1e30, 99999999999999999999999999999999999999999, \
             1_000, '+1', ~]",
        );
        assert_eq!(
            messages(&problems),
            [
                "`-1` is not a size: expected digits followed by an optional unit, such as `8GiB`",
                "`1.5` is not a size: expected digits followed by an optional unit, such as `8GiB`",
                "`.inf` is not a size: expected digits followed by an optional unit, such as \
                 `8GiB`",
                "`.nan` is not a size: expected digits followed by an optional unit, such as \
                 `8GiB`",
                "expected a size such as `8GiB`, found the boolean `true`",
                "`1e30` is too large",
                "`99999999999999999999999999999999999999999` is too large",
                "`1_000` has an unknown unit `_000`",
                "`+1` is not a size: expected digits followed by an optional unit, such as `8GiB`",
                "expected a size such as `8GiB`, found null",
            ]
        );
    }
}
