//! Snapshots of qemu and lxc guests, as qemu-server `src/PVE/API2/Qemu.pm` and pve-container
//! `src/PVE/API2/LXC/Snapshot.pm` serve them over pve-guest-common `src/PVE/AbstractConfig.pm`
//! (`__snapshot_prepare`, `snapshot_delete`, `snapshot_rollback`): a snapshot copies the
//! current config, becomes the current state's `parent`, and is made, deleted and rolled back
//! in a worker (`qmsnapshot`, `qmdelsnapshot`, `qmrollback`; `vz...` for containers).

use serde_json::{Value, json};

use super::{Ctx, disks, guest, locks};
use crate::auth::now;
use crate::error::ApiError;
use crate::state::{GuestType, Snapshot, State};
use crate::tasks::{self, INJECTED};

fn task_prefix(kind: GuestType) -> &'static str {
    match kind {
        GuestType::Qemu => "qm",
        GuestType::Lxc => "vz",
    }
}

/// `GET .../snapshot`: every snapshot, then `current` ("You are here!").
pub(crate) fn list(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let mut out = Vec::new();
    for name in &g.snapshots {
        let s = g.snapshot_data.get(name).cloned().unwrap_or_default();
        let mut item = json!({
            "name": name,
            "snaptime": s.snaptime,
            "description": s.description,
        });
        if kind == GuestType::Qemu {
            item["vmstate"] = json!(u8::from(s.vmstate));
        }
        if let Some(p) = &s.parent {
            item["parent"] = json!(p);
        }
        out.push(item);
    }
    let mut current = json!({
        "name": "current",
        "description": "You are here!",
        "digest": super::guest::digest(g),
    });
    if kind == GuestType::Qemu {
        current["running"] = json!(u8::from(g.running()));
    }
    if let Some(p) = g.config.get("parent") {
        current["parent"] = json!(p);
    }
    out.push(current);
    Ok(Value::Array(out))
}

/// Whether every volume of a config can be snapshotted: `PVE::AbstractConfig::has_feature`
/// (qemu-server `PVE/QemuConfig.pm`: every drive but CD-ROMs and the cloud-init drive;
/// pve-container `PVE/LXC/Config.pm`: the root and every mount point) asks
/// pve-storage `PVE/Storage.pm` `volume_has_feature('snapshot', ...)` of each volume.
fn snapshot_feature(
    st: &State,
    node: &str,
    kind: GuestType,
    config: &std::collections::BTreeMap<String, String>,
) -> bool {
    config
        .iter()
        .filter(|(k, v)| {
            super::disks::is_volume(kind, k)
                && !k.starts_with("unused")
                && !v.split(',').any(|p| p == "media=cdrom")
        })
        .all(|(_, v)| {
            let volume = v.split(',').next().unwrap_or_default();
            let volume = volume
                .strip_prefix("file=")
                .or_else(|| volume.strip_prefix("volume="))
                .unwrap_or(volume);
            volume_has_snapshots(st, node, volume)
        })
}

/// pve-storage `PVE/Storage.pm` `volume_has_feature($cfg, 'snapshot', $volid)`: a path (a
/// passed-through `/dev/...` disk, a container's bind mount) has no storage and no snapshots
/// (`undef`); a volume asks its storage's plugin's `volume_has_feature`, with the format its
/// `parse_volname` reads:
/// - `LvmThinPlugin`, `ZFSPoolPlugin`, `ZFSPlugin` (ZFS over iSCSI), `RBDPlugin`: any volume;
/// - `BTRFSPlugin`: raw, qcow2 and subvol volumes;
/// - `Plugin` (dir, nfs, cifs, cephfs, glusterfs) and `LVMPlugin` (thick LVM): qcow2 only (an
///   LVM volume is qcow2 when PVE 9's `snapshot-as-volume-chain` made it so);
/// - `ISCSIPlugin`, `ISCSIDirectPlugin`, `PBSPlugin`, `ESXiPlugin`: none.
pub(crate) fn volume_has_snapshots(st: &State, node: &str, volume: &str) -> bool {
    let Some((sid, name)) = volume.split_once(':') else {
        return false;
    };
    if volume.starts_with('/') {
        return false;
    }
    let Some(storage) = st.storage(node, sid) else {
        return false;
    };
    let format = if name.ends_with(".qcow2") {
        "qcow2"
    } else if name.ends_with(".vmdk") {
        "vmdk"
    } else if name.ends_with(".subvol") || name.contains("subvol-") {
        "subvol"
    } else {
        "raw"
    };
    match storage.kind.as_str() {
        "lvmthin" | "zfspool" | "zfs" | "rbd" => true,
        "btrfs" => matches!(format, "raw" | "qcow2" | "subvol"),
        "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" | "lvm" => format == "qcow2",
        _ => false,
    }
}

/// What keeps qemu-server from saving a VM's memory (`PVE/QemuMigrate/Helpers.pm`
/// `check_non_migratable_resources` with `$state`): SEV or TDX guests and virtiofs shares.
fn vmstate_blockers(config: &std::collections::BTreeMap<String, String>) -> Vec<&'static str> {
    let mut out = Vec::new();
    if config.contains_key("amd-sev") {
        out.push("amd-sev");
    }
    if config.contains_key("intel-tdx") {
        out.push("intel-tdx");
    }
    if config.keys().any(|k| {
        k.strip_prefix("virtiofs")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }) {
        out.push("virtiofs");
    }
    out
}

/// `POST .../snapshot`: the reserved names refused at once; the rest in the worker, whose first
/// step (`__snapshot_prepare` under the config lock) refuses a template, a locked guest, a used
/// name and storage without snapshots, then sets `lock: snapshot` until `__snapshot_commit`.
pub(crate) fn create(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot")?;
    let name = ctx.req("snapname")?;
    // qemu-server `snapshot`: `current` and `pending`; pve-container `snapshot`: `current`
    // and `vzdump` (the name vzdump's snapshot mode uses).
    let reserved = match kind {
        GuestType::Qemu => name == "current" || name.eq_ignore_ascii_case("pending"),
        GuestType::Lxc => name == "current" || name == "vzdump",
    };
    if reserved {
        return Err(ApiError::fail(format!(
            "unable to use snapshot name '{name}' (reserved name)"
        )));
    }
    let vmstate = kind == GuestType::Qemu && ctx.flag("vmstate").unwrap_or(false);
    let description = ctx.p("description").unwrap_or_default().to_string();
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    // qemu-server `snapshot` checks this before it forks the worker.
    let blockers = if vmstate {
        vmstate_blockers(&g.config)
    } else {
        Vec::new()
    };
    if !blockers.is_empty() {
        return Err(ApiError::fail(format!(
            "Cannot live-migrate, snapshot (with RAM), or hibernate a VM with: {}",
            blockers.join(", ")
        )));
    }
    let job = match prepare_snapshot(&mut st, vmid, kind, &name, vmstate) {
        Err(e) => tasks::failed(e),
        Ok((config, state_volume)) => {
            let snaptime = now();
            Box::new(move |st: &mut State, fail| {
                if fail {
                    if let Some(volid) = &state_volume {
                        let node = st.guests.get(&vmid).map(|g| g.node.clone());
                        if let Some(node) = node {
                            st.remove_volume(&node, volid);
                        }
                    }
                    locks::release(st, vmid, "snapshot");
                    return Err(INJECTED.into());
                }
                locks::release(st, vmid, "snapshot");
                let Some(g) = st.guests.get_mut(&vmid) else {
                    return Err("guest vanished".into());
                };
                let mut config = config;
                let parent = config.remove("parent");
                if let Some(volid) = &state_volume {
                    config.insert("vmstate".into(), volid.clone());
                }
                let snap = Snapshot {
                    config,
                    description,
                    snaptime,
                    vmstate: state_volume.is_some(),
                    parent,
                };
                g.snapshot_data.insert(name.clone(), snap);
                g.snapshots.push(name.clone());
                g.config.insert("parent".into(), name);
                Ok(Vec::new())
            }) as tasks::Job
        }
    };
    let prefix = task_prefix(kind);
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        &format!("{prefix}snapshot"),
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// `__snapshot_prepare`: the checks, `lock: snapshot`, the vmstate volume of a running VM
/// (`vm-N-state-NAME`, qemu-server `PVE/QemuConfig.pm` `__snapshot_save_vmstate`), and the
/// config copy (`__snapshot_copy_config`: no `description`, no `unusedN`, no bookkeeping).
fn prepare_snapshot(
    st: &mut State,
    vmid: u32,
    kind: GuestType,
    name: &str,
    vmstate: bool,
) -> Result<(std::collections::BTreeMap<String, String>, Option<String>), String> {
    let Some(g) = st.guests.get(&vmid) else {
        return Err("guest vanished".into());
    };
    if g.is_template() {
        return Err("you can't take a snapshot if it's a template".into());
    }
    if let Some(lock) = g.lock() {
        return Err(format!("{} is locked ({lock})", kind.word()));
    }
    if g.snapshot_data.contains_key(name) || g.snapshots.iter().any(|s| s == name) {
        return Err(format!("snapshot name '{name}' already used"));
    }
    let node = g.node.clone();
    if !snapshot_feature(st, &node, kind, &g.config) {
        return Err("snapshot feature is not available".into());
    }
    let running = g.running();
    let config: std::collections::BTreeMap<String, String> = g
        .config
        .iter()
        .filter(|(k, _)| !SNAPSHOT_SKIPS.contains(&k.as_str()) && !is_unused(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let state_storage = (vmstate && running).then(|| vmstate_storage(st, &node, &g.config));
    locks::take(st, vmid, "snapshot")?;
    let state_volume = match state_storage.flatten() {
        Some(sid) => {
            let fixed = format!("vm-{vmid}-state-{name}");
            match disks::allocate_named(
                st,
                &node,
                &sid,
                vmid,
                vmstate_size(&config),
                Some("raw"),
                kind,
                Some(&fixed),
            ) {
                Ok(volid) => Some(volid),
                Err(e) => {
                    locks::release(st, vmid, "snapshot");
                    return Err(e.text());
                }
            }
        }
        None => None,
    };
    Ok((config, state_volume))
}

/// The size of a vmstate volume: qemu-server `PVE/QemuConfig.pm` `__snapshot_save_vmstate`
/// allocates twice the memory plus 500 MiB.
pub(crate) fn vmstate_size(config: &std::collections::BTreeMap<String, String>) -> u64 {
    let memory_mib: u64 = config
        .get("memory")
        .and_then(|m| {
            m.split(',')
                .next()?
                .trim_start_matches("current=")
                .parse()
                .ok()
        })
        .unwrap_or(512);
    (memory_mib * 2 + 500) << 20
}

/// Keys `__snapshot_copy_config` leaves out (besides `unusedN`).
const SNAPSHOT_SKIPS: &[&str] = &[
    "snapshots",
    "snapstate",
    "snaptime",
    "vmstate",
    "lock",
    "digest",
    "description",
];

fn is_unused(key: &str) -> bool {
    key.strip_prefix("unused")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// qemu-server `find_vmstate_storage`: `vmstatestorage`, else the storage of the first disk
/// (PVE prefers a shared one among them), else `local`.
pub(crate) fn vmstate_storage(
    st: &State,
    node: &str,
    config: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    if let Some(s) = config.get("vmstatestorage") {
        return Some(s.clone());
    }
    let sids: Vec<&str> = config
        .iter()
        .filter(|(k, v)| {
            disks::is_volume(GuestType::Qemu, k) && !is_unused(k) && !v.contains("media=cdrom")
        })
        .filter_map(|(_, v)| disks::volid_of(v)?.split_once(':').map(|(sid, _)| sid))
        .collect();
    let shared = sids
        .iter()
        .find(|sid| st.storage(node, sid).is_some_and(|s| s.shared));
    shared
        .or(sids.first())
        .map(|s| s.to_string())
        .or_else(|| Some("local".into()))
}

fn snapshot_of<'a>(g: &'a crate::state::Guest, name: &str) -> Result<&'a Snapshot, ApiError> {
    g.snapshot_data
        .get(name)
        .ok_or_else(|| ApiError::fail(format!("snapshot '{name}' does not exist")))
}

/// `GET .../snapshot/{snapname}`: the commands under it.
pub(crate) fn index(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    snapshot_of(g, &ctx.req("snapname")?)?;
    Ok(json!([{ "cmd": "rollback" }, { "cmd": "config" }]))
}

/// `GET .../snapshot/{snapname}/config`.
pub(crate) fn config(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let s = snapshot_of(g, &ctx.req("snapname")?)?;
    let mut out = serde_json::Map::new();
    for (k, v) in &s.config {
        out.insert(k.clone(), super::guest::typed(st.pve_version, kind, k, v));
    }
    out.insert("snaptime".into(), json!(s.snaptime));
    if !s.description.is_empty() {
        out.insert("description".into(), json!(s.description));
    }
    if let Some(p) = &s.parent {
        out.insert("parent".into(), json!(p));
    }
    Ok(Value::Object(out))
}

/// `PUT .../snapshot/{snapname}/config`: only the description changes.
pub(crate) fn update(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot")?;
    let name = ctx.req("snapname")?;
    let description = ctx.p("description").map(str::to_string);
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    snapshot_of(g, &name)?;
    if let (Some(d), Some(g)) = (description, st.guests.get_mut(&vmid))
        && let Some(s) = g.snapshot_data.get_mut(&name)
    {
        s.description = d;
    }
    Ok(Value::Null)
}

/// `DELETE .../snapshot/{snapname}`: its children and the current state take its parent. In
/// the worker (`snapshot_delete`): a missing snapshot, a template, a locked guest (unless
/// `force`), then `lock: snapshot-delete` until the end; its vmstate volume goes with it.
pub(crate) fn delete(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot")?;
    let name = ctx.req("snapname")?;
    let force = ctx.flag("force").unwrap_or(false);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    guest(&st, kind, &node, vmid)?;
    let job = match prepare_delete(&mut st, vmid, &name, force) {
        Err(e) => tasks::failed(e),
        Ok(()) => Box::new(move |st: &mut State, fail| {
            locks::release(st, vmid, "snapshot-delete");
            if fail {
                return Err(INJECTED.into());
            }
            let Some(g) = st.guests.get_mut(&vmid) else {
                return Err("guest vanished".into());
            };
            let Some(gone) = g.snapshot_data.remove(&name) else {
                return Err(format!("snapshot '{name}' does not exist"));
            };
            g.snapshots.retain(|s| *s != name);
            for s in g.snapshot_data.values_mut() {
                if s.parent.as_deref() == Some(name.as_str()) {
                    s.parent = gone.parent.clone();
                }
            }
            if g.config.get("parent") == Some(&name) {
                match &gone.parent {
                    Some(p) => {
                        g.config.insert("parent".into(), p.clone());
                    }
                    None => {
                        g.config.remove("parent");
                    }
                }
            }
            let node = g.node.clone();
            if let Some(volid) = gone.config.get("vmstate") {
                st.remove_volume(&node, volid);
            }
            Ok(Vec::new())
        }) as tasks::Job,
    };
    let prefix = task_prefix(kind);
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        &format!("{prefix}delsnapshot"),
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// `snapshot_delete`'s first step under the config lock.
fn prepare_delete(st: &mut State, vmid: u32, name: &str, force: bool) -> Result<(), String> {
    let Some(g) = st.guests.get(&vmid) else {
        return Err("guest vanished".into());
    };
    if !g.snapshot_data.contains_key(name) {
        return Err(format!("snapshot '{name}' does not exist"));
    }
    if g.is_template() {
        return Err("you can't delete a snapshot if vm is a template".into());
    }
    if force {
        // `force` skips `check_lock`; the lock is set over whatever was there.
        if let Some(g) = st.guests.get_mut(&vmid) {
            g.config.insert("lock".into(), "snapshot-delete".into());
        }
        return Ok(());
    }
    locks::take(st, vmid, "snapshot-delete")
}

/// `POST .../snapshot/{snapname}/rollback` (`VM.Snapshot` or `VM.Snapshot.Rollback`; qemu's
/// `start=1` also needs `VM.PowerMgmt`, checked up front as qemu-server does). In the worker
/// (`snapshot_rollback`): a template, a missing snapshot, a locked guest; the guest is stopped
/// and `lock: rollback` set; then the snapshot's config becomes current, keeping the current
/// `description` and `unusedN` and turning disks the snapshot does not have into `unusedN`
/// (qemu-server `__snapshot_rollback_get_unused`), `parent` naming the snapshot; started again
/// when it holds RAM or `start` says so.
pub(crate) fn rollback(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require_any(
        &format!("/vms/{vmid}"),
        &["VM.Snapshot", "VM.Snapshot.Rollback"],
    )?;
    let name = ctx.req("snapname")?;
    let start = ctx.flag("start").unwrap_or(false);
    if start && kind == GuestType::Qemu {
        ctx.require(&format!("/vms/{vmid}"), "VM.PowerMgmt")?;
    }
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    guest(&st, kind, &node, vmid)?;
    let job = match prepare_rollback(&mut st, vmid, kind, &name) {
        Err(e) => tasks::failed(e),
        Ok(()) => Box::new(move |st: &mut State, fail| {
            locks::release(st, vmid, "rollback");
            if fail {
                return Err(INJECTED.into());
            }
            let Some(g) = st.guests.get_mut(&vmid) else {
                return Err("guest vanished".into());
            };
            let Some(snap) = g.snapshot_data.get(&name).cloned() else {
                return Err(format!("snapshot '{name}' does not exist"));
            };
            let in_snapshot: Vec<&str> = snap
                .config
                .iter()
                .filter(|(k, v)| super::disks::is_volume(kind, k) && !v.contains("media=cdrom"))
                .filter_map(|(_, v)| super::disks::volid_of(v))
                .collect();
            let mut unused: Vec<String> = g
                .config
                .iter()
                .filter(|(k, _)| is_unused(k))
                .map(|(_, v)| v.clone())
                .collect();
            for (k, v) in &g.config {
                if !super::disks::is_volume(kind, k) || is_unused(k) || v.contains("media=cdrom") {
                    continue;
                }
                if let Some(volid) = super::disks::volid_of(v)
                    && !in_snapshot.contains(&volid)
                    && !volid.starts_with('/')
                    && !unused.iter().any(|u| u == volid)
                {
                    unused.push(volid.to_owned());
                }
            }
            let mut config: std::collections::BTreeMap<String, String> = snap
                .config
                .iter()
                .filter(|(k, _)| k.as_str() != "vmstate")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(d) = g.config.get("description") {
                config.insert("description".into(), d.clone());
            }
            for (i, volid) in unused.into_iter().enumerate() {
                config.insert(format!("unused{i}"), volid);
            }
            config.insert("parent".into(), name);
            g.pending.clear();
            g.pending_delete.clear();
            g.config = config;
            if snap.vmstate || start {
                g.status = "running".into();
                g.mark_started();
            }
            Ok(Vec::new())
        }) as tasks::Job,
    };
    let prefix = task_prefix(kind);
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        &format!("{prefix}rollback"),
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// `snapshot_rollback`'s prepare pass: the checks, the guest stopped
/// (`__snapshot_rollback_vm_stop`), `lock: rollback`.
fn prepare_rollback(st: &mut State, vmid: u32, kind: GuestType, name: &str) -> Result<(), String> {
    let Some(g) = st.guests.get(&vmid) else {
        return Err("guest vanished".into());
    };
    if g.is_template() {
        return Err("you can't rollback if vm is a template".into());
    }
    if !g.snapshot_data.contains_key(name) {
        return Err(format!("snapshot '{name}' does not exist"));
    }
    if let Some(lock) = g.lock() {
        return Err(format!("{} is locked ({lock})", kind.word()));
    }
    if let Some(g) = st.guests.get_mut(&vmid) {
        g.status = "stopped".into();
        g.mark_stopped();
    }
    locks::take(st, vmid, "rollback")
}

macro_rules! per_kind {
    ($($name:ident => $f:ident, $kind:expr;)*) => {
        $(
            pub(crate) fn $name(ctx: &mut Ctx) -> Result<Value, ApiError> {
                $f(ctx, $kind)
            }
        )*
    };
}

per_kind! {
    qemu_list => list, GuestType::Qemu;
    qemu_create => create, GuestType::Qemu;
    qemu_index => index, GuestType::Qemu;
    qemu_config => config, GuestType::Qemu;
    qemu_update => update, GuestType::Qemu;
    qemu_delete => delete, GuestType::Qemu;
    qemu_rollback => rollback, GuestType::Qemu;
    lxc_list => list, GuestType::Lxc;
    lxc_create => create, GuestType::Lxc;
    lxc_index => index, GuestType::Lxc;
    lxc_config => config, GuestType::Lxc;
    lxc_update => update, GuestType::Lxc;
    lxc_delete => delete, GuestType::Lxc;
    lxc_rollback => rollback, GuestType::Lxc;
}
