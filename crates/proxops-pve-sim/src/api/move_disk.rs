//! Moving a VM disk to another storage and unlinking disks, as qemu-server
//! `src/PVE/API2/Qemu.pm` does them: `move_vm_disk` (`POST .../move_disk`, its
//! `$load_and_check_move` refusals, then a `qmmove` worker that copies the volume, points the
//! drive at the copy and keeps the source as `unusedN` unless `delete`), and `unlink` (`PUT
//! .../unlink`: `update_vm` with `delete=<idlist>`; `force` destroys the volumes instead of
//! keeping them unused).

use serde_json::Value;

use super::disks::{allocate, volid_of};
use super::guest::{check_lock, digest};
use super::{Ctx, guest};
use crate::error::ApiError;
use crate::state::{GuestType, State};
use crate::tasks::{self, INJECTED};

/// `POST /nodes/{node}/qemu/{vmid}/move_disk`.
pub(crate) fn move_disk(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Config.Disk")?;
    let disk = ctx.req("disk")?;
    let target = ctx.req("storage")?;
    ctx.require(&format!("/storage/{target}"), "Datastore.AllocateSpace")?;
    let format = ctx.p("format").map(str::to_string);
    let delete = ctx.flag("delete").unwrap_or(false);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, GuestType::Qemu, &node, vmid)?;
    check_lock(ctx, g)?;
    if let Some(d) = ctx.p("digest")
        && d != digest(g)
    {
        return Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    let value = g
        .config
        .get(&disk)
        .ok_or_else(|| ApiError::fail(format!("disk '{disk}' does not exist")))?
        .clone();
    if value.split(',').any(|p| p == "media=cdrom") {
        return Err(ApiError::fail("you can't move a cdrom"));
    }
    let old = volid_of(&value)
        .ok_or_else(|| ApiError::fail(format!("disk '{disk}' has no associated volume")))?
        .to_owned();
    let source = st
        .volume(&node, &old)
        .cloned()
        .ok_or_else(|| ApiError::fail(format!("disk '{disk}' has no associated volume")))?;
    let same_format = format.as_deref().is_none_or(|f| f == source.format);
    if source.storage == target && same_format {
        return Err(ApiError::fail(
            "you can't move to the same storage with same format",
        ));
    }
    let storage = st
        .storage(&node, &target)
        .ok_or_else(|| ApiError::fail(format!("storage '{target}' does not exist")))?;
    if !storage.has_content("images") {
        return Err(ApiError::param(
            "storage",
            format!("storage '{target}' does not support vm images"),
        ));
    }
    if delete && !g.snapshots.is_empty() {
        return Err(ApiError::fail(
            "you can't move a disk with snapshots and delete the source",
        ));
    }
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        let fmt = format.or(Some(source.format.clone()));
        let new = allocate(
            st,
            &node,
            &target,
            vmid,
            source.size,
            fmt.as_deref(),
            GuestType::Qemu,
        )
        .map_err(|e| format!("{e:?}"))?;
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err("guest vanished".into());
        };
        let Some(v) = g.config.get_mut(&disk) else {
            return Err(format!("disk '{disk}' does not exist"));
        };
        *v = v.replacen(old.as_str(), &new, 1);
        let mut log = vec![format!(
            "copying volume '{old}' from current storage '{}' to target storage '{target}'",
            source.storage
        )];
        if delete {
            st.remove_volume(&node, &old);
            log.push(format!("removing volume '{old}'"));
        } else {
            let slot = (0u32..)
                .map(|i| format!("unused{i}"))
                .find(|s| !g.config.contains_key(s));
            if let Some(slot) = slot {
                log.push(format!(
                    "adding source volume '{old}' as '{slot}' to config"
                ));
                g.config.insert(slot, old);
            }
        }
        Ok(log)
    });
    // The worker copies under the config lock (`lock_config($vmid, $move_updatefn)`).
    Ok(tasks::spawn_holding(
        &shared,
        &mut st,
        &ctx.node(),
        "qmmove",
        &vmid.to_string(),
        &ctx.who().task_user(),
        (GuestType::Qemu, vmid),
        job,
    )
    .into())
}

/// `PUT /nodes/{node}/qemu/{vmid}/unlink`: `update_vm` deleting the `idlist` keys; with
/// `force`, the volumes they free are destroyed rather than kept as `unusedN`.
pub(crate) fn unlink(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let idlist = ctx.req("idlist")?;
    let force = ctx.flag("force").unwrap_or(false);
    ctx.params.remove("idlist");
    ctx.params.remove("force");
    ctx.params.insert("delete".into(), idlist);
    let vmid = ctx.vmid();
    let before: Vec<String> = {
        let st = ctx.state();
        st.guests
            .get(&vmid)
            .map(|g| {
                g.config
                    .keys()
                    .filter(|k| k.starts_with("unused"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    super::qemu::config_sync(ctx)?;
    if force {
        let node = ctx.node();
        let mut st = ctx.state();
        let freed: Vec<(String, String)> = st
            .guests
            .get(&vmid)
            .map(|g| {
                g.config
                    .iter()
                    .filter(|(k, _)| k.starts_with("unused") && !before.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for (k, vol) in freed {
            if let Some(g) = st.guests.get_mut(&vmid) {
                g.config.remove(&k);
            }
            st.remove_volume(&node, &vol);
        }
    }
    Ok(Value::Null)
}
