use super::*;
use proxops_model::Registry;
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_pve_sim::{GuestKind, parse_guest_config};
use std::path::PathBuf;

fn ctx() -> AdoptContext {
    AdoptContext {
        cluster: "lab".into(),
        nodes: vec!["pve1".into()],
        declared: BTreeMap::from([(100, "VM/web".into())]),
    }
}

fn live(vmid: u32, guest: GuestType, text: &str) -> LiveGuest {
    let kind = match guest {
        GuestType::Qemu => GuestKind::Qemu,
        GuestType::Lxc => GuestKind::Lxc,
    };
    let parsed = parse_guest_config(kind, text);
    LiveGuest {
        vmid,
        node: "pve1".into(),
        guest,
        config: parsed.config,
        raw_lxc: parsed.raw_lxc,
        snapshots: parsed.snapshots,
        running: true,
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
    assert!(reported["ide2"].contains("CD-ROM"), "{}", reported["ide2"]);
    // The disk keeps its slot's volume: storage, slot and size, nothing to create.
    assert_eq!(
        spec["disks"],
        serde_json::json!([{"storage": "local-lvm", "interface": "scsi0", "size": "8GiB"}])
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

fn corpus() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pve-configs");
    if path.is_dir() {
        return Some(path);
    }
    assert!(
        std::env::var("PROXOPS_REQUIRE_SHARED").as_deref() != Ok("1"),
        "PROXOPS_REQUIRE_SHARED=1 but {} is missing",
        path.display()
    );
    eprintln!("skipping: {} is missing", path.display());
    None
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
