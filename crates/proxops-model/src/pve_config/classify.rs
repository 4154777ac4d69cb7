//! What ProxOps makes of each config key: the typed manifest field that sets it, `pve-config:`,
//! or PVE's own (left alone, reported). A key a typed field manages is refused in `pve-config`
//! with that field as the hint, whether the manifest sets the field or not: a key has one owner.

use crate::names::GuestType;
use proxops_pve_schema::{key, split_indexed};

/// How a config key is expressed in a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyClass {
    /// A typed field sets it (the field's path under `spec`, e.g. `cpu.units`).
    Typed(&'static str),
    /// `pve-config.<key>` sets it.
    PveConfig,
    /// ProxOps never sets it and never removes it: why.
    Unmanaged(&'static str),
    /// Not a parameter of PVE's API for the guest type: a key PVE writes itself (`meta`,
    /// `digest`), or no key at all.
    Unknown,
}

/// A config key (or indexed family, `net[n]`) a typed field manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypedField {
    /// The key, an indexed family spelled `net[n]`.
    pub key: &'static str,
    /// The manifest field(s) that set it, as a hint names them.
    pub field: &'static str,
}

const fn t(key: &'static str, field: &'static str) -> TypedField {
    TypedField { key, field }
}

const QEMU_TYPED: &[TypedField] = &[
    t("acpi", "options.acpi"),
    t("affinity", "cpu.affinity"),
    t("agent", "options.agent"),
    t("audio0", "hardware.audio"),
    t("balloon", "balloon"),
    t("bios", "hardware.bios"),
    t("boot", "options.boot-order"),
    t("cdrom", "hardware.cdrom"),
    t("cicustom", "cloud-init-data.ci-custom"),
    t("cipassword", "cloud-init-data.ci-password-ref"),
    t("citype", "cloud-init-data.ci-type"),
    t("ciupgrade", "cloud-init-data.ci-upgrade"),
    t("ciuser", "cloud-init-data.ci-user"),
    t("cores", "cpu.cores"),
    t("cpu", "cpu.type, cpu.flags and options.hidden"),
    t("cpulimit", "cpu.limit"),
    t("cpuunits", "cpu.units"),
    t("description", "pve-description"),
    t("efidisk0", "hardware.efi-disk"),
    t("hookscript", "options.hookscript"),
    t("hostpci[n]", "hardware.pci-devices"),
    t("hotplug", "options.hotplug"),
    t("hugepages", "hardware.hugepages"),
    t("ide[n]", "disks, hardware.cdroms or hardware.cloud-init"),
    t("ipconfig[n]", "cloud-init-data.ipconfigs"),
    t("localtime", "options.localtime"),
    t("machine", "hardware.machine and hardware.viommu"),
    t("memory", "memory"),
    t("name", "pve-name"),
    t("nameserver", "cloud-init-data.nameservers"),
    t("net[n]", "networks"),
    t("numa", "hardware.numa"),
    t("numa[n]", "hardware.numa-nodes"),
    t("onboot", "options.onboot"),
    t("ostype", "ostype"),
    t("protection", "options.protection"),
    t("rng0", "hardware.rng"),
    t("sata[n]", "disks, hardware.cdroms or hardware.cloud-init"),
    t("scsi[n]", "disks, hardware.cdroms or hardware.cloud-init"),
    t("scsihw", "hardware.scsi-controller"),
    t("searchdomain", "cloud-init-data.search-domains"),
    t("serial[n]", "hardware.serial0 to hardware.serial3"),
    t("sockets", "hardware.sockets"),
    t(
        "sshkeys",
        "cloud-init-data.ssh-keys or cloud-init-data.ssh-key-refs",
    ),
    t("startup", "options.startup"),
    t("tablet", "options.tablet"),
    t("tags", "tags"),
    t("template", "the kind (TemplateVM)"),
    t("tpmstate0", "hardware.tpm"),
    t("usb[n]", "hardware.usb-devices"),
    t("vcpus", "cpu.vcpus"),
    t(
        "vga",
        "hardware.display, hardware.display-memory and hardware.display-clipboard",
    ),
    t("virtio[n]", "disks"),
];

const LXC_TYPED: &[TypedField] = &[
    t("arch", "arch"),
    t("cmode", "options.cmode"),
    t("console", "options.console"),
    t("cores", "cpu.cores"),
    t("cpulimit", "cpu.limit"),
    t("cpuunits", "cpu.units"),
    t("description", "pve-description"),
    t("dev[n]", "devices"),
    t("entrypoint", "options.entrypoint"),
    t(
        "features",
        "options.nesting, keyctl, fuse, mknod, force-rw-sys and mount",
    ),
    t("hookscript", "options.hookscript"),
    t("hostname", "dns.hostname"),
    t("memory", "memory"),
    t("mp[n]", "mount-points or bind-mounts"),
    t("nameserver", "dns.nameservers"),
    t("net[n]", "networks"),
    t("onboot", "options.onboot"),
    t("ostype", "ostype"),
    t("protection", "options.protection"),
    t("rootfs", "root"),
    t("searchdomain", "dns.domain"),
    t("startup", "options.startup"),
    t("swap", "swap"),
    t("tags", "tags"),
    t("template", "the kind (TemplateCT)"),
    t("timezone", "options.timezone"),
    t("tty", "options.ttys"),
    t("unprivileged", "options.unprivileged"),
];

const DRIVE: &[&str] = &[
    "aio",
    "backup",
    "cache",
    "discard",
    "file",
    "format",
    "iops",
    "iops_max",
    "iops_rd",
    "iops_rd_max",
    "iops_wr",
    "iops_wr_max",
    "iothread",
    "mbps",
    "mbps_max",
    "mbps_rd",
    "mbps_rd_max",
    "mbps_wr",
    "mbps_wr_max",
    "media",
    "replicate",
    "ro",
    "serial",
    "size",
    "ssd",
];

/// The sub-keys of a typed property-string key (or family, `net[n]`) that typed fields set;
/// a live sub-key outside them cannot be declared (ProxOps leaves it as it is). `None`: the key
/// is not a typed property string. `file`/`volume` and `size` are the volume a slot holds.
pub fn typed_sub_keys(guest: GuestType, key_name: &str) -> Option<&'static [&'static str]> {
    let family = split_indexed(key_name).map_or(key_name, |(f, _)| f);
    let subs: &'static [&'static str] = match (guest, family) {
        (GuestType::Qemu, "agent") => &[
            "enabled",
            "freeze-fs",
            "freeze-fs-on-backup",
            "fstrim_cloned_disks",
            "type",
        ],
        (GuestType::Qemu, "audio") => &["device", "driver"],
        (GuestType::Qemu, "boot") => &["order"],
        (GuestType::Qemu, "cicustom") => &["meta", "network", "user", "vendor"],
        (GuestType::Qemu, "cpu") => &["cputype", "flags", "hidden", "hv-vendor-id", "phys-bits"],
        (GuestType::Qemu, "efidisk") => {
            &["efitype", "file", "ms-cert", "pre-enrolled-keys", "size"]
        }
        (GuestType::Qemu, "hostpci") => &[
            "device-id",
            "host",
            "legacy-igd",
            "mapping",
            "mdev",
            "pcie",
            "rombar",
            "romfile",
            "sub-device-id",
            "sub-vendor-id",
            "vendor-id",
            "x-vga",
        ],
        (GuestType::Qemu, "ide" | "sata" | "scsi" | "virtio") => DRIVE,
        (GuestType::Qemu, "ipconfig") => &["gw", "gw6", "ip", "ip6"],
        (GuestType::Qemu, "machine") => &["type", "viommu"],
        (GuestType::Qemu, "memory") => &["current"],
        (GuestType::Qemu, "net") => &[
            "bridge",
            "firewall",
            "link_down",
            "macaddr",
            "model",
            "mtu",
            "queues",
            "rate",
            "tag",
        ],
        (GuestType::Qemu, "numa") if key_name != "numa" => {
            &["cpus", "hostnodes", "memory", "policy"]
        }
        (GuestType::Qemu, "rng") => &["max_bytes", "period", "source"],
        (GuestType::Qemu, "tpmstate") => &["file", "size", "version"],
        (GuestType::Qemu, "usb") => &["host", "mapping", "usb3"],
        (GuestType::Qemu, "vga") => &["clipboard", "memory", "type"],
        (GuestType::Lxc, "features") => &[
            "force_rw_sys",
            "fuse",
            "keyctl",
            "mknod",
            "mount",
            "nesting",
        ],
        (GuestType::Lxc, "mp") => &[
            "acl",
            "backup",
            "mountoptions",
            "mp",
            "quota",
            "replicate",
            "ro",
            "shared",
            "size",
            "volume",
        ],
        (GuestType::Lxc, "rootfs") => &[
            "acl",
            "mountoptions",
            "quota",
            "replicate",
            "ro",
            "shared",
            "size",
            "volume",
        ],
        (GuestType::Lxc, "net") => &[
            "bridge",
            "firewall",
            "gw",
            "gw6",
            "host-managed",
            "hwaddr",
            "ip",
            "ip6",
            "mtu",
            "name",
            "rate",
            "tag",
            "type",
        ],
        (GuestType::Lxc, "dev") => &["deny-write", "gid", "mode", "path", "uid"],
        _ => return None,
    };
    Some(subs)
}

/// The keys typed fields manage, by guest type.
pub fn typed_fields(guest: GuestType) -> &'static [TypedField] {
    match guest {
        GuestType::Qemu => QEMU_TYPED,
        GuestType::Lxc => LXC_TYPED,
    }
}

// Each reason reads "<what it is>: <what to do>"; diagnostics show the part after `: ` as help.
const RAW_LXC: &str = "it is a raw LXC key, which PVE's API refuses for every user: add it to /etc/pve/lxc/<vmid>.conf on the node; ProxOps never removes it";
const ARGS: &str = "it passes raw QEMU arguments, which only root@pam may set (never an API token) and ProxOps does not manage: set it with `qm set <vmid> --args '...'` on the node; ProxOps never removes it";
const LOCK: &str = "it is PVE's lock on the guest while a task works on it: PVE sets and clears it";
const UNUSED: &str = "it records a volume PVE detached from the guest: ProxOps never attaches, deletes or removes one";
const SNAPSHOT: &str =
    "it is snapshot state PVE keeps: snapshots are taken with PVE's snapshot API";

/// What ProxOps makes of config key `key` (`cores`, `net3`, `lxc.apparmor.profile`) of a guest.
pub fn classify(guest: GuestType, key_name: &str) -> KeyClass {
    if guest == GuestType::Lxc && key_name.starts_with("lxc.") {
        return KeyClass::Unmanaged(RAW_LXC);
    }
    match key_name {
        "args" if guest == GuestType::Qemu => return KeyClass::Unmanaged(ARGS),
        "lock" => return KeyClass::Unmanaged(LOCK),
        "parent" | "snaptime" | "vmstate" | "snapstate" => return KeyClass::Unmanaged(SNAPSHOT),
        _ => {}
    }
    let family = split_indexed(key_name).map(|(f, _)| format!("{f}[n]"));
    if family.as_deref() == Some("unused[n]") {
        return KeyClass::Unmanaged(UNUSED);
    }
    if let Some(t) = typed_fields(guest)
        .iter()
        .find(|t| t.key == key_name || family.as_deref() == Some(t.key))
    {
        return KeyClass::Typed(t.field);
    }
    if key(guest, key_name, None).is_some() {
        KeyClass::PveConfig
    } else {
        KeyClass::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GuestType::{Lxc, Qemu};

    #[test]
    fn keys_have_one_owner() {
        assert_eq!(classify(Qemu, "cpuunits"), KeyClass::Typed("cpu.units"));
        assert_eq!(classify(Qemu, "net7"), KeyClass::Typed("networks"));
        assert_eq!(classify(Qemu, "smbios1"), KeyClass::PveConfig);
        assert_eq!(classify(Qemu, "spice_enhancements"), KeyClass::PveConfig);
        assert_eq!(classify(Qemu, "virtiofs0"), KeyClass::PveConfig);
        assert!(matches!(classify(Qemu, "args"), KeyClass::Unmanaged(_)));
        assert!(matches!(classify(Qemu, "unused2"), KeyClass::Unmanaged(_)));
        assert_eq!(classify(Qemu, "meta"), KeyClass::Unknown);
        assert_eq!(classify(Qemu, "parallel3"), KeyClass::Unknown);
        assert!(matches!(classify(Qemu, "parent"), KeyClass::Unmanaged(_)));
        // A typed family owns its keys whatever the index (the field checks the range).
        assert!(matches!(classify(Qemu, "serial4"), KeyClass::Typed(_)));
        assert_eq!(classify(Lxc, "debug"), KeyClass::PveConfig);
        assert_eq!(classify(Lxc, "dev3"), KeyClass::Typed("devices"));
        assert!(matches!(classify(Lxc, "lxc.idmap"), KeyClass::Unmanaged(_)));
    }

    #[test]
    fn every_typed_key_is_a_key_of_the_schema() {
        for guest in [Qemu, Lxc] {
            for t in typed_fields(guest) {
                let probe = t.key.replace("[n]", "0");
                assert!(
                    key(guest, &probe, None).is_some(),
                    "{guest:?} {} is not in the schema",
                    t.key
                );
            }
        }
    }
}
