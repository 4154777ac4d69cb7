//! Who may write which guest config keys, as qemu-server and pve-container check it on create
//! and on config updates: a `VM.Config.*` privilege per key, value-dependent checks (drives,
//! serial ports, USB and PCI devices, directory mappings, mount points, features, bridges), and
//! what only `root@pam` may do. Only the user `root@pam` itself skips them; a token never does,
//! not even `root@pam!name` ([`crate::auth::Principal::is_root`]), though the principal token
//! holds every privilege.

use proxops_pve_schema::{
    QEMU_CLOUDINIT_OPTIONS, QEMU_CPU_OPTIONS, QEMU_GENERAL_OPTIONS, QEMU_HWTYPE_OPTIONS,
    QEMU_MEMORY_OPTIONS,
};
use std::collections::BTreeMap;

use super::Ctx;
use super::disks::is_volume;
use crate::error::ApiError;
use crate::state::State;

/// What a create or config request writes, and the config it changes.
pub(crate) struct Request<'a> {
    pub vmid: u32,
    /// Keys set, with their requested values.
    pub sets: &'a BTreeMap<String, String>,
    /// Keys deleted.
    pub deletes: &'a [String],
    /// The current config (`None`: the guest is being created).
    pub old: Option<&'a BTreeMap<String, String>>,
}

impl Request<'_> {
    /// A key's current value.
    fn old_value<'v>(&'v self, key: &str) -> Option<&'v str> {
        self.old.and_then(|c| c.get(key)).map(String::as_str)
    }
}

fn family(key: &str) -> &str {
    key.trim_end_matches(|c: char| c.is_ascii_digit())
}

fn indexed(key: &str, fam: &str) -> bool {
    family(key) == fam && key.len() > fam.len()
}

/// A property string's entries, a bare part under `default_key`.
fn props(value: &str, default_key: &str) -> BTreeMap<String, String> {
    value
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => (default_key.to_string(), p.trim().to_string()),
        })
        .collect()
}

fn vm(ctx: &Ctx, vmid: u32, privilege: &str) -> Result<(), ApiError> {
    ctx.require(&format!("/vms/{vmid}"), privilege)
}

fn fail(msg: String) -> Result<(), ApiError> {
    Err(ApiError::fail(msg))
}

/// qemu-server `src/PVE/API2/Qemu.pm` `$check_vm_modify_config_perm`: one key's privilege by its
/// option list; a key in none of them is root-only ("only root can set '$opt' config"). Drives,
/// `cdrom`, `unused`, `serial`, `usb`, `hostpci`, `virtiofs` and `tags` are checked by value.
fn qemu_key(ctx: &Ctx, vmid: u32, key: &str) -> Result<(), ApiError> {
    if key == "tags" {
        // Skipped here, checked by `assert_tag_permissions` (pve-guest-common
        // `GuestHelpers.pm`) in the worker: `VM.Config.Options`.
        return vm(ctx, vmid, "VM.Config.Options");
    }
    if is_volume(crate::state::GuestType::Qemu, key)
        || key == "cdrom"
        || ["unused", "serial", "usb", "hostpci", "virtiofs"]
            .iter()
            .any(|f| indexed(key, f))
    {
        return Ok(());
    }
    if QEMU_CPU_OPTIONS.contains(&key) || indexed(key, "numa") {
        vm(ctx, vmid, "VM.Config.CPU")
    } else if QEMU_MEMORY_OPTIONS.contains(&key) {
        vm(ctx, vmid, "VM.Config.Memory")
    } else if QEMU_HWTYPE_OPTIONS.contains(&key) {
        vm(ctx, vmid, "VM.Config.HWType")
    } else if QEMU_GENERAL_OPTIONS.contains(&key) {
        vm(ctx, vmid, "VM.Config.Options")?;
        // "special case for startup since it changes host behaviour"
        if key == "startup" {
            ctx.require("/", "Sys.Modify")?;
        }
        Ok(())
    } else if key == "freeze" {
        vm(ctx, vmid, "VM.PowerMgmt")
    } else if matches!(key, "boot" | "bootdisk" | "vmstatestorage") {
        vm(ctx, vmid, "VM.Config.Disk")
    } else if indexed(key, "net") || key == "running-nets-host-mtu" {
        vm(ctx, vmid, "VM.Config.Network")
    } else if QEMU_CLOUDINIT_OPTIONS.contains(&key) || indexed(key, "ipconfig") {
        ctx.require_any(
            &format!("/vms/{vmid}"),
            &["VM.Config.Cloudinit", "VM.Config.Network"],
        )
    } else if key == "vmstate" {
        vm(ctx, vmid, "VM.Config.Disk")?;
        vm(ctx, vmid, "VM.PowerMgmt")
    } else {
        fail(format!("only root can set '{key}' config"))
    }
}

/// qemu-server `update_vm_api` `$check_drive_perms`: a cloud-init drive needs
/// `VM.Config.Cloudinit` and `VM.Config.CDROM`, a CD-ROM `VM.Config.CDROM`, a disk
/// `VM.Config.Disk`.
fn qemu_drive(ctx: &Ctx, vmid: u32, key: &str, value: &str) -> Result<(), ApiError> {
    if indexed(key, "unused") {
        return vm(ctx, vmid, "VM.Config.Disk");
    }
    let p = props(value, "file");
    let file = p.get("file").map(String::as_str).unwrap_or_default();
    // PVE::QemuServer::Drive `drive_is_cloudinit`: the volume is named `[vm-N-]cloudinit`.
    let stem = file.rsplit(['/', ':']).next().unwrap_or(file);
    let stem = stem.split('.').next().unwrap_or(stem);
    let cloudinit = stem == "cloudinit"
        || stem
            .strip_prefix("vm-")
            .is_some_and(|r| r.ends_with("-cloudinit"));
    if cloudinit {
        vm(ctx, vmid, "VM.Config.Cloudinit")?;
        vm(ctx, vmid, "VM.Config.CDROM")
    } else if p.get("media").is_some_and(|m| m == "cdrom") {
        vm(ctx, vmid, "VM.Config.CDROM")
    } else {
        vm(ctx, vmid, "VM.Config.Disk")
    }
}

/// qemu-server `check_usb_perm`: `VM.Config.HWType`, then a host device is root-only (`spice`
/// excepted) and a mapping needs `Mapping.Use` on `/mapping/usb/<id>`.
fn usb(ctx: &Ctx, vmid: u32, key: &str, value: &str) -> Result<(), ApiError> {
    vm(ctx, vmid, "VM.Config.HWType")?;
    let p = props(value, "host");
    if let Some(host) = p.get("host") {
        if host.eq_ignore_ascii_case("spice") {
            return Ok(());
        }
        return fail(format!("only root can set '{key}' config for real devices"));
    }
    match p.get("mapping") {
        Some(id) => ctx.require(&format!("/mapping/usb/{id}"), "Mapping.Use"),
        None => fail("either 'host' or 'mapping' must be set.".into()),
    }
}

/// qemu-server `check_hostpci_perm`: a host device is root-only; a mapping needs `Mapping.Use`
/// on `/mapping/pci/<id>` and `VM.Config.HWType`; `romfile` is root-only.
fn hostpci(ctx: &Ctx, vmid: u32, key: &str, value: &str) -> Result<(), ApiError> {
    let p = props(value, "host");
    if p.contains_key("host") {
        return fail(format!(
            "only root can set '{key}' config for non-mapped devices"
        ));
    }
    match p.get("mapping") {
        Some(id) => {
            ctx.require(&format!("/mapping/pci/{id}"), "Mapping.Use")?;
            vm(ctx, vmid, "VM.Config.HWType")?;
        }
        None => return fail("either 'host' or 'mapping' must be set.".into()),
    }
    if p.contains_key("romfile") {
        return Err(ApiError::param(
            key,
            "only root@pam can set 'romfile' option",
        ));
    }
    Ok(())
}

/// qemu-server `check_dir_perm`: `VM.Config.Disk` and `Mapping.Use` on `/mapping/dir/<dirid>`.
fn virtiofs(ctx: &Ctx, vmid: u32, value: &str) -> Result<(), ApiError> {
    vm(ctx, vmid, "VM.Config.Disk")?;
    let p = props(value, "dirid");
    let dirid = p.get("dirid").map(String::as_str).unwrap_or_default();
    ctx.require(&format!("/mapping/dir/{dirid}"), "Mapping.Use")
}

/// pve-guest-common `src/PVE/GuestHelpers.pm` `check_vnet_access`: `SDN.Use` on the bridge in
/// its zone, on each VLAN of the tag or trunks (`/sdn/zones/<zone>/<bridge>/<tag>`), else on
/// the bridge itself.
fn bridge(ctx: &Ctx, st: &State, value: &str) -> Result<(), ApiError> {
    let p = props(value, "model");
    let Some(br) = p.get("bridge") else {
        return Ok(());
    };
    let base = format!("/sdn/zones/{}/{br}", st.zone_of(br));
    let tag = p.get("tag").filter(|t| !t.is_empty() && *t != "0");
    if let Some(tag) = tag {
        ctx.require(&format!("{base}/{tag}"), "SDN.Use")?;
    }
    let trunks = p.get("trunks").filter(|t| !t.is_empty());
    if let Some(trunks) = trunks {
        // `get_tags_from_trunk`: `;`-separated tags and `a-b` ranges.
        let mut tags = std::collections::BTreeSet::new();
        for part in trunks.split(';') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (a.parse::<u32>().unwrap_or(0), b.parse::<u32>().unwrap_or(0));
                    tags.extend(a..=b.min(a.saturating_add(4094)));
                }
                None => {
                    tags.extend(part.parse::<u32>().ok());
                }
            }
        }
        for t in tags {
            ctx.require(&format!("{base}/{t}"), "SDN.Use")?;
        }
    }
    if tag.is_none() && trunks.is_none() {
        ctx.require(&base, "SDN.Use")?;
    }
    Ok(())
}

/// qemu-server `create_vm`: `$check_vm_modify_config_perm` on every key, then the serial, USB,
/// PCI and directory checks (`check_vm_create_*_perm`) and the bridges (`check_bridge_access`).
/// The storages were checked before (`$check_storage_access`).
pub(crate) fn qemu_create(ctx: &Ctx, st: &State, req: &Request) -> Result<(), ApiError> {
    if ctx.root() {
        return Ok(());
    }
    for k in req.sets.keys() {
        qemu_key(ctx, req.vmid, k)?;
    }
    for (k, v) in req.sets {
        if indexed(k, "serial") {
            // `$check_vm_create_serial_perm`
            if v == "socket" {
                vm(ctx, req.vmid, "VM.Config.HWType")?;
            } else {
                fail(format!("only root can set '{k}' config for real devices"))?;
            }
        }
    }
    for (k, v) in req.sets.iter().filter(|(k, _)| indexed(k, "usb")) {
        usb(ctx, req.vmid, k, v)?;
    }
    for (k, v) in req.sets.iter().filter(|(k, _)| indexed(k, "hostpci")) {
        hostpci(ctx, req.vmid, k, v)?;
    }
    for v in req
        .sets
        .iter()
        .filter(|(k, _)| indexed(k, "virtiofs"))
        .map(|(_, v)| v)
    {
        virtiofs(ctx, req.vmid, v)?;
    }
    for (_, v) in req.sets.iter().filter(|(k, _)| indexed(k, "net")) {
        bridge(ctx, st, v)?;
    }
    Ok(())
}

/// qemu-server `update_vm_api`: `$check_vm_modify_config_perm` on the deleted and the set keys
/// and the new bridges before the update, then (in `$updatefn`) each deleted value and each
/// changed one, old value first, by its kind. `storage` runs the storage checks in between.
pub(crate) fn qemu_update(
    ctx: &Ctx,
    st: &State,
    req: &Request,
    storage: impl FnOnce() -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    if ctx.root() {
        return storage();
    }
    for k in req.deletes.iter().chain(req.sets.keys()) {
        qemu_key(ctx, req.vmid, k)?;
    }
    storage()?;
    for (_, v) in req.sets.iter().filter(|(k, _)| indexed(k, "net")) {
        bridge(ctx, st, v)?;
    }
    let vmid = req.vmid;
    for k in req.deletes {
        let Some(val) = req.old_value(k) else {
            continue;
        };
        if is_volume(crate::state::GuestType::Qemu, k) {
            qemu_drive(ctx, vmid, k, val)?;
        } else if indexed(k, "serial") {
            if val == "socket" {
                vm(ctx, vmid, "VM.Config.HWType")?;
            } else {
                fail(format!(
                    "only root can delete '{k}' config for real devices"
                ))?;
            }
        } else if indexed(k, "usb") {
            usb(ctx, vmid, k, val)?;
        } else if indexed(k, "hostpci") {
            hostpci(ctx, vmid, k, val)?;
        } else if indexed(k, "virtiofs") {
            virtiofs(ctx, vmid, val)?;
        } else if indexed(k, "net") {
            bridge(ctx, st, val)?;
        }
    }
    for (k, v) in req.sets {
        let old = req.old_value(k);
        if is_volume(crate::state::GuestType::Qemu, k) {
            if let Some(old) = old {
                qemu_drive(ctx, vmid, k, old)?;
            }
            qemu_drive(ctx, vmid, k, v)?;
        } else if indexed(k, "serial") {
            if old.is_none_or(|o| o == "socket") && v == "socket" {
                vm(ctx, vmid, "VM.Config.HWType")?;
            } else {
                fail(format!(
                    "only root can modify '{k}' config for real devices"
                ))?;
            }
        } else if indexed(k, "usb") {
            if let Some(old) = old {
                usb(ctx, vmid, k, old)?;
            }
            usb(ctx, vmid, k, v)?;
        } else if indexed(k, "hostpci") {
            if let Some(old) = old {
                hostpci(ctx, vmid, k, old)?;
            }
            hostpci(ctx, vmid, k, v)?;
        } else if indexed(k, "virtiofs") {
            if let Some(old) = old {
                virtiofs(ctx, vmid, old)?;
            }
            virtiofs(ctx, vmid, v)?;
        } else if indexed(k, "net")
            && let Some(old) = old
        {
            bridge(ctx, st, old)?;
        }
    }
    Ok(())
}

/// 403 as pve-common `raise_perm_exc($what)` words it.
fn perm_exc(what: &str) -> Result<(), ApiError> {
    Err(ApiError::Status(
        403,
        format!("Permission check failed ({what})"),
    ))
}

/// LXC `features` as `parse_features` reads them: booleans normalised to `1`/`0`.
fn features(value: &str) -> BTreeMap<String, String> {
    props(value, "")
        .into_iter()
        .map(|(k, v)| {
            let v = match crate::schema::parse_bool(&v) {
                Some(b) if k != "mount" => u8::from(b).to_string(),
                _ => v,
            };
            (k, v)
        })
        .collect()
}

/// pve-container `src/PVE/LXC.pm` `check_ct_modify_config_perm`, for one key (`new`: its new
/// value, `None` when deleted).
fn lxc_key(
    ctx: &Ctx,
    st: &State,
    req: &Request,
    unprivileged: bool,
    key: &str,
    new: Option<&str>,
) -> Result<(), ApiError> {
    let vmid = req.vmid;
    match key {
        "cores" | "cpuunits" | "cpulimit" => vm(ctx, vmid, "VM.Config.CPU"),
        "memory" | "swap" => vm(ctx, vmid, "VM.Config.Memory"),
        "nameserver" | "searchdomain" | "hostname" => vm(ctx, vmid, "VM.Config.Network"),
        "hookscript" => perm_exc("changing the hookscript is only allowed for root@pam"),
        "tags" => vm(ctx, vmid, "VM.Config.Options"),
        "features" => {
            if !unprivileged {
                return perm_exc(
                    "changing feature flags for privileged container is only allowed for root@pam",
                );
            }
            let old = req.old_value(key).filter(|v| !v.is_empty()).map(features);
            let (mut nesting, mut other) = (false, false);
            match (new.map(features), old) {
                (Some(new), Some(old)) => {
                    // Existing container with features: which ones change.
                    for f in old.keys().chain(new.keys()) {
                        if old.get(f) != new.get(f) {
                            if f == "nesting" {
                                nesting = true;
                            } else {
                                other = true;
                                break;
                            }
                        }
                    }
                }
                (Some(set), None) | (None, Some(set)) => {
                    // A new container, no features yet, or all of them deleted.
                    if set.len() == 1 && set.contains_key("nesting") {
                        nesting = true;
                    } else if !set.is_empty() {
                        other = true;
                    }
                }
                (None, None) => {}
            }
            if other {
                return perm_exc(
                    "changing feature flags (except nesting) is only allowed for root@pam",
                );
            }
            if nesting {
                vm(ctx, vmid, "VM.Allocate")?;
            }
            Ok(())
        }
        _ if key == "rootfs" || indexed(key, "mp") => {
            vm(ctx, vmid, "VM.Config.Disk")?;
            let Some(value) = new else {
                return Ok(());
            };
            // `classify_mountpoint`: `/dev/...` is a device, another absolute path a bind mount.
            let volume = props(value, "volume").remove("volume").unwrap_or_default();
            if volume.starts_with('/') {
                let kind = if volume.starts_with("/dev/") {
                    "device"
                } else {
                    "bind"
                };
                return perm_exc(&format!(
                    "mount point type {kind} is only allowed for root@pam"
                ));
            }
            // `$NEW_DISK_RE`: `STORAGE:SIZE` allocates.
            if let Some((sid, size)) = volume.split_once(':')
                && !size.is_empty()
                && size.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            {
                ctx.require(&format!("/storage/{sid}"), "Datastore.AllocateSpace")?;
            }
            Ok(())
        }
        _ if indexed(key, "net") => {
            vm(ctx, vmid, "VM.Config.Network")?;
            // pve-container `check_bridge_access`, on the old and the new interface.
            if let Some(old) = req.old_value(key) {
                bridge(ctx, st, old)?;
            }
            if let Some(new) = new {
                bridge(ctx, st, new)?;
            }
            Ok(())
        }
        _ if indexed(key, "dev") => {
            perm_exc("configuring device passthrough is only allowed for root@pam")
        }
        _ => vm(ctx, vmid, "VM.Config.Options"),
    }
}

/// pve-container `check_ct_modify_config_perm` over a request: every set key, then every
/// deleted one (`API2/LXC.pm` `create_vm` passes `unprivileged` as requested or defaulted;
/// `API2/LXC/Config.pm` `update_vm` the container's `unprivileged` and checks deletions first).
pub(crate) fn lxc(
    ctx: &Ctx,
    st: &State,
    req: &Request,
    unprivileged: bool,
) -> Result<(), ApiError> {
    if ctx.root() {
        return Ok(());
    }
    if req.old.is_some() {
        for k in req.deletes {
            lxc_key(ctx, st, req, unprivileged, k, None)?;
        }
    }
    for (k, v) in req.sets {
        lxc_key(ctx, st, req, unprivileged, k, Some(v))?;
    }
    if req.old.is_none() {
        for k in req.deletes {
            lxc_key(ctx, st, req, unprivileged, k, None)?;
        }
    }
    Ok(())
}
