//! The PVE versions the simulator serves ([`PveVersion`]: 8.4 or 9.1) and what differs between
//! them beyond the parameter schema: what `/version` reports, the storages a fresh install
//! has, and the rules of pve-storage that changed.

use serde::{Deserialize, Serialize};

use crate::state::Storage;

/// A Proxmox VE release the simulator answers as. Its parameter schema is the matching one of
/// `../shared/pve-api/` (8.4.2 or 9.1.3, see [`PveVersion::schema`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum PveVersion {
    /// Proxmox VE 8.4 (pve-manager 8.4.1, pve-storage 8.3).
    #[serde(rename = "8.4")]
    V8_4,
    /// Proxmox VE 9.1 (pve-manager 9.1.3, pve-storage 9.1).
    #[default]
    #[serde(rename = "9.1")]
    V9_1,
}

impl PveVersion {
    /// Every version served, oldest first.
    pub const ALL: [PveVersion; 2] = [PveVersion::V8_4, PveVersion::V9_1];

    /// The release of PVE's API schema this version answers with (`proxops-pve-schema`).
    pub fn schema(self) -> proxops_pve_schema::PveRelease {
        match self {
            PveVersion::V8_4 => proxops_pve_schema::PveRelease::V8_4,
            PveVersion::V9_1 => proxops_pve_schema::PveRelease::V9_1,
        }
    }

    /// The point release, `x.y` (`/version` `release`).
    pub fn release(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "8.4",
            PveVersion::V9_1 => "9.1",
        }
    }

    /// (major, minor), for "since x.y" rules.
    pub fn number(self) -> (u32, u32) {
        match self {
            PveVersion::V8_4 => (8, 4),
            PveVersion::V9_1 => (9, 1),
        }
    }

    /// The pve-manager package version (`/version` `version`).
    pub fn manager_version(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "8.4.1",
            PveVersion::V9_1 => "9.1.3",
        }
    }

    /// `repoid`: the pve-manager commit of that version, 16 hex digits (pve-manager
    /// `PVE/Makefile`: `git rev-parse --short=16`), here the "bump version to X" commits.
    pub fn repoid(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "2a5fa54a8503f96d",
            PveVersion::V9_1 => "5829c814947b3364",
        }
    }

    /// The kernel the release ships (`/nodes/{node}/status` `kversion`, `current-kernel`).
    pub fn kernel(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "6.8.12-9-pve",
            PveVersion::V9_1 => "6.17.2-1-pve",
        }
    }

    /// Whether a plain, uncompressed `.tar` is a container template. pve-storage
    /// `src/PVE/Storage.pm` `$VZTMPL_EXT_RE_1` was `\.tar\.(gz|xz|zst|bz2)` through 8.x and
    /// became `\.(?|(tar)(?!\.)|tar\.(gz|xz|zst|bz2))` in commit 0d392b2 "allow .tar container
    /// templates" (pve-storage 9.0.15, shipped with PVE 9.1, for OCI images).
    pub fn plain_tar_templates(self) -> bool {
        self.number() >= (9, 1)
    }

    /// Whether storages have the `import` content type (and `import-from` takes import volumes):
    /// pve-storage d955a46 "plugin: dir: implement import content type" (8.2.8) and qemu-server
    /// 78f70504 "api: check untrusted image files for import content type", both in PVE 8.3.
    pub fn import_content(self) -> bool {
        self.number() >= (8, 3)
    }

    /// Whether the `glusterfs` storage type exists: PVE 9 dropped its plugin (the 9.1 schema's
    /// storage type enum no longer lists it).
    pub fn glusterfs(self) -> bool {
        self.number() < (9, 0)
    }

    /// The storages a fresh install on LVM-thin has (pve-installer
    /// `Proxmox/Install/StorageConfig.pm` `get_lvm_thin_config`): `local` (dir) and `local-lvm`
    /// (lvmthin: rootdir, images). `local` holds iso, vztmpl and backup, and `import` since the
    /// 9.0 installer (pve-installer ec1d5ee "enable import content type by default").
    pub fn default_storages(self) -> Vec<Storage> {
        let mut local = vec!["iso", "vztmpl", "backup"];
        if self.number() >= (9, 0) {
            local.push("import");
        }
        let storage = |name: &str, kind: &str, content: &[&str]| Storage {
            storage: name.into(),
            kind: kind.into(),
            content: content.iter().map(|c| (*c).to_owned()).collect(),
            ..Storage::default()
        };
        vec![
            storage("local", "dir", &local),
            storage("local-lvm", "lvmthin", &["images", "rootdir"]),
        ]
    }
}

impl std::fmt::Display for PveVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.release())
    }
}

impl std::str::FromStr for PveVersion {
    type Err = String;

    /// `8.4` or `9.1` (a full `8.4.1` is accepted for its release).
    fn from_str(s: &str) -> Result<PveVersion, String> {
        let release: String = s.trim().split('.').take(2).collect::<Vec<_>>().join(".");
        PveVersion::ALL
            .into_iter()
            .find(|v| v.release() == release)
            .ok_or_else(|| format!("`{s}` is not a PVE version the simulator serves (8.4 or 9.1)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!("8.4".parse(), Ok(PveVersion::V8_4));
        assert_eq!("9.1.3".parse(), Ok(PveVersion::V9_1));
        assert!("9.0".parse::<PveVersion>().is_err());
        assert!(PveVersion::V8_4 < PveVersion::V9_1);
        assert!(!PveVersion::V8_4.plain_tar_templates());
        assert!(PveVersion::V9_1.plain_tar_templates());
        assert!(PveVersion::ALL.iter().all(|v| v.import_content()));
    }
}
