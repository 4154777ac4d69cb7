//! The storage plugins the simulator knows, as pve-storage `src/PVE/Storage/*Plugin.pm` define
//! them: each one's `options` (fixed, optional), its default content (`plugindata`) and
//! whether it is shared by nature (`PVE::Storage::Plugin` `@SHARED_STORAGE`). The
//! directory-like plugins share most of their options (`dirlike!`); a few there are broader
//! than the Perl (`content-dirs` and `bwlimit` for btrfs, `content-dirs` for glusterfs).

/// An option's flags in a plugin's `options`: (fixed, optional).
pub(crate) type Flags = (bool, bool);
pub(crate) const O: Flags = (false, true);
pub(crate) const F: Flags = (true, false);
pub(crate) const FO: Flags = (true, true);

/// One plugin: type, `options`, default content (`plugindata`), shared by nature
/// (`@SHARED_STORAGE`).
pub(crate) type Plugin = (
    &'static str,
    &'static [(&'static str, Flags)],
    &'static [&'static str],
    bool,
);

/// The options every directory-like plugin has besides its own.
macro_rules! dirlike {
    ($($k:literal => $f:expr),* $(,)?) => {
        &[$(($k, $f),)* ("content-dirs", O), ("nodes", O), ("disable", O), ("prune-backups", O),
          ("max-protected-backups", O), ("content", O), ("format", O), ("mkdir", O),
          ("create-base-path", O), ("create-subdirs", O), ("bwlimit", O), ("preallocation", O)]
    };
}

pub(crate) const PLUGINS: &[Plugin] = &[
    (
        "dir",
        dirlike!("path" => F, "shared" => O, "is_mountpoint" => O, "snapshot-as-volume-chain" => FO),
        &["images", "rootdir"],
        false,
    ),
    (
        "btrfs",
        dirlike!("path" => F, "shared" => O, "is_mountpoint" => O, "nocow" => O),
        &["images", "rootdir"],
        false,
    ),
    (
        "nfs",
        dirlike!("path" => F, "server" => F, "export" => F, "options" => O,
                 "snapshot-as-volume-chain" => FO),
        &["images"],
        true,
    ),
    (
        "cifs",
        dirlike!("path" => F, "server" => F, "share" => F, "subdir" => O, "username" => O,
                 "password" => O, "domain" => O, "smbversion" => O, "options" => O,
                 "snapshot-as-volume-chain" => FO),
        &["images"],
        true,
    ),
    (
        "cephfs",
        dirlike!("path" => F, "monhost" => O, "subdir" => O, "options" => O, "username" => O,
                 "fuse" => O, "keyring" => O, "fs-name" => O),
        &["vztmpl", "iso", "backup"],
        true,
    ),
    (
        "glusterfs",
        dirlike!("path" => F, "server" => O, "server2" => O, "volume" => F, "transport" => O,
                 "maxfiles" => O),
        &["images"],
        true,
    ),
    (
        "lvm",
        &[
            ("vgname", F),
            ("nodes", O),
            ("shared", O),
            ("disable", O),
            ("saferemove", O),
            ("saferemove-stepsize", O),
            ("saferemove_throughput", O),
            ("content", O),
            ("base", FO),
            ("tagged_only", O),
            ("bwlimit", O),
            ("snapshot-as-volume-chain", O),
        ],
        &["images"],
        false,
    ),
    (
        "lvmthin",
        &[
            ("thinpool", F),
            ("vgname", F),
            ("nodes", O),
            ("disable", O),
            ("content", O),
            ("bwlimit", O),
        ],
        &["images", "rootdir"],
        false,
    ),
    (
        "zfspool",
        &[
            ("pool", F),
            ("blocksize", O),
            ("sparse", O),
            ("nodes", O),
            ("disable", O),
            ("content", O),
            ("bwlimit", O),
            ("mountpoint", O),
        ],
        &["images", "rootdir"],
        false,
    ),
    (
        "rbd",
        &[
            ("nodes", O),
            ("disable", O),
            ("monhost", O),
            ("pool", O),
            ("data-pool", O),
            ("namespace", O),
            ("username", O),
            ("content", O),
            ("krbd", O),
            ("keyring", O),
            ("bwlimit", O),
        ],
        &["images"],
        true,
    ),
    (
        "iscsi",
        &[
            ("portal", F),
            ("target", F),
            ("nodes", O),
            ("disable", O),
            ("content", O),
            ("bwlimit", O),
        ],
        &["images"],
        true,
    ),
    (
        "pbs",
        &[
            ("server", F),
            ("datastore", F),
            ("namespace", O),
            ("port", O),
            ("nodes", O),
            ("disable", O),
            ("content", O),
            ("username", O),
            ("password", O),
            ("encryption-key", O),
            ("master-pubkey", O),
            ("prune-backups", O),
            ("max-protected-backups", O),
            ("fingerprint", O),
        ],
        &["backup"],
        true,
    ),
];
