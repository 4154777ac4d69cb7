//! HA resources: `GET`/`POST /cluster/ha/resources` and `GET`/`PUT`/`DELETE
//! /cluster/ha/resources/{sid}` as pve-ha-manager `src/PVE/API2/HA/Resources.pm` answers them.
//! The resource config is kept; the HA stack acting on it (the CRM and LRM) is simulated by
//! delayed power changes ([`super::power::ha_request`]): a requested state reaches the guest
//! one `hastart`/`hastop` task time after the write, as the manager's next rounds would.

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::state::{GuestType, HaResource, State, ha_sid};

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
    if let Some(g) = &r.group {
        v["group"] = g.clone().into();
    }
    v
}

/// pve-ha-manager `src/PVE/HA/Config.pm` `have_groups_been_migrated`: PVE 9 moved groups to
/// rules, and an empty group config means they have been (PVE 8 has no such notion).
pub(crate) fn groups_migrated(st: &State) -> bool {
    st.pve_version >= crate::version::PveVersion::V9_1 && st.ha_groups.is_empty()
}

/// The CRM acting on a requested state: starting a guest asked to run, stopping one asked to
/// stop (`stopped`, `disabled`); `ignored` leaves it alone.
fn act_on(shared: &std::sync::Arc<crate::server::Shared>, st: &State, sid: &str, state: &str) {
    let Some(vmid) = sid.split_once(':').and_then(|(_, n)| n.parse::<u32>().ok()) else {
        return;
    };
    let running = st.guests.get(&vmid).is_some_and(|g| g.running());
    match state {
        "started" if !running => super::power::ha_request(shared, sid.to_owned(), vmid, true),
        "stopped" | "disabled" if running => {
            super::power::ha_request(shared, sid.to_owned(), vmid, false)
        }
        _ => {}
    }
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
        "vm" => GuestType::Qemu,
        "ct" => GuestType::Lxc,
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
            let what = if want == GuestType::Qemu {
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
    // `create`: "invalid parameter 'group': ha groups have been migrated to rules".
    if ctx.p("group").is_some() && groups_migrated(&st) {
        // A plain `die` in Resources.pm, not a parameter exception: a 500.
        return Err(ApiError::fail(
            "invalid parameter 'group': ha groups have been migrated to rules",
        ));
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
        group: ctx.p("group").map(str::to_string),
    };
    let state = res.state.clone();
    st.ha_resources.insert(sid.clone(), res);
    shared.persist(&st);
    // The CRM starts a resource added as `started` (or stops one added as `stopped`) soon after.
    act_on(&shared, &st, &sid, &state);
    Ok(Value::Null)
}

/// `read`: the resource's config with `sid` and `digest` (`no such resource` otherwise); the
/// group is left out once groups have been migrated to rules.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let raw = ctx.req("sid")?;
    let st = ctx.state();
    let (sid, _, _) = parse_sid(&st, &raw)?;
    let digest = config_digest(&st);
    let Some(r) = st.ha_resources.get(&sid) else {
        return Err(ApiError::fail(format!("no such resource '{sid}'")));
    };
    let mut v = row(&sid, r, &digest);
    if groups_migrated(&st) {
        v.as_object_mut().map(|o| o.remove("group"));
    }
    Ok(v)
}

/// `update` with `PVE::HA::Config::update_resources_config`: the digest guards the write,
/// `delete` drops optional keys, a group must exist (and groups must not have been migrated);
/// a new state is acted on by the CRM later. (`check_service_state` refuses a resource in
/// `error` state; the simulated CRM never puts one there.)
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let raw = ctx.req("sid")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let (sid, kind, _) = parse_sid(&st, &raw)?;
    if let Some(t) = ctx.p("type")
        && t != kind
    {
        return Err(ApiError::fail("types does not match"));
    }
    if let Some(group) = ctx.p("group") {
        if groups_migrated(&st) {
            return Err(ApiError::fail(
                "invalid parameter 'group': ha groups have been migrated to rules",
            ));
        }
        if !st.ha_groups.contains_key(group) {
            return Err(ApiError::fail(format!("HA group '{group}' does not exist")));
        }
    }
    if let Some(digest) = ctx.p("digest")
        && digest != config_digest(&st)
    {
        return Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    let max = |k: &str| ctx.int(k).and_then(|n| u64::try_from(n).ok());
    let Some(r) = st.ha_resources.get_mut(&sid) else {
        return Err(ApiError::fail(format!(
            "update resource failed: no such resource '{sid}'"
        )));
    };
    for key in ctx.p("delete").unwrap_or_default().split([',', ';', ' ']) {
        match key {
            "" => {}
            "comment" => r.comment = None,
            "group" => r.group = None,
            "max_restart" => r.max_restart = None,
            "max_relocate" => r.max_relocate = None,
            "state" => r.state = "started".into(),
            other => return Err(ApiError::fail(format!("no such option '{other}'"))),
        }
    }
    if let Some(c) = ctx.p("comment") {
        r.comment = Some(c.to_owned());
    }
    if let Some(g) = ctx.p("group") {
        r.group = Some(g.to_owned());
    }
    if let Some(n) = max("max_restart") {
        r.max_restart = Some(n);
    }
    if let Some(n) = max("max_relocate") {
        r.max_relocate = Some(n);
    }
    if let Some(s) = ctx.p("state") {
        r.state = if s == "enabled" { "started" } else { s }.to_owned();
    }
    let state = r.state.clone();
    shared.persist(&st);
    act_on(&shared, &st, &sid, &state);
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
    // `delete`'s `purge` (default 1, PVE 9): out of every rule, emptied rules deleted.
    if ctx.flag("purge").unwrap_or(true) {
        super::ha_rules::purge(&mut st, &sid);
    }
    shared.persist(&st);
    Ok(Value::Null)
}
