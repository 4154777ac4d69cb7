//! Cluster resource mappings, `GET /cluster/mapping/{pci,usb}[/{id}]`, as pve-manager
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
