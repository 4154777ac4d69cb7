//! `kind: VM` and `kind: TemplateVM`: QEMU guests (SPEC.md sections 8.1 and 8.2).

use super::common::{self, PowerState, check_extra, check_name_ref, check_node, check_vmid};
pub use super::passthrough::{PciDevice, UsbDevice};
use crate::Code;
use crate::kind::{
    Identity, KindDef, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceSource,
    ReferenceView, SpecContext, StorageUse,
};
use crate::manifest::Spec;
use crate::quantity::Quantity;
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// The specification of a QEMU guest (`kind: VM`) or QEMU template (`kind: TemplateVM`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmSpec {
    /// The PVE node the guest lives on; must be in the cluster's node allowlist.
    pub node: String,
    /// The PVE guest id, unique within the cluster across VMs, templates and containers.
    pub vmid: u32,
    /// Desired power state: `started` (default for VM) or `stopped` (the only value for TemplateVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PowerState>,
    /// Memory, a whole number of MiB, e.g. `8GiB` or `512MiB`.
    #[schemars(with = "crate::quantity::MemorySize")]
    pub memory: Quantity,
    /// CPU model and cores.
    pub cpu: VmCpu,
    /// Disks by slot; at least one unless the VM is cloned from a template (then none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<VmDisk>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<VmNetwork>,
    /// Machine, firmware, CD-ROM, cloud-init drive, EFI, TPM, PCI and USB passthrough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<VmHardware>,
    /// Boot and management options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<VmOptions>,
    /// Cloud-init data (user, keys, DNS, static addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_data: Option<CloudInitData>,
    /// The PVE guest name; defaults to `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_name: Option<String>,
    /// The PVE description (notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_description: Option<String>,
    /// User tags; ProxOps adds its own ownership tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Extra PVE config keys sent verbatim at create; keys ProxOps manages are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// The TemplateVM (by `metadata.name`) to full-clone this VM from; then `disks` must be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone: Option<String>,
}

/// CPU settings of a QEMU guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmCpu {
    /// The CPU model, e.g. `host` or `x86-64-v2-AES`.
    #[serde(rename = "type")]
    pub cpu_type: String,
    /// Cores per socket, at least 1.
    pub cores: u32,
    /// CPU flags (informational; not sent to PVE yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// One disk of a QEMU guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmDisk {
    /// The PVE storage the volume is allocated on.
    pub storage: String,
    /// The volume size, e.g. `32GiB`; required unless `image` seeds the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// A DiskImage (by `metadata.name`) to import into the disk at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The slot: `scsi0`-`scsi30`, `virtio0`-`virtio15`, `sata0`-`sata5` or `ide0`-`ide3`; defaults
    /// to `scsi<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The SCSI controller model (`scsihw`), e.g. `virtio-scsi-single`; the first disk that sets it wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Use an I/O thread for this disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iothread: Option<bool>,
    /// Pass discard/TRIM requests to the storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<Discard>,
    /// Present the disk as an SSD (scsi, sata and ide slots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssd: Option<bool>,
    /// The asynchronous I/O mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aio: Option<Aio>,
}

/// PVE's `discard` drive option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Discard {
    /// Discard requests are ignored (PVE's default).
    Ignore,
    /// Discard requests are passed to the storage.
    On,
}

/// PVE's `aio` drive option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Aio {
    /// Linux native AIO.
    Native,
    /// A thread pool.
    Threads,
    /// io_uring.
    IoUring,
}

/// One network interface of a QEMU guest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmNetwork {
    /// The NIC model: `virtio` (default), `e1000`, `rtl8139`, `vmxnet3`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The bridge, e.g. `vmbr0`.
    pub bridge: String,
    /// A pinned MAC address; PVE generates one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The VLAN tag, 1-4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Rate limit in MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    /// Enable the PVE firewall on this interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,
    /// The slot, `net0`-`net31`; defaults to `net<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// Hardware of a QEMU guest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmHardware {
    /// The machine type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// The firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<Bios>,
    /// The display adapter (PVE `vga`), e.g. `std`, `serial0`, `qxl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    /// CPU sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Enable NUMA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
    /// The first serial port, e.g. `socket`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial0: Option<String>,
    /// The CD-ROM drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<Cdrom>,
    /// The cloud-init drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInitDrive>,
    /// The EFI vars disk (with `bios: ovmf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi_disk: Option<EfiDisk>,
    /// The TPM state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<Tpm>,
    /// Host PCI devices passed through, each a raw device (root@pam only) or a resource mapping.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_devices: Vec<PciDevice>,
    /// Host USB devices passed through, each a raw device (root@pam only) or a resource mapping.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usb_devices: Vec<UsbDevice>,
}

/// PVE machine types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Machine {
    /// The PVE default.
    I440fx,
    /// Q35 (PCIe).
    Q35,
}

/// PVE firmware types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bios {
    /// SeaBIOS (PVE default).
    Seabios,
    /// OVMF (UEFI).
    Ovmf,
}

/// The CD-ROM drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Cdrom {
    /// An ISO (by `metadata.name`) to insert, or `none` to keep the drive empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iso: Option<String>,
    /// `cdrom` (default) or `disk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Media>,
}

/// Media type of the CD-ROM drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Media {
    /// A CD-ROM.
    Cdrom,
    /// A disk.
    Disk,
}

/// The cloud-init drive (on `ide2`; the CD-ROM then moves to `ide3`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CloudInitDrive {
    /// Attach a cloud-init drive.
    #[serde(default)]
    pub enabled: bool,
    /// The storage of the drive (needs the `images` content type); required when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// The drive size (default `4M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
}

/// The EFI vars disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EfiDisk {
    /// The storage of the EFI disk.
    pub storage: String,
    /// The size (default `4MiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// The OVMF vars template (`efitype`): `2m` or `4m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Pre-enroll the distribution and Microsoft secure boot keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<SecureBoot>,
}

/// Secure boot key enrolment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SecureBoot {
    /// Keys pre-enrolled.
    Enabled,
    /// No keys.
    Disabled,
}

/// The TPM state volume (`tpmstate0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Tpm {
    /// TPM version, `v2.0` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<TpmVersion>,
    /// The storage of the TPM state volume; defaults to the EFI disk's storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

/// TPM versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TpmVersion {
    /// TPM 1.2.
    #[serde(rename = "v1.2")]
    V1_2,
    /// TPM 2.0.
    #[serde(rename = "v2.0")]
    V2_0,
}

/// Boot and management options; a `false` or absent boolean is left to PVE.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmOptions {
    /// Start the guest when the node boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onboot: Option<bool>,
    /// Startup order and delays, e.g. `order=10,up=30`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// Protect the guest from removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<bool>,
    /// Enable the QEMU guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<bool>,
    /// Enable ACPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acpi: Option<bool>,
    /// Enable the USB tablet device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablet: Option<bool>,
    /// Hot-pluggable device classes, e.g. `[disk, network, usb]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hotplug: Vec<String>,
    /// Boot order of slots, e.g. `[scsi0, net0]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot_order: Vec<String>,
    /// Expose hardware virtualisation to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virt: Option<bool>,
    /// Hide the hypervisor from the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

/// Cloud-init data of a QEMU guest or template.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CloudInitData {
    /// The default user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_user: Option<String>,
    /// OpenSSH public key lines, or exactly `["*"]` to leave the keys to PVE.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
    /// Keys from the cluster's SOPS file: `cloud-init.ssh-keys.<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_key_refs: Vec<String>,
    /// A password from the cluster's SOPS file: `cloud-init.passwords.<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_password_ref: Option<String>,
    /// DNS servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// DNS search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
    /// Addresses per NIC.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipconfigs: Vec<IpConfig>,
}

/// The addresses of one NIC (`ipconfig<nic>`): IPv4, IPv6 or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IpConfig {
    /// The NIC index (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<u32>,
    /// An address in CIDR notation (one with a `:` is IPv6), `dhcp` (IPv4, PVE's `ip=dhcp`)
    /// or `auto` (IPv6 SLAAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// The gateway, of the family of its address (an IPv6 one is PVE's `gw6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The IPv6 configuration beside an IPv4 `ip`: an IPv6 address in CIDR notation, `dhcp`
    /// (DHCPv6) or `auto` (SLAAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip6: Option<String>,
    /// The IPv6 gateway beside an IPv4 `gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<String>,
}

/// An IP family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl IpFamily {
    /// The family of an `ip` value: an address with a `:` and `auto` (SLAAC, which only IPv6
    /// has) are IPv6; an IPv4 address and `dhcp` (PVE's `ip=dhcp`) are IPv4.
    pub fn of_ip(value: &str) -> IpFamily {
        if value.contains(':') || value == "auto" {
            IpFamily::V6
        } else {
            IpFamily::V4
        }
    }

    /// The family of a gateway address.
    pub fn of_gateway(value: &str) -> IpFamily {
        if value.contains(':') {
            IpFamily::V6
        } else {
            IpFamily::V4
        }
    }

    fn name(self) -> &'static str {
        match self {
            IpFamily::V4 => "IPv4",
            IpFamily::V6 => "IPv6",
        }
    }
}

impl IpConfig {
    /// The IPv4 and IPv6 configurations (address or `dhcp`/`auto`), each from `ip` or `ip6`.
    fn by_family(&self) -> (Option<&str>, Option<&str>) {
        let mut v4 = None;
        let mut v6 = self.ip6.as_deref();
        if let Some(ip) = self.ip.as_deref() {
            match IpFamily::of_ip(ip) {
                IpFamily::V4 => v4 = Some(ip),
                IpFamily::V6 => v6 = v6.or(Some(ip)),
            }
        }
        (v4, v6)
    }

    /// PVE's `ipconfig<nic>` value, `ip=..,gw=..,ip6=..,gw6=..` with each address under the key
    /// of its family; `None` when the entry sets no address.
    pub fn to_pve(&self) -> Option<String> {
        let (v4, v6) = self.by_family();
        let (mut gw4, mut gw6) = (None, self.gateway6.as_deref());
        if let Some(gw) = self.gateway.as_deref() {
            match IpFamily::of_gateway(gw) {
                IpFamily::V4 => gw4 = Some(gw),
                IpFamily::V6 => gw6 = gw6.or(Some(gw)),
            }
        }
        let parts: Vec<String> = [("ip", v4), ("gw", gw4), ("ip6", v6), ("gw6", gw6)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
        (v4.is_some() || v6.is_some()).then(|| parts.join(","))
    }
}

/// Config keys that ProxOps manages itself and `extra` may therefore not set.
const RESERVED_EXTRA: &[&str] = &[
    "vmid",
    "name",
    "memory",
    "cpu",
    "cores",
    "sockets",
    "numa",
    "machine",
    "bios",
    "vga",
    "cdrom",
    "efidisk0",
    "tpmstate0",
    "serial0",
    "onboot",
    "startup",
    "protection",
    "agent",
    "acpi",
    "tablet",
    "hotplug",
    "boot",
    "tags",
    "ciuser",
    "cipassword",
    "sshkeys",
    "nameserver",
    "searchdomain",
    "scsihw",
    "description",
    "template",
];
const RESERVED_EXTRA_PREFIXES: &[&str] = &[
    "scsi", "virtio", "sata", "ide", "net", "ipconfig", "hostpci", "usb",
];

pub(crate) fn slot_in(slot: &str, prefix: &str, max: u32) -> bool {
    slot.strip_prefix(prefix)
        .filter(|n| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && (n.len() == 1 || !n.starts_with('0'))
        })
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n <= max)
}

fn disk_slot_valid(slot: &str) -> bool {
    slot_in(slot, "scsi", 30)
        || slot_in(slot, "virtio", 15)
        || slot_in(slot, "sata", 5)
        || slot_in(slot, "ide", 3)
}

/// Checks of one VM or TemplateVM spec beyond its types.
fn validate(spec: &VmSpec, template: bool, cx: &SpecContext<'_>) {
    check_node(cx, &spec.node, &path!["node"]);
    check_vmid(cx, spec.vmid);
    if template && spec.state == Some(PowerState::Started) {
        cx.invalid(
            &path!["state"],
            "a TemplateVM cannot be started",
            Some("PVE refuses to start templates: remove `state` or set it to `stopped`".into()),
        );
    }
    common::check_memory(cx, &spec.memory, &path!["memory"], "memory", true);
    if spec.cpu.cpu_type.trim().is_empty() {
        cx.invalid(
            &path!["cpu", "type"],
            "`cpu.type` must not be empty",
            Some("e.g. `host`".into()),
        );
    }
    if spec.cpu.cores == 0 {
        cx.invalid(
            &path!["cpu", "cores"],
            "`cpu.cores` must be at least 1",
            None,
        );
    }
    if let Some(clone) = &spec.clone {
        if template {
            cx.invalid(
                &path!["clone"],
                "a TemplateVM cannot be cloned from another template",
                None,
            );
        }
        check_name_ref(cx, clone, &path!["clone"], "TemplateVM");
        if !spec.disks.is_empty() {
            cx.invalid(
                &path!["disks"],
                "a cloned VM must not declare `disks`",
                Some("the clone inherits the template's disks; remove `disks` or `clone`".into()),
            );
        }
    } else if spec.disks.is_empty() {
        cx.report_missing(
            &path!["disks"],
            "a VM needs at least one disk unless it sets `clone`",
        );
    }
    let cloud_init = spec
        .hardware
        .as_ref()
        .and_then(|h| h.cloud_init.as_ref())
        .is_some_and(|c| c.enabled);
    let cdrom_slot = if cloud_init { "ide3" } else { "ide2" };
    let has_cdrom = spec
        .hardware
        .as_ref()
        .and_then(|h| h.cdrom.as_ref())
        .is_some();
    let mut slots = BTreeSet::new();
    for (i, disk) in spec.disks.iter().enumerate() {
        common::check_storage_id(cx, &disk.storage, &path!["disks", i, "storage"]);
        let slot = disk.interface.clone().unwrap_or_else(|| format!("scsi{i}"));
        let slot_path = path!["disks", i, "interface"];
        if !disk_slot_valid(&slot) {
            cx.invalid(
                &slot_path,
                format!("`{slot}` is not a disk slot"),
                Some("use scsi0-scsi30, virtio0-virtio15, sata0-sata5 or ide0-ide3".into()),
            );
        } else if !slots.insert(slot.clone()) {
            cx.invalid(
                &slot_path,
                format!("disk slot `{slot}` is used twice"),
                None,
            );
        } else if (cloud_init && slot == "ide2") || (has_cdrom && slot == cdrom_slot) {
            cx.invalid(
                &slot_path,
                format!(
                    "disk slot `{slot}` is taken by the {} drive",
                    if slot == "ide2" && cloud_init {
                        "cloud-init"
                    } else {
                        "CD-ROM"
                    }
                ),
                None,
            );
        }
        match (&disk.size, &disk.image) {
            (None, None) => cx.report_missing(
                &path!["disks", i],
                "a disk needs `size` unless it sets `image`",
            ),
            (Some(_), Some(_)) => cx.invalid(
                &path!["disks", i, "size"],
                "an image-seeded disk takes its size from the image: remove `size`",
                None,
            ),
            (Some(size), None) if size.bytes() == 0 => cx.invalid(
                &path!["disks", i, "size"],
                "a disk size must be greater than zero",
                None,
            ),
            _ => {}
        }
        if let Some(image) = &disk.image {
            check_name_ref(cx, image, &path!["disks", i, "image"], "DiskImage");
        }
        if let Some(c) = &disk.controller {
            common::check_pve_enum(
                cx,
                c,
                common::PVE_SCSI_CONTROLLERS,
                "SCSI controller",
                &path!["disks", i, "controller"],
            );
        }
        if disk.ssd.is_some()
            && !(slot.starts_with("scsi") || slot.starts_with("sata") || slot.starts_with("ide"))
        {
            cx.invalid(
                &path!["disks", i, "ssd"],
                format!("`ssd` is only supported on scsi, sata and ide slots, not `{slot}`"),
                None,
            );
        }
    }
    let mut nets = BTreeSet::new();
    for (i, net) in spec.networks.iter().enumerate() {
        let slot = net.slot.clone().unwrap_or_else(|| format!("net{i}"));
        if !slot_in(&slot, "net", 31) {
            cx.invalid(
                &path!["networks", i, "slot"],
                format!("`{slot}` is not a NIC slot (net0-net31)"),
                None,
            );
        } else if !nets.insert(slot.clone()) {
            cx.invalid(
                &path!["networks", i, "slot"],
                format!("NIC slot `{slot}` is used twice"),
                None,
            );
        }
        if net.bridge.trim().is_empty() {
            cx.invalid(
                &path!["networks", i, "bridge"],
                "`bridge` must not be empty",
                None,
            );
        }
        if let Some(vlan) = net.vlan {
            common::check_vlan(cx, vlan, &path!["networks", i, "vlan"]);
        }
        if let Some(mac) = &net.mac {
            common::check_mac(cx, mac, &path!["networks", i, "mac"]);
        }
        if let Some(model) = &net.model {
            common::check_pve_enum(
                cx,
                model,
                common::PVE_NIC_MODELS,
                "NIC model",
                &path!["networks", i, "model"],
            );
        }
    }
    if let Some(hw) = &spec.hardware {
        validate_hardware(hw, cx);
    }
    if let Some(opts) = &spec.options {
        let mut seen = BTreeSet::new();
        for (i, entry) in opts.boot_order.iter().enumerate() {
            if entry.trim().is_empty() || !seen.insert(entry) {
                cx.invalid(
                    &path!["options", "boot-order", i],
                    format!("boot-order entry `{entry}` is empty or repeated"),
                    None,
                );
            }
        }
    }
    if let Some(ci) = &spec.cloud_init_data {
        validate_cloud_init(ci, cx);
    }
    for (i, tag) in spec.tags.iter().enumerate() {
        common::check_tag(cx, tag, &path!["tags", i]);
    }
    check_extra(cx, &spec.extra, RESERVED_EXTRA, RESERVED_EXTRA_PREFIXES);
}

fn validate_hardware(hw: &VmHardware, cx: &SpecContext<'_>) {
    if let Some(display) = &hw.display {
        common::check_pve_enum(
            cx,
            display,
            common::PVE_VGA_TYPES,
            "display type",
            &path!["hardware", "display"],
        );
    }
    if let Some(iso) = hw.cdrom.as_ref().and_then(|c| c.iso.as_ref())
        && iso != "none"
    {
        check_name_ref(cx, iso, &path!["hardware", "cdrom", "iso"], "ISO");
    }
    if let Some(ci) = &hw.cloud_init {
        match &ci.storage {
            Some(s) => common::check_storage_id(cx, s, &path!["hardware", "cloud-init", "storage"]),
            None if ci.enabled => cx.report_missing(
                &path!["hardware", "cloud-init", "storage"],
                "`hardware.cloud-init.storage` is required when the drive is enabled",
            ),
            None => {}
        }
    }
    if let Some(efi) = &hw.efi_disk {
        common::check_storage_id(cx, &efi.storage, &path!["hardware", "efi-disk", "storage"]);
        if let Some(t) = &efi.template
            && !matches!(t.to_ascii_lowercase().as_str(), "2m" | "4m")
        {
            cx.invalid(
                &path!["hardware", "efi-disk", "template"],
                format!("`{t}` is not an EFI vars type: use `2m` or `4m`"),
                None,
            );
        }
    }
    if let Some(tpm) = &hw.tpm {
        match &tpm.storage {
            Some(s) => common::check_storage_id(cx, s, &path!["hardware", "tpm", "storage"]),
            None if hw.efi_disk.is_none() => cx.report_missing(
                &path!["hardware", "tpm", "storage"],
                "`hardware.tpm.storage` is required when there is no `efi-disk` to take it from",
            ),
            None => {}
        }
    }
    super::passthrough::validate(&hw.pci_devices, &hw.usb_devices, cx);
}

fn validate_cloud_init(ci: &CloudInitData, cx: &SpecContext<'_>) {
    let base = ["cloud-init-data"];
    let at = |rest: &[PathSeg]| -> Vec<PathSeg> {
        base.iter()
            .map(|s| PathSeg::from(*s))
            .chain(rest.iter().cloned())
            .collect()
    };
    let star = ci.ssh_keys.iter().any(|k| k.trim() == "*");
    if star && ci.ssh_keys.len() > 1 {
        cx.invalid(
            &at(&path!["ssh-keys"]),
            "`*` leaves the keys to PVE and cannot be combined with other keys",
            None,
        );
    }
    if !ci.ssh_keys.is_empty() && !ci.ssh_key_refs.is_empty() {
        cx.invalid(
            &at(&path!["ssh-key-refs"]),
            "set either `ssh-keys` or `ssh-key-refs`, not both",
            None,
        );
    }
    for (i, key) in ci.ssh_keys.iter().enumerate() {
        let k = key.trim();
        if k != "*" && (k.split_whitespace().count() < 2 || k.contains('\n')) {
            cx.invalid(
                &at(&path!["ssh-keys", i]),
                "not an OpenSSH public key line (`<type> <base64> [comment]`)",
                None,
            );
        } else if k != "*"
            && let Err(why) = common::check_ssh_public_key(k)
        {
            cx.report(
                Code::SshKey,
                &at(&path!["ssh-keys", i]),
                format!("PVE will refuse this SSH public key: {why}"),
                "not a readable public key",
                Some(
                    "PVE checks each key with `ssh-keygen -l` (pve-common `PVE::Tools::validate_ssh_public_keys`) and refuses the create; paste the whole line of the `.pub` file"
                        .into(),
                ),
            );
        }
    }
    for (i, r) in ci.ssh_key_refs.iter().enumerate() {
        common::check_secret_ref(
            cx,
            r,
            "cloud-init.ssh-keys.",
            &at(&path!["ssh-key-refs", i]),
        );
    }
    if let Some(r) = &ci.ci_password_ref {
        common::check_secret_ref(
            cx,
            r,
            "cloud-init.passwords.",
            &at(&path!["ci-password-ref"]),
        );
    }
    let mut nics = BTreeSet::new();
    for (i, ipc) in ci.ipconfigs.iter().enumerate() {
        let nic = ipc.nic.unwrap_or(0);
        if nic > 31 {
            cx.invalid(
                &at(&path!["ipconfigs", i, "nic"]),
                format!("NIC index {nic} is out of range (0-31)"),
                None,
            );
        } else if !nics.insert(nic) {
            cx.invalid(
                &at(&path!["ipconfigs", i, "nic"]),
                format!("ipconfig for NIC {nic} is declared twice"),
                None,
            );
        }
        check_ipconfig(cx, ipc, nic, &at(&path!["ipconfigs", i]));
    }
}

/// One `ipconfigs[]` entry: each value well-formed and of the family its key and the NIC's
/// addresses allow (`ipconfigs[]` at `base`).
fn check_ipconfig(cx: &SpecContext<'_>, ipc: &IpConfig, nic: u32, base: &[PathSeg]) {
    let here = |key: &str| cx.key_path(base, key);
    let family = |path: &[PathSeg], message: String, help: &str| {
        cx.report(
            Code::IpFamily,
            path,
            message,
            "wrong IP family",
            Some(help.to_owned()),
        );
    };
    let config_ok = |v: &str| common::is_cidr(v) || matches!(v, "dhcp" | "auto");
    if let Some(ip) = &ipc.ip
        && !config_ok(ip)
    {
        cx.invalid(
            &here("ip"),
            format!("`{ip}` is not an address in CIDR notation"),
            Some(
                "e.g. `192.168.1.10/24`, `2001:db8::10/64`, `dhcp` (IPv4) or `auto` (IPv6)".into(),
            ),
        );
    }
    if let Some(ip6) = &ipc.ip6 {
        if !config_ok(ip6) {
            cx.invalid(
                &here("ip6"),
                format!("`{ip6}` is not an address in CIDR notation"),
                Some("e.g. `2001:db8::10/64`, `dhcp` (DHCPv6) or `auto` (SLAAC)".into()),
            );
        } else if IpFamily::of_ip(ip6) == IpFamily::V4 && ip6 != "dhcp" {
            family(
                &here("ip6"),
                format!("`ip6` is IPv6, `{ip6}` is IPv4"),
                "put an IPv4 address in `ip`",
            );
        }
        if ipc
            .ip
            .as_deref()
            .is_some_and(|ip| IpFamily::of_ip(ip) == IpFamily::V6)
        {
            family(
                &here("ip6"),
                format!("NIC {nic} has two IPv6 configurations, `ip` and `ip6`"),
                "keep one: `ip6` is for an IPv6 configuration beside an IPv4 `ip`",
            );
        }
    }
    if ipc.ip.is_none() && ipc.ip6.is_none() {
        for key in ["gateway", "gateway6"] {
            if ipc_value(ipc, key).is_some() {
                cx.invalid(&here(key), "a gateway needs a static `ip`", None);
            }
        }
        return;
    }
    let (v4, v6) = ipc.by_family();
    for key in ["gateway", "gateway6"] {
        let Some(gw) = ipc_value(ipc, key) else {
            continue;
        };
        if gw.parse::<std::net::IpAddr>().is_err() {
            cx.invalid(&here(key), format!("`{gw}` is not an IP address"), None);
            continue;
        }
        let of = IpFamily::of_gateway(gw);
        // qemu-server `PVE/QemuServer/Network.pm` `parse_ipconfig` drops the NIC's whole
        // ipconfig (warning only in the task log) when a gateway comes with `dhcp`/`auto`.
        let dynamic = match of {
            IpFamily::V4 => v4.filter(|v| !common::is_cidr(v)),
            IpFamily::V6 => v6.filter(|v| !common::is_cidr(v)),
        };
        if let Some(how) = dynamic {
            cx.invalid(
                &here(key),
                format!("a gateway beside `{how}` makes PVE ignore NIC {nic}'s whole cloud-init network config"),
                Some(format!("drop the gateway ({how} supplies one), or give the NIC a static address")),
            );
            continue;
        }
        if key == "gateway6" && of == IpFamily::V4 {
            family(
                &here(key),
                format!("`gateway6` is IPv6, `{gw}` is IPv4"),
                "put an IPv4 gateway in `gateway`",
            );
        } else if (of == IpFamily::V4 && v4.is_none()) || (of == IpFamily::V6 && v6.is_none()) {
            family(
                &here(key),
                format!(
                    "gateway `{gw}` is {}, but NIC {nic} has no {} address",
                    of.name(),
                    of.name()
                ),
                "give the NIC an address of the gateway's family (`ip` or `ip6`)",
            );
        } else if key == "gateway" && of == IpFamily::V6 && ipc.gateway6.is_some() {
            family(
                &here(key),
                format!("NIC {nic} has two IPv6 gateways, `gateway` and `gateway6`"),
                "keep one",
            );
        }
    }
}

fn ipc_value<'a>(ipc: &'a IpConfig, key: &str) -> Option<&'a str> {
    match key {
        "gateway" => ipc.gateway.as_deref(),
        _ => ipc.gateway6.as_deref(),
    }
}

/// The `VM` and `TemplateVM` kind definitions.
pub struct VmKind {
    template: bool,
}

impl VmKind {
    /// `kind: VM`.
    pub const VM: VmKind = VmKind { template: false };
    /// `kind: TemplateVM`.
    pub const TEMPLATE: VmKind = VmKind { template: true };
}

const VM_REFS: &[ReferenceField] = &[
    ReferenceField {
        field: "hardware.cdrom.iso",
        target: "ISO",
    },
    ReferenceField {
        field: "disks[].image",
        target: "DiskImage",
    },
    ReferenceField {
        field: "clone",
        target: "TemplateVM",
    },
];
const TEMPLATE_REFS: &[ReferenceField] = &[
    ReferenceField {
        field: "hardware.cdrom.iso",
        target: "ISO",
    },
    ReferenceField {
        field: "disks[].image",
        target: "DiskImage",
    },
];

impl VmKind {
    /// Each structured reference with a function giving its path under `spec` (built only when
    /// asked: ordering needs no paths).
    fn each_reference<'s>(
        &self,
        spec: &'s Spec,
        mut visit: impl FnMut(ReferenceView<'s>, &dyn Fn() -> Vec<PathSeg>),
    ) {
        let Spec::Vm(s) = spec else { return };
        let view = |field, kind, name: &'s str, same_node| ReferenceView {
            field,
            target_kind: Cow::Borrowed(kind),
            target_name: Cow::Borrowed(name),
            same_node,
            source: ReferenceSource::Structured,
        };
        if let Some(iso) = s
            .hardware
            .as_ref()
            .and_then(|h| h.cdrom.as_ref())
            .and_then(|c| c.iso.as_ref())
            && iso != "none"
        {
            visit(view("hardware.cdrom.iso", "ISO", iso, true), &|| {
                path!["hardware", "cdrom", "iso"].to_vec()
            });
        }
        for (i, d) in s.disks.iter().enumerate() {
            if let Some(image) = &d.image {
                visit(view("disks[].image", "DiskImage", image, true), &|| {
                    path!["disks", i, "image"].to_vec()
                });
            }
        }
        if !self.template
            && let Some(clone) = &s.clone
        {
            visit(view("clone", "TemplateVM", clone, false), &|| {
                path!["clone"].to_vec()
            });
        }
    }
}

impl KindDef for VmKind {
    fn name(&self) -> &'static str {
        if self.template { "TemplateVM" } else { "VM" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.template {
            &["TVM", "TEMPLATE"]
        } else {
            &[]
        }
    }

    fn root(&self) -> &'static str {
        if self.template { "templatevm" } else { "vm" }
    }

    fn identity(&self) -> Identity {
        Identity::Guest {
            guest: crate::kind::GuestType::Qemu,
            template: self.template,
        }
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired, Plane::Observed]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        if self.template {
            TEMPLATE_REFS
        } else {
            VM_REFS
        }
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec: VmSpec = cx.decode()?;
        validate(&spec, self.template, cx);
        Some(Spec::Vm(spec))
    }

    fn placement(&self, spec: &Spec) -> Placement {
        match spec {
            Spec::Vm(s) => Placement {
                nodes: vec![(s.node.clone(), path!["node"].to_vec())],
                vmid: Some(s.vmid),
            },
            _ => Placement::default(),
        }
    }

    fn storages(&self, spec: &Spec) -> Vec<StorageUse> {
        let Spec::Vm(s) = spec else { return Vec::new() };
        let images = |storage: &str| StorageUse {
            storage: storage.to_owned(),
            content: "images",
        };
        let mut uses: Vec<StorageUse> = s.disks.iter().map(|d| images(&d.storage)).collect();
        if let Some(h) = &s.hardware {
            if let Some(storage) = h
                .cloud_init
                .as_ref()
                .filter(|c| c.enabled)
                .and_then(|c| c.storage.as_deref())
            {
                uses.push(images(storage));
            }
            if let Some(efi) = &h.efi_disk {
                uses.push(images(&efi.storage));
            }
            if let Some(storage) = h.tpm.as_ref().and_then(|t| t.storage.as_deref()) {
                uses.push(images(storage));
            }
        }
        uses.sort();
        uses.dedup();
        uses
    }

    fn placement_view<'s>(&self, spec: &'s Spec) -> PlacementView<'s> {
        match spec {
            Spec::Vm(s) => PlacementView {
                nodes: vec![Cow::Borrowed(s.node.as_str())],
                vmid: Some(s.vmid),
            },
            _ => PlacementView::default(),
        }
    }

    fn references(&self, spec: &Spec) -> Vec<Reference> {
        let mut refs = Vec::new();
        self.each_reference(spec, |v, path| {
            refs.push(Reference::structured(
                v.field,
                &v.target_kind,
                &v.target_name,
                &path(),
                v.same_node,
            ));
        });
        refs
    }

    fn reference_views<'s>(&self, spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        let mut views = Vec::new();
        self.each_reference(spec, |v, _| views.push(v));
        views
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<VmSpec>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::passthrough::is_bdf;
    use super::*;

    fn ipc(ip: Option<&str>, gw: Option<&str>, ip6: Option<&str>, gw6: Option<&str>) -> IpConfig {
        IpConfig {
            nic: None,
            ip: ip.map(str::to_owned),
            gateway: gw.map(str::to_owned),
            ip6: ip6.map(str::to_owned),
            gateway6: gw6.map(str::to_owned),
        }
    }

    #[test]
    fn each_address_goes_under_the_key_of_its_family() {
        let pve = |c: IpConfig| c.to_pve();
        let v4 = ipc(Some("10.0.0.5/24"), Some("10.0.0.1"), None, None);
        assert_eq!(pve(v4).as_deref(), Some("ip=10.0.0.5/24,gw=10.0.0.1"));
        let v6 = ipc(Some("2001:db8::5/64"), Some("2001:db8::1"), None, None);
        assert_eq!(
            pve(v6).as_deref(),
            Some("ip6=2001:db8::5/64,gw6=2001:db8::1")
        );
        let both = ipc(
            Some("10.0.0.5/24"),
            Some("10.0.0.1"),
            Some("2001:db8::5/64"),
            Some("2001:db8::1"),
        );
        assert_eq!(
            pve(both).as_deref(),
            Some("ip=10.0.0.5/24,gw=10.0.0.1,ip6=2001:db8::5/64,gw6=2001:db8::1")
        );
        assert_eq!(
            pve(ipc(Some("dhcp"), None, None, None)).as_deref(),
            Some("ip=dhcp")
        );
        assert_eq!(
            pve(ipc(Some("auto"), None, None, None)).as_deref(),
            Some("ip6=auto")
        );
        assert_eq!(
            pve(ipc(None, None, Some("dhcp"), None)).as_deref(),
            Some("ip6=dhcp")
        );
        assert_eq!(
            pve(ipc(Some("dhcp"), None, Some("auto"), None)).as_deref(),
            Some("ip=dhcp,ip6=auto")
        );
        assert_eq!(pve(ipc(None, None, None, None)), None);
    }

    #[test]
    fn slots_and_addresses() {
        assert!(disk_slot_valid("scsi0") && disk_slot_valid("scsi30") && disk_slot_valid("ide3"));
        assert!(
            !disk_slot_valid("scsi31")
                && !disk_slot_valid("nvme0")
                && !disk_slot_valid("scsi01")
                && !disk_slot_valid("scsi")
        );
        assert!(is_bdf("0000:17:00") && is_bdf("01:00.0") && is_bdf("0000:73:00.7"));
        assert!(!is_bdf("17:00.8") && !is_bdf("0000:17") && !is_bdf("zz:00"));
    }
}
