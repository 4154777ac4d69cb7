//! `proxops adopt`: a manifest document from a live guest's config, and a report that says
//! where every config key went. Adopt reads only; it changes nothing in PVE.
//!
//! Each key is placed by [`classify`]: a typed field where one sets it (and this module can
//! translate the value), `pve-config` verbatim, or reported with the reason (snapshots, raw
//! `lxc.*`, `args`, unused volumes, a masked `cipassword`, a typed key not translated yet).
//! Nothing is dropped silently: the report lists every key, and the manifest's header comment
//! lists the reported ones.

mod composition;
mod devices;
mod error;
mod live;
mod lxc;
mod objects;
mod props;
mod qemu_cloudinit;
mod qemu_devices;
mod qemu_media;
mod relations;
mod report;
mod typed;

pub use error::AdoptError;
pub use live::{Outcome, Selection, Written, adopt_live, manifest_path, write, write_objects};
pub use objects::{AdoptedObject, ObjectOutcome, adopt_objects};
pub use report::{AdoptRefusal, AdoptReport, KeyPlacement, Placement};

use crate::desired::{IDENTITY_PREFIX, OWNER_TAG};
use proxops_model::kind::GuestType;
use proxops_model::pve_config::{KeyClass, classify};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A live guest as adopt reads it (`GET /nodes/{node}/{type}/{vmid}/config`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveGuest {
    /// Its vmid.
    pub vmid: u32,
    /// The node it lives on.
    pub node: String,
    /// QEMU or LXC.
    pub guest: GuestType,
    /// The config's keys and values (the `#` description as `description`).
    pub config: BTreeMap<String, String>,
    /// A container's raw `lxc.*` lines, in order.
    pub raw_lxc: Vec<(String, String)>,
    /// Snapshot names.
    pub snapshots: Vec<String>,
    /// Whether it runs (a stopped guest's manifest says `state: stopped`, so that taking it
    /// over starts nothing).
    pub running: bool,
    /// The resource pool it is a member of (its manifest says `pool:`, so that taking it over
    /// keeps it there).
    pub pool: Option<String>,
}

impl LiveGuest {
    /// The stopped guest `vmid` of type `guest` on `node`, with an empty config, no raw
    /// `lxc.*` lines and no snapshots; the setters fill them in.
    pub fn new(vmid: u32, node: impl Into<String>, guest: GuestType) -> LiveGuest {
        LiveGuest {
            vmid,
            node: node.into(),
            guest,
            config: BTreeMap::new(),
            raw_lxc: Vec::new(),
            snapshots: Vec::new(),
            running: false,
            pool: None,
        }
    }

    /// The config's keys and values.
    pub fn with_config(mut self, config: BTreeMap<String, String>) -> LiveGuest {
        self.config = config;
        self
    }

    /// A container's raw `lxc.*` lines, in order.
    pub fn with_raw_lxc(mut self, raw_lxc: Vec<(String, String)>) -> LiveGuest {
        self.raw_lxc = raw_lxc;
        self
    }

    /// Snapshot names.
    pub fn with_snapshots(mut self, snapshots: Vec<String>) -> LiveGuest {
        self.snapshots = snapshots;
        self
    }

    /// Whether it runs.
    pub fn with_running(mut self, running: bool) -> LiveGuest {
        self.running = running;
        self
    }

    /// The resource pool it is in.
    pub fn with_pool(mut self, pool: Option<String>) -> LiveGuest {
        self.pool = pool;
        self
    }
}

/// What the repository and cluster say about which guests may be adopted.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AdoptContext {
    /// The cluster's name.
    pub cluster: String,
    /// The cluster's node allowlist.
    pub nodes: Vec<String>,
    /// The vmids the repository already declares, with the declaring resource (`Kind/name`).
    pub declared: BTreeMap<u32, String>,
}

impl AdoptContext {
    /// Cluster `cluster`, with no node allowlist and no declared vmids yet.
    pub fn new(cluster: impl Into<String>) -> AdoptContext {
        AdoptContext {
            cluster: cluster.into(),
            ..AdoptContext::default()
        }
    }

    /// The cluster's node allowlist.
    pub fn with_nodes(mut self, nodes: Vec<String>) -> AdoptContext {
        self.nodes = nodes;
        self
    }

    /// The vmids the repository already declares, with the declaring resource (`Kind/name`).
    pub fn with_declared(mut self, declared: BTreeMap<u32, String>) -> AdoptContext {
        self.declared = declared;
        self
    }
}

/// One adopted guest: its manifest (JSON value model) and its report.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Adopted {
    /// The manifest document.
    pub manifest: Value,
    /// Where every key went.
    pub report: AdoptReport,
}

impl Adopted {
    /// The manifest file's text: a header comment listing the keys not written, then the
    /// document in canonical formatting.
    pub fn to_yaml(&self) -> String {
        let mut out = format!(
            "# Adopted from vmid {} by `proxops adopt`.\n",
            self.report.vmid
        );
        for (key, reason) in self.report.reported() {
            out.push_str(&format!("# not declared: {key}: {reason}\n"));
        }
        for note in &self.report.notes {
            out.push_str(&format!("# note: {note}\n"));
        }
        out.push_str(&proxops_store::canonical::to_yaml(&self.manifest));
        out
    }
}

/// Checks that `live` may be adopted into `ctx`: not claimed, on an allowlisted node, at a
/// vmid the repository does not declare.
pub fn check(ctx: &AdoptContext, live: &LiveGuest) -> Result<(), AdoptRefusal> {
    if let Some(tag) = tags_of(live).find(|t| t.starts_with(IDENTITY_PREFIX)) {
        return Err(AdoptRefusal::Claimed {
            vmid: live.vmid,
            tag: tag.to_owned(),
        });
    }
    // An empty allowlist checks nothing (config.rs `ClusterEntry::nodes`).
    if !ctx.nodes.is_empty() && !ctx.nodes.contains(&live.node) {
        return Err(AdoptRefusal::NodeNotAllowed {
            vmid: live.vmid,
            node: live.node.clone(),
            cluster: ctx.cluster.clone(),
        });
    }
    if let Some(resource) = ctx.declared.get(&live.vmid) {
        return Err(AdoptRefusal::VmidDeclared {
            vmid: live.vmid,
            resource: resource.clone(),
        });
    }
    Ok(())
}

fn tags_of(live: &LiveGuest) -> impl Iterator<Item = &str> {
    live.config
        .get("tags")
        .map(String::as_str)
        .unwrap_or("")
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
}

/// A manifest name from a PVE name: lower case, `[a-z0-9-]`, no leading/trailing `-`.
fn resource_name(live: &LiveGuest) -> String {
    let raw = live
        .config
        .get(if live.guest == GuestType::Qemu {
            "name"
        } else {
            "hostname"
        })
        .map(String::as_str)
        .unwrap_or("");
    let mut name: String = raw
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-').to_owned();
    if name.is_empty() {
        let prefix = if live.guest == GuestType::Qemu {
            "vm"
        } else {
            "ct"
        };
        format!("{prefix}-{}", live.vmid)
    } else {
        name
    }
}

/// Adopts `live` into `ctx`: the manifest and the report, or why not.
pub fn adopt(ctx: &AdoptContext, live: &LiveGuest) -> Result<Adopted, AdoptRefusal> {
    check(ctx, live)?;
    let template = live.config.get("template").is_some_and(|v| v == "1");
    let kind = match (live.guest, template) {
        (GuestType::Qemu, false) => "VM",
        (GuestType::Qemu, true) => "TemplateVM",
        (GuestType::Lxc, false) => "LXC",
        (GuestType::Lxc, true) => "TemplateCT",
    };
    let name = resource_name(live);
    let mut spec = Map::new();
    spec.insert("node".into(), Value::from(live.node.clone()));
    spec.insert("vmid".into(), Value::from(live.vmid));
    let mut pve_config = Map::new();
    let (mut disks, mut networks) = (Vec::new(), Vec::new());
    let mut keys = Vec::new();
    let mut push = |key: &str, placement| {
        keys.push(KeyPlacement {
            key: key.to_owned(),
            placement,
        })
    };
    let reported = |reason: String| Placement::Reported { reason };
    for (key, value) in &live.config {
        let placement = match classify(live.guest, key) {
            KeyClass::Typed(field) => match key.as_str() {
                "template" => Placement::Typed {
                    field: "kind".into(),
                },
                "description" => {
                    spec.insert("pve-description".into(), Value::from(value.clone()));
                    Placement::Typed {
                        field: "pve-description".into(),
                    }
                }
                "name" if live.guest == GuestType::Qemu => {
                    if *value != name {
                        spec.insert("pve-name".into(), Value::from(value.clone()));
                    }
                    Placement::Typed {
                        field: "pve-name".into(),
                    }
                }
                "tags" => {
                    let user: Vec<Value> = tags_of(live)
                        .filter(|t| *t != OWNER_TAG)
                        .map(Value::from)
                        .collect();
                    if !user.is_empty() {
                        spec.insert("tags".into(), Value::Array(user));
                    }
                    Placement::Typed {
                        field: "tags".into(),
                    }
                }
                // PVE returns the hash, never the password: it cannot be declared from it.
                "cipassword" => reported(format!(
                    "PVE shows only a hash of the cloud-init password: store the password as a secret and set `{field}`"
                )),
                k if live.guest == GuestType::Qemu && is_disk_slot(k) => {
                    match qemu_media::drive(k, value, &mut spec)
                        .unwrap_or_else(|| devices::disk(k, value).map(|d| {
                            disks.push(d);
                            "disks".to_owned()
                        })) {
                        Ok(field) => Placement::Typed { field },
                        Err(reason) => reported(reason),
                    }
                }
                "efidisk0" if live.guest == GuestType::Qemu => {
                    match qemu_media::efidisk(value, &mut spec) {
                        Ok(field) => Placement::Typed { field },
                        Err(reason) => reported(reason),
                    }
                }
                "tpmstate0" if live.guest == GuestType::Qemu => {
                    match qemu_media::tpmstate(value, &mut spec) {
                        Ok(field) => Placement::Typed { field },
                        Err(reason) => reported(reason),
                    }
                }
                k if live.guest == GuestType::Qemu && k.starts_with("net") => {
                    match devices::vm_network(k, value) {
                        Ok(n) => {
                            networks.push(n);
                            Placement::Typed {
                                field: "networks".into(),
                            }
                        }
                        Err(reason) => reported(reason),
                    }
                }
                _ if live.guest == GuestType::Lxc => match lxc::place(key, value, field, &mut spec) {
                    Ok(field) => Placement::Typed { field },
                    Err(reason) => reported(reason),
                },
                _ => {
                    let device = qemu_devices::place(key, value, &mut spec)
                        .or_else(|| qemu_cloudinit::place(key, value, &mut spec));
                    match device
                        .unwrap_or_else(|| typed::place(live.guest, key, value, field, &mut spec))
                    {
                        Ok(field) => Placement::Typed { field },
                        Err(reason) => reported(reason),
                    }
                }
            },
            KeyClass::PveConfig => {
                pve_config.insert(key.clone(), Value::from(value.clone()));
                Placement::PveConfig
            }
            KeyClass::Unmanaged(why) => reported(why.to_owned()),
            KeyClass::Unknown => reported(
                "it is not a parameter of PVE's API for this guest type (PVE writes it itself): ProxOps leaves it alone".into(),
            ),
        };
        push(key, placement);
    }
    for (key, _) in &live.raw_lxc {
        let why = match classify(live.guest, key) {
            KeyClass::Unmanaged(why) => why.to_owned(),
            _ => "it is a raw LXC key: ProxOps never removes it".to_owned(),
        };
        push(key, reported(why));
    }
    for snap in &live.snapshots {
        push(
            &format!("snapshot:{snap}"),
            reported("it is a snapshot: snapshots are not declared in manifests; ProxOps never removes them".into()),
        );
    }
    // A VM without disks (PVE allows one, a template too) says so with `disks: []`, which
    // `validate` accepts; a container's volumes are its `rootfs` and mount points.
    if !disks.is_empty() || live.guest == GuestType::Qemu {
        spec.insert("disks".into(), Value::Array(disks));
    }
    if !networks.is_empty() {
        spec.insert("networks".into(), Value::Array(networks));
    }
    if !pve_config.is_empty() {
        spec.insert("pve-config".into(), Value::Object(pve_config));
    }
    // Templates are always stopped; a guest's default state is `started`.
    if !template && !live.running {
        spec.insert("state".into(), Value::from("stopped"));
    }
    if let Some(pool) = &live.pool {
        spec.insert("pool".into(), Value::from(pool.clone()));
    }
    if live.guest == GuestType::Lxc {
        lxc::finish(&mut spec);
    }
    fill_required(live.guest, &live.config, &mut spec);
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::from(name.clone()));
    let mut doc = Map::new();
    doc.insert("apiVersion".into(), Value::from("proxops/v1alpha1"));
    doc.insert("kind".into(), Value::from(kind));
    doc.insert("metadata".into(), Value::Object(metadata));
    doc.insert("spec".into(), Value::Object(spec));
    Ok(Adopted {
        manifest: Value::Object(doc),
        report: AdoptReport {
            vmid: live.vmid,
            kind: kind.to_owned(),
            name,
            keys,
            notes: relations::notes(&live.config),
        },
    })
}

fn is_disk_slot(key: &str) -> bool {
    ["scsi", "virtio", "sata", "ide"].iter().any(|f| {
        key.strip_prefix(f)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// PVE's defaults for the fields a manifest requires but a live config may omit
/// (qemu-server PVE/QemuServer.pm `$confdesc`: memory 512, cores 1; the CPU model of
/// `CPUConfig.pm` `get_default_cpu_type`; pve-container PVE/LXC/Config.pm: memory 512; a
/// container's `cores` may stay absent: all host CPUs).
fn fill_required(
    guest: GuestType,
    config: &BTreeMap<String, String>,
    spec: &mut Map<String, Value>,
) {
    spec.entry("memory")
        .or_insert_with(|| Value::from("512MiB"));
    if guest == GuestType::Lxc {
        return;
    }
    let cpu = spec
        .entry("cpu")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(cpu) = cpu {
        cpu.entry("cores").or_insert_with(|| Value::from(1));
        if guest == GuestType::Qemu {
            cpu.entry("type")
                .or_insert_with(|| Value::from(crate::diff::default_cpu_type(config)));
        }
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests;
