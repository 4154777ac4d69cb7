//! What writing guest config keys needs, key by key and value by value, as qemu-server
//! (`src/PVE/API2/Qemu.pm`: `$check_vm_modify_config_perm`, `$check_storage_access`,
//! `check_usb_perm`, `check_hostpci_perm`, `check_dir_perm`, the serial checks and
//! `update_vm_api`'s `$check_drive_perms`) and pve-container (`src/PVE/LXC.pm`
//! `check_ct_modify_config_perm`) check it. What only `root@pam` may do becomes a root-only
//! [`Need`] with its remedy.

use super::{Need, Network, storage, vms};
use crate::guest_config::{indexed, is_volume};
use proxops_pve::GuestType;
use proxops_pve::props::PropertyString;
use proxops_pve_schema::is_drive_key;
use proxops_pve_schema::{
    QEMU_CLOUDINIT_OPTIONS, QEMU_CPU_OPTIONS, QEMU_GENERAL_OPTIONS, QEMU_HWTYPE_OPTIONS,
    QEMU_MEMORY_OPTIONS,
};
use std::collections::BTreeMap;

/// The entries of config key `key`'s property string, read as PVE reads it (the client's codec
/// over the schema table: default key, aliases, unknown keys kept); empty when PVE would refuse
/// the value, which then needs no privilege: the write fails before any check.
fn props(guest: GuestType, key: &str, value: &str) -> BTreeMap<String, String> {
    PropertyString::parse_key(guest, key, value)
        .map(|p| p.entries().clone())
        .unwrap_or_default()
}

/// LXC create parameters PVE takes out before its per-key check (`unprivileged` included:
/// it is checked on its own, [`super::create_needs`]).
const LXC_CREATE_ONLY: &[&str] = &[
    "ostemplate",
    "password",
    "ssh-public-keys",
    "storage",
    "start",
    "pool",
    "force",
    "unique",
    "restore",
    "ignore-unpack-errors",
    "unprivileged",
];

/// Writes of one guest's config keys, by one call (a create, or a config update).
pub(super) struct Writes<'a> {
    /// What needs it: `create VM/web (vmid 101)`.
    pub purpose: &'a str,
    pub guest: GuestType,
    pub vmid: u32,
    /// Whether the create call writes them (qemu then checks drives by storage only).
    pub create: bool,
    /// LXC: whether the container is unprivileged.
    pub unprivileged: bool,
    /// Where bridges' ACL paths are.
    pub net: &'a Network,
}

impl Writes<'_> {
    fn vm(&self, privilege: &'static str, detail: String) -> Need {
        Need::one(self.purpose, vms(self.vmid), privilege).at(detail)
    }

    fn root(&self, detail: String, why: String) -> Need {
        Need::root_only(self.purpose, why).at(detail)
    }

    /// A key set to `value` (`old`: its live value, if any).
    pub fn set(&self, key: &str, value: &str, old: Option<&str>, out: &mut Vec<Need>) {
        match self.guest {
            GuestType::Qemu => self.qemu_set(key, value, old, out),
            GuestType::Lxc => {
                if self.create && LXC_CREATE_ONLY.contains(&key) {
                    return;
                }
                self.lxc(key, Some(value), old, out);
            }
        }
    }

    /// A key deleted (`live`: its value).
    pub fn delete(&self, key: &str, live: &str, out: &mut Vec<Need>) {
        match self.guest {
            GuestType::Qemu => {
                let detail = format!("delete {key}");
                self.qemu_key(key, &detail, out);
                self.qemu_value(key, live, &detail, Side::Deleted, out);
            }
            GuestType::Lxc => self.lxc(key, None, Some(live), out),
        }
    }

    fn qemu_set(&self, key: &str, value: &str, old: Option<&str>, out: &mut Vec<Need>) {
        let detail = format!("set {key}");
        self.qemu_key(key, &detail, out);
        if is_volume(GuestType::Qemu, key) && !indexed(key, "unused") {
            volume_needs(self.purpose, self.vmid, key, value, out);
        }
        if indexed(key, "net") {
            bridge_needs(self.purpose, GuestType::Qemu, value, self.net, out);
        }
        if let Some(old) = old {
            self.qemu_value(key, old, &format!("change {key}"), Side::Old, out);
        }
        let side = if self.create {
            Side::Created
        } else {
            Side::New
        };
        self.qemu_value(key, value, &detail, side, out);
    }

    /// `$check_vm_modify_config_perm` for one key.
    fn qemu_key(&self, key: &str, detail: &str, out: &mut Vec<Need>) {
        let d = || detail.to_owned();
        if key == "tags" {
            // `assert_tag_permissions`.
            return out.push(self.vm("VM.Config.Options", d()));
        }
        if is_drive_key(GuestType::Qemu, key)
            || key == "cdrom"
            || ["unused", "serial", "usb", "hostpci", "virtiofs"]
                .iter()
                .any(|f| indexed(key, f))
        {
            return;
        }
        if QEMU_CPU_OPTIONS.contains(&key) || indexed(key, "numa") {
            out.push(self.vm("VM.Config.CPU", d()));
        } else if QEMU_MEMORY_OPTIONS.contains(&key) {
            out.push(self.vm("VM.Config.Memory", d()));
        } else if QEMU_HWTYPE_OPTIONS.contains(&key) {
            out.push(self.vm("VM.Config.HWType", d()));
        } else if QEMU_GENERAL_OPTIONS.contains(&key) {
            out.push(self.vm("VM.Config.Options", d()));
            // "special case for startup since it changes host behaviour"
            if key == "startup" {
                out.push(Need::one(self.purpose, "/", "Sys.Modify").at(d()));
            }
        } else if key == "freeze" {
            out.push(self.vm("VM.PowerMgmt", d()));
        } else if matches!(key, "boot" | "bootdisk" | "vmstatestorage") {
            out.push(self.vm("VM.Config.Disk", d()));
        } else if indexed(key, "net") || key == "running-nets-host-mtu" {
            out.push(self.vm("VM.Config.Network", d()));
        } else if QEMU_CLOUDINIT_OPTIONS.contains(&key) || indexed(key, "ipconfig") {
            out.push(
                Need::any(
                    self.purpose,
                    &vms(self.vmid),
                    &["VM.Config.Cloudinit", "VM.Config.Network"],
                )
                .at(d()),
            );
        } else if key == "vmstate" {
            out.push(self.vm("VM.Config.Disk", d()));
            out.push(self.vm("VM.PowerMgmt", d()));
        } else {
            out.push(self.root(
                d(),
                format!("{key}: only root@pam may set it (no privilege grants it to another user or a token)"),
            ));
        }
    }

    /// The value-dependent checks of qemu keys.
    fn qemu_value(&self, key: &str, value: &str, detail: &str, side: Side, out: &mut Vec<Need>) {
        let d = || detail.to_owned();
        if indexed(key, "unused") {
            out.push(self.vm("VM.Config.Disk", d()));
        } else if is_drive_key(GuestType::Qemu, key) {
            // A create checks drives by storage only.
            if side == Side::Created {
                return;
            }
            let p = props(GuestType::Qemu, key, value);
            let file = p.get("file").map(String::as_str).unwrap_or_default();
            if is_cloudinit(file) {
                let both = Need {
                    any_of: vec![vec![
                        super::grant(&vms(self.vmid), "VM.Config.Cloudinit"),
                        super::grant(&vms(self.vmid), "VM.Config.CDROM"),
                    ]],
                    ..Need::one(self.purpose, vms(self.vmid), "VM.Config.Cloudinit")
                };
                out.push(both.at(d()));
            } else if p.get("media").is_some_and(|m| m == "cdrom") {
                out.push(self.vm("VM.Config.CDROM", d()));
            } else {
                out.push(self.vm("VM.Config.Disk", d()));
            }
        } else if indexed(key, "serial") {
            if value == "socket" {
                out.push(self.vm("VM.Config.HWType", d()));
            } else {
                out.push(self.root(
                    d(),
                    format!("{key} is a host serial device ({value}): only root@pam may set it; use `socket`"),
                ));
            }
        } else if indexed(key, "usb") {
            out.push(self.vm("VM.Config.HWType", d()));
            let p = props(GuestType::Qemu, key, value);
            match (p.get("host"), p.get("mapping")) {
                (Some(host), _) if host.eq_ignore_ascii_case("spice") => {}
                (Some(host), _) => out.push(self.root(d(), raw(key, host, side, "USB"))),
                (None, Some(id)) => out.push(
                    Need::one(self.purpose, format!("/mapping/usb/{id}"), "Mapping.Use").at(d()),
                ),
                (None, None) => {}
            }
        } else if indexed(key, "hostpci") {
            let p = props(GuestType::Qemu, key, value);
            match (p.get("host"), p.get("mapping")) {
                (Some(host), _) => out.push(self.root(d(), raw(key, host, side, "PCI"))),
                (None, Some(id)) => {
                    out.push(
                        Need::one(self.purpose, format!("/mapping/pci/{id}"), "Mapping.Use")
                            .at(d()),
                    );
                    out.push(self.vm("VM.Config.HWType", d()));
                }
                (None, None) => {}
            }
            if p.contains_key("romfile") {
                out.push(self.root(
                    d(),
                    format!("{key} sets `romfile`: only root@pam may set it"),
                ));
            }
        } else if indexed(key, "virtiofs") {
            out.push(self.vm("VM.Config.Disk", d()));
            let p = props(GuestType::Qemu, key, value);
            if let Some(dir) = p.get("dirid") {
                out.push(
                    Need::one(self.purpose, format!("/mapping/dir/{dir}"), "Mapping.Use").at(d()),
                );
            }
        } else if indexed(key, "net") && matches!(side, Side::Old | Side::Deleted) {
            // The old bridge is checked too.
            bridge_needs(self.purpose, GuestType::Qemu, value, self.net, out);
        }
    }

    /// `check_ct_modify_config_perm` for one key (`new`: `None` when deleted).
    fn lxc(&self, key: &str, new: Option<&str>, old: Option<&str>, out: &mut Vec<Need>) {
        let detail = match new {
            Some(_) => format!("set {key}"),
            None => format!("delete {key}"),
        };
        let d = || detail.clone();
        match key {
            "cores" | "cpuunits" | "cpulimit" => out.push(self.vm("VM.Config.CPU", d())),
            "memory" | "swap" => out.push(self.vm("VM.Config.Memory", d())),
            "nameserver" | "searchdomain" | "hostname" => {
                out.push(self.vm("VM.Config.Network", d()))
            }
            "hookscript" => out.push(self.root(d(), "hookscript: only root@pam may set it".into())),
            "features" => self.lxc_features(new, old, d(), out),
            _ if is_drive_key(GuestType::Lxc, key) => {
                out.push(self.vm("VM.Config.Disk", d()));
                let Some(value) = new else {
                    return;
                };
                let p = props(GuestType::Lxc, key, value);
                let volume = p.get("volume").map(String::as_str).unwrap_or_default();
                if volume.starts_with('/') {
                    let what = if volume.starts_with("/dev/") {
                        "a device mount"
                    } else {
                        "a bind mount"
                    };
                    out.push(self.root(
                        d(),
                        format!("{key} is {what} ({volume}): only root@pam may set it; use a mount point on a storage (`mount-points`)"),
                    ));
                } else {
                    volume_needs(self.purpose, self.vmid, key, value, out);
                }
            }
            _ if indexed(key, "net") => {
                out.push(self.vm("VM.Config.Network", d()));
                for v in old.into_iter().chain(new) {
                    bridge_needs(self.purpose, GuestType::Lxc, v, self.net, out);
                }
            }
            _ if indexed(key, "dev") => out.push(self.root(
                d(),
                format!("{key} passes a host device through: only root@pam may set it"),
            )),
            _ => out.push(self.vm("VM.Config.Options", d())),
        }
    }

    /// LXC `features`: root@pam's on a privileged container; elsewhere a change of `nesting`
    /// alone needs `VM.Allocate`, of any other feature root@pam.
    fn lxc_features(
        &self,
        new: Option<&str>,
        old: Option<&str>,
        detail: String,
        out: &mut Vec<Need>,
    ) {
        if !self.unprivileged {
            return out.push(self.root(
                detail,
                "features of a privileged container: only root@pam may change them; make the container unprivileged".into(),
            ));
        }
        let parse = |v: &str| -> BTreeMap<String, String> { props(GuestType::Lxc, "features", v) };
        let old = old.filter(|v| !v.trim().is_empty()).map(parse);
        let new = new.map(parse);
        let changed: Vec<String> = match (&new, &old) {
            (Some(new), Some(old)) => {
                let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
                keys.sort();
                keys.dedup();
                keys.into_iter()
                    .filter(|k| old.get(*k) != new.get(*k))
                    .cloned()
                    .collect()
            }
            (Some(set), None) | (None, Some(set)) => set.keys().cloned().collect(),
            (None, None) => Vec::new(),
        };
        let others: Vec<&str> = changed
            .iter()
            .map(String::as_str)
            .filter(|k| *k != "nesting")
            .collect();
        if !others.is_empty() {
            out.push(self.root(
                detail,
                format!(
                    "features changes {}: only root@pam may change features other than nesting",
                    others.join(", ")
                ),
            ));
        } else if !changed.is_empty() {
            out.push(self.vm("VM.Allocate", detail));
        }
    }
}

/// Which value of a key a check is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Written by the create call.
    Created,
    /// Written by a config update.
    New,
    /// The live value a config update replaces.
    Old,
    /// The live value of a deleted key.
    Deleted,
}

/// The root-only need of a raw passed-through device, and its remedy.
fn raw(key: &str, host: &str, side: Side, bus: &str) -> String {
    match side {
        Side::Old | Side::Deleted => {
            format!("{key} holds a raw device ({host}): only root@pam may change or remove it")
        }
        Side::Created | Side::New => format!(
            "{key} uses a raw device: only root@pam may set it; use a {bus} resource mapping"
        ),
    }
}

/// qemu-server `drive_is_cloudinit`: a volume named `[vm-N-]cloudinit`.
fn is_cloudinit(file: &str) -> bool {
    let name = file.rsplit([':', '/']).next().unwrap_or(file);
    let name = name.split('.').next().unwrap_or(name);
    name == "cloudinit"
        || name
            .strip_prefix("vm-")
            .is_some_and(|r| r.ends_with("-cloudinit"))
}

/// Read access to an existing volume (pve-storage `check_volume_access` for ISOs, templates
/// and imports): `Datastore.Allocate`, `Datastore.AllocateSpace` or `Datastore.Audit`.
const READ: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.Audit",
];

/// The guest owning an image volume (`vm-100-disk-0`, `base-9000-disk-0/vm-...`,
/// `subvol-200-disk-0`, `local:100/vm-100-disk-0.qcow2`), from its name.
fn owner(volname: &str) -> Option<u32> {
    let name = volname.rsplit('/').next().unwrap_or(volname);
    let rest = ["vm-", "base-", "subvol-", "basevol-"]
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    rest.split('-').next()?.parse().ok()
}

/// pve-storage `check_volume_access` of an existing volume used by guest `vmid`: its own
/// images need nothing, another guest's need `Datastore.Audit` and that guest's
/// `VM.Config.Disk`, ISOs, templates and imports read access; `Datastore.Allocate` always
/// suffices.
fn existing_volume(purpose: &str, vmid: u32, volid: &str, why: String, out: &mut Vec<Need>) {
    let Some((sid, volname)) = volid.split_once(':') else {
        return;
    };
    match owner(volname) {
        Some(o) if o == vmid => {}
        Some(o) => out.push(
            Need {
                any_of: vec![
                    vec![super::grant(&storage(sid), "Datastore.Allocate")],
                    vec![
                        super::grant(&storage(sid), "Datastore.Audit"),
                        super::grant(&vms(o), "VM.Config.Disk"),
                    ],
                ],
                ..Need::one(purpose, storage(sid), "Datastore.Allocate")
            }
            .at(why),
        ),
        None => out.push(Need::any(purpose, &storage(sid), READ).at(why)),
    }
}

/// What a volume value of guest `vmid` (`local-lvm:32,ssd=1`, `local:iso/x.iso,media=cdrom`,
/// `local-lvm:0,import-from=local:import/x.qcow2`) needs of its storages: a new one
/// `Datastore.AllocateSpace`, an existing one access to it, a cloud-init drive nothing
/// (`$check_storage_access`: "nothing to check").
pub(super) fn volume_needs(purpose: &str, vmid: u32, key: &str, value: &str, out: &mut Vec<Need>) {
    let mut parts = value.split(',');
    let file = parts.next().unwrap_or_default();
    let file = file
        .strip_prefix("file=")
        .or_else(|| file.strip_prefix("volume="))
        .unwrap_or(file);
    let import = parts.find_map(|p| p.strip_prefix("import-from="));
    let Some((sid, rest)) = file.split_once(':') else {
        return;
    };
    if is_cloudinit(file) {
        return;
    }
    let new = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if new {
        out.push(
            Need::one(purpose, storage(sid), "Datastore.AllocateSpace")
                .at(format!("allocate {key}")),
        );
    } else {
        existing_volume(purpose, vmid, file, format!("use {file}"), out);
    }
    // `$check_storage_access`: another guest's image is cloned (`VM.Clone` on it), any other
    // source read.
    if let Some((ssid, svol)) = import.and_then(|i| i.split_once(':')) {
        let why = format!("import {key} from {}", import.unwrap_or_default());
        match owner(svol) {
            Some(o) => out.push(Need::one(purpose, vms(o), "VM.Clone").at(why)),
            None => out.push(Need::any(purpose, &storage(ssid), READ).at(why)),
        }
    }
}

/// pve-guest-common `check_vnet_access`: `SDN.Use` on the bridge in its zone, on each VLAN of
/// the tag or trunks (`/sdn/zones/<zone>/<bridge>/<tag>`), else on the bridge itself.
pub(super) fn bridge_needs(
    purpose: &str,
    guest: GuestType,
    value: &str,
    net: &Network,
    out: &mut Vec<Need>,
) {
    let p = props(guest, "net0", value);
    let Some(bridge) = p.get("bridge") else {
        return;
    };
    let base = format!("/sdn/zones/{}/{bridge}", net.zone(bridge));
    let detail = format!("attach to {bridge}");
    let mut tags: Vec<String> = Vec::new();
    if let Some(tag) = p.get("tag").filter(|t| !t.is_empty() && *t != "0") {
        tags.push(tag.clone());
    }
    if let Some(trunks) = p.get("trunks").filter(|t| !t.is_empty()) {
        for part in trunks.split(';') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (a.parse::<u32>().unwrap_or(0), b.parse::<u32>().unwrap_or(0));
                    tags.extend((a..=b.min(a.saturating_add(4094))).map(|t| t.to_string()));
                }
                None => tags.push(part.to_owned()),
            }
        }
    }
    if tags.is_empty() {
        out.push(Need::one(purpose, base, "SDN.Use").at(detail));
    } else {
        for tag in tags {
            out.push(Need::one(purpose, format!("{base}/{tag}"), "SDN.Use").at(detail.clone()));
        }
    }
}
