//! Which Proxmox VE privileges, on which ACL paths, a cluster's plan needs: the planner's reads
//! and every planned action, as PVE 8.4 checks them (the `permissions` of each endpoint in the API
//! schema, and qemu-server's and pve-container's per-key config checks).
//!
//! The rules, in one place:
//!
//! | What | Privileges |
//! |---|---|
//! | planning: a declared guest | `VM.Audit` on `/vms/{vmid}` (listed and its config read) |
//! | planning: an artifact's storage | `Datastore.Audit` or `Datastore.AllocateSpace` on `/storage/{storage}` |
//! | planning: prunes | `VM.Audit` on `/vms` (to see undeclared guests of ours; optional) |
//! | planning: the PVE release | none (`GET /version` is open to every user: pve-manager `PVE/API2.pm` `version`, `user => 'all'`) |
//! | download | `Datastore.AllocateTemplate` on `/storage/{storage}`, and `Sys.Audit` + `Sys.Modify` on `/` or `Sys.AccessNetwork` on `/nodes/{node}` |
//! | create | `VM.Allocate` on `/vms/{vmid}`; per key below (qemu: not for drives); new disks `Datastore.AllocateSpace` on `/storage/{storage}`; ISOs and imports `Datastore.Audit` or `Datastore.AllocateSpace` on theirs; bridges `SDN.Use` on `/sdn/zones/localnetwork/{bridge}[/{tag}]`; a privileged container `Sys.Modify` on `/`; `VM.PowerMgmt` when started |
//! | clone | `VM.Clone` on `/vms/{source}`, `VM.Allocate` on `/vms/{vmid}`, `Datastore.AllocateSpace` on the disks' storages, `SDN.Use` on the bridges; then every owned key as an update may write it |
//! | update | per changed key below; new disks `Datastore.AllocateSpace`; resizes `VM.Config.Disk` and `Datastore.AllocateSpace`; a restart `VM.PowerMgmt` |
//! | start, stop | `VM.PowerMgmt` on `/vms/{vmid}` |
//! | mark template | `VM.Allocate` on `/vms/{vmid}` (and `VM.PowerMgmt` to shut it down first) |
//! | delete | `VM.Allocate` on `/vms/{vmid}` (and `VM.PowerMgmt` to stop it first) |
//!
//! Config keys ([`config_privilege`]), qemu: drives `VM.Config.Disk` (a cdrom `VM.Config.CDROM`),
//! `boot` `VM.Config.Disk`, CPU keys `VM.Config.CPU`, `memory`/`balloon`/`shares`
//! `VM.Config.Memory`, hardware type keys (`scsihw`, `vga`, `machine`, ...) `VM.Config.HWType`,
//! `net[n]` `VM.Config.Network`, cloud-init keys `VM.Config.Cloudinit`, the rest
//! `VM.Config.Options`. LXC: `cores`/`cpulimit`/`cpuunits` CPU, `memory`/`swap` Memory,
//! `net[n]`/`hostname`/`nameserver`/`searchdomain` Network, `rootfs`/`mp[n]` Disk, the rest
//! Options.

use crate::desired::{Context, Desired, DesiredGuest, Drivers};
use crate::plan::{Action, ClusterPlan, Op};
use proxops_graph::Graph;
use proxops_model::kinds::PowerState;
use proxops_pve::{GuestType, Method, Params, PveClient, PveError};
use std::collections::{BTreeMap, BTreeSet};

/// One privilege on one ACL path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// The ACL path (`/vms/101`, `/storage/local`, `/`).
    pub path: String,
    /// The privilege (`VM.Allocate`).
    pub privilege: &'static str,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.privilege, self.path)
    }
}

/// What one step needs: any one of the alternatives, each a set of grants that must all be held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// What needs it: `create VM/web (vmid 101)`, `plan`.
    pub purpose: String,
    /// Which part of it, if not all of it: `set memory`, `read VM/web (vmid 101)`.
    pub detail: Option<String>,
    /// The alternatives (most needs have one, of one grant).
    pub any_of: Vec<Vec<Grant>>,
    /// Whether the step works without it, only less well (reported as a warning).
    pub optional: bool,
}

impl Need {
    fn one(purpose: &str, path: impl Into<String>, privilege: &'static str) -> Need {
        Need {
            purpose: purpose.to_owned(),
            detail: None,
            any_of: vec![vec![Grant {
                path: path.into(),
                privilege,
            }]],
            optional: false,
        }
    }

    /// The need with a detail.
    fn at(mut self, detail: impl Into<String>) -> Need {
        self.detail = Some(detail.into());
        self
    }

    /// Either privilege on the path.
    fn either(purpose: &str, path: &str, privileges: [&'static str; 2]) -> Need {
        Need {
            purpose: purpose.to_owned(),
            detail: None,
            any_of: privileges
                .iter()
                .map(|p| {
                    vec![Grant {
                        path: path.to_owned(),
                        privilege: p,
                    }]
                })
                .collect(),
            optional: false,
        }
    }

    /// Whether `holds` says one alternative is held in full.
    pub fn met(&self, holds: impl Fn(&Grant) -> bool) -> bool {
        self.any_of.iter().any(|all| all.iter().all(&holds))
    }

    /// The ACL paths the need involves.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.any_of.iter().flatten().map(|g| g.path.as_str())
    }

    /// `VM.Allocate on /vms/101`; `Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on
    /// /nodes/pve1`.
    pub fn requirement(&self) -> String {
        self.any_of
            .iter()
            .map(|all| {
                let mut text = String::new();
                for (i, g) in all.iter().enumerate() {
                    let same_path = all.get(i + 1).is_some_and(|n| n.path == g.path);
                    text.push_str(g.privilege);
                    if same_path {
                        text.push_str(" and ");
                    } else {
                        text.push_str(" on ");
                        text.push_str(&g.path);
                        if i + 1 < all.len() {
                            text.push_str(" and ");
                        }
                    }
                }
                text
            })
            .collect::<Vec<_>>()
            .join(", or ")
    }
}

/// The ACL path of a guest.
fn vms(vmid: u32) -> String {
    format!("/vms/{vmid}")
}

/// The ACL path of a storage.
fn storage(id: &str) -> String {
    format!("/storage/{id}")
}

/// The config key without its index (`net0` -> `net`).
fn family(key: &str) -> &str {
    key.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Whether a qemu key is a drive slot (disk, cdrom, cloud-init, EFI, TPM, unused).
fn qemu_drive(key: &str) -> bool {
    let indexed = family(key) != key;
    (indexed && matches!(family(key), "ide" | "sata" | "scsi" | "virtio" | "unused"))
        || key == "efidisk0"
        || key == "tpmstate0"
}

/// Whether an LXC key is a volume (`rootfs`, `mp[n]`).
fn lxc_volume(key: &str) -> bool {
    key == "rootfs" || (family(key) == "mp" && family(key) != key)
}

/// The `VM.Config.*` privilege PVE checks for writing `key` (with `value`) of a guest.
pub fn config_privilege(guest: GuestType, key: &str, value: &str) -> &'static str {
    match guest {
        GuestType::Qemu => {
            if qemu_drive(key) {
                return if value.split(',').any(|p| p == "media=cdrom") {
                    "VM.Config.CDROM"
                } else {
                    "VM.Config.Disk"
                };
            }
            match family(key) {
                "cores" | "cpu" | "cpulimit" | "cpuunits" | "numa" | "smp" | "sockets"
                | "vcpus" | "affinity" => "VM.Config.CPU",
                "memory" | "balloon" | "shares" => "VM.Config.Memory",
                "acpi" | "hotplug" | "kvm" | "machine" | "scsihw" | "smbios" | "tablet" | "vga"
                | "watchdog" | "audio" | "serial" | "usb" | "hostpci" | "parallel" => {
                    "VM.Config.HWType"
                }
                "boot" | "bootdisk" | "vmstatestorage" | "vmstate" => "VM.Config.Disk",
                "net" => "VM.Config.Network",
                "ipconfig" | "cicustom" | "cipassword" | "citype" | "ciuser" | "ciupgrade"
                | "nameserver" | "searchdomain" | "sshkeys" => "VM.Config.Cloudinit",
                "freeze" => "VM.PowerMgmt",
                _ => "VM.Config.Options",
            }
        }
        GuestType::Lxc => {
            if lxc_volume(key) {
                return "VM.Config.Disk";
            }
            match family(key) {
                "cores" | "cpulimit" | "cpuunits" => "VM.Config.CPU",
                "memory" | "swap" => "VM.Config.Memory",
                "net" | "hostname" | "nameserver" | "searchdomain" => "VM.Config.Network",
                _ => "VM.Config.Options",
            }
        }
    }
}

/// LXC create parameters PVE takes out before its per-key check.
const LXC_CREATE_ONLY: &[&str] = &[
    "ostemplate",
    "password",
    "ssh-public-keys",
    "storage",
    "start",
    "pool",
    "force",
    "unique",
    "restore",
    "ignore-unpack-errors",
];

/// What a volume value (`local-lvm:32,ssd=1`, `local:iso/x.iso,media=cdrom`,
/// `local-lvm:0,import-from=local:import/x.qcow2`) needs of its storages.
fn volume_needs(purpose: &str, key: &str, value: &str, out: &mut Vec<Need>) {
    let mut parts = value.split(',');
    let file = parts.next().unwrap_or_default();
    let file = file
        .strip_prefix("file=")
        .or_else(|| file.strip_prefix("volume="))
        .unwrap_or(file);
    let import = parts.find_map(|p| p.strip_prefix("import-from="));
    let Some((sid, rest)) = file.split_once(':') else {
        return;
    };
    let new = rest == "cloudinit"
        || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    if new {
        out.push(
            Need::one(purpose, storage(sid), "Datastore.AllocateSpace")
                .at(format!("allocate {key}")),
        );
    } else {
        // An existing volume (an ISO): read access to its storage.
        out.push(
            Need::either(
                purpose,
                &storage(sid),
                ["Datastore.AllocateSpace", "Datastore.Audit"],
            )
            .at(format!("use {file}")),
        );
    }
    if let Some((src, _)) = import.and_then(|i| i.split_once(':')) {
        let why = format!("import {key} from {}", import.unwrap_or_default());
        out.push(
            Need::either(
                purpose,
                &storage(src),
                ["Datastore.AllocateSpace", "Datastore.Audit"],
            )
            .at(why),
        );
    }
}

/// `SDN.Use` on the bridge (and VLAN) of a `net[n]` value.
fn bridge_needs(purpose: &str, value: &str, out: &mut Vec<Need>) {
    let get = |k: &str| {
        value
            .split(',')
            .find_map(|p| p.strip_prefix(k)?.strip_prefix('='))
    };
    let Some(bridge) = get("bridge") else {
        return;
    };
    let path = match get("tag") {
        Some(tag) => format!("/sdn/zones/localnetwork/{bridge}/{tag}"),
        None => format!("/sdn/zones/localnetwork/{bridge}"),
    };
    out.push(Need::one(purpose, path, "SDN.Use").at(format!("attach to {bridge}")));
}

fn is_volume(guest: GuestType, key: &str) -> bool {
    match guest {
        GuestType::Qemu => qemu_drive(key),
        GuestType::Lxc => lxc_volume(key),
    }
}

/// What writing config keys needs, as `PUT .../config` checks it (`on_create`: as the create call
/// checks it, where qemu checks drives by storage only).
fn key_needs<'k>(
    purpose: &str,
    guest: GuestType,
    vmid: u32,
    keys: impl Iterator<Item = (&'k str, &'k str)>,
    on_create: bool,
    out: &mut Vec<Need>,
) {
    for (key, value) in keys {
        if on_create && guest == GuestType::Lxc && LXC_CREATE_ONLY.contains(&key) {
            continue;
        }
        let volume = is_volume(guest, key);
        if !(on_create && guest == GuestType::Qemu && volume) {
            out.push(
                Need::one(purpose, vms(vmid), config_privilege(guest, key, value))
                    .at(format!("set {key}")),
            );
        }
        if volume {
            volume_needs(purpose, key, value, out);
        }
        if family(key) == "net" {
            bridge_needs(purpose, value, out);
        }
    }
}

fn guest_purpose(verb: &str, action: &Action) -> String {
    match action.vmid {
        Some(vmid) => format!("{verb} {}/{} (vmid {vmid})", action.kind, action.name),
        None => format!("{verb} {}/{}", action.kind, action.name),
    }
}

fn power(purpose: &str, vmid: u32) -> Need {
    Need::one(purpose, vms(vmid), "VM.PowerMgmt")
}

fn create_needs(purpose: &str, d: &DesiredGuest, out: &mut Vec<Need>) {
    let owned = d.owned.iter().map(|o| (o.key.as_str(), o.value.as_str()));
    if let Some(source) = &d.clone {
        out.push(Need::one(purpose, vms(source.vmid), "VM.Clone"));
        out.push(Need::one(purpose, vms(d.vmid), "VM.Allocate"));
        // The copies land on the template's storages, which the manifest's disks name.
        for o in d.owned.iter().filter(|o| is_volume(d.guest, &o.key)) {
            if let Some((sid, _)) = o.value.split(',').next().and_then(|f| f.split_once(':')) {
                out.push(
                    Need::one(purpose, storage(sid), "Datastore.AllocateSpace")
                        .at(format!("copy {}", o.key)),
                );
            }
        }
        for o in d.owned.iter().filter(|o| family(&o.key) == "net") {
            bridge_needs(purpose, &o.value, out);
        }
        // What differs from the template is written after the clone: any owned key may be.
        key_needs(purpose, d.guest, d.vmid, owned, false, out);
    } else {
        out.push(Need::one(purpose, vms(d.vmid), "VM.Allocate"));
        // pve-container `src/PVE/API2/LXC.pm` `create_vm`: a privileged container needs
        // `Sys.Modify` on `/`.
        if d.guest == GuestType::Lxc
            && d.owned
                .iter()
                .any(|o| o.key == "unprivileged" && o.value == "0")
        {
            out.push(Need::one(purpose, "/", "Sys.Modify").at("privileged container"));
        }
        let create_only = d.create_only.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        key_needs(purpose, d.guest, d.vmid, owned, true, out);
        if let Some((_, template)) = d.create_only.iter().find(|(k, _)| k == "ostemplate") {
            volume_needs(purpose, "ostemplate", template, out);
        }
        key_needs(
            purpose,
            d.guest,
            d.vmid,
            create_only.filter(|(k, _)| *k != "ostemplate"),
            true,
            out,
        );
    }
    if d.power == Some(PowerState::Started) && !d.template {
        out.push(power(purpose, d.vmid).at("start"));
    }
}

/// What one planned action needs.
pub fn action_needs(action: &Action) -> Vec<Need> {
    let mut out = Vec::new();
    match &action.op {
        Op::Download { artifact } | Op::Replace { artifact } => {
            let purpose = format!(
                "download {}/{} to {}",
                action.kind, action.name, action.node
            );
            if matches!(action.op, Op::Replace { .. }) {
                // pve-storage `src/PVE/API2/Storage/Content.pm`, `delete`: Datastore.Allocate.
                out.push(
                    Need::one(&purpose, storage(&artifact.storage), "Datastore.Allocate")
                        .at(format!("delete the old {}", artifact.volid)),
                );
            }
            out.push(Need::one(
                &purpose,
                storage(&artifact.storage),
                "Datastore.AllocateTemplate",
            ));
            let grant = |path: &str, privilege| Grant {
                path: path.to_owned(),
                privilege,
            };
            out.push(Need {
                purpose,
                detail: None,
                any_of: vec![
                    vec![grant("/", "Sys.Audit"), grant("/", "Sys.Modify")],
                    vec![grant(
                        &format!("/nodes/{}", action.node),
                        "Sys.AccessNetwork",
                    )],
                ],
                optional: false,
            });
        }
        Op::Create { desired } => {
            let verb = if desired.clone.is_some() {
                "clone"
            } else {
                "create"
            };
            create_needs(&guest_purpose(verb, action), desired, &mut out);
        }
        Op::Update {
            desired,
            changes,
            removals,
            resizes,
            restart,
            ..
        } => {
            let purpose = guest_purpose("update", action);
            let keys = changes.iter().map(|c| (c.key.as_str(), c.value.as_str()));
            key_needs(&purpose, desired.guest, desired.vmid, keys, false, &mut out);
            // PVE checks a deleted key's privilege as a set one's.
            for r in removals {
                let privilege = config_privilege(desired.guest, &r.key, &r.live);
                out.push(
                    Need::one(&purpose, vms(desired.vmid), privilege)
                        .at(format!("delete {}", r.key)),
                );
            }
            for r in resizes {
                let why = format!("grow {}", r.disk);
                out.push(Need::one(&purpose, vms(desired.vmid), "VM.Config.Disk").at(&why));
                if let Some((sid, _)) = desired
                    .owned(&r.disk)
                    .and_then(|o| o.value.split(',').next())
                    .and_then(|f| f.split_once(':'))
                {
                    out.push(Need::one(&purpose, storage(sid), "Datastore.AllocateSpace").at(why));
                }
            }
            if *restart {
                out.push(power(&purpose, desired.vmid).at("restart"));
            }
        }
        Op::Start { guest } => out.push(power(&guest_purpose("start", action), guest.vmid)),
        Op::Stop { guest } => out.push(power(&guest_purpose("stop", action), guest.vmid)),
        Op::MarkTemplate { guest, running } | Op::Delete { guest, running } => {
            let verb = if matches!(action.op, Op::Delete { .. }) {
                "delete"
            } else {
                "make a template of"
            };
            let purpose = guest_purpose(verb, action);
            out.push(Need::one(&purpose, vms(guest.vmid), "VM.Allocate"));
            if *running {
                out.push(power(&purpose, guest.vmid).at("shut it down first"));
            }
        }
    }
    out
}

/// What the planner reads: each declared guest (`VM.Audit`), each artifact's storage
/// (`Datastore.Audit` or `Datastore.AllocateSpace`), and every guest for prunes (`VM.Audit` on
/// `/vms`, optional).
pub fn planning_needs(cluster: &str, graph: &Graph, drivers: &Drivers) -> Vec<Need> {
    let cx = Context::new(cluster, graph);
    let mut out = Vec::new();
    let mut storages = BTreeSet::new();
    for id in graph.resources() {
        let resource = graph.resource(id);
        match drivers.desired(&cx, resource) {
            Ok(Desired::Guest(d)) => {
                out.push(Need::one("plan", vms(d.vmid), "VM.Audit").at(format!(
                    "read {} (vmid {})",
                    resource.key(),
                    d.vmid
                )))
            }
            Ok(Desired::Artifact(a)) => {
                if storages.insert(a.storage.clone()) {
                    out.push(
                        Need::either(
                            "plan",
                            &storage(&a.storage),
                            ["Datastore.Audit", "Datastore.AllocateSpace"],
                        )
                        .at(format!("list storage {}", a.storage)),
                    );
                }
            }
            Err(_) => {}
        }
    }
    let mut prunes =
        Need::one("plan", "/vms", "VM.Audit").at("see guests no longer declared, to prune them");
    prunes.optional = true;
    out.push(prunes);
    out
}

/// Everything a cluster's plan needs: the planner's reads, then each action's needs.
pub fn plan_needs(plan: &ClusterPlan, graph: &Graph, drivers: &Drivers) -> Vec<Need> {
    let mut out = planning_needs(&plan.cluster, graph, drivers);
    for action in &plan.actions {
        out.extend(action_needs(action));
    }
    out
}

/// The privileges the client's credentials hold on each path, as PVE reports them
/// (`GET /access/permissions?path=P`: `{P: {privilege: propagate}}`), one request per path.
pub async fn held(
    client: &PveClient,
    paths: impl IntoIterator<Item = String>,
) -> Result<BTreeMap<String, BTreeSet<String>>, PveError> {
    let mut out = BTreeMap::new();
    for path in paths {
        let params = Params::new().set("path", &path);
        let answer: BTreeMap<String, BTreeMap<String, serde_json::Value>> = client
            .call(
                Method::GET,
                "/access/permissions",
                "/access/permissions",
                &params,
            )
            .await?;
        let privileges = answer
            .get(&path)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        out.insert(path, privileges);
    }
    Ok(out)
}

/// A requirement that is not met, with everything that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// `VM.Allocate on /vms/101`.
    pub requirement: String,
    /// What needs it, in plan order without repeats, each with the parts that do.
    pub purposes: Vec<(String, Vec<String>)>,
    /// Whether only optional steps need it.
    pub optional: bool,
}

impl Missing {
    /// `create VM/web (vmid 101) (set memory, set net0); plan (read VM/db (vmid 102))`.
    pub fn needed_by(&self) -> String {
        self.purposes
            .iter()
            .map(|(purpose, details)| {
                if details.is_empty() {
                    purpose.clone()
                } else {
                    format!("{purpose} ({})", details.join(", "))
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The unmet needs, by requirement in first-seen order (`held`: privileges per path).
pub fn missing(needs: &[Need], held: &BTreeMap<String, BTreeSet<String>>) -> Vec<Missing> {
    let holds = |g: &Grant| held.get(&g.path).is_some_and(|p| p.contains(g.privilege));
    let mut out: Vec<Missing> = Vec::new();
    for need in needs.iter().filter(|n| !n.met(holds)) {
        let requirement = need.requirement();
        let index = match out.iter().position(|m| m.requirement == requirement) {
            Some(i) => {
                out[i].optional &= need.optional;
                i
            }
            None => {
                out.push(Missing {
                    requirement,
                    purposes: Vec::new(),
                    optional: need.optional,
                });
                out.len() - 1
            }
        };
        let purposes = &mut out[index].purposes;
        let entry = match purposes.iter().position(|(p, _)| *p == need.purpose) {
            Some(i) => &mut purposes[i],
            None => {
                purposes.push((need.purpose.clone(), Vec::new()));
                let last = purposes.len() - 1;
                &mut purposes[last]
            }
        };
        if let Some(d) = &need.detail
            && !entry.1.contains(d)
        {
            entry.1.push(d.clone());
        }
    }
    out
}

/// Every ACL path the needs involve, sorted.
pub fn paths(needs: &[Need]) -> BTreeSet<String> {
    needs
        .iter()
        .flat_map(|n| n.paths().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn config_keys_map_to_the_privileges_pve_checks() {
        use GuestType::{Lxc, Qemu};
        let table = [
            (Qemu, "memory", "2048", "VM.Config.Memory"),
            (Qemu, "balloon", "0", "VM.Config.Memory"),
            (Qemu, "cores", "2", "VM.Config.CPU"),
            (Qemu, "cpu", "host", "VM.Config.CPU"),
            (Qemu, "sockets", "1", "VM.Config.CPU"),
            (Qemu, "numa", "1", "VM.Config.CPU"),
            (Qemu, "net0", "virtio,bridge=vmbr0", "VM.Config.Network"),
            (Qemu, "scsi0", "local-lvm:32", "VM.Config.Disk"),
            (Qemu, "virtio1", "local-lvm:8", "VM.Config.Disk"),
            (Qemu, "efidisk0", "local-lvm:1", "VM.Config.Disk"),
            (
                Qemu,
                "ide2",
                "local:iso/x.iso,media=cdrom",
                "VM.Config.CDROM",
            ),
            (Qemu, "ide2", "local-lvm:cloudinit", "VM.Config.Disk"),
            (Qemu, "boot", "order=scsi0", "VM.Config.Disk"),
            (Qemu, "scsihw", "virtio-scsi-single", "VM.Config.HWType"),
            (Qemu, "vga", "std", "VM.Config.HWType"),
            (Qemu, "machine", "q35", "VM.Config.HWType"),
            (Qemu, "ipconfig0", "ip=dhcp", "VM.Config.Cloudinit"),
            (Qemu, "ciuser", "ops", "VM.Config.Cloudinit"),
            (Qemu, "sshkeys", "ssh-ed25519", "VM.Config.Cloudinit"),
            (Qemu, "name", "web", "VM.Config.Options"),
            (Qemu, "tags", "proxops", "VM.Config.Options"),
            (Qemu, "onboot", "1", "VM.Config.Options"),
            (Qemu, "agent", "1", "VM.Config.Options"),
            (Qemu, "bios", "ovmf", "VM.Config.Options"),
            (Lxc, "memory", "512", "VM.Config.Memory"),
            (Lxc, "swap", "512", "VM.Config.Memory"),
            (Lxc, "cores", "1", "VM.Config.CPU"),
            (Lxc, "rootfs", "local-lvm:8", "VM.Config.Disk"),
            (Lxc, "mp0", "local-lvm:8,mp=/srv", "VM.Config.Disk"),
            (Lxc, "net0", "name=eth0,bridge=vmbr0", "VM.Config.Network"),
            (Lxc, "hostname", "ct", "VM.Config.Network"),
            (Lxc, "nameserver", "1.1.1.1", "VM.Config.Network"),
            (Lxc, "tags", "proxops", "VM.Config.Options"),
            (Lxc, "onboot", "1", "VM.Config.Options"),
        ];
        for (guest, key, value, want) in table {
            assert_eq!(
                config_privilege(guest, key, value),
                want,
                "{guest:?} {key}={value}"
            );
        }
    }

    #[test]
    fn volumes_need_their_storages() {
        let mut out = Vec::new();
        volume_needs("create", "scsi0", "local-lvm:32,ssd=1", &mut out);
        volume_needs("create", "ide2", "isos:iso/x.iso,media=cdrom", &mut out);
        volume_needs(
            "create",
            "scsi1",
            "fast:0,import-from=local:import/d.qcow2",
            &mut out,
        );
        let text: Vec<String> = out.iter().map(Need::requirement).collect();
        assert_eq!(
            text,
            [
                "Datastore.AllocateSpace on /storage/local-lvm",
                "Datastore.AllocateSpace on /storage/isos, or Datastore.Audit on /storage/isos",
                "Datastore.AllocateSpace on /storage/fast",
                "Datastore.AllocateSpace on /storage/local, or Datastore.Audit on /storage/local",
            ]
        );
        let mut out = Vec::new();
        bridge_needs("create", "virtio,bridge=vmbr1,tag=20", &mut out);
        assert_eq!(
            out[0].requirement(),
            "SDN.Use on /sdn/zones/localnetwork/vmbr1/20"
        );
    }

    #[test]
    fn a_privileged_container_needs_sys_modify() {
        use crate::desired::{Compare, Owned};
        let ct = |value: &str| DesiredGuest {
            guest: GuestType::Lxc,
            template: false,
            node: "pve1".into(),
            vmid: 200,
            power: None,
            clone: None,
            owned: vec![Owned {
                key: "unprivileged".into(),
                value: value.into(),
                compare: Compare::Fixed,
                restart: false,
                secret: None,
            }],
            create_only: Vec::new(),
            warnings: Vec::new(),
        };
        let sys_modify = |d: &DesiredGuest| {
            let mut out = Vec::new();
            create_needs("create", d, &mut out);
            out.iter().any(|n| n.requirement() == "Sys.Modify on /")
        };
        assert!(sys_modify(&ct("0")));
        assert!(!sys_modify(&ct("1")));
    }

    /// The lab cluster of the example, planned on an empty simulator: downloads and creates.
    #[test]
    fn the_lab_plan_needs_allocation_on_each_new_guest() {
        use crate::backend::{Backend, connect};
        use crate::planner::{PlanOptions, plan_cluster};
        use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/homelab");
        let registry = Registry::builtin();
        let repo = load_repository(
            &FsSource::new(dir).unwrap(),
            &registry,
            &LoadOptions::default(),
        )
        .unwrap();
        let lab = repo.cluster("lab").unwrap();
        let graph = Graph::build(&registry, &lab.resources).unwrap();
        let options = PlanOptions::default();
        let plan = tokio::runtime::Runtime::new().unwrap().block_on(async {
            let backend = Backend::Sim {
                state_file: None,
                task_time: std::time::Duration::from_millis(10),
            };
            let conn = connect(&registry, lab, &backend).await.unwrap();
            plan_cluster(&conn.client, "lab", &graph, &options)
                .await
                .unwrap()
        });
        let needs = plan_needs(&plan, &graph, &options.drivers);
        let has = |purpose: &str, requirement: &str| {
            needs.iter().any(|n| {
                let full = match &n.detail {
                    Some(d) => format!("{}: {d}", n.purpose),
                    None => n.purpose.clone(),
                };
                full.starts_with(purpose) && n.requirement() == requirement
            })
        };
        assert!(
            has("plan: read VM/sandbox-01", "VM.Audit on /vms/100"),
            "{needs:#?}"
        );
        assert!(has("plan: read LXC/ci-runner-01", "VM.Audit on /vms/200"));
        assert!(has(
            "create VM/sandbox-01 (vmid 100)",
            "VM.Allocate on /vms/100"
        ));
        assert!(has(
            "create VM/sandbox-01 (vmid 100): allocate scsi0",
            "Datastore.AllocateSpace on /storage/local-lvm"
        ));
        assert!(has(
            "create VM/sandbox-01 (vmid 100): set memory",
            "VM.Config.Memory on /vms/100"
        ));
        assert!(has(
            "create VM/sandbox-01 (vmid 100): attach to vmbr0",
            "SDN.Use on /sdn/zones/localnetwork/vmbr0/50"
        ));
        // Qemu's create checks drives by storage, not by VM.Config.Disk; LXC's checks both.
        assert!(!has(
            "create VM/sandbox-01 (vmid 100): set scsi0",
            "VM.Config.Disk on /vms/100"
        ));
        assert!(has(
            "create LXC/ci-runner-01 (vmid 200): set rootfs",
            "VM.Config.Disk on /vms/200"
        ));
        assert!(has(
            "download ISO/",
            "Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on /nodes/pve1"
        ));
        assert!(
            needs
                .iter()
                .any(|n| n.optional && n.requirement() == "VM.Audit on /vms")
        );
    }

    #[test]
    fn alternatives_are_met_by_any_one_in_full() {
        let need = Need {
            purpose: "download".into(),
            detail: None,
            any_of: vec![
                vec![
                    Grant {
                        path: "/".into(),
                        privilege: "Sys.Audit",
                    },
                    Grant {
                        path: "/".into(),
                        privilege: "Sys.Modify",
                    },
                ],
                vec![Grant {
                    path: "/nodes/pve1".into(),
                    privilege: "Sys.AccessNetwork",
                }],
            ],
            optional: false,
        };
        assert_eq!(
            need.requirement(),
            "Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on /nodes/pve1"
        );
        assert!(!need.met(|g| g.privilege == "Sys.Audit"));
        assert!(need.met(|g| g.path == "/"));
        assert!(need.met(|g| g.privilege == "Sys.AccessNetwork"));
    }
}
