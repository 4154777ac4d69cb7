//! The two PVE releases the simulator serves, and storages as PVE has them: what `/version`
//! reports, parameters checked against the release's schema, pve-storage's template rule, the
//! installer's default storages, and PVE's refusals of content a storage does not hold.

use crate::support::{Sim, config_of};
use proxops_pve_sim::{DeclaredStorage, PveVersion, State, Storage, Volume};

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

fn template() -> Volume {
    Volume {
        node: "pve1".into(),
        storage: "local".into(),
        volid: TEMPLATE.into(),
        content: "vztmpl".into(),
        format: "tzst".into(),
        size: 120 << 20,
        ..Default::default()
    }
}

/// pve-manager `PVE/API2.pm` `version`: `version`, `release` and `repoid` (the 16-digit
/// `git rev-parse --short=16` of pve-manager's build, `PVE/Makefile`), per release; the node
/// status names the same pve-manager and the release's kernel, and from 9.1 `memory.available`
/// (`PVE/API2/Nodes.pm` `status`).
#[tokio::test]
async fn version_reports_the_release_served() {
    for (version, full, release, repoid, kernel) in [
        (
            PveVersion::V8_4,
            "8.4.1",
            "8.4",
            "2a5fa54a8503f96d",
            "6.8.12-9-pve",
        ),
        (
            PveVersion::V9_1,
            "9.1.3",
            "9.1",
            "5829c814947b3364",
            "6.17.2-1-pve",
        ),
    ] {
        let sim = Sim::of(version).await;
        let v = sim.get("/version").await.ok();
        assert_eq!(
            v,
            serde_json::json!({ "version": full, "release": release, "repoid": repoid }),
            "{version}"
        );
        let status = sim.get("/nodes/pve1/status").await.ok();
        assert_eq!(status["pveversion"], format!("pve-manager/{full}/{repoid}"));
        assert_eq!(status["current-kernel"]["release"], kernel);
        assert_eq!(
            status["memory"].get("available").is_some(),
            version == PveVersion::V9_1,
            "{version}: memory.available is 9.1's"
        );
        assert_eq!(sim.h.state().pve_version, version, "the state records it");
    }
}

/// Parameters are checked against the release's schema (8.4.2 or 9.1.3 in ../shared/pve-api):
/// `allow-ksm` (qemu-server 9, `$memoryoptions`) and the agent's `freeze-fs` key are 9.1's; the
/// drive geometry keys (`cyls`, `heads`, `secs`, `trans`) were dropped in 9.
#[tokio::test]
async fn parameters_follow_the_release_schema() {
    let old = Sim::of(PveVersion::V8_4).await;
    let new = Sim::of(PveVersion::V9_1).await;
    let create = |vmid: &'static str, key: &'static str, value: &'static str| {
        [("vmid", vmid), ("scsi0", "local-lvm:1"), (key, value)]
    };
    let refused = old
        .post("/nodes/pve1/qemu", &create("100", "allow-ksm", "0"))
        .await
        .errors();
    assert_eq!(
        refused["allow-ksm"],
        "property is not defined in schema and the schema does not allow additional properties"
    );
    let upid = new
        .post("/nodes/pve1/qemu", &create("100", "allow-ksm", "0"))
        .await
        .ok();
    new.wait_ok(&upid).await;
    let config = new.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(config["allow-ksm"], 0);

    let key = old
        .post("/nodes/pve1/qemu", &create("101", "agent", "1,freeze-fs=0"))
        .await
        .errors();
    assert!(
        key["agent"].as_str().unwrap().contains("freeze-fs"),
        "{key}"
    );
    let upid = new
        .post("/nodes/pve1/qemu", &create("101", "agent", "1,freeze-fs=0"))
        .await
        .ok();
    new.wait_ok(&upid).await;

    // The other way round: 8.4's drive geometry is gone from 9.1.
    let geometry = [("vmid", "102"), ("scsi0", "local-lvm:1,cyls=2")];
    let upid = old.post("/nodes/pve1/qemu", &geometry).await.ok();
    old.wait_ok(&upid).await;
    let gone = new.post("/nodes/pve1/qemu", &geometry).await.errors();
    assert!(gone["scsi0"].as_str().unwrap().contains("cyls"), "{gone}");
}

/// pve-storage `src/PVE/Storage.pm` `$VZTMPL_EXT_RE_1`: `\.tar\.(gz|xz|zst|bz2)` through 8.x,
/// a plain `.tar` too since commit 0d392b2 "allow .tar container templates" (PVE 9.1), listed
/// with format `tar` (`Plugin.pm` `get_subdir_files`); `download_url` raises "wrong file
/// extension" for `filename` otherwise.
#[tokio::test]
async fn plain_tar_templates_only_from_9_1() {
    let params = [
        ("url", "http://127.0.0.1:9/oci/alpine.tar"),
        ("content", "vztmpl"),
        ("filename", "alpine-oci.tar"),
    ];
    for version in PveVersion::ALL {
        let sim = Sim::with(config_of(version).with_offline_downloads(true)).await;
        let answer = sim
            .post("/nodes/pve1/storage/local/download-url", &params)
            .await;
        if version.plain_tar_templates() {
            sim.wait_ok(&answer.ok()).await;
            let content = sim
                .req(
                    "GET",
                    "/nodes/pve1/storage/local/content",
                    &[("content", "vztmpl")],
                )
                .await
                .ok();
            assert_eq!(content[0]["volid"], "local:vztmpl/alpine-oci.tar");
            assert_eq!(content[0]["format"], "tar");
        } else {
            assert_eq!(answer.errors()["filename"], "wrong file extension");
        }
    }
}

/// A fresh install's storages (pve-installer `Proxmox/Install/StorageConfig.pm`
/// `get_lvm_thin_config`): `local` dir with iso, vztmpl and backup, plus import from the 9.0
/// installer (ec1d5ee), and `local-lvm` lvmthin with rootdir and images; declared storages are
/// added on their nodes, and one named like a default replaces it.
#[tokio::test]
async fn storages_are_pve_defaults_plus_the_declared_ones() {
    for (version, local) in [
        (PveVersion::V8_4, "iso,vztmpl,backup"),
        (PveVersion::V9_1, "iso,vztmpl,backup,import"),
    ] {
        let sim = Sim::of(version).await;
        let rows = sim.get("/nodes/pve1/storage").await.ok();
        let seen: Vec<(String, String, String)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["storage"].as_str().unwrap().to_owned(),
                    r["type"].as_str().unwrap().to_owned(),
                    r["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let want = |s: &str, t: &str, c: &str| (s.to_owned(), t.to_owned(), c.to_owned());
        assert_eq!(
            seen,
            [
                want("local", "dir", local),
                want("local-lvm", "lvmthin", "images,rootdir")
            ],
            "{version}"
        );
    }
    let storage = |name: &str, kind: &str, content: &[&str]| Storage {
        storage: name.into(),
        kind: kind.into(),
        content: content.iter().map(|c| (*c).to_owned()).collect(),
        ..Storage::default()
    };
    let declared = [
        DeclaredStorage {
            storage: storage("local", "dir", &["iso", "vztmpl", "rootdir"]),
            nodes: Vec::new(),
        },
        DeclaredStorage {
            storage: storage("vm_disks", "zfspool", &["images"]),
            nodes: vec!["pve2".into()],
        },
    ];
    let nodes = ["pve1".to_owned(), "pve2".to_owned()];
    let st = State::seeded("home", &nodes, PveVersion::V9_1, &declared);
    let names = |n: usize| -> Vec<String> {
        st.nodes[n]
            .storages
            .iter()
            .map(|s| format!("{}:{}", s.storage, s.content.join(",")))
            .collect()
    };
    assert_eq!(
        names(0),
        ["local:iso,vztmpl,rootdir", "local-lvm:images,rootdir"]
    );
    assert_eq!(
        names(1),
        [
            "local:iso,vztmpl,rootdir",
            "local-lvm:images,rootdir",
            "vm_disks:images"
        ]
    );
    assert_eq!(st.pve_version, PveVersion::V9_1);
}

/// A new volume on a storage without the guest's content type fails before anything is
/// allocated, in PVE's words: qemu-server `API2/Qemu.pm` `$check_storage_access` (400,
/// `storage`: "does not support vm images", create and config), pve-container `API2/LXC.pm`
/// `$check_and_activate_storage` (400, `storage`: "does not support container directories") and
/// `LXC/Config.pm` `update_pct_config` (`die "... does not allow content type 'rootdir'
/// (Container)"`); pve-storage `Status.pm` `download_url` (`die "storage ... is not configured
/// for content-type ..."`).
#[tokio::test]
async fn storage_without_the_content_type_refuses_as_pve() {
    let sim = Sim::of(PveVersion::V8_4).await;
    sim.h.with_state(|st| st.volumes.push(template()));
    let vm = sim
        .post("/nodes/pve1/qemu", &[("vmid", "100"), ("scsi0", "local:4")])
        .await
        .errors();
    assert_eq!(vm["storage"], "storage 'local' does not support vm images");
    let ct = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local:4"),
            ],
        )
        .await
        .errors();
    assert_eq!(
        ct["storage"],
        "storage 'local' does not support container directories"
    );
    // Without a rootfs the container goes to `storage`, which defaults to `local`.
    let default = sim
        .post(
            "/nodes/pve1/lxc",
            &[("vmid", "200"), ("ostemplate", TEMPLATE)],
        )
        .await
        .errors();
    assert_eq!(
        default["storage"],
        "storage 'local' does not support container directories"
    );
    assert!(sim.h.state().guests.is_empty(), "nothing was created");
    assert_eq!(sim.h.state().volumes.len(), 1, "nothing was allocated");

    // A cloud-init drive is not checked: `$check_storage_access` has "nothing to check" for it,
    // and `PVE::Storage::vdisk_alloc` checks no content type.
    sim.create_vm(
        "100",
        &[("scsi0", "local-lvm:4"), ("ide2", "local:cloudinit")],
    )
    .await;
    let config = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(
        config["ide2"]
            .as_str()
            .unwrap()
            .starts_with("local:100/vm-100-cloudinit"),
        "{config}"
    );
    let added = sim
        .put("/nodes/pve1/qemu/100/config", &[("scsi1", "local:1")])
        .await
        .errors();
    assert_eq!(
        added["storage"],
        "storage 'local' does not support vm images"
    );
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:4"),
            ],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let mp = sim
        .put("/nodes/pve1/lxc/200/config", &[("mp0", "local:1,mp=/data")])
        .await
        .fail(500);
    assert_eq!(
        mp,
        "storage 'local' does not allow content type 'rootdir' (Container)"
    );
    // 8.4's installer left `import` off `local`.
    let import = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", "http://127.0.0.1:9/d.qcow2"),
                ("content", "import"),
                ("filename", "d.qcow2"),
            ],
        )
        .await
        .fail(500);
    assert_eq!(
        import,
        "storage 'local' is not configured for content-type 'import'"
    );
}
