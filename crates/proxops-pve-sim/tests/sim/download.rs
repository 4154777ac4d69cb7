//! download-url against a loopback HTTP server: the file is really fetched, extensions checked
//! per content type, checksums verified, task type `download` with the filename as id.

use crate::support::Sim;
use proxops_test_support::serve_files as serve;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

#[tokio::test]
async fn downloads_iso_with_checksum() {
    let iso = vec![7u8; 100_000];
    let srv = serve(HashMap::from([("/debian.iso".to_string(), iso.clone())])).await;
    let sim = Sim::start().await;
    let sum = hex::encode(Sha256::digest(&iso));
    let url = format!("{}/debian.iso", srv.base);
    let upid = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "iso"),
                ("filename", "debian.iso"),
                ("checksum", &sum),
                ("checksum-algorithm", "sha256"),
            ],
        )
        .await
        .ok();
    let u = upid.as_str().unwrap();
    assert!(u.contains(":download:debian.iso:"), "{u}");
    sim.wait_ok(&upid).await;
    let content = sim
        .req(
            "GET",
            "/nodes/pve1/storage/local/content",
            &[("content", "iso")],
        )
        .await
        .ok();
    assert_eq!(content[0]["volid"], "local:iso/debian.iso");
    assert_eq!(content[0]["size"], 100_000);
    assert_eq!(content[0]["format"], "iso");
    let log = sim
        .get(&format!("/nodes/pve1/tasks/{}/log", crate::support::enc(u)))
        .await
        .ok();
    let text: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["t"].as_str().unwrap())
        .collect();
    assert!(text.iter().any(|l| l.starts_with("downloading ")));
    assert_eq!(*text.last().unwrap(), "TASK OK");
    // It exists now.
    let again = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "iso"),
                ("filename", "debian.iso"),
            ],
        )
        .await;
    assert_eq!(
        again.fail(500),
        "refusing to override existing file '/var/lib/vz/template/iso/debian.iso'"
    );
}

#[tokio::test]
async fn checksum_mismatch_fails_the_task_and_other_algorithms_work() {
    let data = b"hello world".to_vec();
    let srv = serve(HashMap::from([
        ("/a.iso".to_string(), data.clone()),
        ("/b.iso".to_string(), data.clone()),
    ]))
    .await;
    let sim = Sim::start().await;
    let url = format!("{}/a.iso", srv.base);
    let bad = "0".repeat(64);
    let upid = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "iso"),
                ("filename", "a.iso"),
                ("checksum", &bad),
                ("checksum-algorithm", "sha256"),
            ],
        )
        .await
        .ok();
    let st = sim.wait(&upid).await;
    let want = format!(
        "checksum mismatch: got '{}' != expect '{bad}'",
        hex::encode(Sha256::digest(&data))
    );
    assert_eq!(st["exitstatus"], want.as_str());
    assert_eq!(
        sim.get("/nodes/pve1/storage/local/content")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    for (alg, sum) in [
        ("md5", "5eb63bbbe01eeed093cb22bb8f5acdc3"),
        ("sha1", "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"),
    ] {
        let url = format!("{}/b.iso", srv.base);
        let name = format!("b-{alg}.iso");
        let upid = sim
            .post(
                "/nodes/pve1/storage/local/download-url",
                &[
                    ("url", &url),
                    ("content", "iso"),
                    ("filename", &name),
                    ("checksum", sum),
                    ("checksum-algorithm", alg),
                ],
            )
            .await
            .ok();
        sim.wait_ok(&upid).await;
    }
    let upid = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", &format!("{}/missing.iso", srv.base)),
                ("content", "iso"),
                ("filename", "m.iso"),
            ],
        )
        .await
        .ok();
    assert_eq!(
        sim.wait(&upid).await["exitstatus"],
        "download failed: 404 Not Found"
    );
}

#[tokio::test]
async fn parameter_and_storage_rules() {
    let sim = Sim::start().await;
    let url = "http://127.0.0.1:9/x";
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", url),
                ("content", "iso"),
                ("filename", "x.iso"),
                ("checksum", "ab"),
            ],
        )
        .await
        .errors();
    assert_eq!(
        e["checksum-algorithm"],
        "missing property - 'checksum' requires this property"
    );
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[("url", url), ("content", "iso"), ("filename", "x.qcow2")],
        )
        .await
        .errors();
    assert_eq!(e["filename"], "wrong file extension");
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[("url", url), ("content", "vztmpl"), ("filename", "x.iso")],
        )
        .await
        .errors();
    assert_eq!(e["filename"], "wrong file extension");
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[
                ("url", "ftp://x"),
                ("content", "iso"),
                ("filename", "x.iso"),
            ],
        )
        .await
        .errors();
    assert_eq!(e["url"], "value does not match the regex pattern");
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[("url", url), ("content", "images"), ("filename", "x.iso")],
        )
        .await
        .errors();
    assert!(e["content"].as_str().unwrap().contains("enumeration"));
    let lvm = sim
        .post(
            "/nodes/pve1/storage/local-lvm/download-url",
            &[("url", url), ("content", "iso"), ("filename", "x.iso")],
        )
        .await;
    assert_eq!(
        lvm.fail(500),
        "can't upload to storage type 'lvmthin', not a file based storage!"
    );
    sim.h
        .with_state(|st| st.nodes[0].storages[0].content.retain(|c| c != "import"));
    // pve-storage `src/PVE/API2/Storage/Status.pm` `download_url` dies (no parameter error).
    let e = sim
        .post(
            "/nodes/pve1/storage/local/download-url",
            &[("url", url), ("content", "import"), ("filename", "x.qcow2")],
        )
        .await
        .fail(500);
    assert_eq!(
        e,
        "storage 'local' is not configured for content-type 'import'"
    );
}

#[tokio::test]
async fn vztmpl_and_import_formats_then_import_from() {
    let srv = serve(HashMap::from([
        ("/t.tar.zst".to_string(), vec![1u8; 10]),
        ("/d.qcow2".to_string(), vec![2u8; 20]),
    ]))
    .await;
    let sim = Sim::start().await;
    for (content, file) in [("vztmpl", "debian-12.tar.zst"), ("import", "disk.qcow2")] {
        let path = if content == "vztmpl" {
            "/t.tar.zst"
        } else {
            "/d.qcow2"
        };
        let upid = sim
            .post(
                "/nodes/pve1/storage/local/download-url",
                &[
                    ("url", &format!("{}{path}", srv.base)),
                    ("content", content),
                    ("filename", file),
                ],
            )
            .await
            .ok();
        sim.wait_ok(&upid).await;
    }
    let content = sim.get("/nodes/pve1/storage/local/content").await.ok();
    let find = |v: &str| {
        content
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["volid"] == v)
            .cloned()
            .unwrap()
    };
    assert_eq!(find("local:vztmpl/debian-12.tar.zst")["format"], "tzst");
    assert_eq!(find("local:import/disk.qcow2")["format"], "qcow2");
    sim.create_vm(
        "100",
        &[("scsi0", "local-lvm:0,import-from=local:import/disk.qcow2")],
    )
    .await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["scsi0"],
        "local-lvm:vm-100-disk-0,size=20"
    );
}
