//! `GET /cluster/ha/status/current` as pve-ha-manager `src/PVE/API2/HA/Status.pm` `status`
//! lists it: the quorum, the master, one LRM per node and one entry per HA resource, whose
//! state is what the CRM has done so far with the requested one. A request reaches its guest
//! a while after it was written (see [`super::ha`]); until then the entry says `starting` or
//! `stopping`, as `PVE::HA::Tools::get_verbose_service_state` does for a service the LRM has
//! not acted on yet.

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::state::State;

/// The state the CRM keeps for a resource in its manager status (`service_status.<sid>.state`),
/// which `/cluster/resources` (`hastate`) and a guest's `status/current` (`ha.state`) report:
/// none for an ignored resource (pve-ha-manager `src/PVE/HA/Manager.pm` removes it from the
/// manager state), `migrate` while the CRM moves it, `started` while the guest runs or is
/// asked to (a stop request the LRM has not carried out yet included), else `stopped`.
pub(crate) fn crm_state(st: &State, sid: &str) -> Option<&'static str> {
    let r = st.ha_resources.get(sid)?;
    if r.state == "ignored" {
        return None;
    }
    let vmid = sid.split_once(':').and_then(|(_, v)| v.parse::<u32>().ok());
    if vmid.is_some_and(|v| st.ha_migrations.contains_key(&v)) {
        return Some("migrate");
    }
    let running = vmid
        .and_then(|v| st.guests.get(&v))
        .is_some_and(|g| g.running());
    Some(if r.state == "started" || running {
        "started"
    } else {
        "stopped"
    })
}

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
        // The verbose state of `get_verbose_service_state`.
        let crm = crm_state(&st, sid);
        let state = match (crm, r.state.as_str(), running) {
            (None, ..) => "ignored",
            (Some("started"), "started", false) => "starting",
            (Some("started"), "started", true) => "started",
            (Some("started"), _, _) => "stopping",
            (Some("stopped"), "disabled", _) => "disabled",
            (Some(crm), ..) => crm,
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
