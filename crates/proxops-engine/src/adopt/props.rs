//! Helpers the QEMU translations share: a live property string parsed by PVE's schema, and the
//! nested manifest objects and lists they write into.

use proxops_model::kind::GuestType;
use proxops_model::pve_config::{key, parse_property_string};
use serde_json::{Map, Value};

/// `value` of config key `name` parsed as PVE's `parse_property_string` does (default key and
/// aliases resolved), as (sub-key, value) pairs; `Err` says why it does not parse.
pub(crate) fn parse(name: &str, value: &str) -> Result<Vec<(String, String)>, String> {
    let subs = key(GuestType::Qemu, name, None)
        .and_then(|k| k.format.sub_keys())
        .ok_or_else(|| format!("`{name}` is not a property string of PVE's schema"))?;
    parse_property_string(subs, value)
        .map_err(|e| format!("its value `{value}` does not parse as PVE's `{name}`: {e}"))
}

/// The object at `path` under `spec`, created empty where absent (`None` when a value on the
/// way is not an object, which adopt never writes).
pub(crate) fn section<'a>(
    spec: &'a mut Map<String, Value>,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    let mut at = spec;
    for p in path {
        let entry = at
            .entry((*p).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(m) = entry else { return None };
        at = m;
    }
    Some(at)
}

/// Appends `item` to the list `field` of the object at `path`.
pub(crate) fn push(spec: &mut Map<String, Value>, path: &[&str], field: &str, item: Value) {
    if let Some(at) = section(spec, path)
        && let Value::Array(list) = at
            .entry(field.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()))
    {
        list.push(item);
    }
}

/// The length of the list `field` of the object at `path` (0 when absent).
pub(crate) fn len(spec: &Map<String, Value>, path: &[&str], field: &str) -> usize {
    let mut at = spec;
    for p in path {
        match at.get(*p) {
            Some(Value::Object(m)) => at = m,
            _ => return 0,
        }
    }
    at.get(field).and_then(Value::as_array).map_or(0, Vec::len)
}

/// PVE's boolean spellings (pve-common `JSONSchema.pm` `parse_boolean`).
pub(crate) fn boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

/// [`boolean`] as a JSON value.
pub(crate) fn bool_value(v: &str) -> Option<Value> {
    boolean(v).map(Value::Bool)
}

/// Splits a property string into its default (key-less) value and its `k=v` pairs.
pub(crate) fn split(value: &str) -> (Option<&str>, Vec<(&str, &str)>) {
    let mut default = None;
    let mut pairs = Vec::new();
    for part in value.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) => pairs.push((k, v)),
            None => default = Some(part),
        }
    }
    (default, pairs)
}

/// PVE's size (`32G`, `512M`, `4T`, bytes) as a manifest quantity, whole MiB only.
pub(crate) fn size(v: &str) -> Option<Value> {
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = num.parse().ok()?;
    let text = match unit {
        "T" => format!("{n}TiB"),
        "G" => format!("{n}GiB"),
        "M" => format!("{n}MiB"),
        "K" if n.is_multiple_of(1024) => format!("{}MiB", n / 1024),
        "" if n.is_multiple_of(1 << 20) => format!("{}MiB", n >> 20),
        _ => return None,
    };
    Some(Value::from(text))
}

/// Sets `v` at `path` under `spec`, making the objects on the way.
pub(crate) fn set(spec: &mut Map<String, Value>, path: &[&str], v: Value) {
    let mut at = spec;
    for p in &path[..path.len() - 1] {
        let entry = at
            .entry((*p).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(m) = entry else { return };
        at = m;
    }
    at.insert(path[path.len() - 1].to_owned(), v);
}

/// Why a sub-key is left out of the manifest.
pub(crate) fn no_field(name: &str, sub: &str, value: &str, field: &str) -> String {
    format!(
        "its option `{sub}={value}` has no typed field in `{field}`, so `{name}` cannot be declared exactly: ProxOps leaves it as it is; declare `{field}` by hand once the model has it"
    )
}
