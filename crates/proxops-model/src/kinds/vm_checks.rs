//! The checks of a VM or TemplateVM spec beyond its types: slots, references, values PVE
//! would refuse, and `pve-config`.

use super::basics::slot_in;
use super::common::{self, check_name_ref};
use super::vm_devices::Balloon;
use super::vm_devices::PVE_VM_CPU_FLAGS;
use super::vm_spec::{CloudInitData, IpConfig, IpFamily, VmDisk, VmHardware, VmSpec};
use crate::Code;
use crate::kind::context::SpecContext;
use crate::names::GuestType;
use crate::pve_config;
use crate::yaml::PathSeg;
use std::collections::BTreeSet;

pub(crate) fn disk_slot_valid(slot: &str) -> bool {
    slot_in(slot, "scsi", 30)
        || slot_in(slot, "virtio", 15)
        || slot_in(slot, "sata", 5)
        || slot_in(slot, "ide", 3)
}

/// A slot a CD-ROM or the cloud-init drive may take (PVE puts neither on virtio).
fn drive_slot_valid(slot: &str) -> bool {
    slot_in(slot, "scsi", 30) || slot_in(slot, "sata", 5) || slot_in(slot, "ide", 3)
}

/// The slots of the cloud-init drive and the CD-ROMs, as the engine writes them: the cloud-init
/// drive on its `slot` (default `ide2`), `hardware.cdrom` on its `slot` or `ide2` (`ide3` when
/// the cloud-init drive is on `ide2`), each of `hardware.cdroms` on its own.
pub fn drive_slots(hw: Option<&VmHardware>) -> (Option<String>, Option<String>) {
    let Some(hw) = hw else {
        return (None, None);
    };
    let cloud_init = hw
        .cloud_init
        .as_ref()
        .filter(|c| c.enabled)
        .map(|c| c.slot.clone().unwrap_or_else(|| "ide2".into()));
    let cdrom = hw.cdrom.as_ref().map(|c| {
        c.slot.clone().unwrap_or_else(|| {
            if cloud_init.as_deref() == Some("ide2") {
                "ide3".into()
            } else {
                "ide2".into()
            }
        })
    });
    (cloud_init, cdrom)
}

/// Checks of one VM or TemplateVM spec beyond its types.
pub(crate) fn validate(spec: &VmSpec, template: bool, cx: &SpecContext<'_>) {
    common::check_guest_basics(
        cx,
        (spec.node.as_deref(), &spec.nodes),
        spec.vmid,
        ("VM", template.then_some("TemplateVM")),
        (spec.state, spec.ha.as_ref()),
        &spec.memory,
    );
    super::update_policy::check(
        cx,
        spec.update_policy.as_ref(),
        ("VM", template.then_some("TemplateVM")),
        spec.options.as_ref().and_then(|o| o.agent) == Some(true),
        spec.state,
    );
    if let Some(Balloon::Min(min)) = &spec.balloon {
        common::check_memory(cx, min, &path!["balloon"], "balloon", false);
        if min.bytes() > spec.memory.bytes() {
            cx.invalid(
                &path!["balloon"],
                format!("balloon `{min}` is more than `memory` ({})", spec.memory),
                Some(
                    "the balloon shrinks the VM down to this size: keep it at most `memory`".into(),
                ),
            );
        }
    }
    validate_cpu(spec, cx);
    if let Some(clone) = &spec.clone {
        if template {
            cx.invalid(
                &path!["clone"],
                "a TemplateVM cannot be cloned from another template",
                None,
            );
        }
        check_name_ref(cx, clone, &path!["clone"], "TemplateVM");
        if !spec.disks.is_empty() {
            cx.invalid(
                &path!["disks"],
                "a cloned VM must not declare `disks`",
                Some("the clone inherits the template's disks; remove `disks` or `clone`".into()),
            );
        }
    } else if spec.disks.is_empty()
        && cx.node().get("disks").is_none()
        && spec
            .hardware
            .as_ref()
            .is_none_or(|h| h.pci_devices.is_empty())
    {
        // A forgotten `disks` is the likely mistake; a VM without disks is legitimate (PVE
        // allows it: network or ISO boot, a template shell) when the manifest says so with
        // `disks: []`. A VM with a passed-through controller (an NVMe drive, an HBA) boots
        // from it.
        cx.report_missing(
            &path!["disks"],
            "a VM needs at least one disk unless it sets `clone`, passes a PCI device through, \
             or declares `disks: []` (a VM without disks)",
        );
    }
    let (cloud_init_slot, cdrom_slot) = drive_slots(spec.hardware.as_ref());
    // Slots the drives besides the disks take, and what takes them.
    let mut taken: Vec<(String, &str)> = Vec::new();
    if let Some(s) = &cloud_init_slot {
        taken.push((s.clone(), "cloud-init"));
    }
    if let Some(s) = &cdrom_slot {
        taken.push((s.clone(), "CD-ROM"));
    }
    let mut slots = BTreeSet::new();
    let mut controllers: Vec<(usize, &str)> = Vec::new();
    for (i, disk) in spec.disks.iter().enumerate() {
        let slot = disk.interface.clone().unwrap_or_else(|| format!("scsi{i}"));
        let slot_path = path!["disks", i, "interface"];
        if !disk_slot_valid(&slot) {
            cx.invalid(
                &slot_path,
                format!("`{slot}` is not a disk slot"),
                Some("use scsi0-scsi30, virtio0-virtio15, sata0-sata5 or ide0-ide3".into()),
            );
        } else if !slots.insert(slot.clone()) {
            cx.invalid(
                &slot_path,
                format!("disk slot `{slot}` is used twice"),
                None,
            );
        } else if let Some((_, what)) = taken.iter().find(|(s, _)| *s == slot) {
            cx.invalid(
                &slot_path,
                format!("disk slot `{slot}` is taken by the {what} drive"),
                None,
            );
        }
        validate_disk(disk, i, &slot, cx);
        if let Some(c) = &disk.controller {
            controllers.push((i, c));
        }
    }
    // The CD-ROMs and the cloud-init drive: valid slots, each once, none on a disk's.
    let mut drive_slots: BTreeSet<String> = BTreeSet::new();
    if let Some(hw) = &spec.hardware {
        if let Some(s) = &cloud_init_slot {
            if !drive_slot_valid(s) {
                cx.invalid(
                    &path!["hardware", "cloud-init", "slot"],
                    format!("`{s}` is not a slot for the cloud-init drive"),
                    Some("use ide0-ide3, sata0-sata5 or scsi0-scsi30".into()),
                );
            }
            drive_slots.insert(s.clone());
        }
        if let (Some(s), Some(c)) = (&cdrom_slot, &hw.cdrom) {
            if c.slot.is_some() && !drive_slot_valid(s) {
                cx.invalid(
                    &path!["hardware", "cdrom", "slot"],
                    format!("`{s}` is not a CD-ROM slot"),
                    Some("use ide0-ide3, sata0-sata5 or scsi0-scsi30".into()),
                );
            } else if !drive_slots.insert(s.clone()) {
                cx.invalid(
                    &path!["hardware", "cdrom", "slot"],
                    format!("slot `{s}` is taken by the cloud-init drive"),
                    None,
                );
            }
        }
        for (i, c) in hw.cdroms.iter().enumerate() {
            let at = path!["hardware", "cdroms", i, "slot"];
            match &c.slot {
                None => cx.report_missing(
                    &path!["hardware", "cdroms", i],
                    "each of `hardware.cdroms` needs `slot`",
                ),
                Some(s) if !drive_slot_valid(s) => cx.invalid(
                    &at,
                    format!("`{s}` is not a CD-ROM slot"),
                    Some("use ide0-ide3, sata0-sata5 or scsi0-scsi30".into()),
                ),
                Some(s) if slots.contains(s) || !drive_slots.insert(s.clone()) => {
                    cx.invalid(&at, format!("slot `{s}` is used twice"), None)
                }
                Some(_) => {}
            }
        }
    }
    validate_networks(spec, cx);
    let scsihw = spec
        .hardware
        .as_ref()
        .and_then(|h| h.scsi_controller.as_deref());
    for (i, c) in &controllers {
        common::check_pve_enum(
            cx,
            c,
            common::pve_scsi_controllers(),
            "SCSI controller",
            &path!["disks", *i, "controller"],
        );
        let first = controllers.first().map(|(_, c)| *c);
        let other = scsihw.or(first).filter(|o| o != c);
        if let Some(o) = other {
            cx.invalid(
                &path!["disks", *i, "controller"],
                format!(
                    "`controller: {c}` disagrees with `{o}`: a VM has one SCSI controller model"
                ),
                Some("set it once, in `hardware.scsi-controller`".into()),
            );
        }
    }
    if let Some(hw) = &spec.hardware {
        validate_hardware(spec, hw, cx);
    }
    if let Some(opts) = &spec.options {
        let mut seen = BTreeSet::new();
        for (i, entry) in opts.boot_order.iter().enumerate() {
            if entry.trim().is_empty() || !seen.insert(entry) {
                cx.invalid(
                    &path!["options", "boot-order", i],
                    format!("boot-order entry `{entry}` is empty or repeated"),
                    None,
                );
            }
        }
        if let Some(h) = &opts.hookscript {
            check_snippet(cx, h, &path!["options", "hookscript"]);
        }
        if opts.agent.is_none() {
            for (field, set) in [
                (
                    "agent-fstrim-cloned-disks",
                    opts.agent_fstrim_cloned_disks.is_some(),
                ),
                ("agent-freeze-fs", opts.agent_freeze_fs.is_some()),
                ("agent-type", opts.agent_type.is_some()),
            ] {
                if set {
                    cx.invalid(
                        &path!["options", field],
                        format!("`{field}` needs `options.agent`"),
                        Some("PVE's `agent` always says whether the agent is enabled: set `agent: true` (or `false`)".into()),
                    );
                }
            }
        }
    }
    if let Some(ci) = &spec.cloud_init_data {
        validate_cloud_init(ci, cx);
        if let Some(custom) = &ci.ci_custom {
            for (k, v) in custom.parts() {
                check_snippet(cx, v, &path!["cloud-init-data", "ci-custom", k]);
            }
        }
    }
    for (i, tag) in spec.tags.iter().enumerate() {
        common::check_tag(cx, tag, &path!["tags", i]);
    }
    common::check_retired_extra(cx, GuestType::Qemu, &spec.extra);
    pve_config::check_pve_config(
        cx,
        GuestType::Qemu,
        spec.vmid,
        &spec.pve_config,
        &path!["pve-config"],
    );
    if let Some(f) = &spec.firewall {
        super::object_checks::guest_firewall(cx, &path!["firewall"], f);
    }
    if let Some(p) = &spec.pool {
        super::object_checks::guest_pool(cx, p);
    }
}

/// A snippet (or other) volume id, `storage:path`.
fn check_snippet(cx: &SpecContext<'_>, volume: &str, at: &[PathSeg]) {
    if pve_config::check_format("pve-volume-id", volume).is_err() {
        cx.invalid(
            at,
            format!("`{volume}` is not a volume id"),
            Some("a snippet volume such as `local:snippets/hook.pl`".into()),
        );
    }
}

fn validate_cpu(spec: &VmSpec, cx: &SpecContext<'_>) {
    let cpu = &spec.cpu;
    if cpu.cpu_type.trim().is_empty() {
        cx.invalid(
            &path!["cpu", "type"],
            "`cpu.type` must not be empty",
            Some("e.g. `host`".into()),
        );
    } else if cpu.cpu_type.contains([',', '=']) {
        cx.invalid(
            &path!["cpu", "type"],
            format!("`{}` is not a CPU model", cpu.cpu_type),
            Some("flags go in `cpu.flags`, `hidden` in `options.hidden`".into()),
        );
    }
    if cpu.cores == 0 {
        cx.invalid(
            &path!["cpu", "cores"],
            "`cpu.cores` must be at least 1",
            None,
        );
    }
    let mut seen = BTreeSet::new();
    for (i, flag) in cpu.flags.iter().enumerate() {
        let name = flag.strip_prefix(['+', '-']);
        match name {
            None => cx.invalid(
                &path!["cpu", "flags", i],
                format!("`{flag}` needs a sign: `+{flag}` turns it on, `-{flag}` off"),
                None,
            ),
            Some(n) if !PVE_VM_CPU_FLAGS.contains(&n) => {
                common::check_pve_enum(
                    cx,
                    n,
                    PVE_VM_CPU_FLAGS,
                    "VM CPU flag",
                    &path!["cpu", "flags", i],
                );
            }
            Some(n) if !seen.insert(n) => cx.invalid(
                &path!["cpu", "flags", i],
                format!("flag `{n}` is given twice"),
                None,
            ),
            Some(_) => {}
        }
    }
    if let Some(u) = cpu.units
        && !(1..=262_144).contains(&u)
    {
        cx.invalid(
            &path!["cpu", "units"],
            format!("`cpu.units` {u} is outside PVE's 1-262144"),
            None,
        );
    }
    if let Some(l) = cpu.limit
        && !(0.0..=128.0).contains(&l)
    {
        cx.invalid(
            &path!["cpu", "limit"],
            format!("`cpu.limit` {l} is outside PVE's 0-128 (host CPUs; 0 is no limit)"),
            None,
        );
    }
    if let Some(v) = cpu.vcpus {
        let sockets = spec
            .hardware
            .as_ref()
            .and_then(|h| h.sockets)
            .unwrap_or(1)
            .max(1);
        let most = sockets.saturating_mul(cpu.cores);
        if v == 0 || v > most {
            cx.invalid(
                &path!["cpu", "vcpus"],
                format!("`cpu.vcpus` {v} is outside 1-{most} (sockets × cores)"),
                None,
            );
        }
    }
    if let Some(a) = &cpu.affinity
        && pve_config::check_format("pve-cpuset", a).is_err()
    {
        cx.invalid(
            &path!["cpu", "affinity"],
            format!("`{a}` is not a set of host CPUs"),
            Some("CPU ids and ranges separated by commas, e.g. `0-7` or `0,2,4-6`".into()),
        );
    }
    if let Some(p) = &cpu.phys_bits
        && p != "host"
        && !p.parse::<u32>().is_ok_and(|n| (8..=64).contains(&n))
    {
        cx.invalid(
            &path!["cpu", "phys-bits"],
            format!("`{p}` is not a number of physical address bits"),
            Some("8-64, or `host`".into()),
        );
    }
    if let Some(v) = &cpu.hv_vendor_id
        && !((1..=12).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_alphanumeric()))
    {
        cx.invalid(
            &path!["cpu", "hv-vendor-id"],
            format!("`{v}` is not a Hyper-V vendor id: 1-12 letters or digits"),
            None,
        );
    }
}

fn validate_disk(disk: &VmDisk, i: usize, slot: &str, cx: &SpecContext<'_>) {
    common::check_storage_id(cx, &disk.storage, &path!["disks", i, "storage"]);
    match (&disk.size, &disk.image) {
        (None, None) => cx.report_missing(
            &path!["disks", i],
            "a disk needs `size` unless it sets `image`",
        ),
        (Some(_), Some(_)) => cx.invalid(
            &path!["disks", i, "size"],
            "an image-seeded disk takes its size from the image: remove `size`",
            None,
        ),
        (Some(size), None) if size.bytes() == 0 => cx.invalid(
            &path!["disks", i, "size"],
            "a disk size must be greater than zero",
            None,
        ),
        _ => {}
    }
    if let Some(image) = &disk.image {
        check_name_ref(cx, image, &path!["disks", i, "image"], "DiskImage");
    }
    if let Some(volume) = &disk.volume {
        let at = path!["disks", i, "volume"];
        if disk.image.is_some() {
            cx.invalid(
                &at,
                "a disk either imports an `image` or keeps an existing `volume`, not both",
                None,
            );
        } else {
            common::check_existing_volume(cx, volume, &disk.storage, &at);
        }
    }
    let bus = slot.trim_end_matches(|c: char| c.is_ascii_digit());
    if disk.ssd.is_some() && !matches!(bus, "scsi" | "sata" | "ide") {
        cx.invalid(
            &path!["disks", i, "ssd"],
            format!("`ssd` is only supported on scsi, sata and ide slots, not `{slot}`"),
            None,
        );
    }
    if disk.read_only.is_some() && !matches!(bus, "scsi" | "virtio") {
        cx.invalid(
            &path!["disks", i, "read-only"],
            format!("`read-only` is only supported on scsi and virtio slots, not `{slot}`"),
            None,
        );
    }
    if disk.iothread.is_some() && !matches!(bus, "scsi" | "virtio") && disk_slot_valid(slot) {
        cx.invalid(
            &path!["disks", i, "iothread"],
            format!("`iothread` is only supported on scsi and virtio slots, not `{slot}`"),
            None,
        );
    }
    if let Some(serial) = &disk.serial
        && (serial.is_empty() || serial.len() > 20)
    {
        cx.invalid(
            &path!["disks", i, "serial"],
            format!("serial `{serial}` is not 1-20 bytes long"),
            None,
        );
    }
    if let Some(l) = &disk.limits {
        for (k, v) in [
            ("mbps", l.mbps),
            ("mbps-rd", l.mbps_rd),
            ("mbps-wr", l.mbps_wr),
            ("mbps-max", l.mbps_max),
            ("mbps-rd-max", l.mbps_rd_max),
            ("mbps-wr-max", l.mbps_wr_max),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                cx.invalid(
                    &path!["disks", i, "limits", k],
                    format!("`{v}` is not a rate in MB/s"),
                    None,
                );
            }
        }
    }
}

fn validate_networks(spec: &VmSpec, cx: &SpecContext<'_>) {
    let mut nets = BTreeSet::new();
    for (i, net) in spec.networks.iter().enumerate() {
        let model = (
            net.model.as_deref(),
            "model",
            common::pve_nic_models(),
            "NIC model",
        );
        let nic = common::Nic {
            slot: net.slot.as_deref(),
            bridge: &net.bridge,
            vlan: (net.vlan, "vlan"),
            mac: (net.mac.as_deref(), "mac"),
            kind: model,
        };
        common::check_nic(cx, i, &nic, &mut nets);
        let virtio = net.model.as_deref().unwrap_or("virtio") == "virtio";
        if let Some(mtu) = net.mtu {
            if !(1..=65_520).contains(&mtu) {
                cx.invalid(
                    &path!["networks", i, "mtu"],
                    format!("MTU {mtu} is outside 1-65520 (`1`: the bridge's)"),
                    None,
                );
            } else if !virtio {
                cx.invalid(
                    &path!["networks", i, "mtu"],
                    "PVE sets an MTU only on virtio NICs",
                    None,
                );
            }
        }
        if let Some(q) = net.queues
            && q > 64
        {
            cx.invalid(
                &path!["networks", i, "queues"],
                format!("{q} queues is more than PVE's 64"),
                None,
            );
        }
    }
}

fn validate_hardware(spec: &VmSpec, hw: &VmHardware, cx: &SpecContext<'_>) {
    if let Some(m) = &hw.machine
        && !m.is_valid()
    {
        let types =
            "`i440fx`, `q35`, a versioned type such as `pc-q35-8.1` or `pc-i440fx-9.0`, or `virt`";
        let help = match crate::diagnostic::did_you_mean(&m.0, ["i440fx", "q35", "virt"]) {
            Some(n) => format!("did you mean `{n}`? PVE takes {types}"),
            None => format!("PVE takes {types}"),
        };
        cx.invalid(
            &path!["hardware", "machine"],
            format!("`{}` is not a machine type PVE knows", m.0),
            Some(help),
        );
    }
    if hw.viommu == Some(super::vm_devices::Viommu::Intel)
        && !hw.machine.as_ref().is_some_and(|m| m.is_q35())
    {
        cx.invalid(
            &path!["hardware", "viommu"],
            "an Intel vIOMMU needs a q35 machine",
            Some("set `machine: q35` (or a `pc-q35-*` version), or use `viommu: virtio`".into()),
        );
    }
    if let Some(display) = &hw.display {
        common::check_pve_enum(
            cx,
            display,
            common::pve_vga_types(),
            "display type",
            &path!["hardware", "display"],
        );
    }
    if let Some(mem) = &hw.display_memory {
        let mib = mem.whole_mib();
        if !mib.is_some_and(|m| (4..=512).contains(&m)) {
            cx.invalid(
                &path!["hardware", "display-memory"],
                format!("display memory `{mem}` is not 4-512 whole MiB"),
                None,
            );
        }
    }
    if let Some(c) = &hw.scsi_controller {
        common::check_pve_enum(
            cx,
            c,
            common::pve_scsi_controllers(),
            "SCSI controller",
            &path!["hardware", "scsi-controller"],
        );
    }
    if !hw.numa_nodes.is_empty() {
        if hw.numa != Some(true) {
            cx.invalid(
                &path!["hardware", "numa-nodes"],
                "NUMA nodes need `numa: true`",
                None,
            );
        }
        if hw.numa_nodes.len() > 8 {
            cx.invalid(
                &path!["hardware", "numa-nodes"],
                format!("{} NUMA nodes: PVE has numa0-numa7", hw.numa_nodes.len()),
                None,
            );
        }
        let ids = |v: &str| {
            !v.is_empty()
                && v.split(';').all(|p| {
                    let d = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                    match p.split_once('-') {
                        Some((a, b)) => d(a) && d(b),
                        None => d(p),
                    }
                })
        };
        let mut total = 0u64;
        let mut all_sized = true;
        for (i, n) in hw.numa_nodes.iter().enumerate() {
            if !ids(&n.cpus) {
                cx.invalid(
                    &path!["hardware", "numa-nodes", i, "cpus"],
                    format!("`{}` is not a list of vCPU ids", n.cpus),
                    Some("ids and ranges separated by `;`, e.g. `0-3` or `0-1;4-5`".into()),
                );
            }
            if let Some(h) = &n.hostnodes
                && !ids(h)
            {
                cx.invalid(
                    &path!["hardware", "numa-nodes", i, "hostnodes"],
                    format!("`{h}` is not a list of host NUMA nodes"),
                    Some("ids and ranges separated by `;`, e.g. `0` or `0-1`".into()),
                );
            }
            match &n.memory {
                Some(m) => {
                    common::check_memory(
                        cx,
                        m,
                        &path!["hardware", "numa-nodes", i, "memory"],
                        "NUMA memory",
                        true,
                    );
                    total += m.bytes();
                }
                None => all_sized = false,
            }
        }
        // qemu-server `Memory.pm` `config`: "total memory for NUMA nodes must be equal to vm
        // static memory".
        if all_sized && total != spec.memory.bytes() {
            cx.invalid(
                &path!["hardware", "numa-nodes"],
                format!("the NUMA nodes' memory adds up to {} MiB, `memory` is {} MiB: PVE refuses to start the VM", total >> 20, spec.memory.bytes() >> 20),
                None,
            );
        }
    }
    for (field, value) in [
        ("serial0", &hw.serial0),
        ("serial1", &hw.serial1),
        ("serial2", &hw.serial2),
        ("serial3", &hw.serial3),
    ] {
        if let Some(v) = value
            && v != "socket"
            && !(v.starts_with("/dev/") && v.len() > 5)
        {
            cx.invalid(
                &path!["hardware", field],
                format!("`{v}` is not a serial port"),
                Some("`socket`, or a host device such as `/dev/ttyS0` (root@pam only)".into()),
            );
        }
    }
    for (list, cdrom) in hw
        .cdrom
        .iter()
        .map(|c| (None, c))
        .chain(hw.cdroms.iter().enumerate().map(|(i, c)| (Some(i), c)))
    {
        let at = |f: &str| match list {
            None => path!["hardware", "cdrom", f].to_vec(),
            Some(i) => path!["hardware", "cdroms", i, f].to_vec(),
        };
        match (&cdrom.iso, &cdrom.volume) {
            (Some(_), Some(_)) => cx.invalid(
                &at("volume"),
                "`iso` and `volume` exclude each other",
                Some(
                    "`iso` names an ISO resource, `volume` a volume ProxOps does not manage".into(),
                ),
            ),
            (Some(iso), None) if iso != "none" => check_name_ref(cx, iso, &at("iso"), "ISO"),
            (None, Some(v)) if pve_config::check_format("pve-volume-id", v).is_err() => cx.invalid(
                &at("volume"),
                format!("`{v}` is not a volume id"),
                Some("e.g. `local:iso/virtio-win.iso`".into()),
            ),
            _ => {}
        }
    }
    if let Some(ci) = &hw.cloud_init {
        match &ci.storage {
            Some(s) => common::check_storage_id(cx, s, &path!["hardware", "cloud-init", "storage"]),
            None if ci.enabled => cx.report_missing(
                &path!["hardware", "cloud-init", "storage"],
                "`hardware.cloud-init.storage` is required when the drive is enabled",
            ),
            None => {}
        }
    }
    if let Some(efi) = &hw.efi_disk {
        common::check_storage_id(cx, &efi.storage, &path!["hardware", "efi-disk", "storage"]);
        if let Some(t) = &efi.template
            && !matches!(t.to_ascii_lowercase().as_str(), "2m" | "4m")
        {
            cx.invalid(
                &path!["hardware", "efi-disk", "template"],
                format!("`{t}` is not an EFI vars type: use `2m` or `4m`"),
                None,
            );
        }
    }
    if let Some(tpm) = &hw.tpm {
        match &tpm.storage {
            Some(s) => common::check_storage_id(cx, s, &path!["hardware", "tpm", "storage"]),
            None if hw.efi_disk.is_none() => cx.report_missing(
                &path!["hardware", "tpm", "storage"],
                "`hardware.tpm.storage` is required when there is no `efi-disk` to take it from",
            ),
            None => {}
        }
    }
    super::passthrough::validate(&hw.pci_devices, &hw.usb_devices, cx);
}

fn validate_cloud_init(ci: &CloudInitData, cx: &SpecContext<'_>) {
    let base = ["cloud-init-data"];
    let at = |rest: &[PathSeg]| -> Vec<PathSeg> {
        base.iter()
            .map(|s| PathSeg::from(*s))
            .chain(rest.iter().cloned())
            .collect()
    };
    let star = ci.ssh_keys.iter().any(|k| k.trim() == "*");
    if star && ci.ssh_keys.len() > 1 {
        cx.invalid(
            &at(&path!["ssh-keys"]),
            "`*` leaves the keys to PVE and cannot be combined with other keys",
            None,
        );
    }
    if !ci.ssh_keys.is_empty() && !ci.ssh_key_refs.is_empty() {
        cx.invalid(
            &at(&path!["ssh-key-refs"]),
            "set either `ssh-keys` or `ssh-key-refs`, not both",
            None,
        );
    }
    for (i, key) in ci.ssh_keys.iter().enumerate() {
        let k = key.trim();
        if k != "*" && (k.split_whitespace().count() < 2 || k.contains('\n')) {
            cx.invalid(
                &at(&path!["ssh-keys", i]),
                "not an OpenSSH public key line (`<type> <base64> [comment]`)",
                None,
            );
        } else if k != "*"
            && let Err(why) = common::check_ssh_public_key(k)
        {
            cx.report(
                Code::SshKey,
                &at(&path!["ssh-keys", i]),
                format!("PVE will refuse this SSH public key: {why}"),
                "not a readable public key",
                Some(
                    "PVE checks each key with `ssh-keygen -l` (pve-common `PVE::Tools::validate_ssh_public_keys`) and refuses the create; paste the whole line of the `.pub` file"
                        .into(),
                ),
            );
        }
    }
    for (i, r) in ci.ssh_key_refs.iter().enumerate() {
        common::check_secret_ref(
            cx,
            r,
            "cloud-init.ssh-keys.",
            &at(&path!["ssh-key-refs", i]),
        );
    }
    if let Some(r) = &ci.ci_password_ref {
        common::check_secret_ref(
            cx,
            r,
            "cloud-init.passwords.",
            &at(&path!["ci-password-ref"]),
        );
    }
    let mut nics = BTreeSet::new();
    for (i, ipc) in ci.ipconfigs.iter().enumerate() {
        let nic = ipc.nic.unwrap_or(0);
        if nic > 31 {
            cx.invalid(
                &at(&path!["ipconfigs", i, "nic"]),
                format!("NIC index {nic} is out of range (0-31)"),
                None,
            );
        } else if !nics.insert(nic) {
            cx.invalid(
                &at(&path!["ipconfigs", i, "nic"]),
                format!("ipconfig for NIC {nic} is declared twice"),
                None,
            );
        }
        check_ipconfig(cx, ipc, nic, &at(&path!["ipconfigs", i]));
    }
}

/// One `ipconfigs[]` entry: each value well-formed and of the family its key and the NIC's
/// addresses allow (`ipconfigs[]` at `base`).
fn check_ipconfig(cx: &SpecContext<'_>, ipc: &IpConfig, nic: u32, base: &[PathSeg]) {
    let here = |key: &str| cx.key_path(base, key);
    let family = |path: &[PathSeg], message: String, help: &str| {
        cx.report(
            Code::IpFamily,
            path,
            message,
            "wrong IP family",
            Some(help.to_owned()),
        );
    };
    let config_ok = |v: &str| common::is_cidr(v) || matches!(v, "dhcp" | "auto");
    if let Some(ip) = &ipc.ip
        && !config_ok(ip)
    {
        cx.invalid(
            &here("ip"),
            format!("`{ip}` is not an address in CIDR notation"),
            Some(
                "e.g. `192.168.1.10/24`, `2001:db8::10/64`, `dhcp` (IPv4) or `auto` (IPv6)".into(),
            ),
        );
    }
    if let Some(ip6) = &ipc.ip6 {
        if !config_ok(ip6) {
            cx.invalid(
                &here("ip6"),
                format!("`{ip6}` is not an address in CIDR notation"),
                Some("e.g. `2001:db8::10/64`, `dhcp` (DHCPv6) or `auto` (SLAAC)".into()),
            );
        } else if IpFamily::of_ip(ip6) == IpFamily::V4 && ip6 != "dhcp" {
            family(
                &here("ip6"),
                format!("`ip6` is IPv6, `{ip6}` is IPv4"),
                "put an IPv4 address in `ip`",
            );
        }
        if ipc
            .ip
            .as_deref()
            .is_some_and(|ip| IpFamily::of_ip(ip) == IpFamily::V6)
        {
            family(
                &here("ip6"),
                format!("NIC {nic} has two IPv6 configurations, `ip` and `ip6`"),
                "keep one: `ip6` is for an IPv6 configuration beside an IPv4 `ip`",
            );
        }
    }
    if ipc.ip.is_none() && ipc.ip6.is_none() {
        for key in ["gateway", "gateway6"] {
            if ipc_value(ipc, key).is_some() {
                cx.invalid(&here(key), "a gateway needs a static `ip`", None);
            }
        }
        return;
    }
    let (v4, v6) = ipc.by_family();
    for key in ["gateway", "gateway6"] {
        let Some(gw) = ipc_value(ipc, key) else {
            continue;
        };
        if gw.parse::<std::net::IpAddr>().is_err() {
            cx.invalid(&here(key), format!("`{gw}` is not an IP address"), None);
            continue;
        }
        let of = IpFamily::of_gateway(gw);
        // qemu-server `PVE/QemuServer/Network.pm` `parse_ipconfig` drops the NIC's whole
        // ipconfig (warning only in the task log) when a gateway comes with `dhcp`/`auto`.
        let dynamic = match of {
            IpFamily::V4 => v4.filter(|v| !common::is_cidr(v)),
            IpFamily::V6 => v6.filter(|v| !common::is_cidr(v)),
        };
        if let Some(how) = dynamic {
            cx.invalid(
                &here(key),
                format!("a gateway beside `{how}` makes PVE ignore NIC {nic}'s whole cloud-init network config"),
                Some(format!("drop the gateway ({how} supplies one), or give the NIC a static address")),
            );
            continue;
        }
        if key == "gateway6" && of == IpFamily::V4 {
            family(
                &here(key),
                format!("`gateway6` is IPv6, `{gw}` is IPv4"),
                "put an IPv4 gateway in `gateway`",
            );
        } else if (of == IpFamily::V4 && v4.is_none()) || (of == IpFamily::V6 && v6.is_none()) {
            family(
                &here(key),
                format!(
                    "gateway `{gw}` is {}, but NIC {nic} has no {} address",
                    of.name(),
                    of.name()
                ),
                "give the NIC an address of the gateway's family (`ip` or `ip6`)",
            );
        } else if key == "gateway" && of == IpFamily::V6 && ipc.gateway6.is_some() {
            family(
                &here(key),
                format!("NIC {nic} has two IPv6 gateways, `gateway` and `gateway6`"),
                "keep one",
            );
        }
    }
}

fn ipc_value<'a>(ipc: &'a IpConfig, key: &str) -> Option<&'a str> {
    match key {
        "gateway" => ipc.gateway.as_deref(),
        _ => ipc.gateway6.as_deref(),
    }
}
