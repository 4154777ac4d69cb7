//! HA rules (PVE 9, pve-ha-manager `src/PVE/API2/HA/Rules.pm`): created, read, updated and
//! deleted; refused as PVE refuses them (unmanaged resources, unknown nodes, options of another
//! type, a resource in two node-affinity rules); purged with the HA resource; absent on PVE 8.

use crate::support::Sim;
use proxops_pve_sim::PveVersion;

#[tokio::test]
async fn node_affinity_rules_live_with_their_resource_on_pve9() {
    let sim = Sim::of(PveVersion::V9_1).await;
    sim.create_vm("100", &[]).await;
    sim.create_vm("101", &[]).await;
    let rule = |id: &'static str, sid: &'static str| {
        vec![
            ("rule", id),
            ("type", "node-affinity"),
            ("resources", sid),
            ("nodes", "pve1:2"),
        ]
    };
    // Only HA resources may be in a rule.
    let err = sim
        .post("/cluster/ha/rules", &rule("keep", "vm:100"))
        .await
        .fail(500);
    assert!(
        err.contains("create ha rule failed: cannot use unmanaged resource(s) vm:100."),
        "{err}"
    );
    for sid in ["vm:100", "vm:101"] {
        sim.post(
            "/cluster/ha/resources",
            &[("sid", sid), ("state", "stopped")],
        )
        .await
        .ok();
    }
    let err = sim
        .post(
            "/cluster/ha/rules",
            &[
                ("rule", "keep"),
                ("type", "node-affinity"),
                ("resources", "vm:100"),
                ("nodes", "nosuch"),
            ],
        )
        .await
        .fail(500);
    assert!(
        err.contains("cannot use non-existent node(s) nosuch."),
        "{err}"
    );
    let err = sim
        .post(
            "/cluster/ha/rules",
            &[
                ("rule", "keep"),
                ("type", "node-affinity"),
                ("resources", "vm:100"),
                ("nodes", "pve1"),
                ("affinity", "positive"),
            ],
        )
        .await
        .fail(500);
    assert!(err.contains("unexpected property 'affinity'"), "{err}");
    sim.post("/cluster/ha/rules", &rule("keep", "vm:100"))
        .await
        .ok();
    let err = sim
        .post("/cluster/ha/rules", &rule("keep", "vm:101"))
        .await
        .fail(500);
    assert!(err.contains("HA rule 'keep' already defined"), "{err}");
    // A resource is in one node-affinity rule at most (`check_single_resource_reference`).
    let err = sim
        .post("/cluster/ha/rules", &rule("again", "vm:100"))
        .await
        .fail(500);
    assert!(
        err.contains("Rule 'again' is invalid.")
            && err.contains("resource 'vm:100' is already used in another node affinity rule"),
        "{err}"
    );
    assert!(
        sim.get("/cluster/ha/rules/again")
            .await
            .fail(500)
            .contains("no such ha rule 'again'")
    );

    let read = sim.get("/cluster/ha/rules/keep").await.ok();
    assert_eq!(read["type"], "node-affinity");
    assert_eq!(read["resources"], "vm:100");
    assert_eq!(read["nodes"], "pve1:2");
    assert_eq!(read["order"], 1);
    assert!(read.get("strict").is_none(), "{read}");
    let digest = read["digest"].as_str().unwrap().to_owned();
    sim.put(
        "/cluster/ha/rules/keep",
        &[
            ("type", "node-affinity"),
            ("resources", "vm:100,vm:101"),
            ("strict", "1"),
            ("digest", &digest),
        ],
    )
    .await
    .ok();
    let err = sim
        .put(
            "/cluster/ha/rules/keep",
            &[
                ("type", "node-affinity"),
                ("comment", "x"),
                ("digest", &digest),
            ],
        )
        .await
        .fail(500);
    assert!(err.contains("detected modified configuration"), "{err}");
    let err = sim
        .put(
            "/cluster/ha/rules/keep",
            &[("type", "node-affinity"), ("delete", "nodes")],
        )
        .await
        .fail(500);
    assert!(
        err.contains("unable to delete required option 'nodes'"),
        "{err}"
    );
    let list = sim.get("/cluster/ha/rules").await.ok();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["resources"], "vm:100,vm:101");
    assert_eq!(list[0]["strict"], 1);
    let of = sim.get("/cluster/ha/rules?resource=vm:101").await.ok();
    assert_eq!(of.as_array().unwrap().len(), 1);

    // Removing an HA resource takes it out of its rules (`purge`, the default); the last
    // resource of a rule takes the rule with it.
    sim.delete("/cluster/ha/resources/vm:101", &[]).await.ok();
    assert_eq!(
        sim.get("/cluster/ha/rules/keep").await.ok()["resources"],
        "vm:100"
    );
    sim.delete("/cluster/ha/resources/vm:100", &[]).await.ok();
    assert_eq!(
        sim.get("/cluster/ha/rules").await.ok(),
        serde_json::json!([])
    );
    // Deleting a rule that is not there is no error.
    sim.delete("/cluster/ha/rules/keep", &[]).await.ok();
}

#[tokio::test]
async fn pve8_has_no_rules() {
    let sim = Sim::of(PveVersion::V8_4).await;
    let err = sim.get("/cluster/ha/rules").await.fail(501);
    assert!(err.contains("not implemented"), "{err}");
}
