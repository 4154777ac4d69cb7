//! `POST .../status/{start,stop,shutdown,reboot,reset,suspend,resume}` as qemu-server
//! `src/PVE/API2/Qemu.pm` (`vm_start` ... `vm_resume`, workers in `PVE/QemuServer.pm` and
//! `PVE/QemuServer/RunState.pm`) and pve-container `src/PVE/API2/LXC/Status.pm` do them: which
//! refusals answer synchronously and which fail the forked worker, which actions go through HA
//! (`hastart`/`hastop` for start, stop and shutdown only), the task names (`qmpause` for a
//! suspend, `qmsuspend` for one to disk) and where each lock check sits.

use serde_json::Value;
use std::sync::Arc;

use super::{Ctx, disks, guest, locks};
use crate::error::ApiError;
use crate::faults;
use crate::server::{Shared, lock};
use crate::state::{Guest, GuestType, State, ha_sid};
use crate::tasks::{self, INJECTED};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Power {
    Start,
    Stop,
    Shutdown,
    /// Shutdown and start in one worker (pending changes apply).
    Reboot,
    /// A hard reset of the running machine (its config, pending included, unchanged).
    Reset,
    /// Qemu: pause (`qmpause`) or save to disk and stop (`todisk=1`, `qmsuspend`); LXC:
    /// `lxc-checkpoint -s`, which leaves the container stopped with a checkpoint.
    Suspend,
    /// Continue a paused VM, start one suspended to disk, restore a container's checkpoint.
    Resume,
}

/// What the synchronous part decided and the worker needs.
#[derive(Clone)]
struct Request {
    kind: GuestType,
    vmid: u32,
    action: Power,
    skiplock: bool,
    /// Qemu suspend to disk: the storage the state goes to.
    to_disk: Option<String>,
    /// Qemu resume of a VM suspended to disk (`lock: suspended`), decided before the fork.
    suspended: bool,
}

/// The `skiplock` parameter, which only the user root@pam (not even its tokens) may use.
pub(crate) fn skiplock(ctx: &Ctx) -> Result<bool, ApiError> {
    let skiplock = ctx.flag("skiplock") == Some(true);
    let who = ctx.who();
    if skiplock && (who.userid != "root@pam" || who.tokenid.is_some()) {
        return Err(ApiError::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    Ok(skiplock)
}

fn power(ctx: &mut Ctx, kind: GuestType, mut action: Power) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.PowerMgmt")?;
    let skiplock = skiplock(ctx)?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let g = guest(&st, kind, &node, vmid)?.clone();
    let ha_managed = st.ha_of(vmid).is_some_and(|r| r.state != "ignored");
    let to_disk = if kind == GuestType::Qemu && action == Power::Suspend {
        suspend_target(ctx, &st, &g, ha_managed)?
    } else {
        refuse_before_fork(&g, action)?;
        None
    };
    let task = task_name(kind, action, to_disk.is_some());
    // qemu-server `vm_shutdown`: a paused VM would never see the ACPI request, so it is
    // refused, or stopped instead with `forceStop`.
    if kind == GuestType::Qemu && action == Power::Shutdown && g.paused {
        if ctx.flag("forceStop") != Some(true) {
            return Err(ApiError::fail("VM is paused - cannot shutdown"));
        }
        action = Power::Stop;
    }
    faults::lock_contention(&ctx.shared, &ctx.key(), ctx.n, kind, vmid)?;
    let user = ctx.who().task_user();
    let word = kind.word();
    if ha_managed && matches!(action, Power::Start | Power::Stop | Power::Shutdown) {
        let start = action == Power::Start;
        let (task, wanted, verb) = if start {
            ("hastart", "started", "start")
        } else {
            ("hastop", "stopped", "stop")
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
            ha_request(&later, sid, vmid, start);
            Ok(vec![format!("Requesting HA {verb} for {word} {vmid}")])
        });
        let id = vmid.to_string();
        let upid = tasks::spawn(&shared, &mut st, &node, task, &id, &user, None, job);
        return Ok(upid.into());
    }
    let request = Request {
        kind,
        vmid,
        action,
        skiplock,
        suspended: g.lock() == Some("suspended"),
        to_disk,
    };
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        work(st, &request)
    });
    let id = vmid.to_string();
    let upid = tasks::spawn(&shared, &mut st, &node, task, &id, &user, None, job);
    Ok(upid.into())
}

/// The worker type each action forks. A paused VM's shutdown with `forceStop` still runs as
/// `qmshutdown`, so the name follows the endpoint, not the stop it turned into.
fn task_name(kind: GuestType, action: Power, to_disk: bool) -> &'static str {
    match (kind, action) {
        (GuestType::Qemu, Power::Start) => "qmstart",
        (GuestType::Qemu, Power::Stop) => "qmstop",
        (GuestType::Qemu, Power::Shutdown) => "qmshutdown",
        (GuestType::Qemu, Power::Reboot) => "qmreboot",
        (GuestType::Qemu, Power::Reset) => "qmreset",
        (GuestType::Qemu, Power::Suspend) if to_disk => "qmsuspend",
        (GuestType::Qemu, Power::Suspend) => "qmpause",
        (GuestType::Qemu, Power::Resume) => "qmresume",
        (GuestType::Lxc, Power::Start) => "vzstart",
        (GuestType::Lxc, Power::Stop) => "vzstop",
        (GuestType::Lxc, Power::Shutdown) => "vzshutdown",
        (GuestType::Lxc, Power::Reboot | Power::Reset) => "vzreboot",
        (GuestType::Lxc, Power::Suspend) => "vzsuspend",
        (GuestType::Lxc, Power::Resume) => "vzresume",
    }
}

/// The refusals PVE answers before it forks (a 500 with the text, no task).
fn refuse_before_fork(g: &Guest, action: Power) -> Result<(), ApiError> {
    let vmid = g.vmid;
    let running = g.running();
    let text = match (g.kind, action) {
        (GuestType::Qemu, Power::Reboot) if g.paused => {
            Some("VM is paused - cannot shutdown".into())
        }
        (GuestType::Qemu, Power::Reboot | Power::Reset) if !running => {
            Some(format!("VM {vmid} not running"))
        }
        // `vm_resume`: a VM suspended to disk is stopped but resumable.
        (GuestType::Qemu, Power::Resume) if !running && g.lock() != Some("suspended") => {
            Some(format!("VM {vmid} not running"))
        }
        (GuestType::Lxc, Power::Start | Power::Resume) if running => {
            Some(format!("CT {vmid} already running"))
        }
        (GuestType::Lxc, Power::Stop | Power::Shutdown | Power::Suspend) if !running => {
            Some(format!("CT {vmid} not running"))
        }
        // pve-container `vm_reboot` says "VM" here.
        (GuestType::Lxc, Power::Reboot) if !running => Some(format!("VM {vmid} not running")),
        _ => None,
    };
    text.map_or(Ok(()), |t| Err(ApiError::fail(t)))
}

/// qemu-server `vm_suspend`'s synchronous checks; the storage a suspend to disk writes to.
fn suspend_target(
    ctx: &Ctx,
    st: &State,
    g: &Guest,
    ha_managed: bool,
) -> Result<Option<String>, ApiError> {
    let vmid = g.vmid;
    if !g.running() {
        return Err(ApiError::fail(format!("VM {vmid} not running")));
    }
    if ctx.flag("todisk") != Some(true) {
        return Ok(None);
    }
    if ha_managed {
        return Err(ApiError::fail("Cannot suspend HA managed VM to disk"));
    }
    ctx.require(&format!("/vms/{vmid}"), "VM.Config.Disk")?;
    if g.config.keys().any(|k| is_indexed(k, "hostpci")) {
        return Err(ApiError::fail(
            "cannot suspend VM to disk due to passed-through PCI device(s), which lack the \
             possibility to save/restore their internal state",
        ));
    }
    let storage = match ctx.p("statestorage") {
        Some(s) => s.to_owned(),
        None => super::snapshot::vmstate_storage(st, &g.node, &g.config)
            .unwrap_or_else(|| "local".into()),
    };
    ctx.require(&format!("/storage/{storage}"), "Datastore.AllocateSpace")?;
    Ok(Some(storage))
}

fn is_indexed(key: &str, family: &str) -> bool {
    key.strip_prefix(family)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The forked worker: its checks under the config lock, then the change.
fn work(st: &mut State, r: &Request) -> Result<Vec<String>, String> {
    let (word, vmid) = (r.kind.word(), r.vmid);
    let Some(g) = st.guests.get(&vmid).cloned() else {
        return Err(format!("{word} {vmid} does not exist"));
    };
    let lock = g.lock();
    let locked = |exempt: &[&str]| match lock {
        Some(l) if !r.skiplock && !exempt.contains(&l) => Err(format!("{word} is locked ({l})")),
        _ => Ok(()),
    };
    match (r.kind, r.action) {
        (GuestType::Qemu, Power::Start) => start_vm(st, &g, r.skiplock),
        (GuestType::Qemu, Power::Resume) if r.suspended => start_vm(st, &g, r.skiplock),
        // `_do_vm_stop`: a VM that does not run is done before the lock is looked at.
        (GuestType::Qemu, Power::Stop | Power::Shutdown | Power::Reboot) if !g.running() => {
            Ok(Vec::new())
        }
        (GuestType::Qemu, Power::Stop | Power::Shutdown) => {
            locked(&[])?;
            with_guest(st, vmid, stop_now)
        }
        (GuestType::Qemu, Power::Reboot) | (GuestType::Lxc, Power::Reboot) => {
            if r.kind == GuestType::Qemu {
                locked(&[])?;
            } else if !g.running() {
                return Ok(Vec::new());
            }
            with_guest(st, vmid, stop_now)?;
            // qmeventd (qemu) or the reboot hook (lxc) starts it again, pending applied.
            start_checked(st, vmid, task_name(r.kind, r.action, false))
        }
        (GuestType::Qemu, Power::Reset) => {
            locked(&[])?;
            with_guest(st, vmid, |g| g.paused = false)
        }
        (GuestType::Qemu, Power::Suspend) => {
            let backing_up = lock == Some("backup");
            if !backing_up {
                locked(&[])?;
            }
            match &r.to_disk {
                Some(_) if backing_up => Err("cannot suspend to disk during backup".into()),
                Some(storage) => suspend_to_disk(st, &g, storage),
                None => with_guest(st, vmid, |g| g.paused = true),
            }
        }
        (GuestType::Qemu, Power::Resume) => {
            if g.is_template() {
                return Err(format!("VM {vmid} is a template and cannot be resumed!"));
            }
            if !g.paused {
                return Ok(Vec::new());
            }
            locked(&["backup"])?;
            with_guest(st, vmid, |g| g.paused = false)
        }
        (GuestType::Lxc, Power::Start) => {
            if g.is_template() {
                return Err("you can't start a CT if it's a template".into());
            }
            locked(&["mounted"])?;
            if g.running() {
                return Err(format!("CT {vmid} already running"));
            }
            start_checked(st, vmid, "vzstart")
        }
        (GuestType::Lxc, Power::Stop) => {
            locked(&["mounted"])?;
            with_guest(st, vmid, stop_now)
        }
        // pve-container `vm_shutdown` checks the lock even with `skiplock`-less callers only.
        (GuestType::Lxc, Power::Shutdown) => {
            if let Some(l) = lock {
                return Err(format!("{word} is locked ({l})"));
            }
            with_guest(st, vmid, stop_now)
        }
        (GuestType::Lxc, Power::Suspend) => {
            if let Some(l) = lock {
                return Err(format!("{word} is locked ({l})"));
            }
            // `lxc-checkpoint -s` dumps the container and stops it; the dump stays for resume.
            with_guest(st, vmid, |g| {
                stop_now(g);
                g.paused = true;
            })
        }
        (GuestType::Lxc, Power::Resume) => {
            if !g.paused {
                return Err(format!(
                    "command 'lxc-checkpoint -n {vmid} -r --foreground -D /var/lib/vz/dump' \
                     failed: exit code 1"
                ));
            }
            with_guest(st, vmid, |g| {
                g.status = "running".into();
                g.mark_started();
                g.paused = false;
            })
        }
        (GuestType::Lxc, Power::Reset) => Err("no reset for containers".into()),
    }
}

/// qemu-server `PVE::QemuServer::vm_start` and `vm_start_nolock`.
fn start_vm(st: &mut State, g: &Guest, skiplock: bool) -> Result<Vec<String>, String> {
    let vmid = g.vmid;
    if g.is_template() {
        return Err("you can't start a vm if it's a template".into());
    }
    let lock = g.lock();
    // A backup runs the VM's own QEMU instance: a start only resumes it.
    if lock == Some("backup") && g.running() {
        return with_guest(st, vmid, |g| g.paused = false);
    }
    let suspended = lock == Some("suspended");
    if let Some(l) = lock
        && !(skiplock || suspended)
    {
        return Err(format!("VM is locked ({l})"));
    }
    if g.running() {
        return Err(format!("VM {vmid} already running"));
    }
    if let Some(msg) = super::mapping::missing_on_start(st, g) {
        return Err(msg);
    }
    if let Some(msg) = super::network::start_refusal(st, g, "qmstart") {
        return Err(msg);
    }
    // A VM resumed from its saved state keeps its pending changes and frees the state volume.
    if suspended || g.config.contains_key("vmstate") {
        if let Some(volid) = g.config.get("vmstate") {
            st.remove_volume(&g.node, volid);
        }
        return with_guest(st, vmid, |g| {
            for key in ["lock", "vmstate", "runningmachine", "runningcpu"] {
                g.config.remove(key);
            }
            g.status = "running".into();
            g.mark_started();
        });
    }
    with_guest(st, vmid, start_now)
}

/// A (re)start that plugs every NIC into its bridge first.
fn start_checked(st: &mut State, vmid: u32, task: &str) -> Result<Vec<String>, String> {
    let Some(g) = st.guests.get(&vmid).cloned() else {
        return Err(format!("VM {vmid} does not exist"));
    };
    if let Some(msg) = super::network::start_refusal(st, &g, task) {
        return Err(msg);
    }
    with_guest(st, vmid, start_now)
}

/// qemu-server `RunState::vm_suspend` with a state file: the RAM goes to
/// `vm-N-state-suspend-YYYY-MM-DD` (`__snapshot_save_vmstate`), the config keeps it as `vmstate`
/// with `lock: suspended`, and the VM quits.
fn suspend_to_disk(st: &mut State, g: &Guest, storage: &str) -> Result<Vec<String>, String> {
    let vmid = g.vmid;
    let date = super::backup::archive_time(crate::auth::now())[..10].replace('_', "-");
    let name = format!("vm-{vmid}-state-suspend-{date}");
    let size = super::snapshot::vmstate_size(&g.config);
    let volid = disks::allocate_named(
        st,
        &g.node,
        storage,
        vmid,
        size,
        Some("raw"),
        GuestType::Qemu,
        Some(&name),
    )
    .map_err(|e| e.text())?;
    locks::take(st, vmid, "suspended")?;
    with_guest(st, vmid, |g| {
        g.config.insert("vmstate".into(), volid.clone());
        g.config.insert(
            "runningmachine".into(),
            super::guest::RUNNING_MACHINE.into(),
        );
        stop_now(g);
    })
    .map(|_| vec!["State saved, quitting".into()])
}

fn with_guest(
    st: &mut State,
    vmid: u32,
    change: impl FnOnce(&mut Guest),
) -> Result<Vec<String>, String> {
    match st.guests.get_mut(&vmid) {
        Some(g) => {
            change(g);
            Ok(Vec::new())
        }
        None => Err(format!("VM {vmid} does not exist")),
    }
}

/// Starts a stopped guest, its pending changes applied.
fn start_now(g: &mut Guest) {
    let pending = std::mem::take(&mut g.pending);
    g.config.extend(pending);
    for k in std::mem::take(&mut g.pending_delete) {
        g.config.remove(&k);
    }
    g.status = "running".into();
    g.paused = false;
    g.mark_started();
}

fn stop_now(g: &mut Guest) {
    g.status = "stopped".into();
    g.mark_stopped();
    g.paused = false;
}

/// The HA stack acting on a request: the CRM sees the new state and the LRM starts or stops the
/// guest a while after the `hastart`/`hastop` worker ended (one more `hastart`/`hastop` task
/// time here), so a caller that only waits for the task still finds the old status.
pub(crate) fn ha_request(shared: &Arc<Shared>, sid: String, vmid: u32, start: bool) {
    let delay = lock(&shared.durations).of(if start { "hastart" } else { "hastop" });
    let shared2 = shared.clone();
    let key = format!("ha:{sid}");
    let key2 = key.clone();
    let handle = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut st = lock(&shared2.state);
        // The LRM only acts while the resource still asks for this state (`disabled` is a
        // stop too: pve-ha-manager `src/PVE/HA/Manager.pm` `next_state_started` sends a
        // `request_stop` for both).
        let asks = |state: &str| match state {
            "started" => start,
            "stopped" | "disabled" => !start,
            _ => false,
        };
        if st.ha_resources.get(&sid).is_some_and(|r| asks(&r.state)) {
            if let Some(g) = st.guests.get_mut(&vmid) {
                match (start, g.running()) {
                    (true, false) => start_now(g),
                    (false, true) => stop_now(g),
                    _ => {}
                }
            }
            shared2.persist(&st);
        }
        drop(st);
        lock(&shared2.running).remove(&key2);
    });
    lock(&shared.running).insert(key, handle.abort_handle());
}

macro_rules! endpoints {
    ($($name:ident => $kind:ident $action:ident;)*) => {
        $(
            pub(crate) fn $name(ctx: &mut Ctx) -> Result<Value, ApiError> {
                power(ctx, GuestType::$kind, Power::$action)
            }
        )*
    };
}

endpoints! {
    qemu_start => Qemu Start; lxc_start => Lxc Start;
    qemu_stop => Qemu Stop; lxc_stop => Lxc Stop;
    qemu_shutdown => Qemu Shutdown; lxc_shutdown => Lxc Shutdown;
    qemu_reboot => Qemu Reboot; lxc_reboot => Lxc Reboot;
    qemu_suspend => Qemu Suspend; lxc_suspend => Lxc Suspend;
    qemu_resume => Qemu Resume; lxc_resume => Lxc Resume;
    qemu_reset => Qemu Reset;
}
