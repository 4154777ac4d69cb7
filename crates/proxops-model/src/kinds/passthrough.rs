//! Host devices passed through to a QEMU guest: PCI (`hostpciN`) and USB (`usbN`), each either
//! a raw host device or a cluster resource mapping (`mapping:`, PVE's Datacenter > Resource
//! Mappings). PVE lets only `root@pam` itself set a raw device, never an API token; a mapping
//! needs `Mapping.Use` on `/mapping/pci/<id>` (or `/mapping/usb/<id>`) instead (qemu-server
//! `src/PVE/API2/Qemu.pm` `check_hostpci_perm`, `check_usb_perm`).

use super::basics::slot_in;
use crate::kind::context::SpecContext;
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One host PCI device passed through: `device` or `mapping`, exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PciDevice {
    /// The slot, `hostpci0`-`hostpci15`.
    pub slot: String,
    /// The host device address, `[domain:]bus:device[.function]`, e.g. `0000:17:00` or
    /// `01:00.0`. Only root@pam may set a raw device (an API token never can): use `mapping`
    /// to apply with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// A PCI resource mapping id (`hostpciN: mapping=<id>`), e.g. `hba`: the mapping must exist
    /// on the guest's node when it starts, and applying needs `Mapping.Use` on
    /// `/mapping/pci/<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<String>,
    /// Attach as PCI Express (needs a q35 machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,
    /// Make it the VM's primary GPU (PVE `x-vga`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_vga: Option<bool>,
    /// Map the device's ROM into the guest (PVE `rombar`; PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rombar: Option<bool>,
    /// A ROM file under `/usr/share/kvm/` on the node, e.g. `vbios.bin` (PVE `romfile`; only
    /// root@pam may set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub romfile: Option<String>,
    /// A mediated device type of the host device, e.g. `nvidia-63` (PVE `mdev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdev: Option<String>,
    /// Pass an Intel integrated GPU in legacy mode (PVE `legacy-igd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_igd: Option<bool>,
    /// The vendor id the guest sees, hex such as `0x8086` (PVE `vendor-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<String>,
    /// The device id the guest sees (PVE `device-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// The sub-vendor id the guest sees (PVE `sub-vendor-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_vendor_id: Option<String>,
    /// The sub-device id the guest sees (PVE `sub-device-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_device_id: Option<String>,
}

impl PciDevice {
    /// The optional sub-keys in PVE's names, as set (booleans as `0`/`1`).
    pub fn options(&self) -> Vec<(&'static str, String)> {
        let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
        let mut out = Vec::new();
        for (k, v) in [
            ("pcie", self.pcie),
            ("x-vga", self.x_vga),
            ("rombar", self.rombar),
            ("legacy-igd", self.legacy_igd),
        ] {
            if let Some(b) = v {
                out.push((k, flag(b)));
            }
        }
        for (k, v) in [
            ("romfile", &self.romfile),
            ("mdev", &self.mdev),
            ("vendor-id", &self.vendor_id),
            ("device-id", &self.device_id),
            ("sub-vendor-id", &self.sub_vendor_id),
            ("sub-device-id", &self.sub_device_id),
        ] {
            if let Some(v) = v {
                out.push((k, v.clone()));
            }
        }
        out
    }
}

/// One host USB device passed through: `host` or `mapping`, exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct UsbDevice {
    /// The slot, `usb0`-`usb13` (above `usb4` PVE needs machine version 7.1 and a modern
    /// guest OS).
    pub slot: String,
    /// A host device: `vendor:product` in hex (`0951:1666`), a port `bus-port[.port]`
    /// (`1-2.3`), or `spice` for a SPICE redirection. Only root@pam may set a raw device
    /// (`spice` excepted): use `mapping` to apply with an API token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A USB resource mapping id (`usbN: mapping=<id>`): applying needs `Mapping.Use` on
    /// `/mapping/usb/<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<String>,
    /// Attach to a USB 3 controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb3: Option<bool>,
}

/// Whether a PCI address is `[domain:]bus:device[.function]` (lowercase hex).
pub(crate) fn is_bdf(device: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let (addr, func) = match device.split_once('.') {
        Some((a, f)) => (a, Some(f)),
        None => (device, None),
    };
    if func.is_some_and(|f| !(f.len() == 1 && matches!(f.as_bytes()[0], b'0'..=b'7'))) {
        return false;
    }
    let parts: Vec<&str> = addr.split(':').collect();
    match parts.as_slice() {
        [domain, bus, dev] => hex(domain, 4) && hex(bus, 2) && hex(dev, 2),
        [bus, dev] => hex(bus, 2) && hex(dev, 2),
        _ => false,
    }
}

/// A PCI id override: `0x` and four hex digits (qemu-server `PCI.pm` `$hostpci_fmt`
/// `vendor-id` and friends: `^0x[0-9a-fA-F]{4}$`).
fn is_hex_id(v: &str) -> bool {
    v.strip_prefix("0x")
        .is_some_and(|h| h.len() == 4 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// pve-common `PVE::JSONSchema` `pve-configid` (`$CONFIGID_RE`): a letter, then letters,
/// digits, `-` or `_`, two characters at least. Mapping ids have this format.
pub fn is_mapping_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && id.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// qemu-server `src/PVE/QemuServer/USB.pm` `$USB_ID_RE` / `$USB_PATH_RE`, or `spice`.
fn is_usb_host(host: &str) -> bool {
    let hex4 = |s: &str| {
        let s = s.strip_prefix("0x").unwrap_or(s);
        s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if host.eq_ignore_ascii_case("spice") {
        return true;
    }
    if let Some((vendor, product)) = host.split_once(':') {
        return hex4(vendor) && hex4(product);
    }
    match host.split_once('-') {
        Some((bus, ports)) => digits(bus) && ports.split('.').all(digits),
        None => false,
    }
}

fn at(list: &str, i: usize, field: &str) -> Vec<PathSeg> {
    path!["hardware", list, i, field].to_vec()
}

fn check_mapping(cx: &SpecContext<'_>, list: &str, i: usize, id: &str) {
    if !is_mapping_id(id) {
        cx.invalid(
            &at(list, i, "mapping"),
            format!("`{id}` is not a mapping id"),
            Some("a letter, then letters, digits, `-` or `_` (PVE's `pve-configid`)".into()),
        );
    }
}

/// Exactly one of the raw device and the mapping.
fn check_one_source(cx: &SpecContext<'_>, list: &str, i: usize, raw: (&str, bool), mapping: bool) {
    let (field, has_raw) = raw;
    if has_raw && mapping {
        cx.invalid(
            &at(list, i, "mapping"),
            format!("`{field}` and `mapping` exclude each other: PVE refuses a device with both"),
            Some(format!(
                "keep `mapping` (any API token with Mapping.Use may apply it) or `{field}` (root@pam only)"
            )),
        );
    } else if !has_raw && !mapping {
        cx.report_missing(
            &path!["hardware", list, i],
            format!("a passed-through device needs `{field}` or `mapping`"),
        );
    }
}

/// Checks `hardware.pci-devices` and `hardware.usb-devices`.
pub(crate) fn validate(pci: &[PciDevice], usb: &[UsbDevice], cx: &SpecContext<'_>) {
    let mut slots = BTreeSet::new();
    for (i, dev) in pci.iter().enumerate() {
        if !slot_in(&dev.slot, "hostpci", 15) {
            cx.invalid(
                &at("pci-devices", i, "slot"),
                format!("`{}` is not a PCI slot (hostpci0-hostpci15)", dev.slot),
                None,
            );
        } else if !slots.insert(dev.slot.clone()) {
            cx.invalid(
                &at("pci-devices", i, "slot"),
                format!("PCI slot `{}` is used twice", dev.slot),
                None,
            );
        }
        check_one_source(
            cx,
            "pci-devices",
            i,
            ("device", dev.device.is_some()),
            dev.mapping.is_some(),
        );
        if let Some(device) = &dev.device
            && !is_bdf(&device.trim().to_ascii_lowercase())
        {
            cx.invalid(
                &at("pci-devices", i, "device"),
                format!("`{device}` is not a PCI address"),
                Some(
                    "write `[domain:]bus:device[.function]`, e.g. `0000:17:00` or `01:00.0`".into(),
                ),
            );
        }
        if let Some(id) = &dev.mapping {
            check_mapping(cx, "pci-devices", i, id);
        }
        for (field, value) in [
            ("vendor-id", &dev.vendor_id),
            ("device-id", &dev.device_id),
            ("sub-vendor-id", &dev.sub_vendor_id),
            ("sub-device-id", &dev.sub_device_id),
        ] {
            if let Some(v) = value
                && !is_hex_id(v)
            {
                cx.invalid(
                    &at("pci-devices", i, field),
                    format!("`{v}` is not a PCI id"),
                    Some("`0x` and four hex digits, e.g. `0x10de`".into()),
                );
            }
        }
        if let Some(rom) = &dev.romfile
            && (rom.trim().is_empty() || rom.contains("..") || rom.contains(','))
        {
            cx.invalid(
                &at("pci-devices", i, "romfile"),
                format!("`{rom}` is not a ROM file name"),
                Some("a file name under /usr/share/kvm/ on the node, e.g. `vbios.bin`".into()),
            );
        }
        if let Some(m) = &dev.mdev
            && (m.trim().is_empty() || m.contains(','))
        {
            cx.invalid(
                &at("pci-devices", i, "mdev"),
                format!("`{m}` is not a mediated device type"),
                None,
            );
        }
    }
    let mut slots = BTreeSet::new();
    for (i, dev) in usb.iter().enumerate() {
        if !slot_in(&dev.slot, "usb", 13) {
            cx.invalid(
                &at("usb-devices", i, "slot"),
                format!("`{}` is not a USB slot (usb0-usb13)", dev.slot),
                None,
            );
        } else if !slots.insert(dev.slot.clone()) {
            cx.invalid(
                &at("usb-devices", i, "slot"),
                format!("USB slot `{}` is used twice", dev.slot),
                None,
            );
        }
        check_one_source(
            cx,
            "usb-devices",
            i,
            ("host", dev.host.is_some()),
            dev.mapping.is_some(),
        );
        if let Some(host) = &dev.host
            && !is_usb_host(host.trim())
        {
            cx.invalid(
                &at("usb-devices", i, "host"),
                format!("`{host}` is not a USB device"),
                Some(
                    "write `vendor:product` (`0951:1666`), a port `bus-port` (`1-2.3`) or `spice`"
                        .into(),
                ),
            );
        }
        if let Some(id) = &dev.mapping {
            check_mapping(cx, "usb-devices", i, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_ids_follow_pve_configid() {
        for ok in ["hba", "gpu-0", "a_b", "HBA2"] {
            assert!(is_mapping_id(ok), "{ok}");
        }
        for bad in ["", "a", "0hba", "-x", "h ba", "hba.1", "hbä"] {
            assert!(!is_mapping_id(bad), "{bad}");
        }
    }

    #[test]
    fn usb_hosts_follow_qemu_server() {
        for ok in [
            "0951:1666",
            "0x0951:0x1666",
            "1-2",
            "1-2.3.4",
            "spice",
            "SPICE",
        ] {
            assert!(is_usb_host(ok), "{ok}");
        }
        for bad in ["", "0951", "951:1666", "1-", "-2", "a-b", "1-2..3"] {
            assert!(!is_usb_host(bad), "{bad}");
        }
    }
}
