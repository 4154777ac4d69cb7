//! Deterministic generator of large, valid ProxOps repositories for benchmarks.
//!
//! Std-only so benches and examples can include it with
//! `#[path = "../benches/support/scale.rs"] mod scale;`.
//!
//! Layout written under `root`:
//!
//! ```text
//! proxops.yaml                       bootstrap token credentials (no SOPS)
//! clusters/cNNN/config.yaml          pve.clusters.cNNN, nodes n1..n4
//! clusters/cNNN/resources.yaml       every manifest of that cluster
//! <kind>/cNNN/<name>.yaml            one manifest per file
//! ```
//!
//! Each cluster's manifests follow a repeating block of 20 entries:
//! ISO, CTTemplate, DiskImage, TemplateVM, 10 × VM, 5 × LXC, TemplateCT
//! (5 % / 5 % / 5 % / 5 % / 50 % / 25 % / 5 %). Because artifacts and
//! templates open every block, each reference points at an object earlier in
//! the same cluster. Artifacts are placed on all four nodes, so any node can
//! use them. A VM cloned from a TemplateVM sits on that template's node.
//! About one VM in ten carries a `proxops/depends-on` annotation naming an LXC
//! that appears earlier, so the dependency graph has no cycles.
//!
//! The output is the same on every run: no randomness, no timestamps, and
//! only ordered collections.

// Each includer (bench, example) uses a different subset of this module.
#![allow(dead_code)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleStats {
    /// Files written: `proxops.yaml`, two per cluster, and one per manifest.
    pub files: usize,
    /// Manifest documents written, over all clusters.
    pub manifests: usize,
    /// Total bytes written over all files.
    pub bytes: u64,
}

/// Node names of every generated cluster (the allowlist).
const NODES: [&str; 4] = ["n1", "n2", "n3", "n4"];

/// Public key line used in every cloud-init `ssh-keys` list (not a secret).
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICgk/uYqyivLPEvfGtyhotPwJ2+41CwEtBONZXjx6jCp bench@proxops";

/// Appends formatted text to `s` (writing into a `String` cannot fail).
fn put(s: &mut String, args: std::fmt::Arguments<'_>) {
    use std::fmt::Write as _;
    // `fmt::Write for String` only ever returns `Ok`.
    let _ = s.write_fmt(args);
}

/// The `k`-th element of `items`, cycling; `None` when `items` is empty.
fn pick<T>(items: &[T], k: usize) -> Option<&T> {
    match items.len() {
        0 => None,
        n => items.get(k % n),
    }
}

/// The `k`-th of `values`, cycling (`""` only if `values` is empty).
fn cycle(values: &[&'static str], k: usize) -> &'static str {
    pick(values, k).copied().unwrap_or_default()
}

/// Node for guest `k`, cycling over [`NODES`].
fn node_for(k: usize) -> &'static str {
    cycle(&NODES, k)
}

/// Writes a valid repository with `clusters` clusters of `per_cluster`
/// manifests each under `root`, and returns what it wrote.
///
/// `root` is created if missing. It must be empty, so that files left over
/// from an earlier, larger run cannot end up in the result; otherwise an
/// [`io::ErrorKind::AlreadyExists`] error is returned. With
/// `per_cluster == 0` each composition is `resources: []`.
pub fn generate(root: &Path, clusters: usize, per_cluster: usize) -> io::Result<ScaleStats> {
    fs::create_dir_all(root)?;
    if fs::read_dir(root)?.next().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} is not empty; refusing to generate into it",
                root.display()
            ),
        ));
    }
    let mut w = Writer {
        stats: ScaleStats::default(),
    };
    w.write(&root.join("proxops.yaml"), &proxops_yaml())?;
    for c in 0..clusters {
        let name = format!("c{c:03}");
        generate_cluster(&mut w, root, c, &name, per_cluster)?;
    }
    Ok(w.stats)
}

/// Counts what is written.
struct Writer {
    /// Totals so far.
    stats: ScaleStats,
}

impl Writer {
    /// Writes `text` to `path`, creating parent directories.
    fn write(&mut self, path: &Path, text: &str) -> io::Result<()> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, text)?;
        self.stats.files += 1;
        self.stats.bytes += text.len() as u64;
        Ok(())
    }
}

/// The seven manifest kinds, in block order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `kind: ISO`
    Iso,
    /// `kind: CTTemplate`
    CtTemplate,
    /// `kind: DiskImage`
    DiskImage,
    /// `kind: TemplateVM`
    TemplateVm,
    /// `kind: VM`
    Vm,
    /// `kind: LXC`
    Lxc,
    /// `kind: TemplateCT`
    TemplateCt,
}

impl Kind {
    /// Kind of the manifest at `index` in a cluster's list (block of 20).
    fn at(index: usize) -> Kind {
        match index % 20 {
            0 => Kind::Iso,
            1 => Kind::CtTemplate,
            2 => Kind::DiskImage,
            3 => Kind::TemplateVm,
            4..=13 => Kind::Vm,
            14..=18 => Kind::Lxc,
            _ => Kind::TemplateCt,
        }
    }

    /// Canonical `kind:` spelling.
    fn name(self) -> &'static str {
        match self {
            Kind::Iso => "ISO",
            Kind::CtTemplate => "CTTemplate",
            Kind::DiskImage => "DiskImage",
            Kind::TemplateVm => "TemplateVM",
            Kind::Vm => "VM",
            Kind::Lxc => "LXC",
            Kind::TemplateCt => "TemplateCT",
        }
    }

    /// Directory root of the kind.
    fn dir(self) -> &'static str {
        match self {
            Kind::Iso => "iso",
            Kind::CtTemplate => "ctt",
            Kind::DiskImage => "diskimage",
            Kind::TemplateVm => "templatevm",
            Kind::Vm => "vm",
            Kind::Lxc => "lxc",
            Kind::TemplateCt => "templatect",
        }
    }

    /// `metadata.name` prefix of the kind.
    fn prefix(self) -> &'static str {
        match self {
            Kind::Iso => "installer-iso",
            Kind::CtTemplate => "debian-ct",
            Kind::DiskImage => "cloud-img",
            Kind::TemplateVm => "tpl-vm",
            Kind::Vm => "vm",
            Kind::Lxc => "ct",
            Kind::TemplateCt => "tpl-ct",
        }
    }
}

/// Objects generated so far in one cluster (what later manifests may reference).
#[derive(Default)]
struct Seen {
    /// ISO names.
    isos: Vec<String>,
    /// CTTemplate names.
    ctts: Vec<String>,
    /// DiskImage names.
    images: Vec<String>,
    /// TemplateVM (name, node).
    tvms: Vec<(String, &'static str)>,
    /// LXC names.
    lxcs: Vec<String>,
    /// VMs generated so far.
    vms: usize,
}

/// Writes one cluster: its config, its manifests and its composition.
fn generate_cluster(
    w: &mut Writer,
    root: &Path,
    c: usize,
    cluster: &str,
    per_cluster: usize,
) -> io::Result<()> {
    let cdir = root.join("clusters").join(cluster);
    w.write(&cdir.join("config.yaml"), &config_yaml(cluster))?;

    let mut seen = Seen::default();
    let mut resources = String::new();
    put(
        &mut resources,
        format_args!(
            "# Composition of the generated cluster \"{cluster}\" ({per_cluster} manifests).\n"
        ),
    );
    if per_cluster == 0 {
        resources.push_str("resources: []\n");
    } else {
        resources.push_str("resources:\n");
    }
    for i in 0..per_cluster {
        let kind = Kind::at(i);
        let name = format!("{}-{i:04}", kind.prefix());
        let text = match kind {
            Kind::Iso => {
                let t = iso_yaml(cluster, &name);
                seen.isos.push(name.clone());
                t
            }
            Kind::CtTemplate => {
                let t = ctt_yaml(cluster, &name);
                seen.ctts.push(name.clone());
                t
            }
            Kind::DiskImage => {
                let t = diskimage_yaml(cluster, &name);
                seen.images.push(name.clone());
                t
            }
            Kind::TemplateVm => {
                let node = node_for(seen.tvms.len());
                let t = templatevm_yaml(cluster, c, i, &name, node, &seen);
                seen.tvms.push((name.clone(), node));
                t
            }
            Kind::Vm => {
                let t = vm_yaml(cluster, c, i, &name, &seen);
                seen.vms += 1;
                t
            }
            Kind::Lxc | Kind::TemplateCt => {
                let template = kind == Kind::TemplateCt;
                let t = lxc_yaml(cluster, c, i, &name, &seen, template).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{cluster}: no CTTemplate generated before {name}"),
                    )
                })?;
                if !template {
                    seen.lxcs.push(name.clone());
                }
                t
            }
        };
        let rel: PathBuf = [kind.dir(), cluster, &format!("{name}.yaml")]
            .iter()
            .collect();
        w.write(&root.join(&rel), &text)?;
        w.stats.manifests += 1;
        put(
            &mut resources,
            format_args!("  - ../../{}/{cluster}/{name}.yaml\n", kind.dir()),
        );
    }
    w.write(&cdir.join("resources.yaml"), &resources)
}

/// Process-wide configuration: bootstrap token credentials, so the generated
/// clusters need no SOPS file.
fn proxops_yaml() -> String {
    [
        "# Process-wide ProxOps settings of a generated benchmark repository.",
        "log:",
        "  level: info",
        "pve:",
        "  auth: token",
        "  user: proxops@pve",
        "  token-id: bench",
        "  token: 00000000-0000-4000-8000-000000000000",
        "git:",
        "  branch: main",
        "reconcile:",
        "  poll-interval: 30s",
        "  task-timeout: 30m",
        "  prune-budget: 3",
        "listen: 127.0.0.1:9494",
        "",
    ]
    .join("\n")
}

/// `clusters/<cluster>/config.yaml`.
fn config_yaml(cluster: &str) -> String {
    let mut s = format!(
        "# Cluster-local configuration of the generated cluster \"{cluster}\".\n\
         pve:\n  clusters:\n    {cluster}:\n      base-url: https://{cluster}.pve.example.invalid:8006\n      nodes:\n"
    );
    for n in NODES {
        put(&mut s, format_args!("        - {n}\n"));
    }
    s
}

/// Shared envelope head: leading comment, apiVersion, kind, metadata.name and labels.
fn head(s: &mut String, comment: &str, kind: Kind, name: &str, cluster: &str, role: &str) {
    put(
        s,
        format_args!(
            "# {comment}\napiVersion: proxops/v1alpha1\nkind: {}\nmetadata:\n  name: {name}\n  labels:\n    cluster: {cluster}\n    role: {role}\n",
            kind.name()
        ),
    );
}

/// `spec.nodes` listing every node (artifacts).
fn all_nodes(s: &mut String) {
    s.push_str("  nodes:\n");
    for n in NODES {
        put(s, format_args!("    - {n}\n"));
    }
}

/// An ISO artifact.
fn iso_yaml(cluster: &str, name: &str) -> String {
    let mut s = String::new();
    head(
        &mut s,
        "Generated ISO: an installer image kept on every node.",
        Kind::Iso,
        name,
        cluster,
        "installer",
    );
    s.push_str("spec:\n");
    all_nodes(&mut s);
    put(
        &mut s,
        format_args!(
            "  storage: local\n  filename: {name}-amd64-netinst.iso\n  url: https://mirror.example.invalid/debian-cd/13.2.0/amd64/iso-cd/{name}-amd64-netinst.iso\n"
        ),
    );
    s
}

/// A CTTemplate artifact.
fn ctt_yaml(cluster: &str, name: &str) -> String {
    let mut s = String::new();
    head(
        &mut s,
        "Generated CTTemplate: a container template kept on every node.",
        Kind::CtTemplate,
        name,
        cluster,
        "image",
    );
    s.push_str("spec:\n");
    all_nodes(&mut s);
    put(
        &mut s,
        format_args!(
            "  storage: local\n  filename: {name}_13.1-2_amd64.tar.zst\n  url: https://mirror.example.invalid/images/system/{name}_13.1-2_amd64.tar.zst\n"
        ),
    );
    s
}

/// A DiskImage artifact.
fn diskimage_yaml(cluster: &str, name: &str) -> String {
    let mut s = String::new();
    head(
        &mut s,
        "Generated DiskImage: a cloud image kept on every node.",
        Kind::DiskImage,
        name,
        cluster,
        "image",
    );
    s.push_str("spec:\n");
    all_nodes(&mut s);
    put(
        &mut s,
        format_args!(
            "  storage: local\n  filename: {name}-genericcloud-amd64.qcow2\n  url: https://mirror.example.invalid/images/cloud/trixie/{name}-genericcloud-amd64.qcow2\n"
        ),
    );
    s
}

/// Deterministic static address for guest `i` of cluster `c` (10.<c>.0.0/16, gateway .0.1).
fn address(c: usize, i: usize) -> (String, String) {
    let net = c % 256;
    let ip = format!("10.{net}.{}.{}/16", (i / 250) % 256, i % 250 + 2);
    (ip, format!("10.{net}.0.1"))
}

/// VLAN used by guest `i`.
fn vlan(i: usize) -> usize {
    10 + (i % 5) * 10
}

/// `cloud-init-data` block for guest `i`.
fn cloud_init_data(s: &mut String, c: usize, i: usize, cluster: &str) {
    let (ip, gw) = address(c, i);
    put(
        s,
        format_args!(
            "  cloud-init-data:\n    ci-user: debian\n    ssh-keys:\n      - \"{SSH_KEY}\"\n    nameservers:\n      - 10.{}.0.53\n      - 1.1.1.1\n    search-domains:\n      - {cluster}.example.invalid\n    ipconfigs:\n      - nic: 0\n        ip: {ip}\n        gateway: {gw}\n",
            c % 256
        ),
    );
}

/// A TemplateVM (UEFI, cloud-init, seeded from a DiskImage when one exists).
fn templatevm_yaml(
    cluster: &str,
    c: usize,
    i: usize,
    name: &str,
    node: &str,
    seen: &Seen,
) -> String {
    let mut s = String::new();
    head(
        &mut s,
        "Generated TemplateVM: a UEFI cloud-init template that VMs are cloned from.",
        Kind::TemplateVm,
        name,
        cluster,
        "template",
    );
    put(
        &mut s,
        format_args!(
            "spec:\n  node: {node}\n  vmid: {}\n  state: stopped\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n",
            100 + i
        ),
    );
    match seen.images.last() {
        Some(img) => put(&mut s, format_args!("      image: {img}\n")),
        None => s.push_str("      size: 16GiB\n"),
    }
    put(
        &mut s,
        format_args!(
            "      controller: virtio-scsi-single\n      iothread: true\n      discard: \"on\"\n  networks:\n    - model: virtio\n      bridge: vmbr0\n      vlan: {}\n  hardware:\n    machine: q35\n    bios: ovmf\n    serial0: socket\n    display: serial0\n    efi-disk:\n      storage: local-lvm\n      size: 4MiB\n      template: 4m\n      secure-boot: enabled\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n  options:\n    agent: true\n    boot-order:\n      - scsi0\n",
            vlan(i)
        ),
    );
    cloud_init_data(&mut s, c, i, cluster);
    s.push_str("  tags:\n    - bench\n    - template\n");
    s
}

/// A VM. Variants by VM ordinal: installer ISO, cloud image, clone, plain disk.
/// How a generated VM gets its operating system.
enum Boot<'a> {
    /// Blank disk plus an installer ISO on the CD-ROM.
    Installer(&'a str),
    /// Disk seeded from a DiskImage, configured by cloud-init.
    CloudImage(&'a str),
    /// Full clone of a TemplateVM (name, node).
    Clone(&'a str, &'static str),
    /// Blank UEFI disks, CD-ROM explicitly empty (no references).
    Plain,
}

/// A VM. Cycles through the [`Boot`] variants by VM ordinal, falling back to
/// [`Boot::Plain`] when the needed prerequisite does not exist yet.
fn vm_yaml(cluster: &str, c: usize, i: usize, name: &str, seen: &Seen) -> String {
    let ordinal = seen.vms;
    let boot = match ordinal % 4 {
        0 => pick(&seen.isos, ordinal).map_or(Boot::Plain, |iso| Boot::Installer(iso)),
        1 => pick(&seen.images, ordinal).map_or(Boot::Plain, |img| Boot::CloudImage(img)),
        2 => pick(&seen.tvms, ordinal).map_or(Boot::Plain, |(tpl, node)| Boot::Clone(tpl, node)),
        _ => Boot::Plain,
    };
    let node = match boot {
        Boot::Clone(_, tpl_node) => tpl_node,
        _ => node_for(i),
    };
    let comment = match boot {
        Boot::Installer(_) => "Generated VM: installed from an ISO attached to its CD-ROM.",
        Boot::CloudImage(_) => "Generated VM: boots a cloud-image disk configured by cloud-init.",
        Boot::Clone(..) => "Generated VM: full clone of a TemplateVM on the same node.",
        Boot::Plain => "Generated VM: plain UEFI VM with two blank disks and no CD-ROM.",
    };
    let mut s = String::new();
    head(&mut s, comment, Kind::Vm, name, cluster, "app");
    // About one VM in ten waits for an LXC generated earlier in the list.
    if ordinal % 10 == 9
        && let Some(target) = pick(&seen.lxcs, ordinal / 10)
    {
        put(
            &mut s,
            format_args!("  annotations:\n    proxops/depends-on: \"LXC:{target}\"\n"),
        );
    }
    let started = ordinal % 7 != 6;
    put(
        &mut s,
        format_args!(
            "spec:\n  node: {node}\n  vmid: {}\n  state: {}\n  memory: {}\n  cpu:\n    type: {}\n    cores: {}\n",
            100 + i,
            if started { "started" } else { "stopped" },
            cycle(&["1GiB", "2GiB", "4GiB", "512MiB", "8GiB"], ordinal),
            cycle(&["x86-64-v2-AES", "host", "host"], ordinal),
            1 + ordinal % 4
        ),
    );
    match boot {
        Boot::Installer(_) => s.push_str(
            "  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 32GiB\n      controller: virtio-scsi-single\n      iothread: true\n",
        ),
        Boot::CloudImage(img) => put(
            &mut s,
            format_args!(
                "  disks:\n    - storage: local-lvm\n      interface: scsi0\n      image: {img}\n      controller: virtio-scsi-single\n      iothread: true\n      discard: \"on\"\n      ssd: true\n"
            ),
        ),
        Boot::Clone(tpl, _) => put(&mut s, format_args!("  clone: {tpl}\n")),
        Boot::Plain => s.push_str(
            "  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 20GiB\n      controller: virtio-scsi-single\n    - storage: local-lvm\n      interface: scsi1\n      size: 100GiB\n      aio: io_uring\n",
        ),
    }
    put(
        &mut s,
        format_args!(
            "  networks:\n    - model: virtio\n      bridge: vmbr0\n      vlan: {}\n      firewall: {}\n",
            vlan(i),
            ordinal.is_multiple_of(2)
        ),
    );
    match boot {
        Boot::Installer(iso) => put(
            &mut s,
            format_args!("  hardware:\n    machine: q35\n    cdrom:\n      iso: {iso}\n      media: cdrom\n"),
        ),
        Boot::CloudImage(_) | Boot::Clone(..) => s.push_str(
            "  hardware:\n    serial0: socket\n    display: serial0\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n",
        ),
        Boot::Plain => s.push_str(
            "  hardware:\n    machine: q35\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      size: 4MiB\n      template: 4m\n    cdrom:\n      iso: none\n",
        ),
    }
    put(
        &mut s,
        format_args!(
            "  options:\n    onboot: {started}\n    agent: true\n    startup: \"order={}\"\n",
            10 + ordinal % 50
        ),
    );
    match boot {
        Boot::Installer(_) => s.push_str("    boot-order:\n      - scsi0\n      - ide2\n"),
        Boot::CloudImage(_) | Boot::Plain => s.push_str("    boot-order:\n      - scsi0\n"),
        Boot::Clone(..) => {}
    }
    if matches!(boot, Boot::CloudImage(_) | Boot::Clone(..)) {
        cloud_init_data(&mut s, c, i, cluster);
    }
    put(
        &mut s,
        format_args!(
            "  tags:\n    - bench\n    - tier-{}\n  pve-description: \"generated VM {name}\"\n",
            ordinal % 3
        ),
    );
    s
}

/// An LXC or (when `template` is set) a TemplateCT, bootstrapped from a
/// CTTemplate. Returns `None` when no CTTemplate exists yet (cannot happen
/// with the block order, which puts a CTTemplate before any container).
fn lxc_yaml(
    cluster: &str,
    c: usize,
    i: usize,
    name: &str,
    seen: &Seen,
    template: bool,
) -> Option<String> {
    let ordinal = seen.lxcs.len();
    let ctt = pick(&seen.ctts, ordinal)?;
    let node = node_for(i);
    let (kind, comment, role) = if template {
        (
            Kind::TemplateCt,
            "Generated TemplateCT: a container promoted to a template.",
            "template",
        )
    } else {
        (
            Kind::Lxc,
            "Generated LXC: a small service container.",
            "service",
        )
    };
    let mut s = String::new();
    head(&mut s, comment, kind, name, cluster, role);
    put(
        &mut s,
        format_args!(
            "spec:\n  node: {node}\n  vmid: {}\n  state: {}\n  template: {ctt}\n  memory: {}\n  swap: 512MiB\n  cpu:\n    cores: {}\n  root:\n    storage: local-lvm\n    size: 8GiB\n",
            100 + i,
            if template { "stopped" } else { "started" },
            cycle(&["512MiB", "1GiB", "2GiB"], ordinal),
            1 + ordinal % 2
        ),
    );
    if !template && ordinal.is_multiple_of(3) {
        s.push_str(
            "  mount-points:\n    - storage: local-lvm\n      size: 16GiB\n      mount-point: /srv/data\n      options:\n        backup: false\n        mount-options: noatime\n",
        );
    }
    let (ip, gw) = address(c, i);
    put(
        &mut s,
        format_args!(
            "  networks:\n    - bridge: vmbr0\n      iface: eth0\n      tag: {}\n      ip: {ip}\n      gw: {gw}\n      firewall: true\n  dns:\n    hostname: {name}\n    domain: {cluster}.example.invalid\n    nameservers:\n      - 10.{}.0.53\n  arch: amd64\n  options:\n    unprivileged: true\n",
            vlan(i),
            c % 256
        ),
    );
    if template {
        s.push_str("    nesting: true\n");
    } else {
        put(
            &mut s,
            format_args!(
                "    onboot: true\n    startup: \"order={}\"\n",
                1 + ordinal % 9
            ),
        );
    }
    put(&mut s, format_args!("  tags:\n    - bench\n    - {role}\n"));
    Some(s)
}
