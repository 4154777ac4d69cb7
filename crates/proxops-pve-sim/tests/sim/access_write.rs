//! The `/access` writes and reads beside the lists (`PUT /access/acl`, `GET
//! /access/users/{userid}`), the ticket's capabilities, `POST /storage`, `PUT
//! /nodes/{node}/dns` and `GET /cluster/config/qdevice`, as PVE serves them.

use crate::support::{Auth, PASSWORD, Sim, config};
use proxops_pve_sim::{ApiToken, User};

async fn with_ops() -> (Sim, ApiToken) {
    let mut cfg = config();
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.users.push(User {
        userid: "ops@pve".into(),
        password: PASSWORD.into(),
    });
    (Sim::with(cfg).await, ops)
}

#[tokio::test]
async fn acl_updates_grant_built_in_roles_to_users_and_tokens() {
    let (sim, ops) = with_ops().await;
    sim.create_vm("100", &[]).await;
    let token = Auth::Header(ops.header());
    let read = || async {
        sim.send("GET", "/nodes/pve1/qemu/100/config", &[], &token)
            .await
            .status
    };
    assert_eq!(read().await, 403);
    // pve-access-control `update_acl`: unknown roles, users and tokens are refused under the
    // user.cfg lock.
    for (params, message) in [
        (
            vec![("path", "/vms"), ("roles", "Nope"), ("users", "ops@pve")],
            "ACL update failed: role 'Nope' does not exist",
        ),
        (
            vec![
                ("path", "/vms"),
                ("roles", "PVEAuditor"),
                ("users", "who@pve"),
            ],
            "ACL update failed: user 'who@pve' does not exist",
        ),
        (
            vec![
                ("path", "/vms"),
                ("roles", "PVEAuditor"),
                ("tokens", "ops@pve!x"),
            ],
            "ACL update failed: no such token 'x' for user 'ops@pve'",
        ),
    ] {
        assert_eq!(sim.put("/access/acl", &params).await.fail(500), message);
    }
    // A privilege-separated token needs the grant and its user's.
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEAuditor"),
            ("tokens", "ops@pve!ci"),
        ],
    )
    .await
    .ok();
    assert_eq!(read().await, 403);
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEAuditor"),
            ("users", "ops@pve"),
        ],
    )
    .await
    .ok();
    assert_eq!(read().await, 200);
    let acl = sim.get("/access/acl").await.ok();
    assert!(
        acl.as_array()
            .unwrap()
            .iter()
            .all(|r| r["roleid"] == "PVEAuditor" && r["path"] == "/vms"),
        "{acl}"
    );
    let roles = sim.get("/access/roles").await.ok();
    assert!(
        roles
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["roleid"] == "PVEVMAdmin" && r["special"] == 1),
        "{roles}"
    );
    // Revoked: gone again.
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEAuditor"),
            ("users", "ops@pve"),
            ("delete", "1"),
        ],
    )
    .await
    .ok();
    assert_eq!(read().await, 403);
    // Changing permissions needs Permissions.Modify (or the path's allocation privilege).
    let denied = sim
        .send(
            "PUT",
            "/access/acl",
            &[
                ("path", "/"),
                ("roles", "Administrator"),
                ("tokens", "ops@pve!ci"),
            ],
            &token,
        )
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/, Permissions.Modify)"
    );
}

#[tokio::test]
async fn a_user_reads_with_its_tokens_and_a_ticket_carries_its_capabilities() {
    let (sim, _) = with_ops().await;
    let user = sim.get("/access/users/ops@pve").await.ok();
    assert_eq!(user["tokens"]["ci"]["privsep"], 1, "{user}");
    assert_eq!(user["enable"], 1);
    let missing = sim.get("/access/users/who@pve").await.fail(500);
    assert_eq!(missing, "no such user ('who@pve')");
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEVMUser"),
            ("users", "ops@pve"),
        ],
    )
    .await
    .ok();
    let login = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "ops@pve"), ("password", PASSWORD)],
            &Auth::None,
        )
        .await
        .ok();
    let cap = &login["cap"];
    assert_eq!(cap["vms"]["VM.PowerMgmt"], 1, "{cap}");
    assert!(cap["vms"].get("VM.Allocate").is_none(), "{cap}");
    assert_eq!(cap["storage"], serde_json::json!({}));
    let root = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "root@pam"), ("password", PASSWORD)],
            &Auth::None,
        )
        .await
        .ok();
    assert_eq!(root["cap"]["dc"]["Sys.Modify"], 1, "{}", root["cap"]);
}

#[tokio::test]
async fn storages_are_added_with_their_plugins_defaults() {
    let sim = Sim::start().await;
    // `export` is optional in the schema (a property of several plugins); the NFS plugin's
    // `check_config` requires it.
    let missing = sim
        .post(
            "/storage",
            &[("storage", "nas"), ("type", "nfs"), ("server", "10.0.0.5")],
        )
        .await
        .fail(500);
    assert_eq!(missing, "missing value for required option 'export'");
    sim.post(
        "/storage",
        &[
            ("storage", "nas"),
            ("type", "nfs"),
            ("server", "10.0.0.5"),
            ("export", "/srv/pve"),
            ("content", "iso,backup"),
        ],
    )
    .await
    .ok();
    let dup = sim
        .post(
            "/storage",
            &[("storage", "nas"), ("type", "dir"), ("path", "/x")],
        )
        .await
        .fail(500);
    assert_eq!(
        dup,
        "create storage failed: storage ID 'nas' already defined"
    );
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
    let list = sim.get("/storage").await.ok();
    let row = |id: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|r| r["storage"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(row("nas")["shared"], 1);
    assert_eq!(row("nas")["content"], "iso,backup");
    assert_eq!(row("fast")["content"], "images,rootdir");
    assert_eq!(row("fast")["nodes"], "pve1");
}

#[tokio::test]
async fn dns_is_written_and_the_qdevice_read_is_empty() {
    let sim = Sim::start().await;
    let missing = sim
        .put("/nodes/pve1/dns", &[("dns1", "1.1.1.1")])
        .await
        .errors();
    assert_eq!(
        missing["search"],
        "property is missing and it is not optional"
    );
    sim.put(
        "/nodes/pve1/dns",
        &[
            ("search", "example.org"),
            ("dns1", "9.9.9.9"),
            ("dns2", "1.1.1.1"),
        ],
    )
    .await
    .ok();
    assert_eq!(
        sim.get("/nodes/pve1/dns").await.ok(),
        serde_json::json!({ "search": "example.org", "dns1": "9.9.9.9", "dns2": "1.1.1.1" })
    );
    assert_eq!(
        sim.get("/cluster/config/qdevice").await.ok(),
        serde_json::json!({})
    );
}

// pve-access-control `User.pm` `create_user`, `update_user`, `delete_user` and
// `AccessControl.pm` `change_password`.
#[tokio::test]
async fn users_are_created_updated_logged_in_and_deleted() {
    let (sim, ops) = with_ops().await;
    sim.post(
        "/access/users",
        &[
            ("userid", "dev@pve"),
            ("password", "first-password"),
            ("comment", "developer"),
        ],
    )
    .await
    .ok();
    let dup = sim
        .post("/access/users", &[("userid", "dev@pve")])
        .await
        .fail(500);
    assert_eq!(dup, "create user failed: user 'dev@pve' already exists");
    let login = |password: &'static str| {
        let sim = &sim;
        async move {
            sim.send(
                "POST",
                "/access/ticket",
                &[("username", "dev@pve"), ("password", password)],
                &Auth::None,
            )
            .await
            .status
        }
    };
    assert_eq!(login("first-password").await, 200);
    sim.put(
        "/access/users/dev@pve",
        &[("lastname", "Doe"), ("comment", "lead")],
    )
    .await
    .ok();
    let user = sim.get("/access/users/dev@pve").await.ok();
    assert_eq!(
        (user["comment"].as_str(), user["lastname"].as_str()),
        (Some("lead"), Some("Doe"))
    );
    let missing = sim
        .put("/access/users/who@pve", &[("comment", "x")])
        .await
        .fail(500);
    assert_eq!(missing, "update user failed: no such user ('who@pve')");
    // Tokens may not change passwords (`allowtoken => 0`); root@pam may change anyone's.
    let token = sim
        .send(
            "PUT",
            "/access/password",
            &[("userid", "dev@pve"), ("password", "second-password")],
            &Auth::Header(ops.header()),
        )
        .await;
    assert_eq!(token.status, 403);
    let root = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "root@pam"), ("password", PASSWORD)],
            &Auth::None,
        )
        .await
        .ok();
    let root = Auth::Ticket {
        ticket: root["ticket"].as_str().unwrap().into(),
        csrf: Some(root["CSRFPreventionToken"].as_str().unwrap().into()),
    };
    sim.send(
        "PUT",
        "/access/password",
        &[("userid", "dev@pve"), ("password", "second-password")],
        &root,
    )
    .await
    .ok();
    assert_eq!(login("first-password").await, 401);
    assert_eq!(login("second-password").await, 200);
    // Deleting takes the user's grants with it.
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEAuditor"),
            ("users", "dev@pve"),
        ],
    )
    .await
    .ok();
    sim.delete("/access/users/dev@pve", &[]).await.ok();
    assert_eq!(login("second-password").await, 401);
    let acl = sim.get("/access/acl").await.ok();
    assert_eq!(acl, serde_json::json!([]), "{acl}");
    assert_eq!(
        sim.get("/access/users/dev@pve").await.fail(500),
        "no such user ('dev@pve')"
    );
}

#[tokio::test]
async fn a_storage_is_deleted_and_leaves_its_pools() {
    let sim = Sim::start().await;
    sim.post(
        "/storage",
        &[("storage", "fast"), ("type", "dir"), ("path", "/fast")],
    )
    .await
    .ok();
    sim.post("/pools", &[("poolid", "lab")]).await.ok();
    sim.put("/pools/lab", &[("storage", "fast")]).await.ok();
    sim.delete("/storage/fast", &[]).await.ok();
    let gone = sim.delete("/storage/fast", &[]).await.fail(500);
    assert_eq!(gone, "delete storage failed: storage 'fast' does not exist");
    let lab = sim.get("/pools/lab").await.ok();
    assert_eq!(lab["members"], serde_json::json!([]), "{lab}");
}
