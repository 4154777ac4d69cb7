//! The typed guest options of issue 15: what each accepts and what it refuses, with the field
//! the error points at.

use crate::support::*;
use proxops_model::kinds::vm::{Balloon, Hugepages};
use proxops_model::{Code, Spec};

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("dev", &["pve01"]);
    repo.listing("dev", files);
    repo
}

fn vm_with(lines: &[&str]) -> proxops_model::Repository {
    cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), lines))]).load()
}

fn lxc_with(lines: &[&str]) -> proxops_model::Repository {
    cluster_of(&[
        (
            "ctt/dev/tpl.yaml",
            artifact("CTTemplate", "tpl", &["pve01"]),
        ),
        (
            "lxc/dev/ct.yaml",
            with_spec(&lxc("ct", "pve01", 200, "tpl"), lines),
        ),
    ])
    .load()
}

#[track_caller]
fn accepted(repo: &proxops_model::Repository) {
    assert!(errors(repo).is_empty(), "{}", dump(repo));
}

#[test]
fn vm_options_that_pve_takes_are_accepted() {
    let loaded = vm_with(&[
        "balloon: 512MiB",
        "ostype: l26",
        "hardware:",
        "  machine: pc-q35-8.1",
        "  viommu: intel",
        "  display: qxl",
        "  display-memory: 64MiB",
        "  display-clipboard: vnc",
        "  scsi-controller: virtio-scsi-single",
        "  numa: true",
        "  numa-nodes:",
        "    - cpus: '0'",
        "      memory: 512MiB",
        "      hostnodes: '0'",
        "      policy: bind",
        "    - cpus: 1-1",
        "      memory: 512MiB",
        "  hugepages: 2MiB",
        "  keep-hugepages: true",
        "  serial1: socket",
        "  serial3: /dev/ttyS1",
        "  audio:",
        "    device: AC97",
        "  rng:",
        "    source: /dev/hwrng",
        "    max-bytes: 1024",
        "  cdroms:",
        "    - slot: sata1",
        "      volume: local:iso/virtio-win.iso",
        "  pci-devices:",
        "    - slot: hostpci0",
        "      device: 0000:01:00",
        "      x-vga: true",
        "      rombar: false",
        "      romfile: vbios.bin",
        "      vendor-id: '0x10de'",
        "options:",
        "  agent: true",
        "  agent-fstrim-cloned-disks: true",
        "  agent-type: isa",
        "  localtime: true",
        "  hookscript: local:snippets/hook.pl",
        "cloud-init-data:",
        "  ci-type: nocloud",
        "  ci-upgrade: false",
        "  ci-custom:",
        "    user: local:snippets/user.yaml",
    ]);
    accepted(&loaded);
    let cluster = loaded.cluster("dev").unwrap();
    let Spec::Vm(spec) = &cluster.resources[0].spec else {
        panic!("not a VM")
    };
    assert_eq!(
        spec.balloon.as_ref().map(|b| matches!(b, Balloon::Min(_))),
        Some(true)
    );
    let hw = spec.hardware.as_ref().unwrap();
    assert_eq!(hw.hugepages, Some(Hugepages::Size2MiB));
    assert_eq!(hw.machine.as_ref().map(|m| m.to_pve()), Some("pc-q35-8.1"));
    // `off` and `false` both remove the balloon device.
    for off in ["balloon: off", "balloon: false"] {
        let loaded = vm_with(&[off]);
        accepted(&loaded);
    }
    for machine in [
        "i440fx",
        "q35",
        "pc-i440fx-9.0",
        "pc-q35-9.2+pve1",
        "virt",
        "pc",
    ] {
        accepted(&vm_with(&["hardware:", &format!("  machine: {machine}")]));
    }
}

#[test]
fn vm_disk_cpu_and_nic_options() {
    let loaded = vm_with(&[
        "cpu:",
        "  type: host",
        "  cores: 2",
        "  flags: [+aes, -pcid, +nested-virt]",
        "  units: 100",
        "  limit: 0.5",
        "  vcpus: 2",
        "  affinity: 0-3,8",
        "  phys-bits: host",
        "  hv-vendor-id: proxmox",
        "networks:",
        "  - bridge: vmbr0",
        "    mtu: 9000",
        "    queues: 4",
        "    link-down: true",
    ]);
    // `cpu:` is given twice (the base manifest has one): replace instead.
    assert!(!errors(&loaded).is_empty());
    let text = vm("a", "pve01", 142)
        .replace(
            "    cores: 1\n",
            "    cores: 2\n    flags: [+aes, -pcid]\n    units: 100\n    limit: 0.5\n    vcpus: 2\n    affinity: 0-3,8\n    phys-bits: '40'\n",
        )
        .replace(
            "      size: 8GiB\n",
            "      size: 8GiB\n      cache: none\n      backup: false\n      replicate: false\n      read-only: true\n      serial: abc\n      limits:\n        mbps: 50.5\n        iops-rd-max: 900\n",
        );
    let loaded = cluster_of(&[("vm/dev/a.yaml", text)]).load();
    accepted(&loaded);
}

#[test]
fn vm_options_that_pve_refuses_are_errors_at_their_field() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["balloon: 2GiB"], "2GiB", "more than `memory`"),
        (&["balloon: lots"], "lots", "`off` or a memory size"),
        (
            &["hardware:", "  machine: pc-q35"],
            "pc-q35",
            "not a machine type",
        ),
        (
            &["hardware:", "  machine: i440fx", "  viommu: intel"],
            "intel",
            "needs a q35 machine",
        ),
        (
            &["hardware:", "  display-memory: 1GiB"],
            "1GiB",
            "4-512 whole MiB",
        ),
        (
            &["hardware:", "  numa-nodes:", "    - cpus: '0'"],
            "cpus",
            "need `numa: true`",
        ),
        (
            &[
                "hardware:",
                "  numa: true",
                "  numa-nodes:",
                "    - cpus: '0'",
                "      memory: 256MiB",
            ],
            "cpus",
            "adds up to 256 MiB",
        ),
        (&["hardware:", "  serial2: tty"], "tty", "not a serial port"),
        (
            &["hardware:", "  cdroms:", "    - volume: local:iso/a.iso"],
            "volume",
            "needs `slot`",
        ),
        (
            &[
                "hardware:",
                "  cdroms:",
                "    - slot: scsi0",
                "      iso: none",
            ],
            "scsi0",
            "used twice",
        ),
        (
            &[
                "hardware:",
                "  cdroms:",
                "    - slot: virtio1",
                "      iso: none",
            ],
            "virtio1",
            "not a CD-ROM slot",
        ),
        (
            &[
                "hardware:",
                "  cdrom:",
                "    iso: none",
                "  cloud-init:",
                "    enabled: true",
                "    storage: local-lvm",
                "    slot: ide2",
                "  cdroms:",
                "    - slot: ide3",
                "      iso: none",
            ],
            "ide3",
            "used twice",
        ),
        (
            &["hardware:", "  scsi-controller: lsi", "  cdroms: []"],
            "lsi",
            "",
        ),
        (
            &[
                "hardware:",
                "  pci-devices:",
                "    - slot: hostpci0",
                "      mapping: gpu",
                "      vendor-id: '10de'",
            ],
            "10de",
            "not a PCI id",
        ),
        (
            &["options:", "  agent-type: isa"],
            "isa",
            "needs `options.agent`",
        ),
        (
            &["options:", "  hookscript: hook.pl"],
            "hook.pl",
            "not a volume id",
        ),
        (
            &["cloud-init-data:", "  ci-custom:", "    user: user.yaml"],
            "user.yaml",
            "not a volume id",
        ),
    ];
    for (lines, at, fragment) in cases {
        let loaded = vm_with(lines);
        if fragment.is_empty() {
            // A valid combination in the list to make sure it is not refused by accident.
            accepted(&loaded);
            continue;
        }
        let found = errors(&loaded);
        let d = found
            .iter()
            .find(|d| d.message.contains(fragment))
            .unwrap_or_else(|| panic!("{lines:?}: {}", dump(&loaded)));
        let label = &d.labels[0];
        let covered = &label.file.text[label.span.start..label.span.end];
        assert!(covered.contains(at), "{lines:?}: label on `{covered}`");
    }
    // A disk controller that disagrees with `hardware.scsi-controller`.
    let text = vm("a", "pve01", 142).replace(
        "      size: 8GiB\n",
        "      size: 8GiB\n      controller: lsi\n  hardware:\n    scsi-controller: virtio-scsi-single\n",
    );
    let loaded = cluster_of(&[("vm/dev/a.yaml", text)]).load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["disagrees with `virtio-scsi-single`"],
    );
    // A CPU flag PVE does not let a VM set, one without a sign, a bad limit.
    for (flags, fragment, code) in [
        ("[+avx2]", "`avx2` is not a VM CPU flag", Code::PveEnum),
        ("[aes]", "needs a sign", Code::InvalidValue),
    ] {
        let text = vm("a", "pve01", 142).replace(
            "    cores: 1\n",
            &format!("    cores: 1\n    flags: {flags}\n"),
        );
        let loaded = cluster_of(&[("vm/dev/a.yaml", text)]).load();
        only_error(&loaded, code, &[fragment]);
    }
    let text = vm("a", "pve01", 142).replace(
        "    cores: 1\n",
        "    cores: 1\n    vcpus: 2\n    limit: 200\n",
    );
    let loaded = cluster_of(&[("vm/dev/a.yaml", text)]).load();
    assert_eq!(errors(&loaded).len(), 2, "{}", dump(&loaded));
    // `read-only` and `iothread` on an IDE disk.
    let text = vm("a", "pve01", 142).replace(
        "      size: 8GiB\n",
        "      size: 8GiB\n      interface: ide0\n      read-only: true\n",
    );
    let loaded = cluster_of(&[("vm/dev/a.yaml", text)]).load();
    only_error(
        &loaded,
        Code::InvalidValue,
        &["`read-only` is only supported on scsi and virtio"],
    );
}

#[test]
fn container_options() {
    accepted(&lxc_with(&[
        "ostype: unmanaged",
        "devices:",
        "  - path: /dev/dri/renderD128",
        "    gid: 44",
        "    mode: '0660'",
        "  - path: /dev/net/tun",
        "    slot: dev5",
        "    deny-write: true",
        "networks:",
        "  - bridge: vmbr0",
        "    mtu: 1500",
        "options:",
        "  mknod: true",
        "  force-rw-sys: false",
        "  mount: [nfs, cifs]",
        "  timezone: Europe/Berlin",
        "  cmode: console",
        "  ttys: 6",
        "  hookscript: local:snippets/ct.sh",
        "  entrypoint: /usr/bin/app --serve",
        "pve-config:",
        "  debug: true",
    ]));
    let cases: &[(&[&str], &str)] = &[
        (&["devices:", "  - path: /srv/x"], "not a device node"),
        (
            &["devices:", "  - path: /dev/a", "    mode: '660'"],
            "not an access mode",
        ),
        (
            &[
                "devices:",
                "  - path: /dev/a",
                "  - path: /dev/b",
                "    slot: dev0",
            ],
            "used twice",
        ),
        (
            &["networks:", "  - bridge: vmbr0", "    mtu: 10"],
            "outside 64-65535",
        ),
        (
            &["options:", "  mount: [nfs;cifs]"],
            "not a filesystem type",
        ),
        (&["options:", "  ttys: 7"], "more than PVE's 6"),
        (
            &["options:", "  timezone: Europe Berlin"],
            "not a time zone",
        ),
        (&["ostype: windows"], "`windows` is not one of"),
    ];
    for (lines, fragment) in cases {
        let loaded = lxc_with(lines);
        assert!(
            errors(&loaded).iter().any(|d| d.message.contains(fragment)),
            "{lines:?}: {}",
            dump(&loaded)
        );
    }
    let text = lxc("ct", "pve01", 200, "tpl").replace(
        "    size: 4GiB\n",
        "    size: 4GiB\n    options:\n      acl: true\n      mount-options: noatime\n",
    );
    let repo = cluster_of(&[
        (
            "ctt/dev/tpl.yaml",
            artifact("CTTemplate", "tpl", &["pve01"]),
        ),
        ("lxc/dev/ct.yaml", text.clone()),
    ]);
    accepted(&repo.load());
    let repo = cluster_of(&[
        (
            "ctt/dev/tpl.yaml",
            artifact("CTTemplate", "tpl", &["pve01"]),
        ),
        ("lxc/dev/ct.yaml", text.replace("acl: true", "backup: true")),
    ]);
    only_error(&repo.load(), Code::InvalidValue, &["always backed up"]);
    let repo = cluster_of(&[
        (
            "ctt/dev/tpl.yaml",
            artifact("CTTemplate", "tpl", &["pve01"]),
        ),
        ("lxc/dev/ct.yaml", text.replace("noatime", "relatime")),
    ]);
    only_error(
        &repo.load(),
        Code::InvalidValue,
        &["mount options PVE allows"],
    );
}
