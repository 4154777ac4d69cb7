//! The typed manifest fields adopt can fill from a live config value. A typed key this module
//! cannot translate yet is reported (never written to `pve-config`, which refuses typed keys).

use super::props::set;
use proxops_model::kind::GuestType;
use serde_json::{Map, Value};

/// Writes `key = value` into `spec` as its typed field; `Ok(field)` names the field written,
/// `Err(reason)` says why it was not.
pub(crate) fn place(
    guest: GuestType,
    key: &str,
    value: &str,
    field: &str,
    spec: &mut Map<String, Value>,
) -> Result<String, String> {
    let not_yet = || {
        Err(format!(
            "its value `{value}` has no form in the typed field `{field}` (which owns the key, so `pve-config` cannot hold it): ProxOps leaves it as it is; declare `{field}` by hand to replace it"
        ))
    };
    let int = |v: &str| v.parse::<u64>().ok().map(Value::from);
    let bool01 = |v: &str| match v {
        "0" => Some(Value::Bool(false)),
        "1" => Some(Value::Bool(true)),
        _ => None,
    };
    let (path, v): (&[&str], Option<Value>) = match (guest, key) {
        (_, "memory") => (
            &["memory"],
            int(value).map(|n| Value::from(format!("{n}MiB"))),
        ),
        (GuestType::Lxc, "swap") => (
            &["swap"],
            int(value).map(|n| Value::from(format!("{n}MiB"))),
        ),
        (_, "cores") => (&["cpu", "cores"], int(value)),
        (_, "cpuunits") => (&["cpu", "units"], int(value)),
        (_, "cpulimit") => (
            &["cpu", "limit"],
            value
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
        ),
        (GuestType::Qemu, "vcpus") => (&["cpu", "vcpus"], int(value)),
        (GuestType::Qemu, "affinity") => (&["cpu", "affinity"], Some(Value::from(value))),
        (GuestType::Qemu, "sockets") => (&["hardware", "sockets"], int(value)),
        (GuestType::Qemu, "cpu") => return cpu(value, spec).ok_or(()).or_else(|()| not_yet()),
        (GuestType::Qemu, "numa") => (&["hardware", "numa"], bool01(value)),
        (GuestType::Qemu, "balloon") => (
            &["balloon"],
            match value {
                "0" => Some(Value::from("off")),
                v => int(v).map(|n| Value::from(format!("{n}MiB"))),
            },
        ),
        // `order=scsi0;net0`; the legacy `cdn` letters name device classes, not slots, and
        // stay reported (rewriting them as an order would change the config).
        (GuestType::Qemu, "boot") if !value.starts_with("order=") => {
            return Err(format!(
                "its legacy value `{value}` names device classes (c disk, d CD-ROM, n network), while `{field}` lists slots: ProxOps leaves it as it is; declare `{field}` by hand to replace it with an order"
            ));
        }
        (GuestType::Qemu, "boot") => (
            &["options", "boot-order"],
            value
                .strip_prefix("order=")
                .filter(|o| !o.contains([',', '=']))
                .map(|o| Value::Array(o.split(';').map(Value::from).collect())),
        ),
        (GuestType::Qemu, "bios") => (
            &["hardware", "bios"],
            matches!(value, "seabios" | "ovmf").then(|| Value::from(value)),
        ),
        // PVE's `2` and `1024` are the model's `2MiB` and `1GiB` (vm_devices.rs `Hugepages`).
        (GuestType::Qemu, "hugepages") => (
            &["hardware", "hugepages"],
            match value {
                "any" => Some(Value::from("any")),
                "2" => Some(Value::from("2MiB")),
                "1024" => Some(Value::from("1GiB")),
                _ => None,
            },
        ),
        (GuestType::Qemu, "hookscript") => (&["options", "hookscript"], Some(Value::from(value))),
        (GuestType::Qemu, "localtime") => (&["options", "localtime"], bool01(value)),
        // `0` (no hotplug) and `1` (PVE's default set) are not lists of classes.
        (GuestType::Qemu, "hotplug") => (
            &["options", "hotplug"],
            (!matches!(value, "0" | "1")).then(|| {
                Value::Array(
                    value
                        .split(',')
                        .filter(|w| !w.is_empty())
                        .map(Value::from)
                        .collect(),
                )
            }),
        ),
        (GuestType::Qemu, "scsihw") => (&["hardware", "scsi-controller"], Some(Value::from(value))),
        (_, "ostype") => (&["ostype"], Some(Value::from(value))),
        (GuestType::Lxc, "arch") => (&["arch"], Some(Value::from(value))),
        (GuestType::Lxc, "hostname") => (&["dns", "hostname"], Some(Value::from(value))),
        (_, "onboot") => (&["options", "onboot"], bool01(value)),
        (_, "protection") => (&["options", "protection"], bool01(value)),
        (_, "startup") => (&["options", "startup"], Some(Value::from(value))),
        (GuestType::Qemu, "acpi") => (&["options", "acpi"], bool01(value)),
        (GuestType::Qemu, "tablet") => (&["options", "tablet"], bool01(value)),
        (GuestType::Qemu, "agent") => return agent(value, spec).or_else(|()| not_yet()),
        (GuestType::Lxc, "unprivileged") => (&["options", "unprivileged"], bool01(value)),
        _ => return not_yet(),
    };
    match v {
        Some(v) => {
            set(spec, path, v);
            Ok(path.join("."))
        }
        None => not_yet(),
    }
}

/// `cpu`: the model, `flags=` and `hidden=`; any other sub-key (`phys-bits`, ...) leaves the
/// whole key reported. Writes nothing unless every part translates.
fn cpu(value: &str, spec: &mut Map<String, Value>) -> Option<String> {
    let (mut model, mut flags, mut hidden) = (None, None, None);
    let mut extra = Vec::new();
    for part in value.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            None | Some(("cputype", _)) => {
                model = Some(part.strip_prefix("cputype=").unwrap_or(part));
            }
            Some(("flags", f)) => flags = Some(f.split(';').map(Value::from).collect::<Vec<_>>()),
            Some(("hidden", "1")) => hidden = Some(true),
            Some(("hidden", "0")) => hidden = Some(false),
            Some(("phys-bits", v)) => extra.push(("phys-bits", v)),
            Some(("hv-vendor-id", v)) => extra.push(("hv-vendor-id", v)),
            _ => return None,
        }
    }
    let cpu = spec
        .entry("cpu")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(cpu) = cpu else { return None };
    cpu.insert("type".into(), Value::from(model?));
    if let Some(flags) = flags {
        cpu.insert("flags".into(), Value::Array(flags));
    }
    for (k, v) in extra {
        cpu.insert(k.into(), Value::from(v));
    }
    if let Some(hidden) = hidden {
        let options = spec
            .entry("options")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(o) = options {
            o.insert("hidden".into(), Value::Bool(hidden));
        }
    }
    Some("cpu.type".into())
}

/// `agent`: `enabled` and the sub-keys desired/vm.rs writes (`fstrim_cloned_disks`,
/// `freeze-fs-on-backup` or its 9.1 name `freeze-fs`, `type`); writes nothing unless every part
/// translates.
fn agent(value: &str, spec: &mut Map<String, Value>) -> Result<String, ()> {
    let mut out = Vec::new();
    for (k, v) in super::props::parse("agent", value).map_err(|_| ())? {
        let field = match k.as_str() {
            "enabled" => "agent",
            "fstrim_cloned_disks" => "agent-fstrim-cloned-disks",
            "freeze-fs-on-backup" | "freeze-fs" => "agent-freeze-fs",
            "type" => {
                out.push(("agent-type", Value::from(v)));
                continue;
            }
            _ => return Err(()),
        };
        out.push((field, Value::Bool(super::props::boolean(&v).ok_or(())?)));
    }
    let options = super::props::section(spec, &["options"]).ok_or(())?;
    for (k, v) in out {
        options.insert(k.into(), v);
    }
    Ok("options.agent".into())
}
