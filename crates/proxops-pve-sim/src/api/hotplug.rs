//! Which config changes a running guest takes at once and which stay pending until PVE stops
//! and starts it (a stopped guest takes every change at once).
//!
//! qemu follows qemu-server `src/PVE/QemuServer.pm`, `vmconfig_hotplug_pending`: the
//! `$fast_plug_option` keys (plus the cloud-init keys) always apply; the rest apply only in the
//! classes the guest's `hotplug` option enables (`parse_hotplug_features`, default
//! `network,disk,usb`), with the finer rules of `vmconfig_update_net`, `vmconfig_update_disk`
//! and `vmconfig_update_agent`. lxc follows pve-container `src/PVE/LXC/Config.pm`,
//! `vmconfig_hotplug_pending` and its `$LXC_FASTPLUG_OPTIONS`.

use std::collections::{BTreeMap, BTreeSet};

use super::disks::is_volume;
use crate::state::GuestType;
use proxops_pve_schema::{LXC_FAST_PLUG, QEMU_FAST_PLUG, allowed_values, hotplug_classes};

/// qemu NIC models (`PVE::QemuServer::Network` `$nic_model_list`, the `net[n]` `model` enum of
/// the schema table): a key naming one is the model with its MAC.
fn nic_models() -> &'static [&'static str] {
    allowed_values(GuestType::Qemu, "net0", Some("model"), None)
}

fn family(key: &str) -> &str {
    key.trim_end_matches(|c: char| c.is_ascii_digit())
}

fn indexed(key: &str, fam: &str) -> bool {
    family(key) == fam && key.len() > fam.len()
}

/// A property string's `key=value` parts; a part without `=` is stored under `default`.
fn parts(value: &str, default: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for part in value.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) => {
                out.insert(k.to_string(), v.to_string());
            }
            None => {
                out.insert(default.to_string(), part.to_string());
            }
        }
    }
    out
}

/// A qemu NIC's parts with the model key (`virtio=MAC`) split into `model` and `macaddr`.
fn nic(value: &str) -> BTreeMap<String, String> {
    let mut p = parts(value, "model");
    if let Some((model, mac)) = p
        .iter()
        .find(|(k, _)| nic_models().contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
    {
        p.remove(&model);
        p.insert("model".into(), model);
        p.insert("macaddr".into(), mac);
    }
    p
}

fn differs(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>, key: &str) -> bool {
    a.get(key) != b.get(key)
}

/// `vmconfig_update_net`: a model, MAC, queues or MTU change (or a non-bridged NIC) needs
/// network hotplug; bridge, VLAN, rate, firewall and link changes apply regardless.
fn qemu_net(old: Option<&String>, new: &str, hot: &BTreeSet<&str>) -> bool {
    let network = hot.contains("network");
    let Some(old) = old else {
        return network;
    };
    let (o, n) = (nic(old), nic(new));
    let replug = ["model", "macaddr", "queues", "mtu"]
        .iter()
        .any(|k| differs(&o, &n, k))
        || !(o.contains_key("bridge") && n.contains_key("bridge"));
    !replug || network
}

/// `vmconfig_update_disk`: a new disk or another volume needs disk hotplug (not on ide/sata);
/// a change of `aio`, `discard`, `iothread`, `queues`, `product`, `cache`, `ssd`, `vendor` or
/// `ro` stays pending; throttles, sizes and cdrom media apply.
fn qemu_disk(key: &str, old: Option<&String>, new: &str, hot: &BTreeSet<&str>) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return false;
    }
    let plug = hot.contains("disk") && !matches!(family(key), "ide" | "sata");
    let n = parts(new, "file");
    if n.get("media").is_some_and(|m| m == "cdrom")
        && n.get("file").is_some_and(|f| f.contains("cloudinit"))
    {
        return true;
    }
    let Some(old) = old else {
        return plug;
    };
    let o = parts(old, "file");
    let media =
        |p: &BTreeMap<String, String>| p.get("media").cloned().unwrap_or_else(|| "disk".into());
    if media(&o) != media(&n) {
        // "unable to change media type": a hotplug error, the change stays pending.
        return false;
    }
    if media(&o) == "cdrom" {
        return true;
    }
    if o.get("file") != n.get("file") {
        return plug;
    }
    ![
        "aio", "discard", "iothread", "queues", "product", "cache", "ssd", "vendor", "ro",
    ]
    .iter()
    .any(|k| differs(&o, &n, k))
}

/// `vmconfig_update_agent`: enabling the agent stays pending; on an enabled agent only a
/// `fstrim_cloned_disks` change applies.
fn qemu_agent(old: Option<&String>, new: &str) -> bool {
    // Perl truth of the current value: unset, empty and "0" are false.
    let Some(old) = old.filter(|o| !o.is_empty() && o.as_str() != "0") else {
        return false;
    };
    let (mut o, mut n) = (parts(old, "enabled"), parts(new, "enabled"));
    o.remove("fstrim_cloned_disks");
    n.remove("fstrim_cloned_disks");
    o == n
}

/// Whether setting `key` to `new` on the running guest whose current config is `config` takes
/// effect at once (else it stays pending).
pub(crate) fn applies_live(
    kind: GuestType,
    config: &BTreeMap<String, String>,
    key: &str,
    new: &str,
) -> bool {
    match kind {
        GuestType::Qemu => qemu_set(config, key, new),
        GuestType::Lxc => lxc_set(config, key),
    }
}

/// Whether deleting `key` from the running guest whose current config is `config` takes effect
/// at once (else it stays pending).
pub(crate) fn deletes_live(kind: GuestType, config: &BTreeMap<String, String>, key: &str) -> bool {
    match kind {
        GuestType::Qemu => qemu_delete(config, key),
        GuestType::Lxc => {
            LXC_FAST_PLUG.contains(&key)
                || indexed(key, "unused")
                || indexed(key, "net")
                || matches!(key, "swap" | "cpulimit" | "cpuunits")
        }
    }
}

fn qemu_set(config: &BTreeMap<String, String>, key: &str, new: &str) -> bool {
    if QEMU_FAST_PLUG.contains(&key) || indexed(key, "ipconfig") {
        return true;
    }
    let hot: BTreeSet<&str> = hotplug_classes(config.get("hotplug").map(String::as_str))
        .into_iter()
        .collect();
    let old = config.get(key);
    match key {
        "hotplug" => {
            let cur = config.get("hotplug").map_or("", String::as_str);
            !(new.contains("memory")
                || cur.contains("memory")
                || new.contains("cpu")
                || cur.contains("cpu"))
        }
        "tablet" => hot.contains("usb"),
        "vcpus" => hot.contains("cpu"),
        "balloon" => {
            // Turning the balloon device on or off is not hotpluggable.
            let enabled = |v: Option<&str>| v.is_none_or(|v| v != "0");
            enabled(old.map(String::as_str)) == enabled(Some(new))
        }
        // qemu_memory_hotplug fails without NUMA ("memory hotplug requires NUMA"): pending.
        "memory" => hot.contains("memory") && config.get("numa").is_some_and(|n| n == "1"),
        "cpuunits" | "cpulimit" => true,
        "agent" => qemu_agent(old, new),
        _ if indexed(key, "usb") => usb_hotplug(config, &hot),
        _ if indexed(key, "net") => qemu_net(old, new, &hot),
        _ if is_volume(GuestType::Qemu, key) && !indexed(key, "unused") => {
            qemu_disk(key, old, new, &hot)
        }
        _ => false,
    }
}

fn qemu_delete(config: &BTreeMap<String, String>, key: &str) -> bool {
    if QEMU_FAST_PLUG.contains(&key) || indexed(key, "ipconfig") {
        return true;
    }
    let hot: BTreeSet<&str> = hotplug_classes(config.get("hotplug").map(String::as_str))
        .into_iter()
        .collect();
    match key {
        "hotplug" => !config
            .get("hotplug")
            .is_some_and(|h| h.contains("cpu") || h.contains("memory")),
        "tablet" => hot.contains("usb"),
        "vcpus" => hot.contains("cpu"),
        "balloon" => config.get("balloon").is_none_or(|b| b != "0"),
        "memory" => hot.contains("memory"),
        "cpuunits" | "cpulimit" => true,
        _ if indexed(key, "usb") => usb_hotplug(config, &hot),
        _ if indexed(key, "net") => hot.contains("network"),
        _ if is_volume(GuestType::Qemu, key) => {
            hot.contains("disk") && !matches!(family(key), "ide" | "sata" | "efidisk" | "tpmstate")
        }
        _ => false,
    }
}

/// USB hotplug needs the `usb` class and an `l26` or Windows 8+ guest (the machine version
/// check, 7.1 or newer, always holds in the simulator).
fn usb_hotplug(config: &BTreeMap<String, String>, hot: &BTreeSet<&str>) -> bool {
    hot.contains("usb")
        && config
            .get("ostype")
            .is_some_and(|o| matches!(o.as_str(), "l26" | "win8" | "win10" | "win11"))
}

/// pve-container: the fast-plug keys, CPU limits, NICs, memory and swap apply; a mount point or
/// device only into a free slot; the rest stays pending.
fn lxc_set(config: &BTreeMap<String, String>, key: &str) -> bool {
    if LXC_FAST_PLUG.contains(&key) {
        return true;
    }
    match key {
        "cpulimit" | "cpuunits" | "memory" | "swap" => true,
        _ if indexed(key, "net") => true,
        _ if indexed(key, "mp") || indexed(key, "dev") => !config.contains_key(key),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn qemu_classes() {
        let c = conf(&[
            ("memory", "2048"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("scsi0", "local-lvm:vm-100-disk-0,size=8G"),
        ]);
        let q = GuestType::Qemu;
        assert!(applies_live(q, &c, "name", "x"));
        assert!(applies_live(q, &c, "ciuser", "x"));
        assert!(!applies_live(q, &c, "cores", "4"));
        assert!(!applies_live(q, &c, "memory", "4096"));
        assert!(!applies_live(q, &c, "agent", "1"));
        // A bridge change applies; a model change needs network hotplug (enabled by default).
        assert!(applies_live(
            q,
            &c,
            "net0",
            "virtio=BC:24:11:00:00:01,bridge=vmbr1"
        ));
        assert!(applies_live(
            q,
            &c,
            "net0",
            "e1000=BC:24:11:00:00:01,bridge=vmbr0"
        ));
        let no_hot = conf(&[
            ("hotplug", "0"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
        ]);
        assert!(!applies_live(
            q,
            &no_hot,
            "net0",
            "e1000=BC:24:11:00:00:01,bridge=vmbr0"
        ));
        assert!(applies_live(
            q,
            &no_hot,
            "net0",
            "virtio=BC:24:11:00:00:01,bridge=vmbr1"
        ));
        assert!(!applies_live(
            q,
            &c,
            "scsi0",
            "local-lvm:vm-100-disk-0,size=8G,cache=writeback"
        ));
        assert!(applies_live(
            q,
            &c,
            "scsi1",
            "local-lvm:vm-100-disk-1,size=8G"
        ));
        assert!(!applies_live(
            q,
            &c,
            "sata1",
            "local-lvm:vm-100-disk-1,size=8G"
        ));
        let mem = conf(&[("hotplug", "network,disk,memory"), ("numa", "1")]);
        assert!(applies_live(q, &mem, "memory", "4096"));
        let agent = conf(&[("agent", "1")]);
        assert!(applies_live(
            q,
            &agent,
            "agent",
            "enabled=1,fstrim_cloned_disks=1"
        ));
        assert!(!applies_live(q, &agent, "agent", "0"));
        assert!(!deletes_live(q, &c, "cores"));
        assert!(deletes_live(q, &c, "description"));
    }

    #[test]
    fn lxc_classes() {
        let c = conf(&[("mp0", "local-lvm:subvol-200-disk-1,mp=/a")]);
        let l = GuestType::Lxc;
        assert!(applies_live(l, &c, "cores", "4"));
        assert!(applies_live(l, &c, "memory", "1024"));
        assert!(applies_live(l, &c, "mp1", "local-lvm:1,mp=/b"));
        assert!(!applies_live(
            l,
            &c,
            "mp0",
            "local-lvm:subvol-200-disk-1,mp=/c"
        ));
        assert!(!applies_live(l, &c, "features", "nesting=1"));
        assert!(!applies_live(l, &c, "tty", "4"));
        assert!(deletes_live(l, &c, "swap"));
        assert!(!deletes_live(l, &c, "features"));
    }
}
