//! A VM's disk slots and NICs as typed `disks` and `networks` entries. A disk names the volume
//! its slot holds (`volume`): the engine never re-creates a volume in an occupied slot, compares only its
//! storage and grows it only when the manifest's size is larger (diff.rs `volume`).

use super::props::{bool_value, size, split};
use serde_json::{Map, Value};

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
            "iothread" => ("iothread", bool_value(v)),
            "ssd" => ("ssd", bool_value(v)),
            "backup" => ("backup", bool_value(v)),
            "replicate" => ("replicate", bool_value(v)),
            "ro" => ("read-only", bool_value(v)),
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
            "firewall" => ("firewall", bool_value(v)),
            "link_down" => ("link-down", bool_value(v)),
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
