//! SDN as kinds (issue 32), engine + simulator: a zone, a VNet and a subnet are written, then
//! applied with `PUT /cluster/sdn` before the guest whose NIC is on the VNet is created (PVE
//! keeps SDN changes pending until then); a change is applied again; a subnet ProxOps made and
//! the manifest no longer lists is removed, and the removal applied.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::objects::remembered;
use crate::placement::{apply, plan, plan_with, sim, vm};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::Verb;
use proxops_pve::{Method, Params, PveClient};
use serde_json::Value;

fn manifest(kind: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

fn sdn(alias: &str) -> Vec<String> {
    vec![
        manifest("SdnZone", "lab", "  type: simple\n"),
        manifest(
            "SdnVnet",
            "labnet",
            &format!("  zone: lab\n  alias: {alias}\n"),
        ),
        manifest(
            "SdnSubnet",
            "labnet-v4",
            "  vnet: labnet\n  subnet: 10.20.0.0/24\n  gateway: 10.20.0.1\n  snat: true\n",
        ),
    ]
}

async fn get(client: &PveClient, path: &str) -> Value {
    client
        .call_json(Method::GET, path, path, &Params::new())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdn_objects_are_applied_before_the_guest_on_them_and_removals_are_applied_too() {
    let (_sim, client) = sim().await;
    let guest = vm(
        "lab-vm",
        170,
        "node: pve1",
        "local-lvm",
        "  state: started\n  networks:\n    - model: virtio\n      bridge: labnet\n",
    );
    let mut texts = sdn("the lab");
    texts.push(guest.clone());
    let p = apply(&client, &texts).await;
    let order: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    let apply_at = order
        .iter()
        .position(|(k, _)| *k == "SDN")
        .expect("an SDN apply");
    let vm_at = order
        .iter()
        .position(|(k, _)| *k == "VM")
        .expect("the VM's create");
    let vm_action = &p.actions[vm_at];
    assert!(vm_action.after.contains(&p.actions[apply_at].id), "{p:#?}");
    // Applied: the running configuration has them, and nothing is pending.
    let running = client
        .call_json(
            Method::GET,
            "/cluster/sdn/vnets",
            "/cluster/sdn/vnets",
            &Params::new().set("running", 1),
        )
        .await
        .unwrap();
    assert!(
        running
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["vnet"] == "labnet" && v["alias"] == "the lab"),
        "{running:#?}"
    );
    let again = plan(&client, &texts).await;
    assert!(again.is_empty(), "{again:#?}");

    // A change: written, then applied.
    let mut changed = sdn("lab network");
    changed.push(guest.clone());
    let p = plan_with(&client, &changed, &remembered(&texts)).await;
    let verbs: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(
        verbs,
        [("SdnVnet", Verb::Update), ("SDN", Verb::Update)],
        "{p:#?}"
    );
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(plan(&client, &changed).await.is_empty());

    // The subnet leaves the repository: removed (ours by its receipt), and applied.
    let without: Vec<String> = changed
        .iter()
        .filter(|t| !t.contains("kind: SdnSubnet"))
        .cloned()
        .collect();
    let p = plan_with(&client, &without, &remembered(&changed)).await;
    let verbs: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(
        verbs,
        [("SdnSubnet", Verb::Delete), ("SDN", Verb::Update)],
        "{p:#?}"
    );
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let subnets = get(&client, "/cluster/sdn/vnets/labnet/subnets").await;
    assert_eq!(subnets.as_array().map(Vec::len), Some(0), "{subnets:#?}");
}

/// A simulator with its principal token and `ops@pve!sdn`, which may write SDN zones and what
/// is under them but not apply the SDN configuration (`SDN.Allocate` on `/sdn/zones`, not on
/// `/sdn`): an apply that fails after the writes succeeded.
async fn sim_with_a_token_that_cannot_apply() -> (proxops_pve_sim::SimHandle, PveClient, PveClient)
{
    use proxops_pve_sim::{AclEntry, ApiToken, SimConfig, acl_with_token_users, start};
    let grant = |path: &str, privs: &[&str]| AclEntry {
        principal: "ops@pve!sdn".into(),
        path: path.into(),
        privs: privs.iter().map(|p| (*p).to_owned()).collect(),
        propagate: true,
    };
    let sim = start(
        SimConfig::default()
            .with_extra_tokens(vec![ApiToken::new("ops@pve!sdn", "sdn-secret")])
            .with_acl(acl_with_token_users(vec![
                grant(
                    "/",
                    &[
                        "Sys.Audit",
                        "SDN.Audit",
                        "Datastore.Audit",
                        "VM.Audit",
                        "Pool.Audit",
                    ],
                ),
                grant("/sdn/zones", &["SDN.Allocate", "SDN.Audit"]),
            ])),
    )
    .await
    .unwrap();
    let admin = proxops_test_support::sim::client(&sim);
    let limited = proxops_test_support::sim::client_builder(
        &sim,
        proxops_pve::Credentials::parse_token("ops@pve!sdn=sdn-secret").unwrap(),
    )
    .build()
    .unwrap();
    (sim, admin, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_whose_apply_failed_is_applied_by_the_next_cycle() {
    let (_sim, admin, limited) = sim_with_a_token_that_cannot_apply().await;
    let texts = sdn("the lab");
    apply(&admin, &texts).await;
    assert!(plan(&admin, &texts).await.is_empty());

    // The subnet leaves the repository; its delete is written, the apply is refused.
    let without: Vec<String> = texts
        .iter()
        .filter(|t| !t.contains("kind: SdnSubnet"))
        .cloned()
        .collect();
    let p = plan_with(&limited, &without, &remembered(&texts)).await;
    let report = execute(&limited, &p, &ExecOptions::default()).await;
    let outcome = |kind: &str| {
        let r = report
            .results
            .iter()
            .find(|r| r.subject.starts_with(kind))
            .unwrap();
        format!("{:?}", r.outcome)
    };
    assert!(outcome("SDN/").contains("Failed"), "{report:#?}");
    // The delete is not done while PVE has not applied it: no teardown is recorded for it, so
    // the next cycle still knows the subnet was ProxOps's.
    let delete = outcome("SdnSubnet/");
    assert!(
        delete.contains("Failed") && delete.contains("pending"),
        "{report:#?}"
    );
    // PVE still runs the subnet; its deletion is pending.
    let running = client_get_running_subnets(&admin).await;
    assert_eq!(running, ["lab-10.20.0.0-24"], "{running:?}");

    // The next cycle (a token that may apply) applies the pending removal, and nothing else.
    let p = plan_with(&admin, &without, &remembered(&texts)).await;
    let verbs: Vec<(&str, Verb)> = p
        .actions
        .iter()
        .map(|a| (a.kind.as_str(), a.verb))
        .collect();
    assert_eq!(verbs, [("SDN", Verb::Update)], "{p:#?}");
    let report = execute(&admin, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(client_get_running_subnets(&admin).await.is_empty());
    assert!(
        plan_with(&admin, &without, &remembered(&without))
            .await
            .is_empty()
    );
}

/// The subnets of VNet `labnet` PVE runs (the applied configuration).
async fn client_get_running_subnets(client: &PveClient) -> Vec<String> {
    let path = "/cluster/sdn/vnets/labnet/subnets";
    let rows = client
        .call_json(
            Method::GET,
            "/cluster/sdn/vnets/{vnet}/subnets",
            path,
            &Params::new().set("running", 1),
        )
        .await
        .unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["subnet"].as_str().unwrap_or_default().to_owned())
        .collect()
}
