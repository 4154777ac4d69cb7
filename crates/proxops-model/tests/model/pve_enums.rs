//! The spellings `validate` accepts for PVE's enum-valued options are PVE 8.4's own: each list
//! is compared with the official schema (`../shared/pve-api/pve-api-8.4.2.tree.json`), so that
//! they cannot drift apart.

use crate::support::shared;
use proxops_model::kinds::common::{
    pve_lxc_net_types, pve_nic_models, pve_scsi_controllers, pve_vga_types,
};
use serde_json::Value;

/// The API node at `path` of the schema tree.
fn node<'a>(nodes: &'a Value, path: &str) -> Option<&'a Value> {
    nodes.as_array()?.iter().find_map(|n| {
        if n["path"] == path {
            Some(n)
        } else {
            node(&n["children"], path)
        }
    })
}

fn enum_of(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum in {v}"))
        .iter()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

fn sorted(list: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
    out.sort();
    out
}

#[test]
fn enum_lists_match_the_pve_8_4_schema() {
    let Some(path) = shared("pve-api/pve-api-8.4.2.tree.json") else {
        return;
    };
    let text = std::fs::read_to_string(&path).expect("read the schema");
    let tree: Value = serde_json::from_str(&text).expect("parse the schema");
    let qemu = node(&tree, "/nodes/{node}/qemu/{vmid}/config").expect("qemu config");
    let q = &qemu["info"]["POST"]["parameters"]["properties"];
    let lxc = node(&tree, "/nodes/{node}/lxc/{vmid}/config").expect("lxc config");
    let l = &lxc["info"]["PUT"]["parameters"]["properties"];
    let checks: [(&str, &Value, &[&str]); 4] = [
        (
            "qemu net[n] model",
            &q["net[n]"]["format"]["model"],
            pve_nic_models(),
        ),
        (
            "qemu vga type",
            &q["vga"]["format"]["type"],
            pve_vga_types(),
        ),
        ("qemu scsihw", &q["scsihw"], pve_scsi_controllers()),
        (
            "lxc net[n] type",
            &l["net[n]"]["format"]["type"],
            pve_lxc_net_types(),
        ),
    ];
    for (what, schema, ours) in checks {
        assert_eq!(sorted(ours), enum_of(schema), "{what}");
    }
}
