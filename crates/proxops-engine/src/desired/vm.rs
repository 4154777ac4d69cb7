//! `VM` and `TemplateVM`: the wire mapping of SPEC.md section 8.1, with the earlier
//! implementation's known bugs fixed (tags joined with `;`, `tpmstate0`, `hidden` inside `cpu`,
//! explicit `false` options owned as `0`, the name compared so renames converge).

use super::context::{Context, DesiredError};
use super::guest::{CloneSource, Compare, DesiredGuest, Owned, flag, owned, pve_config, tags};
use super::keys;
use proxops_model::Resource;
use proxops_model::kinds::vm::{
    AgentType, Aio, AudioDevice, AudioDriver, Balloon, Bios, Cache, Cdrom, Clipboard, Discard,
    Media, NumaPolicy, RngSource, SecureBoot, TpmVersion, Viommu, VmHardware,
};
use proxops_model::kinds::{VmSpec, drive_slots};
use proxops_pve::GuestType;
use proxops_pve::props::format_size;
use proxops_secrets::{REDACTED, Secret};

pub(super) fn desired(
    cx: &Context<'_>,
    resource: &Resource,
    spec: &VmSpec,
) -> Result<DesiredGuest, DesiredError> {
    let template = resource.kind == "TemplateVM";
    let mut out = DesiredGuest::empty(
        GuestType::Qemu,
        template,
        (spec.node.as_deref(), &spec.nodes),
        spec.vmid,
        spec.state,
        spec.ha.as_ref(),
    );
    out.update_policy = spec.update_policy.clone().filter(|p| p.snapshot);
    let o = &mut out.owned;
    let name = spec
        .pve_name
        .clone()
        .unwrap_or_else(|| resource.name().to_owned());
    keys::identity(
        o,
        "name",
        name,
        spec.pve_description.as_deref(),
        &spec.memory,
        true,
    );
    match &spec.balloon {
        Some(Balloon::Off) => o.push(owned("balloon", "0", Compare::Canonical, true)),
        Some(Balloon::Min(q)) => {
            if let Some(mib) = q.whole_mib() {
                o.push(owned("balloon", mib.to_string(), Compare::Canonical, true));
            }
        }
        None => {}
    }
    if let Some(os) = spec.ostype {
        o.push(owned("ostype", word(&os), Compare::Canonical, true));
    }
    cpu_keys(spec, o);
    // The ownership tags are always written, with or without tags of the manifest's own.
    o.push(tags(cx, resource, &spec.tags));
    // Disks: one slot each; the first controller named sets the VM-wide SCSI hardware.
    let mut scsihw = None;
    for (i, disk) in spec.disks.iter().enumerate() {
        let slot = disk.interface.clone().unwrap_or_else(|| format!("scsi{i}"));
        let mut value = match (&disk.image, &disk.volume) {
            (Some(image), _) => format!(
                "{}:0,import-from={}",
                disk.storage,
                cx.volume(resource, "DiskImage", image)?
            ),
            // The slot's own volume: compared by id and grown by `size` (diff.rs `volume`).
            (None, Some(volume)) => format!(
                "{volume},size={}",
                format_size(disk.size.as_ref().map_or(0, |s| s.bytes()))
            ),
            (None, None) => format!(
                "{}:{}",
                disk.storage,
                disk.size
                    .as_ref()
                    .map_or_else(|| "0".to_owned(), |s| s.gib_string())
            ),
        };
        if let Some(b) = disk.iothread {
            value.push_str(&format!(",iothread={}", flag(b)));
        }
        if let Some(d) = disk.discard {
            value.push_str(match d {
                Discard::On => ",discard=on",
                Discard::Ignore => ",discard=ignore",
            });
        }
        if let Some(b) = disk.ssd {
            value.push_str(&format!(",ssd={}", flag(b)));
        }
        if let Some(a) = disk.aio {
            value.push_str(match a {
                Aio::Native => ",aio=native",
                Aio::Threads => ",aio=threads",
                Aio::IoUring => ",aio=io_uring",
            });
        }
        if let Some(c) = disk.cache {
            value.push_str(&format!(",cache={}", cache(c)));
        }
        for (key, b) in [
            ("backup", disk.backup),
            ("replicate", disk.replicate),
            ("ro", disk.read_only),
        ] {
            if let Some(b) = b {
                value.push_str(&format!(",{key}={}", flag(b)));
            }
        }
        if let Some(serial) = &disk.serial {
            // PVE keeps the serial url-encoded (qemu-server `Drive.pm`, `serial` is
            // `urlencoded`).
            value.push_str(&format!(",serial={}", percent_encode(serial)));
        }
        if let Some(f) = disk.format {
            value.push_str(&format!(",format={}", word(&f)));
        }
        for (key, v) in disk.limits.iter().flat_map(|l| l.to_pve()) {
            value.push_str(&format!(",{key}={v}"));
        }
        if scsihw.is_none() {
            scsihw = disk.controller.clone();
        }
        let size_owned = disk.image.is_none();
        o.push(owned(
            slot,
            value,
            if size_owned {
                Compare::Disk
            } else {
                Compare::Volume
            },
            true,
        ));
    }
    let scsihw = spec
        .hardware
        .as_ref()
        .and_then(|h| h.scsi_controller.clone())
        .or(scsihw);
    if let Some(hw) = scsihw {
        o.push(owned("scsihw", hw, Compare::Canonical, true));
    }
    for (i, nic) in spec.networks.iter().enumerate() {
        let slot = nic.slot.clone().unwrap_or_else(|| format!("net{i}"));
        let model = nic.model.clone().unwrap_or_else(|| "virtio".into());
        let mut value = match &nic.mac {
            Some(mac) => format!("{model}={}", mac.to_ascii_uppercase()),
            None => model,
        };
        value.push_str(&format!(",bridge={}", nic.bridge));
        if let Some(tag) = nic.vlan.filter(|t| *t > 0) {
            value.push_str(&format!(",tag={tag}"));
        }
        if let Some(rate) = nic.rate_limit.filter(|r| *r > 0) {
            value.push_str(&format!(",rate={rate}"));
        }
        if let Some(b) = nic.firewall {
            value.push_str(&format!(",firewall={}", flag(b)));
        }
        if let Some(mtu) = nic.mtu {
            value.push_str(&format!(",mtu={mtu}"));
        }
        if let Some(q) = nic.queues {
            value.push_str(&format!(",queues={q}"));
        }
        if let Some(b) = nic.link_down {
            value.push_str(&format!(",link_down={}", flag(b)));
        }
        o.push(owned(slot, value, Compare::SubKeys, false));
    }
    if let Some(h) = &spec.hardware {
        hardware_keys(cx, resource, h, o)?;
    }
    if let Some(opts) = &spec.options {
        keys::flags(
            o,
            &[
                ("onboot", opts.onboot),
                ("protection", opts.protection),
                ("acpi", opts.acpi),
                ("tablet", opts.tablet),
            ],
        );
        keys::startup_and_hookscript(o, opts.startup.as_ref(), opts.hookscript.as_ref());
        if let Some(b) = opts.agent {
            let mut v = flag(b).to_owned();
            if let Some(t) = opts.agent_fstrim_cloned_disks {
                v.push_str(&format!(",fstrim_cloned_disks={}", flag(t)));
            }
            // `freeze-fs-on-backup` is 8.4's name and 9.1's alias of `freeze-fs`.
            if let Some(f) = opts.agent_freeze_fs {
                v.push_str(&format!(",freeze-fs-on-backup={}", flag(f)));
            }
            if let Some(t) = opts.agent_type {
                v.push_str(match t {
                    AgentType::Virtio => ",type=virtio",
                    AgentType::Isa => ",type=isa",
                });
            }
            o.push(owned("agent", v, Compare::SubKeys, false));
        }
        if !opts.hotplug.is_empty() {
            o.push(owned(
                "hotplug",
                opts.hotplug.join(","),
                Compare::WordSet,
                false,
            ));
        }
        if !opts.boot_order.is_empty() {
            o.push(owned(
                "boot",
                format!("order={}", opts.boot_order.join(";")),
                Compare::Canonical,
                false,
            ));
        }
        if let Some(b) = opts.localtime {
            o.push(owned("localtime", flag(b), Compare::Canonical, true));
        }
        if opts.nested_virt.is_some() {
            out.warnings.push(
                "options.nested-virt is not a PVE setting: nested virtualisation comes with cpu type `host`; not written".into(),
            );
        }
    }
    if let Some(ci) = &spec.cloud_init_data {
        if let Some(user) = &ci.ci_user {
            o.push(owned("ciuser", user.clone(), Compare::Canonical, false));
        }
        // `["*"]` leaves the keys to PVE.
        if !ci.ssh_keys.is_empty() && ci.ssh_keys != ["*"] {
            check_ssh_keys(resource, &ci.ssh_keys, "listed in `ssh-keys`")?;
            o.push(owned(
                "sshkeys",
                encode_ssh_keys(&ci.ssh_keys),
                Compare::SshKeys,
                false,
            ));
        }
        if !ci.ssh_key_refs.is_empty() && cx.references_only {
            let refs = ci.ssh_key_refs.join(", ");
            o.push(owned(
                "sshkeys",
                sops_reference(&refs),
                Compare::SshKeys,
                false,
            ));
        } else if !ci.ssh_key_refs.is_empty() {
            let refs = ci.ssh_key_refs.join(", ");
            let keys = cx.secret(resource, &refs, |s| s.resolve_ssh_keys(&ci.ssh_key_refs))?;
            let lines: Vec<String> = keys.iter().map(|k| k.expose().to_owned()).collect();
            check_ssh_keys(resource, &lines, &format!("from `{refs}`"))?;
            if lines.is_empty() {
                return Err(DesiredError::Secret {
                    resource: resource.key().to_string(),
                    reference: refs,
                    reason: "the references resolve to no key".into(),
                });
            }
            o.push(secret_owned(
                "sshkeys",
                encode_ssh_keys(&lines),
                Compare::SshKeys,
            ));
        }
        if let Some(reference) = ci.ci_password_ref.as_ref().filter(|_| cx.references_only) {
            o.push(owned(
                "cipassword",
                sops_reference(reference),
                Compare::WhenAbsent,
                false,
            ));
        } else if let Some(reference) = &ci.ci_password_ref {
            let password = cx.secret(resource, reference, |s| {
                s.resolve(reference).map(|p| vec![p])
            })?;
            if let Some(p) = password.into_iter().next() {
                // Write-only: PVE reads it back masked (`**********`), see `Compare::WhenAbsent`.
                o.push(secret_owned(
                    "cipassword",
                    p.expose().to_owned(),
                    Compare::WhenAbsent,
                ));
            }
        }
        keys::nameservers(o, &ci.nameservers);
        if !ci.search_domains.is_empty() {
            o.push(owned(
                "searchdomain",
                ci.search_domains.join(" "),
                Compare::WordSet,
                false,
            ));
        }
        if let Some(t) = ci.ci_type {
            o.push(owned("citype", word(&t), Compare::Canonical, false));
        }
        if let Some(b) = ci.ci_upgrade {
            o.push(owned("ciupgrade", flag(b), Compare::Canonical, false));
        }
        if let Some(custom) = &ci.ci_custom {
            let parts: Vec<String> = custom
                .parts()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if !parts.is_empty() {
                o.push(owned("cicustom", parts.join(","), Compare::SubKeys, false));
            }
        }
        for ip in &ci.ipconfigs {
            // Each address under its family's key (`ip6=`/`gw6=` for IPv6): PVE refuses an
            // IPv6 address in `ip=`.
            let Some(value) = ip.to_pve() else { continue };
            o.push(owned(
                format!("ipconfig{}", ip.nic.unwrap_or(0)),
                value,
                Compare::SubKeys,
                false,
            ));
        }
    }
    o.extend(pve_config(GuestType::Qemu, &spec.pve_config));
    if let Some(name) = &spec.clone
        && !template
    {
        let source = cx.lookup(resource, "TemplateVM", name)?;
        if let proxops_model::Spec::Vm(t) = &source.spec {
            out.clone = Some(CloneSource {
                vmid: t.vmid,
                node: t.node.clone().unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

/// The CPU keys: the model with its flags and options (`cpu`), cores, weight, limit, vCPUs and
/// host affinity.
fn cpu_keys(spec: &VmSpec, o: &mut Vec<Owned>) {
    let c = &spec.cpu;
    let mut cpu = c.cpu_type.clone();
    if !c.flags.is_empty() {
        cpu.push_str(&format!(",flags={}", c.flags.join(";")));
    }
    if let Some(h) = spec.options.as_ref().and_then(|x| x.hidden) {
        cpu.push_str(&format!(",hidden={}", flag(h)));
    }
    if let Some(p) = &c.phys_bits {
        cpu.push_str(&format!(",phys-bits={p}"));
    }
    if let Some(v) = &c.hv_vendor_id {
        cpu.push_str(&format!(",hv-vendor-id={v}"));
    }
    o.push(owned("cpu", cpu, Compare::SubKeys, true));
    o.push(owned(
        "cores",
        c.cores.to_string(),
        Compare::Canonical,
        true,
    ));
    if let Some(u) = c.units {
        o.push(owned("cpuunits", u.to_string(), Compare::Canonical, false));
    }
    if let Some(l) = c.limit {
        o.push(owned("cpulimit", number(l), Compare::Number, false));
    }
    if let Some(v) = c.vcpus {
        o.push(owned("vcpus", v.to_string(), Compare::Canonical, true));
    }
    if let Some(a) = &c.affinity {
        o.push(owned("affinity", a.clone(), Compare::Canonical, true));
    }
}

/// The keys of `hardware`.
fn hardware_keys(
    cx: &Context<'_>,
    resource: &Resource,
    h: &VmHardware,
    o: &mut Vec<Owned>,
) -> Result<(), DesiredError> {
    if h.machine.is_some() || h.viommu.is_some() {
        let mut m = h
            .machine
            .as_ref()
            .map_or_else(String::new, |m| m.to_pve().to_owned());
        if let Some(v) = h.viommu {
            let v = match v {
                Viommu::Intel => "intel",
                Viommu::Virtio => "virtio",
            };
            if m.is_empty() {
                m = format!("viommu={v}");
            } else {
                m.push_str(&format!(",viommu={v}"));
            }
        }
        o.push(owned("machine", m, Compare::SubKeys, true));
    }
    if let Some(b) = h.bios {
        let b = match b {
            Bios::Seabios => "seabios",
            Bios::Ovmf => "ovmf",
        };
        o.push(owned("bios", b, Compare::Canonical, true));
    }
    if h.display.is_some() || h.display_memory.is_some() || h.display_clipboard.is_some() {
        let mut parts: Vec<String> = h.display.iter().cloned().collect();
        if let Some(mib) = h.display_memory.as_ref().and_then(|m| m.whole_mib()) {
            parts.push(format!("memory={mib}"));
        }
        if let Some(Clipboard::Vnc) = h.display_clipboard {
            parts.push("clipboard=vnc".into());
        }
        o.push(owned("vga", parts.join(","), Compare::SubKeys, true));
    }
    if let Some(n) = h.sockets.filter(|n| *n > 0) {
        o.push(owned("sockets", n.to_string(), Compare::Canonical, true));
    }
    if let Some(b) = h.numa {
        o.push(owned("numa", flag(b), Compare::Canonical, true));
    }
    for (i, n) in h.numa_nodes.iter().enumerate() {
        let mut v = format!("cpus={}", n.cpus);
        if let Some(mib) = n.memory.as_ref().and_then(|m| m.whole_mib()) {
            v.push_str(&format!(",memory={mib}"));
        }
        if let Some(hn) = &n.hostnodes {
            v.push_str(&format!(",hostnodes={hn}"));
        }
        if let Some(p) = n.policy {
            v.push_str(match p {
                NumaPolicy::Preferred => ",policy=preferred",
                NumaPolicy::Bind => ",policy=bind",
                NumaPolicy::Interleave => ",policy=interleave",
            });
        }
        o.push(owned(format!("numa{i}"), v, Compare::SubKeys, true));
    }
    if let Some(hp) = h.hugepages {
        o.push(owned("hugepages", hp.to_pve(), Compare::Canonical, true));
    }
    if let Some(b) = h.keep_hugepages {
        o.push(owned("keephugepages", flag(b), Compare::Canonical, false));
    }
    for (key, value) in [
        ("serial0", &h.serial0),
        ("serial1", &h.serial1),
        ("serial2", &h.serial2),
        ("serial3", &h.serial3),
    ] {
        if let Some(s) = value {
            o.push(owned(key, s.clone(), Compare::Canonical, true));
        }
    }
    if let Some(a) = &h.audio {
        let device = match a.device {
            AudioDevice::Ich9IntelHda => "ich9-intel-hda",
            AudioDevice::IntelHda => "intel-hda",
            AudioDevice::Ac97 => "AC97",
        };
        let mut v = format!("device={device}");
        if let Some(d) = a.driver {
            v.push_str(match d {
                AudioDriver::Spice => ",driver=spice",
                AudioDriver::None => ",driver=none",
            });
        }
        o.push(owned("audio0", v, Compare::SubKeys, true));
    }
    if let Some(r) = &h.rng {
        let source = match r.source {
            RngSource::Urandom => "/dev/urandom",
            RngSource::Random => "/dev/random",
            RngSource::Hwrng => "/dev/hwrng",
        };
        let mut v = format!("source={source}");
        if let Some(m) = r.max_bytes {
            v.push_str(&format!(",max_bytes={m}"));
        }
        if let Some(p) = r.period {
            v.push_str(&format!(",period={p}"));
        }
        o.push(owned("rng0", v, Compare::SubKeys, true));
    }
    let (cloud_init_slot, cdrom_slot) = drive_slots(Some(h));
    if let (Some(cdrom), Some(slot)) = (&h.cdrom, cdrom_slot)
        && let Some(value) = cdrom_value(cx, resource, cdrom)?
    {
        o.push(owned(slot, value, Compare::Cdrom, false));
    }
    for cdrom in &h.cdroms {
        let (Some(slot), Some(value)) = (&cdrom.slot, cdrom_value(cx, resource, cdrom)?) else {
            continue;
        };
        o.push(owned(slot.clone(), value, Compare::Cdrom, false));
    }
    if let (Some(ci), Some(slot)) = (h.cloud_init.as_ref().filter(|c| c.enabled), cloud_init_slot) {
        let storage = ci.storage.clone().unwrap_or_else(|| "local-lvm".into());
        o.push(owned(
            slot,
            format!("{storage}:cloudinit"),
            Compare::Volume,
            true,
        ));
    }
    if let Some(efi) = &h.efi_disk {
        let mut value = format!("{}:1", efi.storage);
        if let Some(t) = &efi.template {
            value.push_str(&format!(",efitype={}", t.to_ascii_lowercase()));
        }
        if let Some(sb) = efi.secure_boot {
            value.push_str(match sb {
                SecureBoot::Enabled => ",pre-enrolled-keys=1",
                SecureBoot::Disabled => ",pre-enrolled-keys=0",
            });
        }
        if let Some(c) = efi.ms_cert {
            value.push_str(&format!(",ms-cert={}", c.to_pve()));
        }
        o.push(owned("efidisk0", value, Compare::Volume, true));
    }
    if let Some(tpm) = &h.tpm {
        // PVE keeps TPM state on a volume: `tpmstate0=<storage>:1,version=v2.0`.
        let storage = tpm
            .storage
            .clone()
            .or_else(|| h.efi_disk.as_ref().map(|e| e.storage.clone()))
            .unwrap_or_else(|| "local-lvm".into());
        let version = match tpm.version.unwrap_or(TpmVersion::V2_0) {
            TpmVersion::V1_2 => "v1.2",
            TpmVersion::V2_0 => "v2.0",
        };
        o.push(owned(
            "tpmstate0",
            format!("{storage}:1,version={version}"),
            Compare::Volume,
            true,
        ));
    }
    // A raw device is the bare `host` value; a mapping `mapping=<id>` (qemu-server
    // `PCI.pm`/`USB.pm`: the two exclude each other, which the diff keeps so).
    for pci in &h.pci_devices {
        let mut value = match (&pci.mapping, &pci.device) {
            (Some(id), _) => format!("mapping={id}"),
            (None, Some(device)) => device.trim().to_ascii_lowercase(),
            (None, None) => continue,
        };
        for (k, v) in pci.options() {
            value.push_str(&format!(",{k}={v}"));
        }
        o.push(owned(pci.slot.clone(), value, Compare::SubKeys, true));
    }
    for usb in &h.usb_devices {
        let mut value = match (&usb.mapping, &usb.host) {
            (Some(id), _) => format!("mapping={id}"),
            (None, Some(host)) => host.trim().to_owned(),
            (None, None) => continue,
        };
        if let Some(b) = usb.usb3 {
            value.push_str(&format!(",usb3={}", flag(b)));
        }
        o.push(owned(usb.slot.clone(), value, Compare::SubKeys, true));
    }
    Ok(())
}

/// A CD-ROM drive's value: its ISO's volume (or the volume it names, or `none`) as a CD-ROM.
fn cdrom_value(
    cx: &Context<'_>,
    resource: &Resource,
    cdrom: &Cdrom,
) -> Result<Option<String>, DesiredError> {
    let media = match cdrom.media.unwrap_or(Media::Cdrom) {
        Media::Cdrom => "cdrom",
        Media::Disk => "disk",
    };
    let volume = match (&cdrom.iso, &cdrom.volume) {
        (Some(iso), _) if iso == "none" => "none".to_owned(),
        (Some(iso), _) => cx.volume(resource, "ISO", iso)?,
        (None, Some(v)) => v.clone(),
        (None, None) => return Ok(None),
    };
    Ok(Some(format!("{volume},media={media}")))
}

/// The serde spelling of a unit enum (`l26`, `nocloud`).
fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn cache(c: Cache) -> &'static str {
    match c {
        Cache::None => "none",
        Cache::Writethrough => "writethrough",
        Cache::Writeback => "writeback",
        Cache::Unsafe => "unsafe",
        Cache::Directsync => "directsync",
    }
}

/// A number as PVE writes it: no fraction when whole.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

/// Every byte outside `A-Za-z0-9-._~` percent-encoded in uppercase.
fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a materialized payload shows for a secret: where it comes from.
fn sops_reference(reference: &str) -> String {
    format!("sops:{reference}")
}

/// An owned key whose value is secret: plans show [`REDACTED`].
fn secret_owned(key: &str, wire: String, compare: Compare) -> Owned {
    Owned {
        secret: Some(Secret::new(wire)),
        ..owned(key, REDACTED, compare, false)
    }
}

/// Refuses the keys PVE would refuse: qemu-server's create and config update run pve-common
/// `validate_ssh_public_keys` (`ssh-keygen -l` per line) and fail the whole request otherwise.
fn check_ssh_keys(resource: &Resource, keys: &[String], origin: &str) -> Result<(), DesiredError> {
    let lines = keys.iter().flat_map(|k| k.lines()).map(str::trim);
    for (i, line) in lines.filter(|l| !l.is_empty()).enumerate() {
        if let Err(reason) = proxops_model::kinds::common::check_ssh_public_key(line) {
            return Err(DesiredError::SshKey {
                resource: resource.key().to_string(),
                index: i + 1,
                origin: origin.to_owned(),
                reason,
            });
        }
    }
    Ok(())
}

/// PVE's `sshkeys` form: the keys (trimmed, deduplicated, in order) joined by newlines, then every
/// byte outside `A-Za-z0-9-._~` percent-encoded in uppercase.
pub(crate) fn encode_ssh_keys(keys: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for k in keys.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        if !unique.contains(&k) {
            unique.push(k);
        }
    }
    percent_encode(&unique.join("\n"))
}
