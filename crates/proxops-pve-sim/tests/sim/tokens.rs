//! API tokens made through the API, as pve-access-control `src/PVE/API2/User.pm`
//! (`generate_token`, `update_token_info`, `remove_token`) and `AccessControl.pm`
//! (`verify_token`) define them: the secret is returned once and then authenticates; a
//! deleted or expired token no longer does.

use crate::support::{Auth, Sim};

const TOKENS: &str = "/access/users/root@pam/token";

/// `Authorization` for a token made through the API.
fn header(created: &serde_json::Value) -> Auth {
    Auth::Header(format!(
        "PVEAPIToken={}={}",
        created["full-tokenid"].as_str().unwrap(),
        created["value"].as_str().unwrap()
    ))
}

#[tokio::test]
async fn a_token_made_through_the_api_authenticates_until_it_is_deleted() {
    let sim = Sim::start().await;
    let created = sim
        .post(
            &format!("{TOKENS}/monitoring"),
            &[("privsep", "0"), ("comment", "exporter")],
        )
        .await
        .ok();
    assert_eq!(created["full-tokenid"], "root@pam!monitoring");
    assert_eq!(created["info"]["privsep"], 0);
    let auth = header(&created);
    let nodes = sim.send("GET", "/nodes", &[], &auth).await;
    assert_eq!(nodes.status, 200);

    // Listed, with its comment, by the endpoint and by `GET /access/users?full=1`.
    let list = sim.get(TOKENS).await.ok();
    assert_eq!(list[0]["tokenid"], "monitoring");
    assert_eq!(list[0]["comment"], "exporter");
    let users = sim.get("/access/users?full=1").await.ok();
    let root = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["userid"] == "root@pam")
        .unwrap();
    assert!(
        root["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["tokenid"] == "monitoring"),
        "{root}"
    );

    // The comment removed (9.1's `delete`); `regenerate` is newer than the schemas served.
    let updated = sim
        .put(&format!("{TOKENS}/monitoring"), &[("delete", "comment")])
        .await
        .ok();
    assert!(updated.get("comment").is_none(), "{updated}");
    let newer = sim
        .put(&format!("{TOKENS}/monitoring"), &[("regenerate", "1")])
        .await
        .errors();
    assert!(newer["regenerate"].is_string(), "{newer}");
    // A second token's secret is not this one's.
    let other = sim.post(&format!("{TOKENS}/other"), &[]).await.ok();
    let mixed = Auth::Header(format!(
        "PVEAPIToken=root@pam!monitoring={}",
        other["value"].as_str().unwrap()
    ));
    assert_eq!(
        sim.send("GET", "/nodes", &[], &mixed).await.fail(401),
        "invalid token value!"
    );

    sim.delete(&format!("{TOKENS}/monitoring"), &[]).await.ok();
    let gone = sim.send("GET", "/nodes", &[], &auth).await;
    assert_eq!(
        gone.fail(401),
        "no such token 'monitoring' for user 'root@pam'"
    );
}

#[tokio::test]
async fn what_pve_refuses_is_refused_with_its_words() {
    let sim = Sim::start().await;
    sim.post(&format!("{TOKENS}/ci"), &[]).await.ok();
    let again = sim.post(&format!("{TOKENS}/ci"), &[]).await.errors();
    assert_eq!(again["tokenid"], "Token already exists.");
    let missing = sim.get(&format!("{TOKENS}/nope")).await;
    assert_eq!(
        missing.fail(500),
        "no such token 'nope' for user 'root@pam'"
    );
    let bad_delete = sim
        .put(&format!("{TOKENS}/ci"), &[("delete", "privsep")])
        .await
        .errors();
    assert_eq!(bad_delete["delete"], "unknown option 'privsep'");
    // A user that does not exist fails the permission check itself.
    let nobody = sim.post("/access/users/nobody@pve/token/x", &[]).await;
    assert_eq!(nobody.status, 403);
}

#[tokio::test]
async fn an_expired_token_no_longer_authenticates() {
    let sim = Sim::start().await;
    let created = sim
        .post(&format!("{TOKENS}/old"), &[("expire", "1")])
        .await
        .ok();
    let refused = sim.send("GET", "/nodes", &[], &header(&created)).await;
    assert_eq!(refused.fail(401), "token 'old' access expired");
}
