use super::*;
use proxops_model::Registry;
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_pve_sim::{GuestType, parse_guest_config};
use std::path::PathBuf;

fn ctx() -> AdoptContext {
    AdoptContext {
        cluster: "lab".into(),
        nodes: vec!["pve1".into()],
        declared: BTreeMap::from([(100, "VM/web".into())]),
    }
}

fn live(vmid: u32, guest: GuestType, text: &str) -> LiveGuest {
    let parsed = parse_guest_config(guest, text);
    LiveGuest {
        vmid,
        node: "pve1".into(),
        guest,
        config: parsed.config,
        raw_lxc: parsed.raw_lxc,
        snapshots: parsed.snapshots,
        running: true,
        pool: None,
    }
}

const SIMPLE: &str = "#Web server\nname: Web_01\nmemory: 2048\ncores: 2\ncpu: host\nostype: l26\nonboot: 1\nsmbios1: uuid=5b0e7f5e-0000-4000-8000-000000000001\nargs: -no-hpet\ndigest: abc\ntags: prod;web\nscsi0: local-lvm:vm-101-disk-0,size=8G\nide2: local:iso/d.iso,media=cdrom\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=50\n\n[pre]\nmemory: 1024\n";

#[test]
fn every_key_has_a_place_and_typed_fields_are_filled() {
    let a = adopt(&ctx(), &live(101, GuestType::Qemu, SIMPLE)).unwrap();
    let spec = &a.manifest["spec"];
    assert_eq!(a.report.kind, "VM");
    assert_eq!(a.report.name, "web-01");
    assert_eq!(spec["pve-name"], "Web_01");
    assert_eq!(spec["memory"], "2048MiB");
    assert_eq!(spec["cpu"]["cores"], 2);
    assert_eq!(spec["cpu"]["type"], "host");
    assert_eq!(spec["options"]["onboot"], true);
    assert_eq!(spec["pve-description"], "Web server");
    assert_eq!(spec["tags"], serde_json::json!(["prod", "web"]));
    assert_eq!(
        spec["pve-config"]["smbios1"],
        "uuid=5b0e7f5e-0000-4000-8000-000000000001"
    );
    let reported: BTreeMap<_, _> = a.report.reported().collect();
    assert!(reported.contains_key("args"));
    assert!(reported.contains_key("digest"));
    assert!(reported.contains_key("snapshot:pre"));
    assert!(!reported.contains_key("ide2"));
    assert_eq!(
        spec["hardware"]["cdroms"],
        serde_json::json!([{"slot": "ide2", "volume": "local:iso/d.iso"}])
    );
    // The disk names its slot's volume: storage, volume, slot and size, nothing to create.
    assert_eq!(
        spec["disks"],
        serde_json::json!([{"storage": "local-lvm", "volume": "local-lvm:vm-101-disk-0", "interface": "scsi0", "size": "8GiB"}])
    );
    assert_eq!(
        spec["networks"],
        serde_json::json!([{"slot": "net0", "model": "virtio", "mac": "BC:24:11:00:00:01", "bridge": "vmbr0", "vlan": 50}])
    );
    // The manifest text names every key it does not declare.
    let text = a.to_yaml();
    for key in reported.keys() {
        assert!(
            text.contains(&format!("# not declared: {key}:")),
            "{key} in\n{text}"
        );
    }
    assert!(!text.contains("-no-hpet"), "args is never written:\n{text}");
}

#[test]
fn claimed_foreign_node_and_declared_vmids_are_refused() {
    let tagged = live(
        102,
        GuestType::Qemu,
        "memory: 512\ntags: proxops;proxops.home.vm.x\n",
    );
    assert!(matches!(
        adopt(&ctx(), &tagged),
        Err(AdoptRefusal::Claimed { vmid: 102, .. })
    ));
    let mut elsewhere = live(103, GuestType::Qemu, "memory: 512\n");
    elsewhere.node = "pve9".into();
    assert!(matches!(
        adopt(&ctx(), &elsewhere),
        Err(AdoptRefusal::NodeNotAllowed { .. })
    ));
    let declared = live(100, GuestType::Qemu, "memory: 512\n");
    let err = adopt(&ctx(), &declared).unwrap_err();
    assert_eq!(
        err.to_string(),
        "vmid 100 is already declared by `VM/web` in the repository"
    );
}

#[test]
fn a_template_container_is_a_template_ct_with_raw_lxc_reported() {
    let a = adopt(
        &ctx(),
        &live(
            104,
            GuestType::Lxc,
            "hostname: ct1\nmemory: 256\nswap: 0\ntemplate: 1\nunprivileged: 1\nlxc.idmap: u 0 100000 65536\n",
        ),
    )
    .unwrap();
    assert_eq!(a.report.kind, "TemplateCT");
    assert_eq!(a.manifest["spec"]["dns"]["hostname"], "ct1");
    assert_eq!(a.manifest["spec"]["swap"], "0MiB");
    assert_eq!(a.manifest["spec"]["options"]["unprivileged"], true);
    assert!(a.report.reported().any(|(k, _)| k == "lxc.idmap"));
}

/// The corpus directory, or `None` (test skipped) when ../shared is absent and not required.
fn corpus() -> Option<PathBuf> {
    proxops_test_support::shared("pve-configs")
}

/// Every key of every corpus config is accounted for exactly once, and what went to
/// `pve-config` is the manifest's `pve-config`, verbatim.
#[test]
fn the_corpus_report_accounts_for_every_key() {
    let Some(corpus) = corpus() else { return };
    let registry = Registry::builtin();
    let (mut guests, mut typed, mut via, mut reported, mut loads) = (0, 0, 0, 0, 0);
    for (sub, guest, base) in [
        ("qemu", GuestType::Qemu, 1000),
        ("lxc", GuestType::Lxc, 2000),
    ] {
        let mut dirs: Vec<_> = std::fs::read_dir(corpus.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        for d in dirs {
            let n: u32 = d.file_name().unwrap().to_str().unwrap().parse().unwrap();
            let text = std::fs::read_to_string(d.join("config")).unwrap();
            let mut g = live(base + n, guest, &text);
            // Corpus guests carry no ProxOps identity; one that did would be refused.
            let a = adopt(&ctx(), &g).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
            let mut expected: Vec<String> = g.config.keys().cloned().collect();
            expected.extend(g.raw_lxc.iter().map(|(k, _)| k.clone()));
            expected.extend(g.snapshots.iter().map(|s| format!("snapshot:{s}")));
            let mut got: Vec<String> = a.report.keys.iter().map(|k| k.key.clone()).collect();
            expected.sort();
            got.sort();
            assert_eq!(got, expected, "{}", d.display());
            for k in &a.report.keys {
                let in_manifest = a.manifest["spec"]["pve-config"].get(&k.key);
                assert_eq!(
                    in_manifest.and_then(Value::as_str),
                    (k.placement == Placement::PveConfig).then(|| g.config[&k.key].as_str()),
                    "{} {}",
                    d.display(),
                    k.key
                );
            }
            let (t, p, r) = a.report.counts();
            guests += 1;
            typed += t;
            via += p;
            reported += r;
            let file = SourceFile::new(format!("{}.yaml", a.report.name), a.to_yaml());
            let loaded = load_manifest(&file, &registry, None);
            if std::env::var("PROXOPS_ADOPT_DEBUG").is_ok() {
                for r in a.report.reported() {
                    eprintln!(
                        "R {} {}",
                        r.0.trim_end_matches(char::is_numeric),
                        r.1.chars().take(70).collect::<String>()
                    );
                }
                for dg in &loaded.diagnostics {
                    eprintln!("D {}", dg.message);
                }
            }
            if loaded.resource.is_some() {
                loads += 1;
            }
            g.snapshots.clear();
        }
    }
    eprintln!(
        "adopt corpus: {guests} guests, {typed} keys typed, {via} via pve-config, {reported} reported; {loads} manifests load without error"
    );
    assert_eq!(guests, 55);
}

const DEVICES: &str = "name: dev\nmemory: 4096\ncores: 4\nbios: ovmf\nmachine: pc-q35-9.1,viommu=virtio\nvga: vmware,memory=64\nhugepages: 1024\nnuma: 1\nnuma0: cpus=0-3,hostnodes=0,memory=4096,policy=preferred\nhostpci0: 0000:07:00,pcie=1,rombar=0\nhostpci1: 0000:01:00.0;0000:01:00.1\nusb0: spice\nusb1: mapping=KB,usb3=1\nserial0: socket\naudio0: device=ich9-intel-hda,driver=none\nrng0: source=/dev/urandom,max_bytes=1024,period=1000\nefidisk0: local-lvm:vm-102-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M\ntpmstate0: local-lvm:vm-102-disk-2,size=4M,version=v2.0\nide0: local-lvm:vm-102-cloudinit,media=cdrom\nsata0: none,media=cdrom\nciuser: ubuntu\nipconfig0: ip=dhcp,ip6=dhcp\nnameserver: 1.1.1.1 9.9.9.9\ncicustom: user=local:snippets/u.yaml\nagent: enabled=1,fstrim_cloned_disks=1,type=virtio\nvirtio0: local:102/vm-102-disk-1.qcow2,format=qcow2,iops_rd=100,mbps_wr=12.5,size=10G\nscsi1: /dev/disk/by-id/ata-X,backup=0\nboot: cdn\nlocaltime: 0\nhotplug: disk,network\n";

#[test]
fn devices_media_and_cloud_init_become_their_typed_fields() {
    let a = adopt(&ctx(), &live(102, GuestType::Qemu, DEVICES)).unwrap();
    let spec = &a.manifest["spec"];
    let h = &spec["hardware"];
    assert_eq!(h["bios"], "ovmf");
    assert_eq!(
        (&h["machine"], &h["viommu"]),
        (&"pc-q35-9.1".into(), &"virtio".into())
    );
    assert_eq!(
        (&h["display"], &h["display-memory"]),
        (&"vmware".into(), &"64MiB".into())
    );
    assert_eq!(h["hugepages"], "1GiB");
    assert_eq!(
        h["numa-nodes"],
        serde_json::json!([{"cpus": "0-3", "hostnodes": "0", "memory": "4096MiB", "policy": "preferred"}])
    );
    assert_eq!(
        h["pci-devices"],
        serde_json::json!([{"slot": "hostpci0", "device": "0000:07:00", "pcie": true, "rombar": false}])
    );
    assert_eq!(
        h["usb-devices"],
        serde_json::json!([{"slot": "usb0", "host": "spice"}, {"slot": "usb1", "mapping": "KB", "usb3": true}])
    );
    assert_eq!(h["serial0"], "socket");
    assert_eq!(
        h["audio"],
        serde_json::json!({"device": "ich9-intel-hda", "driver": "none"})
    );
    assert_eq!(
        h["rng"],
        serde_json::json!({"source": "/dev/urandom", "max-bytes": 1024, "period": 1000})
    );
    assert_eq!(
        h["efi-disk"],
        serde_json::json!({"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"})
    );
    assert_eq!(
        h["tpm"],
        serde_json::json!({"storage": "local-lvm", "version": "v2.0"})
    );
    assert_eq!(
        h["cloud-init"],
        serde_json::json!({"enabled": true, "storage": "local-lvm", "slot": "ide0"})
    );
    assert_eq!(
        h["cdroms"],
        serde_json::json!([{"slot": "sata0", "iso": "none"}])
    );
    let ci = &spec["cloud-init-data"];
    assert_eq!(ci["ci-user"], "ubuntu");
    assert_eq!(ci["nameservers"], serde_json::json!(["1.1.1.1", "9.9.9.9"]));
    assert_eq!(
        ci["ipconfigs"],
        serde_json::json!([{"nic": 0, "ip": "dhcp", "ip6": "dhcp"}])
    );
    assert_eq!(
        ci["ci-custom"],
        serde_json::json!({"user": "local:snippets/u.yaml"})
    );
    let o = &spec["options"];
    assert_eq!(
        (
            &o["agent"],
            &o["agent-fstrim-cloned-disks"],
            &o["agent-type"]
        ),
        (&true.into(), &true.into(), &"virtio".into())
    );
    assert_eq!(
        (&o["localtime"], &o["hotplug"]),
        (&false.into(), &serde_json::json!(["disk", "network"]))
    );
    // No `cpu` key: PVE's default model.
    assert_eq!(spec["cpu"]["type"], "kvm64");
    assert_eq!(
        spec["disks"],
        serde_json::json!([{"storage": "local", "volume": "local:102/vm-102-disk-1.qcow2", "interface": "virtio0", "size": "10GiB", "format": "qcow2", "limits": {"iops-rd": 100, "mbps-wr": 12.5}}])
    );
    // What the model cannot say is reported with the reason, never written.
    let reported: BTreeMap<_, _> = a.report.reported().collect();
    let keys: Vec<&str> = reported.keys().copied().collect();
    assert_eq!(keys, ["boot", "hostpci1", "scsi1"], "{reported:#?}");
    assert!(reported["hostpci1"].contains("several host functions"));
    assert!(reported["scsi1"].contains("host device"));
    let file = SourceFile::new("m.yaml", a.to_yaml());
    let loaded = load_manifest(&file, &Registry::builtin(), None);
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
}

#[test]
fn a_linked_clone_keeps_its_volumes_and_the_report_names_its_template() {
    let text = "name: web\nmemory: 1024\ncores: 1\ncpu: host\nscsi0: local-lvm:base-9000-disk-0/vm-101-disk-0,size=8G\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\n";
    let a = adopt(&ctx(), &live(101, GuestType::Qemu, text)).unwrap();
    assert_eq!(a.report.notes.len(), 1, "{:?}", a.report.notes);
    assert!(a.report.notes[0].contains("template at vmid 9000 (scsi0 "));
    let yaml = a.to_yaml();
    assert!(
        yaml.contains("# note: a linked clone of the template at vmid 9000"),
        "{yaml}"
    );
    // The slot keeps its volume: the disk is declared by slot and storage, never re-created.
    assert_eq!(a.manifest["spec"]["disks"][0]["interface"], "scsi0");
    assert_eq!(a.manifest["spec"]["disks"][0]["storage"], "local-lvm");
    let json = serde_json::to_value(&a.report).unwrap();
    assert_eq!(json["notes"].as_array().map(Vec::len), Some(1));
    // A guest with no linked volume has no `notes` in its JSON report.
    let plain = adopt(&ctx(), &live(102, GuestType::Qemu, SIMPLE)).unwrap();
    assert!(
        serde_json::to_value(&plain.report)
            .unwrap()
            .get("notes")
            .is_none()
    );
}

#[test]
fn a_guest_in_a_pool_is_adopted_with_its_pool() {
    let mut g = live(101, GuestType::Qemu, SIMPLE);
    g.pool = Some("prod".into());
    let a = adopt(&AdoptContext::new("home"), &g).unwrap();
    assert_eq!(a.manifest["spec"]["pool"], "prod");
    let g = live(101, GuestType::Qemu, SIMPLE);
    let a = adopt(&AdoptContext::new("home"), &g).unwrap();
    assert!(a.manifest["spec"].get("pool").is_none());
}
