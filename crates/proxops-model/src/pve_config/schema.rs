//! The JSON Schema of a `pve-config:` map: every key `pve-config` may set, with its type, enum
//! and range, so that an editor completes and checks them. The descriptions are made from the
//! schema's facts (type, values, sub-keys, releases): PVE's own descriptions are AGPL-licensed
//! text of pve-docs and are not copied (../shared/pve-api/README.md).

use super::classify::{KeyClass, classify};
use crate::names::GuestType;
use proxops_pve_schema::{Fmt, Param as Key, PveRelease, Sub, Ty, keys, max_index};
use serde_json::{Map, Value, json};

fn releases(k: &Key, guest: GuestType) -> String {
    let all: Vec<PveRelease> = keys(guest)
        .iter()
        .filter(|d| d.name == k.name)
        .flat_map(|d| d.versions.releases())
        .collect();
    if all.len() == PveRelease::ALL.len() {
        String::new()
    } else {
        let names: Vec<&str> = all.iter().map(|r| r.as_str()).collect();
        format!(" Only in PVE {}.", names.join(", "))
    }
}

fn sub_text(s: &Sub) -> String {
    let mut t = format!("`{}`", s.name);
    if !s.enums.is_empty() {
        t.push_str(&format!(" ({})", s.enums.join("|")));
    } else if s.ty != Ty::Str {
        t.push_str(&format!(" ({})", s.ty.name()));
    }
    if s.default_key {
        t.push_str(" [default key]");
    }
    if !s.optional {
        t.push_str(" [required]");
    }
    t
}

fn describe(k: &Key, guest: GuestType) -> String {
    let name = k.name.replace("[n]", "N");
    let mut d = match k.format {
        Fmt::Prop(subs) | Fmt::NamedProp(_, subs) => {
            let list: Vec<String> = subs
                .iter()
                .filter(|s| s.alias.is_none())
                .map(sub_text)
                .collect();
            format!(
                "PVE config key `{name}`: a property string `key=value,...` of {}.",
                list.join(", ")
            )
        }
        Fmt::Named(f) => format!("PVE config key `{name}` ({}, format `{f}`).", k.ty.name()),
        Fmt::None => format!("PVE config key `{name}` ({}).", k.ty.name()),
    };
    match (k.min, k.max) {
        (Some(lo), Some(hi)) => d.push_str(&format!(" Range {lo}-{hi}.")),
        (Some(lo), None) => d.push_str(&format!(" At least {lo}.")),
        (None, Some(hi)) => d.push_str(&format!(" At most {hi}.")),
        (None, None) => {}
    }
    d.push_str(&releases(k, guest));
    d
}

fn value_schema(k: &Key, guest: GuestType) -> Value {
    let mut s = Map::new();
    s.insert("description".into(), json!(describe(k, guest)));
    match k.ty {
        Ty::Bool => {
            s.insert(
                "enum".into(),
                json!([
                    true, false, 0, 1, "0", "1", "yes", "no", "on", "off", "true", "false"
                ]),
            );
        }
        Ty::Int | Ty::Num => {
            s.insert(
                "type".into(),
                json!(if k.ty == Ty::Int { "integer" } else { "number" }),
            );
            if let Some(lo) = k.min {
                s.insert("minimum".into(), json!(lo));
            }
            if let Some(hi) = k.max {
                s.insert("maximum".into(), json!(hi));
            }
        }
        Ty::Str if !k.enums.is_empty() => {
            // A value spelt like a number may be written unquoted.
            let mut values: Vec<Value> = k.enums.iter().map(|e| json!(e)).collect();
            values.extend(
                k.enums
                    .iter()
                    .filter_map(|e| e.parse::<i64>().ok())
                    .map(|n| json!(n)),
            );
            s.insert("enum".into(), Value::Array(values));
        }
        Ty::Str | Ty::Array => {
            s.insert("type".into(), json!(["string", "number"]));
            if let Some(n) = k.max_len {
                s.insert("maxLength".into(), json!(n));
            }
        }
    }
    Value::Object(s)
}

/// The schema of the `pve-config` map of a guest type: a property per key `pve-config` may
/// set (`patternProperties` for indexed families such as `virtiofsN`), nothing else.
pub fn pve_config_schema(guest: GuestType) -> Value {
    let mut properties = Map::new();
    let mut patterns = Map::new();
    for k in keys(guest) {
        let probe = k.name.replace("[n]", "0");
        if classify(guest, &probe) != KeyClass::PveConfig {
            continue;
        }
        let schema = value_schema(k, guest);
        match k.name.strip_suffix("[n]") {
            Some(family) => {
                // Each index PVE allows (`parallel0`-`parallel2`), or any for a wide family.
                let max = max_index(guest, family);
                let indices = if max <= 31 {
                    (0..=max)
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join("|")
                } else {
                    "0|[1-9][0-9]*".to_owned()
                };
                patterns.insert(format!("^{family}({indices})$"), schema);
            }
            None => {
                properties.insert(k.name.to_owned(), schema);
            }
        }
    }
    let what = match guest {
        GuestType::Qemu => "VM",
        GuestType::Lxc => "container",
    };
    json!({
        "description": format!("Further PVE config keys of the {what}, each checked against the official schema of the cluster's PVE release and owned like a typed field: written at create, drift restored, deleted when removed from the manifest. Keys a typed field manages are refused (the error names the field); so are keys PVE's API cannot set."),
        "type": "object",
        "properties": properties,
        "patternProperties": patterns,
        "additionalProperties": false,
    })
}

/// `#[schemars(with = "QemuPveConfig")]`: the `pve-config` of VMs and TemplateVMs.
pub(crate) struct QemuPveConfig;
/// `#[schemars(with = "LxcPveConfig")]`: the `pve-config` of LXCs and TemplateCTs.
pub(crate) struct LxcPveConfig;

impl schemars::JsonSchema for QemuPveConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "QemuPveConfig".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::Schema::try_from(pve_config_schema(GuestType::Qemu)).unwrap_or_default()
    }
}

impl schemars::JsonSchema for LxcPveConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LxcPveConfig".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::Schema::try_from(pve_config_schema(GuestType::Lxc)).unwrap_or_default()
    }
}
