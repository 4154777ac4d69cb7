//! The spec types of `kind: VM` and `kind: TemplateVM` (SPEC.md sections 8.1 and 8.2): below
//! [`Spec`](crate::Spec), which holds them, and the kind definition in `vm`, which decodes them.

use super::basics::PowerState;
use super::passthrough::{PciDevice, UsbDevice};
use super::vm_devices::{
    Audio, Balloon, Cache, CiCustom, CiType, Clipboard, DiskLimits, Hugepages, Machine, MsCert,
    NumaNode, QemuOsType, Rng, Viommu,
};
use crate::pve_config::PveConfig;
use crate::quantity::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The specification of a QEMU guest (`kind: VM`) or QEMU template (`kind: TemplateVM`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
// Exactly one of `node` (pinned) and `nodes` (placed), as the loader checks.
#[schemars(extend("oneOf" = [{"required": ["node"]}, {"required": ["nodes"]}]))]
pub struct VmSpec {
    /// The PVE node the guest lives on (pinned); must be in the cluster's node allowlist.
    /// Exactly one of `node` and `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The nodes the guest may run on (placed): created on the one with room for it, left where
    /// it is while it is on one of them (moved by HA or by hand), migrated back when it is
    /// not. Each must be in the cluster's node allowlist. Not on templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The PVE guest id, unique within the cluster across VMs, templates and containers.
    pub vmid: u32,
    /// Desired power state: `started` (default for VM) or `stopped` (the only value for TemplateVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PowerState>,
    /// An HA resource for the guest (`/cluster/ha/resources`): its HA state decides its power
    /// (then no `state`). Removing `ha` removes the HA resource. Not on templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<super::placement::HaSpec>,
    /// The resource pool it is a member of (a `Pool` the repository may declare: created
    /// first). Set when the guest is created; a guest found elsewhere is moved into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Snapshot-guarded disruptive updates: a PVE snapshot before an update that restarts the
    /// VM or changes what it boots with, a check after it, a rollback when either fails. Not
    /// on templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<super::update_policy::UpdatePolicy>,
    /// Memory, a whole number of MiB, e.g. `8GiB` or `512MiB`.
    #[schemars(with = "crate::quantity::MemorySize")]
    pub memory: Quantity,
    /// Memory ballooning (PVE `balloon`): the minimum the balloon may shrink the VM to, or
    /// `off` to remove the balloon device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balloon: Option<Balloon>,
    /// The guest OS type PVE tunes the VM for (PVE `ostype`), e.g. `l26` or `win11`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ostype: Option<QemuOsType>,
    /// CPU model and cores.
    pub cpu: VmCpu,
    /// Disks by slot; at least one unless the VM is cloned from a template (then none), passes
    /// a PCI device through (a controller it boots from), or the manifest writes `disks: []`
    /// (a VM without disks, as PVE allows).
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
    /// Any other key of PVE's VM config, checked against PVE's schema and owned like a typed
    /// field (written, drift restored, deleted when removed). Keys a typed field manages are
    /// refused, naming the field; so are keys PVE's API cannot set (`args`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "crate::pve_config::QemuPveConfig")]
    pub pve_config: PveConfig,
    /// The guest's own firewall: options and rules (`/nodes/{node}/<type>/{vmid}/firewall`).
    /// Rules ProxOps wrote carry its mark in their `comment`; rules added by hand stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<super::firewall_spec::GuestFirewall>,
    /// Retired: `extra:` is refused with `proxops::extra_retired` (move its keys to
    /// `pve-config` or the typed field); read only to say so.
    #[serde(default, skip_serializing)]
    #[schemars(skip)]
    pub extra: PveConfig,
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
    /// VM-specific CPU flags, each `+flag` or `-flag` from PVE's list (`+aes`, `-pcid`,
    /// `+pdpe1gb`, ...): PVE `cpu` `flags=`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// CPU weight against other guests (PVE `cpuunits`, 1-262144).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
    /// CPU time limit in host CPUs (PVE `cpulimit`, 0-128; 0 is no limit), e.g. `1.5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// vCPUs plugged at start, at most sockets × cores (PVE `vcpus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    /// Host CPUs the VM's threads may run on (PVE `affinity`), e.g. `0-7` or `0,2,4-6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// Physical address bits reported to the guest: `8`-`64` or `host` (PVE `cpu`
    /// `phys-bits=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_bits: Option<String>,
    /// The Hyper-V vendor id, 1-12 letters or digits (PVE `cpu` `hv-vendor-id=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hv_vendor_id: Option<String>,
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
    /// The existing volume the slot holds, `STORAGE:NAME` (`local-lvm:vm-101-disk-0`; what
    /// `proxops adopt` writes): never allocated or re-created. Its storage must be `storage`. A
    /// slot found holding another volume is an anomaly, never swapped; the volume grows when
    /// `size` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
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
    /// The cache mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Cache>,
    /// Include the disk in backups (PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<bool>,
    /// Include the disk in storage replication (PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicate: Option<bool>,
    /// Attach the disk read-only (PVE `ro`; scsi and virtio slots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The serial number the guest sees, up to 20 bytes (PVE `serial`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// I/O limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<DiskLimits>,
    /// The volume's format on a file storage: `raw`, `qcow2` or `vmdk` (PVE `format`; PVE's
    /// default is the storage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DiskFormat>,
}

/// A volume format (PVE's drive `format`, the ones PVE allocates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DiskFormat {
    /// Raw.
    Raw,
    /// QEMU copy-on-write.
    Qcow2,
    /// VMware.
    Vmdk,
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
    /// The MTU, 1-65520 (`1`: the bridge's); virtio NICs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Packet queues, 0-64 (multiqueue virtio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// Keep the link down, as if the cable were unplugged (PVE `link_down`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_down: Option<bool>,
}

/// Hardware of a QEMU guest.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VmHardware {
    /// The machine type: `i440fx`, `q35`, a versioned type (`pc-q35-8.1`, `pc-i440fx-9.0`)
    /// or `virt` (aarch64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// A virtual IOMMU (PVE `machine` `viommu=`; `intel` needs a q35 machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viommu: Option<Viommu>,
    /// The firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<Bios>,
    /// The display adapter (PVE `vga`), e.g. `std`, `serial0`, `qxl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    /// The display adapter's memory, 4-512 MiB (PVE `vga` `memory=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::quantity::MemorySize>")]
    pub display_memory: Option<Quantity>,
    /// The display's clipboard (PVE `vga` `clipboard=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_clipboard: Option<Clipboard>,
    /// The SCSI controller model (PVE `scsihw`), e.g. `virtio-scsi-single`; `disks[].controller`
    /// says the same and must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scsi_controller: Option<String>,
    /// CPU sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Enable NUMA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
    /// Virtual NUMA nodes (PVE `numa0`-`numa7`, by position); needs `numa: true`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub numa_nodes: Vec<NumaNode>,
    /// Hugepages for the VM's memory: `any`, `2MiB` or `1GiB` (PVE `hugepages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
    /// Keep the hugepages allocated after the VM stops (PVE `keephugepages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_hugepages: Option<bool>,
    /// The first serial port: `socket`, or a host device `/dev/...` (root@pam only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial0: Option<String>,
    /// The second serial port, as `serial0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial1: Option<String>,
    /// The third serial port, as `serial0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial2: Option<String>,
    /// The fourth serial port, as `serial0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial3: Option<String>,
    /// The audio device (PVE `audio0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<Audio>,
    /// A VirtIO random number generator (PVE `rng0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<Rng>,
    /// The CD-ROM drive on `ide2` (`ide3` with a cloud-init drive there), unless `slot` says
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom: Option<Cdrom>,
    /// Further CD-ROM drives, each on the `slot` it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cdroms: Vec<Cdrom>,
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

/// PVE firmware types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bios {
    /// SeaBIOS (PVE default).
    Seabios,
    /// OVMF (UEFI).
    Ovmf,
}

/// A CD-ROM drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Cdrom {
    /// The slot, a free `ide`, `sata` or `scsi` slot; `hardware.cdrom` defaults to `ide2`
    /// (`ide3` beside a cloud-init drive on `ide2`), each of `hardware.cdroms` must name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// An ISO (by `metadata.name`) to insert, or `none` to keep the drive empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iso: Option<String>,
    /// An ISO volume ProxOps does not manage, e.g. `local:iso/virtio-win.iso` (instead of
    /// `iso`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
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
    /// The slot of the drive (default `ide2`), an `ide`, `sata` or `scsi` slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
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
    /// Which Microsoft UEFI certificates are enrolled (PVE `ms-cert`): `2011`, `2023`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms_cert: Option<MsCert>,
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
    /// Trim cloned disks through the agent after a move or clone (PVE `agent`
    /// `fstrim_cloned_disks=`); needs `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_fstrim_cloned_disks: Option<bool>,
    /// Freeze the guest's filesystems for backups (PVE `agent` `freeze-fs-on-backup=`, PVE's
    /// default: yes); needs `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_freeze_fs: Option<bool>,
    /// The agent's channel: `virtio` (PVE's default) or `isa` (PVE `agent` `type=`); needs
    /// `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<AgentType>,
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
    /// Hide the hypervisor from the guest (PVE `cpu` `hidden=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
    /// Run the real-time clock in local time (PVE `localtime`; Windows guests want it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub localtime: Option<bool>,
    /// A hook script snippet run at the guest's lifecycle events, e.g.
    /// `local:snippets/hook.pl` (PVE `hookscript`; root@pam only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hookscript: Option<String>,
}

/// The guest agent's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentType {
    /// VirtIO serial.
    Virtio,
    /// ISA serial.
    Isa,
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
    /// The data source format (PVE `citype`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_type: Option<CiType>,
    /// Upgrade the guest's packages on first boot (PVE `ciupgrade`; PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_upgrade: Option<bool>,
    /// Snippet volumes replacing parts of the generated cloud-init data (PVE `cicustom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_custom: Option<CiCustom>,
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
#[non_exhaustive]
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

    pub(crate) fn name(self) -> &'static str {
        match self {
            IpFamily::V4 => "IPv4",
            IpFamily::V6 => "IPv6",
        }
    }
}

impl IpConfig {
    /// The IPv4 and IPv6 configurations (address or `dhcp`/`auto`), each from `ip` or `ip6`.
    pub(crate) fn by_family(&self) -> (Option<&str>, Option<&str>) {
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
