//! HA resources: `GET`/`POST /cluster/ha/resources` and `DELETE /cluster/ha/resources/{sid}`
//! as pve-ha-manager `src/PVE/API2/HA/Resources.pm` answers them. Only the resource config is
//! kept; the HA stack acting on it is simulated by the power endpoints (`hastart`/`hastop`).

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::state::{GuestKind, HaResource, State, ha_sid};

/// pve-ha-manager `src/PVE/HA/Config.pm` `parse_sid`: `vm:100`, `ct:101`, or a bare VMID whose
/// type comes from the cluster's VM list.
fn parse_sid(st: &State, sid: &str) -> Result<(String, String, String), ApiError> {
    if !sid.is_empty() && sid.bytes().all(|b| b.is_ascii_digit()) {
        let g = sid.parse::<u32>().ok().and_then(|v| st.guests.get(&v));
        return match g {
            Some(g) => {
                let full = ha_sid(g.kind, g.vmid);
                let kind = full.split(':').next().unwrap_or_default().to_string();
                Ok((full, kind, sid.to_string()))
            }
            None => Err(ApiError::fail(format!(
                "unable to detect SID from VMID - VM/CT {sid} does not exist"
            ))),
        };
    }
    match sid.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() && !sid.contains(char::is_whitespace) => {
            Ok((sid.to_string(), t.to_string(), n.to_string()))
        }
        _ => Err(ApiError::fail(format!(
            "unable to parse service id '{sid}'"
        ))),
    }
}

/// The API copy of one resource (`$api_copy_config`: the config plus `sid` and `digest`).
fn row(sid: &str, r: &HaResource, digest: &str) -> Value {
    let mut v = json!({ "sid": sid, "type": r.kind, "state": r.state, "digest": digest });
    if let Some(c) = &r.comment {
        v["comment"] = c.clone().into();
    }
    if let Some(n) = r.max_restart {
        v["max_restart"] = n.into();
    }
    if let Some(n) = r.max_relocate {
        v["max_relocate"] = n.into();
    }
    v
}

/// A digest of the resources config, as cfs files carry one (changes with every write).
fn config_digest(st: &State) -> String {
    let text = serde_json::to_string(&st.ha_resources).unwrap_or_default();
    crate::hashes::sha1_hex(text.as_bytes())
}

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let filter = ctx.p("type").map(str::to_string);
    let st = ctx.state();
    let digest = config_digest(&st);
    Ok(Value::Array(
        st.ha_resources
            .iter()
            .filter(|(_, r)| filter.as_deref().is_none_or(|f| f == r.kind))
            .map(|(sid, r)| row(sid, r, &digest))
            .collect(),
    ))
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let raw = ctx.req("sid")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let (sid, kind, name) = parse_sid(&st, &raw)?;
    if let Some(t) = ctx.p("type")
        && t != kind
    {
        return Err(ApiError::fail("types does not match"));
    }
    // `PVE::HA::Resources::PVEVM`/`PVECT` `exists`.
    let want = match kind.as_str() {
        "vm" => GuestKind::Qemu,
        "ct" => GuestKind::Lxc,
        _ => return Err(ApiError::fail(format!("unknown resource type '{kind}'"))),
    };
    let vmid = name.parse::<u32>().ok();
    match vmid.and_then(|v| st.guests.get(&v)) {
        None => {
            return Err(ApiError::fail(format!(
                "resource '{sid}' does not exist in cluster"
            )));
        }
        Some(g) if g.kind != want => {
            let what = if want == GuestKind::Qemu {
                "VM"
            } else {
                "container"
            };
            return Err(ApiError::fail(format!(
                "resource '{sid}' - guest with ID {name} is not a {what}"
            )));
        }
        Some(_) => {}
    }
    if st.ha_resources.contains_key(&sid) {
        return Err(ApiError::fail(format!(
            "resource ID '{sid}' already defined"
        )));
    }
    let max = |k: &str| ctx.int(k).and_then(|n| u64::try_from(n).ok());
    let res = HaResource {
        kind,
        // `PVE::HA::Resources` `state` defaults to `started` (`enabled` is its old alias).
        state: match ctx.p("state") {
            None | Some("enabled") => "started".into(),
            Some(s) => s.into(),
        },
        comment: ctx.p("comment").map(str::to_string),
        max_restart: max("max_restart"),
        max_relocate: max("max_relocate"),
    };
    let start = res.state == "started";
    st.ha_resources.insert(sid.clone(), res);
    shared.persist(&st);
    drop(st);
    if start {
        // The CRM starts a resource added as `started` soon after.
        if let Some(vmid) = vmid {
            super::guest::ha_request(&shared, sid, vmid, true);
        }
    }
    Ok(Value::Null)
}

pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let raw = ctx.req("sid")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let (sid, _, _) = parse_sid(&st, &raw)?;
    if st.ha_resources.remove(&sid).is_none() {
        return Err(ApiError::fail(format!(
            "cannot delete service '{sid}', not HA managed!"
        )));
    }
    shared.persist(&st);
    Ok(Value::Null)
}
