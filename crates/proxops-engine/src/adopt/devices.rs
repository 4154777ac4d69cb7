//! A VM's disk slots and NICs as typed `disks` and `networks` entries. A disk names the volume
//! its slot holds (`volume`): the engine never re-creates a volume in an occupied slot, compares only its
//! storage and grows it only when the manifest's size is larger (diff.rs `volume`).

use serde_json::{Map, Value};

/// Splits a property string into its default (key-less) value and its `k=v` pairs.
fn split(value: &str) -> (Option<&str>, Vec<(&str, &str)>) {
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

fn boolean(v: &str) -> Option<Value> {
    match v {
        "1" | "on" | "yes" | "true" => Some(Value::Bool(true)),
        "0" | "off" | "no" | "false" => Some(Value::Bool(false)),
        _ => None,
    }
}

/// PVE's size (`32G`, `512M`, `4T`, bytes) as a manifest quantity, whole MiB only.
fn size(v: &str) -> Option<Value> {
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

/// The `disks` entry of slot `key` (`scsi0`) holding `value`, or why it cannot be one.
pub(crate) fn disk(key: &str, value: &str) -> Result<Value, String> {
    let (volume, pairs) = split(value);
    let not = |why: &str| {
        Err(format!(
            "{why}: declare it by hand (`disks`, `hardware.cdroms` or `hardware.cloud-init`)"
        ))
    };
    let Some(volume) = volume.or_else(|| pairs.iter().find(|(k, _)| *k == "file").map(|(_, v)| *v))
    else {
        return not("it names no volume");
    };
    let Some((storage, _)) = volume.split_once(':') else {
        return Err(format!(
            "it passes the host's block device or file `{volume}` through, and `disks` allocates volumes on storages: the model cannot name a host device, so ProxOps leaves it as it is (root@pam sets it with `qm set <vmid> --{key} {volume}`)"
        ));
    };
    let mut disk = Map::new();
    disk.insert("storage".into(), Value::from(storage));
    // The volume by its id: never allocated or swapped (diff.rs `volume`).
    disk.insert("volume".into(), Value::from(volume));
    disk.insert("interface".into(), Value::from(key));
    for (k, v) in pairs {
        let (field, value) = match k {
            "file" => continue,
            "media" if v == "disk" => continue,
            "media" => return not(&format!("its media `{v}` is neither a disk nor a CD-ROM")),
            "size" => ("size", size(v)),
            "iothread" => ("iothread", boolean(v)),
            "ssd" => ("ssd", boolean(v)),
            "backup" => ("backup", boolean(v)),
            "replicate" => ("replicate", boolean(v)),
            "ro" => ("read-only", boolean(v)),
            "discard" if matches!(v, "on" | "ignore") => ("discard", Some(Value::from(v))),
            "cache"
                if matches!(
                    v,
                    "none" | "writethrough" | "writeback" | "unsafe" | "directsync"
                ) =>
            {
                ("cache", Some(Value::from(v)))
            }
            "aio" if matches!(v, "native" | "threads" | "io_uring") => {
                ("aio", Some(Value::from(v)))
            }
            "serial" => ("serial", Some(Value::from(v))),
            "format" if matches!(v, "raw" | "qcow2" | "vmdk") => ("format", Some(Value::from(v))),
            // I/O limits, under `limits` in the model's kebab-case names.
            l if l.starts_with("mbps") || l.starts_with("iops") => {
                let n = if l.starts_with("mbps") {
                    v.parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(Value::Number)
                } else {
                    v.parse::<u64>().ok().map(Value::from)
                };
                let Some(n) = n else {
                    return not(&format!(
                        "its option `{k}={v}` has a value adopt cannot read"
                    ));
                };
                if let Value::Object(limits) = disk
                    .entry("limits")
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    limits.insert(l.replace('_', "-"), n);
                }
                continue;
            }
            _ => {
                return not(&format!(
                    "its option `{k}={v}` is not translated by adopt yet"
                ));
            }
        };
        let Some(value) = value else {
            return not(&format!(
                "its option `{k}={v}` has a value adopt cannot read"
            ));
        };
        disk.insert(field.into(), value);
    }
    if !disk.contains_key("size") {
        return not("PVE records no size for it");
    }
    Ok(Value::Object(disk))
}

const NIC_MODELS: &[&str] = &["virtio", "e1000", "e1000e", "rtl8139", "vmxnet3"];

/// The `networks` entry of `key` (`net0`) holding `value`, or why it cannot be one.
pub(crate) fn vm_network(key: &str, value: &str) -> Result<Value, String> {
    let (_, pairs) = split(value);
    let not = |why: String| Err(format!("{why}: declare it by hand in `networks`"));
    let mut nic = Map::new();
    nic.insert("slot".into(), Value::from(key));
    for (k, v) in pairs {
        let (field, value) = match k {
            m if NIC_MODELS.contains(&m) => {
                nic.insert("model".into(), Value::from(m));
                ("mac", Some(Value::from(v)))
            }
            "bridge" => ("bridge", Some(Value::from(v))),
            "tag" => ("vlan", v.parse::<u16>().ok().map(Value::from)),
            "firewall" => ("firewall", boolean(v)),
            "link_down" => ("link-down", boolean(v)),
            "mtu" => ("mtu", v.parse::<u32>().ok().map(Value::from)),
            // `rate-limit` is whole MB/s; a fraction stays reported.
            "rate" => ("rate-limit", v.parse::<u32>().ok().map(Value::from)),
            "queues" => ("queues", v.parse::<u32>().ok().map(Value::from)),
            _ => {
                return not(format!(
                    "its option `{k}={v}` is not translated by adopt yet"
                ));
            }
        };
        let Some(value) = value else {
            return not(format!(
                "its option `{k}={v}` has a value adopt cannot read"
            ));
        };
        nic.insert(field.into(), value);
    }
    if !nic.contains_key("bridge") {
        return not("it has no bridge".into());
    }
    Ok(Value::Object(nic))
}
