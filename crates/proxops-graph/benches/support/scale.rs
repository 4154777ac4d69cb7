//! A generated cluster for the graph benchmark and the profiling example: every 50 resources
//! an ISO and a CTTemplate on four nodes, a TemplateVM, then VMs using the ISO and LXCs (each
//! fifth guest) from the CTTemplate; every guest also depends on a pseudo-random earlier guest
//! by annotation (about 1.9 edges per resource).

use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_model::{Registry, Resource};
use std::sync::Arc;

const NODES: [&str; 4] = ["pve01", "pve02", "pve03", "pve04"];

fn guest_body(node: &str, vmid: usize) -> String {
    format!("spec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    cores: 1\n")
}

/// The `type` a VM's cpu needs (LXC has none).
const VM_CPU: &str = "    type: host\n";

/// Every 50 resources: an ISO and a CTTemplate on all four nodes, a TemplateVM, then guests.
/// Each VM uses the latest ISO and clones nothing; each fifth guest is an LXC from the latest
/// CTTemplate; every guest also depends on a pseudo-random earlier guest by annotation.
pub fn manifests(count: usize) -> Vec<String> {
    let nodes: String = NODES.iter().map(|n| format!("    - {n}\n")).collect();
    let mut guests: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(count);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..count {
        let block = i / 50;
        let head = "apiVersion: proxops/v1alpha1\n";
        let text = match i % 50 {
            0 => format!(
                "{head}kind: ISO\nmetadata:\n  name: iso-{block}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: iso-{block}.iso\n  url: https://example.invalid/{block}.iso\n"
            ),
            1 => format!(
                "{head}kind: CTTemplate\nmetadata:\n  name: ctt-{block}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: ctt-{block}.tar.zst\n  url: https://example.invalid/{block}.tar.zst\n"
            ),
            _ => {
                let node = NODES[i % NODES.len()];
                let vmid = 1000 + i;
                let name = format!("g-{i}");
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let annotation = if guests.is_empty() {
                    String::new()
                } else {
                    let target = &guests[(state >> 33) as usize % guests.len()];
                    format!("  annotations:\n    proxops/depends-on: \"{target}\"\n")
                };
                if i % 50 == 2 {
                    format!(
                        "{head}kind: TemplateVM\nmetadata:\n  name: {name}\n{annotation}{}{VM_CPU}  disks:\n    - storage: local-lvm\n      size: 8GiB\n",
                        guest_body(node, vmid)
                    )
                } else if i % 5 == 0 {
                    guests.push(format!("LXC:{name}"));
                    format!(
                        "{head}kind: LXC\nmetadata:\n  name: {name}\n{annotation}{}  template: ctt-{block}\n  root:\n    storage: local-lvm\n    size: 4GiB\n",
                        guest_body(node, vmid)
                    )
                } else {
                    guests.push(format!("VM:{name}"));
                    format!(
                        "{head}kind: VM\nmetadata:\n  name: {name}\n{annotation}{}{VM_CPU}  disks:\n    - storage: local-lvm\n      size: 8GiB\n  hardware:\n    cdrom:\n      iso: iso-{block}\n",
                        guest_body(node, vmid)
                    )
                }
            }
        };
        out.push(text);
    }
    out
}

/// The decoded resources of [`manifests`].
pub fn resources(count: usize) -> Vec<Arc<Resource>> {
    let registry = Registry::builtin();
    manifests(count)
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let file = SourceFile::new(format!("m/{i}.yaml"), text);
            let loaded = load_manifest(&file, &registry, None);
            loaded
                .resource
                .unwrap_or_else(|| panic!("manifest {i}: {:#?}", loaded.diagnostics))
        })
        .collect()
}
