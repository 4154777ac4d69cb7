//! Resource mappings written through the API, as pve-manager `PVE/API2/Cluster/Mapping/PCI.pm`
//! and `USB.pm` (`create`, `update`, `delete`) and pve-guest-common `PVE/Mapping/PCI.pm`
//! (`lock_pci_config`'s message prefix) define them.

use crate::support::{Auth, Sim};
use proxops_pve_sim::{AclEntry, ApiToken};

const HBA: &str = "id=1000:0087,node=pve1,path=0000:03:00.0";

#[tokio::test]
async fn a_pci_mapping_is_created_read_updated_and_deleted() {
    let sim = Sim::start().await;
    sim.post(
        "/cluster/mapping/pci",
        &[
            ("id", "hba"),
            ("map", HBA),
            ("description", "SAS HBA"),
            ("mdev", "0"),
        ],
    )
    .await
    .ok();
    let got = sim.get("/cluster/mapping/pci/hba").await.ok();
    assert_eq!(got["map"], serde_json::json!([HBA]));
    assert_eq!(got["description"], "SAS HBA");
    assert_eq!(got["mdev"], 0);
    let list = sim.get("/cluster/mapping/pci").await.ok();
    assert_eq!(list[0]["id"], "hba");

    // A second node's entry, the description removed, with the digest just read.
    let digest = got["digest"].as_str().unwrap().to_owned();
    let second = "id=1000:0087,node=pve2,path=0000:04:00.0";
    sim.put(
        "/cluster/mapping/pci/hba",
        &[
            ("map", HBA),
            ("map", second),
            ("delete", "description"),
            ("digest", &digest),
        ],
    )
    .await
    .ok();
    let got = sim.get("/cluster/mapping/pci/hba").await.ok();
    assert_eq!(got["map"], serde_json::json!([HBA, second]));
    assert!(got.get("description").is_none(), "{got}");

    // The old digest no longer matches.
    let stale = sim
        .put(
            "/cluster/mapping/pci/hba",
            &[("description", "x"), ("digest", &digest)],
        )
        .await;
    assert_eq!(
        stale.fail(500),
        "update hardware mapping failed: detected modified configuration - file changed by other user? Try again."
    );

    sim.delete("/cluster/mapping/pci/hba", &[]).await.ok();
    assert_eq!(
        sim.get("/cluster/mapping/pci/hba").await.fail(500),
        "mapping 'hba' not found"
    );
    // Deleting what is not there is no error.
    sim.delete("/cluster/mapping/pci/hba", &[]).await.ok();
}

#[tokio::test]
async fn what_pve_refuses_is_refused_with_its_words() {
    let sim = Sim::start().await;
    sim.post(
        "/cluster/mapping/usb",
        &[("id", "stick"), ("map", "id=0951:1666,node=pve1")],
    )
    .await
    .ok();
    let again = sim
        .post(
            "/cluster/mapping/usb",
            &[("id", "stick"), ("map", "id=0951:1666,node=pve1")],
        )
        .await;
    assert_eq!(
        again.fail(500),
        "create hardware mapping failed: usb ID 'stick' already defined"
    );
    // A USB mapping's update takes `map` every time: its schema does not mark it optional.
    let without_map = sim
        .put("/cluster/mapping/usb/stick", &[("description", "x")])
        .await
        .errors();
    assert_eq!(
        without_map["map"],
        "property is missing and it is not optional"
    );
    let missing = sim
        .put("/cluster/mapping/pci/nope", &[("description", "x")])
        .await;
    assert_eq!(
        missing.fail(500),
        "update hardware mapping failed: pci ID 'nope' does not exist"
    );
    sim.post("/cluster/mapping/pci", &[("id", "hba"), ("map", HBA)])
        .await
        .ok();
    let required = sim
        .put("/cluster/mapping/pci/hba", &[("delete", "map")])
        .await;
    assert_eq!(
        required.fail(500),
        "update hardware mapping failed: unable to delete required option 'map'"
    );
    let unknown = sim
        .put(
            "/cluster/mapping/usb/stick",
            &[("map", "id=0951:1666,node=pve1"), ("delete", "mdev")],
        )
        .await;
    assert_eq!(
        unknown.fail(500),
        "update hardware mapping failed: no such option 'mdev'"
    );
    // Each `map` entry is checked against the item format: a PCI entry needs its node.
    let bad = sim
        .post(
            "/cluster/mapping/pci",
            &[("id", "gpu"), ("map", "id=10de:2204,path=0000:17:00.0")],
        )
        .await
        .errors();
    assert!(
        bad["map[0]"].as_str().is_some_and(|m| m.contains("node")),
        "{bad}"
    );
}

#[tokio::test]
async fn writing_a_mapping_needs_mapping_modify() {
    let mut cfg = crate::support::config();
    let ops = ApiToken::new("ops@pve!maps", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry {
        principal: ops.id.clone(),
        path: "/mapping/pci".into(),
        privs: vec!["Mapping.Audit".into()],
        propagate: true,
    }]);
    let sim = Sim::with(cfg).await;
    let auth = Auth::Header(ops.header());
    let refused = sim
        .send(
            "POST",
            "/cluster/mapping/pci",
            &[("id", "hba"), ("map", HBA)],
            &auth,
        )
        .await;
    assert_eq!(refused.status, 403);
    sim.post("/cluster/mapping/pci", &[("id", "hba"), ("map", HBA)])
        .await
        .ok();
    let refused = sim
        .send("DELETE", "/cluster/mapping/pci/hba", &[], &auth)
        .await;
    assert_eq!(refused.status, 403);
}
