//! Migration to another node of the cluster, as qemu-server `src/PVE/API2/Qemu.pm` `migrate_vm`
//! with `src/PVE/QemuMigrate.pm`, and pve-container `src/PVE/API2/LXC.pm` `migrate_vm` with
//! `src/PVE/LXC/Migrate.pm`, refuse and do it: the checks before the worker (`target is local
//! node.`, a node that is not in the cluster, a running guest without `online`/`restart`), then
//! a `qmigrate`/`vzmigrate` worker that moves local volumes to the same storage on the target
//! (refusing a running VM's local disks without `with-local-disks`, and a storage the target
//! lacks) and the guest with them. An HA-managed guest's migration is a `hamigrate` request.

use serde_json::Value;

use super::guest::check_lock;
use super::{Ctx, guest};
use crate::error::ApiError;
use crate::state::{GuestKind, State};
use crate::tasks::{self, INJECTED};

pub(crate) fn qemu(ctx: &mut Ctx) -> Result<Value, ApiError> {
    migrate(ctx, GuestKind::Qemu)
}

pub(crate) fn lxc(ctx: &mut Ctx) -> Result<Value, ApiError> {
    migrate(ctx, GuestKind::Lxc)
}

fn migrate(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Migrate")?;
    let target = ctx.req("target")?;
    if target == node {
        return Err(ApiError::param("target", "target is local node."));
    }
    let online = ctx.flag("online").unwrap_or(false);
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
        GuestKind::Qemu if running && !online => {
            return Err(ApiError::fail("can't migrate running VM without --online"));
        }
        GuestKind::Lxc if running && !online && !restart => {
            return Err(ApiError::fail(
                "can't migrate running container without --online or --restart",
            ));
        }
        _ => {}
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
    let task = if kind == GuestKind::Qemu {
        "qmigrate"
    } else {
        "vzmigrate"
    };
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if kind == GuestKind::Lxc && online {
            return Err("lxc live migration is currently not implemented".into());
        }
        if fail {
            return Err(INJECTED.into());
        }
        let allow_local = kind == GuestKind::Lxc || !running || local_disks;
        move_guest(st, vmid, &target, allow_local, false)?;
        Ok(Vec::new())
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        task,
        &vmid.to_string(),
        &user,
        None,
        job,
    )
    .into())
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
    if g.kind == GuestKind::Lxc {
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
        if !super::disks::is_disk_key(g.kind, key) {
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
        if g.kind == GuestKind::Lxc && g.running() {
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
            if key == "vmstate" || !super::disks::is_disk_key(g.kind, key) {
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
            let why = if g.kind == GuestKind::Lxc {
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
