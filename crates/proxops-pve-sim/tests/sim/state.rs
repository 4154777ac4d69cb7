//! State: JSON dump and load, a state file across restarts, partial seeds, the debug dump.

use crate::support::{Sim, config, read};
use proxops_pve_sim::{GuestType, State};

#[tokio::test]
async fn dump_and_load_round_trip() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("scsi0", "local-lvm:4"), ("tags", "x")])
        .await;
    let dump = sim.h.dump_state();
    let loaded = State::from_json(&dump).unwrap();
    assert_eq!(loaded, sim.h.state());
    assert_eq!(loaded.guests[&100].config["tags"], "x");
    let resp = sim
        .client
        .get(format!("{}/_sim/state", sim.h.root_url()))
        .send()
        .await
        .unwrap();
    let data = read(resp).await.ok();
    assert_eq!(
        data["guests"]["100"]["config"]["scsi0"],
        "local-lvm:vm-100-disk-0,size=4G"
    );
}

#[tokio::test]
async fn state_file_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    let sim = Sim::with(config().with_state_file(&path).unwrap()).await;
    sim.create_vm("100", &[("name", "keep")]).await;
    assert!(path.exists(), "saved after each change");
    sim.h.shutdown().await.unwrap();
    let sim = Sim::with(config().with_state_file(&path).unwrap()).await;
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.ok()["name"],
        "keep"
    );
    assert!(
        !sim.get("/nodes/pve1/tasks")
            .await
            .ok()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn partial_seed_and_interrupted_tasks() {
    let seed = r#"{
        "nodes": [{"node": "a", "storages": [{"storage": "shared", "type": "nfs", "shared": true, "content": ["images", "rootdir"]}]}],
        "guests": {"300": {"type": "lxc", "node": "a", "status": "running", "config": {"hostname": "ct", "tags": "t1;t2"}}},
        "tasks": [{"upid": "UPID:a:00001000:00000001:65000000:vzstart:300:root@pam:", "node": "a", "type": "vzstart", "id": "300", "user": "root@pam", "status": "running", "starttime": 1694498816}]
    }"#;
    let state = State::from_json(seed).unwrap();
    assert_eq!(state.guests[&300].kind, GuestType::Lxc);
    let mut cfg = config();
    cfg.state = state;
    let sim = Sim::with(cfg).await;
    let list = sim.get("/nodes/a/lxc").await.ok();
    assert_eq!(list[0]["vmid"], 300);
    assert_eq!(list[0]["status"], "running");
    assert_eq!(list[0]["tags"], "t1;t2");
    let storages = sim.get("/nodes/a/storage").await.ok();
    assert_eq!(storages[0]["shared"], 1);
    let t = sim
        .get("/nodes/a/tasks/UPID:a:00001000:00000001:65000000:vzstart:300:root@pam:/status")
        .await
        .ok();
    assert_eq!(t["exitstatus"], "unexpected status");
    assert!(State::from_json("{not json").is_err());
}
