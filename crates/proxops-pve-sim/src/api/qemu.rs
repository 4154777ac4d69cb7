//! QEMU-only endpoints: list, create (`qmcreate`: disks allocated or imported, NICs with MACs,
//! `smbios1`, `vmgenid`, `meta` and `boot` added as PVE does) and config POST (async) / PUT (sync).

use serde_json::Value;

use super::guest::{check_lock, digest};
use super::{Ctx, check_node, guest, perms, setconfig};
use crate::auth::now;
use crate::dispatch::percent_decode;
use crate::error::ApiError;
use crate::rng;
use crate::state::{Guest, GuestType, State};
use crate::tasks::{self, INJECTED};

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    Ok(list_rows(ctx, &st, GuestType::Qemu, &node))
}

/// The guest rows of a list endpoint (only guests the caller may audit).
pub(crate) fn list_rows(ctx: &Ctx, st: &State, kind: GuestType, node: &str) -> Value {
    let now = now();
    Value::Array(
        st.guests
            .values()
            .filter(|g| g.kind == kind && g.node == node)
            .filter(|g| ctx.allowed(&format!("/vms/{}", g.vmid), "VM.Audit"))
            .map(|g| {
                let mut row = super::cluster::guest_row(st.pve_version, g, now);
                if let Some(obj) = row.as_object_mut() {
                    obj.remove("id");
                    obj.remove("node");
                    obj.remove("type");
                    let cpus = obj.remove("maxcpu").unwrap_or(Value::from(1));
                    obj.insert("cpus".into(), cpus);
                    if !g.is_template() {
                        obj.remove("template");
                    }
                    // qemu-server `PVE/QemuServer.pm` `vmstatus` keeps `disk: 0` ("no info
                    // available"), though the schema does not list it.
                    if kind == GuestType::Lxc {
                        obj.insert("type".into(), "lxc".into());
                    }
                }
                row
            })
            .collect(),
    )
}

fn default_boot(conf: &std::collections::BTreeMap<String, String>) -> Option<String> {
    let order = |k: &str| {
        let fam = k.trim_end_matches(|c: char| c.is_ascii_digit());
        let idx: u32 = k[fam.len()..].parse().unwrap_or(0);
        (
            ["ide", "sata", "scsi", "virtio"]
                .iter()
                .position(|f| *f == fam)
                .unwrap_or(9),
            idx,
        )
    };
    let mut drives: Vec<&String> = conf
        .keys()
        .filter(|k| {
            super::disks::is_volume(GuestType::Qemu, k)
                && !k.starts_with("unused")
                && *k != "efidisk0"
                && *k != "tpmstate0"
        })
        .collect();
    drives.sort_by_key(|k| order(k));
    let is_cd = |k: &&String| conf.get(*k).is_some_and(|v| v.contains("media=cdrom"));
    let mut devs: Vec<String> = drives
        .iter()
        .find(|k| !is_cd(k))
        .map(|k| k.to_string())
        .into_iter()
        .collect();
    devs.extend(drives.iter().filter(|k| is_cd(k)).map(|k| k.to_string()));
    let mut nets: Vec<&String> = conf.keys().filter(|k| k.starts_with("net")).collect();
    nets.sort_by_key(|k| k[3..].parse::<u32>().unwrap_or(0));
    devs.extend(nets.into_iter().cloned());
    (!devs.is_empty()).then(|| format!("order={}", devs.join(";")))
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    check_sshkeys(ctx)?;
    if ctx.p("archive").is_some() {
        return Err(ApiError::fail(
            "restore from a backup archive is not supported by the simulator",
        ));
    }
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
    let requested = setconfig::requested(ctx);
    setconfig::check_storage_access(
        ctx,
        &st,
        GuestType::Qemu,
        &requested,
        setconfig::Write::Create,
    )?;
    let req = perms::Request {
        vmid,
        sets: &requested,
        deletes: &[],
        old: None,
    };
    perms::qemu_create(ctx, &st, &req)?;
    let before = st.volumes.len();
    let mut conf = std::collections::BTreeMap::new();
    for (k, v) in requested {
        match setconfig::stored_value(&mut st, &node, vmid, GuestType::Qemu, &k, &v) {
            Ok(stored) => {
                conf.insert(k, stored);
            }
            Err(e) => {
                st.volumes.truncate(before);
                return Err(e);
            }
        }
    }
    if !conf.contains_key("boot")
        && let Some(b) = default_boot(&conf)
    {
        conf.insert("boot".into(), b);
    }
    conf.entry("smbios1".into())
        .or_insert_with(|| format!("uuid={}", rng::uuid()));
    conf.entry("vmgenid".into()).or_insert_with(rng::uuid);
    conf.insert(
        "meta".into(),
        format!("creation-qemu=9.0.2,ctime={}", now()),
    );
    conf.insert("lock".into(), "create".into());
    let start = ctx.flag("start").unwrap_or(false);
    st.guests.insert(
        vmid,
        Guest {
            vmid,
            kind: GuestType::Qemu,
            node: node.clone(),
            status: "stopped".into(),
            config: conf,
            pool: ctx.p("pool").map(str::to_string),
            ..Guest::default()
        },
    );
    let job: tasks::Job =
        Box::new(move |st: &mut State, fail| finish_create(st, vmid, fail, start));
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "qmcreate",
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// Ends a create task: unlock (and start), or remove the half-made guest on failure.
pub(crate) fn finish_create(
    st: &mut State,
    vmid: u32,
    fail: bool,
    start: bool,
) -> Result<Vec<String>, String> {
    if fail {
        let _ = super::disks::destroy_volumes(st, vmid, true);
        st.guests.remove(&vmid);
        return Err(INJECTED.into());
    }
    let Some(g) = st.guests.get_mut(&vmid) else {
        return Err("guest vanished".into());
    };
    g.config.remove("lock");
    if start {
        g.status = "running".into();
        g.mark_started();
    }
    Ok(Vec::new())
}

/// qemu-server `src/PVE/API2/Qemu.pm` (`create_vm`, `update_vm_api`) unescapes `sshkeys` and
/// runs pve-common's `validate_ssh_public_keys` on it before anything else.
fn check_sshkeys(ctx: &Ctx) -> Result<(), ApiError> {
    match ctx.p("sshkeys") {
        Some(v) => crate::sshkeys::validate_ssh_public_keys(&percent_decode(v, false))
            .map_err(ApiError::fail),
        None => Ok(()),
    }
}

/// The shared part of the config setters: lock, digest, then the update.
pub(crate) fn set_config(ctx: &Ctx, st: &mut State, kind: GuestType) -> Result<(), ApiError> {
    if kind == GuestType::Qemu {
        check_sshkeys(ctx)?;
    }
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let g = guest(st, kind, &node, vmid)?;
    check_lock(ctx, g)?;
    if let Some(d) = ctx.p("digest")
        && d != digest(g)
    {
        // Each keeps its own wording: qemu-server `src/PVE/API2/Qemu.pm` `update_vm_api`
        // (`$load_and_check_config`) dies "checksum mismatch", pve-container
        // `src/PVE/API2/LXC/Config.pm` `update_vm` calls `PVE::Tools::assert_if_modified`.
        return Err(ApiError::fail(match kind {
            GuestType::Qemu => "checksum mismatch (file change by other user?)",
            GuestType::Lxc => {
                "detected modified configuration - file changed by other user? Try again."
            }
        }));
    }
    setconfig::update(ctx, st, kind, vmid)
}

/// PUT: synchronous (qemu-server `update_vm`, `&$update_vm_api($param, 1)`); work that allocates
/// or imports storage delays the answer ([`crate::sync_work`]).
pub(crate) fn config_sync(ctx: &mut Ctx) -> Result<Value, ApiError> {
    crate::sync_work::write(ctx, GuestType::Qemu)
}

/// What qemu-server logs as a config worker starts: `update VM 100: -cores 2 -delete tags`
/// (`update_vm_api`: the parameters other than node, vmid, digest, background_delay,
/// skip_cloud_init and import-working-storage, sorted, `cipassword` hidden).
fn update_line(ctx: &Ctx, vmid: u32) -> String {
    const SKIP: &[&str] = &[
        "node",
        "vmid",
        "digest",
        "background_delay",
        "skip_cloud_init",
        "import-working-storage",
    ];
    let parts: Vec<String> = ctx
        .params
        .iter()
        .filter(|(k, _)| !SKIP.contains(&k.as_str()))
        .map(|(k, v)| {
            let v = if k == "cipassword" { "<hidden>" } else { v };
            format!("-{k} {v}")
        })
        .collect();
    format!("update VM {vmid}: {}", parts.join(" "))
}

/// POST: qemu-server `update_vm_async` always forks a `qmconfig` worker. The checks before the
/// fork (`$load_and_check_config->(0)`, parameters, permissions, storage access) answer at
/// once; the worker takes the config lock, does the work and writes the change when it is
/// done, so the call is never held up by it.
pub(crate) fn config_async(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let shared = ctx.shared.clone();
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let work = crate::sync_work::work_of_request(ctx, GuestType::Qemu);
    let mut st = ctx.state();
    let mut scratch = st.clone();
    set_config(ctx, &mut scratch, GuestType::Qemu)?;
    drop(scratch);
    let detached = ctx.detached();
    let line = update_line(ctx, vmid);
    let held = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (held2, shared2) = (held.clone(), shared.clone());
    let pre: tasks::Work = Box::pin(async move {
        let guard = crate::sync_work::lock_guest(&shared2, GuestType::Qemu, vmid)
            .await
            .map_err(|e| e.text())?;
        tokio::time::sleep(work).await;
        *crate::server::lock(&held2) = Some(guard);
        Ok(vec![line])
    });
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        let result = if fail {
            Err(INJECTED.into())
        } else {
            set_config(&detached, st, GuestType::Qemu)
                .map(|()| Vec::new())
                .map_err(|e| e.text())
        };
        crate::server::lock(&held).take();
        result
    });
    let upid = tasks::spawn(
        &shared,
        &mut st,
        &node,
        "qmconfig",
        &vmid.to_string(),
        &ctx.who().task_user(),
        Some(pre),
        job,
    );
    drop(st);
    if let Some(secs) = ctx
        .int("background_delay")
        .and_then(|s| u64::try_from(s).ok())
    {
        let wait =
            crate::server::lock(&shared.durations).scaled(std::time::Duration::from_secs(secs));
        ctx.background = Some((upid.clone(), wait));
    }
    Ok(upid.into())
}
