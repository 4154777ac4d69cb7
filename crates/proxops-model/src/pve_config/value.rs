//! A `pve-config:` map and its checks: each key is one `pve-config` may set, each value one the
//! schema of some PVE release accepts (the cluster's own release is checked at plan time, when
//! the cluster says which it runs).

use super::check::{check_value, normalize_value};
use super::classify::{KeyClass, classify};
use crate::Code;
use crate::kind::context::SpecContext;
use crate::names::GuestType;
use crate::yaml::PathSeg;
use proxops_pve_schema::{keys, split_indexed};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// One value of `pve-config`: a YAML scalar as PVE takes it, kept as text (`true` is `1`,
/// `false` `0`, numbers as written).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct PveValue(pub String);

impl PveValue {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PveValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PveValue {
    fn from(s: &str) -> PveValue {
        PveValue(s.to_owned())
    }
}

impl Serialize for PveValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PveValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PveValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a PVE config value (a string, number or boolean)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PveValue, E> {
                Ok(PveValue(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<PveValue, E> {
                Ok(PveValue(if v { "1" } else { "0" }.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PveValue, E> {
                Ok(PveValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PveValue, E> {
                Ok(PveValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PveValue, E> {
                Ok(PveValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A guest's `pve-config:` map.
pub type PveConfig = BTreeMap<String, PveValue>;

/// The near spelling of an unknown key among the keys `pve-config` may set.
fn near(guest: GuestType, key: &str) -> Option<String> {
    let names = keys(guest).iter().map(|k| k.name.replace("[n]", "0"));
    let names: Vec<String> = names.collect();
    crate::diagnostic::did_you_mean(key, names.iter().map(String::as_str)).map(str::to_owned)
}

/// Checks a `pve-config` map at `base` (`["pve-config"]`): reports each key `pve-config` may
/// not set (a typed field's, PVE's own, one PVE's API refuses, one no schema has) and each
/// value no known PVE release accepts.
pub(crate) fn check_pve_config(
    cx: &SpecContext<'_>,
    guest: GuestType,
    vmid: u32,
    config: &PveConfig,
    base: &[PathSeg],
) {
    for (key, value) in config {
        let at = cx.key_path(base, key);
        match classify(guest, key) {
            KeyClass::Typed(field) => cx.report(
                Code::PveConfigTyped,
                &at,
                format!(
                    "`{key}` is managed by a typed field and cannot be set through `pve-config`"
                ),
                "managed by a typed field",
                Some(format!("use {field}")),
            ),
            KeyClass::Unmanaged(why) => {
                let why = why.replace("<vmid>", &vmid.to_string());
                let (message, help) = why.split_once(": ").unwrap_or((&why, ""));
                cx.report(
                    Code::NotSettable,
                    &at,
                    format!("ProxOps cannot set `{key}`, {message}"),
                    "not settable",
                    (!help.is_empty()).then(|| help.to_owned()),
                )
            }
            KeyClass::Unknown => {
                let out_of_range = split_indexed(key).is_some_and(|(f, _)| {
                    proxops_pve_schema::key(guest, &format!("{f}0"), None).is_some()
                });
                let help = if out_of_range {
                    Some("the index is beyond what PVE allows for this family".to_owned())
                } else {
                    near(guest, key).map(|n| format!("did you mean `{n}`?"))
                };
                cx.report(
                    Code::PveConfigUnknown,
                    &at,
                    format!("`{key}` is not a config key PVE's API takes for this guest"),
                    "unknown PVE key",
                    help,
                );
            }
            KeyClass::PveConfig => {
                let v = normalize_value(guest, key, value.as_str());
                if let Err(why) = check_value(guest, key, &v, None) {
                    cx.report(
                        Code::PveConfigValue,
                        &at,
                        format!("PVE refuses `{key}: {value}`: {why}"),
                        "PVE refuses this value",
                        None,
                    );
                }
            }
        }
    }
}
