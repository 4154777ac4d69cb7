//! What the cluster's PVE accepts, checked at plan time so that a step PVE would refuse is an
//! anomaly naming the reason instead of a failed task: its version ([`Release`], read once per
//! connection from `GET /version`) and the content types of its storages (the inventory's
//! `/cluster/resources` storage rows).

use crate::desired::{DesiredArtifact, DesiredGuest};
use proxops_pve::{GuestType, Inventory, Version};

/// A PVE point release, (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub u32, pub u32);

impl Release {
    /// The release `/version` reports, if it reads as one.
    pub fn of(version: &Version) -> Option<Release> {
        version.release_number().map(|(a, b)| Release(a, b))
    }

    /// Plain, uncompressed `.tar` container templates: pve-storage `src/PVE/Storage.pm`
    /// `$VZTMPL_EXT_RE_1` accepts them since commit 0d392b2 "allow .tar container templates"
    /// (pve-storage 9.0.15, released with PVE 9.1); before, only `.tar.{gz,xz,zst,bz2}`.
    pub fn plain_tar_templates(self) -> bool {
        self >= Release(9, 1)
    }

    /// The `import` content type and `import-from` of import volumes: pve-storage d955a46
    /// "plugin: dir: implement import content type" and qemu-server 78f70504 "api: check
    /// untrusted image files for import content type", both PVE 8.3.
    pub fn import_content(self) -> bool {
        self >= Release(8, 3)
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// Why the cluster's release cannot take an artifact, if it cannot.
pub fn artifact_problem(release: Release, a: &DesiredArtifact) -> Option<String> {
    let name = a.filename.to_ascii_lowercase();
    if a.content == "vztmpl" && name.ends_with(".tar") && !release.plain_tar_templates() {
        return Some(format!(
            "`{}` is a plain .tar container template, which PVE accepts only from 9.1 (pve-storage `$VZTMPL_EXT_RE_1`); the cluster runs PVE {release}: use a compressed template (.tar.zst, .tar.gz, .tar.xz or .tar.bz2)",
            a.filename
        ));
    }
    if a.content == "import" && !release.import_content() {
        return Some(format!(
            "storages hold `import` content (disk images to import) only from PVE 8.3; the cluster runs PVE {release}: upgrade it to 8.3 or later"
        ));
    }
    None
}

/// Why the cluster's release cannot create a guest, if it cannot: see [`config_problem`].
pub fn create_problem(release: Release, d: &DesiredGuest) -> Option<String> {
    let config = d.create_config();
    config_problem(
        release,
        d.guest,
        config.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

/// Why the cluster's release would refuse to write `keys` (config key, value): a key its
/// schema does not have (`entrypoint`, `allow-ksm` are PVE 9.1's), or a `pve-config` value
/// its schema refuses (the manifest's checks accept a value some release takes; here the
/// cluster's own says). Releases before PVE 8 are not checked.
pub fn config_problem<'a>(
    release: Release,
    guest: GuestType,
    keys: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<String> {
    use proxops_model::pve_config::{
        KeyClass, PveRelease, check_value, classify, key, releases_of,
    };
    let schema = PveRelease::for_release(release.0, release.1)?;
    let model = guest;
    let mut problems = Vec::new();
    for (k, v) in keys {
        match classify(model, k) {
            KeyClass::Unknown | KeyClass::Unmanaged(_) => continue,
            _ if key(model, k, Some(schema)).is_none() => {
                let has: Vec<&str> = releases_of(model, k).iter().map(|r| r.as_str()).collect();
                problems.push(format!(
                    "`{k}` is a config key of PVE {} only; the cluster runs PVE {release}: remove it",
                    has.join(", ")
                ));
            }
            KeyClass::PveConfig => {
                if let Err(why) = check_value(model, k, v, Some(schema)) {
                    problems.push(format!(
                        "PVE {release} refuses `pve-config.{k}: {v}`: {why}"
                    ));
                }
            }
            _ => {}
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The storage a drive value allocates a new volume on (`STORAGE:SIZE`,
/// `STORAGE:0,import-from=...`, `STORAGE:cloudinit`), and whether PVE checks its content type
/// first: not for a cloud-init drive (qemu-server `API2/Qemu.pm` `$check_storage_access` has
/// "nothing to check" for it, and `PVE::Storage::vdisk_alloc` checks no content).
fn new_volume_storage(value: &str) -> Option<(&str, bool)> {
    let first = value.split(',').next()?;
    let (storage, rest) = first.split_once(':')?;
    let sized = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let new = sized || rest == "cloudinit";
    (new && !storage.is_empty() && !first.starts_with('/')).then_some((storage, sized))
}

/// Whether a config key holds a disk of the guest type (the drives PVE allocates).
pub(crate) fn is_disk_key(guest: GuestType, key: &str) -> bool {
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let indexed = family.len() < key.len();
    match guest {
        GuestType::Qemu => {
            (indexed && matches!(family, "ide" | "sata" | "scsi" | "virtio"))
                || key == "efidisk0"
                || key == "tpmstate0"
        }
        GuestType::Lxc => key == "rootfs" || (indexed && family == "mp"),
    }
}

/// Why PVE would refuse the new volumes of `keys` (config key, value to write) on `node`: a
/// storage missing there, or one without the guest's content type, which qemu-server
/// (`API2/Qemu.pm` `$check_storage_access`: "storage '$storeid' does not support vm images")
/// and pve-container (`API2/LXC.pm` `$check_and_activate_storage`: "... does not support
/// container directories") refuse before allocating anything.
pub fn storage_problem<'a>(
    inventory: &Inventory,
    node: &str,
    guest: GuestType,
    keys: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<String> {
    let (content, what) = match guest {
        GuestType::Qemu => ("images", "disk images"),
        GuestType::Lxc => ("rootdir", "container volumes"),
    };
    for (key, value) in keys {
        if !is_disk_key(guest, key) {
            continue;
        }
        let Some((sid, checked)) = new_volume_storage(value) else {
            continue;
        };
        let Some(storage) = inventory.storage(node, sid) else {
            return Some(format!(
                "{key}: storage `{sid}` does not exist on node `{node}`"
            ));
        };
        if checked && !storage.content.iter().any(|c| c == content) {
            let holds = if storage.content.is_empty() {
                "no content".to_owned()
            } else {
                storage.content.join(", ")
            };
            return Some(format!(
                "{key}: storage `{sid}` on `{node}` does not hold `{content}` content ({what}; it holds {holds}), so PVE refuses the volume: enable `{content}` on it (Datacenter > Storage) or use another storage"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_and_new_volumes() {
        let v = |release: &str, version: &str| Version {
            version: version.into(),
            release: release.into(),
            repoid: String::new(),
        };
        assert_eq!(Release::of(&v("8.4", "8.4.1")), Some(Release(8, 4)));
        assert_eq!(Release::of(&v("", "9.0.10")), Some(Release(9, 0)));
        assert_eq!(Release::of(&v("x", "y")), None);
        assert!(!Release(9, 0).plain_tar_templates() && Release(9, 1).plain_tar_templates());
        assert!(!Release(8, 2).import_content() && Release(8, 3).import_content());
        assert_eq!(
            new_volume_storage("local-lvm:32,ssd=1"),
            Some(("local-lvm", true))
        );
        assert_eq!(
            new_volume_storage("vm_disks:0,import-from=local:import/x.qcow2"),
            Some(("vm_disks", true))
        );
        assert_eq!(
            new_volume_storage("local:cloudinit"),
            Some(("local", false))
        );
        assert_eq!(new_volume_storage("local-lvm:vm-100-disk-0"), None);
        assert_eq!(new_volume_storage("none,media=cdrom"), None);
        assert_eq!(new_volume_storage("/mnt/data,mp=/data"), None);
    }

    #[test]
    fn artifacts_by_release() {
        let artifact = |content: &'static str, filename: &str| DesiredArtifact {
            nodes: vec!["pve1".into()],
            storage: "local".into(),
            content,
            filename: filename.into(),
            volid: format!("local:{content}/{filename}"),
            download: Vec::new(),
        };
        let oci = artifact("vztmpl", "alpine.TAR");
        assert!(artifact_problem(Release(9, 0), &oci).is_some_and(|m| m.contains("PVE 9.0")));
        assert_eq!(artifact_problem(Release(9, 1), &oci), None);
        assert_eq!(
            artifact_problem(Release(8, 4), &artifact("vztmpl", "debian.tar.zst")),
            None
        );
        let image = artifact("import", "debian.qcow2");
        assert!(artifact_problem(Release(8, 2), &image).is_some_and(|m| m.contains("8.3")));
        assert_eq!(artifact_problem(Release(8, 3), &image), None);
    }
}
