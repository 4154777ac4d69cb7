//! Storage list, content list, volume info and delete.

use crate::support::{Sim, enc};
use proxops_pve_sim::Volume;

fn iso() -> Volume {
    Volume {
        node: "pve1".into(),
        storage: "local".into(),
        volid: "local:iso/debian.iso".into(),
        content: "iso".into(),
        format: "iso".into(),
        size: 600 << 20,
        ctime: 1_700_000_000,
        vmid: None,
    }
}

#[tokio::test]
async fn list_and_content() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| st.volumes.push(iso()));
    let all = sim.get("/nodes/pve1/storage").await.ok();
    assert_eq!(all.as_array().unwrap().len(), 2);
    assert_eq!(all[0]["storage"], "local");
    assert_eq!(all[0]["type"], "dir");
    assert_eq!(all[0]["shared"], 0);
    assert_eq!(all[0]["used"], 600u64 << 20);
    let images = sim
        .req("GET", "/nodes/pve1/storage", &[("content", "images")])
        .await
        .ok();
    assert_eq!(images.as_array().unwrap().len(), 1);
    assert_eq!(images[0]["storage"], "local-lvm");
    let content = sim.get("/nodes/pve1/storage/local/content").await.ok();
    assert_eq!(content[0]["volid"], "local:iso/debian.iso");
    assert_eq!(content[0]["format"], "iso");
    assert_eq!(content[0]["content"], "iso");
    assert_eq!(content[0]["ctime"], 1_700_000_000);
    let none = sim
        .req(
            "GET",
            "/nodes/pve1/storage/local/content",
            &[("content", "vztmpl")],
        )
        .await
        .ok();
    assert_eq!(none.as_array().unwrap().len(), 0);
    let info = sim
        .get(&format!(
            "/nodes/pve1/storage/local/content/{}",
            enc("local:iso/debian.iso")
        ))
        .await
        .ok();
    assert_eq!(info["size"], 600u64 << 20);
    assert_eq!(info["format"], "iso");
    let missing = sim.get("/nodes/pve1/storage/nope/content").await.fail(500);
    assert_eq!(missing, "storage 'nope' does not exist");
    let cfg = sim.get("/storage").await.ok();
    assert_eq!(cfg.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn delete_volumes() {
    let sim = Sim::start().await;
    sim.h.with_state(|st| st.volumes.push(iso()));
    sim.create_vm("100", &[("scsi0", "local-lvm:4")]).await;
    let in_use = sim
        .delete(
            &format!(
                "/nodes/pve1/storage/local-lvm/content/{}",
                enc("local-lvm:vm-100-disk-0")
            ),
            &[],
        )
        .await;
    assert_eq!(
        in_use.fail(500),
        "unable to delete 'local-lvm:vm-100-disk-0' - volume is still in use by guest 100"
    );
    // The volume may be given by volname only, and with unescaped slashes.
    let upid = sim
        .delete("/nodes/pve1/storage/local/content/iso/debian.iso", &[])
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":imgdel::"));
    sim.wait_ok(&upid).await;
    assert_eq!(
        sim.get("/nodes/pve1/storage/local/content")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let gone = sim
        .delete(
            &format!(
                "/nodes/pve1/storage/local/content/{}",
                enc("local:iso/debian.iso")
            ),
            &[],
        )
        .await;
    assert_eq!(
        gone.fail(500),
        "volume 'local:iso/debian.iso' does not exist"
    );
}
