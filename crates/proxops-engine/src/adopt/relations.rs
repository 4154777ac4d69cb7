//! What a guest's volumes say about the guests it is related to. A linked clone's volume names
//! its template's base volume (`local-lvm:base-100-disk-0/vm-101-disk-0` on LVM-thin, ZFS and
//! Ceph; `local:100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2` on directory storages, as
//! pve-storage `Plugin.pm` `parse_volname` reads them). A manifest can declare only a full clone
//! (`clone:`; a container none), so adopt keeps the volumes as they are and says what the relationship is.

use std::collections::BTreeMap;

/// The config keys that hold volumes of a guest.
fn holds_volume(key: &str) -> bool {
    let slot = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    ["scsi", "virtio", "sata", "ide", "mp", "unused"]
        .iter()
        .any(|p| slot(p))
        || matches!(key, "efidisk0" | "tpmstate0" | "rootfs")
}

/// The template vmid a linked-clone volume (`value`'s volume id) is based on, if it is one:
/// `<base vmid>/<base>/<vmid>/<own>` on directory storages (pve-storage `Plugin.pm`
/// `parse_volname`), `base-N-disk-M/vm-V-disk-K` (or `basevol-N-.../subvol-V-...` for a
/// container on ZFS) on the others (`LvmThinPlugin.pm`, `ZFSPoolPlugin.pm` `parse_volname`).
/// A template's own `base-N-disk-M` names one volume and is no clone.
fn base_of(value: &str) -> Option<u32> {
    let volume = value.split(',').next()?;
    let (_, name) = volume.split_once(':')?;
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [base_vmid, _, _, _] => base_vmid.parse().ok(),
        [base, _] => base
            .strip_prefix("basevol-")
            .or_else(|| base.strip_prefix("base-"))?
            .split('-')
            .next()?
            .parse()
            .ok(),
        _ => None,
    }
}

/// Notes for the report: one per template the guest's volumes are linked clones of.
pub(crate) fn notes(config: &BTreeMap<String, String>) -> Vec<String> {
    let mut by_template: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (key, value) in config {
        if holds_volume(key)
            && let Some(template) = base_of(value)
        {
            by_template.entry(template).or_default().push(key);
        }
    }
    by_template
        .into_iter()
        .map(|(template, keys)| {
            format!(
                "a linked clone of the template at vmid {template} ({} on its base volumes): the manifest keeps the volumes as they are; `clone:` declares only full clones, so were this guest ever re-created it would get new disks, not a linked clone",
                keys.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_clone_volumes_name_their_template_and_a_templates_own_do_not() {
        let config: BTreeMap<String, String> = [
            ("scsi0", "local-lvm:base-100-disk-0/vm-101-disk-0,size=8G"),
            (
                "efidisk0",
                "hdd:103/base-103-disk-0.qcow2/101/vm-101-disk-1.qcow2,efitype=4m,size=528K",
            ),
            ("scsi1", "local-lvm:vm-101-disk-2,size=8G"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("ide2", "local:iso/base-1-disk.iso,media=cdrom"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let notes = notes(&config);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("a linked clone of the template at vmid 100 (scsi0 "));
        assert!(notes[1].starts_with("a linked clone of the template at vmid 103 (efidisk0 "));
        let template: BTreeMap<String, String> = [(
            "scsi0".to_owned(),
            "local-lvm:base-100-disk-0,size=8G".to_owned(),
        )]
        .into();
        assert!(super::notes(&template).is_empty());
        let container: BTreeMap<String, String> = [(
            "rootfs".to_owned(),
            "local-zfs:basevol-200-disk-0/subvol-201-disk-0,size=8G".to_owned(),
        )]
        .into();
        assert!(super::notes(&container)[0].contains("vmid 200 (rootfs "));
    }
}
