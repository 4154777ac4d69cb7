//! The QEMU guest agent commands a client reads (qemu-server `src/PVE/API2/Qemu/Agent.pm`):
//! `ping`, `info`, `network-get-interfaces`, `get-osinfo`, `get-host-name`, `get-time`, each
//! answering `{"result": ...}` after `PVE::QemuServer::Agent::assert_agent_available` ("No QEMU
//! guest agent configured", "VM N is not running"). The simulated guest's agent reports what
//! its config says: a NIC per `netN` with its MAC, and the addresses of its `ipconfigN`.

use serde_json::{Value, json};

use super::{Ctx, guest};
use crate::error::ApiError;
use crate::state::{Guest, GuestKind};
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
    guest(&st, GuestKind::Qemu, &node, vmid)?;
    Ok(Value::Array(
        COMMANDS
            .iter()
            .map(|(c, _)| json!({ "command": c }))
            .collect(),
    ))
}

fn agent_enabled(g: &Guest) -> bool {
    g.config.get("agent").is_some_and(|a| {
        a.split(',')
            .any(|p| p == "1" || p == "enabled=1" || p == "enabled=true")
    })
}

/// The guest, once `assert_agent_available` holds, with the privilege each release asks
/// (`VM.GuestAgent.Audit` from PVE 9, `VM.Monitor` before).
fn available(ctx: &Ctx) -> Result<Guest, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    let st = ctx.state();
    let privilege = if st.pve_version >= PveVersion::V9_1 {
        "VM.GuestAgent.Audit"
    } else {
        "VM.Monitor"
    };
    ctx.require(&format!("/vms/{vmid}"), privilege)?;
    let g = guest(&st, GuestKind::Qemu, &node, vmid)?;
    if !g.config.contains_key("agent") || !agent_enabled(g) {
        return Err(ApiError::fail("No QEMU guest agent configured"));
    }
    if !g.running() {
        return Err(ApiError::fail(format!("VM {vmid} is not running")));
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

/// The interfaces: `lo`, then `ethN` per `netN` with its MAC and the `ipconfigN` addresses (a
/// DHCP one gets `10.<vmid / 256>.<vmid % 256>.<N + 10>`, so each guest's is stable and its own).
pub(crate) fn interfaces(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let g = available(ctx)?;
    let mut out = vec![json!({
        "name": "lo",
        "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            { "ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8 },
            { "ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128 },
        ],
    })];
    let mut nets: Vec<(u32, &String)> = g
        .config
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("net")?.parse().ok()?, v)))
        .collect();
    nets.sort_unstable_by_key(|(i, _)| *i);
    for (i, value) in nets {
        let mac = value
            .split(',')
            .find_map(|p| {
                let (_, v) = p.split_once('=')?;
                (v.len() == 17 && v.matches(':').count() == 5).then(|| v.to_ascii_lowercase())
            })
            .unwrap_or_default();
        let mut addrs = Vec::new();
        if let Some(ipc) = g.config.get(&format!("ipconfig{i}")) {
            for part in ipc.split(',') {
                let Some((k, v)) = part.split_once('=') else {
                    continue;
                };
                let family = match k {
                    "ip" => "ipv4",
                    "ip6" => "ipv6",
                    _ => continue,
                };
                let (ip, prefix) = match v {
                    "dhcp" if family == "ipv4" => (
                        format!("10.{}.{}.{}", g.vmid / 256 % 256, g.vmid % 256, i + 10),
                        24,
                    ),
                    "dhcp" | "auto" | "manual" => continue,
                    cidr => match cidr.split_once('/') {
                        Some((a, p)) => (a.to_owned(), p.parse().unwrap_or(24)),
                        None => continue,
                    },
                };
                addrs
                    .push(json!({ "ip-address": ip, "ip-address-type": family, "prefix": prefix }));
            }
        }
        out.push(json!({
            "name": format!("eth{i}"),
            "hardware-address": mac,
            "ip-addresses": addrs,
        }));
    }
    result(Value::Array(out))
}
