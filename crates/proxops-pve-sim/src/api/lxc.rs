//! LXC-only endpoints: list, create (`vzcreate`: needs an existing `ostemplate` volume; rootfs
//! and mount points allocated; `arch` and `ostype` added) and config PUT.

use serde_json::Value;

use super::{Ctx, check_node, perms, setconfig};
use crate::error::ApiError;
use crate::state::{Guest, GuestType, State};
use crate::tasks;

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    Ok(super::qemu::list_rows(ctx, &st, GuestType::Lxc, &node))
}

/// The `ostype` PVE derives from a template's file name.
fn ostype(template: &str) -> &'static str {
    let file = template.rsplit('/').next().unwrap_or(template);
    for os in [
        "debian",
        "ubuntu",
        "centos",
        "fedora",
        "opensuse",
        "archlinux",
        "alpine",
        "gentoo",
        "nixos",
        "devuan",
        "almalinux",
        "rockylinux",
    ] {
        if file.starts_with(os) {
            return match os {
                "almalinux" | "rockylinux" => "centos",
                _ => os,
            };
        }
    }
    "unmanaged"
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let mut requested = setconfig::requested(ctx);
    let version = ctx.state().pve_version;
    let unprivileged = setconfig::lxc_create_unprivileged(version, &requested);
    // pve-container `src/PVE/API2/LXC.pm` `create_vm`: from PVE 9.0 ("create/restore: require
    // Sys.Modify for privileged containers") a privileged container needs `Sys.Modify` on `/`,
    // checked before `VM.Allocate`.
    if !unprivileged && version.number() >= (9, 0) {
        ctx.require("/", "Sys.Modify")?;
    }
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    let template = ctx.req("ostemplate")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    // qemu-server `create_vm` / pve-container `create_vm` / `clone_vm`: `check_pool_exist`.
    if let Some(pool) = ctx.p("pool") {
        super::pool::check_pool_exists(&st, pool)?;
    }
    check_node(&st, &node)?;
    if let Some(g) = st.guests.get(&vmid) {
        return Err(ApiError::fail(format!(
            "{} {vmid} already exists on node '{}'",
            g.kind.word(),
            g.node
        )));
    }
    let vol = st
        .volume(&node, &template)
        .ok_or_else(|| ApiError::fail(format!("volume '{template}' does not exist")))?;
    if vol.content != "vztmpl" && vol.content != "backup" {
        return Err(ApiError::fail(format!(
            "volume '{template}' is not a container template"
        )));
    }
    ctx.require(
        &format!("/storage/{}", vol.storage),
        "Datastore.AllocateSpace",
    )?;
    let storage = ctx.p("storage").unwrap_or("local").to_string();
    // pve-container `API2/LXC.pm` `create_vm`: "allow to use simple numbers (add default
    // storage in that case)" for `rootfs` and `mpN`.
    for (k, v) in requested.iter_mut() {
        let disk = k == "rootfs"
            || k.strip_prefix("mp")
                .is_some_and(|n| n.parse::<u32>().is_ok());
        let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        let simple = match v.split_once('.') {
            Some((a, b)) => number(a) && number(b),
            None => number(v),
        };
        if disk && simple {
            *v = format!("{storage}:{v}");
        }
    }
    requested
        .entry("rootfs".into())
        .or_insert_with(|| format!("{storage}:4"));
    setconfig::check_storage_access(
        ctx,
        &st,
        GuestType::Lxc,
        &requested,
        setconfig::Write::Create,
    )?;
    // `check_ct_modify_config_perm` over the keys left after `unprivileged` is taken out; it
    // checks the new volumes' storages too.
    let mut keys = requested.clone();
    keys.remove("unprivileged");
    let req = perms::Request {
        vmid,
        sets: &keys,
        deletes: &[],
        old: None,
    };
    perms::lxc(ctx, &st, &req, unprivileged)?;
    let before = st.volumes.len();
    let mut conf = std::collections::BTreeMap::new();
    for (k, v) in requested {
        match setconfig::stored_value(&mut st, &node, vmid, GuestType::Lxc, &k, &v) {
            Ok(stored) => {
                conf.insert(k, stored);
            }
            Err(e) => {
                st.volumes.truncate(before);
                return Err(e);
            }
        }
    }
    // `$conf->{unprivileged} = 1 if $unprivileged`: written when unprivileged (the default on 9),
    // left out (PVE's `0`) when not.
    if unprivileged {
        conf.insert("unprivileged".into(), "1".into());
    } else {
        conf.remove("unprivileged");
    }
    conf.entry("arch".into()).or_insert_with(|| "amd64".into());
    conf.entry("ostype".into())
        .or_insert_with(|| ostype(&template).into());
    conf.entry("hostname".into())
        .or_insert_with(|| format!("CT{vmid}"));
    conf.entry("memory".into()).or_insert_with(|| "512".into());
    conf.entry("swap".into()).or_insert_with(|| "512".into());
    conf.insert("lock".into(), "create".into());
    let start = ctx.flag("start").unwrap_or(false);
    st.guests.insert(
        vmid,
        Guest {
            vmid,
            kind: GuestType::Lxc,
            node: node.clone(),
            status: "stopped".into(),
            config: conf,
            pool: ctx.p("pool").map(str::to_string),
            ..Guest::default()
        },
    );
    let log = format!("extracting archive '{template}'");
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        super::qemu::finish_create(st, vmid, fail, start).map(|mut l| {
            l.insert(0, log);
            l
        })
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "vzcreate",
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// PUT, the only config write pve-container has (`src/PVE/API2/LXC/Config.pm` `update_vm`): a
/// new mount point's volume is allocated inside the call, under the config lock, with no
/// worker, so the answer waits for it ([`crate::sync_work`]).
pub(crate) fn config_sync(ctx: &mut Ctx) -> Result<Value, ApiError> {
    crate::sync_work::write(ctx, GuestType::Lxc)
}
