//! The parameter definitions of every implemented endpoint ([`ENDPOINTS`], taken from PVE's API
//! schemas 8.4.2 and 9.1.3 and checked against each by the conformance test; a definition that
//! differs between them is one per [`Versions`]) and the validation PVE's `PVE::JSONSchema`
//! applies before a handler runs: unknown parameters, missing ones, types, enums, limits,
//! `requires`, named formats and property strings.

mod formats;
#[rustfmt::skip]
mod table;

pub use table::ENDPOINTS;

use std::collections::BTreeMap;

use crate::version::PveVersion;

pub(crate) use formats::{check_named_format, split_list};

/// The JSON type of a parameter or property-string key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ty {
    /// `string`
    Str,
    /// `integer`
    Int,
    /// `number`
    Num,
    /// `boolean` (sent as 0/1)
    Bool,
    /// `array` (a form sends it as repeated keys; kept one value per line)
    Array,
}

impl Ty {
    /// The schema's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Str => "string",
            Ty::Int => "integer",
            Ty::Num => "number",
            Ty::Bool => "boolean",
            Ty::Array => "array",
        }
    }
}

/// The PVE versions a definition holds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions(u8);

impl Versions {
    /// PVE 8.4 only.
    pub const V8_4: Versions = Versions(1);
    /// PVE 9.1 only.
    pub const V9_1: Versions = Versions(2);
    /// Every version served.
    pub const ALL: Versions = Versions(3);

    /// Whether the definition holds for `version`.
    pub const fn contains(self, version: PveVersion) -> bool {
        let bit = match version {
            PveVersion::V8_4 => 1,
            PveVersion::V9_1 => 2,
        };
        self.0 & bit != 0
    }
}

/// A parameter's `format`: none, a named one (`pve-vmid`), or a property string's keys.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Fmt {
    /// No format.
    None,
    /// A named format such as `pve-node` or `pve-configid-list`.
    Named(&'static str),
    /// A property string (`key=value,...`) with these keys.
    Prop(&'static [Sub]),
}

/// One key of a property-string format.
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// Key name.
    pub name: &'static str,
    /// Value type.
    pub ty: Ty,
    /// Whether the key may be left out.
    pub optional: bool,
    /// Whether a bare value (no `key=`) belongs to this key.
    pub default_key: bool,
    /// Allowed values, empty when any.
    pub enums: &'static [&'static str],
    /// Named format of the value.
    pub format: Option<&'static str>,
    /// For an alias key: the key it stands for.
    pub alias: Option<&'static str>,
    /// For a key alias (`virtio=MAC`): the key that receives the alias's name.
    pub key_alias: Option<&'static str>,
    /// Inclusive minimum for a number (`memory`'s `current` is at least 16).
    pub min: Option<f64>,
    /// Inclusive maximum for a number.
    pub max: Option<f64>,
}

impl Sub {
    /// A required string key with no enum, format or alias (the generated table's base).
    pub const DEFAULT: Sub = Sub {
        name: "",
        ty: Ty::Str,
        optional: false,
        default_key: false,
        enums: &[],
        format: None,
        alias: None,
        key_alias: None,
        min: None,
        max: None,
    };

    /// An alias entry (`volume` for `file`, `virtio` for `macaddr` with model).
    pub const fn alias(
        name: &'static str,
        alias: &'static str,
        key_alias: Option<&'static str>,
    ) -> Sub {
        Sub {
            name,
            ty: Ty::Str,
            optional: true,
            default_key: false,
            enums: &[],
            format: None,
            alias: Some(alias),
            key_alias,
            min: None,
            max: None,
        }
    }
}

/// One parameter of an endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name; an indexed family is spelled `net[n]`.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// Whether it may be left out.
    pub optional: bool,
    /// Allowed values, empty when any.
    pub enums: &'static [&'static str],
    /// Format.
    pub format: Fmt,
    /// Inclusive minimum for numbers.
    pub min: Option<f64>,
    /// Inclusive maximum for numbers.
    pub max: Option<f64>,
    /// Maximum string length.
    pub max_len: Option<usize>,
    /// A regular expression the value must match (only the few the simulator knows are checked).
    pub pattern: Option<&'static str>,
    /// Another parameter that must be given with this one.
    pub requires: Option<&'static str>,
    /// The versions whose schema defines the parameter so.
    pub versions: Versions,
}

impl Param {
    /// A required string parameter of every version with no limits (the generated table's base).
    pub const DEFAULT: Param = Param {
        name: "",
        ty: Ty::Str,
        optional: false,
        enums: &[],
        format: Fmt::None,
        min: None,
        max: None,
        max_len: None,
        pattern: None,
        requires: None,
        versions: Versions::ALL,
    };
}

/// One endpoint: method, path template under `/api2/json`, parameters (path ones included) of
/// every version.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// Path template such as `/nodes/{node}/qemu/{vmid}/config`.
    pub path: &'static str,
    /// Parameters in name order; a name whose definition differs between versions has one row
    /// per version.
    pub params: &'static [Param],
    /// The versions whose schema has the endpoint; it is not routed on the others.
    pub versions: Versions,
}

impl Endpoint {
    /// An endpoint of every version with no parameters (the generated table's base).
    pub const DEFAULT: Endpoint = Endpoint {
        method: "",
        path: "",
        params: &[],
        versions: Versions::ALL,
    };
}

/// Finds the definition of an endpoint.
pub fn endpoint(method: &str, path: &str) -> Option<&'static Endpoint> {
    ENDPOINTS
        .iter()
        .find(|e| e.method == method && e.path == path)
}

/// Highest index of an indexed parameter family, from PVE's sources (`MAX_NETS` and friends).
pub fn max_index(family: &str) -> u32 {
    match family {
        "ide" => 3,
        "sata" => 5,
        "scsi" => 30,
        "virtio" => 15,
        "net" | "ipconfig" => 31,
        "hostpci" => 15,
        "numa" => 7,
        "serial" => 3,
        "parallel" => 2,
        "usb" => 13,
        "virtiofs" => 9,
        _ => 255, // unused, mp, dev
    }
}

impl Endpoint {
    /// The parameters `version` defines.
    pub fn params_of(&self, version: PveVersion) -> impl Iterator<Item = &'static Param> + '_ {
        self.params
            .iter()
            .filter(move |p| p.versions.contains(version))
    }

    /// The definition a given parameter name falls under in `version` (`scsi3` under `scsi[n]`).
    pub fn param(&self, version: PveVersion, name: &str) -> Option<&'static Param> {
        if let Some(p) = self.params_of(version).find(|p| p.name == name) {
            return Some(p);
        }
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits == name.len() {
            return None;
        }
        let (family, index) = name.split_at(name.len() - digits);
        // PVE spells indices without leading zeros.
        if index.len() > 1 && index.starts_with('0') {
            return None;
        }
        let index: u32 = index.parse().ok()?;
        if index > max_index(family) {
            return None;
        }
        let want = format!("{family}[n]");
        self.params_of(version).find(|p| p.name == want)
    }
}

/// Parses a boolean as PVE does (the one definition, in `proxops-pve-schema`).
pub use proxops_pve_schema::parse_bool;

/// Checks request parameters against an endpoint as `version` defines it, returning PVE's
/// per-parameter messages.
pub fn validate(
    ep: &Endpoint,
    version: PveVersion,
    params: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut errors = BTreeMap::new();
    for (name, value) in params {
        match ep.param(version, name) {
            None => {
                errors.insert(
                    name.clone(),
                    "property is not defined in schema and the schema does not allow additional properties"
                        .to_string(),
                );
            }
            Some(p) => {
                if let Err(msg) = check_value(p, value) {
                    errors.insert(name.clone(), msg);
                } else if let Some(req) = p.requires
                    && !params.contains_key(req)
                {
                    errors.insert(
                        req.to_string(),
                        format!("missing property - '{name}' requires this property"),
                    );
                }
            }
        }
    }
    for p in ep.params_of(version) {
        if !p.optional && !p.name.ends_with("[n]") && !params.contains_key(p.name) {
            errors.insert(
                p.name.to_string(),
                "property is missing and it is not optional".to_string(),
            );
        }
    }
    errors
}

fn check_type(ty: Ty, value: &str) -> Result<(), String> {
    let ok = match ty {
        Ty::Str => true,
        Ty::Int => {
            let v = value.strip_prefix(['+', '-']).unwrap_or(value);
            !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())
        }
        Ty::Num => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
        Ty::Bool => parse_bool(value).is_some(),
        Ty::Array => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "type check ('{}') failed - got '{value}'",
            ty.name()
        ))
    }
}

fn check_enum(enums: &[&str], value: &str) -> Result<(), String> {
    if enums.is_empty() || enums.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "value '{value}' does not have a value in the enumeration '{}'",
            enums.join(", ")
        ))
    }
}

/// pve-common `PVE/JSONSchema.pm` `check_prop`'s `minimum` and `maximum`, for parameters and
/// property-string keys alike.
fn check_range(ty: Ty, min: Option<f64>, max: Option<f64>, value: &str) -> Result<(), String> {
    if matches!(ty, Ty::Int | Ty::Num) {
        let n: f64 = value.trim().parse().unwrap_or(0.0);
        if let Some(min) = min
            && n < min
        {
            return Err(format!("value must have a minimum value of {min}"));
        }
        if let Some(max) = max
            && n > max
        {
            return Err(format!("value must have a maximum value of {max}"));
        }
    }
    Ok(())
}

fn check_value(p: &Param, value: &str) -> Result<(), String> {
    check_type(p.ty, value)?;
    check_range(p.ty, p.min, p.max, value)?;
    check_enum(p.enums, value)?;
    if let Some(max) = p.max_len
        && value.chars().count() > max
    {
        return Err(format!("value may only be {max} characters long"));
    }
    if let Some(pattern) = p.pattern
        && !formats::matches_known_pattern(pattern, value)
    {
        return Err("value does not match the regex pattern".to_string());
    }
    match p.format {
        Fmt::None => Ok(()),
        Fmt::Named(f) => {
            check_named_format(f, value).map_err(|e| format!("invalid format - {e}\n"))
        }
        Fmt::Prop(keys) => parse_property_string(keys, value).map(|_| ()),
    }
}

/// A parsed property string: keys in the order given, aliases resolved.
pub type PropMap = Vec<(String, String)>;

/// Parses `file,key=value,...` against a property-string format (PVE's `parse_property_string`).
pub fn parse_property_string(keys: &[Sub], value: &str) -> Result<PropMap, String> {
    let mut out: PropMap = Vec::new();
    for part in value.split(',') {
        if part.is_empty() {
            continue;
        }
        let (mut k, v) = match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match keys.iter().find(|s| s.default_key) {
                Some(d) => (d.name.to_string(), part.to_string()),
                None => {
                    return Err(
                        "value without key, but schema does not define a default key\n".to_string(),
                    );
                }
            },
        };
        let Some(mut def) = keys.iter().find(|s| s.name == k) else {
            return Err(format!(
                "invalid key in comma-separated list property: {k}\n"
            ));
        };
        if let Some(target) = def.alias {
            if let Some(ka) = def.key_alias {
                out.push((ka.to_string(), k.clone()));
            }
            k = target.to_string();
            def = keys.iter().find(|s| s.name == target).unwrap_or(def);
        }
        if out.iter().any(|(have, _)| *have == k) {
            return Err(format!(
                "duplicate key in comma-separated list property: {k}\n"
            ));
        }
        let checked = check_type(def.ty, &v)
            .and_then(|()| check_range(def.ty, def.min, def.max, &v))
            .and_then(|()| check_enum(def.enums, &v))
            .and_then(|()| match def.format {
                Some(f) => check_named_format(f, &v).map_err(|e| format!("invalid format - {e}")),
                None => Ok(()),
            });
        if let Err(e) = checked {
            return Err(format!("invalid format - format error\n{k}: {e}\n"));
        }
        out.push((k, v));
    }
    for s in keys {
        if !s.optional && s.alias.is_none() && !out.iter().any(|(k, _)| k == s.name) {
            return Err(format!(
                "invalid format - format error\n{}: property is missing and it is not optional\n",
                s.name
            ));
        }
    }
    Ok(out)
}

/// Prints a property string as PVE does: the default key's bare value, then required keys, then
/// optional keys, each group in name order.
pub fn print_property_string(keys: &[Sub], map: &PropMap) -> String {
    let default = keys.iter().find(|s| s.default_key).map(|s| s.name);
    let optional = |k: &str| keys.iter().find(|s| s.name == k).is_none_or(|s| s.optional);
    let mut rest: Vec<&(String, String)> = map
        .iter()
        .filter(|(k, _)| Some(k.as_str()) != default)
        .collect();
    rest.sort_by(|a, b| (optional(&a.0), &a.0).cmp(&(optional(&b.0), &b.0)));
    let mut parts = Vec::new();
    if let Some(d) = default
        && let Some((_, v)) = map.iter().find(|(k, _)| k == d)
    {
        parts.push(v.clone());
    }
    parts.extend(rest.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(",")
}

/// The property-string keys of a parameter of an endpoint in `version`, if it is one.
pub fn prop_keys(
    version: PveVersion,
    method: &str,
    path: &str,
    param: &str,
) -> Option<&'static [Sub]> {
    match endpoint(method, path)?.param(version, param)?.format {
        Fmt::Prop(keys) => Some(keys),
        _ => None,
    }
}
