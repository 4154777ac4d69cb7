//! Firewall reads as pve-firewall `src/PVE/API2/Firewall/*.pm` answer them for a cluster
//! whose `/etc/pve/firewall/` holds no `cluster.fw`, `<vmid>.fw` or node `host.fw` (the
//! simulator models no firewall configuration): `load_clusterfw_conf`, `load_hostfw_conf` and
//! `load_vmfw_conf` start from empty options, rules, aliases, groups and IP sets. Options come
//! back as `copy_opject_with_digest` makes them (only the `digest` of nothing, so every option
//! is at its schema default: `enable` 0, `policy_in` DROP, `policy_out` ACCEPT); lists are
//! empty. Permissions are `rules_audit_permissions`'s and the options calls' own.

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::error::ApiError;

/// `copy_opject_with_digest` of an empty object: SHA-1 of no bytes.
const EMPTY_DIGEST: &str = "da39a3ee5e6b4b0d3255bfef95601890afd80709";

fn options() -> Value {
    json!({ "digest": EMPTY_DIGEST })
}

/// `GET /cluster/firewall/options` (`Cluster.pm` `get_options`: Sys.Audit on `/`).
pub(crate) fn cluster_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    Ok(options())
}

/// `GET /cluster/firewall/{rules,aliases,ipset}` (`rules_audit_permissions('cluster')`).
pub(crate) fn cluster_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    Ok(json!([]))
}

/// `GET /cluster/firewall/groups` (`Groups.pm` `list_security_groups`: any user).
pub(crate) fn groups(_ctx: &mut Ctx) -> Result<Value, ApiError> {
    Ok(json!([]))
}

/// `GET /nodes/{node}/firewall/options` and `.../rules` (`Host.pm`, Sys.Audit on the node).
pub(crate) fn host_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    check_node(&ctx.state(), &node)?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    Ok(options())
}

pub(crate) fn host_rules(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    check_node(&ctx.state(), &node)?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    Ok(json!([]))
}

/// A guest's `.../firewall/options` (`VM.pm` `get_options`: VM.Audit on the guest). Like PVE,
/// it reads `<vmid>.fw` without asking whether the guest exists.
pub(crate) fn guest_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    check_node(&ctx.state(), &ctx.node())?;
    ctx.require(&format!("/vms/{}", ctx.vmid()), "VM.Audit")?;
    Ok(options())
}

/// A guest's `.../firewall/{rules,aliases,ipset}` (`rules_audit_permissions('vm')`).
pub(crate) fn guest_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    check_node(&ctx.state(), &ctx.node())?;
    ctx.require(&format!("/vms/{}", ctx.vmid()), "VM.Audit")?;
    Ok(json!([]))
}
