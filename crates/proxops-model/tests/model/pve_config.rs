//! The guest config keys of PVE (`proxops_model::pve_config`; `proxops-pve-schema`'s conformance
//! test checks the table against each official schema): the typed enums spell PVE's values, the JSON Schema lists the keys
//! `pve-config` takes, and every key of the real guest configs in `../shared/pve-configs` is
//! accounted for: set by a typed field, set through `pve-config`, or reported.

use crate::support::shared;
use proxops_model::kind::GuestType;
use proxops_model::kinds::lxc::{ConsoleMode, LxcOsType};
use proxops_model::kinds::vm::{
    AgentType, AudioDevice, AudioDriver, Cache, CiType, Clipboard, MsCert, NumaPolicy, QemuOsType,
    RngSource, Viommu,
};
use proxops_model::pve_config::{
    KeyClass, check_value, classify, key, pve_config_schema, split_indexed, typed_sub_keys,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// Every spelling a unit enum's schema lists.
fn spellings<T: schemars::JsonSchema>() -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(c)) = m.get("const") {
                    out.push(c.clone());
                }
                if let Some(Value::Array(e)) = m.get("enum") {
                    out.extend(e.iter().filter_map(|x| x.as_str().map(str::to_owned)));
                }
                for (k, x) in m {
                    if k != "enum" && k != "const" {
                        walk(x, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let schema = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    let mut out = Vec::new();
    walk(&schema, &mut out);
    out.sort();
    out
}

/// The values the newest release allows for `key` (`sub`: a sub-key of it).
fn pve_values(guest: GuestType, name: &str, sub: Option<&str>) -> Vec<String> {
    let def = key(guest, name, None).unwrap();
    let list: &[&str] = match sub {
        None => def.enums,
        Some(s) => {
            def.format
                .sub_keys()
                .unwrap()
                .iter()
                .find(|k| k.name == s)
                .unwrap()
                .enums
        }
    };
    let mut v: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

#[test]
fn the_typed_enums_spell_pves_values() {
    use GuestType::{Lxc, Qemu};
    let cases: &[(Vec<String>, Vec<String>, &str)] = &[
        (
            spellings::<QemuOsType>(),
            pve_values(Qemu, "ostype", None),
            "qemu ostype",
        ),
        (
            spellings::<LxcOsType>(),
            pve_values(Lxc, "ostype", None),
            "lxc ostype",
        ),
        (
            spellings::<ConsoleMode>(),
            pve_values(Lxc, "cmode", None),
            "cmode",
        ),
        (
            spellings::<Cache>(),
            pve_values(Qemu, "scsi0", Some("cache")),
            "cache",
        ),
        (
            spellings::<CiType>(),
            pve_values(Qemu, "citype", None),
            "citype",
        ),
        (
            spellings::<AudioDevice>(),
            pve_values(Qemu, "audio0", Some("device")),
            "audio",
        ),
        (
            spellings::<AudioDriver>(),
            pve_values(Qemu, "audio0", Some("driver")),
            "driver",
        ),
        (
            spellings::<RngSource>(),
            pve_values(Qemu, "rng0", Some("source")),
            "rng",
        ),
        (
            spellings::<Viommu>(),
            pve_values(Qemu, "machine", Some("viommu")),
            "viommu",
        ),
        (
            spellings::<NumaPolicy>(),
            pve_values(Qemu, "numa0", Some("policy")),
            "numa",
        ),
        (
            spellings::<MsCert>(),
            pve_values(Qemu, "efidisk0", Some("ms-cert")),
            "ms-cert",
        ),
        (
            spellings::<AgentType>(),
            pve_values(Qemu, "agent", Some("type")),
            "agent",
        ),
        (
            spellings::<Clipboard>(),
            pve_values(Qemu, "vga", Some("clipboard")),
            "vga",
        ),
    ];
    for (ours, pves, what) in cases {
        assert_eq!(ours, pves, "{what}");
    }
}

#[test]
fn the_json_schema_lists_the_keys_pve_config_takes() {
    let qemu = pve_config_schema(GuestType::Qemu);
    let props = qemu["properties"].as_object().unwrap();
    for k in [
        "keyboard",
        "spice_enhancements",
        "smbios1",
        "tdf",
        "allow-ksm",
        "watchdog",
    ] {
        assert!(props.contains_key(k), "{k}");
    }
    for k in [
        "cores", "memory", "args", "lock", "scsi0", "ostype", "cpuunits",
    ] {
        assert!(!props.contains_key(k), "{k}");
    }
    assert_eq!(qemu["additionalProperties"], false);
    assert!(qemu["patternProperties"]["^virtiofs(0|1|2|3|4|5|6|7|8|9)$"].is_object());
    assert!(qemu["patternProperties"]["^parallel(0|1|2)$"].is_object());
    let kb = &props["keyboard"];
    assert!(kb["enum"].as_array().unwrap().contains(&"de".into()));
    assert!(kb["description"].as_str().unwrap().contains("`keyboard`"));
    assert!(
        props["allow-ksm"]["description"]
            .as_str()
            .unwrap()
            .contains("Only in PVE 9.1")
    );
    let lxc = pve_config_schema(GuestType::Lxc);
    let props = lxc["properties"].as_object().unwrap();
    assert!(props.contains_key("debug") && props.contains_key("env"));
    assert!(!props.contains_key("timezone") && !props.contains_key("lxc.idmap"));
}

/// A guest config file as `qm config`/`pct config` prints it: the current section's keys
/// (snapshot sections start with `[name]`); `#` lines are the description.
fn current_keys(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut description = false;
    for line in text.lines() {
        if line.starts_with('[') {
            break;
        }
        if line.starts_with('#') {
            description = true;
            continue;
        }
        if let Some((k, v)) = line.split_once(':')
            && !k.is_empty()
            && !k.contains(' ')
        {
            out.insert(k.to_owned(), v.trim().to_owned());
        }
    }
    if description {
        out.entry("description".into()).or_default();
    }
    out
}

/// Sub-keys of a live value, as PVE parses it (a bare part is the default key's).
fn sub_keys(guest: GuestType, name: &str, value: &str) -> Vec<String> {
    let Some(subs) = key(guest, name, None).and_then(|k| k.format.sub_keys()) else {
        return Vec::new();
    };
    let default = subs.iter().find(|s| s.default_key).map(|s| s.name);
    value
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .filter_map(|p| match p.split_once('=') {
            Some((k, _)) => {
                let def = subs.iter().find(|s| s.name == k);
                // A key alias (`virtio=MAC`) is the model and the MAC address.
                match def.and_then(|d| d.alias.map(|a| (d.key_alias, a))) {
                    Some((Some(_), _)) => Some("macaddr".to_owned()),
                    Some((None, target)) => Some(target.to_owned()),
                    None => Some(k.to_owned()),
                }
            }
            None => default.map(str::to_owned),
        })
        .collect()
}

#[derive(Default)]
struct Counts {
    typed: usize,
    pve_config: usize,
    reported: usize,
    /// Typed keys with a live sub-key no typed field sets, as `key.sub`.
    sub_gaps: BTreeMap<String, usize>,
    /// `pve-config` values no release's schema takes.
    refused: Vec<String>,
}

#[test]
fn every_key_of_the_real_guest_configs_is_accounted_for() {
    let Some(root) = shared("pve-configs") else {
        return;
    };
    let mut report = String::new();
    for (dir, guest) in [("qemu", GuestType::Qemu), ("lxc", GuestType::Lxc)] {
        let mut counts = Counts::default();
        let mut files = 0;
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let Ok(text) = std::fs::read_to_string(path.join("config")) else {
                continue;
            };
            files += 1;
            for (k, v) in current_keys(&text) {
                match classify(guest, &k) {
                    KeyClass::Typed(_) => {
                        counts.typed += 1;
                        if let Some(allowed) = typed_sub_keys(guest, &k) {
                            for s in sub_keys(guest, &k, &v) {
                                if !allowed.contains(&s.as_str()) {
                                    let family = split_indexed(&k).map_or(k.as_str(), |(f, _)| f);
                                    *counts.sub_gaps.entry(format!("{family}.{s}")).or_default() +=
                                        1;
                                }
                            }
                        }
                    }
                    KeyClass::PveConfig => {
                        counts.pve_config += 1;
                        if let Err(e) = check_value(guest, &k, &v, None) {
                            counts
                                .refused
                                .push(format!("{}: {k}: {v}: {e}", path.display()));
                        }
                    }
                    KeyClass::Unmanaged(_) | KeyClass::Unknown => counts.reported += 1,
                }
            }
        }
        assert!(files > 0, "no configs under {}", root.join(dir).display());
        // Every value `pve-config` would carry is one PVE's schema takes.
        assert!(counts.refused.is_empty(), "{:#?}", counts.refused);
        report.push_str(&format!(
            "{dir}: {files} configs, {} keys typed, {} via pve-config, {} reported; typed keys with sub-keys no field sets: {:?}\n",
            counts.typed, counts.pve_config, counts.reported, counts.sub_gaps
        ));
        // Most keys are typed: the fields cover what operators use.
        assert!(
            counts.typed > counts.pve_config + counts.reported,
            "{report}"
        );
    }
    eprintln!("{report}");
}
