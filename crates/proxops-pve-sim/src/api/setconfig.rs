//! Writing guest configs, shared by create and the config setters of qemu and lxc: each value
//! becomes what PVE stores (allocated disks, NICs with MACs, normalised tags, booleans as 0/1),
//! `delete=` moves owned disks to `unusedN`, running guests collect non-hotpluggable changes as
//! pending ([`super::hotplug`]), and each key needs what [`super::perms`] says.

use std::collections::BTreeMap;

use super::Ctx;
use super::disks::{self, is_volume, volid_of};
use super::{hotplug, perms};
use crate::error::ApiError;
use crate::schema::{self, Ty, split_list};
use crate::state::{GuestType, State};
use crate::version::PveVersion;

/// Parameters of the create endpoints that are not config keys, beyond the config endpoints'
/// own ([`proxops_pve_schema::CONFIG_CONTROL`]).
const CREATE_ONLY: &[&str] = &[
    "archive",
    "bwlimit",
    "live-restore",
    "pool",
    "start",
    "storage",
    "unique",
    "ostemplate",
    "password",
    "ssh-public-keys",
    "restore",
    "ignore-unpack-errors",
];

/// Whether a request parameter steers the request rather than setting a config key.
fn is_control(name: &str) -> bool {
    proxops_pve_schema::CONFIG_CONTROL.contains(&name) || CREATE_ONLY.contains(&name)
}

fn family(key: &str) -> &str {
    key.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Whether an LXC create asks for an unprivileged container: pve-container
/// `src/PVE/API2/LXC.pm` `create_vm` takes `unprivileged` out of the config keys; absent, it is
/// 1 from PVE 9.0 ("api: create: default to unprivileged containers", pve-container 6.0.6) and
/// the schema's default 0 on 8.4.
pub(crate) fn lxc_create_unprivileged(
    version: PveVersion,
    requested: &BTreeMap<String, String>,
) -> bool {
    match requested.get("unprivileged") {
        Some(v) => schema::parse_bool(v) == Some(true),
        None => version.number() >= (9, 0),
    }
}

/// Normalises tags as PVE stores them: lowercased, unique, sorted, `;`-separated.
pub(crate) fn normalise_tags(v: &str) -> String {
    let mut tags: Vec<String> = split_list(v)
        .into_iter()
        .map(|t| t.to_lowercase())
        .collect();
    tags.sort();
    tags.dedup();
    tags.join(";")
}

fn param_type(version: PveVersion, kind: GuestType, key: &str) -> Option<Ty> {
    let path = match kind {
        GuestType::Qemu => "/nodes/{node}/qemu",
        GuestType::Lxc => "/nodes/{node}/lxc",
    };
    schema::endpoint("POST", path)
        .and_then(|e| e.param(version.schema(), key))
        .map(|p| p.ty)
}

/// A description as PVE reads it back after writing it as `#` lines: qemu-server
/// `write_vm_config` and pve-container `write_pct_config` write `split(/\n/)` (trailing empty
/// lines dropped), qemu-server's `parse_vm_config` strips trailing whitespace, pve-container's
/// `parse_pct_config` ends every line with a newline.
pub(crate) fn description_read_back(kind: GuestType, value: &str) -> String {
    let mut lines: Vec<&str> = value.split('\n').collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    match kind {
        GuestType::Qemu => lines.join("\n").trim_end().to_owned(),
        GuestType::Lxc => lines.iter().map(|l| format!("{l}\n")).collect(),
    }
}

/// The stored form of one requested value.
pub(crate) fn stored_value(
    st: &mut State,
    node: &str,
    vmid: u32,
    kind: GuestType,
    key: &str,
    value: &str,
) -> Result<String, ApiError> {
    if is_volume(kind, key) && family(key) != "unused" {
        return disks::process_drive(st, node, vmid, kind, key, value);
    }
    if family(key) == "net" {
        return disks::process_nic(st.pve_version, kind, key, value);
    }
    if key == "tags" {
        return Ok(normalise_tags(value));
    }
    if key == "description" {
        return Ok(description_read_back(kind, value));
    }
    if param_type(st.pve_version, kind, key) == Some(Ty::Bool) {
        return Ok(if schema::parse_bool(value) == Some(true) {
            "1"
        } else {
            "0"
        }
        .to_string());
    }
    Ok(value.to_string())
}

/// The config keys and values of a request, in name order.
pub(crate) fn requested(ctx: &Ctx) -> BTreeMap<String, String> {
    ctx.params
        .iter()
        .filter(|(k, _)| !is_control(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether a request creates the guest or changes an existing one (PVE checks storages of
/// the two differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// `POST /nodes/{node}/{qemu,lxc}`.
    Create,
    /// A config PUT or POST.
    Update,
}

/// The storage checks PVE makes before it allocates anything: `Datastore.AllocateSpace` on
/// every storage a new disk (`STORAGE:SIZE`) goes to, that storage's existence, and that it
/// holds the guest's content type, in PVE's words:
/// - qemu (create and update): qemu-server `src/PVE/API2/Qemu.pm` `$check_storage_access`,
///   `raise_param_exc({ storage => "storage '$storeid' does not support vm images" })` for a
///   new disk on a storage without `images`;
/// - lxc create: pve-container `src/PVE/API2/LXC.pm` `$check_and_activate_storage` for every
///   volume mount point, `raise_param_exc({ storage => "storage '$sid' does not support
///   container directories" })` without `rootdir`;
/// - lxc update: pve-container `src/PVE/LXC/Config.pm` `update_pct_config`
///   `$check_content_type`, `die "storage '$sid' does not allow content type 'rootdir'
///   (Container)\n"`.
///
/// A storage that does not exist fails as `PVE::Storage::storage_config` does: `storage '$sid'
/// does not exist`.
pub(crate) fn check_storage_access(
    ctx: &Ctx,
    st: &State,
    kind: GuestType,
    sets: &BTreeMap<String, String>,
    write: Write,
) -> Result<(), ApiError> {
    let node = ctx.node();
    for (k, v) in sets {
        if !is_volume(kind, k) || family(k) == "unused" {
            continue;
        }
        let first = v.split(',').next().unwrap_or_default();
        let file = first
            .strip_prefix("file=")
            .or_else(|| first.strip_prefix("volume="))
            .unwrap_or(first);
        // Paths (bind mounts, devices), `none`, `cdrom` and cdrom drives hold no guest content.
        let cdrom = v.split(',').any(|p| p == "media=cdrom");
        let Some((sid, rest)) = file.split_once(':').filter(|_| !file.starts_with('/')) else {
            continue;
        };
        let new = !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        let checked = match kind {
            GuestType::Qemu => new && !cdrom,
            GuestType::Lxc => true,
        };
        if !checked {
            continue;
        }
        if new {
            ctx.require(&format!("/storage/{sid}"), "Datastore.AllocateSpace")?;
        }
        let storage = st
            .storage(&node, sid)
            .ok_or_else(|| ApiError::fail(format!("storage '{sid}' does not exist")))?;
        match (kind, write) {
            (GuestType::Qemu, _) if !storage.has_content("images") => {
                return Err(ApiError::param(
                    "storage",
                    format!("storage '{sid}' does not support vm images"),
                ));
            }
            (GuestType::Lxc, Write::Create) if !storage.has_content("rootdir") => {
                return Err(ApiError::param(
                    "storage",
                    format!("storage '{sid}' does not support container directories"),
                ));
            }
            (GuestType::Lxc, Write::Update) if !storage.has_content("rootdir") => {
                return Err(ApiError::fail(format!(
                    "storage '{sid}' does not allow content type 'rootdir' (Container)"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Applies a config update to an existing guest (the caller checked node, lock and digest).
pub(crate) fn update(
    ctx: &Ctx,
    st: &mut State,
    kind: GuestType,
    vmid: u32,
) -> Result<(), ApiError> {
    let node = ctx.node();
    let sets = requested(ctx);
    let deletes = ctx.p("delete").map(split_list).unwrap_or_default();
    let reverts = ctx.p("revert").map(split_list).unwrap_or_default();
    if let Some(k) = deletes.iter().find(|k| sets.contains_key(*k)) {
        return Err(ApiError::param(
            k,
            "you can't change and delete the same option",
        ));
    }
    if kind == GuestType::Lxc && deletes.iter().any(|k| k == "rootfs") {
        return Err(ApiError::param(
            "rootfs",
            "unable to delete required option 'rootfs'",
        ));
    }
    let Some(g) = st.guests.get(&vmid) else {
        return Err(super::no_config(kind, &node, vmid));
    };
    let req = perms::Request {
        vmid,
        sets: &sets,
        deletes: &deletes,
        old: Some(&g.config),
    };
    match kind {
        GuestType::Qemu => perms::qemu_update(ctx, st, &req, || {
            check_storage_access(ctx, st, kind, &sets, Write::Update)
        })?,
        GuestType::Lxc => {
            let unprivileged = g.config.get("unprivileged").is_some_and(|v| v == "1");
            perms::lxc(ctx, st, &req, unprivileged)?;
            check_storage_access(ctx, st, kind, &sets, Write::Update)?;
        }
    }
    let running = g.running();

    let mut stored = Vec::new();
    for (k, v) in &sets {
        stored.push((k.clone(), stored_value(st, &node, vmid, kind, k, v)?));
    }
    let Some(g) = st.guests.get_mut(&vmid) else {
        return Err(super::no_config(kind, &node, vmid));
    };
    for k in &reverts {
        g.pending.remove(k);
        g.pending_delete.retain(|d| d != k);
    }
    // The hotplug rules read the config as it was before this request.
    let before = g.config.clone();
    let mut freed = Vec::new();
    for k in &deletes {
        if running && !hotplug::deletes_live(kind, &before, k) {
            if !g.pending_delete.contains(k) {
                g.pending_delete.push(k.clone());
            }
            continue;
        }
        g.pending.remove(k);
        let Some(old) = g.config.remove(k) else {
            continue;
        };
        if is_volume(kind, k)
            && let Some(vol) = volid_of(&old)
        {
            freed.push((k.clone(), vol.to_string()));
        }
    }
    for (k, v) in stored {
        if let Some(old) = g.config.get(&k) {
            // A replaced disk is kept as unused, as PVE does.
            if is_volume(kind, &k)
                && volid_of(old) != volid_of(&v)
                && let Some(vol) = volid_of(old)
            {
                freed.push((k.clone(), vol.to_string()));
            }
        }
        // Setting a key cancels its pending deletion (qemu-server and pve-container
        // `remove_from_pending_delete` in the update path).
        g.pending_delete.retain(|d| *d != k);
        if running && !hotplug::applies_live(kind, &before, &k, &v) {
            g.pending.insert(k, v);
        } else {
            g.pending.remove(&k);
            g.config.insert(k, v);
        }
    }
    for (k, vol) in freed {
        let owned = st
            .volumes
            .iter()
            .any(|v| v.volid == vol && v.vmid == Some(vmid));
        if !owned {
            continue;
        }
        if k.starts_with("unused") {
            st.remove_volume(&node, &vol);
        } else if let Some(g) = st.guests.get_mut(&vmid) {
            let slot = (0u32..)
                .map(|i| format!("unused{i}"))
                .find(|s| !g.config.contains_key(s));
            if let Some(slot) = slot {
                g.config.insert(slot, vol);
            }
        }
    }
    Ok(())
}
