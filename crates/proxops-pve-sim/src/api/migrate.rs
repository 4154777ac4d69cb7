//! Migration to another node of the cluster, as qemu-server `src/PVE/API2/Qemu.pm` `migrate_vm`
//! with `src/PVE/QemuMigrate.pm`, and pve-container `src/PVE/API2/LXC.pm` `migrate_vm` with
//! `src/PVE/LXC/Migrate.pm`, refuse and do it: the checks before the worker (`target is local
//! node.`, a node that is not in the cluster, a running guest without `online`/`restart`), then
//! a `qmigrate`/`vzmigrate` worker that moves local volumes to the same storage on the target
//! (refusing a running VM's local disks without `with-local-disks`, and a storage the target
//! lacks) and the guest with them. An HA-managed guest's migration is a `hamigrate` request.

use serde_json::Value;

use super::guest::check_lock;
use super::{Ctx, guest, locks};
use crate::error::ApiError;
use crate::state::{GuestType, State};
use crate::tasks::{self, INJECTED};

pub(crate) fn qemu(ctx: &mut Ctx) -> Result<Value, ApiError> {
    migrate(ctx, GuestType::Qemu)
}

pub(crate) fn lxc(ctx: &mut Ctx) -> Result<Value, ApiError> {
    migrate(ctx, GuestType::Lxc)
}

fn migrate(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Migrate")?;
    let target = ctx.req("target")?;
    if target == node {
        return Err(ApiError::param("target", "target is local node."));
    }
    let mut online = ctx.flag("online").unwrap_or(false);
    let restart = ctx.flag("restart").unwrap_or(false);
    let local_disks = ctx.flag("with-local-disks").unwrap_or(false);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    // `PVE::Cluster::check_node_exists`.
    if st.node(&target).is_none() {
        return Err(ApiError::fail(format!("no such cluster node '{target}'")));
    }
    let g = guest(&st, kind, &node, vmid)?;
    check_lock(ctx, g)?;
    let running = g.running();
    match kind {
        GuestType::Qemu if running && !online => {
            return Err(ApiError::fail("can't migrate running VM without --online"));
        }
        // qemu-server `migrate_vm`: "VM isn't running. Doing offline migration instead."
        GuestType::Qemu if !running => online = false,
        GuestType::Lxc if running && !online && !restart => {
            return Err(ApiError::fail(
                "can't migrate running container without --online or --restart",
            ));
        }
        _ => {}
    }
    if kind == GuestType::Qemu {
        // qemu-server `PVE/QemuServer.pm` `check_storage_availability`, before the worker.
        storage_availability(&st, g, &target).map_err(ApiError::fail)?;
    }
    let user = ctx.who().task_user();
    if st.ha_of(vmid).is_some_and(|r| r.state != "ignored") {
        // pve-ha-manager `src/PVE/API2/HA/Resources.pm` `migrate` through `HA/Config.pm`
        // `queue_crm_commands`: the task only queues `migrate <sid> <node>`; the CRM moves the
        // guest rounds later (`crm_state` `migrate` until then).
        let word = kind.word();
        let later = shared.clone();
        let job: tasks::Job = Box::new(move |st: &mut State, fail| {
            if fail {
                return Err(INJECTED.into());
            }
            st.ha_migrations.insert(vmid, target.clone());
            crm_migrates_later(&later, vmid);
            Ok(vec![format!(
                "Requesting HA migration for {word} {vmid} to node {target}"
            )])
        });
        return Ok(tasks::spawn(
            &shared,
            &mut st,
            &node,
            "hamigrate",
            &vmid.to_string(),
            &user,
            None,
            job,
        )
        .into());
    }
    // PVE's task types: `qmigrate` (sic) and `vzmigrate`.
    let task = if kind == GuestType::Qemu {
        "qmigrate"
    } else {
        "vzmigrate"
    };
    // `phase1` sets `lock: migrate`; the whole migration runs under the config lock
    // (`PVE/AbstractMigrate.pm` `migrate` → `lock_vm`).
    locks::take(&mut st, vmid, "migrate").map_err(ApiError::fail)?;
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        locks::release(st, vmid, "migrate");
        let started = format!(
            "starting migration of {} {vmid} to node '{target}'",
            kind.word()
        );
        let result = if fail {
            Err(INJECTED.to_string())
        } else if kind == GuestType::Lxc && online && running {
            // pve-container `PVE/LXC/Migrate.pm` `prepare`: only for a running container.
            Err("lxc live migration is currently not implemented".to_string())
        } else {
            let allow_local = kind == GuestType::Lxc || !running || local_disks;
            move_guest(st, vmid, &target, allow_local, false)
        };
        match result {
            Ok(()) => Ok(vec![
                started,
                "migration finished successfully (duration 00:00:01)".into(),
            ]),
            // `AbstractMigrate::migrate`: the error goes to the log, the task dies with
            // `migration aborted`.
            Err(e) => {
                let mut lines = vec![started];
                let mut detail: Vec<&str> = e.lines().collect();
                let last = detail.pop().unwrap_or_default();
                lines.extend(detail.iter().map(|l| l.to_string()));
                lines.push(format!(
                    "ERROR: migration aborted (duration 00:00:01): {last}"
                ));
                lines.push("migration aborted".into());
                Err(lines.join("\n"))
            }
        }
    });
    Ok(tasks::spawn_holding(
        &shared,
        &mut st,
        &node,
        task,
        &vmid.to_string(),
        &user,
        (kind, vmid),
        job,
    )
    .into())
}

/// qemu-server `check_storage_availability`: each volume's storage enabled on the target
/// (`storage_check_enabled`: `storage 'X' is not available on node 'Y'`).
fn storage_availability(st: &State, g: &crate::state::Guest, target: &str) -> Result<(), String> {
    for (key, value) in &g.config {
        if !super::disks::is_volume(g.kind, key) {
            continue;
        }
        let Some((sid, _)) = super::disks::volid_of(value).and_then(|v| v.split_once(':')) else {
            continue;
        };
        if st.storage(target, sid).is_none() {
            return Err(format!(
                "storage '{sid}' is not available on node '{target}'"
            ));
        }
    }
    Ok(())
}

/// `GET /nodes/{node}/qemu/{vmid}/migrate`: qemu-server `migrate_vm_precondition` (what the
/// GUI asks before it offers a migration): `running`, the nodes the VM's storages reach
/// (`allowed_nodes`) and those they do not (`not_allowed_nodes` with `unavailable_storages`),
/// its local disks and its local resources (passthrough without a mapping).
pub(crate) fn qemu_precondition(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Migrate")?;
    let st = ctx.state();
    let g = guest(&st, GuestType::Qemu, &node, vmid)?;
    if let Some(l) = g.lock() {
        return Err(ApiError::fail(format!("VM is locked ({l})")));
    }
    let mut local_disks = Vec::new();
    let mut sids = std::collections::BTreeSet::new();
    for (key, value) in &g.config {
        if !super::disks::is_volume(GuestType::Qemu, key) {
            continue;
        }
        let Some(volid) = super::disks::volid_of(value) else {
            continue;
        };
        let Some((sid, _)) = volid.split_once(':') else {
            continue;
        };
        sids.insert(sid.to_owned());
        let Some(storage) = st.storage(&node, sid) else {
            continue;
        };
        if storage.shared {
            continue;
        }
        let size = st.volume(&node, volid).map(|v| v.size).unwrap_or(0);
        local_disks.push(serde_json::json!({
            "volid": volid,
            "size": size,
            "cdrom": u8::from(value.contains("media=cdrom")),
            "is_unused": u8::from(key.starts_with("unused")),
        }));
    }
    let local_resources: Vec<&String> = g
        .config
        .iter()
        .filter(|(k, v)| {
            let numbered = |p: &str| {
                k.strip_prefix(p)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            };
            (numbered("hostpci") || numbered("usb"))
                && !v.split(',').any(|p| p.starts_with("mapping="))
                && !v.starts_with("spice")
        })
        .map(|(k, _)| k)
        .collect();
    let mut allowed = Vec::new();
    let mut not_allowed = serde_json::Map::new();
    for other in st
        .nodes
        .iter()
        .map(|n| n.node.as_str())
        .filter(|n| *n != node)
    {
        let missing: Vec<&String> = sids
            .iter()
            .filter(|sid| st.storage(other, sid).is_none())
            .collect();
        if missing.is_empty() {
            allowed.push(other);
        } else {
            not_allowed.insert(
                other.to_owned(),
                serde_json::json!({ "unavailable_storages": missing }),
            );
        }
    }
    let mut out = serde_json::json!({
        "running": u8::from(g.running()),
        "allowed_nodes": allowed,
        "not_allowed_nodes": not_allowed,
        "local_disks": local_disks,
        "local_resources": local_resources,
        "mapped-resources": [],
        "mapped-resource-info": {},
    });
    if st.pve_version.number().0 >= 9 {
        out["has-dbus-vmstate"] = serde_json::json!(1);
        if st.ha_of(vmid).is_some() {
            out["dependent-ha-resources"] = serde_json::json!([]);
        }
    }
    Ok(out)
}

/// The CRM and the LRMs carrying out a queued HA migration a migration's time later: the guest
/// moves as `qmigrate`/`vzmigrate` would move it (online for a running VM, restart mode for a
/// container), unless the resource left HA or was asked elsewhere meanwhile. A refused move
/// leaves it where it is, as the CRM does (the service goes back to `started` on its node).
fn crm_migrates_later(shared: &std::sync::Arc<crate::server::Shared>, vmid: u32) {
    let delay = crate::server::lock(&shared.durations).of("qmigrate");
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut st = crate::server::lock(&shared.state);
        if let Some(target) = st.ha_migrations.remove(&vmid) {
            if st.ha_of(vmid).is_some() {
                let _ = move_guest(&mut st, vmid, &target, true, false);
            }
            shared.persist(&st);
        }
    });
}

/// Moves the guest and its local volumes to `target` (each to the storage of the same id there).
fn move_guest(
    st: &mut State,
    vmid: u32,
    target: &str,
    allow_local: bool,
    ha: bool,
) -> Result<(), String> {
    let Some(g) = st.guests.get(&vmid).cloned() else {
        return Err("guest vanished".into());
    };
    let source = g.node.clone();
    let mut moved = Vec::new();
    // pve-container `PVE/LXC/Migrate.pm` `prepare`: bind and device mount points only with
    // `shared=1`.
    if g.kind == GuestType::Lxc {
        for (key, value) in &g.config {
            let mp = key
                .strip_prefix("mp")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            let shared = value
                .split(',')
                .any(|p| matches!(p, "shared=1" | "shared=yes" | "shared=on" | "shared=true"));
            if mp && value.starts_with('/') && !shared {
                let kind = if value.starts_with("/dev/") {
                    "device"
                } else {
                    "bind"
                };
                return Err(format!("cannot migrate local {kind} mount point '{key}'"));
            }
        }
    }
    for (key, value) in &g.config {
        if !super::disks::is_volume(g.kind, key) {
            continue;
        }
        let Some(volid) = super::disks::volid_of(value) else {
            continue;
        };
        let Some((sid, _)) = volid.split_once(':') else {
            continue;
        };
        let Some(storage) = st.storage(&source, sid) else {
            continue;
        };
        if storage.shared {
            continue;
        }
        // `scan_local_volumes`: a cloud-init drive is `generated`, moved offline even for a
        // running VM; any other local cdrom image stops the migration.
        let cloud_init = is_cloud_init(volid);
        if value.contains("media=cdrom") && !cloud_init {
            return Err(format!("can't migrate local cdrom image '{volid}'"));
        }
        if !allow_local && !ha && !cloud_init {
            return Err(format!(
                "can't migrate local disk '{volid}': can't live migrate attached local disks without with-local-disks option"
            ));
        }
        if st.storage(target, sid).is_none() {
            return Err(format!(
                "storage '{sid}' is not available on node '{target}'"
            ));
        }
        moved.push(volid.to_owned());
    }
    if !ha {
        snapshot_check(st, &g, &source)?;
    }
    for v in st.volumes.iter_mut() {
        if v.node == source && moved.contains(&v.volid) {
            v.node = target.to_owned();
        }
    }
    if let Some(g) = st.guests.get_mut(&vmid) {
        g.node = target.to_owned();
        if g.kind == GuestType::Lxc && g.running() {
            // Restart mode: stopped on the source, started on the target.
            g.mark_started();
        }
    }
    Ok(())
}

/// `vm-<id>-cloudinit`, the drive qemu-server generates.
fn is_cloud_init(volid: &str) -> bool {
    volid
        .split_once(':')
        .and_then(|(_, name)| name.rsplit('/').next())
        .and_then(|name| name.strip_prefix("vm-"))
        .and_then(|rest| rest.split_once("-cloudinit"))
        .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// qemu-server `PVE/QemuMigrate.pm` `scan_local_volumes`: a local volume a snapshot references
/// stops a running VM's migration, and a stopped one's unless the storage carries snapshots
/// over (zfspool, raw on btrfs, qcow2); pve-container `PVE/LXC/Migrate.pm` `prepare` allows a
/// container's on zfspool and btrfs only. The worker logs the volume, then fails.
fn snapshot_check(st: &State, g: &crate::state::Guest, source: &str) -> Result<(), String> {
    for snapshot in g.snapshot_data.values() {
        for (key, value) in &snapshot.config {
            if key == "vmstate" || !super::disks::is_volume(g.kind, key) {
                continue;
            }
            let Some(volid) = super::disks::volid_of(value) else {
                continue;
            };
            let Some(storage) = volid
                .split_once(':')
                .and_then(|(sid, _)| st.storage(source, sid))
            else {
                continue;
            };
            if storage.shared || is_cloud_init(volid) {
                continue;
            }
            let why = if g.kind == GuestType::Lxc {
                // pve-container `PVE/LXC/Migrate.pm` `prepare`: zfspool and btrfs only.
                (storage.kind != "zfspool" && storage.kind != "btrfs")
                    .then_some("non-migratable snapshot exists")
            } else if g.running() {
                Some("online storage migration not possible if non-replicated snapshot exists")
            } else {
                let qcow2 = volid.ends_with(".qcow2");
                let raw = !qcow2 && !volid.ends_with(".vmdk");
                let carried =
                    storage.kind == "zfspool" || (storage.kind == "btrfs" && raw) || qcow2;
                (!carried).then_some("non-migratable snapshot exists")
            };
            if let Some(why) = why {
                return Err(format!(
                    "can't migrate local disk '{volid}': {why}\ncan't migrate VM - check log"
                ));
            }
        }
    }
    Ok(())
}
