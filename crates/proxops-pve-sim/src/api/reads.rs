//! Read-only endpoints that monitoring and inventory tools call (prometheus-pve-exporter's
//! default collectors, Ansible's info modules), answered as pve-manager does for a cluster
//! without backup jobs, replication jobs or a subscription:
//! - `GET /cluster/backup-info/not-backed-up` (`PVE/API2/Cluster/BackupInfo.pm`): every guest
//!   the user may audit that no enabled vzdump job covers;
//! - `GET /nodes/{node}/replication` (`PVE/API2/Replication.pm`): no jobs;
//! - `GET /nodes/{node}/subscription` (`PVE/API2/Subscription.pm`): `notfound`;
//! - `GET /storage/{storage}` (pve-storage `PVE/API2/Storage/Config.pm` `read`);
//! - `GET /nodes/{node}/dns` (`PVE/API2/Nodes.pm` via `PVE::INotify` `resolv.conf`).

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::error::ApiError;
use crate::state::GuestType;

pub(crate) fn not_backed_up(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    let covered = super::backup::included(&st);
    let rows = st
        .guests
        .values()
        .filter(|g| !covered.contains(&g.vmid))
        .filter(|g| ctx.allowed(&format!("/vms/{}", g.vmid), "VM.Audit"))
        .map(|g| {
            let (kind, key) = match g.kind {
                GuestType::Qemu => ("qemu", "name"),
                GuestType::Lxc => ("lxc", "hostname"),
            };
            let mut row = json!({ "vmid": g.vmid, "type": kind });
            if let Some(name) = g.config.get(key) {
                row["name"] = json!(name);
            }
            row
        })
        .collect();
    Ok(Value::Array(rows))
}

pub(crate) fn replication(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    check_node(&st, &ctx.node())?;
    Ok(json!([]))
}

pub(crate) fn subscription(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    let mut out = json!({
        "status": "notfound",
        "message": "There is no subscription key",
        "url": "https://www.proxmox.com/en/proxmox-virtual-environment/pricing",
    });
    if ctx.allowed(&format!("/nodes/{node}"), "Sys.Audit") {
        // A stable made-up server id per node (PVE derives it from a MAC address).
        let id: String = format!(
            "{:032X}",
            node.bytes().fold(0u128, |h, b| h
                .wrapping_mul(131)
                .wrapping_add(u128::from(b)))
        );
        out["serverid"] = json!(id);
    }
    Ok(out)
}

pub(crate) fn dns(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    let st = ctx.state();
    check_node(&st, &node)?;
    let dns = st.node(&node).map(|n| n.dns.clone()).unwrap_or_default();
    Ok(json!(dns))
}

/// `PUT /nodes/{node}/dns` (pve-manager `PVE/API2/Nodes.pm` -> `PVE::INotify` `resolvconf`):
/// `search` is required; `dns1`..`dns3` replace the nameservers, an absent one is removed.
pub(crate) fn dns_update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    ctx.require(&format!("/nodes/{node}"), "Sys.Modify")?;
    let search = ctx.req("search")?;
    let mut dns = std::collections::BTreeMap::new();
    dns.insert("search".to_owned(), search);
    for key in ["dns1", "dns2", "dns3"] {
        if let Some(v) = ctx.p(key) {
            dns.insert(key.to_owned(), v.to_owned());
        }
    }
    let mut st = ctx.state();
    check_node(&st, &node)?;
    if let Some(n) = st.nodes.iter_mut().find(|n| n.node == node) {
        n.dns = dns;
    }
    Ok(Value::Null)
}

/// `GET /cluster/config/qdevice` (pve-manager `PVE/API2/ClusterConfig.pm` `get_qdevice_status`):
/// `{}` for a cluster without a QDevice, as the simulated one is.
pub(crate) fn qdevice(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    Ok(json!({}))
}
