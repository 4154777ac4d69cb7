//! Cluster resource mappings, `/cluster/mapping/{pci,usb}[/{id}]` (read, create, update,
//! delete), as pve-manager
//! `PVE/API2/Cluster/Mapping/PCI.pm` and `USB.pm` answer them: each entry is the mapping's whole
//! config (`type`, `map`, `description`) with its `id` and the config `digest`; the list shows
//! only the mappings the caller holds `Mapping.Modify`, `Mapping.Use` or `Mapping.Audit` on
//! (`/mapping/<type>/<id>`). A guest's `hostpciN`/`usbN` naming a mapping needs it on its node
//! when it starts ([`missing_on_start`]).

use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::Ctx;
use crate::error::ApiError;
use crate::state::{Guest, Mapping, State};

const SEE: &[&str] = &["Mapping.Modify", "Mapping.Use", "Mapping.Audit"];

fn table<'a>(st: &'a State, kind: &str) -> &'a BTreeMap<String, Mapping> {
    match kind {
        "usb" => &st.mappings.usb,
        _ => &st.mappings.pci,
    }
}

/// The config digest, as cfs files carry one (changes with every write).
fn digest(mappings: &BTreeMap<String, Mapping>) -> String {
    let text = serde_json::to_string(mappings).unwrap_or_default();
    crate::hashes::sha1_hex(text.as_bytes())
}

fn entry(kind: &str, m: &Mapping, digest: &str) -> Value {
    let mut v = json!({ "type": kind, "map": m.map, "digest": digest });
    if let Some(d) = &m.description {
        v["description"] = d.clone().into();
    }
    if let Some(b) = m.mdev {
        v["mdev"] = u8::from(b).into();
    }
    if let Some(b) = m.live_migration_capable {
        v["live-migration-capable"] = u8::from(b).into();
    }
    v
}

fn list(ctx: &Ctx, kind: &str) -> Result<Value, ApiError> {
    let st = ctx.state();
    // `check-node` proxies the request to that node, which reports per mapping whether it has
    // an entry there (`checks` for PCI, `errors` for USB). Without hardware the simulator has
    // nothing for `assert_valid` to find wrong, so only the missing entry is reported.
    let check = ctx.p("check-node").map(str::to_string);
    if let Some(node) = &check {
        super::check_node(&st, node)?;
    }
    let field = if kind == "usb" { "errors" } else { "checks" };
    let mappings = table(&st, kind);
    let digest = digest(mappings);
    Ok(Value::Array(
        mappings
            .iter()
            .filter(|(id, _)| {
                let path = format!("/mapping/{kind}/{id}");
                SEE.iter().any(|p| ctx.allowed(&path, p))
            })
            .map(|(id, m)| {
                let mut v = entry(kind, m, &digest);
                v["id"] = id.clone().into();
                if let Some(node) = &check {
                    let mut found = Vec::new();
                    if !m.on_node(node) {
                        found.push(json!({
                            "severity": "warning",
                            "message": format!("No mapping for node {node}."),
                        }));
                    }
                    v[field] = found.into();
                }
                v
            })
            .collect(),
    ))
}

fn get(ctx: &Ctx, kind: &str) -> Result<Value, ApiError> {
    let id = ctx.p("id").unwrap_or_default().to_string();
    // The endpoint's `or` of the three privileges fails without naming one.
    let path = format!("/mapping/{kind}/{id}");
    if !SEE.iter().any(|p| ctx.allowed(&path, p)) {
        return Err(ApiError::Status(403, "Permission check failed".into()));
    }
    let st = ctx.state();
    let mappings = table(&st, kind);
    match mappings.get(&id) {
        Some(m) => Ok(entry(kind, m, &digest(mappings))),
        None => Err(ApiError::fail(format!("mapping '{id}' not found"))),
    }
}

pub(crate) fn pci_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    list(ctx, "pci")
}

pub(crate) fn pci_get(ctx: &mut Ctx) -> Result<Value, ApiError> {
    get(ctx, "pci")
}

pub(crate) fn usb_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    list(ctx, "usb")
}

pub(crate) fn usb_get(ctx: &mut Ctx) -> Result<Value, ApiError> {
    get(ctx, "usb")
}

/// The options a mapping of `kind` has besides `map` (pve-guest-common `Mapping/PCI.pm` and
/// `USB.pm` `options`).
fn options(kind: &str) -> &'static [&'static str] {
    match kind {
        "pci" => &["description", "mdev", "live-migration-capable", "map"],
        _ => &["description", "map"],
    }
}

/// Sets the options given in the request.
fn set_options(ctx: &Ctx, m: &mut Mapping) {
    if let Some(map) = ctx.p("map") {
        m.map = map.lines().map(str::to_owned).collect();
    }
    if let Some(d) = ctx.p("description") {
        m.description = Some(d.to_owned());
    }
    if let Some(b) = ctx.flag("mdev") {
        m.mdev = Some(b);
    }
    if let Some(b) = ctx.flag("live-migration-capable") {
        m.live_migration_capable = Some(b);
    }
}

fn table_mut<'a>(st: &'a mut State, kind: &str) -> &'a mut BTreeMap<String, Mapping> {
    match kind {
        "usb" => &mut st.mappings.usb,
        _ => &mut st.mappings.pci,
    }
}

/// pve-manager `PVE/API2/Cluster/Mapping/PCI.pm` / `USB.pm` `create`: `Mapping.Modify` on
/// `/mapping/<kind>`; an id already defined is refused inside `lock_pci_config`, whose message
/// prefixes the error.
fn create(ctx: &mut Ctx, kind: &str) -> Result<Value, ApiError> {
    ctx.require(&format!("/mapping/{kind}"), "Mapping.Modify")?;
    let id = ctx.req("id")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mappings = table_mut(&mut st, kind);
    if mappings.contains_key(&id) {
        return Err(ApiError::fail(format!(
            "create hardware mapping failed: {kind} ID '{id}' already defined"
        )));
    }
    let mut m = Mapping::default();
    set_options(ctx, &mut m);
    mappings.insert(id, m);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `update`: `Mapping.Modify` on `/mapping/<kind>/<id>`; the digest, then the id's existence,
/// then `PVE::SectionConfig::delete_from_config` for `delete`, then the options given.
fn update(ctx: &mut Ctx, kind: &str) -> Result<Value, ApiError> {
    let id = ctx.req("id")?;
    ctx.require(&format!("/mapping/{kind}/{id}"), "Mapping.Modify")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let fail = |msg: String| ApiError::fail(format!("update hardware mapping failed: {msg}"));
    if let Some(d) = ctx.p("digest")
        && d != digest(table(&st, kind))
    {
        return Err(fail(
            "detected modified configuration - file changed by other user? Try again.".into(),
        ));
    }
    let Some(m) = table_mut(&mut st, kind).get_mut(&id) else {
        return Err(fail(format!("{kind} ID '{id}' does not exist")));
    };
    for key in ctx.p("delete").unwrap_or_default().split([',', ';', ' ']) {
        match key {
            "" => {}
            k if !options(kind).contains(&k) => {
                return Err(fail(format!("no such option '{k}'")));
            }
            "map" => return Err(fail("unable to delete required option 'map'".into())),
            k if ctx.p(k).is_some() => {
                return Err(fail(format!(
                    "cannot set and delete property '{k}' at the same time!"
                )));
            }
            "description" => m.description = None,
            "mdev" => m.mdev = None,
            _ => m.live_migration_capable = None,
        }
    }
    set_options(ctx, m);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `delete`: `Mapping.Modify` on `/mapping/<kind>`; an id that is not there is no error.
fn delete(ctx: &mut Ctx, kind: &str) -> Result<Value, ApiError> {
    ctx.require(&format!("/mapping/{kind}"), "Mapping.Modify")?;
    let id = ctx.req("id")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    table_mut(&mut st, kind).remove(&id);
    shared.persist(&st);
    Ok(Value::Null)
}

pub(crate) fn pci_create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    create(ctx, "pci")
}

pub(crate) fn pci_update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    update(ctx, "pci")
}

pub(crate) fn pci_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    delete(ctx, "pci")
}

pub(crate) fn usb_create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    create(ctx, "usb")
}

pub(crate) fn usb_update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    update(ctx, "usb")
}

pub(crate) fn usb_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    delete(ctx, "usb")
}

/// Why a VM cannot start for its mappings: qemu-server `src/PVE/QemuServer/PCI.pm`
/// `parse_hostpci` and `USB.pm` `parse_usb_device` look the mapping up on the node
/// (`find_on_current_node`) when the command line is built.
pub(crate) fn missing_on_start(st: &State, g: &Guest) -> Option<String> {
    let config = g.config.iter().chain(g.pending.iter());
    for (key, value) in config {
        let fam = key.trim_end_matches(|c: char| c.is_ascii_digit());
        let (kind, word) = match fam {
            "hostpci" => ("pci", "PCI"),
            "usb" => ("usb", "USB"),
            _ => continue,
        };
        let Some(id) = value
            .split(',')
            .find_map(|p| p.trim().strip_prefix("mapping="))
        else {
            continue;
        };
        let found = table(st, kind).get(id).is_some_and(|m| m.on_node(&g.node));
        if !found {
            return Some(format!("{word} device mapping not found for '{id}'"));
        }
    }
    None
}
