//! [`Pointer`]: an RFC 6901 JSON pointer, how expressions and kinds name a spec field.

use crate::yaml::PathSeg;
use serde_json::Value;
use std::fmt;

/// An RFC 6901 JSON pointer: `""` (the whole value) or `/`-separated tokens with `~0` (`~`) and
/// `~1` (`/`) escapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pointer(pub(crate) String);

impl Pointer {
    /// Parses a pointer; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer(String::new()));
        }
        if !text.starts_with('/') {
            return Err(format!(
                "`{text}` is not a JSON pointer: it must be empty or start with `/`"
            ));
        }
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                return Err(format!(
                    "`{text}` has a `~` that is not `~0` or `~1` (RFC 6901 escapes)"
                ));
            }
        }
        Ok(Pointer(text.to_owned()))
    }

    /// The pointer of a spec path (`/cloud-init-data/nameservers/0`).
    pub fn of_path(path: &[PathSeg]) -> Pointer {
        let mut text = String::new();
        for seg in path {
            text.push('/');
            match seg {
                PathSeg::Key(k) => text.push_str(&k.replace('~', "~0").replace('/', "~1")),
                PathSeg::Index(i) => text.push_str(&i.to_string()),
            }
        }
        Pointer(text)
    }

    /// The pointer's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value it points at in `value` (`None` when a step is missing; array indices are
    /// decimal without leading zeros).
    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut at = value;
        for token in self.tokens() {
            at = match at {
                Value::Object(m) => m.get(&token)?,
                Value::Array(items) => items.get(array_index(&token)?)?,
                _ => return None,
            };
        }
        Some(at)
    }

    /// Its reference tokens, unescaped, in order (none for the whole value).
    pub fn tokens(&self) -> impl Iterator<Item = String> + '_ {
        self.0
            .split('/')
            .skip(1)
            .map(|raw| raw.replace("~1", "/").replace("~0", "~"))
    }
}

/// An array index as RFC 6901 writes it: `0`, or decimal digits without a leading zero.
pub(crate) fn array_index(token: &str) -> Option<usize> {
    let leading_zero = token.len() > 1 && token.starts_with('0');
    if token.is_empty() || leading_zero || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
