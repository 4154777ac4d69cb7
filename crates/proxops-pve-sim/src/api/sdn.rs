//! `/cluster/sdn` and its VNets, as pve-network defines them: the index and the apply
//! (`src/PVE/API2/Network/SDN.pm` `index`, `reload`) and `/cluster/sdn/vnets[/{vnet}]`
//! (`src/PVE/API2/Network/SDN/Vnets.pm` `index`, `read`, `create`, `update`, `delete`, with
//! `src/PVE/Network/SDN/VnetPlugin.pm` and the zone plugins' `vnet_update_hook`). Writes
//! change the files ([`crate::sdn`]); the reads show them, the running configuration
//! (`running=1`) or the difference (`pending=1`). Zones are [`super::sdn_zones`], subnets
//! [`super::sdn_subnets`].

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::sdn::{self, Kind, Section, View};
use crate::state::State;
use crate::tasks;

const SEE: &[&str] = &["SDN.Audit", "SDN.Allocate"];

/// `VnetPlugin` `options`: (key, optional).
const VNET_OPTIONS: &[(&str, bool)] = &[
    ("zone", false),
    ("tag", true),
    ("alias", true),
    ("vlanaware", true),
    ("isolate-ports", true),
];

/// `GET /cluster/sdn` (`SDN.pm` `index`): `SDN.Audit` on `/sdn`; the children of the release.
pub(crate) fn index(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/sdn", "SDN.Audit")?;
    let mut ids = vec!["vnets", "zones", "controllers", "ipams", "dns"];
    if ctx.state().pve_version >= crate::PveVersion::V9_1 {
        ids.push("fabrics");
    }
    Ok(ids.into_iter().map(|id| json!({ "id": id })).collect())
}

/// `PUT /cluster/sdn` (`SDN.pm` `reload`): `SDN.Allocate` on `/sdn`; the files become the
/// running configuration at once (`commit_config` under the SDN lock), then a
/// `reloadnetworkall` worker reloads every node's network, after which guests can use the new
/// VNets as bridges. The simulator models no global SDN lock (`POST /cluster/sdn/lock`), so a
/// `lock-token` is never needed and never refused (`lock_sdn_config` checks only an existing
/// lock).
pub(crate) fn apply(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/sdn", "SDN.Allocate")?;
    let shared = ctx.shared.clone();
    let user = ctx.who().task_user();
    let mut st = ctx.state();
    sdn::commit(&mut st);
    let nodes: Vec<String> = st.nodes.iter().map(|n| n.node.clone()).collect();
    let local = nodes.first().cloned().unwrap_or_default();
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(tasks::INJECTED.into());
        }
        st.vnets = sdn::running_vnets(st);
        Ok(nodes
            .iter()
            .map(|n| format!("{n}: reloading network config"))
            .collect())
    });
    let upid = tasks::spawn(
        &shared,
        &mut st,
        &local,
        "reloadnetworkall",
        "",
        &user,
        None,
        job,
    );
    Ok(upid.into())
}

/// `$api_sdn_vnets_config`: the section with `vnet` and the file's `digest`.
fn entry(id: &str, s: &Section, digest: &Value) -> Value {
    let mut v = Value::Object(s.clone());
    v["vnet"] = id.into();
    v["digest"] = digest.clone();
    v
}

/// `GET /cluster/sdn/vnets` (`index`): only the VNets the caller holds `SDN.Audit` or
/// `SDN.Allocate` on (`/sdn/zones/<zone>/<vnet>`, the pending zone for a new one).
pub(crate) fn vnets(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Vnets, which);
    Ok(Value::Array(
        cfg.iter()
            .filter(|(id, s)| {
                let zone = s
                    .get("zone")
                    .or_else(|| s.get("pending").and_then(|p| p.get("zone")))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let path = format!("/sdn/zones/{zone}/{id}");
                SEE.iter().any(|p| ctx.allowed(&path, p))
            })
            .map(|(id, s)| entry(id, s, &digest))
            .collect(),
    ))
}

/// `$check_vnet_access`: the VNet must be in the files ("sdn vnet 'x' does not exist"), and
/// the caller hold one of `privs` on `/sdn/zones/<zone>/<vnet>`.
pub(crate) fn check_vnet_access(ctx: &Ctx, vnet: &str, privs: &[&str]) -> Result<(), ApiError> {
    let (_, files) = sdn::configs(&ctx.state());
    let Some(s) = files.vnets.get(vnet) else {
        return Err(ApiError::fail(format!("sdn vnet '{vnet}' does not exist")));
    };
    let zone = s.get("zone").and_then(Value::as_str).unwrap_or_default();
    ctx.require_any(&format!("/sdn/zones/{zone}/{vnet}"), privs)
}

/// `GET /cluster/sdn/vnets/{vnet}` (`read`).
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("vnet")?;
    check_vnet_access(ctx, &id, SEE)?;
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Vnets, which);
    match cfg.get(&id) {
        Some(s) => Ok(entry(&id, s, &digest)),
        None => Err(ApiError::fail(format!("sdn vnet '{id}' does not exist"))),
    }
}

/// `VnetPlugin->check_config`: the options given, decoded.
fn given_options(ctx: &Ctx) -> Section {
    let mut out = Section::new();
    for (key, _) in VNET_OPTIONS {
        let Some(v) = ctx.p(key) else { continue };
        let value = match *key {
            "tag" => ctx.int(key).map_or_else(|| Value::from(v), Value::from),
            "vlanaware" | "isolate-ports" => sdn::bool_value(v),
            _ => Value::from(v),
        };
        out.insert((*key).to_owned(), value);
    }
    out
}

/// The subnets of a VNet in the files (`PVE::Network::SDN::Vnets::get_subnets`).
pub(crate) fn has_subnets(files: &sdn::SdnConfig, vnet: &str) -> bool {
    files
        .subnets
        .values()
        .any(|s| s.get("vnet").and_then(Value::as_str) == Some(vnet))
}

/// The zone plugin's `vnet_update_hook` and `VnetPlugin` `on_update_hook` for the VNet `id`.
fn vnet_hooks(files: &sdn::SdnConfig, id: &str) -> Result<(), ApiError> {
    let Some(vnet) = files.vnets.get(id) else {
        return Ok(());
    };
    let zone = vnet.get("zone").and_then(Value::as_str).unwrap_or_default();
    let kind = files
        .zones
        .get(zone)
        .and_then(|z| z.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tag = vnet.get("tag").and_then(Value::as_u64);
    match kind {
        "simple" if tag.is_some() => {
            return Err(ApiError::param(
                "tag",
                "vlan tag is not allowed on simple zone",
            ));
        }
        "simple" => {}
        "vlan" => {
            let Some(tag) = tag else {
                return Err(ApiError::param("tag", "missing vlan tag"));
            };
            if tag > 4096 {
                return Err(ApiError::param("tag", "vlan tag max value is 4096"));
            }
            for (other, o) in &files.vnets {
                if other != id
                    && o.get("zone").and_then(Value::as_str) == Some(zone)
                    && o.get("tag").and_then(Value::as_u64) == Some(tag)
                {
                    return Err(ApiError::param(
                        "tag",
                        format!("tag {tag} already exist in vnet {other}"),
                    ));
                }
            }
        }
        // `PVE::Network::SDN::Zones::Plugin->lookup` of a zone that is not in the files (or of
        // a type the simulator does not model, see `sdn_zones`).
        other => return Err(ApiError::fail(format!("unknown section type '{other}'"))),
    }
    if vnet.get("vlanaware").and_then(Value::as_u64) == Some(1) && has_subnets(files, id) {
        return Err(ApiError::param(
            "vlanaware",
            "vlanaware vnet is not compatible with subnets",
        ));
    }
    Ok(())
}

/// `POST /cluster/sdn/vnets` (`create`): `SDN.Allocate` on `/sdn/zones/<zone>`.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let zone = ctx.req("zone")?;
    ctx.require(&format!("/sdn/zones/{zone}"), "SDN.Allocate")?;
    let id = ctx.req("vnet")?;
    let opts = given_options(ctx);
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let body = || -> Result<(), ApiError> {
        if files.vnets.contains_key(&id) {
            return Err(ApiError::fail(format!(
                "sdn vnet object ID '{id}' already defined"
            )));
        }
        let mut s = Section::new();
        s.insert("type".into(), "vnet".into());
        s.extend(opts);
        files.vnets.insert(id.clone(), s);
        vnet_hooks(&files, &id)?;
        Ok(())
    };
    body().map_err(|e| sdn::locked("create sdn vnet object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `PUT /cluster/sdn/vnets/{vnet}` (`update`): `SDN.Allocate` on the VNet's current path
/// (the new zone is not checked, as in PVE); a VNet with subnets keeps its zone.
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("vnet")?;
    check_vnet_access(ctx, &id, &["SDN.Allocate"])?;
    let opts = given_options(ctx);
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let body = || -> Result<(), ApiError> {
        sdn::assert_digest(ctx.p("digest"), &files.vnets)?;
        let has_subnets = has_subnets(&files, &id);
        let Some(data) = files.vnets.get_mut(&id) else {
            return Err(ApiError::fail(format!("sdn vnet '{id}' does not exist")));
        };
        let old_zone = data.get("zone").cloned();
        if let Some(delete) = ctx.p("delete") {
            sdn::delete_keys(data, VNET_OPTIONS, &opts, delete)?;
        }
        data.extend(opts);
        let new_zone = data.get("zone").cloned();
        if new_zone.is_none() {
            return Err(ApiError::param("zone", "cannot delete zone"));
        }
        if has_subnets && old_zone != new_zone {
            return Err(ApiError::param(
                "zone",
                "can't change zone if subnets exist",
            ));
        }
        vnet_hooks(&files, &id)
    };
    body().map_err(|e| sdn::locked("update sdn vnet object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `DELETE /cluster/sdn/vnets/{vnet}` (`delete`): refused while it has subnets
/// (`VnetPlugin` `on_delete_hook`). Guests using it as their bridge are not checked (PVE does
/// not either).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let id = ctx.req("vnet")?;
    check_vnet_access(ctx, &id, &["SDN.Allocate"])?;
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let mut body = || -> Result<(), ApiError> {
        if !files.vnets.contains_key(&id) {
            return Err(ApiError::fail(format!("sdn vnet '{id}' does not exist")));
        }
        if has_subnets(&files, &id) {
            return Err(ApiError::param(
                "vnet",
                "Can't delete vnet if subnets exists",
            ));
        }
        files.vnets.remove(&id);
        Ok(())
    };
    body().map_err(|e| sdn::locked("delete sdn vnet object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}
