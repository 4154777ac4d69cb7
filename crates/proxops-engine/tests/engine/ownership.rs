//! Per-key ownership from the previous desired document: what ProxOps wrote and the manifest no
//! longer declares is removed from the guest (keys, property-string sub-keys, tags); disks are
//! only reported; without a previous document nothing is removed, only reported; a clone drops
//! its template's tags and description.

use crate::support::{
    CT_TEMPLATE, graph_of, manifest, one_node, one_node_with_ct_template, root_simulator, simulator,
};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, KeyChange, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_model::{Resource, ResourceKey};
use proxops_pve::{GuestRef, PveClient};
use std::collections::BTreeMap;
use std::sync::Arc;

const CLUSTER: &str = "t";

/// The VM `web` (vmid 120), with what a test toggles.
#[derive(Clone)]
struct Web {
    second_nic: bool,
    firewall: bool,
    second_disk: bool,
    options: bool,
    description: bool,
    tags: &'static [&'static str],
    cdrom: Option<&'static str>,
}

impl Default for Web {
    fn default() -> Self {
        Web {
            second_nic: true,
            firewall: true,
            second_disk: true,
            options: true,
            description: true,
            tags: &["web", "blue"],
            cdrom: None,
        }
    }
}

impl Web {
    fn text(&self) -> String {
        let mut t = String::from(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 4GiB\n",
        );
        if self.second_disk {
            t.push_str("    - storage: local-lvm\n      interface: scsi1\n      size: 2GiB\n");
        }
        t.push_str("  networks:\n    - model: virtio\n      bridge: vmbr0\n");
        if self.firewall {
            t.push_str("      firewall: true\n");
        }
        if self.second_nic {
            t.push_str("    - model: virtio\n      bridge: vmbr1\n");
        }
        if let Some(iso) = self.cdrom {
            t.push_str(&format!("  hardware:\n    cdrom:\n      iso: {iso}\n"));
        }
        if self.options {
            t.push_str("  options:\n    protection: true\n    onboot: true\n");
        }
        if !self.tags.is_empty() {
            t.push_str("  tags:\n");
            for tag in self.tags {
                t.push_str(&format!("    - {tag}\n"));
            }
        }
        if self.description {
            t.push_str("  pve-description: \"web server\"\n");
        }
        t
    }
}

/// `previous` as the desired plane would give it: each text's resource by key.
fn previous(texts: &[&str]) -> BTreeMap<ResourceKey, Arc<Resource>> {
    texts
        .iter()
        .map(|t| {
            let r = manifest(t);
            (r.key(), r)
        })
        .collect()
}

async fn plan(
    client: &PveClient,
    now: &[&str],
    before: Option<BTreeMap<ResourceKey, Arc<Resource>>>,
) -> ClusterPlan {
    let graph = graph_of(now);
    let options = PlanOptions::default().with_previous(before);
    plan_cluster(client, CLUSTER, &graph, &options)
        .await
        .unwrap()
}

async fn run(client: &PveClient, plan: &ClusterPlan) {
    let report = execute(client, plan, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
}

async fn config(client: &PveClient) -> BTreeMap<String, String> {
    client
        .guest_config(&GuestRef::qemu("pve1", 120))
        .await
        .unwrap()
        .values
}

/// A simulator with `web` created from `v1` (no planes yet).
async fn created(v1: &str) -> (proxops_pve_sim::SimHandle, PveClient) {
    let (sim, client) = simulator(one_node()).await;
    let p = plan(&client, &[v1], None).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    assert_eq!(p.actions[0].verb, Verb::Create);
    run(&client, &p).await;
    (sim, client)
}

/// The one action of a plan, an update of `web`.
fn update(p: &ClusterPlan) -> &proxops_engine::plan::Action {
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    let a = &p.actions[0];
    assert_eq!((a.verb, a.name.as_str()), (Verb::Update, "web"), "{p:#?}");
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nic_removed_from_the_manifest_is_deleted_from_the_guest() {
    let v1 = Web::default().text();
    let v2 = Web {
        second_nic: false,
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    let net1 = config(&client).await["net1"].clone();
    assert!(net1.starts_with("virtio=") && net1.contains("bridge=vmbr1"));
    let p = plan(&client, &[&v2], Some(previous(&[&v1]))).await;
    let a = update(&p);
    assert_eq!(a.reason, "removed: net1");
    let fields: Vec<_> = a
        .changes
        .iter()
        .map(|c: &KeyChange| {
            (
                c.key.as_str(),
                c.from.clone(),
                c.to.clone(),
                c.delete,
                c.removed.len(),
            )
        })
        .collect();
    assert_eq!(fields, [("net1", Some(net1.clone()), None, true, 0)]);
    // The plan document marks the removal, without a value written.
    assert_eq!(
        serde_json::to_value(a).unwrap()["changes"],
        serde_json::json!([{"key": "net1", "from": net1, "delete": true}])
    );
    let net0 = config(&client).await["net0"].clone();
    run(&client, &p).await;
    let live = config(&client).await;
    assert!(!live.contains_key("net1"), "{live:#?}");
    assert_eq!(live["net0"], net0);
    // Converged, whether the planes now hold the new document or nothing.
    assert!(
        plan(&client, &[&v2], Some(previous(&[&v2])))
            .await
            .is_empty()
    );
    let none = plan(&client, &[&v2], None).await;
    assert!(none.is_empty() && none.warnings.is_empty(), "{none:#?}");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_user_tag_goes_and_the_operators_own_tag_stays() {
    let v1 = Web::default().text();
    let v2 = Web {
        tags: &["web"],
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    // The operator tags the guest by hand; no desired document ever declared `handmade`.
    sim.with_state(|st| {
        let g = st.guests.get_mut(&120).unwrap();
        let tags = g.config["tags"].clone();
        g.config.insert("tags".into(), format!("{tags};handmade"));
    });
    let p = plan(&client, &[&v2], Some(previous(&[&v1]))).await;
    let a = update(&p);
    assert_eq!(a.changes.len(), 1, "{p:#?}");
    let c = &a.changes[0];
    assert_eq!(c.key, "tags");
    assert_eq!(c.removed, ["blue"]);
    assert!(!c.delete);
    run(&client, &p).await;
    let mut tags: Vec<String> = config(&client)
        .await
        .get("tags")
        .unwrap()
        .split(';')
        .map(str::to_owned)
        .collect();
    tags.sort();
    assert_eq!(tags, ["handmade", "proxops", "proxops.t.vm.web", "web"]);
    assert!(
        plan(&client, &[&v2], Some(previous(&[&v2])))
            .await
            .is_empty()
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_options_and_description_are_deleted_back_to_pves_defaults() {
    let v1 = Web::default().text();
    let v2 = Web {
        options: false,
        description: false,
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    let live = config(&client).await;
    assert_eq!(
        (live["protection"].as_str(), live["onboot"].as_str()),
        ("1", "1")
    );
    let p = plan(&client, &[&v2], Some(previous(&[&v1]))).await;
    let a = update(&p);
    let deleted: Vec<(&str, bool, Option<&str>)> = a
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.delete, c.to.as_deref()))
        .collect();
    assert_eq!(
        deleted,
        [
            ("description", true, None),
            ("onboot", true, None),
            ("protection", true, None)
        ]
    );
    assert_eq!(a.reason, "removed: description, onboot, protection");
    run(&client, &p).await;
    let live = config(&client).await;
    for key in ["protection", "onboot", "description"] {
        assert!(!live.contains_key(key), "{key}: {live:#?}");
    }
    assert!(
        plan(&client, &[&v2], Some(previous(&[&v2])))
            .await
            .is_empty()
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_firewall_sub_key_is_taken_out_of_the_nic() {
    let v1 = Web::default().text();
    let v2 = Web {
        firewall: false,
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    let before = config(&client).await["net0"].clone();
    assert!(before.contains("firewall=1"), "{before}");
    // Without the previous document the sub-key cannot be proven ours: left alone.
    assert!(plan(&client, &[&v2], None).await.is_empty());
    let p = plan(&client, &[&v2], Some(previous(&[&v1]))).await;
    let a = update(&p);
    assert_eq!(a.changes.len(), 1, "{p:#?}");
    let c = &a.changes[0];
    assert_eq!(
        (c.key.as_str(), c.removed.as_slice()),
        ("net0", &["firewall".to_owned()][..])
    );
    let want = before.replace(",firewall=1", "");
    assert_eq!(c.to.as_deref(), Some(want.as_str()));
    run(&client, &p).await;
    // The MAC address PVE made up stays: only the sub-key goes.
    assert_eq!(config(&client).await["net0"], want);
    assert!(
        plan(&client, &[&v2], Some(previous(&[&v2])))
            .await
            .is_empty()
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_removed_from_the_manifest_is_an_anomaly_and_is_kept() {
    let v1 = Web::default().text();
    let v2 = Web {
        second_disk: false,
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    let scsi1 = config(&client).await["scsi1"].clone();
    let p = plan(&client, &[&v2], Some(previous(&[&v1]))).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(p.anomalies.len(), 1, "{p:#?}");
    assert_eq!(p.anomalies[0].subject, "VM/web");
    assert!(
        p.anomalies[0]
            .message
            .starts_with("scsi1 is no longer in the manifest")
            && p.anomalies[0].message.contains("never removes a disk"),
        "{p:#?}"
    );
    assert_eq!(config(&client).await["scsi1"], scsi1);
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_previous_document_undeclared_keys_are_reported_never_removed() {
    let v1 = Web::default().text();
    let v2 = Web {
        second_nic: false,
        options: false,
        tags: &["web"],
        ..Web::default()
    }
    .text();
    let (sim, client) = created(&v1).await;
    // A key of no family the manifest manages: not worth a warning.
    sim.with_state(|st| {
        let g = st.guests.get_mut(&120).unwrap();
        g.config.insert("serial1".into(), "socket".into());
    });
    let before = config(&client).await;
    let warning = "VM/web: net1 is on the guest but not in the manifest; without a previous desired document ProxOps cannot tell whether it set it: left alone";
    // No planes; planes without this resource; a previous document that no longer maps (its
    // cdrom names an ISO the cluster no longer has).
    let unmappable = Web {
        cdrom: Some("gone"),
        ..Web::default()
    }
    .text();
    for before_docs in [None, Some(BTreeMap::new()), Some(previous(&[&unmappable]))] {
        let p = plan(&client, &[&v2], before_docs).await;
        assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
        assert_eq!(p.warnings, [warning], "{p:#?}");
    }
    // The same guest, nothing touched: net1, protection, onboot and the tag `blue` stay.
    assert_eq!(config(&client).await, before);
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_keeps_only_its_own_tags_and_no_template_description() {
    let template = "apiVersion: proxops/v1alpha1\nkind: TemplateVM\nmetadata:\n  name: golden\nspec:\n  node: pve1\n  vmid: 9000\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      interface: scsi0\n      size: 4GiB\n  networks:\n    - model: virtio\n      bridge: vmbr0\n  tags:\n    - template\n    - golden\n    - do-not-start\n  pve-description: \"golden image, do not start\"\n";
    let clone = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: app\nspec:\n  node: pve1\n  vmid: 130\n  clone: golden\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  networks:\n    - model: virtio\n      bridge: vmbr0\n  tags:\n    - app\n";
    let (sim, client) = simulator(one_node()).await;
    let p = plan(&client, &[template, clone], None).await;
    let verbs: Vec<(Verb, &str)> = p
        .actions
        .iter()
        .map(|a| (a.verb, a.name.as_str()))
        .collect();
    assert_eq!(verbs, [(Verb::Create, "golden"), (Verb::Create, "app")]);
    run(&client, &p).await;
    let live = client
        .guest_config(&GuestRef::qemu("pve1", 130))
        .await
        .unwrap();
    let mut tags = live.tags();
    tags.sort();
    assert_eq!(tags, ["app", "proxops", "proxops.t.vm.app"]);
    assert!(
        !live.values.contains_key("description"),
        "{:#?}",
        live.values
    );
    // The template keeps its own.
    let tpl = client
        .guest_config(&GuestRef::qemu("pve1", 9000))
        .await
        .unwrap();
    assert!(tpl.tags().contains(&"golden".to_owned()));
    assert!(tpl.values.contains_key("description"));
    assert!(plan(&client, &[template, clone], None).await.is_empty());
    sim.shutdown().await.unwrap();
}

/// A container `ct` (vmid 200) from a downloaded template: two NICs and `features: nesting=1,
/// keyctl=1`, or one NIC and only `keyctl`.
fn ct(before: bool) -> String {
    let mut t = String::from(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n",
    );
    if before {
        t.push_str("    - bridge: vmbr1\n");
    }
    t.push_str("  options:\n    keyctl: true\n");
    if before {
        t.push_str("    nesting: true\n");
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containers_removed_nic_and_feature_are_removed_too() {
    let state = one_node_with_ct_template();
    // keyctl is a feature only root@pam may set (pve-container `check_ct_modify_config_perm`).
    let (sim, client) = root_simulator(state).await;
    let (v1, v2) = (ct(true), ct(false));
    let p = plan(&client, &[CT_TEMPLATE, &v1], None).await;
    assert_eq!(p.actions.len(), 1, "{p:#?}");
    run(&client, &p).await;
    let target = GuestRef::lxc("pve1", 200);
    let live = client.guest_config(&target).await.unwrap().values;
    assert!(live.contains_key("net1"), "{live:#?}");
    let p = plan(
        &client,
        &[CT_TEMPLATE, &v2],
        Some(previous(&[CT_TEMPLATE, &v1])),
    )
    .await;
    let a = &p.actions[0];
    assert_eq!((p.actions.len(), a.verb), (1, Verb::Update), "{p:#?}");
    let got: Vec<(&str, bool, &[String])> = a
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.delete, c.removed.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            ("features", false, &["nesting".to_owned()][..]),
            ("net1", true, &[][..])
        ]
    );
    // `features` applies at the next start: the running container is restarted for it.
    assert!(a.restart, "{p:#?}");
    run(&client, &p).await;
    let live = client.guest_config(&target).await.unwrap().values;
    assert!(!live.contains_key("net1"), "{live:#?}");
    assert_eq!(live["features"], "keyctl=1");
    let again = plan(
        &client,
        &[CT_TEMPLATE, &v2],
        Some(previous(&[CT_TEMPLATE, &v2])),
    )
    .await;
    assert!(again.is_empty(), "{again:#?}");
    sim.shutdown().await.unwrap();
}
