//! What qemu and lxc guests share: config read and pending, status, clone,
//! template, resize and destroy, with PVE's lock, running and template rules and wording.

use serde_json::{Value, json};

use super::clone::clone;
use super::cluster::{guest_maxdisk, guest_maxmem};
use super::disks::{self, format_size, is_volume, parse_size, volid_of};
use super::{Ctx, guest};
use crate::auth::now;
use crate::error::ApiError;
use crate::faults;
use crate::schema::{self, Ty};

use crate::state::{Guest, GuestType, State, ha_sid};
use crate::tasks::{self, INJECTED};
use crate::version::PveVersion;

/// The machine a running VM reports (`running-machine`) and a suspend to disk records.
pub(crate) const RUNNING_MACHINE: &str = "pc-i440fx-9.0+pve0";

fn kind_path(kind: GuestType) -> &'static str {
    match kind {
        GuestType::Qemu => "/nodes/{node}/qemu/{vmid}/config",
        GuestType::Lxc => "/nodes/{node}/lxc/{vmid}/config",
    }
}

/// The config digest (PVE: SHA-1 of the whole file, its `[PENDING]` section included; here the
/// first 40 hex digits of a SHA-256 of the same content), so a pending write changes it too.
pub(crate) fn digest(g: &Guest) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (k, v) in &g.config {
        h.update(format!("{k}: {v}\n").as_bytes());
    }
    for (k, v) in &g.raw_lxc {
        h.update(format!("{k}: {v}\n").as_bytes());
    }
    if !g.pending.is_empty() || !g.pending_delete.is_empty() {
        h.update(b"[PENDING]\n");
        for (k, v) in &g.pending {
            h.update(format!("{k}: {v}\n").as_bytes());
        }
        if !g.pending_delete.is_empty() {
            h.update(format!("delete: {}\n", g.pending_delete.join(",")).as_bytes());
        }
    }
    hex::encode(&h.finalize()[..20])
}

/// A config value typed as the schema types it (integers and booleans as numbers).
pub(crate) fn typed(version: PveVersion, kind: GuestType, key: &str, value: &str) -> Value {
    let ty = schema::endpoint("PUT", kind_path(kind))
        .and_then(|ep| ep.param(version.schema(), key))
        .map(|p| p.ty);
    match ty {
        Some(Ty::Int) | Some(Ty::Bool) => value
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(value)),
        Some(Ty::Num) => value
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(value)),
        _ => Value::from(value),
    }
}

/// Refuses a locked guest unless `skiplock` (PVE: `VM is locked (clone)`), and draws lock contention.
pub(crate) fn check_lock(ctx: &Ctx, g: &Guest) -> Result<(), ApiError> {
    let skiplock = super::power::skiplock(ctx)?;
    if let Some(l) = g.lock()
        && !skiplock
    {
        return Err(ApiError::fail(format!("{} is locked ({l})", g.kind.word())));
    }
    faults::lock_contention(&ctx.shared, &ctx.key(), ctx.n, g.kind, g.vmid)
}

fn index(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    guest(&ctx.state(), kind, &node, vmid)?;
    let subdirs: &[&str] = match kind {
        GuestType::Qemu => &[
            "config", "pending", "status", "clone", "template", "resize", "snapshot", "firewall",
            "agent", "rrd", "rrddata",
        ],
        GuestType::Lxc => &[
            "config", "pending", "status", "clone", "template", "resize", "snapshot", "firewall",
            "rrd", "rrddata",
        ],
    };
    Ok(Value::Array(
        subdirs.iter().map(|s| json!({ "subdir": s })).collect(),
    ))
}

fn config(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let mut conf = g.config.clone();
    if ctx.flag("current") != Some(true) {
        conf.extend(g.pending.clone());
        for k in &g.pending_delete {
            conf.remove(k);
        }
    }
    let mut out = serde_json::Map::new();
    for (k, v) in &conf {
        out.insert(k.clone(), typed(st.pve_version, kind, k, masked(k, v)));
    }
    // A guest with snapshots names the newest as the current state's `parent` (qemu-server
    // `PVE::AbstractConfig::snapshot_prepare` sets `$conf->{parent}` when a snapshot is taken;
    // `GET .../config` returns the current section, so `parent` shows there).
    if let Some(last) = g.snapshots.last()
        && !out.contains_key("parent")
    {
        out.insert("parent".into(), last.clone().into());
    }
    // pve-container `PVE::LXC::Config::parse_pct_config` keeps raw keys in `$conf->{lxc}`, a
    // list of pairs, and `GET .../config` returns it so.
    if !g.raw_lxc.is_empty() {
        let pairs: Vec<Value> = g.raw_lxc.iter().map(|(k, v)| json!([k, v])).collect();
        out.insert("lxc".into(), Value::Array(pairs));
    }
    out.insert("digest".into(), digest(g).into());
    Ok(Value::Object(out))
}

/// PVE never reads a cloud-init password back: it shows a fixed mask of ten asterisks.
fn masked<'a>(key: &str, value: &'a str) -> &'a str {
    if key == "cipassword" {
        "**********"
    } else {
        value
    }
}

fn pending(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let mut keys: Vec<&String> = g
        .config
        .keys()
        .chain(g.pending.keys())
        .chain(g.pending_delete.iter())
        .collect();
    keys.sort();
    keys.dedup();
    let rows = keys
        .into_iter()
        .map(|k| {
            let mut row = json!({ "key": k });
            // The schema types pending values as strings, unlike config GET.
            if let Some(v) = g.config.get(k) {
                row["value"] = masked(k, v).into();
            }
            if let Some(v) = g.pending.get(k) {
                row["pending"] = masked(k, v).into();
            }
            if g.pending_delete.contains(k) {
                row["delete"] = 1.into();
            }
            row
        })
        .chain(std::iter::once(
            // pve-guest-common `PVE::GuestHelpers::config_with_pending_array` lists every key of
            // the loaded config, and `load_config` puts the file's `digest` there: `qm pending`
            // shows it as `cur digest`.
            json!({ "key": "digest", "value": digest(g) }),
        ))
        .collect();
    Ok(Value::Array(rows))
}

fn current(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let mut row = super::cluster::guest_row(st.pve_version, g, now());
    if let Some(obj) = row.as_object_mut() {
        obj.remove("id");
        obj.remove("node");
        obj.remove("maxcpu");
        obj.remove("type");
        obj.insert(
            "cpus".into(),
            super::cluster::guest_row(st.pve_version, g, 0)["maxcpu"].clone(),
        );
        // pve-ha-manager `PVE::HA::Config::get_service_status`: managed unless absent or
        // ignored, with the manager status's state.
        let sid = crate::state::ha_sid(kind, vmid);
        let ha = match super::ha_status::crm_state(&st, &sid) {
            Some(state) => json!({ "managed": 1, "state": state }),
            None => json!({ "managed": 0 }),
        };
        obj.insert("ha".into(), ha);
        if kind == GuestType::Qemu {
            let qmp = if g.paused {
                "paused".to_owned()
            } else {
                g.status.clone()
            };
            obj.insert("qmpstatus".into(), qmp.into());
            if let Some(a) = g.config.get("agent") {
                obj.insert(
                    "agent".into(),
                    u8::from(a.starts_with('1') || a.contains("enabled=1")).into(),
                );
            }
            if g.running() {
                obj.insert("pid".into(), (10_000 + vmid).into());
                obj.insert("running-machine".into(), RUNNING_MACHINE.into());
                obj.insert("running-qemu".into(), "9.0.2".into());
            }
        }
        if !g.is_template() {
            obj.remove("template");
        }
    }
    let _ = (guest_maxmem(g), guest_maxdisk(g));
    Ok(row)
}

/// `POST .../template` as qemu-server `PVE/API2/Qemu.pm` `template` and pve-container
/// `PVE/API2/LXC.pm` `template` do it: the checks under the config lock (snapshots, already a
/// template, running), then a forked worker (`qmtemplate`, `vztemplate`) converts. Qemu answers
/// the UPID; LXC answers null although it forked, so its caller finds the task in the node's
/// task list.
fn template(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    check_lock(ctx, g)?;
    let (what, it) = match kind {
        GuestType::Qemu => ("VM", "VM"),
        GuestType::Lxc => ("CT", "the CT"),
    };
    if !g.snapshots.is_empty() {
        return Err(ApiError::fail(format!(
            "unable to create template, because {what} contains snapshots"
        )));
    }
    if g.is_template() {
        return Err(ApiError::fail("you can't convert a template to a template"));
    }
    if g.running() {
        return Err(ApiError::fail(format!(
            "you can't convert a {what} to template if {it} is running"
        )));
    }
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        if kind == GuestType::Lxc {
            lacks_template_feature(st, vmid)?;
        }
        convert_to_template(st, vmid);
        Ok(Vec::new())
    });
    let upid = tasks::spawn(
        &shared,
        &mut st,
        &node,
        if kind == GuestType::Qemu {
            "qmtemplate"
        } else {
            "vztemplate"
        },
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    );
    Ok(match kind {
        GuestType::Qemu => upid.into(),
        // pve-container returns `undef` after `fork_worker`.
        GuestType::Lxc => Value::Null,
    })
}

/// The worker's first check in pve-container `PVE/LXC.pm` `template_create`: every volume's
/// storage must have the `template` feature (pve-storage `volume_has_feature` of
/// `PVE/Storage/LVMPlugin.pm`, `ISCSIPlugin.pm` and `ISCSIDirectPlugin.pm` lists none).
fn lacks_template_feature(st: &State, vmid: u32) -> Result<(), String> {
    let Some(g) = st.guests.get(&vmid) else {
        return Err(format!("CT {vmid} does not exist"));
    };
    for (k, v) in &g.config {
        if !is_volume(g.kind, k) || k.starts_with("unused") {
            continue;
        }
        let Some(volid) = volid_of(v) else { continue };
        let Some((sid, _)) = volid.split_once(':') else {
            continue;
        };
        if st
            .storage(&g.node, sid)
            .is_some_and(|s| matches!(s.kind.as_str(), "lvm" | "iscsi" | "iscsidirect"))
        {
            return Err(format!("Template feature is not available for '{volid}'"));
        }
    }
    Ok(())
}

/// Marks a guest a template and renames its disks `vm-N-disk-M` to `base-N-disk-M`.
fn convert_to_template(st: &mut State, vmid: u32) {
    let Some(g) = st.guests.get_mut(&vmid) else {
        return;
    };
    g.config.insert("template".into(), "1".into());
    let kind = g.kind;
    let mut renames = Vec::new();
    for (k, v) in g.config.iter_mut() {
        if is_volume(kind, k)
            && !k.starts_with("unused")
            && let Some(old) = volid_of(v).map(str::to_string)
        {
            let new = old.replace(&format!("vm-{vmid}-disk-"), &format!("base-{vmid}-disk-"));
            if new != old {
                *v = v.replacen(&old, &new, 1);
                renames.push((old, new));
            }
        }
    }
    for vol in st.volumes.iter_mut() {
        if let Some((_, new)) = renames.iter().find(|(old, _)| *old == vol.volid) {
            vol.volid = new.clone();
        }
    }
}

fn resize(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Config.Disk")?;
    let disk = ctx.req("disk")?;
    let size = ctx.req("size")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
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
        .filter(|_| is_volume(kind, &disk))
        .ok_or_else(|| ApiError::fail(format!("disk '{disk}' does not exist")))?
        .clone();
    if value.contains("media=cdrom") {
        return Err(ApiError::fail("you can't resize a cdrom"));
    }
    let cur = disks::size_of(&value).unwrap_or(0);
    let (relative, amount) = match size.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, size.as_str()),
    };
    let amount = parse_size(amount)
        .filter(|_| amount.ends_with(|c: char| c.is_ascii_digit() || "KMGTkmgt".contains(c)))
        .ok_or_else(|| ApiError::param("size", "unable to parse size"))?;
    let new = if relative {
        cur.saturating_add(amount)
    } else {
        amount
    };
    if new < cur {
        return Err(ApiError::fail("shrinking disks is not supported"));
    }
    let volid = volid_of(&value).map(str::to_string);
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err("guest vanished".into());
        };
        if let Some(v) = g.config.get_mut(&disk) {
            let parts: Vec<String> = v
                .split(',')
                .map(|p| {
                    if p.starts_with("size=") {
                        format!("size={}", format_size(new))
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            *v = parts.join(",");
        }
        if let Some(vol) = st
            .volumes
            .iter_mut()
            .find(|x| Some(&x.volid) == volid.as_ref())
        {
            vol.size = new;
        }
        Ok(vec![format!(
            "Size of logical volume changed to {}.",
            format_size(new)
        )])
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "resize",
        &vmid.to_string(),
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

fn destroy(ctx: &mut Ctx, kind: GuestType) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    let shared = ctx.shared.clone();
    let unreferenced = ctx.flag("destroy-unreferenced-disks").unwrap_or(false);
    let purge = ctx.flag("purge").unwrap_or(false);
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    let word = kind.word();
    if g.config.get("protection").is_some_and(|p| p == "1") {
        return Err(ApiError::fail(format!(
            "can't remove {word} {vmid} - protection mode enabled"
        )));
    }
    // qemu-server `src/PVE/API2/Qemu.pm` `destroy_vm` and pve-container `src/PVE/API2/LXC.pm`
    // `destroy_vm`: `service_is_configured` without `purge` refuses (any HA state, even ignored).
    if !purge && st.ha_of(vmid).is_some() {
        return Err(ApiError::fail(format!(
            "unable to remove {word} {vmid} - used in HA resources and purge parameter not set."
        )));
    }
    check_lock(ctx, g)?;
    // pve-container `destroy_vm` refuses a running CT unless `force` (then stops it first);
    // qemu-server's has no `force` and its own wording.
    let force = kind == GuestType::Lxc && ctx.flag("force").unwrap_or(false);
    if g.running() && !force {
        return Err(ApiError::fail(match kind {
            GuestType::Qemu => format!("{word} {vmid} is running - destroy failed"),
            GuestType::Lxc => format!("unable to destroy CT {vmid} - container is running"),
        }));
    }
    let sid = ha_sid(kind, vmid);
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        let mut log = Vec::new();
        if let Some(g) = st.guests.get_mut(&vmid)
            && g.running()
        {
            log.push(format!("forced to stop CT {vmid} before destroying!"));
            g.status = "stopped".into();
            g.mark_stopped();
        }
        log.extend(disks::destroy_volumes(st, vmid, unreferenced)?);
        st.guests.remove(&vmid);
        // `PVE::Firewall::remove_vmfw_conf($vmid)`: its `<vmid>.fw` goes with it.
        st.firewall.guests.remove(&vmid);
        // `PVE::HA::Config::delete_service_from_config("vm:$vmid", $purge)` after the destroy.
        if purge {
            st.ha_resources.remove(&sid);
            super::backup::remove_vmid_from_jobs(st, vmid);
        }
        Ok(log)
    });
    let kind_s = if kind == GuestType::Qemu {
        "qmdestroy"
    } else {
        "vzdestroy"
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

macro_rules! both {
    ($($name:ident => $f:ident $(($arg:expr))?;)*) => {
        $(
            pub(crate) fn $name(ctx: &mut Ctx) -> Result<Value, ApiError> {
                let kind = if stringify!($name).starts_with("qemu") { GuestType::Qemu } else { GuestType::Lxc };
                $f(ctx, kind $(, $arg)?)
            }
        )*
    };
}

both! {
    qemu_index => index; lxc_index => index;
    qemu_config => config; lxc_config => config;
    qemu_pending => pending; lxc_pending => pending;
    qemu_current => current; lxc_current => current;
    qemu_template => template; lxc_template => template;
    qemu_resize => resize; lxc_resize => resize;
    qemu_destroy => destroy; lxc_destroy => destroy;
    qemu_clone => clone; lxc_clone => clone;
}
