//! Lenient decoding of PVE's JSON: booleans arrive as `0`/`1` (or `true`, `"1"`, `"on"`), numbers
//! sometimes as strings (`"memory": "2048"`, `nextid: "100"`), and config values as either. Used
//! with `#[serde(deserialize_with = ...)]` on the response types.

use serde::{Deserialize, Deserializer};

/// Any scalar PVE may send where a bool, number or string is expected.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(String),
}

/// Parses PVE's boolean spellings in an answer, leniently: surrounding blanks are ignored and an
/// empty value is false (what PVE's own parser, `proxops_pve_schema::parse_bool`, reads strictly).
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "" => Some(false),
        text => proxops_pve_schema::parse_bool(text),
    }
}

fn scalar_bool<E: serde::de::Error>(v: Scalar) -> Result<bool, E> {
    match v {
        Scalar::Bool(b) => Ok(b),
        Scalar::U64(n) => Ok(n != 0),
        Scalar::I64(n) => Ok(n != 0),
        Scalar::F64(n) => Ok(n != 0.0),
        Scalar::Str(s) => parse_bool(&s).ok_or_else(|| E::custom(format!("not a boolean: {s}"))),
    }
}

fn scalar_u64<E: serde::de::Error>(v: Scalar) -> Result<u64, E> {
    match v {
        Scalar::Bool(b) => Ok(u64::from(b)),
        Scalar::U64(n) => Ok(n),
        Scalar::I64(n) => u64::try_from(n).map_err(|_| E::custom(format!("negative: {n}"))),
        // Sizes and counters may come as floats (`1.0e9`); truncating is what PVE's Perl does.
        Scalar::F64(n) if n >= 0.0 && n.is_finite() => Ok(n as u64),
        Scalar::F64(n) => Err(E::custom(format!("not a count: {n}"))),
        Scalar::Str(s) => {
            let t = s.trim();
            t.parse::<u64>()
                .or_else(|_| t.parse::<f64>().map(|f| f.max(0.0) as u64))
                .map_err(|_| E::custom(format!("not a number: {s}")))
        }
    }
}

fn scalar_f64<E: serde::de::Error>(v: Scalar) -> Result<f64, E> {
    match v {
        Scalar::Bool(b) => Ok(f64::from(u8::from(b))),
        Scalar::U64(n) => Ok(n as f64),
        Scalar::I64(n) => Ok(n as f64),
        Scalar::F64(n) => Ok(n),
        Scalar::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| E::custom(format!("not a number: {s}"))),
    }
}

/// Renders a scalar as PVE writes it in a config file (booleans as 0/1).
pub fn scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

/// A boolean; a missing or null field is `false` (with `#[serde(default)]`).
pub fn bool01<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(false),
        Some(v) => scalar_bool(v),
    }
}

/// An optional unsigned number, from a number or a string.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<Scalar>::deserialize(d)?
        .map(scalar_u64)
        .transpose()
}

/// An unsigned number that must be present, from a number or a string.
pub fn u64_req<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    scalar_u64(Scalar::deserialize(d)?)
}

/// A VMID (a number or a string).
pub fn vmid<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = scalar_u64(Scalar::deserialize(d)?)?;
    u32::try_from(n).map_err(|_| serde::de::Error::custom(format!("VMID out of range: {n}")))
}

/// An optional VMID.
pub fn opt_vmid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<Scalar>::deserialize(d)? {
        None => Ok(None),
        Some(v) => {
            let n = scalar_u64(v)?;
            u32::try_from(n)
                .map(Some)
                .map_err(|_| serde::de::Error::custom(format!("VMID out of range: {n}")))
        }
    }
}

/// An optional floating-point number, from a number or a string.
pub fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<Scalar>::deserialize(d)?
        .map(scalar_f64)
        .transpose()
}

/// An optional string that PVE may send as a number (names like `100`, tags).
pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Scalar>::deserialize(d)?.map(|v| match v {
        Scalar::Bool(b) => if b { "1" } else { "0" }.to_string(),
        Scalar::U64(n) => n.to_string(),
        Scalar::I64(n) => n.to_string(),
        Scalar::F64(n) => n.to_string(),
        Scalar::Str(s) => s,
    }))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Row {
        #[serde(deserialize_with = "super::bool01")]
        template: bool,
        #[serde(deserialize_with = "super::opt_u64")]
        memory: Option<u64>,
        #[serde(deserialize_with = "super::opt_string")]
        name: Option<String>,
    }

    fn row(json: &str) -> Row {
        serde_json::from_str(json).unwrap_or_default()
    }

    #[test]
    fn lenient_values() {
        assert!(row(r#"{"template":1}"#).template);
        assert!(row(r#"{"template":"1"}"#).template);
        assert!(row(r#"{"template":true}"#).template);
        assert!(!row(r#"{"template":0}"#).template);
        assert!(!row(r#"{}"#).template);
        assert_eq!(row(r#"{"memory":"2048"}"#).memory, Some(2048));
        assert_eq!(row(r#"{"memory":2048}"#).memory, Some(2048));
        assert_eq!(row(r#"{"name":100}"#).name.as_deref(), Some("100"));
    }
}
