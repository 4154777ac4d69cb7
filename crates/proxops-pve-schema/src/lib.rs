//! Facts of the Proxmox VE API that the manifest model, the API client and the simulator share,
//! written once.
//!
//! - The one generated table of PVE's official API schemas 8.4 and 9.1 (`gen/schema.py`, facts
//!   only): every [`Endpoint`] ProxOps uses with its [`Param`]s ([`ENDPOINTS`], [`endpoint`]),
//!   and the config keys of each guest type ([`keys`], [`key`]), each definition marked with
//!   the [`Versions`] that have it, and each endpoint's permission check ([`Permissions`],
//!   [`Check`]). `tests/conformance.rs` checks the table against both dumps.
//! - What one request needs to pass that check ([`required`]): alternatives of conjunctions of
//!   privileges on ACL paths, with the request's values in the paths ([`Requirement`], [`Term`]).
//! - By hand, once: [`GuestType`] (PVE's two guest types), [`PveRelease`], [`parse_bool`]
//!   (PVE's boolean spellings), the indexed families' limits ([`max_index`]), and the groups of
//!   keys PVE's code treats alike: fast-plug keys, hotplug classes, privilege option groups,
//!   volume keys ([`is_volume`]); the reading of a property string
//!   ([`split_property_string`]), which the model and the client share; pve-storage's
//!   plugins ([`STORAGE_PLUGINS`]: each type's options, default content, whether it is
//!   shared), the storage options that hold a secret and the backup-job options only root@pam
//!   may set.
//!
//! A leaf crate: it depends on no other ProxOps crate, so each of them can use it.

mod def;
mod groups;
mod guest;
mod perm;
mod props;
mod release;
mod storage;
#[rustfmt::skip]
mod table;

pub use def::{
    Check, Endpoint, Fmt, GroupsParam, Param, PermUser, Permissions, Sub, Ty, UseridParam, endpoint,
};
pub use groups::{
    LXC_FAST_PLUG, QEMU_CLOUDINIT_OPTIONS, QEMU_CPU_OPTIONS, QEMU_FAST_PLUG, QEMU_GENERAL_OPTIONS,
    QEMU_HWTYPE_OPTIONS, QEMU_MEMORY_OPTIONS, hotplug_classes, is_drive_key, is_volume,
};
pub use guest::{allowed_values, key, keys, max_index, releases_of, split_indexed};
pub use perm::{Requirement, Term, required};
pub use props::{PropertyStringError, SubKeys, UnknownKeys, split_property_string};
pub use release::{PveRelease, Versions};
pub use storage::{
    ROOT_ONLY_BACKUP_OPTIONS, SENSITIVE_STORAGE_OPTIONS, STORAGE_PLUGINS, StorageOption,
    StoragePlugin, storage_plugin,
};
pub use table::{CONFIG_CONTROL, ENDPOINTS};

use serde::{Deserialize, Serialize};

/// The two guest types PVE has, as its paths and `/cluster/resources` name them.
///
/// The default, `Qemu`, is only for records that do not say (the simulator's state files).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum GuestType {
    /// QEMU virtual machines (`/nodes/{node}/qemu`).
    #[default]
    Qemu,
    /// LXC containers (`/nodes/{node}/lxc`).
    Lxc,
}

impl GuestType {
    /// `qemu` or `lxc`.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestType::Qemu => "qemu",
            GuestType::Lxc => "lxc",
        }
    }

    /// `VM` or `CT`, as PVE's messages name them.
    pub fn word(self) -> &'static str {
        match self {
            GuestType::Qemu => "VM",
            GuestType::Lxc => "CT",
        }
    }
}

/// Parses a boolean as PVE does: `1`, `on`, `yes`, `true` and `0`, `off`, `no`, `false`, in
/// any case (pve-common `PVE/JSONSchema.pm`, `parse_boolean`); `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_as_pve_spells_them() {
        for t in ["1", "on", "YES", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "Off", "no", "FALSE"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for neither in ["", " 1", "2", "y", "enabled"] {
            assert_eq!(parse_bool(neither), None, "{neither:?}");
        }
    }

    #[test]
    fn guest_types_read_and_write_as_pve_names_them() {
        assert_eq!(GuestType::Qemu.as_str(), "qemu");
        assert_eq!(
            serde_json::to_string(&GuestType::Lxc).ok().as_deref(),
            Some("\"lxc\"")
        );
        let parsed: Result<GuestType, _> = serde_json::from_str("\"qemu\"");
        assert_eq!(parsed.ok(), Some(GuestType::Qemu));
    }
}
