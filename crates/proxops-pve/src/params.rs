//! [`Params`]: the form fields of a request, in a fixed order, encoded as PVE's own clients do
//! (`application/x-www-form-urlencoded` bodies for writes, a query string for reads and deletes;
//! booleans as `0`/`1`).

use std::collections::BTreeMap;
use std::fmt::Display;

/// Ordered request parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// No parameters.
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds a parameter.
    pub fn set(mut self, key: &str, value: impl Display) -> Params {
        self.push(key, value);
        self
    }

    /// Adds a parameter in place.
    pub fn push(&mut self, key: &str, value: impl Display) {
        self.0.push((key.to_string(), value.to_string()));
    }

    /// Adds a parameter when it has a value.
    pub fn opt(mut self, key: &str, value: Option<impl Display>) -> Params {
        if let Some(v) = value {
            self.push(key, v);
        }
        self
    }

    /// Adds a boolean as `0`/`1` when it has a value.
    pub fn flag(mut self, key: &str, value: Option<bool>) -> Params {
        if let Some(v) = value {
            self.push(key, u8::from(v));
        }
        self
    }

    /// Adds every key/value of a map (sorted by key, so the encoding is deterministic).
    pub fn extend_map(mut self, map: &BTreeMap<String, String>) -> Params {
        for (k, v) in map {
            self.push(k, v);
        }
        self
    }

    /// The pairs.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Percent-encodes one path segment (a UPID holds `:`, `@` and `!`).
pub(crate) fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
