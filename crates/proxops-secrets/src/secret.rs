//! [`Secret`]: a string that never shows itself by accident.

use serde::{Serialize, Serializer};
use std::fmt;
use zeroize::Zeroize;

/// What every redacted rendering of a secret prints.
pub const REDACTED: &str = "[redacted]";

/// A secret string: a token, a password, a private key line.
///
/// `Debug`, `Display` and serde serialisation all print [`REDACTED`]; the value is reached only
/// through [`Secret::expose`], so every use of it is greppable. The buffer is overwritten with
/// zeros when the secret is dropped (copies made through `expose().to_owned()` are not).
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself. Callers must not log, store or echo it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty or only white space.
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The value with surrounding white space removed, still secret.
    pub fn trimmed(&self) -> Secret {
        Secret(self.0.trim().to_owned())
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        // No early exit on the first differing byte: comparisons leak no prefix length by timing.
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_everywhere_but_expose() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
        assert_eq!(s.expose(), "hunter2");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"[redacted]\"");
        assert!(!format!("{:#?}", vec![s.clone()]).contains("hunter2"));
    }

    #[test]
    fn equality_and_blankness() {
        assert_eq!(Secret::new("a"), Secret::from("a"));
        assert_ne!(Secret::new("a"), Secret::new("b"));
        assert_ne!(Secret::new("a"), Secret::new("ab"));
        assert!(Secret::new(" \n").is_blank());
        assert_eq!(Secret::new(" x ").trimmed().expose(), "x");
    }
}
