//! `GET /cluster/sdn/vnets`: the SDN VNets (pve-network `PVE/API2/Network/SDN/Vnets.pm`
//! `index`), each `{vnet, type: vnet, zone, tag?, alias?, digest}`, only those the caller holds
//! `SDN.Audit` or `SDN.Allocate` on (`/sdn/zones/<zone>/<vnet>`). The simulator applies SDN
//! changes at once, so the running config (`running=1`) is the current one and nothing is
//! pending (`pending=1` adds no `pending`/`state` fields).

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;

pub(crate) fn vnets(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    let digest = crate::hashes::sha1_hex(
        serde_json::to_string(&st.vnets)
            .unwrap_or_default()
            .as_bytes(),
    );
    Ok(Value::Array(
        st.vnets
            .iter()
            .filter(|(name, v)| {
                let path = format!("/sdn/zones/{}/{name}", v.zone);
                ctx.allowed(&path, "SDN.Audit") || ctx.allowed(&path, "SDN.Allocate")
            })
            .map(|(name, v)| {
                let mut row =
                    json!({ "vnet": name, "type": "vnet", "zone": v.zone, "digest": digest });
                if let Some(t) = v.tag {
                    row["tag"] = t.into();
                }
                if let Some(a) = &v.alias {
                    row["alias"] = a.clone().into();
                }
                row
            })
            .collect(),
    ))
}
