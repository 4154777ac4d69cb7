//! The QEMU guest agent commands a client reads (qemu-server `src/PVE/API2/Qemu/Agent.pm`):
//! `ping`, `info`, `network-get-interfaces`, `get-osinfo`, `get-host-name`, `get-time`, each
//! answering `{"result": ...}` after `PVE::QemuServer::Agent::assert_agent_available` ("No QEMU
//! guest agent configured", "VM N is not running", "QEMU guest agent is not running"). The
//! simulated guest's agent answers once the VM has run for a while with `agent` enabled and
//! reports what its config says ([`super::interfaces`]): a NIC per `netN` with its MAC, the
//! addresses of its `ipconfigN`, leases derived from the MAC.

use serde_json::{Value, json};

use super::{Ctx, guest, interfaces};
use crate::error::ApiError;
use crate::schema::parse_bool;
use crate::state::{Guest, GuestType};
use crate::version::PveVersion;

/// The commands served, with their HTTP method.
const COMMANDS: &[(&str, &str)] = &[
    ("ping", "POST"),
    ("info", "GET"),
    ("network-get-interfaces", "GET"),
    ("get-osinfo", "GET"),
    ("get-host-name", "GET"),
    ("get-time", "GET"),
];

/// `GET .../agent`: the command index.
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let st = ctx.state();
    guest(&st, GuestType::Qemu, &node, vmid)?;
    Ok(Value::Array(
        COMMANDS
            .iter()
            .map(|(c, _)| json!({ "command": c }))
            .collect(),
    ))
}

/// qemu-server `PVE/QemuServer/Agent.pm` `parse_guest_agent`: `enabled` is the default key
/// (`agent: 1`, `agent: enabled=1,fstrim_cloned_disks=1`), off by default.
fn agent_enabled(g: &Guest) -> bool {
    g.config.get("agent").is_some_and(|a| {
        a.split(',').any(|p| {
            let value = match p.split_once('=') {
                Some(("enabled", v)) => v,
                Some(_) => return false,
                None => p,
            };
            parse_bool(value) == Some(true)
        })
    })
}

/// The guest, once `assert_agent_available` holds, with the privilege each release asks
/// (qemu-server `API2/Qemu/Agent.pm` `register_command`: from PVE 9 the command's own,
/// `VM.GuestAgent.Audit` for these reads, or `VM.GuestAgent.Unrestricted`; `VM.Monitor`
/// before). `assert_agent_available` refuses a VM without an `agent` key, then one not
/// running, then one whose agent does not answer `guest-ping`: a disabled agent has no
/// channel, a paused VM's does not answer, a guest OS without one never
/// ([`crate::Guest::agent_missing`]), and a booting guest's not yet
/// ([`crate::TaskDurations::agent_start`]).
fn available(ctx: &Ctx) -> Result<Guest, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let wait = interfaces::agent_start(ctx);
    let st = ctx.state();
    let path = format!("/vms/{vmid}");
    if st.pve_version >= PveVersion::V9_1 {
        ctx.require_any(
            &path,
            &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"],
        )?;
    } else {
        ctx.require(&path, "VM.Monitor")?;
    }
    let g = guest(&st, GuestType::Qemu, &node, vmid)?;
    if !g.config.contains_key("agent") {
        return Err(ApiError::fail("No QEMU guest agent configured"));
    }
    if !g.running() {
        return Err(ApiError::fail(format!("VM {vmid} is not running")));
    }
    if !agent_enabled(g) || g.paused || g.agent_missing || !interfaces::up(g, wait) {
        return Err(ApiError::fail("QEMU guest agent is not running"));
    }
    Ok(g.clone())
}

fn result(v: Value) -> Result<Value, ApiError> {
    Ok(json!({ "result": v }))
}

pub(crate) fn ping(ctx: &mut Ctx) -> Result<Value, ApiError> {
    available(ctx)?;
    result(json!({}))
}

pub(crate) fn info(ctx: &mut Ctx) -> Result<Value, ApiError> {
    available(ctx)?;
    let supported: Vec<Value> = COMMANDS
        .iter()
        .map(|(c, _)| json!({ "name": format!("guest-{c}"), "enabled": true, "success-response": true }))
        .collect();
    result(json!({ "version": "8.2.2", "supported_commands": supported }))
}

pub(crate) fn host_name(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let g = available(ctx)?;
    result(json!({ "host-name": g.name() }))
}

pub(crate) fn time(ctx: &mut Ctx) -> Result<Value, ApiError> {
    available(ctx)?;
    result(json!(crate::auth::now() * 1_000_000_000))
}

pub(crate) fn osinfo(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let g = available(ctx)?;
    let ostype = g.config.get("ostype").map_or("l26", String::as_str);
    let info = if ostype.starts_with('w') {
        json!({
            "id": "mswindows",
            "name": "Microsoft Windows",
            "pretty-name": "Windows",
            "kernel-release": "10.0",
            "machine": "x86_64",
        })
    } else {
        json!({
            "id": "linux",
            "name": "Linux",
            "pretty-name": "Linux",
            "kernel-release": "6.12.0",
            "kernel-version": "#1 SMP PREEMPT_DYNAMIC",
            "machine": "x86_64",
        })
    };
    result(info)
}

/// The interfaces ([`interfaces::nics`]): `lo`, then `ethN` per `netN` with its MAC and
/// addresses.
pub(crate) fn interfaces(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let g = available(ctx)?;
    result(interfaces::agent_json(&interfaces::nics(&g, true)))
}
