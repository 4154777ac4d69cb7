//! The spec types of `kind: LXC` and `kind: TemplateCT` (SPEC.md sections 8.3 and 8.4): below
//! [`Spec`](crate::Spec), which holds them, and the kind definition in `lxc`, which decodes them.

use super::basics::PowerState;
use crate::pve_config::PveConfig;
use crate::quantity::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The specification of a container (`kind: LXC`) or container template (`kind: TemplateCT`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
// Exactly one of `node` (pinned) and `nodes` (placed), as the loader checks.
#[schemars(extend("oneOf" = [{"required": ["node"]}, {"required": ["nodes"]}]))]
pub struct LxcSpec {
    /// The PVE node the container lives on (pinned); must be in the cluster's node allowlist.
    /// Exactly one of `node` and `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The nodes the container may run on (placed): created on the one with room for it, left where
    /// it is while it is on one of them (moved by HA or by hand), migrated back when it is
    /// not. Each must be in the cluster's node allowlist. Not on templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The PVE guest id, unique within the cluster across VMs, templates and containers.
    pub vmid: u32,
    /// The CTTemplate (by `metadata.name`) the container is created from. Without it the
    /// container can only be taken over, never created: `proxops adopt` writes no `template`
    /// (PVE does not record which template a container came from), and a declared container
    /// without one whose vmid is not live is a plan error (`proxops::no_template`) instead of
    /// a create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Desired power state: `started` (default for LXC) or `stopped` (the only value for TemplateCT).
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
    /// container, a check after it (it runs), a rollback when either fails. Not on templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_policy: Option<super::update_policy::UpdatePolicy>,
    /// Memory, a whole number of MiB, e.g. `1GiB`.
    #[schemars(with = "crate::quantity::MemorySize")]
    pub memory: Quantity,
    /// Swap, a whole number of MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::quantity::SwapSize>")]
    pub swap: Option<Quantity>,
    /// CPU settings.
    #[serde(default)]
    pub cpu: LxcCpu,
    /// The root filesystem.
    pub root: RootFs,
    /// Additional volumes allocated on PVE storage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_points: Vec<MountPoint>,
    /// Host directories bind-mounted into the container (PVE allows these for root@pam only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bind_mounts: Vec<BindMount>,
    /// Network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<LxcNetwork>,
    /// Host name and DNS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
    /// The OS architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    /// The OS PVE sets the container up for (PVE `ostype`); `unmanaged` leaves the OS's setup
    /// (network, hostname, ...) to the container. PVE detects it from the template when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ostype: Option<LxcOsType>,
    /// Host devices passed into the container (PVE `dev0`, `dev1`, ...; root@pam only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<LxcDevice>,
    /// Container options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<LxcOptions>,
    /// The PVE description (notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_description: Option<String>,
    /// User tags; ProxOps adds its own ownership tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Any other key of PVE's container config, checked against PVE's schema and owned like a
    /// typed field (written, drift restored, deleted when removed). Keys a typed field manages
    /// are refused, naming the field; so are raw `lxc.*` keys, which PVE's API cannot set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "crate::pve_config::LxcPveConfig")]
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
}

/// PVE's `ostype` of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LxcOsType {
    /// Debian.
    Debian,
    /// Devuan.
    Devuan,
    /// Ubuntu.
    Ubuntu,
    /// CentOS and its relatives.
    Centos,
    /// Fedora.
    Fedora,
    /// openSUSE.
    Opensuse,
    /// Arch Linux.
    Archlinux,
    /// Alpine.
    Alpine,
    /// Gentoo.
    Gentoo,
    /// NixOS.
    Nixos,
    /// Left alone: PVE sets up nothing inside (OCI application containers, other systems).
    Unmanaged,
}

/// The console mode of a container (PVE `cmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleMode {
    /// A TTY (PVE's default).
    Tty,
    /// `/dev/console`.
    Console,
    /// A shell in the container, without login.
    Shell,
}

/// A host device passed into a container (`dev<N>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LxcDevice {
    /// The device node on the host, e.g. `/dev/dri/renderD128`.
    pub path: String,
    /// The owner inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// The group inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// The access mode, octal such as `0660`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Pass it read-only (PVE `deny-write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_write: Option<bool>,
    /// The slot, `dev0`-`dev255`; defaults to `dev<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// CPU settings of a container.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LxcCpu {
    /// Cores, at least 1. Absent: PVE's default, every CPU of the host (pve-container
    /// `PVE/LXC/Config.pm` `cores`, "default: all"), which a container taken over may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// CPU weight against other guests (PVE `cpuunits`, 0-500000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
    /// CPU time limit in host CPUs (PVE `cpulimit`, 0-8192; 0 is no limit), e.g. `1.5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
}

/// The root filesystem of a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RootFs {
    /// The PVE storage.
    pub storage: String,
    /// The size, e.g. `8GiB`.
    pub size: Quantity,
    /// The existing volume it is, `STORAGE:NAME` (`local-lvm:vm-200-disk-0`; what `proxops
    /// adopt` writes): never allocated; a slot found holding another volume is an anomaly,
    /// never swapped; grown when `size` grows. Its storage must be `storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// Mount options of the root filesystem; `backup` does not apply (the root is always
    /// backed up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<MountOptions>,
}

/// A volume mounted into a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MountPoint {
    /// The PVE storage.
    pub storage: String,
    /// The size.
    pub size: Quantity,
    /// The existing volume it is, `STORAGE:NAME` (`local-lvm:vm-200-disk-0`; what `proxops
    /// adopt` writes): never allocated; a slot found holding another volume is an anomaly,
    /// never swapped; grown when `size` grows. Its storage must be `storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// The absolute path inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_point: Option<String>,
    /// The slot, `mp0`-`mp255`; defaults to `mp<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// Mount options; an absent option is left to PVE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<MountOptions>,
}

/// Options of a mount point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MountOptions {
    /// Mount read-only (`ro`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Include in backups (PVE default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<bool>,
    /// POSIX ACLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<bool>,
    /// User quotas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<bool>,
    /// The volume is shared between nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// Include in storage replication (PVE default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicate: Option<bool>,
    /// Mount options separated by `;`: `discard`, `lazytime`, `noatime`, `nodev`, `noexec`,
    /// `nosuid` (PVE `mountoptions`), e.g. `noatime;nodev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
}

/// A host directory bind-mounted into a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BindMount {
    /// The absolute host path (not a system directory such as `/etc`).
    pub host_path: String,
    /// The absolute path inside the container.
    pub mount_point: String,
    /// Mount read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The host path is the same on every node (PVE `shared`: a migration does not move it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// The slot; defaults to `mp<number of mount-points + index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// A network interface of a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LxcNetwork {
    /// The bridge, e.g. `vmbr0`.
    pub bridge: String,
    /// The interface name inside the container (PVE `name`), e.g. `eth0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
    /// The interface type (`veth`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub net_type: Option<String>,
    /// The VLAN tag, 1-4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u16>,
    /// A pinned MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hwaddr: Option<String>,
    /// Rate limit in MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    /// Enable the PVE firewall on this interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,
    /// IPv4 address in CIDR notation, `dhcp` or `manual` (PVE's `ip` is IPv4 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// IPv4 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
    /// IPv6 address in CIDR notation, `auto` (SLAAC), `dhcp` (DHCPv6) or `manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip6: Option<String>,
    /// IPv6 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw6: Option<String>,
    /// The slot, `net0`-`net31`; defaults to `net<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// The MTU, 64-65535.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The host, not the container, sets up the interface's addresses (PVE 9 `host-managed`,
    /// for application containers without a network stack); not with `ip6: auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_managed: Option<bool>,
}

/// Host name and DNS settings of a container.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Dns {
    /// The host name (default: `metadata.name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// DNS servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// The DNS search domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// Container architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// x86-64.
    Amd64,
    /// x86 32-bit.
    I386,
    /// 64-bit ARM.
    Arm64,
    /// 32-bit ARM.
    Armhf,
    /// 64-bit RISC-V.
    Riscv64,
}

/// Container options; an absent option is left to PVE.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LxcOptions {
    /// Run unprivileged. Default `true`: ProxOps creates containers unprivileged unless this
    /// says `false` (PVE's own default is privileged before pve-container 6.0.6). Set at create
    /// only: PVE cannot change it, so a container in the other mode is an anomaly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub unprivileged: Option<bool>,
    /// Protect the container from removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<bool>,
    /// Start the container when the node boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onboot: Option<bool>,
    /// Attach a console device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<bool>,
    /// Allow nested containers (`features: nesting`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nesting: Option<bool>,
    /// Allow the keyctl system call (`features: keyctl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyctl: Option<bool>,
    /// Allow FUSE mounts (`features: fuse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse: Option<bool>,
    /// Allow `mknod` of some device nodes (`features: mknod`; unprivileged containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mknod: Option<bool>,
    /// Mount `/sys` writable (`features: force_rw_sys`; unprivileged containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_rw_sys: Option<bool>,
    /// Filesystem types the container may mount (`features: mount=nfs;cifs`), e.g.
    /// `[nfs, cifs]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount: Vec<String>,
    /// Startup order and delays, e.g. `order=10`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// Number of TTYs, 0-6 (PVE `tty`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttys: Option<u32>,
    /// The console mode (PVE `cmode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmode: Option<ConsoleMode>,
    /// The time zone: `host`, or a zone name such as `Europe/Berlin` (PVE `timezone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// A hook script snippet run at the container's lifecycle events, e.g.
    /// `local:snippets/hook.pl` (PVE `hookscript`; root@pam only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hookscript: Option<String>,
    /// The command the container starts as its init (PVE 9.1 `entrypoint`, OCI application
    /// containers), e.g. `/usr/bin/app --serve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
}
