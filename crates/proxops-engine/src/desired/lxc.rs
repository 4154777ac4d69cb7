//! `LXC` and `TemplateCT`: the wire mapping of SPEC.md section 8.3, with `features` merged into
//! the live value instead of overwritten, and interfaces named `eth<i>` by default as PVE does.

use super::context::{Context, DesiredError};
use super::guest::{Compare, DesiredGuest, flag, owned, pve_config, tags};
use super::keys;
use proxops_model::Resource;
use proxops_model::kinds::LxcSpec;
use proxops_model::kinds::lxc::{Arch, ConsoleMode, LxcOsType, MountOptions};
use proxops_pve::GuestType;
use proxops_pve::props::format_size;

pub(super) fn desired(
    cx: &Context<'_>,
    resource: &Resource,
    spec: &LxcSpec,
) -> Result<DesiredGuest, DesiredError> {
    let template = resource.kind == "TemplateCT";
    // Without a template the container can only be taken over: no `ostemplate`, and the
    // planner refuses to create it (`proxops::no_template`).
    let create_only = match &spec.template {
        Some(t) => vec![(
            "ostemplate".to_owned(),
            cx.volume(resource, "CTTemplate", t)?,
        )],
        None => Vec::new(),
    };
    let mut out = DesiredGuest::empty(
        GuestType::Lxc,
        template,
        (spec.node.as_deref(), &spec.nodes),
        spec.vmid,
        spec.state,
        spec.ha.as_ref(),
    );
    out.update_policy = spec.update_policy.clone().filter(|p| p.snapshot);
    out.create_only = create_only;
    let o = &mut out.owned;
    let dns = spec.dns.clone().unwrap_or_default();
    let hostname = dns
        .hostname
        .clone()
        .unwrap_or_else(|| resource.name().to_owned());
    keys::identity(
        o,
        "hostname",
        hostname,
        spec.pve_description.as_deref(),
        &spec.memory,
        false,
    );
    if let Some(mib) = spec.swap.as_ref().and_then(|s| s.whole_mib()) {
        o.push(owned("swap", mib.to_string(), Compare::Canonical, false));
    }
    if let Some(cores) = spec.cpu.cores {
        o.push(owned("cores", cores.to_string(), Compare::Canonical, false));
    }
    if let Some(units) = spec.cpu.units {
        o.push(owned(
            "cpuunits",
            units.to_string(),
            Compare::Canonical,
            false,
        ));
    }
    if let Some(limit) = spec.cpu.limit {
        let v = if limit.fract() == 0.0 {
            format!("{}", limit as i64)
        } else {
            limit.to_string()
        };
        o.push(owned("cpulimit", v, Compare::Number, false));
    }
    if let Some(os) = spec.ostype {
        o.push(owned("ostype", ostype(os), Compare::Canonical, true));
    }
    for (i, dev) in spec.devices.iter().enumerate() {
        let slot = dev.slot.clone().unwrap_or_else(|| format!("dev{i}"));
        let mut value = dev.path.clone();
        if let Some(u) = dev.uid {
            value.push_str(&format!(",uid={u}"));
        }
        if let Some(g) = dev.gid {
            value.push_str(&format!(",gid={g}"));
        }
        if let Some(m) = &dev.mode {
            value.push_str(&format!(",mode={m}"));
        }
        if let Some(b) = dev.deny_write {
            value.push_str(&format!(",deny-write={}", flag(b)));
        }
        o.push(owned(slot, value, Compare::SubKeys, true));
    }
    o.push(tags(cx, resource, &spec.tags));
    // A named volume is the slot's own: compared by id and grown by `size` (diff.rs `volume`).
    let volume_or_new = |storage: &str,
                         size: &proxops_model::quantity::Quantity,
                         volume: &Option<String>| match volume {
        Some(v) => format!("{v},size={}", format_size(size.bytes())),
        None => format!("{storage}:{}", size.gib_string()),
    };
    let mut rootfs = volume_or_new(&spec.root.storage, &spec.root.size, &spec.root.volume);
    if let Some(opts) = &spec.root.options {
        mount_options(&mut rootfs, opts);
    }
    o.push(owned("rootfs", rootfs, Compare::Disk, true));
    for (i, mp) in spec.mount_points.iter().enumerate() {
        let slot = mp.slot.clone().unwrap_or_else(|| format!("mp{i}"));
        let mut value = volume_or_new(&mp.storage, &mp.size, &mp.volume);
        if let Some(path) = &mp.mount_point {
            value.push_str(&format!(",mp={path}"));
        }
        if let Some(opts) = &mp.options {
            mount_options(&mut value, opts);
        }
        o.push(owned(slot, value, Compare::Disk, true));
    }
    let first_bind = spec.mount_points.len();
    for (i, bind) in spec.bind_mounts.iter().enumerate() {
        let slot = bind
            .slot
            .clone()
            .unwrap_or_else(|| format!("mp{}", first_bind + i));
        let mut value = format!("{},mp={}", bind.host_path, bind.mount_point);
        if let Some(b) = bind.read_only {
            value.push_str(&format!(",ro={}", flag(b)));
        }
        if let Some(b) = bind.shared {
            value.push_str(&format!(",shared={}", flag(b)));
        }
        o.push(owned(slot, value, Compare::SubKeys, true));
    }
    for (i, nic) in spec.networks.iter().enumerate() {
        let slot = nic.slot.clone().unwrap_or_else(|| format!("net{i}"));
        let name = nic.iface.clone().unwrap_or_else(|| format!("eth{i}"));
        let mut value = format!("name={name},bridge={}", nic.bridge);
        if let Some(t) = &nic.net_type {
            value.push_str(&format!(",type={t}"));
        }
        if let Some(tag) = nic.tag.filter(|t| *t > 0) {
            value.push_str(&format!(",tag={tag}"));
        }
        if let Some(mac) = &nic.hwaddr {
            value.push_str(&format!(",hwaddr={}", mac.to_ascii_uppercase()));
        }
        if let Some(rate) = nic.rate_limit.filter(|r| *r > 0) {
            value.push_str(&format!(",rate={rate}"));
        }
        if let Some(b) = nic.firewall {
            value.push_str(&format!(",firewall={}", flag(b)));
        }
        if let Some(ip) = &nic.ip {
            value.push_str(&format!(",ip={ip}"));
        }
        if let Some(gw) = &nic.gw {
            value.push_str(&format!(",gw={gw}"));
        }
        if let Some(ip6) = &nic.ip6 {
            value.push_str(&format!(",ip6={ip6}"));
        }
        if let Some(gw6) = &nic.gw6 {
            value.push_str(&format!(",gw6={gw6}"));
        }
        if let Some(mtu) = nic.mtu {
            value.push_str(&format!(",mtu={mtu}"));
        }
        if let Some(b) = nic.host_managed {
            value.push_str(&format!(",host-managed={}", flag(b)));
        }
        o.push(owned(slot, value, Compare::SubKeys, false));
    }
    keys::nameservers(o, &dns.nameservers);
    if let Some(domain) = &dns.domain {
        o.push(owned(
            "searchdomain",
            domain.clone(),
            Compare::WordSet,
            false,
        ));
    }
    if let Some(arch) = spec.arch {
        let arch = match arch {
            Arch::Amd64 => "amd64",
            Arch::I386 => "i386",
            Arch::Arm64 => "arm64",
            Arch::Armhf => "armhf",
            Arch::Riscv64 => "riscv64",
        };
        o.push(owned("arch", arch, Compare::Canonical, true));
    }
    // Unprivileged unless the manifest says otherwise, sent explicitly: PVE's own default
    // differs by version (pve-container `src/PVE/API2/LXC.pm` `create_vm` defaults to 1 since
    // 6.0.6, to the schema's 0 before) and PVE cannot change it on an existing container.
    let unprivileged = spec
        .options
        .as_ref()
        .and_then(|opts| opts.unprivileged)
        .unwrap_or(true);
    o.push(owned(
        "unprivileged",
        flag(unprivileged),
        Compare::Fixed,
        false,
    ));
    if let Some(opts) = &spec.options {
        keys::flags(
            o,
            &[
                ("protection", opts.protection),
                ("onboot", opts.onboot),
                ("console", opts.console),
            ],
        );
        keys::startup_and_hookscript(o, opts.startup.as_ref(), opts.hookscript.as_ref());
        let mut features: Vec<String> = [
            ("nesting", opts.nesting),
            ("keyctl", opts.keyctl),
            ("fuse", opts.fuse),
            ("mknod", opts.mknod),
            ("force_rw_sys", opts.force_rw_sys),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|b| format!("{k}={}", flag(b))))
        .collect();
        if !opts.mount.is_empty() {
            features.push(format!("mount={}", opts.mount.join(";")));
        }
        if !features.is_empty() {
            o.push(owned(
                "features",
                features.join(","),
                Compare::SubKeys,
                true,
            ));
        }
        if let Some(n) = opts.ttys {
            o.push(owned("tty", n.to_string(), Compare::Canonical, true));
        }
        if let Some(m) = opts.cmode {
            let m = match m {
                ConsoleMode::Tty => "tty",
                ConsoleMode::Console => "console",
                ConsoleMode::Shell => "shell",
            };
            o.push(owned("cmode", m, Compare::Canonical, true));
        }
        if let Some(tz) = &opts.timezone {
            o.push(owned("timezone", tz.clone(), Compare::Canonical, true));
        }
        if let Some(e) = &opts.entrypoint {
            o.push(owned("entrypoint", e.clone(), Compare::Canonical, true));
        }
    }
    o.extend(pve_config(GuestType::Lxc, &spec.pve_config));
    Ok(out)
}

fn ostype(os: LxcOsType) -> &'static str {
    match os {
        LxcOsType::Debian => "debian",
        LxcOsType::Devuan => "devuan",
        LxcOsType::Ubuntu => "ubuntu",
        LxcOsType::Centos => "centos",
        LxcOsType::Fedora => "fedora",
        LxcOsType::Opensuse => "opensuse",
        LxcOsType::Archlinux => "archlinux",
        LxcOsType::Alpine => "alpine",
        LxcOsType::Gentoo => "gentoo",
        LxcOsType::Nixos => "nixos",
        LxcOsType::Unmanaged => "unmanaged",
    }
}

/// The mount options of a volume, appended to its value.
fn mount_options(value: &mut String, opts: &MountOptions) {
    for (key, b) in [
        ("ro", opts.read_only),
        ("backup", opts.backup),
        ("acl", opts.acl),
        ("quota", opts.quota),
        ("shared", opts.shared),
        ("replicate", opts.replicate),
    ] {
        if let Some(b) = b {
            value.push_str(&format!(",{key}={}", flag(b)));
        }
    }
    if let Some(m) = &opts.mount_options {
        value.push_str(&format!(",mountoptions={m}"));
    }
}
