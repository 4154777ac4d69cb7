//! `VM` and `TemplateVM`: the wire mapping of SPEC.md section 8.1, with the earlier
//! implementation's known bugs fixed (tags joined with `;`, `tpmstate0`, `hidden` inside `cpu`,
//! explicit `false` options owned as `0`, the name compared so renames converge).

use super::{CloneSource, Compare, Context, DesiredError, DesiredGuest, Owned, flag, owned, tags};
use proxops_model::Resource;
use proxops_model::kinds::vm::{Aio, Bios, Discard, Machine, Media, SecureBoot, TpmVersion};
use proxops_model::kinds::{PowerState, VmSpec};
use proxops_pve::GuestType;
use proxops_secrets::{REDACTED, Secret};

pub(super) fn desired(
    cx: &Context<'_>,
    resource: &Resource,
    spec: &VmSpec,
) -> Result<DesiredGuest, DesiredError> {
    let template = resource.kind == "TemplateVM";
    let mut out = DesiredGuest {
        guest: GuestType::Qemu,
        template,
        node: spec.node.clone(),
        vmid: spec.vmid,
        power: (!template).then(|| spec.state.unwrap_or(PowerState::Started)),
        clone: None,
        owned: Vec::new(),
        create_only: spec
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        warnings: Vec::new(),
    };
    let o = &mut out.owned;
    let name = spec
        .pve_name
        .clone()
        .unwrap_or_else(|| resource.name().to_owned());
    o.push(owned("name", name, Compare::Canonical, false));
    if let Some(d) = &spec.pve_description {
        o.push(owned("description", d.trim(), Compare::Canonical, false));
    }
    if let Some(mib) = spec.memory.whole_mib() {
        o.push(owned("memory", mib.to_string(), Compare::Canonical, true));
    }
    let hidden = spec.options.as_ref().and_then(|x| x.hidden);
    let mut cpu = spec.cpu.cpu_type.clone();
    if let Some(h) = hidden {
        cpu.push_str(&format!(",hidden={}", flag(h)));
    }
    o.push(owned("cpu", cpu, Compare::SubKeys, true));
    o.push(owned(
        "cores",
        spec.cpu.cores.to_string(),
        Compare::Canonical,
        true,
    ));
    if !spec.cpu.flags.is_empty() {
        out.warnings.push(
            "cpu.flags are not written: PVE accepts only a fixed list of flags, set through the cpu type".into(),
        );
    }
    // The ownership tags are always written, with or without tags of the manifest's own.
    o.push(tags(cx, resource, &spec.tags));
    // Disks: one slot each; the first controller named sets the VM-wide SCSI hardware.
    let mut scsihw = None;
    for (i, disk) in spec.disks.iter().enumerate() {
        let slot = disk.interface.clone().unwrap_or_else(|| format!("scsi{i}"));
        let mut value = match &disk.image {
            Some(image) => format!(
                "{}:0,import-from={}",
                disk.storage,
                cx.volume(resource, "DiskImage", image)?
            ),
            None => format!(
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
        o.push(owned(slot, value, Compare::SubKeys, false));
    }
    let cloud_init = spec
        .hardware
        .as_ref()
        .and_then(|h| h.cloud_init.as_ref())
        .filter(|c| c.enabled);
    if let Some(h) = &spec.hardware {
        if let Some(m) = h.machine {
            let m = match m {
                Machine::I440fx => "pc",
                Machine::Q35 => "q35",
            };
            o.push(owned("machine", m, Compare::SubKeys, true));
        }
        if let Some(b) = h.bios {
            let b = match b {
                Bios::Seabios => "seabios",
                Bios::Ovmf => "ovmf",
            };
            o.push(owned("bios", b, Compare::Canonical, true));
        }
        if let Some(v) = &h.display {
            o.push(owned("vga", v.clone(), Compare::SubKeys, true));
        }
        if let Some(n) = h.sockets.filter(|n| *n > 0) {
            o.push(owned("sockets", n.to_string(), Compare::Canonical, true));
        }
        if let Some(b) = h.numa {
            o.push(owned("numa", flag(b), Compare::Canonical, true));
        }
        if let Some(s) = &h.serial0 {
            o.push(owned("serial0", s.clone(), Compare::Canonical, true));
        }
        if let Some(cdrom) = &h.cdrom
            && let Some(iso) = &cdrom.iso
        {
            // ide2 holds the cdrom unless the cloud-init drive takes it.
            let slot = if cloud_init.is_some() { "ide3" } else { "ide2" };
            let media = match cdrom.media.unwrap_or(Media::Cdrom) {
                Media::Cdrom => "cdrom",
                Media::Disk => "disk",
            };
            let volume = if iso == "none" {
                "none".to_owned()
            } else {
                cx.volume(resource, "ISO", iso)?
            };
            o.push(owned(
                slot,
                format!("{volume},media={media}"),
                Compare::Cdrom,
                false,
            ));
        }
        if let Some(ci) = cloud_init {
            let storage = ci.storage.clone().unwrap_or_else(|| "local-lvm".into());
            o.push(owned(
                "ide2",
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
            if let Some(b) = pci.pcie {
                value.push_str(&format!(",pcie={}", flag(b)));
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
    }
    if let Some(opts) = &spec.options {
        for (key, value) in [
            ("onboot", opts.onboot),
            ("protection", opts.protection),
            ("acpi", opts.acpi),
            ("tablet", opts.tablet),
        ] {
            if let Some(b) = value {
                o.push(owned(key, flag(b), Compare::Canonical, false));
            }
        }
        if let Some(b) = opts.agent {
            o.push(owned("agent", flag(b), Compare::SubKeys, false));
        }
        if let Some(s) = &opts.startup {
            o.push(owned("startup", s.clone(), Compare::SubKeys, false));
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
        if !ci.ssh_key_refs.is_empty() {
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
        if let Some(reference) = &ci.ci_password_ref {
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
        if !ci.nameservers.is_empty() {
            o.push(owned(
                "nameserver",
                ci.nameservers.join(" "),
                Compare::WordList,
                false,
            ));
        }
        if !ci.search_domains.is_empty() {
            o.push(owned(
                "searchdomain",
                ci.search_domains.join(" "),
                Compare::WordSet,
                false,
            ));
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
    if let Some(name) = &spec.clone
        && !template
    {
        let source = cx.lookup(resource, "TemplateVM", name)?;
        if let proxops_model::Spec::Vm(t) = &source.spec {
            out.clone = Some(CloneSource {
                vmid: t.vmid,
                node: t.node.clone(),
            });
        }
    }
    Ok(out)
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
    let mut out = String::new();
    for b in unique.join("\n").bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
