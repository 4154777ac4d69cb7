//! Checking a config value as pve-common's `PVE::JSONSchema` does (`check_prop`, `check_type`,
//! `check_format`, `parse_property_string`): the same order of checks, messages close to PVE's.

use super::formats::{check_named, matches_pattern};
use crate::names::GuestType;
use proxops_pve_schema::{
    Fmt, Param as Key, PropertyStringError, PveRelease, Sub, Ty, UnknownKeys, key, releases_of,
    split_property_string,
};

pub(crate) use proxops_pve_schema::parse_bool;

fn check_type(ty: Ty, value: &str) -> Result<(), String> {
    let ok = match ty {
        // No guest config key is an array; a value of one is its form text.
        Ty::Str | Ty::Array => true,
        Ty::Int => {
            let v = value.strip_prefix(['+', '-']).unwrap_or(value);
            !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())
        }
        Ty::Num => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
        Ty::Bool => parse_bool(value).is_some(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("expected {}, got `{value}`", article(ty)))
    }
}

fn article(ty: Ty) -> &'static str {
    match ty {
        Ty::Str => "a string",
        Ty::Int => "an integer",
        Ty::Num => "a number",
        Ty::Bool => "a boolean (1 or 0)",
        Ty::Array => "a list",
    }
}

fn check_range(value: &str, min: Option<f64>, max: Option<f64>) -> Result<(), String> {
    let n: f64 = value.trim().parse().unwrap_or(0.0);
    let show = |x: f64| {
        if x.fract() == 0.0 {
            format!("{}", x as i64)
        } else {
            format!("{x}")
        }
    };
    match (min, max) {
        (Some(lo), Some(hi)) if n < lo || n > hi => {
            Err(format!("{value} is outside {}-{}", show(lo), show(hi)))
        }
        (Some(lo), None) if n < lo => Err(format!("{value} is less than the minimum {}", show(lo))),
        (None, Some(hi)) if n > hi => Err(format!("{value} is more than the maximum {}", show(hi))),
        _ => Ok(()),
    }
}

fn check_enum(enums: &[&str], value: &str) -> Result<(), String> {
    if enums.is_empty() || enums.contains(&value) {
        return Ok(());
    }
    let list = enums
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(format!("`{value}` is not one of {list}"))
}

struct Rules<'a> {
    ty: Ty,
    enums: &'a [&'a str],
    min: Option<f64>,
    max: Option<f64>,
    max_len: Option<usize>,
    pattern: Option<&'a str>,
    format: Fmt,
}

fn check_rules(rules: &Rules<'_>, value: &str) -> Result<(), String> {
    check_type(rules.ty, value)?;
    if matches!(rules.ty, Ty::Int | Ty::Num) {
        check_range(value, rules.min, rules.max)?;
    }
    check_enum(rules.enums, value)?;
    if let Some(max) = rules.max_len
        && value.chars().count() > max
    {
        return Err(format!("longer than {max} characters"));
    }
    if let Some(p) = rules.pattern
        && !matches_pattern(p, value)
    {
        return Err(format!("`{value}` does not match PVE's pattern `{p}`"));
    }
    match rules.format {
        Fmt::None => Ok(()),
        Fmt::Named(f) => check_named(f, value),
        Fmt::Prop(subs) | Fmt::NamedProp(_, subs) => parse_property_string(subs, value).map(|_| ()),
    }
}

fn key_rules(k: &Key) -> Rules<'static> {
    Rules {
        ty: k.ty,
        enums: k.enums,
        min: k.min,
        max: k.max,
        max_len: k.max_len,
        pattern: k.pattern,
        format: k.format,
    }
}

fn sub_rules(s: &Sub) -> Rules<'static> {
    Rules {
        ty: s.ty,
        enums: s.enums,
        min: s.min,
        max: s.max,
        max_len: s.max_len,
        pattern: s.pattern,
        format: s.format.map_or(Fmt::None, Fmt::Named),
    }
}

/// Parses `value` against a property string's sub-keys as PVE's `parse_property_string` does
/// (`proxops_pve_schema::split_property_string`: a bare part for the default key, aliases
/// resolved, no key twice, unknown keys refused), then checks every value and that the
/// required keys are present. Returns (canonical key, value) pairs.
pub fn parse_property_string(subs: &[Sub], value: &str) -> Result<Vec<(String, String)>, String> {
    let out = split_property_string(subs, value, UnknownKeys::Refuse).map_err(|e| match e {
        PropertyStringError::UnknownKey { key } => {
            let known = subs
                .iter()
                .filter(|s| s.alias.is_none())
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ");
            format!("`{key}` is not a key of this property string (it has {known})")
        }
        other => other.to_string(),
    })?;
    for (k, v) in &out {
        if let Some(def) = subs.iter().find(|s| s.name == k.as_str()) {
            check_rules(&sub_rules(def), v).map_err(|e| format!("`{k}`: {e}"))?;
        }
    }
    for s in subs {
        if !s.optional && s.alias.is_none() && !out.iter().any(|(k, _)| k == s.name) {
            return Err(format!("`{}` is required", s.name));
        }
    }
    Ok(out)
}

/// Checks a value of config key `name` (`balloon`, `net3`) against the schema of `release`, or
/// when `None` against each release that defines the key (valid in one of them is enough: the
/// cluster's release is checked at plan time). `Err` says what PVE would refuse.
pub fn check_value(
    guest: GuestType,
    name: &str,
    value: &str,
    release: Option<PveRelease>,
) -> Result<(), String> {
    if let Some(r) = release {
        let def = key(guest, name, Some(r))
            .ok_or_else(|| format!("PVE {} has no config key `{name}`", r.as_str()))?;
        return check_rules(&key_rules(def), value);
    }
    let releases = releases_of(guest, name);
    if releases.is_empty() {
        return Err(format!(
            "`{name}` is not a {} config key",
            guest_name(guest)
        ));
    }
    // The newest release's verdict is the one reported.
    let mut verdict = Ok(());
    for r in releases.iter().rev() {
        let Some(def) = key(guest, name, Some(*r)) else {
            continue;
        };
        match check_rules(&key_rules(def), value) {
            Ok(()) => return Ok(()),
            Err(e) if verdict.is_ok() => verdict = Err(e),
            Err(_) => {}
        }
    }
    verdict
}

/// Checks the value of sub-key `sub` of property-string key `name` (`mp0`, `mountoptions`)
/// against the newest release's schema.
pub fn check_sub_value(guest: GuestType, name: &str, sub: &str, value: &str) -> Result<(), String> {
    let subs = key(guest, name, None)
        .and_then(|k| k.format.sub_keys())
        .ok_or_else(|| format!("`{name}` is not a property string"))?;
    let def = subs
        .iter()
        .find(|s| s.name == sub && s.alias.is_none())
        .ok_or_else(|| format!("`{name}` has no `{sub}`"))?;
    check_rules(&sub_rules(def), value)
}

/// Checks `value` of an endpoint parameter (`POST /storage`'s `vgname`) as PVE's schema
/// checker would: its type, enum, range, length, pattern and format. Booleans may be spelled as
/// PVE takes them. `Err` says what PVE would refuse.
pub fn check_param_value(param: &Key, value: &str) -> Result<(), String> {
    let value = match param.ty {
        Ty::Bool => match parse_bool(value) {
            Some(b) => u8::from(b).to_string(),
            None => value.to_owned(),
        },
        _ => value.to_owned(),
    };
    check_rules(&key_rules(param), &value)
}

/// Checks one item of an array parameter (a mapping's `map` entry) against the item format.
pub fn check_param_item(param: &Key, value: &str) -> Result<(), String> {
    match param.items {
        Fmt::None => Ok(()),
        Fmt::Named(f) => check_named(f, value),
        Fmt::Prop(subs) | Fmt::NamedProp(_, subs) => parse_property_string(subs, value).map(|_| ()),
    }
}

fn guest_name(guest: GuestType) -> &'static str {
    match guest {
        GuestType::Qemu => "QEMU",
        GuestType::Lxc => "LXC",
    }
}

/// The value PVE stores for a scalar of key `name`: booleans as `1`/`0`, numbers as written
/// (PVE keeps them so), anything else unchanged.
pub fn normalize_value(guest: GuestType, name: &str, value: &str) -> String {
    match key(guest, name, None).map(|k| k.ty) {
        Some(Ty::Bool) => match parse_bool(value) {
            Some(b) => u8::from(b).to_string(),
            None => value.to_owned(),
        },
        _ => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GuestType::{Lxc, Qemu};

    #[test]
    fn scalars_are_checked_as_pve_does() {
        assert!(check_value(Qemu, "balloon", "2048", None).is_ok());
        assert!(check_value(Qemu, "balloon", "-1", None).is_err());
        assert!(check_value(Qemu, "balloon", "2G", None).is_err());
        assert!(check_value(Qemu, "cpulimit", "1.5", None).is_ok());
        assert!(check_value(Qemu, "cpulimit", "129", None).is_err());
        assert!(check_value(Qemu, "keephugepages", "yes", None).is_ok());
        assert!(check_value(Qemu, "keephugepages", "maybe", None).is_err());
        assert!(check_value(Qemu, "keyboard", "de", None).is_ok());
        assert!(check_value(Qemu, "keyboard", "xx", None).is_err());
        assert!(check_value(Qemu, "vmgenid", "1", None).is_ok());
        assert!(check_value(Qemu, "vmgenid", "not-a-uuid", None).is_err());
        assert!(check_value(Qemu, "parallel0", "/dev/parport0", None).is_ok());
        assert!(check_value(Qemu, "parallel3", "/dev/parport0", None).is_err());
        assert!(check_value(Lxc, "debug", "1", None).is_ok());
        assert!(check_value(Qemu, "no-such-key", "1", None).is_err());
    }

    #[test]
    fn property_strings_are_checked_key_by_key() {
        let ok = |k: &str, v: &str| check_value(Qemu, k, v, None);
        assert!(ok("spice_enhancements", "foldersharing=1,videostreaming=all").is_ok());
        let e = ok("spice_enhancements", "videostreaming=some").unwrap_err();
        assert!(e.contains("videostreaming") && e.contains("`all`"), "{e}");
        let e = ok("spice_enhancements", "folders=1").unwrap_err();
        assert!(e.contains("not a key"), "{e}");
        assert!(ok("smbios1", "uuid=c0fd19ca-0415-4d1c-958c-d59642429f53").is_ok());
        assert!(ok("watchdog", "i6300esb,action=reset").is_ok());
        assert!(ok("watchdog", "model=other").is_err());
        assert!(ok("ivshmem", "size=32,name=lg").is_ok());
        assert!(
            ok("ivshmem", "name=lg")
                .unwrap_err()
                .contains("`size` is required")
        );
        assert!(ok("virtiofs0", "share,cache=always").is_ok());
    }

    #[test]
    fn releases_differ() {
        let r84 = Some(PveRelease::V8_4);
        let r91 = Some(PveRelease::V9_1);
        assert!(check_value(Qemu, "allow-ksm", "0", r91).is_ok());
        let e = check_value(Qemu, "allow-ksm", "0", r84).unwrap_err();
        assert!(e.contains("8.4"), "{e}");
        // Valid in one release is enough without a release.
        assert!(check_value(Qemu, "allow-ksm", "0", None).is_ok());
        assert!(check_value(Lxc, "entrypoint", "/usr/bin/app", None).is_ok());
        assert!(check_value(Lxc, "entrypoint", "/usr/bin/app", r84).is_err());
    }

    #[test]
    fn booleans_are_stored_as_digits() {
        assert_eq!(normalize_value(Qemu, "kvm", "true"), "1");
        assert_eq!(normalize_value(Qemu, "kvm", "off"), "0");
        assert_eq!(normalize_value(Qemu, "shares", "500"), "500");
    }
}
