//! Guest config keys: the definitions of a guest type's keys ([`keys`]), the one a concrete key
//! (`net3`) falls under ([`key`]), and the indexed families' limits ([`max_index`]).

use crate::{GuestType, Param, PveRelease, table};

/// Every key definition of a guest type, in name order (a key defined differently per release
/// has a row per release).
pub fn keys(guest: GuestType) -> &'static [Param] {
    match guest {
        GuestType::Qemu => table::QEMU_KEYS,
        GuestType::Lxc => table::LXC_KEYS,
    }
}

/// Highest index of an indexed family, from PVE's sources (qemu-server `$MAX_NETS`,
/// `Drive.pm` `$MAX_SCSI_DISKS`, `PCI.pm` `$MAX_HOSTPCI_DEVICES`, `USB.pm` `$MAX_USB_DEVICES`,
/// `Memory.pm` `$MAX_NUMA`; pve-container `Config.pm` `$MAX_MOUNT_POINTS`, `$MAX_DEVICES`,
/// `$MAX_LXC_NETWORKS`).
pub fn max_index(guest: GuestType, family: &str) -> u32 {
    match (guest, family) {
        (GuestType::Qemu, "ide") => 3,
        (GuestType::Qemu, "sata") => 5,
        (GuestType::Qemu, "scsi") => 30,
        (GuestType::Qemu, "virtio") => 15,
        (GuestType::Qemu, "hostpci") => 15,
        (GuestType::Qemu, "numa") => 7,
        (GuestType::Qemu, "serial") => 3,
        (GuestType::Qemu, "parallel") => 2,
        (GuestType::Qemu, "usb") => 13,
        (GuestType::Qemu, "virtiofs") => 9,
        (_, "net") | (GuestType::Qemu, "ipconfig") => 31,
        _ => 255, // unused, mp, dev
    }
}

/// Splits `net3` into (`net`, 3): a family and an index without leading zeros (PVE spells
/// indices so).
pub fn split_indexed(key: &str) -> Option<(&str, u32)> {
    let stem = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let digits = &key[stem.len()..];
    if stem.is_empty() || digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    digits.parse().ok().map(|n| (stem, n))
}

/// The definition `name` (`cores`, `net3`) falls under: for `release`, or when `None` the
/// newest release that defines it.
pub fn key(guest: GuestType, name: &str, release: Option<PveRelease>) -> Option<&'static Param> {
    let find = |name: &str| {
        keys(guest)
            .iter()
            .rev()
            .find(|k| k.name == name && release.is_none_or(|r| k.versions.contains(r)))
    };
    if let Some(k) = find(name) {
        return Some(k);
    }
    let (family, index) = split_indexed(name)?;
    if index > max_index(guest, family) {
        return None;
    }
    find(&format!("{family}[n]"))
}

/// The releases that define `name` at all.
pub fn releases_of(guest: GuestType, name: &str) -> Vec<PveRelease> {
    PveRelease::ALL
        .into_iter()
        .filter(|r| key(guest, name, Some(*r)).is_some())
        .collect()
}

/// The values key `name` (`scsihw`), or its property-string sub-key `sub` (`net0` `model`),
/// allows in `release` (`None`: the newest release that defines it); empty when any value is.
pub fn allowed_values(
    guest: GuestType,
    name: &str,
    sub: Option<&str>,
    release: Option<PveRelease>,
) -> &'static [&'static str] {
    let Some(def) = key(guest, name, release) else {
        return &[];
    };
    match sub {
        None => def.enums,
        Some(sub) => def
            .format
            .sub_keys()
            .and_then(|subs| subs.iter().find(|s| s.name == sub))
            .map_or(&[], |s| s.enums),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_indexed_key_falls_under_its_family_within_pves_limit() {
        assert_eq!(split_indexed("net3"), Some(("net", 3)));
        assert_eq!(split_indexed("net03"), None);
        assert_eq!(split_indexed("cores"), None);
        assert!(key(GuestType::Qemu, "scsi30", None).is_some());
        assert!(key(GuestType::Qemu, "scsi31", None).is_none());
        assert!(key(GuestType::Lxc, "mp200", None).is_some());
        assert!(key(GuestType::Lxc, "scsi0", None).is_none());
    }

    #[test]
    fn allowed_values_come_from_the_key_or_its_sub_key() {
        assert!(
            allowed_values(GuestType::Qemu, "scsihw", None, None).contains(&"virtio-scsi-single")
        );
        assert!(allowed_values(GuestType::Qemu, "net3", Some("model"), None).contains(&"virtio"));
        assert_eq!(
            allowed_values(GuestType::Lxc, "net0", Some("type"), None),
            ["veth"]
        );
        assert!(allowed_values(GuestType::Qemu, "name", None, None).is_empty());
        assert!(allowed_values(GuestType::Qemu, "nonesuch", None, None).is_empty());
    }

    #[test]
    fn a_key_one_release_lacks_is_known_only_in_the_other() {
        // `allow-ksm` came with PVE 9.
        assert_eq!(
            releases_of(GuestType::Qemu, "allow-ksm"),
            [PveRelease::V9_1]
        );
        assert_eq!(releases_of(GuestType::Qemu, "cores").len(), 2);
    }
}
