//! Canonical YAML: the one byte sequence the store writes for a document, so that the same
//! content always has the same blob id and receipts stay current across runs and versions.
//!
//! The value model is JSON's ([`serde_json::Value`]). The rules, which must never change
//! without a migration (every receipt would turn stale):
//!
//! - block style, two spaces of indentation per level, one document, ending in one newline;
//! - mapping keys sorted by their UTF-8 bytes, whatever order the value holds them in;
//! - a sequence under a key is indented by two spaces (`key:` then `  - item`); an item that is
//!   a non-empty mapping starts on the dash line (`- a: 1`), an item that is a non-empty
//!   sequence starts on the next line;
//! - empty mappings and sequences are `{}` and `[]`; `null`, `true`, `false` are written so;
//!   numbers as `serde_json` prints them;
//! - a string (key or value) is plain only when it starts with an ASCII letter, `_` or `/`,
//!   consists of ASCII letters, digits and `_ . / @ + = - , ( ) ~ ? % &` and single inner spaces
//!   or `:` not followed by a space nor at the end, and is not one of YAML's special words
//!   (`true`, `no`, `null`, `on`, ... in any case); otherwise it is double-quoted with JSON's
//!   escapes, and control characters, DEL, C1 controls, U+2028, U+2029 and U+FEFF written as
//!   `\uXXXX`. So no string can be read back as a number, a boolean or null.

use serde_json::Value;
use std::fmt::Write as _;

/// The canonical YAML text of `value`.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        scalar => {
            write_scalar(&mut out, scalar);
            out.push('\n');
        }
    }
    out
}

/// [`to_yaml`] of anything serialisable: `None` if it does not serialise to JSON's value model
/// (a map with non-string keys, a float that is not finite, ...).
pub fn to_yaml_of<T: serde::Serialize>(value: &T) -> Option<String> {
    serde_json::to_value(value).ok().map(|v| to_yaml(&v))
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// Writes the entries of a non-empty mapping, each on its own line at `level` (the first one
/// continuing the current line when `inline`, after a sequence dash).
fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, level: usize, inline: bool) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 || !inline {
            indent(out, level);
        }
        write_string(out, key);
        out.push(':');
        write_value_after_key(out, value, level);
    }
}

/// Writes what follows `key:`.
fn write_value_after_key(out: &mut String, value: &Value, level: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, level + 1, false);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, level + 1);
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar);
            out.push('\n');
        }
    }
}

/// Writes the items of a non-empty sequence, each starting with `- ` at `level`.
fn write_seq(out: &mut String, items: &[Value], level: usize) {
    for item in items {
        indent(out, level);
        match item {
            Value::Object(map) if !map.is_empty() => {
                out.push_str("- ");
                write_map(out, map, level + 1, true);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push_str("-\n");
                write_seq(out, inner, level + 1);
            }
            scalar => {
                out.push_str("- ");
                write_scalar(out, scalar);
                out.push('\n');
            }
        }
    }
}

fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// Words some YAML version reads as something other than a string.
const SPECIAL: &[&str] = &["true", "false", "yes", "no", "on", "off", "y", "n", "null"];

fn is_plain(s: &str) -> bool {
    let bytes = s.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == b'_' || first == b'/') {
        return false;
    }
    if SPECIAL.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return false;
    }
    for (i, &b) in bytes.iter().enumerate() {
        let ok = match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => true,
            b'_' | b'.' | b'/' | b'@' | b'+' | b'=' | b'-' | b',' | b'(' | b')' | b'~' | b'?'
            | b'%' | b'&' => true,
            // A single inner space: no leading, trailing or double spaces.
            b' ' => i + 1 < bytes.len() && bytes[i + 1] != b' ',
            // `: ` and a trailing `:` end a key.
            b':' => i + 1 < bytes.len() && bytes[i + 1] != b' ',
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn write_string(out: &mut String, s: &str) {
    if is_plain(s) {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') =>
            {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses a plane document (YAML, of which canonical YAML is a subset) into the value model.
pub fn parse_yaml(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn emits_sorted_block_yaml() {
        let v = json!({
            "spec": {"vmid": 100, "node": "pve1", "tags": ["a", "b"], "empty": {}, "none": []},
            "kind": "VM",
            "apiVersion": "proxops/v1alpha1",
            "metadata": {"name": "jumpbox", "labels": {"role": "jump host"}},
            "list": [{"b": 1, "a": [1, [2, 3]]}, [], {}, null, true, 1.5]
        });
        let expected = "\
apiVersion: proxops/v1alpha1
kind: VM
list:
  - a:
      - 1
      -
        - 2
        - 3
    b: 1
  - []
  - {}
  - null
  - true
  - 1.5
metadata:
  labels:
    role: jump host
  name: jumpbox
spec:
  empty: {}
  node: pve1
  none: []
  tags:
    - a
    - b
  vmid: 100
";
        assert_eq!(to_yaml(&v), expected);
        assert_eq!(parse_yaml(expected).ok(), Some(v));
    }

    #[test]
    fn quotes_every_string_yaml_could_misread() {
        for s in [
            "",
            "true",
            "False",
            "yes",
            "NO",
            "on",
            "off",
            "y",
            "N",
            "null",
            "~",
            "1",
            "0x10",
            "1e3",
            "-1",
            ".inf",
            "12:30",
            "2024-01-01",
            " lead",
            "trail ",
            "a: b",
            "a:",
            "#c",
            "a #c",
            "*ref",
            "&anchor",
            "!tag",
            "- x",
            "[x]",
            "{x}",
            "'q'",
            "\"q\"",
            "a\nb",
            "tab\t",
            "é",
            "\u{2028}",
            "\u{85}",
            "\u{7f}",
            "\u{0}",
            "%x",
            "@x",
            "a  b",
        ] {
            let text = to_yaml(&json!({ "k": s, s: "v" }));
            let back = parse_yaml(&text).unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"));
            assert_eq!(back, json!({ "k": s, s: "v" }), "{s:?}\n{text}");
        }
        for s in [
            "pve1",
            "https://x.example/a?b=c&d",
            "local:iso/x.iso",
            "a b",
            "_x",
            "/p",
        ] {
            assert_eq!(to_yaml(&json!(s)), format!("{s}\n"));
        }
    }
}
