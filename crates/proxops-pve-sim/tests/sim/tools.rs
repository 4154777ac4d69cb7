//! What common PVE tools call beyond a lifecycle (issue 22): uploads and appliance downloads,
//! firewall and cluster-join reads, node networks with a start refused on a missing bridge, the
//! schema's minimum inside a property string, and LXC create's simple-number rootfs.

use crate::support::Sim;
use proxops_pve_sim::Volume;
use serde_json::Value;

const BOUNDARY: &str = "----proxops-test-boundary";

/// A multipart body as proxmoxer (requests) sends an upload: form fields, then the file.
fn multipart(fields: &[(&str, &str)], filename: &str, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in fields {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn upload(
    sim: &Sim,
    storage: &str,
    query: &str,
    body: Vec<u8>,
    ctype: &str,
) -> crate::support::Resp {
    let url = sim.url(&format!("/nodes/pve1/storage/{storage}/upload{query}"));
    let resp = sim
        .client
        .post(url)
        .header("Authorization", sim.h.token.header())
        .header("Content-Type", ctype)
        .body(body)
        .send()
        .await
        .unwrap();
    crate::support::read(resp).await
}

fn mp_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

async fn log(sim: &Sim, upid: &Value) -> Vec<String> {
    let upid = upid.as_str().unwrap();
    let rows = sim.get(&format!("/nodes/pve1/tasks/{upid}/log")).await.ok();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["t"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn an_upload_lands_on_the_storage_with_its_checksum_checked() {
    let sim = Sim::start().await;
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&data))
    };
    let fields = [
        ("content", "iso"),
        ("checksum-algorithm", "sha256"),
        ("checksum", sha.as_str()),
    ];
    let upid = upload(
        &sim,
        "local",
        "",
        multipart(&fields, "my image (1).iso", &data),
        &mp_type(),
    )
    .await
    .ok();
    assert!(upid.as_str().unwrap().contains(":imgcopy::"), "{upid}");
    sim.wait_ok(&upid).await;
    let lines = log(&sim, &upid).await;
    assert!(
        lines
            .iter()
            .any(|l| l == "calculating checksum...OK, checksum verified"),
        "{lines:?}"
    );
    // normalize_content_filename: every unsafe character becomes `_`.
    let vol = sim.h.with_state(|st| {
        st.volumes
            .iter()
            .find(|v| v.volid == "local:iso/my_image__1_.iso")
            .cloned()
    });
    let vol = vol.expect("the uploaded ISO");
    assert_eq!((vol.size, vol.format.as_str()), (200_000, "iso"));

    // A wrong checksum fails the task; nothing lands.
    let fields = [
        ("content", "iso"),
        ("checksum-algorithm", "sha256"),
        ("checksum", "00"),
    ];
    let upid = upload(
        &sim,
        "local",
        "",
        multipart(&fields, "bad.iso", &data),
        &mp_type(),
    )
    .await
    .ok();
    let st = sim.wait(&upid).await;
    assert!(
        st["exitstatus"]
            .as_str()
            .unwrap()
            .starts_with(&format!("checksum mismatch: got '{sha}' != expect '00'")),
        "{st}"
    );
    assert!(
        sim.h
            .with_state(|st| !st.volumes.iter().any(|v| v.volid == "local:iso/bad.iso"))
    );
}

#[tokio::test]
async fn uploads_are_refused_as_pve_refuses_them() {
    let sim = Sim::start().await;
    let iso = |name: &str| multipart(&[("content", "iso")], name, b"x");
    let wrong = upload(&sim, "local", "", iso("notes.txt"), &mp_type()).await;
    assert_eq!(wrong.status, 400);
    assert_eq!(wrong.body["errors"]["filename"], "wrong file extension");
    let lvm = upload(&sim, "local-lvm", "", iso("a.iso"), &mp_type())
        .await
        .fail(500);
    assert_eq!(lvm, "can't upload to storage type 'lvmthin'");
    let form = upload(
        &sim,
        "local",
        "",
        b"content=iso".to_vec(),
        "application/x-www-form-urlencoded",
    )
    .await
    .fail(500);
    assert_eq!(
        form,
        "upload 'Content-Type 'application/x-www-form-urlencoded' not implemented"
    );
    let tmp = upload(
        &sim,
        "local",
        "?tmpfilename=/var/tmp/pveupload-00",
        iso("a.iso"),
        &mp_type(),
    )
    .await
    .fail(500);
    assert_eq!(
        tmp,
        "'tmpfilename' query parameter is not allowed for file uploads"
    );
    let field = multipart(&[], "a.iso", b"x");
    let field = String::from_utf8(field)
        .unwrap()
        .replace("name=\"filename\"", "name=\"file\"");
    let msg = upload(&sim, "local", "", field.into_bytes(), &mp_type())
        .await
        .fail(500);
    assert_eq!(
        msg,
        "wrong field name 'file' for file upload, expected 'filename'"
    );
    // A storage without the content type (`local` has no snippets upload; add one without iso).
    sim.h.with_state(|st| {
        let mut s = st.nodes[0].storages[0].clone();
        s.storage = "tpl".into();
        s.content = vec!["vztmpl".into()];
        st.nodes[0].storages.push(s);
    });
    let msg = upload(&sim, "tpl", "", iso("a.iso"), &mp_type())
        .await
        .fail(500);
    assert_eq!(msg, "storage 'tpl' does not support 'iso' content");
    // A plain body over pveproxy's 512 KiB is refused before it is read.
    let big = "x".repeat(600 * 1024);
    let msg = sim
        .put(
            "/nodes/pve1/qemu/1/config",
            &[("description", big.as_str())],
        )
        .await
        .fail(501);
    assert_eq!(msg, "for data too large");
}

#[tokio::test]
async fn appliance_templates_are_listed_and_downloaded() {
    let sim = Sim::start().await;
    let list = sim.get("/nodes/pve1/aplinfo").await.ok();
    let deb = list
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["template"] == "debian-12-standard_12.12-1_amd64.tar.zst")
        .cloned()
        .expect("debian 12 in the index");
    assert_eq!(deb["headline"], "Debian 12 Bookworm (standard)");
    assert_eq!(
        deb["location"],
        "http://download.proxmox.com/images/system/debian-12-standard_12.12-1_amd64.tar.zst"
    );
    assert_eq!(deb["os"], "debian-12");
    let none = sim
        .post(
            "/nodes/pve1/aplinfo",
            &[("storage", "local"), ("template", "nope.tar.zst")],
        )
        .await;
    assert_eq!(none.status, 400);
    assert_eq!(none.body["errors"]["template"], "no such template");
    let lvm = sim
        .post(
            "/nodes/pve1/aplinfo",
            &[
                ("storage", "local-lvm"),
                ("template", "debian-12-standard_12.12-1_amd64.tar.zst"),
            ],
        )
        .await
        .fail(500);
    assert_eq!(lvm, "storage 'local-lvm' does not support templates");
}

#[tokio::test]
async fn an_offline_appliance_download_makes_the_template() {
    let mut cfg = crate::support::config();
    cfg.offline_downloads = true;
    let sim = Sim::with(cfg).await;
    let t = "alpine-3.22-default_20250617_amd64.tar.xz";
    let upid = sim
        .post(
            "/nodes/pve1/aplinfo",
            &[("storage", "local"), ("template", t)],
        )
        .await
        .ok();
    assert!(
        upid.as_str().unwrap().contains(&format!(":download:{t}:")),
        "{upid}"
    );
    sim.wait_ok(&upid).await;
    let content = sim
        .req(
            "GET",
            "/nodes/pve1/storage/local/content",
            &[("content", "vztmpl")],
        )
        .await
        .ok();
    let row = content
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["volid"] == format!("local:vztmpl/{t}"))
        .cloned()
        .expect("the template");
    assert_eq!(row["format"], "txz");
}

#[tokio::test]
async fn firewall_and_join_reads_answer_as_an_unconfigured_cluster() {
    let sim = Sim::start().await;
    let empty_digest = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
    for path in [
        "/cluster/firewall/options",
        "/nodes/pve1/firewall/options",
        "/nodes/pve1/qemu/100/firewall/options",
        "/nodes/pve1/lxc/101/firewall/options",
    ] {
        assert_eq!(
            sim.get(path).await.ok(),
            serde_json::json!({ "digest": empty_digest }),
            "{path}"
        );
    }
    for path in [
        "/cluster/firewall/rules",
        "/cluster/firewall/groups",
        "/cluster/firewall/aliases",
        "/cluster/firewall/ipset",
        "/nodes/pve1/firewall/rules",
        "/nodes/pve1/qemu/100/firewall/rules",
        "/nodes/pve1/lxc/101/firewall/ipset",
    ] {
        assert_eq!(sim.get(path).await.ok(), serde_json::json!([]), "{path}");
    }
    let join = sim.get("/cluster/config/join").await.ok();
    assert_eq!(join["preferred_node"], "pve1");
    assert_eq!(join["totem"]["cluster_name"], "sim");
    let node = &join["nodelist"][0];
    assert_eq!(
        (node["name"].as_str(), node["nodeid"].as_str()),
        (Some("pve1"), Some("1"))
    );
    assert_eq!(node["pve_fp"], sim.h.fingerprint.as_str());
    assert_eq!(join["config_digest"].as_str().unwrap().len(), 40);
    let msg = sim
        .req("GET", "/cluster/config/join", &[("node", "pve9")])
        .await
        .fail(500);
    assert_eq!(msg, "unknown node 'pve9'");
}

#[tokio::test]
async fn a_guest_on_a_missing_bridge_does_not_start() {
    let sim = Sim::start().await;
    let net = sim.get("/nodes/pve1/network").await.ok();
    let vmbr0 = net
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["iface"] == "vmbr0")
        .cloned()
        .unwrap();
    assert_eq!(
        (vmbr0["type"].as_str(), vmbr0["address"].as_str()),
        (Some("bridge"), Some("127.0.0.1"))
    );
    assert!(vmbr0.get("gateway").is_some());
    sim.create_vm("100", &[("net0", "virtio,bridge=vmbr7")])
        .await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    let st = sim.wait(&upid).await;
    assert_eq!(st["exitstatus"], "start failed: QEMU exited with code 1");
    assert!(
        log(&sim, &upid)
            .await
            .contains(&"bridge 'vmbr7' does not exist".to_string())
    );
    assert_eq!(
        sim.h.with_state(|st| st.guests[&100].status.clone()),
        "stopped"
    );
    // Once the node has the bridge, it starts.
    sim.h
        .with_state(|st| st.nodes[0].bridges.push("vmbr7".into()));
    sim.wait_ok(
        &sim.post("/nodes/pve1/qemu/100/status/start", &[])
            .await
            .ok(),
    )
    .await;

    // A container, whose rootfs given as a number goes to `storage`.
    let tpl = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: tpl.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        })
    });
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "101"),
                ("ostemplate", tpl),
                ("storage", "local-lvm"),
                ("rootfs", "3"),
                ("net0", "name=eth0,bridge=vmbr8"),
            ],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let conf = sim.get("/nodes/pve1/lxc/101/config").await.ok();
    assert!(
        conf["rootfs"]
            .as_str()
            .unwrap()
            .starts_with("local-lvm:vm-101-disk-0"),
        "{conf}"
    );
    let upid = sim.post("/nodes/pve1/lxc/101/status/start", &[]).await.ok();
    let st = sim.wait(&upid).await;
    assert_eq!(st["exitstatus"], "startup for container '101' failed");
}

#[tokio::test]
async fn memory_below_the_schema_minimum_is_refused() {
    let sim = Sim::start().await;
    let r = sim
        .post("/nodes/pve1/qemu", &[("vmid", "100"), ("memory", "8")])
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let msg = r.body["errors"]["memory"].as_str().unwrap().to_string();
    assert!(
        msg.contains("current: value must have a minimum value of 16"),
        "{msg}"
    );
    let r = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("memory", "current=15")],
        )
        .await;
    assert_eq!(r.status, 400);
    sim.create_vm("100", &[("memory", "16")]).await;
}

#[tokio::test]
async fn a_container_volume_moves_to_another_storage() {
    let sim = Sim::start().await;
    let tpl = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: tpl.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        });
        let mut s = st.nodes[0].storages[1].clone();
        s.storage = "fast".into();
        st.nodes[0].storages.push(s);
    });
    let upid = sim
        .post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "101"),
                ("ostemplate", tpl),
                ("rootfs", "local-lvm:2"),
            ],
        )
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let path = "/nodes/pve1/lxc/101/move_volume";
    let r = sim.post(path, &[("volume", "rootfs")]).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"]["storage"],
        "both 'storage' and 'target-vmid' missing, either needs to be set"
    );
    let msg = sim
        .post(path, &[("volume", "unused0"), ("storage", "fast")])
        .await
        .fail(500);
    assert!(msg.starts_with("cannot move volume 'unused0'"), "{msg}");
    let upid = sim
        .post(path, &[("volume", "rootfs"), ("storage", "fast")])
        .await
        .ok();
    assert!(
        upid.as_str().unwrap().contains(":move_volume:101:"),
        "{upid}"
    );
    sim.wait_ok(&upid).await;
    let conf = sim.get("/nodes/pve1/lxc/101/config").await.ok();
    assert!(
        conf["rootfs"]
            .as_str()
            .unwrap()
            .starts_with("fast:vm-101-disk-0"),
        "{conf}"
    );
    assert_eq!(conf["unused0"], "local-lvm:vm-101-disk-0");
    assert!(conf.get("lock").is_none(), "{conf}");
    // A running container's volumes stay where they are.
    sim.wait_ok(&sim.post("/nodes/pve1/lxc/101/status/start", &[]).await.ok())
        .await;
    let msg = sim
        .post(
            path,
            &[
                ("volume", "rootfs"),
                ("storage", "local-lvm"),
                ("delete", "1"),
            ],
        )
        .await
        .fail(500);
    assert_eq!(msg, "cannot move volumes of a running container");
}
