//! `GET /cluster/ha/status/current` as pve-ha-manager `src/PVE/API2/HA/Status.pm` `status`
//! lists it: the quorum, the master, one LRM per node and one entry per HA resource, whose
//! state is what the CRM has done so far with the requested one. A request reaches its guest
//! a while after it was written (see [`super::ha`]); until then the entry says `starting` or
//! `stopping`, as `PVE::HA::Tools::get_verbose_service_state` does for a service the LRM has
//! not acted on yet.

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;

pub(crate) fn current(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    let master = st.nodes.first().map(|n| n.node.clone()).unwrap_or_default();
    let mut rows = vec![json!({
        "id": "quorum", "type": "quorum", "node": master, "quorate": 1, "status": "OK",
    })];
    if !st.ha_resources.is_empty() {
        rows.push(json!({
            "id": "master", "type": "master", "node": master,
            "status": format!("{master} (active)"),
        }));
    }
    for n in &st.nodes {
        let active = st.ha_resources.keys().any(|sid| {
            let vmid = sid.split_once(':').and_then(|(_, v)| v.parse::<u32>().ok());
            vmid.and_then(|v| st.guests.get(&v))
                .is_some_and(|g| g.node == n.node)
        });
        let state = if active { "active" } else { "idle" };
        rows.push(json!({
            "id": format!("lrm:{}", n.node), "type": "lrm", "node": n.node,
            "status": format!("{} ({state})", n.node),
        }));
    }
    for (sid, r) in &st.ha_resources {
        let vmid = sid.split_once(':').and_then(|(_, v)| v.parse::<u32>().ok());
        let guest = vmid.and_then(|v| st.guests.get(&v));
        let node = guest.map_or("---".to_owned(), |g| g.node.clone());
        let running = guest.is_some_and(|g| g.running());
        let mut row = json!({
            "id": format!("service:{sid}"), "type": "service", "sid": sid, "node": node,
            "request_state": r.state,
        });
        // (crm_state, verbose state) of `get_verbose_service_state`.
        let migrating = vmid.is_some_and(|v| st.ha_migrations.contains_key(&v));
        let (crm, state) = match (r.state.as_str(), running) {
            ("ignored", _) => (None, "ignored"),
            _ if migrating => (Some("migrate"), "migrate"),
            ("started", true) => (Some("started"), "started"),
            ("started", false) => (Some("started"), "starting"),
            (_, true) => (Some("started"), "stopping"),
            ("disabled", false) => (Some("stopped"), "disabled"),
            (_, false) => (Some("stopped"), "stopped"),
        };
        if let Some(crm) = crm {
            row["crm_state"] = crm.into();
        }
        row["state"] = state.into();
        row["status"] = format!("{sid} ({node}, {state})").into();
        rows.push(row);
    }
    Ok(Value::Array(rows))
}
