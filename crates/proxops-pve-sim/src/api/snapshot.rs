//! Snapshots of qemu and lxc guests, as qemu-server `src/PVE/API2/Qemu.pm` and pve-container
//! `src/PVE/API2/LXC/Snapshot.pm` serve them over pve-guest-common `src/PVE/AbstractConfig.pm`
//! (`__snapshot_prepare`, `snapshot_delete`, `snapshot_rollback`): a snapshot copies the
//! current config, becomes the current state's `parent`, and is made, deleted and rolled back
//! in a worker (`qmsnapshot`, `qmdelsnapshot`, `qmrollback`; `vz...` for containers).

use serde_json::{Value, json};

use super::guest::check_lock;
use super::{Ctx, guest};
use crate::auth::now;
use crate::error::ApiError;
use crate::state::{GuestKind, Snapshot, State};
use crate::tasks::{self, INJECTED};

fn task_prefix(kind: GuestKind) -> &'static str {
    match kind {
        GuestKind::Qemu => "qm",
        GuestKind::Lxc => "vz",
    }
}

/// `GET .../snapshot`: every snapshot, then `current` ("You are here!").
pub(crate) fn list(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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
        if kind == GuestKind::Qemu {
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
    if kind == GuestKind::Qemu {
        current["running"] = json!(u8::from(g.running()));
    }
    if let Some(p) = g.config.get("parent") {
        current["parent"] = json!(p);
    }
    out.push(current);
    Ok(Value::Array(out))
}

/// Whether every volume of a config can be snapshotted (`has_feature('snapshot')`: thin and
/// copy-on-write storages, or qcow2 files; not raw files or thick LVM).
fn snapshot_feature(
    st: &State,
    node: &str,
    kind: GuestKind,
    config: &std::collections::BTreeMap<String, String>,
) -> bool {
    config
        .iter()
        .filter(|(k, v)| {
            super::disks::is_disk_key(kind, k)
                && !k.starts_with("unused")
                && !v.contains("media=cdrom")
        })
        .filter_map(|(_, v)| super::disks::volid_of(v))
        .all(|volid| {
            let Some((sid, _)) = volid.split_once(':') else {
                return true;
            };
            let Some(storage) = st.storage(node, sid) else {
                return false;
            };
            match storage.kind.as_str() {
                "lvmthin" | "zfspool" | "rbd" | "zfs" | "btrfs" => true,
                "dir" | "nfs" | "cifs" | "glusterfs" => volid.ends_with(".qcow2"),
                _ => false,
            }
        })
}

/// `POST .../snapshot`.
pub(crate) fn create(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot")?;
    let name = ctx.req("snapname")?;
    if name == "current" {
        return Err(ApiError::fail(
            "unable to use snapshot name 'current' (reserved name)",
        ));
    }
    if name.eq_ignore_ascii_case("pending") {
        return Err(ApiError::fail(
            "unable to use snapshot name 'pending' (reserved name)",
        ));
    }
    let vmstate = kind == GuestKind::Qemu && ctx.flag("vmstate").unwrap_or(false);
    let description = ctx.p("description").unwrap_or_default().to_string();
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    guest(&st, kind, &node, vmid)?;
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        let Some(g) = st.guests.get(&vmid) else {
            return Err("guest vanished".into());
        };
        if g.is_template() {
            return Err("you can't take a snapshot if it's a template".into());
        }
        if let Some(lock) = g.lock() {
            return Err(format!("{} {vmid} is locked ({lock})", kind.word()));
        }
        if g.snapshot_data.contains_key(&name) || g.snapshots.contains(&name) {
            return Err(format!("snapshot name '{name}' already used"));
        }
        let node = g.node.clone();
        if !snapshot_feature(st, &node, kind, &g.config) {
            return Err("snapshot feature is not available".into());
        }
        if fail {
            return Err(INJECTED.into());
        }
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err("guest vanished".into());
        };
        // `__snapshot_copy_config`: the current config without the snapshot bookkeeping.
        let mut config = g.config.clone();
        for k in ["lock", "digest", "snapshots", "parent"] {
            config.remove(k);
        }
        let snap = Snapshot {
            config,
            description,
            snaptime: now(),
            vmstate: vmstate && g.running(),
            parent: g.config.get("parent").cloned(),
        };
        g.snapshot_data.insert(name.clone(), snap);
        g.snapshots.push(name.clone());
        g.config.insert("parent".into(), name);
        Ok(Vec::new())
    });
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

fn snapshot_of<'a>(g: &'a crate::state::Guest, name: &str) -> Result<&'a Snapshot, ApiError> {
    g.snapshot_data
        .get(name)
        .ok_or_else(|| ApiError::fail(format!("snapshot '{name}' does not exist")))
}

/// `GET .../snapshot/{snapname}`: the commands under it.
pub(crate) fn index(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    snapshot_of(g, &ctx.req("snapname")?)?;
    Ok(json!([{ "cmd": "rollback" }, { "cmd": "config" }]))
}

/// `GET .../snapshot/{snapname}/config`.
pub(crate) fn config(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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
    if s.vmstate {
        out.insert("vmstate".into(), json!(1));
    }
    Ok(Value::Object(out))
}

/// `PUT .../snapshot/{snapname}/config`: only the description changes.
pub(crate) fn update(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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

/// `DELETE .../snapshot/{snapname}`: its children and the current state take its parent.
pub(crate) fn delete(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot")?;
    let name = ctx.req("snapname")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    if g.is_template() {
        return Err(ApiError::fail(
            "you can't delete a snapshot if vm is a template",
        ));
    }
    snapshot_of(g, &name)?;
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
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
        Ok(Vec::new())
    });
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

/// `POST .../snapshot/{snapname}/rollback`: the guest stopped, the snapshot's config made
/// current (`parent` naming it), started again when the snapshot holds RAM or `start` says so.
pub(crate) fn rollback(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Snapshot.Rollback")?;
    let name = ctx.req("snapname")?;
    let start = ctx.flag("start").unwrap_or(false);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    if g.is_template() {
        return Err(ApiError::fail("you can't rollback if vm is a template"));
    }
    snapshot_of(g, &name)?;
    check_lock(ctx, g)?;
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err("guest vanished".into());
        };
        let Some(snap) = g.snapshot_data.get(&name).cloned() else {
            return Err(format!("snapshot '{name}' does not exist"));
        };
        // `__snapshot_rollback_vm_stop`, then the snapshot's config as the current one.
        g.status = "stopped".into();
        g.mark_stopped();
        g.pending.clear();
        g.pending_delete.clear();
        g.config = snap.config.clone();
        g.config.insert("parent".into(), name);
        if snap.vmstate || start {
            g.status = "running".into();
            g.mark_started();
        }
        Ok(Vec::new())
    });
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
    qemu_list => list, GuestKind::Qemu;
    qemu_create => create, GuestKind::Qemu;
    qemu_index => index, GuestKind::Qemu;
    qemu_config => config, GuestKind::Qemu;
    qemu_update => update, GuestKind::Qemu;
    qemu_delete => delete, GuestKind::Qemu;
    qemu_rollback => rollback, GuestKind::Qemu;
    lxc_list => list, GuestKind::Lxc;
    lxc_create => create, GuestKind::Lxc;
    lxc_index => index, GuestKind::Lxc;
    lxc_config => config, GuestKind::Lxc;
    lxc_update => update, GuestKind::Lxc;
    lxc_delete => delete, GuestKind::Lxc;
    lxc_rollback => rollback, GuestKind::Lxc;
}
