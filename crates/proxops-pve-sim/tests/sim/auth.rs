//! Token and ticket authentication, CSRF on writes, and ACL privileges (403 wording).

use crate::support::{Auth, PASSWORD, Sim, config};
use proxops_pve_sim::{AclEntry, ApiToken, User};

#[tokio::test]
async fn token_in_both_header_forms() {
    let sim = Sim::start().await;
    let t = &sim.h.token;
    let eq = Auth::Header(format!("PVEAPIToken={}={}", t.id, t.secret));
    let space = Auth::Header(format!("PVEAPIToken {}={}", t.id, t.secret));
    assert_eq!(sim.send("GET", "/version", &[], &eq).await.status, 200);
    assert_eq!(sim.send("GET", "/version", &[], &space).await.status, 200);
}

#[tokio::test]
async fn bad_or_missing_credentials_are_401() {
    let sim = Sim::start().await;
    let t = &sim.h.token;
    let wrong = Auth::Header(format!("PVEAPIToken={}=nope", t.id));
    assert_eq!(
        sim.send("GET", "/version", &[], &wrong).await.fail(401),
        "invalid token value!"
    );
    let unknown = Auth::Header("PVEAPIToken=root@pam!other=x".into());
    assert_eq!(
        sim.send("GET", "/version", &[], &unknown).await.fail(401),
        "no such token 'other' for user 'root@pam'"
    );
    assert_eq!(
        sim.send("GET", "/version", &[], &Auth::None)
            .await
            .fail(401),
        "No ticket"
    );
    let bogus = Auth::Ticket {
        ticket: "PVE:root@pam:00000000::xyz".into(),
        csrf: None,
    };
    assert_eq!(sim.send("GET", "/version", &[], &bogus).await.status, 401);
}

#[tokio::test]
async fn ticket_login_cookie_and_csrf() {
    let sim = Sim::start().await;
    let bad = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "root@pam"), ("password", "wrong")],
            &Auth::None,
        )
        .await;
    assert_eq!(bad.fail(401), "authentication failure");
    let login = sim
        .send(
            "POST",
            "/access/ticket",
            &[
                ("username", "root"),
                ("realm", "pam"),
                ("password", PASSWORD),
            ],
            &Auth::None,
        )
        .await
        .ok();
    assert_eq!(login["username"], "root@pam");
    let ticket = login["ticket"].as_str().unwrap().to_string();
    let csrf = login["CSRFPreventionToken"].as_str().unwrap().to_string();
    assert!(ticket.starts_with("PVE:root@pam:"));
    let read_only = Auth::Ticket {
        ticket: ticket.clone(),
        csrf: None,
    };
    assert_eq!(sim.send("GET", "/nodes", &[], &read_only).await.status, 200);
    // A write without the CSRF header is refused; with it, accepted.
    let no_csrf = sim
        .send("POST", "/nodes/pve1/qemu", &[("vmid", "100")], &read_only)
        .await;
    assert_eq!(no_csrf.fail(401), "Permission denied - invalid csrf token");
    let full = Auth::Ticket {
        ticket,
        csrf: Some(csrf),
    };
    let upid = sim
        .send("POST", "/nodes/pve1/qemu", &[("vmid", "100")], &full)
        .await
        .ok();
    assert!(upid.as_str().unwrap().ends_with(":qmcreate:100:root@pam:"));
}

#[tokio::test]
async fn acl_privileges_and_403_wording() {
    let mut cfg = config();
    let limited = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(limited.clone());
    cfg.users.push(User {
        userid: "idle@pve".into(),
        password: "pw".into(),
    });
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/vms/100".into(),
            privs: vec!["VM.Audit".into(), "VM.PowerMgmt".into()],
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/storage".into(),
            privs: vec!["Datastore.Audit".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[]).await;
    sim.create_vm("101", &[]).await;
    let ci = Auth::Header(limited.header());
    let list = sim.send("GET", "/nodes/pve1/qemu", &[], &ci).await.ok();
    assert_eq!(list.as_array().unwrap().len(), 1, "only VM 100 is visible");
    let denied = sim
        .send(
            "PUT",
            "/nodes/pve1/qemu/100/config",
            &[("memory", "4096")],
            &ci,
        )
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/vms/100, VM.Config.Memory)"
    );
    let denied = sim
        .send("GET", "/nodes/pve1/qemu/101/config", &[], &ci)
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/vms/101, VM.Audit)"
    );
    let upid = sim
        .send("POST", "/nodes/pve1/qemu/100/status/start", &[], &ci)
        .await
        .ok();
    assert!(upid.as_str().unwrap().ends_with(":qmstart:100:ops@pve!ci:"));
    assert_eq!(
        sim.send("GET", "/nodes/pve1/storage/local/content", &[], &ci)
            .await
            .status,
        200
    );
    // A user with no ACL entries sees nothing and may do nothing.
    let login = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "idle@pve"), ("password", "pw")],
            &Auth::None,
        )
        .await
        .ok();
    let ops = Auth::Ticket {
        ticket: login["ticket"].as_str().unwrap().into(),
        csrf: Some(login["CSRFPreventionToken"].as_str().unwrap().into()),
    };
    assert_eq!(
        sim.send("GET", "/nodes/pve1/qemu", &[], &ops)
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        0
    );
    let denied = sim
        .send("POST", "/nodes/pve1/qemu", &[("vmid", "300")], &ops)
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/vms/300, VM.Allocate)"
    );
}

#[tokio::test]
async fn disk_allocation_needs_datastore_privilege() {
    let mut cfg = config();
    let t = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(t.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry {
        principal: "ops@pve!ci".into(),
        path: "/vms".into(),
        privs: vec!["*".into()],
        propagate: true,
    }]);
    let sim = Sim::with(cfg).await;
    let ci = Auth::Header(t.header());
    let denied = sim
        .send(
            "POST",
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("scsi0", "local-lvm:4")],
            &ci,
        )
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)"
    );
    // Without a new disk the VM can be created.
    assert_eq!(
        sim.send("POST", "/nodes/pve1/qemu", &[("vmid", "100")], &ci)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn access_permissions_reports_effective_privileges() {
    let mut cfg = config();
    let limited = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(limited.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/vms/100".into(),
            privs: vec!["VM.Audit".into(), "VM.PowerMgmt".into()],
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/storage".into(),
            privs: vec!["*".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    // The principal token holds everything everywhere.
    let all = sim
        .req("GET", "/access/permissions", &[("path", "/vms/100")])
        .await
        .ok();
    let privs = all["/vms/100"].as_object().unwrap();
    for p in ["VM.Allocate", "VM.Config.Memory", "Sys.Modify", "SDN.Use"] {
        assert_eq!(privs[p], 1, "{p}: {all}");
    }
    // A limited token: what its ACL grants, propagated down from the entry's path.
    let ci = Auth::Header(limited.header());
    let at = |path: &'static str| {
        let (sim, ci) = (&sim, &ci);
        async move {
            sim.send("GET", "/access/permissions", &[("path", path)], ci)
                .await
                .ok()
        }
    };
    assert_eq!(
        at("/vms/100").await,
        serde_json::json!({"/vms/100": {"VM.Audit": 1, "VM.PowerMgmt": 1}})
    );
    assert_eq!(at("/vms/101").await, serde_json::json!({"/vms/101": {}}));
    let storage = at("/storage/local-lvm").await;
    assert_eq!(storage["/storage/local-lvm"]["Datastore.AllocateSpace"], 1);
    // Without a path: every path of the tree where it holds something.
    let tree = sim.send("GET", "/access/permissions", &[], &ci).await.ok();
    let paths: Vec<&str> = tree
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(paths, ["/storage", "/vms/100"]);
    // Asking about itself by name is allowed; about another principal needs Sys.Audit on /access.
    let own = sim
        .send(
            "GET",
            "/access/permissions",
            &[("userid", "ops@pve!ci"), ("path", "/vms/100")],
            &ci,
        )
        .await
        .ok();
    assert_eq!(own["/vms/100"]["VM.Audit"], 1);
    let other = sim
        .send("GET", "/access/permissions", &[("userid", "root@pam")], &ci)
        .await;
    assert_eq!(
        other.fail(403),
        "Permission check failed (/access, Sys.Audit)"
    );
    let bad = sim
        .send("GET", "/access/permissions", &[("userid", "no realm")], &ci)
        .await;
    assert_eq!(bad.status, 400);
}

/// `GET /access/acl` and `/access/roles` as `read_acl` and the role index answer: every grant
/// with its role to a caller with `Sys.Audit` on `/access`, none to one without
/// `Permissions.Modify`; a grant's privilege list is served as a role of its own.
#[tokio::test]
async fn the_acl_lists_each_grant_with_its_role() {
    let mut cfg = config();
    let limited = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(limited.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/vms/100".into(),
            privs: vec!["VM.PowerMgmt".into(), "VM.Audit".into()],
            propagate: true,
        },
        AclEntry::admin("admin@pve"),
    ]);
    let sim = Sim::with(cfg).await;
    let acl = sim.get("/access/acl").await.ok();
    let rows = acl.as_array().unwrap();
    // The token's grant, the admin's, and the token user's (a privilege-separated token needs
    // it).
    assert_eq!(rows.len(), 3, "{acl}");
    assert_eq!(rows[2]["ugid"], "ops@pve");
    assert_eq!(rows[0]["path"], "/vms/100");
    assert_eq!(rows[0]["type"], "token");
    assert_eq!(rows[0]["ugid"], "ops@pve!ci");
    assert_eq!(rows[0]["propagate"], 1);
    assert_eq!(rows[1]["type"], "user");
    assert_eq!(rows[1]["roleid"], "Administrator");
    let role = rows[0]["roleid"].as_str().unwrap().to_owned();
    let roles = sim.get("/access/roles").await.ok();
    let custom = roles
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["roleid"] == role.as_str())
        .unwrap_or_else(|| panic!("{role} not in {roles}"));
    assert_eq!(custom["privs"], "VM.Audit,VM.PowerMgmt");
    assert_eq!(custom["special"], 0);
    // The limited token may modify permissions nowhere: it sees no grant.
    let ci = Auth::Header(limited.header());
    let seen = sim.send("GET", "/access/acl", &[], &ci).await.ok();
    assert_eq!(seen, serde_json::json!([]));
}

// pve-access-control `RPCEnvironment.pm` `permissions` and `$compile_acl_path`: a
// privilege-separated token holds the intersection of its grants and its user's; one without
// separation its user's; a token of root@pam what is granted to it.
#[tokio::test]
async fn tokens_hold_what_pve_computes_for_them() {
    let mut cfg = config();
    let bare = ApiToken::new("ops@pve!bare", "s");
    let mut shared_privs = ApiToken::new("ops@pve!user", "s");
    shared_privs.privsep = false;
    let narrow = ApiToken::new("ops@pve!narrow", "s");
    let rooted = ApiToken::new("root@pam!narrow", "s");
    cfg.extra_tokens.extend([
        bare.clone(),
        shared_privs.clone(),
        narrow.clone(),
        rooted.clone(),
    ]);
    let grant = |principal: &str, privs: &[&str]| AclEntry {
        principal: principal.into(),
        path: "/vms".into(),
        privs: privs.iter().map(|p| (*p).to_owned()).collect(),
        propagate: true,
    };
    cfg.acl = vec![
        grant("ops@pve", &["VM.Audit"]),
        // More than the user holds: only VM.Audit survives the intersection.
        grant("ops@pve!narrow", &["VM.Audit", "VM.PowerMgmt"]),
        grant("root@pam!narrow", &["VM.Audit"]),
    ];
    let sim = Sim::with(cfg).await;
    sim.create_vm("100", &[]).await;
    let read = |t: &ApiToken| {
        let (sim, auth) = (&sim, Auth::Header(t.header()));
        async move {
            sim.send("GET", "/nodes/pve1/qemu/100/config", &[], &auth)
                .await
                .status
        }
    };
    let start = |t: &ApiToken| {
        let (sim, auth) = (&sim, Auth::Header(t.header()));
        async move {
            sim.send("POST", "/nodes/pve1/qemu/100/status/start", &[], &auth)
                .await
                .status
        }
    };
    // No grant of its own: nothing, whatever the user holds.
    assert_eq!(read(&bare).await, 403);
    assert_eq!(read(&shared_privs).await, 200);
    assert_eq!(start(&shared_privs).await, 403);
    assert_eq!(read(&narrow).await, 200);
    assert_eq!(start(&narrow).await, 403, "the user lacks VM.PowerMgmt");
    assert_eq!(read(&rooted).await, 200);
    assert_eq!(
        start(&rooted).await,
        403,
        "root@pam's token holds its own grants"
    );
}
