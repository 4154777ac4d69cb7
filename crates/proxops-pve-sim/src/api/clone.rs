//! Clone of qemu and lxc guests with PVE's rules: `full` defaults to "not a template", `storage`
//! and `format` only for full clones, linked clones only from templates, `target` (another node)
//! only with shared storage, an existing `newid` refused; the new guest exists at once with
//! `lock: clone`, new disks and new MACs, and is unlocked (or removed on failure) by its task.

use serde_json::Value;

use super::disks::{self, is_volume, volid_of};
use super::guest::check_lock;
use super::{Ctx, check_node, guest};
use crate::auth::now;
use crate::error::ApiError;
use crate::rng;
use crate::state::{Guest, GuestType, State, Volume};
use crate::tasks::{self, INJECTED};

pub(crate) fn clone(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let newid: u32 = ctx.req("newid")?.parse().unwrap_or(0);
    ctx.require(&format!("/vms/{vmid}"), "VM.Clone")?;
    ctx.require(&format!("/vms/{newid}"), "VM.Allocate")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    // qemu-server `create_vm` / pve-container `create_vm` / `clone_vm`: `check_pool_exist`.
    if let Some(pool) = ctx.p("pool") {
        super::pool::check_pool_exists(&st, pool)?;
    }
    let version = st.pve_version;
    let src = guest(&st, kind, &node, vmid)?.clone();
    let word = kind.word();
    let full = ctx.flag("full").unwrap_or(!src.is_template());
    let storage = ctx.p("storage").map(str::to_string);
    if !full {
        if storage.is_some() {
            return Err(ApiError::fail(
                "parameter 'storage' not allowed for linked clones",
            ));
        }
        if ctx.p("format").is_some() {
            return Err(ApiError::fail(
                "parameter 'format' not allowed for linked clones",
            ));
        }
    }
    let target = ctx
        .p("target")
        .map(str::to_string)
        .unwrap_or_else(|| node.clone());
    check_node(&st, &target)?;
    if st.guests.contains_key(&newid) {
        return Err(ApiError::fail(format!(
            "unable to create {word} {newid}: config file already exists"
        )));
    }
    check_lock(ctx, &src)?;
    let disk_keys: Vec<(String, String)> = src
        .config
        .iter()
        .filter(|(k, v)| {
            is_volume(kind, k) && !k.starts_with("unused") && !v.contains("media=cdrom")
        })
        .filter_map(|(k, v)| volid_of(v).map(|vol| (k.clone(), vol.to_string())))
        .collect();
    // qemu-server `clone_vm` clones a cloud-init drive as a new `vm-<newid>-cloudinit`
    // (`drive_is_cdrom($drive, 1)` leaves it among the disks), never sharing the template's.
    let cloudinit_keys: Vec<(String, String)> = src
        .config
        .iter()
        .filter(|(k, v)| is_volume(kind, k) && v.contains("media=cdrom"))
        .filter_map(|(k, v)| volid_of(v).map(|vol| (k.clone(), vol.to_string())))
        .filter(|(_, vol)| vol.ends_with(&format!("vm-{}-cloudinit", src.vmid)))
        .collect();
    if target != node {
        let shared_all = disk_keys.iter().chain(&cloudinit_keys).all(|(_, vol)| {
            let sid = vol.split(':').next().unwrap_or_default();
            st.storage(&node, sid).is_some_and(|s| s.shared)
        });
        let dest_shared = storage
            .as_ref()
            .is_none_or(|s| st.storage(&target, s).is_some_and(|x| x.shared));
        if !shared_all || !dest_shared {
            return Err(ApiError::fail(format!(
                "can't clone {word} to node '{target}' ({word} uses local storage)"
            )));
        }
    }
    if !full && let Some((k, _)) = disk_keys.iter().find(|_| !src.is_template()) {
        return Err(ApiError::fail(format!(
            "Linked clone feature is not supported for drive '{k}'"
        )));
    }
    // The new guest exists at once, locked, with new disks and new MACs.
    let mut config = src.config.clone();
    config.remove("template");
    config.retain(|k, _| !k.starts_with("unused"));
    let name_key = if kind == GuestType::Qemu {
        "name"
    } else {
        "hostname"
    };
    let name = ctx
        .p(if kind == GuestType::Qemu {
            "name"
        } else {
            "hostname"
        })
        .map(str::to_string)
        .unwrap_or_else(|| format!("Copy-of-{word}-{}", src.name()));
    config.insert(name_key.into(), name);
    if let Some(d) = ctx.p("description") {
        config.insert("description".into(), d.into());
    }
    for (k, vol) in &disk_keys {
        let source = st.volume(&node, vol).cloned().unwrap_or_default();
        let sid = storage.clone().unwrap_or_else(|| source.storage.clone());
        let new_vol = if full {
            let fmt = ctx
                .p("format")
                .map(str::to_string)
                .or(Some(source.format.clone()));
            disks::allocate(
                &mut st,
                &target,
                &sid,
                newid,
                source.size,
                fmt.as_deref(),
                kind,
            )?
        } else {
            let base = vol.split(':').nth(1).unwrap_or_default().to_string();
            let name = format!(
                "{base}/vm-{newid}-disk-{}",
                st.volumes.iter().filter(|v| v.vmid == Some(newid)).count()
            );
            let volid = format!("{sid}:{name}");
            st.volumes.push(Volume {
                volid: volid.clone(),
                vmid: Some(newid),
                ctime: now(),
                node: target.clone(),
                ..source.clone()
            });
            volid
        };
        if let Some(v) = config.get_mut(k) {
            *v = v.replacen(vol.as_str(), &new_vol, 1);
        }
    }
    for (k, vol) in &cloudinit_keys {
        let sid = storage
            .clone()
            .unwrap_or_else(|| vol.split(':').next().unwrap_or_default().to_string());
        let name = format!("vm-{newid}-cloudinit");
        let new_vol = disks::allocate_named(
            &mut st,
            &target,
            &sid,
            newid,
            4 << 20,
            Some("raw"),
            kind,
            Some(&name),
        )?;
        if let Some(v) = config.get_mut(k) {
            *v = v.replacen(vol.as_str(), &new_vol, 1);
        }
    }
    for (k, v) in config.iter_mut() {
        if k.starts_with("net") {
            let stripped: Vec<&str> = v.split(',').filter(|p| !p.starts_with("hwaddr=")).collect();
            let base = stripped.join(",");
            let without_mac = match kind {
                GuestType::Qemu => {
                    base.split_once('=')
                        .map(|(m, rest)| match rest.split_once(',') {
                            Some((_, tail)) => format!("{m},{tail}"),
                            None => m.to_string(),
                        })
                }
                GuestType::Lxc => Some(base),
            };
            if let Some(fresh) =
                without_mac.and_then(|w| disks::process_nic(version, kind, k, &w).ok())
            {
                *v = fresh;
            }
        }
    }
    if kind == GuestType::Qemu {
        // qemu-server's clone always gives the copy a new SMBIOS uuid (keeping the other smbios1
        // fields), and a new vmgenid only when the source had one.
        let kept: Vec<&str> = config
            .get("smbios1")
            .map(|v| v.split(',').filter(|p| !p.starts_with("uuid=")).collect())
            .unwrap_or_default();
        let smbios1 = std::iter::once(format!("uuid={}", rng::uuid()))
            .chain(kept.into_iter().map(str::to_string))
            .collect::<Vec<_>>()
            .join(",");
        config.insert("smbios1".into(), smbios1);
        if config.contains_key("vmgenid") {
            config.insert("vmgenid".into(), rng::uuid());
        }
    }
    config.insert("lock".into(), "clone".into());
    st.guests.insert(
        newid,
        Guest {
            vmid: newid,
            kind,
            node: target,
            status: "stopped".into(),
            config,
            pool: ctx.p("pool").map(str::to_string),
            ..Guest::default()
        },
    );
    // `PVE::Firewall::clone_vmfw_conf($vmid, $newid)`: the source's `<vmid>.fw` copied (a
    // stale one of the new id removed); a failed clone removes it again.
    match st.firewall.guests.get(&vmid).cloned() {
        Some(fw) => st.firewall.guests.insert(newid, fw),
        None => st.firewall.guests.remove(&newid),
    };
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            let _ = disks::destroy_volumes(st, newid, true);
            st.guests.remove(&newid);
            st.firewall.guests.remove(&newid);
            return Err(INJECTED.into());
        }
        if let Some(g) = st.guests.get_mut(&newid) {
            g.config.remove("lock");
        }
        Ok(vec![format!(
            "create {} clone of {vmid} as {newid}",
            if full { "full" } else { "linked" }
        )])
    });
    let kind_s = if kind == GuestType::Qemu {
        "qmclone"
    } else {
        "vzclone"
    };
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        kind_s,
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}
