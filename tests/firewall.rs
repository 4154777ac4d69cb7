//! The firewall as ProxOps declares it (issue 32), engine + simulator: the cluster's `Firewall`
//! (options, an alias, an IP set, a security group with rules) and a VM's own `firewall:`
//! rules applying the group. Rules ProxOps wrote carry its mark; a rule added by hand is kept
//! wherever it is, a ProxOps rule changed by hand is restored, and one the manifest no longer
//! lists is removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{apply, plan, sim, verbs, vm};
use proxops_engine::plan::Verb;
use proxops_pve::{Method, Params, PveClient};
use serde_json::Value;

fn firewall(rules: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: Firewall\nmetadata:\n  name: home\nspec:\n  options:\n    enable: true\n    policy_in: DROP\n  aliases:\n    - name: lan\n      cidr: 192.168.10.0/24\n  ipsets:\n    - name: admins\n      entries:\n        - cidr: 192.168.10.5\n  groups:\n    - name: webservers\n      comment: public web\n      rules:\n{rules}"
    )
}

const WEB_RULES: &str = "        - {type: in, action: ACCEPT, macro: HTTPS}\n        - {type: in, action: ACCEPT, macro: HTTP}\n";

fn web_vm() -> String {
    vm(
        "web",
        101,
        "node: pve1",
        "local-lvm",
        "  firewall:\n    options:\n      enable: true\n    rules:\n      - {type: group, action: webservers}\n      - {type: in, action: ACCEPT, macro: SSH, source: +admins}\n",
    )
}

async fn get(client: &PveClient, path: &str) -> Value {
    client
        .call_json(Method::GET, path, path, &Params::new())
        .await
        .unwrap()
}

fn comments(rules: &Value) -> Vec<String> {
    rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["comment"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_firewall_is_applied_kept_restored_and_its_removed_rules_go() {
    let (_sim, client) = sim().await;
    let texts = vec![firewall(WEB_RULES), web_vm()];
    let p = apply(&client, &texts).await;
    assert!(p.actions.iter().all(|a| a.verb != Verb::Delete), "{p:#?}");
    let again = plan(&client, &texts).await;
    assert!(again.is_empty(), "{again:#?}");
    let options = get(&client, "/cluster/firewall/options").await;
    assert_eq!(options["enable"], 1, "{options:#?}\n{p:#?}");
    assert_eq!(options["policy_in"], "DROP");
    let group = get(&client, "/cluster/firewall/groups/webservers").await;
    assert_eq!(
        comments(&group),
        ["[proxops.t.firewall.home#0]", "[proxops.t.firewall.home#1]"]
    );
    assert_eq!(group[0]["macro"], "HTTPS");
    let guest = get(&client, "/nodes/pve1/qemu/101/firewall/rules").await;
    assert_eq!(guest[0]["type"], "group");
    assert_eq!(guest[0]["action"], "webservers");
    assert_eq!(
        get(&client, "/nodes/pve1/qemu/101/firewall/options").await["enable"],
        1
    );

    // A rule added by hand at the top, and a hand change to a rule of ours.
    client
        .call_json(
            Method::POST,
            "/cluster/firewall/groups/{group}",
            "/cluster/firewall/groups/webservers",
            &Params::new()
                .set("type", "in")
                .set("action", "ACCEPT")
                .set("macro", "Ping")
                .set("enable", 1)
                .set("pos", 0),
        )
        .await
        .unwrap();
    client
        .call_json(
            Method::PUT,
            "/cluster/firewall/groups/{group}/{pos}",
            "/cluster/firewall/groups/webservers/2",
            &Params::new().set("action", "DROP"),
        )
        .await
        .unwrap();
    let drift = plan(&client, &texts).await;
    assert_eq!(verbs(&drift), vec![Verb::Update], "{drift:#?}");
    assert!(drift.actions[0].reason.contains("1 changed"), "{drift:#?}");
    apply(&client, &texts).await;
    let group = get(&client, "/cluster/firewall/groups/webservers").await;
    assert_eq!(
        group[0]["macro"], "Ping",
        "the hand rule stays where it was"
    );
    assert_eq!(group[2]["action"], "ACCEPT", "the changed rule is restored");
    assert!(plan(&client, &texts).await.is_empty());

    // HTTP leaves the manifest: its rule goes, the hand rule stays.
    let fewer = vec![
        firewall("        - {type: in, action: ACCEPT, macro: HTTPS}\n"),
        web_vm(),
    ];
    apply(&client, &fewer).await;
    let group = get(&client, "/cluster/firewall/groups/webservers").await;
    let macros: Vec<&str> = group
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["macro"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(macros, ["Ping", "HTTPS"]);
    assert!(plan(&client, &fewer).await.is_empty());
}
