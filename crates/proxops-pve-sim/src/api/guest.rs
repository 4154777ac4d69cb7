//! What qemu and lxc guests share: config read and pending, status, power tasks, clone,
//! template, resize and destroy, with PVE's lock, running and template rules and wording.

use serde_json::{Value, json};

use super::clone::clone;
use super::cluster::{guest_maxdisk, guest_maxmem};
use super::disks::{self, format_size, is_disk_key, parse_size, volid_of};
use super::{Ctx, guest};
use crate::auth::now;
use crate::error::ApiError;
use crate::faults;
use crate::schema::{self, Ty};
use crate::server::{Shared, lock};
use crate::state::{Guest, GuestKind, State, ha_sid};
use crate::tasks::{self, INJECTED};
use crate::version::PveVersion;
use std::sync::Arc;

fn kind_path(kind: GuestKind) -> &'static str {
    match kind {
        GuestKind::Qemu => "/nodes/{node}/qemu/{vmid}/config",
        GuestKind::Lxc => "/nodes/{node}/lxc/{vmid}/config",
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
    h.finalize()
        .iter()
        .take(20)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A config value typed as the schema types it (integers and booleans as numbers).
pub(crate) fn typed(version: PveVersion, kind: GuestKind, key: &str, value: &str) -> Value {
    let ty = schema::endpoint("PUT", kind_path(kind))
        .and_then(|ep| ep.param(version, key))
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
    let skiplock = ctx.flag("skiplock") == Some(true);
    let who = ctx.who();
    // qemu-server and pve-container: only the user root@pam (not even its tokens) may skip locks.
    if skiplock && (who.userid != "root@pam" || who.tokenid.is_some()) {
        return Err(ApiError::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    if let Some(l) = g.lock()
        && !skiplock
    {
        return Err(ApiError::fail(format!("{} is locked ({l})", g.kind.word())));
    }
    faults::lock_contention(&ctx.shared, &ctx.key(), ctx.n, g.kind, g.vmid)
}

fn index(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    guest(&ctx.state(), kind, &node, vmid)?;
    let subdirs: &[&str] = match kind {
        GuestKind::Qemu => &[
            "config", "pending", "status", "clone", "template", "resize", "snapshot", "firewall",
            "agent", "rrd", "rrddata",
        ],
        GuestKind::Lxc => &[
            "config", "pending", "status", "clone", "template", "resize", "snapshot", "firewall",
            "rrd", "rrddata",
        ],
    };
    Ok(Value::Array(
        subdirs.iter().map(|s| json!({ "subdir": s })).collect(),
    ))
}

fn config(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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

fn pending(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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

fn current(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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
        // `PVE::HA::Config::get_service_status`: managed unless absent or ignored.
        let ha = match st.ha_of(vmid).filter(|r| r.state != "ignored") {
            Some(r) => json!({ "managed": 1, "state": r.state }),
            None => json!({ "managed": 0 }),
        };
        obj.insert("ha".into(), ha);
        if kind == GuestKind::Qemu {
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
                obj.insert("running-machine".into(), "pc-i440fx-9.0+pve0".into());
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

#[derive(Clone, Copy, PartialEq)]
enum Power {
    Start,
    Stop,
    Shutdown,
    /// Shutdown and start in one worker (pending changes apply).
    Reboot,
    /// A hard reset of the running machine (its config, pending included, unchanged).
    Reset,
    /// Pause a running guest.
    Suspend,
    /// Continue a paused one.
    Resume,
}

impl Power {
    fn word(self) -> &'static str {
        match self {
            Power::Start => "start",
            Power::Stop => "stop",
            Power::Shutdown => "shutdown",
            Power::Reboot => "reboot",
            Power::Reset => "reset",
            Power::Suspend => "suspend",
            Power::Resume => "resume",
        }
    }
}

fn power(ctx: &mut Ctx, kind: GuestKind, action: Power) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.PowerMgmt")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    if action == Power::Start && g.is_template() {
        return Err(ApiError::fail(match kind {
            GuestKind::Qemu => "you can't start a vm if it's a template",
            GuestKind::Lxc => "you can't start a CT if it's a template",
        }));
    }
    // pve-container `src/PVE/API2/LXC/Status.pm` `vm_start` refuses before forking a worker;
    // qemu-server's `PVE::QemuServer::vm_start` refuses inside the worker (the task fails).
    if action == Power::Start && kind == GuestKind::Lxc && g.running() {
        return Err(ApiError::fail(format!("CT {vmid} already running")));
    }
    // qemu-server `vm_reboot`, `vm_reset`, `vm_suspend` check the VM runs before they fork (as
    // pve-container's `vm_reboot`/`vm_suspend` do).
    if matches!(
        action,
        Power::Reboot | Power::Reset | Power::Suspend | Power::Resume
    ) && !g.running()
    {
        return Err(ApiError::fail(format!(
            "{} {vmid} not running",
            kind.word()
        )));
    }
    check_lock(ctx, g)?;
    let word = kind.word();
    let user = ctx.who().task_user();
    // qemu-server `src/PVE/API2/Qemu.pm` `vm_start`/`vm_stop`/`vm_shutdown` and pve-container
    // `src/PVE/API2/LXC/Status.pm`: for an HA-managed guest (`PVE::HA::Config::vm_is_ha_managed`)
    // the worker only asks the HA manager (`ha-manager set <sid> --state started` or
    // `ha-manager crm-command stop <sid> <timeout>`); the CRM/LRM act on it later.
    if st.ha_of(vmid).is_some_and(|r| r.state != "ignored") {
        let (task, wanted, verb) = match action {
            Power::Start | Power::Resume => ("hastart", "started", "start"),
            _ => ("hastop", "stopped", "stop"),
        };
        let sid = ha_sid(kind, vmid);
        let later = shared.clone();
        let job: tasks::Job = Box::new(move |st: &mut State, fail| {
            if fail {
                return Err(INJECTED.into());
            }
            let Some(res) = st.ha_resources.get_mut(&sid) else {
                return Err(format!("resource '{sid}' is not HA managed"));
            };
            res.state = wanted.into();
            ha_act_later(&later, sid, vmid, action);
            Ok(vec![format!("Requesting HA {verb} for {word} {vmid}")])
        });
        let upid = tasks::spawn(
            &shared,
            &mut st,
            &node,
            task,
            &vmid.to_string(),
            &user,
            None,
            job,
        );
        return Ok(upid.into());
    }
    let prefix = if kind == GuestKind::Qemu { "qm" } else { "vz" };
    let task = action.word();
    let (prefix2, task2) = (prefix, task);
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        if action == Power::Start
            && kind == GuestKind::Qemu
            && let Some(g) = st.guests.get(&vmid)
            && !g.running()
            && let Some(msg) = super::mapping::missing_on_start(st, g)
        {
            return Err(msg);
        }
        // A (re)start plugs every NIC into its bridge.
        if matches!(action, Power::Start | Power::Reboot)
            && let Some(g) = st.guests.get(&vmid).cloned()
            && (action == Power::Reboot || !g.running())
            && let Some(msg) = super::network::start_refusal(st, &g, &format!("{prefix2}{task2}"))
        {
            if action == Power::Reboot {
                // The guest stopped before its restart failed.
                if let Some(g) = st.guests.get_mut(&vmid) {
                    g.status = "stopped".into();
                    g.mark_stopped();
                }
            }
            return Err(msg);
        }
        let Some(g) = st.guests.get_mut(&vmid) else {
            return Err(format!("{word} {vmid} does not exist"));
        };
        apply_power(g, action)
    });
    let upid = tasks::spawn(
        &shared,
        &mut st,
        &node,
        &format!("{prefix}{task}"),
        &vmid.to_string(),
        &user,
        None,
        job,
    );
    Ok(upid.into())
}

/// Starts or stops a guest as the power workers do.
fn apply_power(g: &mut Guest, action: Power) -> Result<Vec<String>, String> {
    let (word, vmid) = (g.kind.word(), g.vmid);
    match action {
        Power::Start if g.running() => Err(format!("{word} {vmid} already running")),
        Power::Start => {
            let pending = std::mem::take(&mut g.pending);
            g.config.extend(pending);
            for k in std::mem::take(&mut g.pending_delete) {
                g.config.remove(&k);
            }
            g.status = "running".into();
            g.mark_started();
            Ok(Vec::new())
        }
        Power::Shutdown if !g.running() => Err(format!("{word} {vmid} not running")),
        Power::Stop | Power::Shutdown => {
            g.status = "stopped".into();
            g.mark_stopped();
            g.paused = false;
            Ok(Vec::new())
        }
        _ if !g.running() => Err(format!("{word} {vmid} not running")),
        Power::Reboot => {
            apply_power(g, Power::Stop)?;
            apply_power(g, Power::Start)
        }
        Power::Reset => {
            g.paused = false;
            Ok(Vec::new())
        }
        Power::Suspend => {
            g.paused = true;
            Ok(Vec::new())
        }
        Power::Resume => {
            g.paused = false;
            Ok(Vec::new())
        }
    }
}

/// The HA stack acting on a resource now asking to be started (or stopped).
pub(crate) fn ha_request(shared: &Arc<Shared>, sid: String, vmid: u32, start: bool) {
    let action = if start { Power::Start } else { Power::Stop };
    ha_act_later(shared, sid, vmid, action);
}

/// The HA stack acting on a request: the CRM sees the new state and the LRM starts or stops the
/// guest a while after the `hastart`/`hastop` worker ended (one more `hastart`/`hastop` task
/// time here), so a caller that only waits for the task still finds the old status.
fn ha_act_later(shared: &Arc<Shared>, sid: String, vmid: u32, action: Power) {
    let kind = match action {
        Power::Start | Power::Resume => "hastart",
        _ => "hastop",
    };
    let delay = lock(&shared.durations).of(kind);
    let shared2 = shared.clone();
    let key = format!("ha:{sid}");
    let key2 = key.clone();
    let handle = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut st = lock(&shared2.state);
        // The LRM only acts while the resource still asks for this state (`disabled` is a
        // stop too: pve-ha-manager `src/PVE/HA/Manager.pm` `next_state_started` sends a
        // `request_stop` for both).
        let start = matches!(action, Power::Start | Power::Resume);
        let asks = |state: &str| match state {
            "started" => start,
            "stopped" | "disabled" => !start,
            _ => false,
        };
        if st.ha_resources.get(&sid).is_some_and(|r| asks(&r.state)) {
            if let Some(g) = st.guests.get_mut(&vmid) {
                let _ = apply_power(g, action);
            }
            shared2.persist(&st);
        }
        drop(st);
        lock(&shared2.running).remove(&key2);
    });
    lock(&shared.running).insert(key, handle.abort_handle());
}

/// `POST .../template` as qemu-server `PVE/API2/Qemu.pm` `template` and pve-container
/// `PVE/API2/LXC.pm` `template` do it: the checks under the config lock (snapshots, already a
/// template, running), then a forked worker (`qmtemplate`, `vztemplate`) converts. Qemu answers
/// the UPID; LXC answers null although it forked, so its caller finds the task in the node's
/// task list.
fn template(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Allocate")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?;
    check_lock(ctx, g)?;
    let (what, it) = match kind {
        GuestKind::Qemu => ("VM", "VM"),
        GuestKind::Lxc => ("CT", "the CT"),
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
        if kind == GuestKind::Lxc {
            lacks_template_feature(st, vmid)?;
        }
        convert_to_template(st, vmid);
        Ok(Vec::new())
    });
    let upid = tasks::spawn(
        &shared,
        &mut st,
        &node,
        if kind == GuestKind::Qemu {
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
        GuestKind::Qemu => upid.into(),
        // pve-container returns `undef` after `fork_worker`.
        GuestKind::Lxc => Value::Null,
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
        if !is_disk_key(g.kind, k) || k.starts_with("unused") {
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
        if is_disk_key(kind, k)
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

fn resize(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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
        .filter(|_| is_disk_key(kind, &disk))
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

fn destroy(ctx: &mut Ctx, kind: GuestKind) -> Result<Value, ApiError> {
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
    let force = kind == GuestKind::Lxc && ctx.flag("force").unwrap_or(false);
    if g.running() && !force {
        return Err(ApiError::fail(match kind {
            GuestKind::Qemu => format!("{word} {vmid} is running - destroy failed"),
            GuestKind::Lxc => format!("unable to destroy CT {vmid} - container is running"),
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
        // `PVE::HA::Config::delete_service_from_config("vm:$vmid", $purge)` after the destroy.
        if purge {
            st.ha_resources.remove(&sid);
            super::backup::remove_vmid_from_jobs(st, vmid);
        }
        Ok(log)
    });
    let kind_s = if kind == GuestKind::Qemu {
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
                let kind = if stringify!($name).starts_with("qemu") { GuestKind::Qemu } else { GuestKind::Lxc };
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
    qemu_start => power(Power::Start); lxc_start => power(Power::Start);
    qemu_stop => power(Power::Stop); lxc_stop => power(Power::Stop);
    qemu_shutdown => power(Power::Shutdown); lxc_shutdown => power(Power::Shutdown);
    qemu_reboot => power(Power::Reboot); lxc_reboot => power(Power::Reboot);
    qemu_suspend => power(Power::Suspend); lxc_suspend => power(Power::Suspend);
    qemu_resume => power(Power::Resume); lxc_resume => power(Power::Resume);
    qemu_reset => power(Power::Reset);
    qemu_template => template; lxc_template => template;
    qemu_resize => resize; lxc_resize => resize;
    qemu_destroy => destroy; lxc_destroy => destroy;
    qemu_clone => clone; lxc_clone => clone;
}
