//! `POST /nodes/{node}/lxc/{vmid}/move_volume` to another storage, as pve-container
//! `src/PVE/API2/LXC.pm` `move_volume` does it: `$move_to_storage_checks` (lock, a stopped
//! container, a configured volume, no delete of a volume snapshots use, the digest) under the
//! `disk` lock, then a `move_volume` worker that copies the volume, points the mount point at the
//! copy and keeps the source as `unusedN` unless `delete`. Reassigning to another container
//! (`target-vmid`) is not simulated and answers 501.

use serde_json::Value;

use super::disks::{allocate, volid_of};
use super::guest::{check_lock, digest};
use super::{Ctx, guest};
use crate::error::ApiError;
use crate::state::{GuestType, State};
use crate::tasks::{self, INJECTED};

pub(crate) fn move_volume(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Config.Disk")?;
    let mpkey = ctx.req("volume")?;
    let delete = ctx.flag("delete").unwrap_or(false);
    let target = match (ctx.p("storage"), ctx.p("target-vmid")) {
        (Some(_), Some(_)) => {
            let msg = "either set 'storage' or 'target-vmid', but not both";
            return Err(ApiError::Params(
                [("storage", msg), ("target-vmid", msg)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ));
        }
        (None, None) => {
            let msg = "both 'storage' and 'target-vmid' missing, either needs to be set";
            return Err(ApiError::Params(
                [("storage", msg), ("target-vmid", msg)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ));
        }
        (None, Some(_)) => {
            return Err(ApiError::Status(
                501,
                "moving a volume to another container (target-vmid) is not simulated".into(),
            ));
        }
        (Some(s), None) => s.to_string(),
    };
    ctx.require(&format!("/storage/{target}"), "Datastore.AllocateSpace")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, GuestType::Lxc, &node, vmid)?;
    check_lock(ctx, g)?;
    if g.running() {
        return Err(ApiError::fail("cannot move volumes of a running container"));
    }
    if mpkey.starts_with("unused") {
        return Err(ApiError::fail(format!(
            "cannot move volume '{mpkey}', only configured volumes can be moved to another storage"
        )));
    }
    let value = g
        .config
        .get(&mpkey)
        .ok_or_else(|| ApiError::fail(format!("unable to parse volume '{mpkey}'")))?
        .clone();
    let old = volid_of(&value)
        .ok_or_else(|| ApiError::fail(format!("unable to parse volume '{mpkey}'")))?
        .to_owned();
    // `is_volume_in_use_by_snapshots`: a snapshot's config still names the volume.
    let in_snapshots = g
        .snapshot_data
        .values()
        .any(|s| s.config.values().any(|v| volid_of(v) == Some(old.as_str())));
    if delete && in_snapshots {
        return Err(ApiError::fail(
            "you can't move a volume with snapshots and delete the source",
        ));
    }
    if let Some(d) = ctx.p("digest")
        && d != digest(g)
    {
        return Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    let source = st
        .volume(&node, &old)
        .cloned()
        .ok_or_else(|| ApiError::fail(format!("volume '{old}' does not exist")))?;
    if let Some(g) = st.guests.get_mut(&vmid) {
        g.config.insert("lock".into(), "disk".into());
    }
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        let unlock = |st: &mut State| {
            if let Some(g) = st.guests.get_mut(&vmid) {
                g.config.remove("lock");
            }
        };
        if fail {
            unlock(st);
            return Err(INJECTED.into());
        }
        let new = match allocate(
            st,
            &node,
            &target,
            vmid,
            source.size,
            Some(&source.format),
            GuestType::Lxc,
        ) {
            Ok(v) => v,
            Err(e) => {
                unlock(st);
                return Err(e.text());
            }
        };
        let mut log = vec![format!(
            "moving volume '{old}' from storage '{}' to '{target}'",
            source.storage
        )];
        if delete {
            st.remove_volume(&node, &old);
            log.push(format!("removing volume '{old}'"));
        }
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err("guest vanished".into());
        };
        g.config.remove("lock");
        if let Some(v) = g.config.get_mut(&mpkey) {
            *v = v.replacen(old.as_str(), &new, 1);
        }
        if !delete {
            // `add_unused_volume`: the first free unusedN.
            let slot = (0u32..)
                .map(|i| format!("unused{i}"))
                .find(|s| !g.config.contains_key(s));
            if let Some(slot) = slot {
                g.config.insert(slot, old);
            }
        }
        Ok(log)
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &ctx.node(),
        "move_volume",
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}
