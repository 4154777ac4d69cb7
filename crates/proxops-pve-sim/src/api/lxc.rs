//! LXC-only endpoints: list, create (`vzcreate`: needs an existing `ostemplate` volume; rootfs
//! and mount points allocated; `arch` and `ostype` added) and config PUT.

use serde_json::Value;

use super::{Ctx, check_node, setconfig};
use crate::error::ApiError;
use crate::state::{Guest, GuestKind, State};
use crate::tasks;

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    Ok(super::qemu::list_rows(ctx, &st, GuestKind::Lxc, &node))
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
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    let template = ctx.req("ostemplate")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
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
    let mut requested = setconfig::requested(ctx);
    let storage = ctx.p("storage").unwrap_or("local").to_string();
    requested
        .entry("rootfs".into())
        .or_insert_with(|| format!("{storage}:4"));
    setconfig::check_storage_access(
        ctx,
        &st,
        GuestKind::Lxc,
        &requested,
        setconfig::Write::Create,
    )?;
    let before = st.volumes.len();
    let mut conf = std::collections::BTreeMap::new();
    for (k, v) in requested {
        match setconfig::stored_value(&mut st, &node, vmid, GuestKind::Lxc, &k, &v) {
            Ok(stored) => {
                conf.insert(k, stored);
            }
            Err(e) => {
                st.volumes.truncate(before);
                return Err(e);
            }
        }
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
            kind: GuestKind::Lxc,
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

pub(crate) fn config_sync(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let mut st = ctx.state();
    super::qemu::set_config(ctx, &mut st, GuestKind::Lxc)?;
    Ok(Value::Null)
}
