//! The parameter definitions of every implemented endpoint ([`ENDPOINTS`], PVE's API schemas
//! 8.4.2 and 9.1.3 as `proxops-pve-schema` holds them; a definition that differs between them
//! is one per [`Versions`]) and the validation PVE's `PVE::JSONSchema`
//! applies before a handler runs: unknown parameters, missing ones, types, enums, limits,
//! `requires`, named formats and property strings.

mod formats;

use std::collections::BTreeMap;

use crate::version::PveVersion;

pub(crate) use formats::{check_named_format, split_list};
/// The facts, from the one generated table of `proxops-pve-schema`.
pub use proxops_pve_schema::{ENDPOINTS, Endpoint, Fmt, Param, Sub, Ty, Versions, endpoint};

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
        match ep.param(version.schema(), name) {
            None => {
                errors.insert(
                    name.clone(),
                    "property is not defined in schema and the schema does not allow additional properties"
                        .to_string(),
                );
            }
            Some(p) if p.ty == Ty::Array => {
                // pve-common `check_prop` checks each item against `items`, at `name[i]`.
                if let Some(keys) = p.items.sub_keys() {
                    for (i, item) in value.lines().enumerate() {
                        if let Err(msg) = parse_property_string(keys, item) {
                            errors.insert(format!("{name}[{i}]"), msg);
                        }
                    }
                }
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
    for p in ep.params_of(version.schema()) {
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
        // A named property-string format is checked by its name, as PVE's registered format
        // does; the sub-keys the table reads from its typetext are not PVE's definition.
        Fmt::Named(f) | Fmt::NamedProp(f, _) => {
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
    match endpoint(method, path)?
        .param(version.schema(), param)?
        .format
    {
        Fmt::Prop(keys) => Some(keys),
        _ => None,
    }
}
