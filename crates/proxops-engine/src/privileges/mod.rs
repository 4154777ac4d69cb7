//! Which Proxmox VE privileges, on which ACL paths, a cluster's plan needs: the planner's reads
//! and every planned action, as PVE checks them (the `permissions` of each endpoint in the API
//! schema, and qemu-server's and pve-container's per-key config checks, the private `keys` table). Some writes
//! no privilege allows: only the user `root@pam` itself may do them, never an API token (not
//! even `root@pam!name`: pve-manager `PVE/HTTPServer.pm` `auth_handler` makes the token id the
//! request's user). Those are root-only [`Need`]s, each naming its remedy.
//!
//! The rules, in one place:
//!
//! | What | Privileges |
//! |---|---|
//! | planning: a declared guest | `VM.Audit` on `/vms/{vmid}` (listed and its config read) |
//! | planning: an artifact's storage | `Datastore.Audit` on `/storage/{storage}` (its row in `/cluster/resources` and its content) |
//! | planning: prunes | `VM.Audit` on `/vms` (to see undeclared guests of ours; optional) |
//! | planning: the PVE release | none (`GET /version` is open to every user: pve-manager `PVE/API2.pm` `version`, `user => 'all'`) |
//! | download | `Datastore.AllocateTemplate` on `/storage/{storage}`, and `Sys.Audit` + `Sys.Modify` on `/` or `Sys.AccessNetwork` on `/nodes/{node}` |
//! | create | `VM.Allocate` on `/vms/{vmid}`; per key below (qemu: drives by storage only); new disks `Datastore.AllocateSpace` on `/storage/{storage}`; ISOs, templates and imports `Datastore.Allocate`, `Datastore.AllocateSpace` or `Datastore.Audit` on theirs; a privileged container `Sys.Modify` on `/`; `VM.PowerMgmt` when started |
//! | clone | `VM.Clone` on `/vms/{source}`, `VM.Allocate` on `/vms/{vmid}`, `Datastore.AllocateSpace` on the disks' storages, `SDN.Use` on the bridges; then every owned key as an update may write it |
//! | update | per changed key below, on the new value and the live one; deleted keys as set ones; resizes `VM.Config.Disk` and `Datastore.AllocateSpace`; a restart `VM.PowerMgmt` |
//! | start, stop | `VM.PowerMgmt` on `/vms/{vmid}` |
//! | mark template | `VM.Allocate` on `/vms/{vmid}` (and `VM.PowerMgmt` to shut it down first) |
//! | delete | `VM.Allocate` on `/vms/{vmid}` (and `VM.PowerMgmt` to stop it first) |
//! | snapshot, prune snapshots (`update-policy`) | `VM.Snapshot` on `/vms/{vmid}` |
//! | a guarded update's rollback | `VM.Snapshot` or `VM.Snapshot.Rollback` on `/vms/{vmid}`, and `VM.PowerMgmt` when it starts the guest again |
//! | verify | a VM's guest agent: `VM.Monitor` (PVE 8) or `VM.GuestAgent.Audit` (PVE 9); the guest runs: `VM.Audit` |
//!
//! Config keys, qemu (`$check_vm_modify_config_perm`): CPU keys `VM.Config.CPU`,
//! `memory`/`balloon`/`shares` `VM.Config.Memory`, hardware type keys (`scsihw`, `vga`,
//! `machine`, ...) `VM.Config.HWType`, general options (`name`, `onboot`, `agent`, ...)
//! `VM.Config.Options` and `startup` also `Sys.Modify` on `/`, `boot` `VM.Config.Disk`,
//! `net[n]` `VM.Config.Network` and `SDN.Use` on `/sdn/zones/{zone}/{bridge}[/{tag}]` (the
//! VNet's zone from `GET /cluster/sdn/vnets`, `localnetwork` for a plain bridge), cloud-init
//! keys `VM.Config.Cloudinit` or `VM.Config.Network`, `tags` `VM.Config.Options`; on updates a
//! disk `VM.Config.Disk`, a CD-ROM `VM.Config.CDROM`, the cloud-init drive `VM.Config.Cloudinit`
//! and `VM.Config.CDROM`; `serial[n]: socket` `VM.Config.HWType`; `usb[n]` `VM.Config.HWType`
//! and, for a mapping, `Mapping.Use` on `/mapping/usb/{id}`; `hostpci[n]` with a mapping
//! `Mapping.Use` on `/mapping/pci/{id}` and `VM.Config.HWType`. Root-only: a raw PCI or USB
//! device (`spice` aside), a host serial device, `romfile`, and every key in none of qemu's
//! lists (`args`, `hookscript`, `affinity`, ...). LXC (`check_ct_modify_config_perm`):
//! `cores`/`cpulimit`/`cpuunits` CPU, `memory`/`swap` Memory, `net[n]`/`hostname`/
//! `nameserver`/`searchdomain` Network (NICs also `SDN.Use`), `rootfs`/`mp[n]` Disk (plus the
//! storage), a change of `features` that touches `nesting` only `VM.Allocate`, the rest
//! Options. Root-only: bind and device mount points, `dev[n]`, `hookscript`, a change of any
//! feature but `nesting`, any feature change on a privileged container. Raw `lxc.*` keys no API
//! user may set: the model refuses them.

mod keys;
mod objects;
#[cfg(all(test, feature = "sim"))]
mod tests;

use crate::desired::{Context, Desired, DesiredGuest, Drivers};
use crate::guest_config::{family, is_volume};
use crate::plan::{Action, ClusterPlan, Op};
use keys::{Writes, bridge_needs, volume_needs};
use proxops_graph::Graph;
use proxops_model::kinds::PowerState;
use proxops_pve::{Credentials, ErrorKind, GuestType, Method, Params, PveClient, PveError};
use std::collections::{BTreeMap, BTreeSet};
/// One privilege on one ACL path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Grant {
    /// The ACL path (`/vms/101`, `/storage/local`, `/`).
    pub path: String,
    /// The privilege (`VM.Allocate`).
    pub privilege: &'static str,
}

impl Grant {
    /// `privilege` on the ACL path `path`.
    pub fn new(path: impl Into<String>, privilege: &'static str) -> Grant {
        Grant {
            path: path.into(),
            privilege,
        }
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.privilege, self.path)
    }
}

/// What one step needs: any one of the alternatives, each a set of grants that must all be held.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Need {
    /// What needs it: `create VM/web (vmid 101)`, `plan`.
    pub purpose: String,
    /// Which part of it, if not all of it: `set memory`, `read VM/web (vmid 101)`.
    pub detail: Option<String>,
    /// The alternatives (most needs have one, of one grant).
    pub any_of: Vec<Vec<Grant>>,
    /// Whether the step works without it, only less well (reported as a warning).
    pub optional: bool,
    /// Set when no privilege allows it, only the user root@pam: what and the remedy
    /// (`hostpci0 uses a raw device: only root@pam may set it; use a PCI resource mapping`).
    /// `any_of` is empty then.
    pub root_only: Option<String>,
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
            root_only: None,
        }
    }

    /// Something only root@pam may do.
    fn root_only(purpose: &str, why: String) -> Need {
        Need {
            purpose: purpose.to_owned(),
            detail: None,
            any_of: Vec::new(),
            optional: false,
            root_only: Some(why),
        }
    }

    /// The need with a detail.
    fn at(mut self, detail: impl Into<String>) -> Need {
        self.detail = Some(detail.into());
        self
    }

    /// Any one of the privileges on the path.
    fn any(purpose: &str, path: &str, privileges: &[&'static str]) -> Need {
        Need {
            any_of: privileges.iter().map(|p| vec![grant(path, p)]).collect(),
            ..Need::one(purpose, path, "")
        }
    }

    /// Whether `holds` says one alternative is held in full (never for a root-only need).
    pub fn met(&self, holds: impl Fn(&Grant) -> bool) -> bool {
        self.any_of.iter().any(|all| all.iter().all(&holds))
    }

    /// The ACL paths the need involves.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.any_of.iter().flatten().map(|g| g.path.as_str())
    }

    /// `VM.Allocate on /vms/101`; `Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on
    /// /nodes/pve1`; for a root-only need, what and its remedy.
    pub fn requirement(&self) -> String {
        if let Some(why) = &self.root_only {
            return why.clone();
        }
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

/// One grant.
fn grant(path: &str, privilege: &'static str) -> Grant {
    Grant {
        path: path.to_owned(),
        privilege,
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

/// Whether credentials are the user root@pam itself, for whom no check applies (a password
/// login as `root@pam`); an API token never is.
pub fn is_root(credentials: &Credentials) -> bool {
    matches!(credentials, Credentials::Password { username, .. } if username == "root@pam")
}

/// The SDN zone of each VNet, which `SDN.Use` paths name: `/sdn/zones/{zone}/{vnet}`. A bridge
/// that is no VNet (or one the credentials may not see) is a plain Linux bridge of the zone
/// `localnetwork`, as pve-guest-common `check_vnet_access` has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    zones: BTreeMap<String, String>,
}

impl Network {
    /// From VNet names and their zones.
    pub fn from_zones(zones: impl IntoIterator<Item = (String, String)>) -> Network {
        Network {
            zones: zones.into_iter().collect(),
        }
    }

    /// The zone of a bridge.
    pub fn zone(&self, bridge: &str) -> &str {
        self.zones
            .get(bridge)
            .map_or("localnetwork", String::as_str)
    }

    /// The VNets as PVE lists them (`GET /cluster/sdn/vnets`: those with `SDN.Audit` or
    /// `SDN.Allocate`). A PVE without SDN (404/501) has none.
    pub async fn read(client: &PveClient) -> Result<Network, PveError> {
        match client.sdn_vnets().await {
            Ok(vnets) => Ok(Network::from_zones(
                vnets
                    .into_iter()
                    .filter_map(|v| v.zone.map(|z| (v.vnet, z))),
            )),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotImplemented) => {
                Ok(Network::default())
            }
            Err(e) => Err(e),
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

/// Whether the desired LXC is unprivileged (the engine always writes `unprivileged`).
fn unprivileged(d: &DesiredGuest) -> bool {
    d.owned("unprivileged").is_none_or(|o| o.value != "0")
}

fn writes<'a>(purpose: &'a str, d: &DesiredGuest, create: bool, net: &'a Network) -> Writes<'a> {
    Writes {
        purpose,
        guest: d.guest,
        vmid: d.vmid,
        create,
        unprivileged: unprivileged(d),
        net,
    }
}

pub(super) fn create_needs(
    purpose: &str,
    d: &DesiredGuest,
    net: &Network,
    major: Option<u32>,
    out: &mut Vec<Need>,
) {
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
            bridge_needs(purpose, d.guest, &o.value, net, out);
        }
        // What differs from the template is written after the clone: any owned key may be.
        let w = writes(purpose, d, false, net);
        for o in &d.owned {
            w.set(&o.key, &o.value, None, out);
        }
    } else {
        // pve-container `src/PVE/API2/LXC.pm` `create_vm`: a privileged container needs
        // `Sys.Modify` on `/`, from pve-container 6.0.6 (PVE 9; 8's `stable-bookworm` has no
        // such check). An unknown release is taken as 9.
        if d.guest == GuestType::Lxc && !unprivileged(d) && major.is_none_or(|m| m >= 9) {
            out.push(Need::one(purpose, "/", "Sys.Modify").at("privileged container"));
        }
        out.push(Need::one(purpose, vms(d.vmid), "VM.Allocate"));
        if let Some((_, template)) = d.create_only.iter().find(|(k, _)| k == "ostemplate") {
            volume_needs(purpose, d.vmid, "ostemplate", template, out);
        }
        let w = writes(purpose, d, true, net);
        for o in &d.owned {
            w.set(&o.key, &o.value, None, out);
        }
        // qemu-server `PVE/API2/Qemu.pm` and pve-container `PVE/API2/LXC.pm` `create_vm`:
        // `pool` needs `Pool.Allocate` on the pool, not a config key's privilege.
        if let Some((_, pool)) = d.create_only.iter().find(|(k, _)| k == "pool") {
            out.push(
                Need::one(purpose, format!("/pool/{pool}"), "Pool.Allocate").at("join its pool"),
            );
        }
        for (k, v) in d
            .create_only
            .iter()
            .filter(|(k, _)| k != "ostemplate" && k != "pool")
        {
            w.set(k, v, None, out);
        }
    }
    if d.power == Some(PowerState::Started) && !d.template {
        out.push(power(purpose, d.vmid).at("start"));
    }
}

/// What rolling a guarded update back needs: qemu-server `PVE/API2/Qemu.pm` `rollback` and
/// pve-container `PVE/API2/LXC/Snapshot.pm` `rollback` take `VM.Snapshot` or
/// `VM.Snapshot.Rollback`; with `start` qemu-server also checks `VM.PowerMgmt` up front.
fn rollback_needs(purpose: &str, guard: &crate::plan::Guard, out: &mut Vec<Need>) {
    let vmid = guard.guest.vmid;
    out.push(
        Need::any(
            purpose,
            &vms(vmid),
            &["VM.Snapshot", "VM.Snapshot.Rollback"],
        )
        .at(format!("roll back to {} if it fails", guard.snapshot)),
    );
    if guard.running {
        out.push(power(purpose, vmid).at("start it again after a rollback"));
    }
}

/// What one planned action needs (`net`: where its bridges' ACL paths are; `major`: the
/// cluster's PVE major release, when known).
pub fn action_needs(action: &Action, net: &Network, major: Option<u32>) -> Vec<Need> {
    let mut out = Vec::new();
    match &action.op {
        Op::Object(request) | Op::Token { request, .. } => {
            let verb = format!("{:?}", action.verb).to_lowercase();
            let purpose = format!("{verb} {}/{}", action.kind, action.name);
            out.extend(objects::request_need(
                &purpose,
                request.method.as_str(),
                request.template,
                &request.path,
                request.params.pairs(),
            ));
        }
        Op::SdnApply => {
            out.extend(objects::request_need(
                "apply the SDN configuration",
                "PUT",
                "/cluster/sdn",
                "/cluster/sdn",
                &[],
            ));
        }
        Op::Rules { endpoints, .. } => {
            // The rule writes (create, update, delete) of the list: one check covers them.
            let purpose = format!(
                "update the firewall rules of {}/{}",
                action.kind, action.name
            );
            let path = endpoints.create_path();
            out.extend(objects::request_need(
                &purpose,
                "POST",
                endpoints.create,
                &path,
                &[],
            ));
        }
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
            out.push(Need {
                any_of: vec![
                    vec![grant("/", "Sys.Audit"), grant("/", "Sys.Modify")],
                    vec![grant(
                        &format!("/nodes/{}", action.node),
                        "Sys.AccessNetwork",
                    )],
                ],
                ..Need::one(&purpose, "/", "Sys.Audit")
            });
        }
        Op::Create { desired } => {
            let verb = if desired.clone.is_some() {
                "clone"
            } else {
                "create"
            };
            create_needs(&guest_purpose(verb, action), desired, net, major, &mut out);
        }
        Op::Update {
            desired,
            changes,
            removals,
            resizes,
            restart,
            guard,
            ..
        } => {
            let purpose = guest_purpose("update", action);
            let w = writes(&purpose, desired, false, net);
            for c in changes {
                w.set(&c.key, &c.value, c.live.as_deref(), &mut out);
            }
            // PVE checks a deleted key as a set one, and its value by kind.
            for r in removals {
                w.delete(&r.key, &r.live, &mut out);
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
            if let Some(g) = guard {
                rollback_needs(&purpose, g, &mut out);
            }
        }
        Op::GuardedStart { guest, guard } => {
            let purpose = guest_purpose("start", action);
            out.push(power(&purpose, guest.vmid));
            rollback_needs(&purpose, guard, &mut out);
        }
        Op::Snapshot { guard, .. } => {
            // qemu-server `PVE/API2/Qemu.pm` `snapshot`, pve-container
            // `PVE/API2/LXC/Snapshot.pm` `snapshot`: VM.Snapshot.
            let purpose = guest_purpose("snapshot", action);
            out.push(Need::one(&purpose, vms(guard.guest.vmid), "VM.Snapshot"));
        }
        Op::Verify { guard, check, .. } => {
            let purpose = guest_purpose("verify", action);
            match check {
                crate::plan::Check::Agent => {
                    // qemu-server `PVE/API2/Qemu/Agent.pm`: `ping` is VM.GuestAgent.Audit
                    // (PVE 9), VM.Monitor before.
                    let privileges: &[&'static str] = match major {
                        Some(m) if m < 9 => &["VM.Monitor"],
                        Some(_) => &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"],
                        None => &[
                            "VM.Monitor",
                            "VM.GuestAgent.Audit",
                            "VM.GuestAgent.Unrestricted",
                        ],
                    };
                    out.push(
                        Need::any(&purpose, &vms(guard.guest.vmid), privileges)
                            .at("ask its guest agent"),
                    );
                }
                crate::plan::Check::Running => {
                    out.push(Need::one(&purpose, vms(guard.guest.vmid), "VM.Audit"));
                }
            }
            rollback_needs(&purpose, guard, &mut out);
        }
        Op::PruneSnapshots { guest, .. } => {
            let purpose = guest_purpose("prune the snapshots of", action);
            out.push(Need::one(&purpose, vms(guest.vmid), "VM.Snapshot"));
        }
        Op::Start { guest } => out.push(power(&guest_purpose("start", action), guest.vmid)),
        Op::Stop { guest } => out.push(power(&guest_purpose("stop", action), guest.vmid)),
        Op::MarkTemplate { guest, running } | Op::Delete { guest, running, .. } => {
            let verb = if matches!(action.op, Op::Delete { .. }) {
                "delete"
            } else {
                "make a template of"
            };
            let purpose = guest_purpose(verb, action);
            if let Op::Delete { ha: Some(_), .. } = &action.op {
                // pve-ha-manager `src/PVE/API2/HA/Resources.pm` `delete`: Sys.Console on /.
                out.push(
                    Need::one(&purpose, "/", "Sys.Console").at("remove its HA resource first"),
                );
            }
            out.push(Need::one(&purpose, vms(guest.vmid), "VM.Allocate"));
            if *running {
                out.push(power(&purpose, guest.vmid).at("shut it down first"));
            }
        }
        Op::Migrate { guest, .. } => {
            // qemu-server `src/PVE/API2/Qemu.pm` `migrate_vm` and pve-container
            // `src/PVE/API2/LXC.pm` `migrate_vm`: VM.Migrate on the guest.
            let purpose = guest_purpose("migrate", action);
            out.push(Need::one(&purpose, vms(guest.vmid), "VM.Migrate"));
        }
        Op::Ha { .. } | Op::HaRemove { .. } | Op::HaRule { .. } | Op::HaRuleRemove { .. } => {
            // pve-ha-manager `src/PVE/API2/HA/Resources.pm` and `Rules.pm`
            // `create`/`update`/`delete`: Sys.Console on /.
            let purpose = guest_purpose("manage the HA resource of", action);
            out.push(Need::one(&purpose, "/", "Sys.Console"));
        }
    }
    out
}

/// What the planner reads: each declared guest (`VM.Audit`), each artifact's storage
/// (`Datastore.Audit`: pve-manager `PVE/API2/Cluster.pm` `resources` lists a storage only with
/// it, and the planner learns from that row that the storage exists and what content it takes),
/// every guest for prunes (`VM.Audit` on `/vms`, optional), and, for a VM whose manifest
/// enables the QEMU guest agent, the agent read its receipt's `ip-addresses` needs (optional:
/// the receipt is written without them): `VM.Monitor` on PVE 8, `VM.GuestAgent.Audit` (or
/// `VM.GuestAgent.Unrestricted`) on 9 (qemu-server `agent/network-get-interfaces`; both when
/// the release is unknown).
pub fn planning_needs(
    cluster: &str,
    graph: &Graph,
    drivers: &Drivers,
    major: Option<u32>,
) -> Vec<Need> {
    let cx = Context::new(cluster, graph);
    let mut out = Vec::new();
    let mut storages = BTreeSet::new();
    let mut lists = BTreeSet::new();
    for id in graph.resources() {
        let resource = graph.resource(id);
        match drivers.desired(&cx, resource) {
            Ok(Desired::Guest(d)) => {
                out.push(Need::one("plan", vms(d.vmid), "VM.Audit").at(format!(
                    "read {} (vmid {})",
                    resource.key(),
                    d.vmid
                )));
                let agent = d
                    .owned("agent")
                    .is_some_and(|o| crate::guest_config::agent_enabled(&o.value));
                // A template never runs: nothing is read from it.
                if d.guest == GuestType::Qemu && agent && !d.template {
                    let privileges: &[&'static str] = match major {
                        Some(m) if m < 9 => &["VM.Monitor"],
                        Some(_) => &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"],
                        None => &[
                            "VM.Monitor",
                            "VM.GuestAgent.Audit",
                            "VM.GuestAgent.Unrestricted",
                        ],
                    };
                    let mut need =
                        Need::any("record receipts", &vms(d.vmid), privileges).at(format!(
                            "read the ip-addresses of {} through its guest agent",
                            resource.key()
                        ));
                    need.optional = true;
                    out.push(need);
                }
            }
            // Reading a cluster object's list: PVE's own check of the list endpoint.
            Ok(Desired::Objects(objs)) => {
                for o in objs {
                    let path = o.endpoints.list_path();
                    if lists.insert(path.clone()) {
                        let purpose = format!("read {} (for {})", path, resource.key());
                        out.extend(objects::request_need(
                            &purpose,
                            "GET",
                            o.endpoints.list,
                            &path,
                            &[],
                        ));
                    }
                }
            }
            Ok(Desired::Artifact(a)) => {
                if storages.insert(a.storage.clone()) {
                    out.push(
                        Need::one("plan", storage(&a.storage), "Datastore.Audit")
                            .at(format!("see and list storage {}", a.storage)),
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
pub fn plan_needs(
    plan: &ClusterPlan,
    graph: &Graph,
    drivers: &Drivers,
    net: &Network,
    major: Option<u32>,
) -> Vec<Need> {
    let mut out = planning_needs(&plan.cluster, graph, drivers, major);
    for action in &plan.actions {
        out.extend(action_needs(action, net, major));
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
#[non_exhaustive]
pub struct Missing {
    /// `VM.Allocate on /vms/101`.
    pub requirement: String,
    /// What needs it, in plan order without repeats, each with the parts that do.
    pub purposes: Vec<(String, Vec<String>)>,
    /// Whether only optional steps need it.
    pub optional: bool,
    /// Whether only root@pam may do it (`requirement` then says what and the remedy).
    pub root_only: bool,
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

/// The unmet needs, by requirement in first-seen order (`held`: privileges per path; `root`:
/// the credentials are root@pam itself, which root-only needs ask for).
pub fn missing(
    needs: &[Need],
    held: &BTreeMap<String, BTreeSet<String>>,
    root: bool,
) -> Vec<Missing> {
    let holds = |g: &Grant| held.get(&g.path).is_some_and(|p| p.contains(g.privilege));
    let unmet = |n: &&Need| match n.root_only {
        Some(_) => !root,
        None => !n.met(holds),
    };
    let mut out: Vec<Missing> = Vec::new();
    for need in needs.iter().filter(unmet) {
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
                    root_only: need.root_only.is_some(),
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
