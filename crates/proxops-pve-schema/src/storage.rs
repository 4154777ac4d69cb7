//! The storage plugins of pve-storage (`src/PVE/Storage/*Plugin.pm`), as facts: each type's
//! `options` (fixed, optional), its default content (`plugindata`), whether it is shared by
//! nature (`PVE::Storage::Plugin` `@SHARED_STORAGE`), and the options that hold a secret
//! (`sensitive_properties`). The model checks manifests against them and the simulator follows
//! them. The directory-like plugins share most of their options (`dirlike!`); a few there are
//! broader than the Perl (`content-dirs` and `bwlimit` for btrfs, `content-dirs` for glusterfs).

/// One option of a plugin's `options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageOption {
    /// Its name.
    pub name: &'static str,
    /// Set at creation only (`fixed`).
    pub fixed: bool,
    /// May be left out (`optional`); one that is not must be given, unless PVE derives it.
    pub optional: bool,
}

/// One storage plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoragePlugin {
    /// The storage type (`dir`, `nfs`, ...).
    pub kind: &'static str,
    /// Its options.
    pub options: &'static [StorageOption],
    /// The content it holds when none is given (`plugindata`).
    pub default_content: &'static [&'static str],
    /// Shared by nature (`@SHARED_STORAGE`): every node sees the same content.
    pub shared_by_nature: bool,
}

impl StoragePlugin {
    /// Option `name`, if the plugin has it.
    pub fn option(&self, name: &str) -> Option<&'static StorageOption> {
        self.options.iter().find(|o| o.name == name)
    }

    /// Whether a network share's `path` is derived when not given (`/mnt/pve/<storage>`:
    /// NFSPlugin, CIFSPlugin, CephFSPlugin and GlusterfsPlugin `check_config`).
    pub fn derives_path(&self) -> bool {
        matches!(self.kind, "nfs" | "cifs" | "cephfs" | "glusterfs")
    }

    /// The options a create must give: those not optional, but a derived `path`.
    pub fn required(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.options
            .iter()
            .filter(move |o| {
                let derived = o.name == "path" && self.derives_path();
                !o.optional && !derived
            })
            .map(|o| o.name)
    }
}

/// The plugin of storage type `kind`.
pub fn storage_plugin(kind: &str) -> Option<&'static StoragePlugin> {
    STORAGE_PLUGINS.iter().find(|p| p.kind == kind)
}

/// Storage options that hold a secret (`PVE::Storage::Plugin::sensitive_properties`' default
/// list): PVE keeps them out of `storage.cfg` and never returns them.
pub const SENSITIVE_STORAGE_OPTIONS: &[&str] =
    &["encryption-key", "keyring", "master-pubkey", "password"];

/// vzdump options only `root@pam` itself may set or delete on a backup job (pve-manager
/// `PVE/API2/Backup.pm` `assert_param_permission_common`: "Only root may set this option.").
pub const ROOT_ONLY_BACKUP_OPTIONS: &[&str] = &["tmpdir", "dumpdir", "script", "job-id"];

const O: (bool, bool) = (false, true);
const F: (bool, bool) = (true, false);
const FO: (bool, bool) = (true, true);

/// An option from its name and (fixed, optional) flags.
const fn opt(name: &'static str, (fixed, optional): (bool, bool)) -> StorageOption {
    StorageOption {
        name,
        fixed,
        optional,
    }
}

macro_rules! dirlike {
    ($($k:literal => $f:expr),* $(,)?) => {
        &[$(opt($k, $f),)* opt("content-dirs", O), opt("nodes", O), opt("disable", O),
          opt("prune-backups", O), opt("max-protected-backups", O), opt("content", O),
          opt("format", O), opt("mkdir", O), opt("create-base-path", O), opt("create-subdirs", O),
          opt("bwlimit", O), opt("preallocation", O)]
    };
}

/// The plugins, as pve-storage defines them.
pub const STORAGE_PLUGINS: &[StoragePlugin] = &[
    StoragePlugin {
        kind: "dir",
        options: dirlike!("path" => F, "shared" => O, "is_mountpoint" => O, "snapshot-as-volume-chain" => FO),
        default_content: &["images", "rootdir"],
        shared_by_nature: false,
    },
    StoragePlugin {
        kind: "btrfs",
        options: dirlike!("path" => F, "shared" => O, "is_mountpoint" => O, "nocow" => O),
        default_content: &["images", "rootdir"],
        shared_by_nature: false,
    },
    StoragePlugin {
        kind: "nfs",
        options: dirlike!("path" => F, "server" => F, "export" => F, "options" => O,
                 "snapshot-as-volume-chain" => FO),
        default_content: &["images"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "cifs",
        options: dirlike!("path" => F, "server" => F, "share" => F, "subdir" => O, "username" => O,
                 "password" => O, "domain" => O, "smbversion" => O, "options" => O,
                 "snapshot-as-volume-chain" => FO),
        default_content: &["images"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "cephfs",
        options: dirlike!("path" => F, "monhost" => O, "subdir" => O, "options" => O, "username" => O,
                 "fuse" => O, "keyring" => O, "fs-name" => O),
        default_content: &["vztmpl", "iso", "backup"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "glusterfs",
        options: dirlike!("path" => F, "server" => O, "server2" => O, "volume" => F, "transport" => O,
                 "maxfiles" => O),
        default_content: &["images"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "lvm",
        options: &[
            opt("vgname", F),
            opt("nodes", O),
            opt("shared", O),
            opt("disable", O),
            opt("saferemove", O),
            opt("saferemove-stepsize", O),
            opt("saferemove_throughput", O),
            opt("content", O),
            opt("base", FO),
            opt("tagged_only", O),
            opt("bwlimit", O),
            opt("snapshot-as-volume-chain", O),
        ],
        default_content: &["images"],
        shared_by_nature: false,
    },
    StoragePlugin {
        kind: "lvmthin",
        options: &[
            opt("thinpool", F),
            opt("vgname", F),
            opt("nodes", O),
            opt("disable", O),
            opt("content", O),
            opt("bwlimit", O),
        ],
        default_content: &["images", "rootdir"],
        shared_by_nature: false,
    },
    StoragePlugin {
        kind: "zfspool",
        options: &[
            opt("pool", F),
            opt("blocksize", O),
            opt("sparse", O),
            opt("nodes", O),
            opt("disable", O),
            opt("content", O),
            opt("bwlimit", O),
            opt("mountpoint", O),
        ],
        default_content: &["images", "rootdir"],
        shared_by_nature: false,
    },
    StoragePlugin {
        kind: "rbd",
        options: &[
            opt("nodes", O),
            opt("disable", O),
            opt("monhost", O),
            opt("pool", O),
            opt("data-pool", O),
            opt("namespace", O),
            opt("username", O),
            opt("content", O),
            opt("krbd", O),
            opt("keyring", O),
            opt("bwlimit", O),
        ],
        default_content: &["images"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "iscsi",
        options: &[
            opt("portal", F),
            opt("target", F),
            opt("nodes", O),
            opt("disable", O),
            opt("content", O),
            opt("bwlimit", O),
        ],
        default_content: &["images"],
        shared_by_nature: true,
    },
    StoragePlugin {
        kind: "pbs",
        options: &[
            opt("server", F),
            opt("datastore", F),
            opt("namespace", O),
            opt("port", O),
            opt("nodes", O),
            opt("disable", O),
            opt("content", O),
            opt("username", O),
            opt("password", O),
            opt("encryption-key", O),
            opt("master-pubkey", O),
            opt("prune-backups", O),
            opt("max-protected-backups", O),
            opt("fingerprint", O),
        ],
        default_content: &["backup"],
        shared_by_nature: true,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_share_needs_its_server_not_its_path() {
        let required = |kind: &str| storage_plugin(kind).unwrap().required().collect::<Vec<_>>();
        assert_eq!(required("dir"), ["path"]);
        assert_eq!(required("nfs"), ["server", "export"]);
        assert_eq!(required("cifs"), ["server", "share"]);
        assert_eq!(required("lvmthin"), ["thinpool", "vgname"]);
        assert_eq!(required("zfspool"), ["pool"]);
        assert_eq!(required("pbs"), ["server", "datastore"]);
        // Of the types ProxOps manages, only dir and LVM take `shared`.
        let takes_shared: Vec<&str> = ["dir", "nfs", "cifs", "lvm", "lvmthin", "zfspool", "pbs"]
            .into_iter()
            .filter(|k| storage_plugin(k).unwrap().option("shared").is_some())
            .collect();
        assert_eq!(takes_shared, ["dir", "lvm"]);
    }
}
