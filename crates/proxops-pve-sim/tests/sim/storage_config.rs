//! The storage configuration written and read through `/storage[/{storage}]`, as pve-storage
//! `src/PVE/API2/Storage/Config.pm` (`create`, `update`, `read`, `index`, `delete`) and the
//! plugins' `options` define it: every option given is read back, secrets never are.

use crate::support::{Sim, config};
use proxops_pve_sim::AclEntry;
use serde_json::json;

#[tokio::test]
async fn options_given_are_read_back_and_secrets_are_not() {
    let sim = Sim::start().await;
    sim.post(
        "/storage",
        &[
            ("storage", "backup"),
            ("type", "pbs"),
            ("server", "10.0.0.9"),
            ("datastore", "main"),
            ("username", "pve@pbs"),
            ("password", "hunter2"),
            ("fingerprint", "AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99"),
            ("port", "8007"),
            ("prune-backups", "keep-last=3"),
        ],
    )
    .await
    .ok();
    let got = sim.get("/storage/backup").await.ok();
    assert_eq!(got["server"], "10.0.0.9");
    assert_eq!(got["datastore"], "main");
    assert_eq!(got["username"], "pve@pbs");
    assert_eq!(got["port"], 8007);
    assert_eq!(got["prune-backups"], "keep-last=3");
    assert_eq!(got["content"], "backup");
    assert_eq!(got["shared"], 1);
    assert!(got.get("password").is_none(), "{got}");
    assert!(!got.to_string().contains("hunter2"));

    sim.post(
        "/storage",
        &[
            ("storage", "nas"),
            ("type", "nfs"),
            ("server", "10.0.0.5"),
            ("export", "/srv/pve"),
            ("options", "vers=4.2"),
        ],
    )
    .await
    .ok();
    let nas = sim.get("/storage/nas").await.ok();
    // NFSPlugin `check_config`: the mount point defaults to /mnt/pve/<storage>.
    assert_eq!(nas["path"], "/mnt/pve/nas");
    assert_eq!(nas["export"], "/srv/pve");
    assert_eq!(nas["options"], "vers=4.2");
    let list = sim.get("/storage").await.ok();
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["storage"] == "backup")
        .unwrap()
        .clone();
    assert_eq!(row["datastore"], "main");
    assert!(row.get("password").is_none());
    let ids: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["storage"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "storage_ids sorts");
    assert_eq!(
        sim.post(
            "/storage",
            &[
                ("storage", "xx"),
                ("type", "nfs"),
                ("server", "a"),
                ("export", "/e"),
                ("shared", "1")
            ]
        )
        .await
        .fail(500),
        "unexpected property 'shared'"
    );
}

#[tokio::test]
async fn updates_follow_the_plugin_options() {
    let sim = Sim::start().await;
    sim.post(
        "/storage",
        &[
            ("storage", "fast"),
            ("type", "dir"),
            ("path", "/fast"),
            ("mkdir", "0"),
        ],
    )
    .await
    .ok();
    let got = sim.get("/storage/fast").await.ok();
    assert_eq!(got["mkdir"], 0);
    let digest = got["digest"].as_str().unwrap().to_owned();
    let out = sim
        .put(
            "/storage/fast",
            &[
                ("content", "iso,backup"),
                ("disable", "1"),
                ("prune-backups", "keep-daily=7"),
                ("delete", "mkdir"),
                ("digest", &digest),
            ],
        )
        .await
        .ok();
    assert_eq!(out, json!({ "storage": "fast", "type": "dir" }));
    let got = sim.get("/storage/fast").await.ok();
    assert_eq!(got["content"], "backup,iso");
    assert_eq!(got["disable"], 1);
    assert_eq!(got["prune-backups"], "keep-daily=7");
    assert!(got.get("mkdir").is_none(), "{got}");
    assert_ne!(got["digest"], digest.as_str());
    for (params, message) in [
        (
            vec![("disable", "0"), ("digest", digest.as_str())],
            "update storage failed: detected modified configuration - file changed by other user? Try again.",
        ),
        (
            vec![("server", "10.0.0.1")],
            "update storage failed: unexpected property 'server'",
        ),
        (
            vec![("delete", "path")],
            "update storage failed: unable to delete required option 'path'",
        ),
        (
            vec![("delete", "vgname")],
            "update storage failed: no such option 'vgname'",
        ),
        (
            vec![("disable", "0"), ("delete", "disable")],
            "update storage failed: cannot set and delete property 'disable' at the same time!",
        ),
    ] {
        assert_eq!(sim.put("/storage/fast", &params).await.fail(500), message);
    }
    assert_eq!(
        sim.put("/storage/nope", &[("disable", "1")])
            .await
            .fail(500),
        "update storage failed: storage 'nope' does not exist"
    );
    sim.post(
        "/storage",
        &[
            ("storage", "nas"),
            ("type", "nfs"),
            ("server", "a"),
            ("export", "/e"),
        ],
    )
    .await
    .ok();
    assert_eq!(
        sim.put("/storage/nas", &[("server", "b")]).await.fail(500),
        "update storage failed: can't change value of fixed parameter 'server'"
    );
    // `path` is fixed for every plugin that has it: the update schema has no such parameter.
    assert!(
        sim.put("/storage/fast", &[("path", "/x")])
            .await
            .errors()
            .get("path")
            .is_some()
    );
    // `delete=content` falls back to the plugin's default.
    sim.put("/storage/fast", &[("delete", "content")])
        .await
        .ok();
    assert_eq!(
        sim.get("/storage/fast").await.ok()["content"],
        "images,rootdir"
    );
}

#[tokio::test]
async fn nodes_move_a_storage_and_a_deleted_one_loses_its_acl() {
    let mut cfg = config();
    cfg.state.nodes.push(proxops_pve_sim::Node {
        node: "pve2".into(),
        ..Default::default()
    });
    cfg.acl.push(AclEntry {
        principal: "ops@pve".into(),
        path: "/storage/fast".into(),
        privs: vec!["Datastore.Audit".into()],
        propagate: true,
    });
    let sim = Sim::with(cfg).await;
    sim.post(
        "/storage",
        &[
            ("storage", "fast"),
            ("type", "dir"),
            ("path", "/fast"),
            ("nodes", "pve1"),
        ],
    )
    .await
    .ok();
    let on = |n: &'static str| {
        let sim = &sim;
        async move {
            sim.get(&format!("/nodes/{n}/storage"))
                .await
                .ok()
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["storage"] == "fast")
        }
    };
    assert!(on("pve1").await && !on("pve2").await);
    sim.put("/storage/fast", &[("nodes", "pve2")]).await.ok();
    assert!(!on("pve1").await && on("pve2").await);
    assert_eq!(sim.get("/storage/fast").await.ok()["nodes"], "pve2");
    sim.put("/storage/fast", &[("delete", "nodes")]).await.ok();
    assert!(on("pve1").await && on("pve2").await);
    assert!(sim.get("/storage/fast").await.ok().get("nodes").is_none());

    // A guest's disk on it does not keep it (PVE does not check); its ACL paths go.
    sim.create_vm("100", &[("scsi0", "fast:1")]).await;
    sim.delete("/storage/fast", &[]).await.ok();
    let acl = sim.get("/access/acl").await.ok();
    assert!(!acl.to_string().contains("/storage/fast"), "{acl}");
    let conf = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert!(conf["scsi0"].as_str().unwrap().starts_with("fast:"));
}
