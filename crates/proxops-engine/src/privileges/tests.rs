#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::desired::{Compare, Owned};

/// The requirements of writing one key as a config update (`old`: its live value).
fn update(guest: GuestType, key: &str, value: &str, old: Option<&str>) -> Vec<String> {
    update_in(guest, key, value, old, true, &Network::default())
}

fn update_in(
    guest: GuestType,
    key: &str,
    value: &str,
    old: Option<&str>,
    unprivileged: bool,
    net: &Network,
) -> Vec<String> {
    let w = Writes {
        purpose: "update",
        guest,
        vmid: 100,
        create: false,
        unprivileged,
        net,
    };
    let mut out = Vec::new();
    w.set(key, value, old, &mut out);
    out.iter().map(Need::requirement).collect()
}

/// The requirements of writing one key in the create call.
fn create(guest: GuestType, key: &str, value: &str) -> Vec<String> {
    let net = Network::default();
    let w = Writes {
        purpose: "create",
        guest,
        vmid: 100,
        create: true,
        unprivileged: true,
        net: &net,
    };
    let mut out = Vec::new();
    w.set(key, value, None, &mut out);
    out.iter().map(Need::requirement).collect()
}

// qemu-server `src/PVE/API2/Qemu.pm` `$check_vm_modify_config_perm` and `update_vm_api`'s
// `$check_drive_perms`; pve-container `src/PVE/LXC.pm` `check_ct_modify_config_perm`.
#[test]
fn config_keys_map_to_the_privileges_pve_checks() {
    use GuestType::{Lxc, Qemu};
    let vm = |p: &str| format!("{p} on /vms/100");
    let table: &[(GuestType, &str, &str, &[String])] = &[
        (Qemu, "memory", "2048", &[vm("VM.Config.Memory")]),
        (Qemu, "balloon", "0", &[vm("VM.Config.Memory")]),
        (Qemu, "cores", "2", &[vm("VM.Config.CPU")]),
        (Qemu, "cpu", "host", &[vm("VM.Config.CPU")]),
        (Qemu, "numa", "1", &[vm("VM.Config.CPU")]),
        (
            Qemu,
            "scsihw",
            "virtio-scsi-single",
            &[vm("VM.Config.HWType")],
        ),
        (Qemu, "vga", "std", &[vm("VM.Config.HWType")]),
        (Qemu, "machine", "q35", &[vm("VM.Config.HWType")]),
        (Qemu, "boot", "order=scsi0", &[vm("VM.Config.Disk")]),
        (Qemu, "name", "web", &[vm("VM.Config.Options")]),
        (Qemu, "tags", "proxops", &[vm("VM.Config.Options")]),
        (Qemu, "onboot", "1", &[vm("VM.Config.Options")]),
        (Qemu, "agent", "1", &[vm("VM.Config.Options")]),
        (Qemu, "bios", "ovmf", &[vm("VM.Config.Options")]),
        // "special case for startup since it changes host behaviour"
        (
            Qemu,
            "startup",
            "order=2",
            &[vm("VM.Config.Options"), "Sys.Modify on /".into()],
        ),
        // `$cloudinitoptions` and `ipconfigN`: either privilege.
        (
            Qemu,
            "ciuser",
            "ops",
            &["VM.Config.Cloudinit on /vms/100, or VM.Config.Network on /vms/100".into()],
        ),
        (
            Qemu,
            "ipconfig0",
            "ip=dhcp",
            &["VM.Config.Cloudinit on /vms/100, or VM.Config.Network on /vms/100".into()],
        ),
        (
            Qemu,
            "net0",
            "virtio,bridge=vmbr0",
            &[
                vm("VM.Config.Network"),
                "SDN.Use on /sdn/zones/localnetwork/vmbr0".into(),
            ],
        ),
        (
            Qemu,
            "scsi0",
            "local-lvm:32",
            &[
                "Datastore.AllocateSpace on /storage/local-lvm".into(),
                vm("VM.Config.Disk"),
            ],
        ),
        // An own volume needs no storage privilege (pve-storage `check_volume_access`).
        (
            Qemu,
            "scsi0",
            "local-lvm:vm-100-disk-0,size=32G,ssd=1",
            &[vm("VM.Config.Disk")],
        ),
        (Qemu, "ide2", "none,media=cdrom", &[vm("VM.Config.CDROM")]),
        // The cloud-init drive: both privileges, and nothing of its storage.
        (
            Qemu,
            "ide2",
            "local-lvm:cloudinit",
            &["VM.Config.Cloudinit and VM.Config.CDROM on /vms/100".into()],
        ),
        (Qemu, "serial0", "socket", &[vm("VM.Config.HWType")]),
        (
            Qemu,
            "hostpci0",
            "mapping=hba,pcie=1",
            &[
                "Mapping.Use on /mapping/pci/hba".into(),
                vm("VM.Config.HWType"),
            ],
        ),
        (
            Qemu,
            "usb0",
            "mapping=stick",
            &[
                vm("VM.Config.HWType"),
                "Mapping.Use on /mapping/usb/stick".into(),
            ],
        ),
        (Qemu, "usb1", "spice", &[vm("VM.Config.HWType")]),
        (Lxc, "memory", "512", &[vm("VM.Config.Memory")]),
        (Lxc, "swap", "512", &[vm("VM.Config.Memory")]),
        (Lxc, "cores", "1", &[vm("VM.Config.CPU")]),
        (
            Lxc,
            "rootfs",
            "local-lvm:8",
            &[
                vm("VM.Config.Disk"),
                "Datastore.AllocateSpace on /storage/local-lvm".into(),
            ],
        ),
        (
            Lxc,
            "net0",
            "name=eth0,bridge=vmbr0,tag=30",
            &[
                vm("VM.Config.Network"),
                "SDN.Use on /sdn/zones/localnetwork/vmbr0/30".into(),
            ],
        ),
        (Lxc, "hostname", "ct", &[vm("VM.Config.Network")]),
        (Lxc, "nameserver", "1.1.1.1", &[vm("VM.Config.Network")]),
        (Lxc, "tags", "proxops", &[vm("VM.Config.Options")]),
        // No Sys.Modify for a container's startup.
        (Lxc, "startup", "order=2", &[vm("VM.Config.Options")]),
        (Lxc, "features", "nesting=1", &[vm("VM.Allocate")]),
    ];
    for (guest, key, value, want) in table {
        assert_eq!(
            update(*guest, key, value, None),
            *want,
            "{guest:?} {key}={value}"
        );
    }
}

// qemu-server `create_vm`: drives by storage only (`$check_storage_access`), the value checks
// of serial ports, USB and PCI devices as on updates.
#[test]
fn the_create_call_checks_drives_by_storage_only() {
    use GuestType::Qemu;
    assert_eq!(
        create(Qemu, "scsi0", "local-lvm:32"),
        ["Datastore.AllocateSpace on /storage/local-lvm"]
    );
    assert!(create(Qemu, "ide2", "local-lvm:cloudinit").is_empty());
    assert_eq!(
        create(Qemu, "ide3", "isos:iso/x.iso,media=cdrom"),
        [
            "Datastore.Allocate on /storage/isos, or Datastore.AllocateSpace on /storage/isos, or Datastore.Audit on /storage/isos"
        ]
    );
    assert_eq!(
        create(Qemu, "scsi1", "fast:0,import-from=local:import/d.qcow2"),
        [
            "Datastore.AllocateSpace on /storage/fast",
            "Datastore.Allocate on /storage/local, or Datastore.AllocateSpace on /storage/local, or Datastore.Audit on /storage/local",
        ]
    );
    // Another guest's disk as an import source is cloned from it.
    assert_eq!(
        create(Qemu, "scsi1", "fast:0,import-from=local-lvm:vm-9000-disk-0"),
        [
            "Datastore.AllocateSpace on /storage/fast",
            "VM.Clone on /vms/9000"
        ]
    );
}

// The root-only checks, each with its PVE source: qemu-server `check_hostpci_perm`,
// `check_usb_perm`, the serial checks and `$check_vm_modify_config_perm`'s last branch;
// pve-container `check_ct_modify_config_perm`.
#[test]
fn what_only_root_may_do_is_a_root_only_need_with_its_remedy() {
    use GuestType::{Lxc, Qemu};
    let cases: &[(GuestType, &str, &str, Option<&str>, &str)] = &[
        (
            Qemu,
            "hostpci0",
            "0000:03:00.0,pcie=1",
            None,
            "hostpci0 uses a raw device: only root@pam may set it; use a PCI resource mapping",
        ),
        // The live value is checked too: a raw device in place stays root@pam's.
        (
            Qemu,
            "hostpci0",
            "mapping=hba",
            Some("0000:03:00.0"),
            "hostpci0 holds a raw device (0000:03:00.0): only root@pam may change or remove it",
        ),
        (
            Qemu,
            "hostpci1",
            "mapping=hba,romfile=x.rom",
            None,
            "hostpci1 sets `romfile`: only root@pam may set it",
        ),
        (
            Qemu,
            "usb0",
            "0951:1666",
            None,
            "usb0 uses a raw device: only root@pam may set it; use a USB resource mapping",
        ),
        (
            Qemu,
            "serial0",
            "/dev/ttyS0",
            None,
            "serial0 is a host serial device (/dev/ttyS0): only root@pam may set it; use `socket`",
        ),
        (
            Qemu,
            "args",
            "-no-reboot",
            None,
            "args: only root@pam may set it (no privilege grants it to another user or a token)",
        ),
        (
            Qemu,
            "hookscript",
            "local:snippets/h.pl",
            None,
            "hookscript: only root@pam may set it (no privilege grants it to another user or a token)",
        ),
        (
            Lxc,
            "mp0",
            "/srv/data,mp=/data",
            None,
            "mp0 is a bind mount (/srv/data): only root@pam may set it; use a mount point on a storage (`mount-points`)",
        ),
        (
            Lxc,
            "mp1",
            "/dev/sdb1,mp=/data",
            None,
            "mp1 is a device mount (/dev/sdb1): only root@pam may set it; use a mount point on a storage (`mount-points`)",
        ),
        (
            Lxc,
            "dev0",
            "/dev/ttyUSB0",
            None,
            "dev0 passes a host device through: only root@pam may set it",
        ),
        (
            Lxc,
            "hookscript",
            "local:snippets/h.pl",
            None,
            "hookscript: only root@pam may set it",
        ),
        (
            Lxc,
            "features",
            "nesting=1,keyctl=1",
            None,
            "features changes keyctl: only root@pam may change features other than nesting",
        ),
        // Booleans compare as parsed: only fuse changes here.
        (
            Lxc,
            "features",
            "nesting=1,fuse=1",
            Some("nesting=true"),
            "features changes fuse: only root@pam may change features other than nesting",
        ),
    ];
    for (guest, key, value, old, want) in cases {
        let got = update(*guest, key, value, *old);
        assert!(
            got.iter().any(|r| r == want),
            "{guest:?} {key}={value} (was {old:?}): {got:#?}"
        );
    }
    // Any feature change on a privileged container, nesting too.
    let got = update_in(
        Lxc,
        "features",
        "nesting=1",
        None,
        false,
        &Network::default(),
    );
    assert_eq!(
        got,
        [
            "features of a privileged container: only root@pam may change them; make the container unprivileged"
        ]
    );
    // Only nesting changing needs VM.Allocate, nothing root-only.
    assert_eq!(
        update(
            Lxc,
            "features",
            "nesting=0,keyctl=1",
            Some("keyctl=1,nesting=1")
        ),
        ["VM.Allocate on /vms/100"]
    );
    // A root-only need is met by no grant; `missing` drops it for root@pam only.
    let need = Need::root_only("create VM/nas (vmid 140)", "only root".into()).at("set hostpci0");
    assert!(!need.met(|_| true));
    let held = BTreeMap::new();
    let token = missing(std::slice::from_ref(&need), &held, false);
    assert_eq!(token.len(), 1);
    assert!(token[0].root_only);
    assert_eq!(token[0].requirement, "only root");
    assert!(missing(&[need], &held, true).is_empty());
}

#[test]
fn deleted_keys_are_checked_as_set_ones_and_by_their_value() {
    let w = |net| Writes {
        purpose: "update",
        guest: GuestType::Qemu,
        vmid: 100,
        create: false,
        unprivileged: true,
        net,
    };
    let net = Network::default();
    let mut out = Vec::new();
    w(&net).delete("hostpci0", "0000:03:00.0", &mut out);
    w(&net).delete("ide2", "local-lvm:vm-100-cloudinit,media=cdrom", &mut out);
    w(&net).delete("startup", "order=1", &mut out);
    let got: Vec<String> = out.iter().map(Need::requirement).collect();
    assert_eq!(
        got,
        [
            "hostpci0 holds a raw device (0000:03:00.0): only root@pam may change or remove it",
            "VM.Config.Cloudinit and VM.Config.CDROM on /vms/100",
            "VM.Config.Options on /vms/100",
            "Sys.Modify on /",
        ]
    );
}

// pve-guest-common `src/PVE/GuestHelpers.pm` `check_vnet_access`: the VNet's zone, each VLAN.
#[test]
fn bridges_need_sdn_use_in_their_real_zone() {
    let net = Network::from_zones([("tenant1".to_owned(), "tenants".to_owned())]);
    let got = update_in(
        GuestType::Qemu,
        "net0",
        "virtio,bridge=tenant1",
        Some("virtio=BC:24:11:00:00:01,bridge=vmbr0,trunks=10;20-21"),
        true,
        &net,
    );
    assert_eq!(
        got,
        [
            "VM.Config.Network on /vms/100",
            "SDN.Use on /sdn/zones/tenants/tenant1",
            "SDN.Use on /sdn/zones/localnetwork/vmbr0/10",
            "SDN.Use on /sdn/zones/localnetwork/vmbr0/20",
            "SDN.Use on /sdn/zones/localnetwork/vmbr0/21",
        ]
    );
}

#[test]
fn a_privileged_container_needs_sys_modify() {
    let ct = |value: &str| DesiredGuest {
        guest: GuestType::Lxc,
        template: false,
        node: "pve1".into(),
        nodes: vec!["pve1".into()],
        placed: false,
        ha: None,
        vmid: 200,
        power: None,
        clone: None,
        owned: vec![Owned {
            key: "unprivileged".into(),
            value: value.into(),
            compare: Compare::Fixed,
            restart: false,
            secret: None,
        }],
        create_only: Vec::new(),
        warnings: Vec::new(),
        update_policy: None,
        firewall: None,
        pool: None,
    };
    let needs_on = |d: &DesiredGuest, major: Option<u32>| {
        let mut out = Vec::new();
        create_needs("create", d, &Network::default(), major, &mut out);
        out.iter().map(Need::requirement).collect::<Vec<_>>()
    };
    let needs = |d: &DesiredGuest| needs_on(d, Some(9));
    // `unprivileged` itself is taken out before the per-key check.
    assert_eq!(
        needs(&ct("0")),
        ["Sys.Modify on /", "VM.Allocate on /vms/200"]
    );
    assert_eq!(needs(&ct("1")), ["VM.Allocate on /vms/200"]);
    // pve-container added the check in 6.0.6 (PVE 9); 8's has none.
    assert_eq!(needs_on(&ct("0"), Some(8)), ["VM.Allocate on /vms/200"]);
    assert_eq!(needs_on(&ct("0"), None)[0], "Sys.Modify on /");
}

/// A VM with the guest agent on: its receipt's `ip-addresses` need the agent read, whose
/// privilege PVE 9 renamed (qemu-server `agent/network-get-interfaces`), and only optionally.
#[test]
fn the_agent_read_of_ip_addresses_is_named_per_release() {
    let dir = homelab();
    let registry = proxops_model::Registry::builtin();
    let repo = proxops_model::load_repository(
        &proxops_model::FsSource::new(&dir).unwrap(),
        &registry,
        &proxops_model::LoadOptions::default(),
    )
    .unwrap();
    let c = repo.cluster("lab").unwrap();
    let graph = Graph::build(&registry, &c.resources).unwrap();
    let drivers = crate::planner::PlanOptions::default().drivers;
    let agent_read = |major: Option<u32>| {
        planning_needs("lab", &graph, &drivers, major)
            .into_iter()
            .filter(|n| n.purpose == "record receipts")
            .map(|n| (n.requirement(), n.optional))
            .collect::<Vec<_>>()
    };
    // sandbox-01 enables the agent; the container needs no agent.
    assert_eq!(
        agent_read(Some(8)),
        [("VM.Monitor on /vms/100".to_owned(), true)]
    );
    assert_eq!(
        agent_read(Some(9)),
        [(
            "VM.GuestAgent.Audit on /vms/100, or VM.GuestAgent.Unrestricted on /vms/100".to_owned(),
            true
        )]
    );
}

/// A cluster of the homelab example (or a copy) planned on an empty simulator.
fn plan_of(dir: &std::path::Path, cluster: &str) -> Vec<Need> {
    use crate::backend::{Backend, connect};
    use crate::planner::{PlanOptions, plan_cluster};
    use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
    let registry = Registry::builtin();
    let repo = load_repository(
        &FsSource::new(dir).unwrap(),
        &registry,
        &LoadOptions::default(),
    )
    .unwrap();
    let c = repo.cluster(cluster).unwrap();
    let graph = Graph::build(&registry, &c.resources).unwrap();
    let options = PlanOptions::default();
    let plan = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let backend = Backend::Sim {
            state_file: None,
            task_time: std::time::Duration::from_millis(10),
        };
        let conn = connect(&registry, c, &backend).await.unwrap();
        plan_cluster(&conn.client, cluster, &graph, &options)
            .await
            .unwrap()
    });
    plan_needs(
        &plan,
        &graph,
        &options.drivers,
        &Network::default(),
        Some(9),
    )
}

fn homelab() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/homelab"
    ))
}

/// The lab cluster of the example, planned on an empty simulator: downloads and creates.
#[test]
fn the_lab_plan_needs_allocation_on_each_new_guest() {
    let needs = plan_of(&homelab(), "lab");
    let has = |purpose: &str, requirement: &str| {
        needs.iter().any(|n| {
            let full = match &n.detail {
                Some(d) => format!("{}: {d}", n.purpose),
                None => n.purpose.clone(),
            };
            full.starts_with(purpose) && n.requirement() == requirement
        })
    };
    assert!(
        has("plan: read VM/sandbox-01", "VM.Audit on /vms/100"),
        "{needs:#?}"
    );
    assert!(has("plan: read LXC/ci-runner-01", "VM.Audit on /vms/200"));
    // The storage rows of /cluster/resources need Datastore.Audit.
    assert!(has(
        "plan: see and list storage local",
        "Datastore.Audit on /storage/local"
    ));
    assert!(has(
        "create VM/sandbox-01 (vmid 100)",
        "VM.Allocate on /vms/100"
    ));
    assert!(has(
        "create VM/sandbox-01 (vmid 100): allocate scsi0",
        "Datastore.AllocateSpace on /storage/local-lvm"
    ));
    assert!(has(
        "create VM/sandbox-01 (vmid 100): set memory",
        "VM.Config.Memory on /vms/100"
    ));
    assert!(has(
        "create VM/sandbox-01 (vmid 100): attach to vmbr0",
        "SDN.Use on /sdn/zones/localnetwork/vmbr0/50"
    ));
    // Qemu's create checks drives by storage, not by VM.Config.Disk; LXC's checks both.
    assert!(!has(
        "create VM/sandbox-01 (vmid 100): set scsi0",
        "VM.Config.Disk on /vms/100"
    ));
    assert!(has(
        "create LXC/ci-runner-01 (vmid 200): set rootfs",
        "VM.Config.Disk on /vms/200"
    ));
    // Nesting on an unprivileged container: VM.Allocate.
    assert!(has(
        "create LXC/ci-runner-01 (vmid 200): set features",
        "VM.Allocate on /vms/200"
    ));
    assert!(has(
        "download ISO/",
        "Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on /nodes/pve1"
    ));
    assert!(
        needs
            .iter()
            .any(|n| n.optional && n.requirement() == "VM.Audit on /vms")
    );
    assert!(needs.iter().all(|n| n.root_only.is_none()), "{needs:#?}");
}

/// The home cluster asks nothing of root@pam with its PCI mapping; with the raw device it did,
/// it names that one need (qemu-server `check_hostpci_perm`).
#[test]
fn the_home_plan_has_a_root_only_need_only_with_a_raw_device() {
    let needs = plan_of(&homelab(), "home");
    assert!(needs.iter().all(|n| n.root_only.is_none()), "{needs:#?}");
    assert!(
        needs
            .iter()
            .any(|n| n.purpose == "create VM/truenas (vmid 140)"
                && n.requirement() == "Mapping.Use on /mapping/pci/hba")
    );
    assert!(
        needs
            .iter()
            .any(|n| n.purpose == "create VM/truenas (vmid 140)"
                && n.requirement() == "Sys.Modify on /"
                && n.detail.as_deref() == Some("set startup"))
    );
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&homelab(), dir.path());
    let file = dir.path().join("vm/home/truenas.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("mapping: hba"), "{text}");
    std::fs::write(
        &file,
        text.replace("mapping: hba", "device: \"0000:03:00.0\""),
    )
    .unwrap();
    let needs = plan_of(dir.path(), "home");
    let root: Vec<(&str, String)> = needs
        .iter()
        .filter(|n| n.root_only.is_some())
        .map(|n| (n.purpose.as_str(), n.requirement()))
        .collect();
    assert_eq!(
        root,
        [(
            "create VM/truenas (vmid 140)",
            "hostpci0 uses a raw device: only root@pam may set it; use a PCI resource mapping"
                .to_owned()
        )]
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn alternatives_are_met_by_any_one_in_full() {
    let need = Need {
        any_of: vec![
            vec![grant("/", "Sys.Audit"), grant("/", "Sys.Modify")],
            vec![grant("/nodes/pve1", "Sys.AccessNetwork")],
        ],
        ..Need::one("download", "/", "Sys.Audit")
    };
    assert_eq!(
        need.requirement(),
        "Sys.Audit and Sys.Modify on /, or Sys.AccessNetwork on /nodes/pve1"
    );
    assert!(!need.met(|g| g.privilege == "Sys.Audit"));
    assert!(need.met(|g| g.path == "/"));
    assert!(need.met(|g| g.privilege == "Sys.AccessNetwork"));
}

#[test]
fn only_a_password_login_as_root_at_pam_is_root() {
    assert!(is_root(&Credentials::Password {
        username: "root@pam".into(),
        password: "pw".into(),
    }));
    assert!(!is_root(&Credentials::Password {
        username: "ops@pve".into(),
        password: "pw".into(),
    }));
    assert!(!is_root(&Credentials::token("root@pam!ci", "s")));
}

/// The keys of issue 15's typed options and `pve-config`, each as PVE checks it: qemu-server
/// `$check_vm_modify_config_perm` (its option lists, and "only root can set" for every other
/// key: `affinity`, `hugepages`, `keephugepages`, `spice_enhancements`),
/// pve-container `check_ct_modify_config_perm` (`VM.Config.Options` for the rest).
#[test]
fn the_keys_of_every_guest_option_map_to_pves_privileges() {
    use GuestType::{Lxc, Qemu};
    let vm = |p: &str| format!("{p} on /vms/100");
    let table: &[(GuestType, &str, &str, &[String])] = &[
        (Qemu, "cpuunits", "200", &[vm("VM.Config.CPU")]),
        (Qemu, "cpulimit", "1.5", &[vm("VM.Config.CPU")]),
        (Qemu, "vcpus", "2", &[vm("VM.Config.CPU")]),
        (
            Qemu,
            "numa0",
            "cpus=0-1,memory=1024",
            &[vm("VM.Config.CPU")],
        ),
        (Qemu, "shares", "500", &[vm("VM.Config.Memory")]),
        (
            Qemu,
            "audio0",
            "device=ich9-intel-hda",
            &[vm("VM.Config.HWType")],
        ),
        (
            Qemu,
            "rng0",
            "source=/dev/urandom",
            &[vm("VM.Config.HWType")],
        ),
        (Qemu, "ostype", "l26", &[vm("VM.Config.Options")]),
        (Qemu, "localtime", "1", &[vm("VM.Config.Options")]),
        (Qemu, "keyboard", "de", &[vm("VM.Config.Options")]),
        (Qemu, "tdf", "0", &[vm("VM.Config.Options")]),
        (Qemu, "vmstatestorage", "local-lvm", &[vm("VM.Config.Disk")]),
        (
            Qemu,
            "citype",
            "nocloud",
            &["VM.Config.Cloudinit on /vms/100, or VM.Config.Network on /vms/100".into()],
        ),
        (
            Qemu,
            "cicustom",
            "user=local:snippets/u.yaml",
            &["VM.Config.Cloudinit on /vms/100, or VM.Config.Network on /vms/100".into()],
        ),
        (Qemu, "serial1", "socket", &[vm("VM.Config.HWType")]),
        (
            Qemu,
            "smbios1",
            "uuid=c0fd19ca-0415-4d1c-958c-d59642429f53",
            &[vm("VM.Config.HWType")],
        ),
        (Lxc, "cpulimit", "0.5", &[vm("VM.Config.CPU")]),
        (Lxc, "cmode", "shell", &[vm("VM.Config.Options")]),
        (Lxc, "timezone", "host", &[vm("VM.Config.Options")]),
        (Lxc, "ostype", "debian", &[vm("VM.Config.Options")]),
        (Lxc, "tty", "2", &[vm("VM.Config.Options")]),
        (Lxc, "debug", "1", &[vm("VM.Config.Options")]),
        (
            Lxc,
            "entrypoint",
            "/usr/bin/app",
            &[vm("VM.Config.Options")],
        ),
    ];
    for (guest, key, value, want) in table {
        assert_eq!(update(*guest, key, value, None), *want, "{guest:?} {key}");
    }
    for key in [
        "affinity",
        "hugepages",
        "keephugepages",
        "spice_enhancements",
    ] {
        let needs = update(Qemu, key, "1", None);
        assert_eq!(needs.len(), 1, "{key}: {needs:?}");
        assert!(needs[0].contains("root@pam"), "{key}: {needs:?}");
    }
}
