//! Access groups and roles written through the API, as pve-access-control
//! `src/PVE/API2/Group.pm`, `Role.pm` and `AccessControl.pm` (`add_role_privs`,
//! `role_is_special`, `add_user_group`, `delete_user_group`) define them, and what the ACL
//! makes of them: a group's grants hold for its members, a custom role grants its privileges
//! of the moment.

use crate::support::{Auth, PASSWORD, Sim, config};
use proxops_pve_sim::{ApiToken, User};
use serde_json::json;

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
async fn groups_and_their_members_stay_consistent_with_the_users() {
    let sim = Sim::start().await;
    sim.post(
        "/access/groups",
        &[("groupid", "admins"), ("comment", "Ops")],
    )
    .await
    .ok();
    sim.post("/access/groups", &[("groupid", "devs")])
        .await
        .ok();
    assert_eq!(
        sim.post("/access/groups", &[("groupid", "devs")])
            .await
            .fail(500),
        "create group failed: group 'devs' already exists"
    );
    assert_eq!(
        sim.post(
            "/access/users",
            &[("userid", "ann@pve"), ("groups", "admins,nope")]
        )
        .await
        .fail(500),
        "create user failed: no such group 'nope'"
    );
    sim.post(
        "/access/users",
        &[("userid", "ann@pve"), ("groups", "admins,devs")],
    )
    .await
    .ok();
    sim.post(
        "/access/users",
        &[("userid", "bob@pve"), ("groups", "devs")],
    )
    .await
    .ok();
    let devs = sim.get("/access/groups/devs").await.ok();
    assert_eq!(devs, json!({ "members": ["ann@pve", "bob@pve"] }));
    let list = sim.get("/access/groups").await.ok();
    assert_eq!(
        list,
        json!([
            { "groupid": "admins", "comment": "Ops", "users": "ann@pve" },
            { "groupid": "devs", "users": "ann@pve,bob@pve" },
        ])
    );
    assert_eq!(
        sim.get("/access/users/ann@pve").await.ok()["groups"],
        json!(["admins", "devs"])
    );

    // `groups` replaces the user's groups, with `append` adds to them.
    sim.put("/access/users/ann@pve", &[("groups", "devs")])
        .await
        .ok();
    assert_eq!(
        sim.get("/access/users/ann@pve").await.ok()["groups"],
        json!(["devs"])
    );
    sim.put(
        "/access/users/ann@pve",
        &[("groups", "admins"), ("append", "1")],
    )
    .await
    .ok();
    assert_eq!(
        sim.get("/access/users/ann@pve").await.ok()["groups"],
        json!(["admins", "devs"])
    );
    let full = sim.req("GET", "/access/users", &[("full", "1")]).await.ok();
    let ann = full
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["userid"] == "ann@pve")
        .unwrap()
        .clone();
    assert_eq!(ann["groups"], "admins,devs");

    // A deleted user leaves its groups; a deleted group its users.
    sim.delete("/access/users/bob@pve", &[]).await.ok();
    assert_eq!(
        sim.get("/access/groups/devs").await.ok()["members"],
        json!(["ann@pve"])
    );
    sim.put("/access/groups/admins", &[("comment", "")])
        .await
        .ok();
    assert!(
        sim.get("/access/groups/admins")
            .await
            .ok()
            .get("comment")
            .is_none()
    );
    sim.delete("/access/groups/admins", &[]).await.ok();
    assert_eq!(
        sim.get("/access/users/ann@pve").await.ok()["groups"],
        json!(["devs"])
    );
    assert_eq!(
        sim.get("/access/groups/admins").await.fail(500),
        "group 'admins' does not exist"
    );
    assert_eq!(
        sim.delete("/access/groups/admins", &[]).await.fail(500),
        "delete group failed: group 'admins' does not exist"
    );
    assert_eq!(
        sim.put("/access/groups/admins", &[("comment", "x")])
            .await
            .fail(500),
        "update group failed: group 'admins' does not exist"
    );
}

#[tokio::test]
async fn custom_roles_are_validated_and_built_in_ones_are_read_only() {
    let sim = Sim::start().await;
    assert_eq!(
        sim.post("/access/roles", &[("roleid", "pveThing")])
            .await
            .errors()["roleid"],
        "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"
    );
    assert_eq!(
        sim.post("/access/roles", &[("roleid", "Administrator")])
            .await
            .fail(500),
        "create role failed: role 'Administrator' already exists"
    );
    assert_eq!(
        sim.post(
            "/access/roles",
            &[("roleid", "Watcher"), ("privs", "VM.Audit,VM.Fly")]
        )
        .await
        .fail(500),
        "create role failed: invalid privilege 'VM.Fly'"
    );
    sim.post(
        "/access/roles",
        &[("roleid", "Watcher"), ("privs", "VM.Audit,Sys.Audit")],
    )
    .await
    .ok();
    assert_eq!(
        sim.get("/access/roles/Watcher").await.ok(),
        json!({ "Sys.Audit": 1, "VM.Audit": 1 })
    );
    sim.put(
        "/access/roles/Watcher",
        &[("privs", "Datastore.Audit"), ("append", "1")],
    )
    .await
    .ok();
    let roles = sim.get("/access/roles").await.ok();
    let watcher = roles
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["roleid"] == "Watcher")
        .unwrap()
        .clone();
    assert_eq!(
        watcher,
        json!({ "roleid": "Watcher", "privs": "Datastore.Audit,Sys.Audit,VM.Audit", "special": 0 })
    );
    sim.put("/access/roles/Watcher", &[("privs", "VM.Audit")])
        .await
        .ok();
    assert_eq!(
        sim.get("/access/roles/Watcher").await.ok(),
        json!({ "VM.Audit": 1 })
    );
    assert_eq!(
        sim.put("/access/roles/PVEAuditor", &[("privs", "VM.Audit")])
            .await
            .fail(500),
        "auto-generated role 'PVEAuditor' cannot be modified"
    );
    assert_eq!(
        sim.delete("/access/roles/NoAccess", &[]).await.fail(500),
        "auto-generated role 'NoAccess' cannot be deleted"
    );
    assert_eq!(
        sim.get("/access/roles/PVETemplateUser").await.ok(),
        json!({ "VM.Audit": 1, "VM.Clone": 1 })
    );
    sim.delete("/access/roles/Watcher", &[]).await.ok();
    assert_eq!(
        sim.get("/access/roles/Watcher").await.fail(500),
        "role 'Watcher' does not exist"
    );
    assert_eq!(
        sim.delete("/access/roles/Watcher", &[]).await.fail(500),
        "delete role failed: role 'Watcher' does not exist"
    );
}

#[tokio::test]
async fn acl_grants_of_custom_roles_and_groups_are_honoured() {
    let (sim, ops) = with_ops().await;
    sim.create_vm("100", &[]).await;
    let token = Auth::Header(ops.header());
    let read = || async {
        sim.send("GET", "/nodes/pve1/qemu/100/config", &[], &token)
            .await
            .status
    };
    sim.post(
        "/access/roles",
        &[("roleid", "Reader"), ("privs", "Sys.Audit")],
    )
    .await
    .ok();
    // The token's own grant of the custom role, its user's through a group.
    sim.put(
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "Reader"),
            ("tokens", "ops@pve!ci"),
        ],
    )
    .await
    .ok();
    assert_eq!(
        sim.put(
            "/access/acl",
            &[("path", "/vms"), ("roles", "Reader"), ("groups", "nope")]
        )
        .await
        .fail(500),
        "ACL update failed: group 'nope' does not exist"
    );
    sim.post("/access/groups", &[("groupid", "ops")]).await.ok();
    sim.put("/access/users/ops@pve", &[("groups", "ops")])
        .await
        .ok();
    sim.put(
        "/access/acl",
        &[("path", "/vms"), ("roles", "Reader"), ("groups", "ops")],
    )
    .await
    .ok();
    let acl = sim.get("/access/acl").await.ok();
    assert!(
        acl.as_array().unwrap().contains(&json!({
            "path": "/vms", "type": "group", "ugid": "ops", "roleid": "Reader", "propagate": 1
        })),
        "{acl}"
    );
    // The role lacks VM.Audit: refused; once the role has it, the same grants allow.
    assert_eq!(read().await, 403);
    sim.put(
        "/access/roles/Reader",
        &[("privs", "VM.Audit"), ("append", "1")],
    )
    .await
    .ok();
    assert_eq!(read().await, 200);
    // The user out of the group: the token's grant alone is not enough (privilege separation).
    sim.put("/access/users/ops@pve", &[("groups", "")])
        .await
        .ok();
    assert_eq!(read().await, 403);
    sim.put("/access/users/ops@pve", &[("groups", "ops")])
        .await
        .ok();
    assert_eq!(read().await, 200);
    // The role deleted: its grants are ignored, and no longer listed.
    sim.delete("/access/roles/Reader", &[]).await.ok();
    assert_eq!(read().await, 403);
    let acl = sim.get("/access/acl").await.ok();
    assert!(
        !acl.to_string().contains("Reader"),
        "a deleted role's grants are not listed: {acl}"
    );
    // Roles and groups need their privileges.
    for (m, p, params, msg) in [
        (
            "POST",
            "/access/roles",
            vec![("roleid", "X")],
            "Permission check failed (/access, Sys.Modify)",
        ),
        (
            "POST",
            "/access/groups",
            vec![("groupid", "x")],
            "Permission check failed (/access/groups, Group.Allocate)",
        ),
        (
            "GET",
            "/access/groups/ops",
            vec![],
            "Permission check failed (/access/groups, Sys.Audit|Group.Allocate)",
        ),
    ] {
        assert_eq!(sim.send(m, p, &params, &token).await.fail(403), msg);
    }
    assert_eq!(
        sim.send("GET", "/access/groups", &[], &token).await.ok(),
        json!([])
    );
}
