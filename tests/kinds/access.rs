//! Groups, roles, users, API tokens and ACL entries.

use super::harness::{Case, POST, PUT, Proof, at, hand, lifecycle, manifest};

fn ops_group() -> String {
    manifest("Group", "ops", "  comment: operators\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group() {
    lifecycle(Case {
        kind: "Group",
        name: "ops",
        proof: Proof::Mark("comment"),
        v1: ops_group(),
        v2: manifest("Group", "ops", "  comment: the operators\n"),
        list: "/access/groups".into(),
        at: at(&[("groupid", "ops")]),
        key: "comment",
        was: "operators [proxops.t.group.ops]",
        now: "the operators [proxops.t.group.ops]",
        drift: hand(
            PUT,
            "/access/groups/ops",
            &[("comment", "by hand [proxops.t.group.ops]")],
        ),
        hand: vec![hand(
            POST,
            "/access/groups",
            &[("groupid", "hand"), ("comment", "mine")],
        )],
        hand_at: at(&[("groupid", "hand")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role() {
    let role = |privs: &str| manifest("Role", "operator", &format!("  privs: [{privs}]\n"));
    lifecycle(Case {
        kind: "Role",
        name: "operator",
        proof: Proof::Receipt,
        v1: role("VM.Audit"),
        v2: role("VM.Audit, VM.PowerMgmt"),
        list: "/access/roles".into(),
        at: at(&[("roleid", "operator")]),
        key: "privs",
        was: "VM.Audit",
        now: "VM.Audit,VM.PowerMgmt",
        drift: hand(
            PUT,
            "/access/roles/operator",
            &[("privs", "VM.Audit,Sys.Audit")],
        ),
        hand: vec![hand(
            POST,
            "/access/roles",
            &[("roleid", "Hand"), ("privs", "Sys.Audit")],
        )],
        hand_at: at(&[("roleid", "Hand")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user() {
    let ci = |more: &str| {
        manifest(
            "User",
            "ci",
            &format!("  userid: ci@pve\n  comment: CI account\n{more}"),
        )
    };
    lifecycle(Case {
        kind: "User",
        name: "ci",
        proof: Proof::Mark("comment"),
        v1: ci("  email: ci@example.com\n"),
        v2: ci("  email: builds@example.com\n"),
        list: "/access/users".into(),
        at: at(&[("userid", "ci@pve")]),
        declared: vec![("comment", "CI account [proxops.t.user.ci]")],
        key: "email",
        was: "ci@example.com",
        now: "builds@example.com",
        drift: hand(
            PUT,
            "/access/users/ci@pve",
            &[("email", "someone@example.com")],
        ),
        hand: vec![hand(
            POST,
            "/access/users",
            &[("userid", "hand@pve"), ("comment", "mine")],
        )],
        hand_at: at(&[("userid", "hand@pve")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_token() {
    let token = |name: &str, more: &str| {
        manifest(
            "ApiToken",
            name,
            &format!("  userid: ci@pve\n  token: {name}\n{more}"),
        )
    };
    lifecycle(Case {
        kind: "ApiToken",
        name: "deploy",
        proof: Proof::Token,
        needs: vec![manifest("User", "ci", "  userid: ci@pve\n")],
        v1: token("deploy", "  comment: deploys\n"),
        v2: token("deploy", "  comment: deploys\n  expire: 4102444800\n"),
        list: "/access/users/ci@pve/token".into(),
        at: at(&[("tokenid", "deploy")]),
        declared: vec![
            ("comment", "deploys [proxops.t.apitoken.deploy]"),
            ("privsep", "1"),
        ],
        key: "expire",
        was: "0",
        now: "4102444800",
        drift: hand(
            PUT,
            "/access/users/ci@pve/token/deploy",
            &[("expire", "4102444000")],
        ),
        hand: vec![hand(
            POST,
            "/access/users/ci@pve/token/manual",
            &[("comment", "made by hand")],
        )],
        hand_at: at(&[("tokenid", "manual")]),
        take_over: Some(token("manual", "  comment: made by hand\n")),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl() {
    let acl = |propagate: bool| {
        manifest(
            "Acl",
            "ops-vms",
            &format!(
                "  path: /vms\n  groups: [ops]\n  roles: [PVEAuditor]\n  propagate: {propagate}\n"
            ),
        )
    };
    lifecycle(Case {
        kind: "Acl",
        name: "ops-vms",
        proof: Proof::Receipt,
        needs: vec![ops_group()],
        v1: acl(true),
        v2: acl(false),
        list: "/access/acl".into(),
        at: at(&[("path", "/vms"), ("ugid", "ops"), ("roleid", "PVEAuditor")]),
        declared: vec![("type", "group")],
        key: "propagate",
        was: "1",
        now: "0",
        drift: hand(
            PUT,
            "/access/acl",
            &[
                ("path", "/vms"),
                ("groups", "ops"),
                ("roles", "PVEAuditor"),
                ("propagate", "1"),
            ],
        ),
        hand: vec![hand(
            PUT,
            "/access/acl",
            &[
                ("path", "/storage"),
                ("groups", "ops"),
                ("roles", "PVEAuditor"),
            ],
        )],
        hand_at: at(&[("path", "/storage"), ("ugid", "ops")]),
        ..Case::default()
    })
    .await;
}
