//! The YAML of a SOPS file as an ordered tree of typed scalars.
//!
//! sops's MAC covers values in document order and hashes unencrypted values by their type (an
//! integer as its decimal digits, a boolean as `True`/`False`), so scalars must be typed as sops's
//! YAML library (go-yaml v3) types them, not as YAML 1.1 would: `yes` stays a string, `0x1F` is
//! an integer, a timestamp stays a string. The event parser that serde-saphyr ships gives the
//! scalar style and tag needed for that; comments are not needed (sops leaves them out of the MAC).

use crate::Error;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
use std::collections::HashMap;

/// A parsed YAML node. Deliberately no `Debug`: unencrypted values are plain text.
#[derive(Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
}

/// Limits against alias bombs and stack exhaustion; secrets files are tiny.
const MAX_NODES: usize = 100_000;
const MAX_DEPTH: usize = 128;

/// Parses a single-document YAML text whose root is a mapping (or empty).
pub(crate) fn parse(text: &str) -> Result<Node, Error> {
    let mut events = Parser::new_from_str(text);
    let mut builder = Builder {
        anchors: HashMap::new(),
        nodes: 0,
        depth: 0,
    };
    let mut docs = Vec::new();
    while let Some(next) = events.next_event() {
        let (event, _) = next.map_err(|e| syntax(&e))?;
        match event {
            Event::DocumentStart(..) => {
                builder.anchors.clear();
                docs.push(builder.node(&mut events)?.unwrap_or(Node::Null));
            }
            Event::StreamEnd => break,
            _ => {}
        }
    }
    if docs.len() > 1 {
        return Err(Error::Unsupported {
            feature: format!(
                "{} YAML documents in one file (one is supported)",
                docs.len()
            ),
        });
    }
    match docs.pop() {
        None | Some(Node::Null) => Ok(Node::Map(Vec::new())),
        Some(root @ Node::Map(_)) => Ok(root),
        Some(_) => Err(Error::Syntax {
            reason: "the document is not a mapping".to_owned(),
        }),
    }
}

fn syntax(e: &serde_saphyr::granit_parser::ScanError) -> Error {
    let m = e.marker();
    Error::Syntax {
        reason: format!("line {} column {}: {}", m.line(), m.col() + 1, e.info()),
    }
}

struct Builder {
    anchors: HashMap<usize, Node>,
    nodes: usize,
    depth: usize,
}

type Events<'s> = Parser<'s, serde_saphyr::granit_parser::StrInput<'s>>;

impl Builder {
    fn count(&mut self, n: usize) -> Result<(), Error> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(Error::Syntax {
                reason: format!("document expands to more than {MAX_NODES} nodes"),
            });
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::Syntax {
                reason: format!("nesting deeper than {MAX_DEPTH} levels"),
            });
        }
        Ok(())
    }

    /// The next node, `None` at the end of a collection or document.
    fn node(&mut self, events: &mut Events<'_>) -> Result<Option<Node>, Error> {
        loop {
            let Some(next) = events.next_event() else {
                return Ok(None);
            };
            let (event, _) = next.map_err(|e| syntax(&e))?;
            let (node, anchor) = match event {
                Event::Scalar(text, style, anchor, tag) => {
                    self.count(1)?;
                    let tag = tag.as_ref().map(|t| t.suffix().to_owned());
                    (scalar(&text, style, tag.as_deref()), anchor)
                }
                Event::SequenceStart(_, anchor, _) => {
                    self.count(1)?;
                    self.enter()?;
                    let mut items = Vec::new();
                    while let Some(item) = self.node(events)? {
                        items.push(item);
                    }
                    self.depth -= 1;
                    (Node::Seq(items), anchor)
                }
                Event::MappingStart(_, anchor, _) => {
                    self.count(1)?;
                    self.enter()?;
                    let mut entries: Vec<(String, Node)> = Vec::new();
                    while let Some(key) = self.node(events)? {
                        let value = self.node(events)?.unwrap_or(Node::Null);
                        let key = key_text(key)?;
                        if entries.iter().any(|(k, _)| *k == key) {
                            return Err(Error::Syntax {
                                reason: format!("duplicate mapping key `{key}`"),
                            });
                        }
                        entries.push((key, value));
                    }
                    self.depth -= 1;
                    (Node::Map(entries), anchor)
                }
                Event::Alias(id) => {
                    let target = self
                        .anchors
                        .get(&id)
                        .cloned()
                        .ok_or_else(|| Error::Syntax {
                            reason: "an alias refers to an unknown anchor".to_owned(),
                        })?;
                    self.count(size(&target))?;
                    return Ok(Some(target));
                }
                Event::SequenceEnd | Event::MappingEnd | Event::DocumentEnd | Event::StreamEnd => {
                    return Ok(None);
                }
                _ => continue,
            };
            if anchor != 0 {
                self.anchors.insert(anchor, node.clone());
            }
            return Ok(Some(node));
        }
    }
}

fn size(node: &Node) -> usize {
    match node {
        Node::Map(entries) => 1 + entries.iter().map(|(_, v)| size(v)).sum::<usize>(),
        Node::Seq(items) => 1 + items.iter().map(size).sum::<usize>(),
        _ => 1,
    }
}

/// Mapping keys are strings in every file sops writes (it refuses others); a plain key that
/// looks like a number keeps its text.
fn key_text(key: Node) -> Result<String, Error> {
    match key {
        Node::Str(s) => Ok(s),
        Node::Null => Ok(String::new()),
        Node::Bool(b) => Ok(b.to_string()),
        Node::Int(i) => Ok(i.to_string()),
        Node::Float(f) => Ok(crate::cipher::format_float(f)),
        Node::Map(_) | Node::Seq(_) => Err(Error::Syntax {
            reason: "a mapping key is a collection".to_owned(),
        }),
    }
}

/// Types a scalar as go-yaml v3 does when decoding into `interface{}`.
pub(crate) fn scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Node {
    if style != ScalarStyle::Plain || tag == Some("str") || tag == Some("binary") {
        return Node::Str(text.to_owned());
    }
    resolve_plain(text)
}

fn resolve_plain(text: &str) -> Node {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null,
        "true" | "True" | "TRUE" => return Node::Bool(true),
        "false" | "False" | "FALSE" => return Node::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Node::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Node::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Node::Float(f64::NAN),
        _ => {}
    }
    let first = text.as_bytes()[0];
    if !(first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.') {
        return Node::Str(text.to_owned());
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(i) = parse_go_int(&plain) {
        return Node::Int(i);
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        return Node::Float(f);
    }
    Node::Str(text.to_owned())
}

/// Go's `strconv.ParseInt(s, 0, 64)` (sign, then `0x`, `0o`, `0b`, or a leading `0` for octal).
fn parse_go_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(b) = lower.strip_prefix("0x") {
        (16, b)
    } else if let Some(b) = lower.strip_prefix("0o") {
        (8, b)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(body, radix).ok()?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// go-yaml's float syntax: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> Node {
        scalar(s, ScalarStyle::Plain, None)
    }

    #[test]
    fn scalars_typed_as_go_yaml_v3() {
        assert!(plain("yes") == Node::Str("yes".into()));
        assert!(plain("on") == Node::Str("on".into()));
        assert!(plain("True") == Node::Bool(true));
        assert!(plain("~") == Node::Null);
        assert!(plain("8006") == Node::Int(8006));
        assert!(plain("-12") == Node::Int(-12));
        assert!(plain("1_000") == Node::Int(1000));
        assert!(plain("0x1F") == Node::Int(31));
        assert!(plain("0o17") == Node::Int(15));
        assert!(plain("017") == Node::Int(15));
        assert!(plain("08") == Node::Float(8.0));
        assert!(plain("1.5") == Node::Float(1.5));
        assert!(plain("1e3") == Node::Float(1000.0));
        assert!(plain(".5") == Node::Float(0.5));
        assert!(plain("2024-01-02") == Node::Str("2024-01-02".into()));
        assert!(plain("1.2.3") == Node::Str("1.2.3".into()));
        assert!(plain("-") == Node::Str("-".into()));
        assert!(scalar("12", ScalarStyle::DoubleQuoted, None) == Node::Str("12".into()));
        assert!(scalar("12", ScalarStyle::Plain, Some("str")) == Node::Str("12".into()));
    }

    #[test]
    fn order_anchors_and_errors() {
        let root = parse("b: 1\na: &x [1, {c: d}]\nz: *x\n").unwrap();
        let Node::Map(entries) = root else { panic!() };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "z"]);
        assert!(entries[1].1 == entries[2].1);
        assert!(matches!(parse("a: 1\na: 2\n"), Err(Error::Syntax { .. })));
        assert!(matches!(parse("- 1\n"), Err(Error::Syntax { .. })));
        assert!(matches!(
            parse("a: 1\n---\nb: 2\n"),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(parse("a: [\n"), Err(Error::Syntax { .. })));
        assert!(parse("").unwrap() == Node::Map(vec![]));
    }
}
