//! Groups of config keys PVE's code treats alike, written once by hand from its sources: the
//! keys a running guest takes at once ([`QEMU_FAST_PLUG`], [`LXC_FAST_PLUG`]), the hotplug
//! classes a guest enables ([`hotplug_classes`]), the option groups qemu-server checks one
//! privilege for ([`QEMU_CPU_OPTIONS`] ...), and the keys that hold a volume ([`is_volume`]).

use crate::GuestType;

/// qemu-server `src/PVE/QemuServer.pm` `$fast_plug_option` and the keys of
/// `$confdesc_cloudinit`: a running VM takes them at once.
pub const QEMU_FAST_PLUG: &[&str] = &[
    "description",
    "hookscript",
    "lock",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "protection",
    "shares",
    "startup",
    "tags",
    "vmstatestorage",
    "cicustom",
    "cipassword",
    "citype",
    "ciupgrade",
    "ciuser",
    "nameserver",
    "searchdomain",
    "sshkeys",
];

/// pve-container `src/PVE/LXC/Config.pm` `$LXC_FASTPLUG_OPTIONS`: a running container takes
/// them at once.
pub const LXC_FAST_PLUG: &[&str] = &[
    "description",
    "onboot",
    "startup",
    "protection",
    "hostname",
    "hookscript",
    "cores",
    "tags",
    "lock",
];

/// qemu-server `parse_hotplug_features`: the hotplug classes a VM's `hotplug` value enables
/// (`None`, unset: `1`; `1`: `network,disk,usb`; `0`: none).
pub fn hotplug_classes(value: Option<&str>) -> Vec<&str> {
    match value.unwrap_or("1") {
        "0" => Vec::new(),
        "1" => vec!["network", "disk", "usb"],
        other => other
            .split([',', ';', ' '])
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect(),
    }
}

/// qemu-server `src/PVE/API2/Qemu.pm` `$cpuoptions`: `VM.Config.CPU` (so is `numa[n]`).
pub const QEMU_CPU_OPTIONS: &[&str] = &[
    "cores",
    "cpu",
    "runningcpu",
    "cpulimit",
    "cpuunits",
    "numa",
    "smp",
    "sockets",
    "vcpus",
];

/// qemu-server `$memoryoptions`: `VM.Config.Memory`.
pub const QEMU_MEMORY_OPTIONS: &[&str] = &["memory", "balloon", "shares", "allow-ksm"];

/// qemu-server `$hwtypeoptions`: `VM.Config.HWType`.
pub const QEMU_HWTYPE_OPTIONS: &[&str] = &[
    "acpi",
    "hotplug",
    "kvm",
    "machine",
    "runningmachine",
    "scsihw",
    "smbios1",
    "tablet",
    "vga",
    "watchdog",
    "audio0",
    "rng0",
];

/// qemu-server `$generaloptions`: `VM.Config.Options`.
pub const QEMU_GENERAL_OPTIONS: &[&str] = &[
    "agent",
    "autostart",
    "bios",
    "description",
    "keyboard",
    "localtime",
    "migrate_downtime",
    "migrate_speed",
    "name",
    "onboot",
    "ostype",
    "protection",
    "reboot",
    "startdate",
    "startup",
    "tdf",
    "template",
];

/// qemu-server `$cloudinitoptions`: `VM.Config.Cloudinit` or `VM.Config.Network` (with
/// `ipconfig[n]`).
pub const QEMU_CLOUDINIT_OPTIONS: &[&str] = &[
    "cicustom",
    "cipassword",
    "citype",
    "ciuser",
    "ciupgrade",
    "nameserver",
    "searchdomain",
    "sshkeys",
];

fn indexed(key: &str, family: &str) -> bool {
    key.strip_prefix(family)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a key is a volume slot of the guest type: qemu-server `is_valid_drivename`
/// (`ide[n]`, `sata[n]`, `scsi[n]`, `virtio[n]`, `efidisk0`, `tpmstate0`: disks, CD-ROMs,
/// cloud-init drives) or pve-container's mount-point keys (`rootfs`, `mp[n]`).
pub fn is_drive_key(guest: GuestType, key: &str) -> bool {
    match guest {
        GuestType::Qemu => {
            ["ide", "sata", "scsi", "virtio"]
                .iter()
                .any(|f| indexed(key, f))
                || key == "efidisk0"
                || key == "tpmstate0"
        }
        GuestType::Lxc => key == "rootfs" || indexed(key, "mp"),
    }
}

/// Whether a key holds a volume of the guest type: a volume slot ([`is_drive_key`]) or an
/// `unused[n]` volume.
pub fn is_volume(guest: GuestType, key: &str) -> bool {
    indexed(key, "unused") || is_drive_key(guest, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotplug_defaults_to_network_disk_and_usb() {
        assert_eq!(hotplug_classes(None), ["network", "disk", "usb"]);
        assert_eq!(hotplug_classes(Some("1")), ["network", "disk", "usb"]);
        assert!(hotplug_classes(Some("0")).is_empty());
        assert_eq!(
            hotplug_classes(Some("disk, memory;cpu")),
            ["disk", "memory", "cpu"]
        );
    }

    #[test]
    fn volumes_are_the_disk_keys_of_each_guest_type() {
        for key in ["scsi0", "virtio15", "efidisk0", "tpmstate0", "unused3"] {
            assert!(is_volume(GuestType::Qemu, key), "{key}");
        }
        for key in ["net0", "scsi", "rootfs", "mp0", "scsihw"] {
            assert!(!is_volume(GuestType::Qemu, key), "{key}");
        }
        for key in ["rootfs", "mp10", "unused0"] {
            assert!(is_volume(GuestType::Lxc, key), "{key}");
        }
        assert!(!is_volume(GuestType::Lxc, "scsi0"));
    }
}
