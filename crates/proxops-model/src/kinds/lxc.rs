//! `kind: LXC` and `kind: TemplateCT`: containers (SPEC.md sections 8.3 and 8.4): their checks
//! and kind definition. The spec types are defined in `lxc_spec` (below `Spec`) and re-exported
//! here.

use super::common::{self, check_name_ref};
pub use super::lxc_spec::{
    Arch, BindMount, ConsoleMode, Dns, LxcCpu, LxcDevice, LxcNetwork, LxcOptions, LxcOsType,
    LxcSpec, MountOptions, MountPoint, RootFs,
};
use crate::Code;
use crate::kind::context::SpecContext;
use crate::kind::def::KindDef;
use crate::kind::terms::{
    Identity, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceSource,
    ReferenceView, StorageUse,
};
use crate::manifest::spec::Spec;
use crate::names::GuestType;
use crate::yaml::PathSeg;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// Host paths a bind mount may not expose wholesale.
const PROTECTED_HOST_PATHS: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var",
];

fn mp_slot_valid(slot: &str) -> bool {
    slot.strip_prefix("mp")
        .filter(|n| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && (n.len() == 1 || !n.starts_with('0'))
        })
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n <= 255)
}

fn validate(spec: &LxcSpec, template: bool, cx: &SpecContext<'_>) {
    common::check_guest_basics(
        cx,
        (spec.node.as_deref(), &spec.nodes),
        spec.vmid,
        ("container", template.then_some("TemplateCT")),
        (spec.state, spec.ha.as_ref()),
        &spec.memory,
    );
    super::update_policy::check(
        cx,
        spec.update_policy.as_ref(),
        ("LXC", template.then_some("TemplateCT")),
        false,
        spec.state,
    );
    if let Some(t) = &spec.template {
        check_name_ref(cx, t, &path!["template"], "CTTemplate");
    }
    if let Some(swap) = &spec.swap {
        common::check_memory(cx, swap, &path!["swap"], "swap", false);
    }
    if spec.cpu.cores == Some(0) {
        cx.invalid(
            &path!["cpu", "cores"],
            "`cpu.cores` must be at least 1",
            None,
        );
    }
    common::check_storage_id(cx, &spec.root.storage, &path!["root", "storage"]);
    if let Some(volume) = &spec.root.volume {
        common::check_existing_volume(cx, volume, &spec.root.storage, &path!["root", "volume"]);
    }
    if spec.root.size.bytes() == 0 {
        cx.invalid(
            &path!["root", "size"],
            "the root filesystem size must be greater than zero",
            None,
        );
    }
    let mut slots = BTreeSet::new();
    for (i, mp) in spec.mount_points.iter().enumerate() {
        common::check_storage_id(cx, &mp.storage, &path!["mount-points", i, "storage"]);
        if let Some(volume) = &mp.volume {
            let at = path!["mount-points", i, "volume"];
            common::check_existing_volume(cx, volume, &mp.storage, &at);
        }
        if mp.size.bytes() == 0 {
            cx.invalid(
                &path!["mount-points", i, "size"],
                "a mount point size must be greater than zero",
                None,
            );
        }
        match &mp.mount_point {
            Some(p) if !p.starts_with('/') => cx.invalid(
                &path!["mount-points", i, "mount-point"],
                format!("`{p}` is not an absolute path"),
                None,
            ),
            Some(_) => {}
            // pve-container's `mp` property of a mount point is not optional
            // (`PVE/LXC/Config.pm`, `$rootfs_desc` / `$mp_desc`): PVE refuses `mpN` without it.
            None => cx.report_missing(
                &path!["mount-points", i, "mount-point"],
                "a mount point needs `mount-point`, the path inside the container",
            ),
        }
        let slot = mp.slot.clone().unwrap_or_else(|| format!("mp{i}"));
        check_mp_slot(cx, &mut slots, &slot, &path!["mount-points", i, "slot"]);
    }
    for (i, bind) in spec.bind_mounts.iter().enumerate() {
        let host = bind.host_path.trim_end_matches('/');
        if !bind.host_path.starts_with('/') {
            cx.invalid(
                &path!["bind-mounts", i, "host-path"],
                format!("`{}` is not an absolute path", bind.host_path),
                None,
            );
        } else if PROTECTED_HOST_PATHS.contains(&if host.is_empty() { "/" } else { host }) {
            cx.invalid(
                &path!["bind-mounts", i, "host-path"],
                format!(
                    "bind-mounting the host's `{}` into a container is refused",
                    bind.host_path
                ),
                Some("bind a dedicated directory such as `/srv/data/<name>` or `/mnt/...`".into()),
            );
        }
        if !bind.mount_point.starts_with('/') {
            cx.invalid(
                &path!["bind-mounts", i, "mount-point"],
                format!("`{}` is not an absolute path", bind.mount_point),
                None,
            );
        }
        let slot = bind
            .slot
            .clone()
            .unwrap_or_else(|| format!("mp{}", spec.mount_points.len() + i));
        check_mp_slot(cx, &mut slots, &slot, &path!["bind-mounts", i, "slot"]);
    }
    let mut nets = BTreeSet::new();
    for (i, net) in spec.networks.iter().enumerate() {
        let kind = net.net_type.as_deref();
        common::check_nic(
            cx,
            i,
            &common::Nic {
                slot: net.slot.as_deref(),
                bridge: &net.bridge,
                vlan: (net.tag, "tag"),
                mac: (net.hwaddr.as_deref(), "hwaddr"),
                kind: (
                    kind,
                    "type",
                    common::pve_lxc_net_types(),
                    "container interface type",
                ),
            },
            &mut nets,
        );
        check_container_ips(cx, net, &path!["networks", i]);
    }
    for (i, tag) in spec.tags.iter().enumerate() {
        common::check_tag(cx, tag, &path!["tags", i]);
    }
    validate_more(spec, cx);
    common::check_retired_extra(cx, GuestType::Lxc, &spec.extra);
    // pve-container's API takes only its config schema (`additionalProperties => 0`): raw
    // `lxc.*` keys live in `/etc/pve/lxc/<vmid>.conf` alone, for root@pam as for anyone.
    crate::pve_config::check_pve_config(
        cx,
        GuestType::Lxc,
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

/// The checks of the options beyond the basics: CPU limit, devices, features, time zone,
/// hook script, entry point, MTU, mount options.
fn validate_more(spec: &LxcSpec, cx: &SpecContext<'_>) {
    if let Some(l) = spec.cpu.limit
        && !(0.0..=8192.0).contains(&l)
    {
        cx.invalid(
            &path!["cpu", "limit"],
            format!("`cpu.limit` {l} is outside PVE's 0-8192 (host CPUs; 0 is no limit)"),
            None,
        );
    }
    if let Some(u) = spec.cpu.units
        && u > 500_000
    {
        cx.invalid(
            &path!["cpu", "units"],
            format!("`cpu.units` {u} is outside PVE's 0-500000"),
            None,
        );
    }
    if spec
        .root
        .options
        .as_ref()
        .is_some_and(|o| o.backup.is_some())
    {
        cx.invalid(
            &path!["root", "options", "backup"],
            "the root filesystem is always backed up: PVE has no `backup` for `rootfs`",
            None,
        );
    }
    let root_mount = spec
        .root
        .options
        .as_ref()
        .and_then(|o| o.mount_options.as_deref());
    if let Some(m) = root_mount
        && crate::pve_config::check_sub_value(GuestType::Lxc, "rootfs", "mountoptions", m).is_err()
    {
        cx.invalid(
            &path!["root", "options", "mount-options"],
            format!("`{m}` is not a list of mount options PVE allows"),
            Some(
                "`discard`, `lazytime`, `noatime`, `nodev`, `noexec`, `nosuid`, separated by `;`"
                    .into(),
            ),
        );
    }
    let mut slots = BTreeSet::new();
    for (i, dev) in spec.devices.iter().enumerate() {
        let slot = dev.slot.clone().unwrap_or_else(|| format!("dev{i}"));
        if !super::basics::slot_in(&slot, "dev", 255) {
            cx.invalid(
                &path!["devices", i, "slot"],
                format!("`{slot}` is not a device slot (dev0-dev255)"),
                None,
            );
        } else if !slots.insert(slot.clone()) {
            cx.invalid(
                &path!["devices", i, "slot"],
                format!("device slot `{slot}` is used twice"),
                None,
            );
        }
        if !dev.path.starts_with("/dev/") || dev.path.contains(',') {
            cx.invalid(
                &path!["devices", i, "path"],
                format!("`{}` is not a device node under /dev", dev.path),
                None,
            );
        }
        if let Some(m) = &dev.mode
            && !(m.len() == 4
                && m.starts_with('0')
                && m.bytes().all(|b| (b'0'..=b'7').contains(&b)))
        {
            cx.invalid(
                &path!["devices", i, "mode"],
                format!("`{m}` is not an access mode"),
                Some("four octal digits starting with 0, e.g. `0660`".into()),
            );
        }
    }
    for (i, net) in spec.networks.iter().enumerate() {
        if let Some(mtu) = net.mtu
            && !(64..=65_535).contains(&mtu)
        {
            cx.invalid(
                &path!["networks", i, "mtu"],
                format!("MTU {mtu} is outside 64-65535"),
                None,
            );
        }
        // pve-container PVE/LXC/Config.pm `update_pct_config` refuses it:
        // "SLAAC is not supported for host-managed network configuration".
        if net.host_managed == Some(true) && net.ip6.as_deref() == Some("auto") {
            cx.invalid(
                &path!["networks", i, "ip6"],
                "PVE does not support SLAAC (`ip6: auto`) on a host-managed interface",
                Some("use a static `ip6`, `dhcp`, or drop `host-managed`".into()),
            );
        }
    }
    for (i, mp) in spec.mount_points.iter().enumerate() {
        if let Some(m) = mp.options.as_ref().and_then(|o| o.mount_options.as_deref())
            && crate::pve_config::check_sub_value(GuestType::Lxc, "mp0", "mountoptions", m).is_err()
        {
            cx.invalid(
                &path!["mount-points", i, "options", "mount-options"],
                format!("`{m}` is not a list of mount options PVE allows"),
                Some("`discard`, `lazytime`, `noatime`, `nodev`, `noexec`, `nosuid`, separated by `;`".into()),
            );
        }
    }
    let Some(opts) = &spec.options else { return };
    for (i, fs) in opts.mount.iter().enumerate() {
        if fs.is_empty() || !fs.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            cx.invalid(
                &path!["options", "mount", i],
                format!("`{fs}` is not a filesystem type"),
                Some("e.g. `nfs` or `cifs`".into()),
            );
        }
    }
    if let Some(tz) = &opts.timezone
        && (tz.is_empty() || tz.contains([',', ' ', '\n']) || tz.contains(".."))
    {
        cx.invalid(
            &path!["options", "timezone"],
            format!("`{tz}` is not a time zone"),
            Some("`host`, or a zone name such as `Europe/Berlin`".into()),
        );
    }
    if let Some(n) = opts.ttys
        && n > 6
    {
        cx.invalid(
            &path!["options", "ttys"],
            format!("{n} TTYs is more than PVE's 6"),
            None,
        );
    }
    if let Some(h) = &opts.hookscript
        && crate::pve_config::check_format("pve-volume-id", h).is_err()
    {
        cx.invalid(
            &path!["options", "hookscript"],
            format!("`{h}` is not a volume id"),
            Some("a snippet volume such as `local:snippets/hook.pl`".into()),
        );
    }
    if let Some(e) = &opts.entrypoint
        && (e.trim().is_empty() || e.chars().any(|c| c.is_control()))
    {
        cx.invalid(
            &path!["options", "entrypoint"],
            "the entry point must be a command line without control characters",
            None,
        );
    }
}

/// A container NIC's addresses as pve-container's schema has them (`PVE/LXC/Config.pm`, the
/// net format: `ip` is `pve-ipv4-config`, `ip6` is `pve-ipv6-config`), with a gateway only
/// beside a static address of its family.
fn check_container_ips(cx: &SpecContext<'_>, net: &LxcNetwork, base: &[PathSeg]) {
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
    let v4 = |t: &str| {
        common::is_cidr(t)
            && t.split('/')
                .next()
                .is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok())
    };
    let v6 = |t: &str| common::is_cidr(t) && !v4(t);
    if let Some(ip) = &net.ip {
        if v6(ip) {
            family(
                &here("ip"),
                format!("`ip` is IPv4, `{ip}` is IPv6"),
                "put an IPv6 address in `ip6`",
            );
        } else if !v4(ip) && !matches!(ip.as_str(), "dhcp" | "manual") {
            cx.invalid(
                &here("ip"),
                format!("`{ip}` is not an IPv4 address in CIDR notation, `dhcp` or `manual`"),
                None,
            );
        }
    }
    if let Some(ip6) = &net.ip6 {
        if v4(ip6) {
            family(
                &here("ip6"),
                format!("`ip6` is IPv6, `{ip6}` is IPv4"),
                "put an IPv4 address in `ip`",
            );
        } else if !v6(ip6) && !matches!(ip6.as_str(), "auto" | "dhcp" | "manual") {
            cx.invalid(
                &here("ip6"),
                format!(
                    "`{ip6}` is not an IPv6 address in CIDR notation, `auto`, `dhcp` or `manual`"
                ),
                None,
            );
        }
    }
    for (key, address, want_v6) in [("gw", &net.ip, false), ("gw6", &net.ip6, true)] {
        let gw = if want_v6 { &net.gw6 } else { &net.gw };
        let Some(gw) = gw else { continue };
        match gw.parse::<std::net::IpAddr>() {
            Err(_) => cx.invalid(&here(key), format!("`{gw}` is not an IP address"), None),
            Ok(a) if a.is_ipv6() != want_v6 => family(
                &here(key),
                format!(
                    "`{key}` is {}, `{gw}` is not",
                    if want_v6 { "IPv6" } else { "IPv4" }
                ),
                if want_v6 {
                    "put an IPv4 gateway in `gw`"
                } else {
                    "put an IPv6 gateway in `gw6`"
                },
            ),
            Ok(_) if !address.as_deref().is_some_and(common::is_cidr) => cx.invalid(
                &here(key),
                format!(
                    "a gateway needs a static address of its family beside it (`{}`)",
                    if want_v6 { "ip6" } else { "ip" }
                ),
                None,
            ),
            Ok(_) => {}
        }
    }
}

fn check_mp_slot(
    cx: &SpecContext<'_>,
    slots: &mut BTreeSet<String>,
    slot: &str,
    at: &[crate::yaml::PathSeg],
) {
    if !mp_slot_valid(slot) {
        cx.invalid(
            at,
            format!("`{slot}` is not a mount point slot (mp0-mp255)"),
            None,
        );
    } else if !slots.insert(slot.to_owned()) {
        cx.invalid(at, format!("mount point slot `{slot}` is used twice"), None);
    }
}

/// The `LXC` and `TemplateCT` kind definitions.
pub struct LxcKind {
    template: bool,
}

impl LxcKind {
    /// `kind: LXC`.
    pub const LXC: LxcKind = LxcKind { template: false };
    /// `kind: TemplateCT`.
    pub const TEMPLATE: LxcKind = LxcKind { template: true };
}

const REFS: &[ReferenceField] = &[ReferenceField {
    field: "template",
    target: "CTTemplate",
}];

impl KindDef for LxcKind {
    fn name(&self) -> &'static str {
        if self.template { "TemplateCT" } else { "LXC" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.template { &["TCT"] } else { &[] }
    }

    fn root(&self) -> &'static str {
        if self.template { "templatect" } else { "lxc" }
    }

    fn identity(&self) -> Identity {
        Identity::Guest {
            guest: GuestType::Lxc,
            template: self.template,
        }
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired, Plane::Observed]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        REFS
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec: LxcSpec = cx.decode()?;
        validate(&spec, self.template, cx);
        Some(Spec::Lxc(spec))
    }

    fn placement(&self, spec: &Spec) -> Placement {
        match spec {
            Spec::Lxc(s) => Placement {
                nodes: super::placement::placement_nodes(s.node.as_deref(), &s.nodes),
                vmid: Some(s.vmid),
            },
            _ => Placement::default(),
        }
    }

    fn references(&self, spec: &Spec) -> Vec<Reference> {
        match spec {
            Spec::Lxc(s) => s
                .template
                .iter()
                .map(|t| {
                    Reference::structured("template", "CTTemplate", t, &path!["template"], true)
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn storages(&self, spec: &Spec) -> Vec<StorageUse> {
        let Spec::Lxc(s) = spec else {
            return Vec::new();
        };
        let mut uses: Vec<StorageUse> = std::iter::once(&s.root.storage)
            .chain(s.mount_points.iter().map(|m| &m.storage))
            .map(|storage| StorageUse {
                storage: storage.clone(),
                content: "rootdir",
            })
            .collect();
        uses.sort();
        uses.dedup();
        uses
    }

    fn placement_view<'s>(&self, spec: &'s Spec) -> PlacementView<'s> {
        match spec {
            Spec::Lxc(s) => super::placement::placement_view(s.node.as_deref(), s.vmid),
            _ => PlacementView::default(),
        }
    }

    fn reference_views<'s>(&self, spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        match spec {
            Spec::Lxc(s) => s
                .template
                .iter()
                .map(|t| ReferenceView {
                    field: "template",
                    target_kind: Cow::Borrowed("CTTemplate"),
                    target_name: Cow::Borrowed(t.as_str()),
                    same_node: true,
                    source: ReferenceSource::Structured,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<LxcSpec>()
    }

    fn artifact_unreachable(
        &self,
        spec: &Spec,
        name: &str,
        pointer: &crate::pointer::Pointer,
    ) -> Option<crate::kind::terms::Unreachable> {
        let Spec::Lxc(ct) = spec else { return None };
        super::reach::guest(
            &super::reach::GuestFacts::of_lxc(ct, self.template),
            name,
            pointer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_says_unprivileged_defaults_to_true() {
        let schema = serde_json::to_value(schemars::schema_for!(LxcOptions)).unwrap_or_default();
        assert_eq!(
            schema["properties"]["unprivileged"]["default"],
            serde_json::Value::Bool(true),
            "{schema}"
        );
    }
}
