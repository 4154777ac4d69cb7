//! Node networks: `GET /nodes/{node}/network` as pve-manager `PVE/API2/Network.pm` `index`
//! lists `/etc/network/interfaces` for a node set up as a fresh install (`eno1` enslaved to
//! `vmbr0`, which holds the node's address and default gateway) plus the node's other bridges
//! (no address, no ports); and the start-time check that every NIC's bridge exists, as
//! pve-common `PVE/Network.pm` `read_bridge_mtu` (reached from qemu-server's `pve-bridge` via
//! `tap_plug`) and pve-container `src/lxcnetaddbr` refuse a missing one.

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::error::ApiError;
use crate::state::{Guest, GuestType, State};

/// The node's interfaces, sorted by name (`hash_to_array` of the sorted hash).
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    let pos = st.nodes.iter().position(|n| n.node == node).unwrap_or(0);
    let bridges = st
        .node(&node)
        .map(|n| n.bridges.clone())
        .unwrap_or_default();
    let filter = ctx.p("type").map(str::to_string);
    let ip = format!("127.0.0.{}", pos + 1);
    let mut rows = vec![json!({
        "iface": "eno1", "type": "eth", "method": "manual", "families": ["inet"], "active": 1,
        "exists": 1, "priority": 1,
    })];
    for (i, b) in bridges.iter().enumerate() {
        let mut row = json!({
            "iface": b, "type": "bridge", "families": ["inet"], "active": 1, "autostart": 1,
            "bridge_stp": "off", "bridge_fd": "0", "priority": 2 + i,
        });
        if b == "vmbr0" {
            row["method"] = "static".into();
            row["bridge_ports"] = "eno1".into();
            row["address"] = ip.clone().into();
            row["netmask"] = "24".into();
            row["cidr"] = format!("{ip}/24").into();
            row["gateway"] = "127.0.0.254".into();
        } else {
            row["method"] = "manual".into();
            row["bridge_ports"] = "".into();
        }
        rows.push(row);
    }
    // `$can_access_vnet`: a bridge only for who may audit or use it in the localnetwork zone.
    rows.retain(|r| {
        let name = r["iface"].as_str().unwrap_or_default();
        r["type"] != "bridge"
            || ctx.root()
            || ctx.allowed(&format!("/sdn/zones/localnetwork/{name}"), "SDN.Audit")
            || ctx.allowed(&format!("/sdn/zones/localnetwork/{name}"), "SDN.Use")
    });
    if let Some(t) = filter {
        rows.retain(|r| {
            let ty = r["type"].as_str().unwrap_or_default();
            ty == t || (ty == "bridge" && (t == "any_bridge" || t == "any_local_bridge"))
        });
    }
    rows.sort_by(|a, b| a["iface"].as_str().cmp(&b["iface"].as_str()));
    Ok(Value::Array(rows))
}

/// The bridge of a guest's first NIC (in key order) that exists neither on the node nor as a
/// VNet, with the config the guest starts with (pending changes applied).
pub(crate) fn missing_bridge(st: &State, g: &Guest) -> Option<String> {
    let node = st.node(&g.node)?;
    let mut conf = g.config.clone();
    conf.extend(g.pending.clone());
    for k in &g.pending_delete {
        conf.remove(k);
    }
    conf.iter()
        .filter(|(k, _)| {
            k.strip_prefix("net")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|(_, v)| {
            v.split(',')
                .find_map(|p| p.strip_prefix("bridge="))
                .map(str::to_string)
        })
        .find(|b| !node.bridges.contains(b) && !st.vnets.contains_key(b))
}

/// The start task's failure for a missing bridge: the script's message in the task log, then
/// qemu-server `vm_start_nolock`'s "start failed: QEMU exited with code 1" or pve-container
/// `vm_start`'s `startup for container '<vmid>' failed`.
pub(crate) fn start_refusal(st: &mut State, g: &Guest, task_kind: &str) -> Option<String> {
    let bridge = missing_bridge(st, g)?;
    let id = g.vmid.to_string();
    if let Some(t) = st
        .tasks
        .iter_mut()
        .rev()
        .find(|t| t.status == "running" && t.kind == task_kind && t.id == id)
    {
        t.log.push(format!("bridge '{bridge}' does not exist"));
    }
    Some(match g.kind {
        GuestType::Qemu => "start failed: QEMU exited with code 1".to_string(),
        GuestType::Lxc => format!("startup for container '{}' failed", g.vmid),
    })
}
