//! Every guest option end to end: a VM with a representative set of the typed options of
//! issue 15 and `pve-config` keys is created on the simulator (which checks each parameter
//! against PVE's schema), reads back converged, has a changed key of each kind restored, and
//! then plans nothing; a container likewise.

use crate::support::{graph_of, one_node, root_simulator};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::PveClient;
use proxops_pve_sim::Volume;

const VM: &str = r#"apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: desk
spec:
  node: pve1
  vmid: 130
  state: stopped
  memory: 4GiB
  balloon: 1GiB
  ostype: win11
  cpu:
    type: host
    cores: 2
    flags: [+aes, -pcid]
    units: 200
    limit: 1.5
    affinity: 0-3
  disks:
    - storage: local-lvm
      interface: scsi0
      size: 8GiB
      cache: writeback
      backup: false
      serial: DISK 01
      limits:
        mbps-rd: 100
        iops-wr: 500
  networks:
    - bridge: vmbr0
      mtu: 1
      queues: 2
      link-down: false
  hardware:
    machine: pc-q35-8.1
    viommu: virtio
    bios: ovmf
    display: std
    display-memory: 32MiB
    scsi-controller: virtio-scsi-single
    sockets: 1
    numa: true
    numa-nodes:
      - cpus: 0-1
        memory: 4GiB
    serial1: socket
    audio:
      device: ich9-intel-hda
      driver: none
    rng:
      source: /dev/urandom
      period: 1000
    cdroms:
      - slot: sata0
        volume: local:iso/virtio-win.iso
    efi-disk:
      storage: local-lvm
      template: 4m
      secure-boot: enabled
      ms-cert: "2023"
  options:
    localtime: true
    hookscript: local:snippets/hook.pl
  pve-config:
    keyboard: de
    tdf: false
    spice_enhancements: foldersharing=1,videostreaming=all
    shares: 500
"#;

const CT: &str = r#"apiVersion: proxops/v1alpha1
kind: LXC
metadata:
  name: box
spec:
  node: pve1
  vmid: 140
  template: debian
  state: stopped
  memory: 512MiB
  ostype: debian
  cpu:
    cores: 1
    limit: 0.5
  root:
    storage: local-lvm
    size: 4GiB
  networks:
    - bridge: vmbr0
      ip: dhcp
      ip6: auto
      mtu: 1450
  devices:
    - path: /dev/net/tun
      mode: "0666"
  options:
    timezone: Europe/Berlin
    cmode: shell
    ttys: 1
    nesting: true
    mknod: true
    mount: [nfs]
  pve-config:
    debug: true
"#;

const TEMPLATE: &str = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian\nspec:\n  node: pve1\n  storage: local\n  filename: debian.tar.zst\n  url: https://example.invalid/debian.tar.zst\n";

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, "t", &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

fn volume(volid: &str, content: &str, format: &str) -> Volume {
    Volume {
        node: "pve1".into(),
        storage: "local".into(),
        volid: volid.into(),
        content: content.into(),
        format: format.into(),
        size: 4096,
        ctime: 0,
        vmid: None,
    }
}

/// The keys of the plan's update actions.
fn changed(p: &ClusterPlan) -> Vec<String> {
    p.actions
        .iter()
        .filter(|a| a.verb == Verb::Update)
        .flat_map(|a| a.changes.iter().map(|c| c.key.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_with_every_kind_of_option_is_created_drift_restored_and_converged() {
    let (sim, client) = root_simulator(one_node()).await;
    sim.with_state(|st| {
        st.volumes
            .push(volume("local:iso/virtio-win.iso", "iso", "iso"));
        st.volumes
            .push(volume("local:snippets/hook.pl", "snippets", "pl"));
    });
    let first = plan(&client, &[VM]).await;
    assert!(first.anomalies.is_empty(), "{first:#?}");
    let report = execute(&client, &first, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let config = sim.state().guests[&130].config.clone();
    for (key, want) in [
        ("balloon", "1024"),
        ("ostype", "win11"),
        ("cpu", "host,flags=+aes;-pcid"),
        ("cpuunits", "200"),
        ("cpulimit", "1.5"),
        ("affinity", "0-3"),
        ("machine", "pc-q35-8.1,viommu=virtio"),
        ("vga", "std,memory=32"),
        ("scsihw", "virtio-scsi-single"),
        ("numa0", "cpus=0-1,memory=4096"),
        ("serial1", "socket"),
        ("audio0", "device=ich9-intel-hda,driver=none"),
        ("rng0", "source=/dev/urandom,period=1000"),
        ("sata0", "local:iso/virtio-win.iso,media=cdrom"),
        ("localtime", "1"),
        ("hookscript", "local:snippets/hook.pl"),
        ("keyboard", "de"),
        ("tdf", "0"),
        ("spice_enhancements", "foldersharing=1,videostreaming=all"),
        ("shares", "500"),
    ] {
        assert_eq!(
            config.get(key).map(String::as_str),
            Some(want),
            "{key}: {config:#?}"
        );
    }
    let scsi0 = &config["scsi0"];
    for part in [
        "cache=writeback",
        "backup=0",
        "serial=DISK%2001",
        "mbps_rd=100",
        "iops_wr=500",
    ] {
        assert!(scsi0.contains(part), "{part}: {scsi0}");
    }
    let net0 = &config["net0"];
    assert!(
        net0.contains("mtu=1") && net0.contains("queues=2"),
        "{net0}"
    );
    assert!(config["efidisk0"].contains("ms-cert=2023"), "{config:#?}");
    assert!(plan(&client, &[VM]).await.is_empty(), "converged");

    // Drift on a typed key, a typed sub-key and a pve-config key of each shape.
    sim.with_state(|st| {
        let c = &mut st.guests.get_mut(&130).unwrap().config;
        c.insert("cpuunits".into(), "50".into());
        c.insert("keyboard".into(), "fr".into());
        c.insert(
            "spice_enhancements".into(),
            "foldersharing=0,videostreaming=all".into(),
        );
        c.insert("machine".into(), "pc-q35-8.1".into());
        c.remove("shares");
    });
    let p = plan(&client, &[VM]).await;
    let mut keys = changed(&p);
    keys.sort();
    assert_eq!(
        keys,
        [
            "cpuunits",
            "keyboard",
            "machine",
            "shares",
            "spice_enhancements"
        ],
        "{p:#?}"
    );
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let config = sim.state().guests[&130].config.clone();
    assert_eq!(config["keyboard"], "de");
    assert_eq!(config["shares"], "500");
    assert_eq!(config["cpuunits"], "200");
    assert!(config["spice_enhancements"].contains("foldersharing=1"));
    assert!(config["machine"].contains("viommu=virtio"));
    assert!(plan(&client, &[VM]).await.is_empty(), "converged again");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_with_the_new_options_is_created_drift_restored_and_converged() {
    let (sim, client) = root_simulator(one_node()).await;
    sim.with_state(|st| {
        st.volumes
            .push(volume("local:vztmpl/debian.tar.zst", "vztmpl", "tzst"));
    });
    let texts = [TEMPLATE, CT];
    let first = plan(&client, &texts).await;
    assert!(first.anomalies.is_empty(), "{first:#?}");
    let report = execute(&client, &first, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let config = sim.state().guests[&140].config.clone();
    for (key, want) in [
        ("ostype", "debian"),
        ("cpulimit", "0.5"),
        ("dev0", "/dev/net/tun,mode=0666"),
        ("timezone", "Europe/Berlin"),
        ("cmode", "shell"),
        ("tty", "1"),
        ("debug", "1"),
    ] {
        assert_eq!(
            config.get(key).map(String::as_str),
            Some(want),
            "{key}: {config:#?}"
        );
    }
    let features = &config["features"];
    for part in ["nesting=1", "mknod=1", "mount=nfs"] {
        assert!(features.contains(part), "{part}: {features}");
    }
    assert!(config["net0"].contains("mtu=1450"), "{config:#?}");
    assert!(plan(&client, &texts).await.is_empty(), "converged");
    sim.with_state(|st| {
        let c = &mut st.guests.get_mut(&140).unwrap().config;
        c.insert("debug".into(), "0".into());
        c.insert("cmode".into(), "tty".into());
    });
    let p = plan(&client, &texts).await;
    let mut keys = changed(&p);
    keys.sort();
    assert_eq!(keys, ["cmode", "debug"], "{p:#?}");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(plan(&client, &texts).await.is_empty(), "converged again");
    sim.shutdown().await.unwrap();
}

/// The drivers write, for typed fields, only keys the model says a typed field sets, and for
/// `pve-config` only its own keys: the model's account of a key (and the refusal naming the
/// field) matches what the engine does.
#[test]
fn the_drivers_own_only_the_keys_the_model_gives_them() {
    use proxops_engine::desired::{Context, guest};
    use proxops_model::kind::GuestType as G;
    use proxops_model::pve_config::{KeyClass, classify};
    let graph = graph_of(&[VM, TEMPLATE, CT]);
    let cx = Context::new("t", &graph);
    for (name, kind, g, pve_config) in [
        (
            "desk",
            "VM",
            G::Qemu,
            &["keyboard", "tdf", "spice_enhancements", "shares"][..],
        ),
        ("box", "LXC", G::Lxc, &["debug"]),
    ] {
        let id = graph.find(kind, name).unwrap();
        let d = guest(&cx, graph.resource(id)).unwrap();
        assert!(d.owned.len() > 20 || kind == "LXC", "{d:#?}");
        for o in &d.owned {
            let class = classify(g, &o.key);
            if pve_config.contains(&o.key.as_str()) {
                assert_eq!(class, KeyClass::PveConfig, "{}", o.key);
            } else {
                assert!(matches!(class, KeyClass::Typed(_)), "{}: {class:?}", o.key);
            }
        }
    }
}
