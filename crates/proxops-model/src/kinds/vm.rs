//! `kind: VM` and `kind: TemplateVM`: QEMU guests (SPEC.md sections 8.1 and 8.2). The spec types
//! are defined in `vm_spec` (below `Spec`) and re-exported here; this is their kind definition.

pub use super::passthrough::{PciDevice, UsbDevice};
pub use super::vm_devices::{
    Audio, AudioDevice, AudioDriver, Balloon, Cache, CiCustom, CiType, Clipboard, DiskLimits,
    Hugepages, Machine, MsCert, NumaNode, NumaPolicy, QemuOsType, Rng, RngSource, Viommu,
};
pub use super::vm_spec::{
    AgentType, Aio, Bios, Cdrom, CloudInitData, CloudInitDrive, Discard, DiskFormat, EfiDisk,
    IpConfig, IpFamily, Media, SecureBoot, Tpm, TpmVersion, VmCpu, VmDisk, VmHardware, VmNetwork,
    VmOptions, VmSpec,
};
use crate::kind::context::SpecContext;
use crate::kind::def::KindDef;
use crate::kind::terms::{
    Identity, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceSource,
    ReferenceView, StorageUse,
};
use crate::manifest::spec::Spec;
use crate::yaml::PathSeg;
use std::borrow::Cow;

/// Config keys that ProxOps manages itself and `extra` may therefore not set.
/// The `VM` and `TemplateVM` kind definitions.
pub struct VmKind {
    template: bool,
}

impl VmKind {
    /// `kind: VM`.
    pub const VM: VmKind = VmKind { template: false };
    /// `kind: TemplateVM`.
    pub const TEMPLATE: VmKind = VmKind { template: true };
}

const VM_REFS: &[ReferenceField] = &[
    ReferenceField {
        field: "hardware.cdrom.iso",
        target: "ISO",
    },
    ReferenceField {
        field: "hardware.cdroms[].iso",
        target: "ISO",
    },
    ReferenceField {
        field: "disks[].image",
        target: "DiskImage",
    },
    ReferenceField {
        field: "clone",
        target: "TemplateVM",
    },
];
const TEMPLATE_REFS: &[ReferenceField] = &[
    ReferenceField {
        field: "hardware.cdrom.iso",
        target: "ISO",
    },
    ReferenceField {
        field: "hardware.cdroms[].iso",
        target: "ISO",
    },
    ReferenceField {
        field: "disks[].image",
        target: "DiskImage",
    },
];

impl VmKind {
    /// Each structured reference with a function giving its path under `spec` (built only when
    /// asked: ordering needs no paths).
    fn each_reference<'s>(
        &self,
        spec: &'s Spec,
        mut visit: impl FnMut(ReferenceView<'s>, &dyn Fn() -> Vec<PathSeg>),
    ) {
        let Spec::Vm(s) = spec else { return };
        let view = |field, kind, name: &'s str, same_node| ReferenceView {
            field,
            target_kind: Cow::Borrowed(kind),
            target_name: Cow::Borrowed(name),
            same_node,
            source: ReferenceSource::Structured,
        };
        if let Some(iso) = s
            .hardware
            .as_ref()
            .and_then(|h| h.cdrom.as_ref())
            .and_then(|c| c.iso.as_ref())
            && iso != "none"
        {
            visit(view("hardware.cdrom.iso", "ISO", iso, true), &|| {
                path!["hardware", "cdrom", "iso"].to_vec()
            });
        }
        for (i, c) in s.hardware.iter().flat_map(|h| h.cdroms.iter()).enumerate() {
            if let Some(iso) = c.iso.as_deref().filter(|i| *i != "none") {
                visit(view("hardware.cdroms[].iso", "ISO", iso, true), &|| {
                    path!["hardware", "cdroms", i, "iso"].to_vec()
                });
            }
        }
        for (i, d) in s.disks.iter().enumerate() {
            if let Some(image) = &d.image {
                visit(view("disks[].image", "DiskImage", image, true), &|| {
                    path!["disks", i, "image"].to_vec()
                });
            }
        }
        // A passthrough mapping a ResourceMapping may declare: created before the VM.
        let hardware = s.hardware.as_ref();
        let pci = hardware.into_iter().flat_map(|h| h.pci_devices.iter());
        for (i, d) in pci.enumerate() {
            if let Some(id) = &d.mapping {
                let mut v = view(
                    "hardware.pci-devices[].mapping",
                    "ResourceMapping",
                    id,
                    false,
                );
                v.source = ReferenceSource::Inferred;
                visit(v, &|| {
                    path!["hardware", "pci-devices", i, "mapping"].to_vec()
                });
            }
        }
        let usb = hardware.into_iter().flat_map(|h| h.usb_devices.iter());
        for (i, d) in usb.enumerate() {
            if let Some(id) = &d.mapping {
                let mut v = view(
                    "hardware.usb-devices[].mapping",
                    "ResourceMapping",
                    id,
                    false,
                );
                v.source = ReferenceSource::Inferred;
                visit(v, &|| {
                    path!["hardware", "usb-devices", i, "mapping"].to_vec()
                });
            }
        }
        if !self.template
            && let Some(clone) = &s.clone
        {
            visit(view("clone", "TemplateVM", clone, false), &|| {
                path!["clone"].to_vec()
            });
        }
    }
}

impl KindDef for VmKind {
    fn name(&self) -> &'static str {
        if self.template { "TemplateVM" } else { "VM" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.template {
            &["TVM", "TEMPLATE"]
        } else {
            &[]
        }
    }

    fn root(&self) -> &'static str {
        if self.template { "templatevm" } else { "vm" }
    }

    fn identity(&self) -> Identity {
        Identity::Guest {
            guest: crate::names::GuestType::Qemu,
            template: self.template,
        }
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired, Plane::Observed]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        if self.template {
            TEMPLATE_REFS
        } else {
            VM_REFS
        }
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec: VmSpec = cx.decode()?;
        super::vm_checks::validate(&spec, self.template, cx);
        Some(Spec::Vm(spec))
    }

    fn placement(&self, spec: &Spec) -> Placement {
        match spec {
            Spec::Vm(s) => Placement {
                nodes: super::placement::placement_nodes(s.node.as_deref(), &s.nodes),
                vmid: Some(s.vmid),
            },
            _ => Placement::default(),
        }
    }

    fn storages(&self, spec: &Spec) -> Vec<StorageUse> {
        let Spec::Vm(s) = spec else { return Vec::new() };
        let images = |storage: &str| StorageUse {
            storage: storage.to_owned(),
            content: "images",
        };
        let mut uses: Vec<StorageUse> = s.disks.iter().map(|d| images(&d.storage)).collect();
        if let Some(h) = &s.hardware {
            if let Some(storage) = h
                .cloud_init
                .as_ref()
                .filter(|c| c.enabled)
                .and_then(|c| c.storage.as_deref())
            {
                uses.push(images(storage));
            }
            if let Some(efi) = &h.efi_disk {
                uses.push(images(&efi.storage));
            }
            if let Some(storage) = h.tpm.as_ref().and_then(|t| t.storage.as_deref()) {
                uses.push(images(storage));
            }
        }
        uses.sort();
        uses.dedup();
        uses
    }

    fn placement_view<'s>(&self, spec: &'s Spec) -> PlacementView<'s> {
        match spec {
            Spec::Vm(s) => super::placement::placement_view(s.node.as_deref(), s.vmid),
            _ => PlacementView::default(),
        }
    }

    fn references(&self, spec: &Spec) -> Vec<Reference> {
        let mut refs = Vec::new();
        self.each_reference(spec, |v, path| {
            let mut r = Reference::structured(
                v.field,
                &v.target_kind,
                &v.target_name,
                &path(),
                v.same_node,
            );
            r.source = v.source;
            refs.push(r);
        });
        refs
    }

    fn reference_views<'s>(&self, spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        let mut views = Vec::new();
        self.each_reference(spec, |v, _| views.push(v));
        views
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<VmSpec>()
    }

    fn artifact_unreachable(
        &self,
        spec: &Spec,
        name: &str,
        pointer: &crate::pointer::Pointer,
    ) -> Option<crate::kind::terms::Unreachable> {
        let Spec::Vm(vm) = spec else { return None };
        super::reach::guest(
            &super::reach::GuestFacts::of_vm(vm, self.template),
            name,
            pointer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::passthrough::is_bdf;
    use super::super::vm_checks::disk_slot_valid;
    use super::*;

    fn ipc(ip: Option<&str>, gw: Option<&str>, ip6: Option<&str>, gw6: Option<&str>) -> IpConfig {
        IpConfig {
            nic: None,
            ip: ip.map(str::to_owned),
            gateway: gw.map(str::to_owned),
            ip6: ip6.map(str::to_owned),
            gateway6: gw6.map(str::to_owned),
        }
    }

    #[test]
    fn each_address_goes_under_the_key_of_its_family() {
        let pve = |c: IpConfig| c.to_pve();
        let v4 = ipc(Some("10.0.0.5/24"), Some("10.0.0.1"), None, None);
        assert_eq!(pve(v4).as_deref(), Some("ip=10.0.0.5/24,gw=10.0.0.1"));
        let v6 = ipc(Some("2001:db8::5/64"), Some("2001:db8::1"), None, None);
        assert_eq!(
            pve(v6).as_deref(),
            Some("ip6=2001:db8::5/64,gw6=2001:db8::1")
        );
        let both = ipc(
            Some("10.0.0.5/24"),
            Some("10.0.0.1"),
            Some("2001:db8::5/64"),
            Some("2001:db8::1"),
        );
        assert_eq!(
            pve(both).as_deref(),
            Some("ip=10.0.0.5/24,gw=10.0.0.1,ip6=2001:db8::5/64,gw6=2001:db8::1")
        );
        assert_eq!(
            pve(ipc(Some("dhcp"), None, None, None)).as_deref(),
            Some("ip=dhcp")
        );
        assert_eq!(
            pve(ipc(Some("auto"), None, None, None)).as_deref(),
            Some("ip6=auto")
        );
        assert_eq!(
            pve(ipc(None, None, Some("dhcp"), None)).as_deref(),
            Some("ip6=dhcp")
        );
        assert_eq!(
            pve(ipc(Some("dhcp"), None, Some("auto"), None)).as_deref(),
            Some("ip=dhcp,ip6=auto")
        );
        assert_eq!(pve(ipc(None, None, None, None)), None);
    }

    #[test]
    fn slots_and_addresses() {
        assert!(disk_slot_valid("scsi0") && disk_slot_valid("scsi30") && disk_slot_valid("ide3"));
        assert!(
            !disk_slot_valid("scsi31")
                && !disk_slot_valid("nvme0")
                && !disk_slot_valid("scsi01")
                && !disk_slot_valid("scsi")
        );
        assert!(is_bdf("0000:17:00") && is_bdf("01:00.0") && is_bdf("0000:73:00.7"));
        assert!(!is_bdf("17:00.8") && !is_bdf("0000:17") && !is_bdf("zz:00"));
    }
}
