//! Byte quantities written as `<digits><unit>` (`8GiB`, `512MiB`, `4M`, `1073741824`).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A size in bytes, written in manifests as `<digits><unit>`.
///
/// Units are case-insensitive: none or `B` (bytes); `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB`, `P`/`PB`
/// (decimal, powers of 1000); `Ki`/`KiB` ... `Pi`/`PiB` (binary, powers of 1024). No decimals and
/// no spaces. The original text is kept so that it serialises back the way it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity {
    bytes: u64,
    text: String,
}

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// The text is not `<digits><unit>`.
    #[error("`{0}` is not a size: expected digits followed by an optional unit, such as `8GiB`")]
    Syntax(String),
    /// The unit is not one of the known ones.
    #[error("`{0}` has an unknown unit `{1}`")]
    Unit(String, String),
    /// The value does not fit in 64 bits.
    #[error("`{0}` is too large")]
    Overflow(String),
}

/// The hint shown with a quantity error.
pub const QUANTITY_HELP: &str = "sizes are whole numbers with an optional unit: B, K, M, G, T, P (powers of 1000) or Ki, Mi, Gi, Ti, Pi (powers of 1024), e.g. `8GiB`";

/// The schema's pattern of a size's text, which [`Quantity::parse`] accepts (bar overflow).
const QUANTITY_PATTERN: &str = "^[0-9]+([KkMmGgTtPp][Ii]?[Bb]?|[Bb])?$";

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl Quantity {
    /// Reads a quantity.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let digits_end = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        if digits.is_empty() {
            return Err(QuantityError::Syntax(text.to_owned()));
        }
        let factor: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1_000,
            "m" | "mb" => 1_000_000,
            "g" | "gb" => 1_000_000_000,
            "t" | "tb" => 1_000_000_000_000,
            "p" | "pb" => 1_000_000_000_000_000,
            "ki" | "kib" => 1 << 10,
            "mi" | "mib" => 1 << 20,
            "gi" | "gib" => 1 << 30,
            "ti" | "tib" => 1 << 40,
            "pi" | "pib" => 1 << 50,
            _ if unit.contains(|c: char| c.is_whitespace() || c == '.') => {
                return Err(QuantityError::Syntax(text.to_owned()));
            }
            _ => return Err(QuantityError::Unit(text.to_owned(), unit.to_owned())),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| QuantityError::Overflow(text.to_owned()))?;
        let bytes = n
            .checked_mul(factor)
            .ok_or_else(|| QuantityError::Overflow(text.to_owned()))?;
        Ok(Quantity {
            bytes,
            text: text.to_owned(),
        })
    }

    /// The size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The size in whole MiB, if it is a whole number of MiB (PVE's unit for memory and swap).
    pub fn whole_mib(&self) -> Option<u64> {
        self.bytes.is_multiple_of(MIB).then_some(self.bytes / MIB)
    }

    /// The size in GiB as PVE's allocation syntax wants it: an integer when whole, otherwise the
    /// shortest exact decimal (`512MiB` -> `0.5`, `4MiB` -> `0.00390625`).
    pub fn gib_string(&self) -> String {
        if self.bytes.is_multiple_of(GIB) {
            return (self.bytes / GIB).to_string();
        }
        // bytes / 2^30 has a finite decimal expansion of at most 30 digits after the point.
        let whole = self.bytes / GIB;
        let mut rem = self.bytes % GIB;
        let mut frac = String::new();
        while rem != 0 && frac.len() < 30 {
            rem *= 10;
            frac.push(char::from(b'0' + (rem / GIB) as u8));
            rem %= GIB;
        }
        format!("{whole}.{frac}")
    }

    /// The text as written in the manifest.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as `8GiB`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity {
                    bytes: v,
                    text: v.to_string(),
                })
            }
            fn visit_newtype_struct<D: Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<Quantity, D::Error> {
                d.deserialize_any(self)
            }
        }
        // The node decoder recognises this name and checks the text itself, so that a bad size
        // is reported and decoding goes on; other deserializers simply unwrap the newtype.
        d.deserialize_newtype_struct(QUANTITY_NEWTYPE, V)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A size: digits with an optional unit (B, K, M, G, T, P = powers of 1000; Ki, Mi, Gi, Ti, Pi, optionally followed by B = powers of 1024), e.g. `8GiB`.",
            "anyOf": [
                {"type": "string", "pattern": QUANTITY_PATTERN},
                {"type": "integer", "minimum": 0}
            ]
        })
    }
}

/// The schema of a memory size (`memory` of VMs and containers): a [`Quantity`] that PVE takes
/// in whole MiB and that must not be zero. A bare integer is a number of bytes, so the schema's
/// integer branch says `multipleOf: 1048576` and `minimum: 1048576`: `memory: 1e9` (a float a
/// YAML 1.2 editor reads as the integer 1000000000) is refused by both the editor and the
/// decoder. A string is only pattern-checked, the loader telling whether it is whole MiB.
/// Used through `#[schemars(with = "MemorySize")]`; never decoded.
pub(crate) struct MemorySize;

/// Like [`MemorySize`], for a swap size, which may be zero.
pub(crate) struct SwapSize;

fn whole_mib_schema(minimum: u64) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A size in whole MiB, e.g. `8GiB` or `512MiB`: digits with an optional unit (B, K, M, G, T, P = powers of 1000; Ki, Mi, Gi, Ti, Pi, optionally followed by B = powers of 1024), or a number of bytes that is a multiple of 1048576 (1 MiB).",
        "anyOf": [
            {"type": "string", "pattern": QUANTITY_PATTERN},
            {"type": "integer", "minimum": minimum, "multipleOf": MIB}
        ]
    })
}

impl JsonSchema for MemorySize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MemorySize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        whole_mib_schema(MIB)
    }
}

impl JsonSchema for SwapSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SwapSize".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        whole_mib_schema(0)
    }
}

/// Newtype names whose text has a format the decoder checks itself (see [`crate::quantity`]).
pub(crate) const QUANTITY_NEWTYPE: &str = "proxops::Quantity";

/// Reads a duration such as `30s`, `5m`, `1h30m` or `250ms`.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let mut total = std::time::Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => std::time::Duration::from_millis(n),
            "s" => std::time::Duration::from_secs(n),
            "m" => std::time::Duration::from_secs(n.checked_mul(60)?),
            "h" => std::time::Duration::from_secs(n.checked_mul(3600)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        let q = |s: &str| Quantity::parse(s).map(|q| q.bytes());
        assert_eq!(q("8GiB"), Ok(8 << 30));
        assert_eq!(q("8gib"), Ok(8 << 30));
        assert_eq!(q("4M"), Ok(4_000_000));
        assert_eq!(q("512Mi"), Ok(512 << 20));
        assert_eq!(q("42"), Ok(42));
        assert_eq!(q("42B"), Ok(42));
        assert!(matches!(q("1.5GiB"), Err(QuantityError::Syntax(_))));
        assert!(matches!(q("GiB"), Err(QuantityError::Syntax(_))));
        assert!(matches!(q("8 GiB"), Err(QuantityError::Syntax(_))));
        assert!(matches!(q("8XB"), Err(QuantityError::Unit(..))));
        assert!(matches!(
            q("99999999999PiB"),
            Err(QuantityError::Overflow(_))
        ));
    }

    #[test]
    fn pve_forms() {
        let p = |s: &str| {
            Quantity::parse(s).unwrap_or_else(|_| Quantity {
                bytes: 0,
                text: String::new(),
            })
        };
        assert_eq!(p("8GiB").whole_mib(), Some(8192));
        assert_eq!(p("8G").whole_mib(), None);
        assert_eq!(p("50GiB").gib_string(), "50");
        assert_eq!(p("512MiB").gib_string(), "0.5");
        assert_eq!(p("4MiB").gib_string(), "0.00390625");
        assert_eq!(p("1B").gib_string(), "0.000000000931322574615478515625");
    }
}
