//! Which config changes PVE applies to a running guest at once and which it keeps pending until
//! the guest is stopped and started (a stopped guest takes every change at once). The planner
//! plans the restart a pending change needs, or reports it when it may not restart the guest.
//!
//! qemu: qemu-server `src/PVE/QemuServer.pm`, `vmconfig_hotplug_pending` (the
//! `$fast_plug_option` keys and the cloud-init keys always apply; NICs, disks, memory, vCPUs and
//! USB only in the classes the `hotplug` option enables, `parse_hotplug_features`, default
//! `network,disk,usb`; enabling the agent waits, `vmconfig_update_agent`). lxc: pve-container
//! `src/PVE/LXC/Config.pm`, `vmconfig_hotplug_pending` and `$LXC_FASTPLUG_OPTIONS`.
//! The prediction only adds restarts to the drivers' own per-key flags; a key PVE left pending
//! anyway shows in `GET .../pending` and is restarted for on the next plan.

use proxops_pve::GuestType;
use proxops_pve_schema::{LXC_FAST_PLUG, QEMU_FAST_PLUG, hotplug_classes};
use std::collections::BTreeMap;

fn indexed(key: &str, family: &str) -> bool {
    key.strip_prefix(family)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether writing `key` (to `value`, `None`: deleting it) on a running guest with the live
/// config `live` stays pending until the next start.
pub fn stays_pending(
    guest: GuestType,
    key: &str,
    value: Option<&str>,
    live: &BTreeMap<String, String>,
) -> bool {
    match guest {
        GuestType::Qemu => qemu_pending(key, value, live),
        GuestType::Lxc => lxc_pending(key, value.is_none(), live),
    }
}

fn qemu_pending(key: &str, value: Option<&str>, live: &BTreeMap<String, String>) -> bool {
    if QEMU_FAST_PLUG.contains(&key) || indexed(key, "ipconfig") {
        return false;
    }
    let hot = hotplug_classes(live.get("hotplug").map(String::as_str));
    let has = |c: &str| hot.contains(&c);
    match key {
        "cpulimit" | "cpuunits" => false,
        // Turning the balloon device on or off is not hot-pluggable; a new minimum is.
        "balloon" => {
            let enabled = |v: Option<&str>| v.is_none_or(|v| v != "0");
            enabled(live.get(key).map(String::as_str)) != enabled(value)
        }
        // `qemu_usb_hotplug` needs USB hotplug and a guest OS that can take it
        // (qemu-server `$is_usb_hotplug_supported`).
        _ if indexed(key, "usb") => {
            !(has("usb")
                && live
                    .get("ostype")
                    .is_some_and(|o| matches!(o.as_str(), "l26" | "win8" | "win10" | "win11")))
        }
        "vcpus" => !has("cpu"),
        "tablet" => !has("usb"),
        // qemu_memory_hotplug needs NUMA.
        "memory" => !(has("memory") && live.get("numa").is_some_and(|n| n == "1")),
        "agent" => {
            // Only `fstrim_cloned_disks` changes on an enabled agent apply at once; the
            // comparison of the other sub-keys is left to PVE: any agent change is restarted for.
            true
        }
        "efidisk0" | "tpmstate0" => true,
        _ if indexed(key, "net") => {
            // A bridge, VLAN, rate or firewall change applies even without network hotplug;
            // only a model, MAC, queues or MTU change (or a new NIC) needs it.
            if has("network") {
                return false;
            }
            let Some(old) = live.get(key) else {
                return true;
            };
            let Some(new) = value else {
                return true;
            };
            let replug = |v: &str| -> Vec<String> {
                v.split(',')
                    .filter(|p| {
                        ![
                            "bridge=",
                            "tag=",
                            "rate=",
                            "firewall=",
                            "link_down=",
                            "trunks=",
                        ]
                        .iter()
                        .any(|k| p.starts_with(k))
                    })
                    .map(str::to_ascii_lowercase)
                    .collect()
            };
            replug(old) != replug(new)
        }
        _ if ["scsi", "virtio", "sata", "ide"]
            .iter()
            .any(|f| indexed(key, f)) =>
        {
            let plug = has("disk") && !indexed(key, "ide") && !indexed(key, "sata");
            let (Some(old), Some(new)) = (live.get(key), value) else {
                return !plug;
            };
            if old.contains("media=cdrom") && new.contains("media=cdrom") {
                return false;
            }
            let volume = |v: &str| v.split(',').next().unwrap_or_default().to_owned();
            if volume(old) != volume(new) {
                return !plug;
            }
            // vmconfig_update_disk: these drive options need the drive re-created.
            let sub = |v: &str, k: &str| {
                v.split(',')
                    .find_map(|p| p.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                    .map(str::to_owned)
            };
            [
                "aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro",
            ]
            .iter()
            .any(|k| sub(old, k) != sub(new, k))
        }
        _ if indexed(key, "unused") => !has("disk"),
        _ => true,
    }
}

fn lxc_pending(key: &str, delete: bool, live: &BTreeMap<String, String>) -> bool {
    if LXC_FAST_PLUG.contains(&key) || indexed(key, "net") {
        return false;
    }
    match key {
        "cpulimit" | "cpuunits" | "swap" => false,
        "memory" => delete,
        _ if indexed(key, "unused") => !delete,
        // A mount point or device goes live only into a free slot.
        _ if indexed(key, "mp") || indexed(key, "dev") => delete || live.contains_key(key),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn qemu_rules() {
        let l = live(&[("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")]);
        let q = GuestType::Qemu;
        assert!(!stays_pending(q, "name", Some("x"), &l));
        assert!(stays_pending(q, "cores", Some("4"), &l));
        assert!(stays_pending(q, "agent", Some("1"), &l));
        assert!(!stays_pending(
            q,
            "net0",
            Some("virtio=BC:24:11:00:00:01,bridge=vmbr1"),
            &l
        ));
        let off = live(&[
            ("hotplug", "0"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
        ]);
        assert!(!stays_pending(
            q,
            "net0",
            Some("virtio=BC:24:11:00:00:01,bridge=vmbr1"),
            &off
        ));
        assert!(stays_pending(
            q,
            "net0",
            Some("e1000=BC:24:11:00:00:01,bridge=vmbr0"),
            &off
        ));
        assert!(!stays_pending(q, "balloon", Some("1024"), &l));
        assert!(stays_pending(q, "balloon", Some("0"), &l));
        assert!(stays_pending(q, "usb0", Some("spice"), &l));
        let linux = live(&[("ostype", "l26")]);
        assert!(!stays_pending(q, "usb0", Some("spice"), &linux));
        let mem = live(&[("hotplug", "network,disk,memory"), ("numa", "1")]);
        assert!(!stays_pending(q, "memory", Some("4096"), &mem));
        assert!(stays_pending(q, "memory", Some("4096"), &l));
    }

    #[test]
    fn lxc_rules() {
        let l = live(&[("mp0", "local-lvm:subvol-1-disk-1,mp=/a")]);
        let c = GuestType::Lxc;
        assert!(!stays_pending(c, "cores", Some("2"), &l));
        assert!(!stays_pending(c, "memory", Some("1024"), &l));
        assert!(stays_pending(c, "tty", Some("4"), &l));
        assert!(stays_pending(c, "features", Some("nesting=1"), &l));
        assert!(stays_pending(
            c,
            "mp0",
            Some("local-lvm:subvol-1-disk-1,mp=/b"),
            &l
        ));
        assert!(!stays_pending(c, "mp1", Some("local-lvm:1,mp=/b"), &l));
    }
}
