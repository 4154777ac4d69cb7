//! [`ObjectId`]: the store's own name for a git object (commit, tree or blob), so that callers
//! never meet the git library's types and the store can change or upgrade it freely.

use std::fmt;
use std::str::FromStr;

/// A SHA-1 git object id (a commit, tree or blob). Displayed, parsed and serialised as 40
/// lowercase hex digits; ordered by its bytes (as git orders ids).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId([u8; 20]);

/// Why a text is not an object id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a 40-hex-digit object id")]
pub struct ParseIdError {
    text: String,
}

impl ObjectId {
    /// All zeros: git's "no object" (what an unchanged publication of a missing ref reports).
    pub(crate) const NULL: ObjectId = ObjectId([0; 20]);

    /// The id with these 20 bytes.
    pub const fn from_bytes(bytes: [u8; 20]) -> ObjectId {
        ObjectId(bytes)
    }

    /// Its 20 bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// Its 40 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// The first `len` hex digits (all 40 if `len` is larger), as `git log --abbrev` shows them.
    pub fn to_short_hex(&self, len: usize) -> String {
        let mut text = self.to_string();
        text.truncate(len);
        text
    }

    pub(crate) fn from_gix(id: gix::ObjectId) -> ObjectId {
        let mut bytes = [0u8; 20];
        // The store opens SHA-1 repositories only (gix is built with `sha1` alone), so every id
        // is 20 bytes; a longer one would be truncated, never read out of bounds.
        let src = id.as_bytes();
        let n = src.len().min(20);
        bytes[..n].copy_from_slice(&src[..n]);
        ObjectId(bytes)
    }

    pub(crate) fn to_gix(self) -> gix::ObjectId {
        gix::ObjectId::Sha1(self.0)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

impl FromStr for ObjectId {
    type Err = ParseIdError;

    /// Exactly 40 hex digits, lowercase or uppercase.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || ParseIdError {
            text: text.to_owned(),
        };
        let digits = text.as_bytes();
        if digits.len() != 40 {
            return Err(err());
        }
        let mut bytes = [0u8; 20];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(err)?;
            let lo = hex_value(pair[1]).ok_or_else(err)?;
            bytes[i] = hi << 4 | lo;
        }
        Ok(ObjectId(bytes))
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_matches_gix() {
        let text = "0123456789abcdef0123456789abcdef01234567";
        let id: ObjectId = text.parse().unwrap();
        assert_eq!(id.to_string(), text);
        assert_eq!(id.to_short_hex(7), "0123456");
        let gix_id = gix::ObjectId::from_hex(text.as_bytes()).unwrap();
        assert_eq!(id.to_gix(), gix_id);
        assert_eq!(ObjectId::from_gix(gix_id), id);
        assert_eq!(
            "0123456789ABCDEF0123456789ABCDEF01234567".parse::<ObjectId>(),
            Ok(id)
        );
    }

    #[test]
    fn rejects_what_is_not_forty_hex_digits() {
        for text in ["", "abc", &"g".repeat(40), &"a".repeat(41), &"é".repeat(20)] {
            assert!(text.parse::<ObjectId>().is_err(), "{text}");
        }
    }

    #[test]
    fn orders_as_gix_orders() {
        let a = ObjectId::from_bytes([1; 20]);
        let b = ObjectId::from_bytes([2; 20]);
        assert!(a < b);
        assert_eq!(a.to_gix() < b.to_gix(), a < b);
    }

    #[test]
    fn serialises_as_hex() {
        let id = ObjectId::from_bytes([0xab; 20]);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", "ab".repeat(20)));
        assert_eq!(serde_json::from_str::<ObjectId>(&json).unwrap(), id);
    }
}
