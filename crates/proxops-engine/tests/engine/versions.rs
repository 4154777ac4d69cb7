//! The cluster's PVE release and storages decide what a plan may ask: the release is read once
//! per connection (`GET /version`), and what that release or a storage would refuse is a
//! plan-time anomaly naming the reason, never a failed task.

use crate::support::{graph_of, offline_simulator, one_node};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::{PlanOptions, plan_cluster};
use proxops_pve::PveClient;
use proxops_pve_sim::{PveVersion, State};

/// An OCI image saved with `docker save`: a plain `.tar`.
const OCI: &str = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: alpine-oci\nspec:\n  node: pve1\n  storage: local\n  filename: alpine-oci.tar\n  url: https://example.invalid/alpine-oci.tar\n";

fn vm(storage: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: {storage}\n      interface: scsi0\n      size: 4GiB\n{extra}"
    )
}

fn of(version: PveVersion) -> State {
    State {
        pve_version: version,
        ..one_node()
    }
}

async fn plan(client: &PveClient, texts: &[&str]) -> ClusterPlan {
    plan_cluster(client, "t", &graph_of(texts), &PlanOptions::default())
        .await
        .unwrap()
}

fn anomalies(plan: &ClusterPlan) -> Vec<String> {
    plan.anomalies
        .iter()
        .map(|a| format!("{}: {}", a.subject, a.message))
        .collect()
}

/// pve-storage `src/PVE/Storage.pm` `$VZTMPL_EXT_RE_1` takes a plain `.tar` only since commit
/// 0d392b2 "allow .tar container templates" (PVE 9.1): on 8.4 the download would fail with
/// "wrong file extension", so the plan says why instead; on 9.1 it downloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_tar_template_needs_pve_9_1() {
    let (sim, client) = offline_simulator(of(PveVersion::V8_4)).await;
    let p = plan(&client, &[OCI]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(
        anomalies(&p),
        [
            "CTTemplate/alpine-oci: `alpine-oci.tar` is a plain .tar container template, which PVE accepts only from 9.1 (pve-storage `$VZTMPL_EXT_RE_1`); the cluster runs PVE 8.4: use a compressed template (.tar.zst, .tar.gz, .tar.xz or .tar.bz2)"
        ]
    );
    sim.shutdown().await.unwrap();

    let (sim, client) = offline_simulator(of(PveVersion::V9_1)).await;
    let p = plan(&client, &[OCI]).await;
    assert!(p.anomalies.is_empty(), "{p:#?}");
    assert_eq!(p.actions.len(), 1);
    assert_eq!(p.actions[0].verb, Verb::Download);
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert!(plan(&client, &[OCI]).await.is_empty(), "converged");
    sim.shutdown().await.unwrap();
}

/// qemu-server `src/PVE/API2/Qemu.pm` `$check_storage_access` refuses a new disk on a storage
/// without `images` ("storage '...' does not support vm images"), and `PVE::Storage` one that
/// does not exist: the plan names the storage and the missing content before anything is sent.
/// A disk added later to a converged VM is checked the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_without_the_content_fails_at_plan_time() {
    let (sim, client) = offline_simulator(one_node()).await;
    let p = plan(&client, &[&vm("local", "")]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(
        anomalies(&p),
        [
            "VM/web: scsi0: storage `local` on `pve1` does not hold `images` content (disk images; it holds iso, vztmpl, import, snippets), so PVE refuses the volume: enable `images` on it (Datacenter > Storage) or use another storage"
        ]
    );
    let ghost = plan(&client, &[&vm("ghost", "")]).await;
    assert_eq!(
        anomalies(&ghost),
        ["VM/web: scsi0: storage `ghost` does not exist on node `pve1`"]
    );
    // Converged on local-lvm, then a second disk on `local`.
    let good = vm("local-lvm", "");
    let first = plan(&client, &[&good]).await;
    let report = execute(&client, &first, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    let more = good.replace(
        "      size: 4GiB\n",
        "      size: 4GiB\n    - storage: local\n      interface: scsi1\n      size: 1GiB\n",
    );
    let p = plan(&client, &[&more]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert!(
        anomalies(&p)[0]
            .starts_with("VM/web: scsi1: storage `local` on `pve1` does not hold `images` content"),
        "{p:#?}"
    );
    assert!(!sim.state().guests[&120].config.contains_key("scsi1"));
    sim.shutdown().await.unwrap();
}

/// `allow-ksm` is a create parameter of PVE 9.1 (absent from the 8.4.2 schema): asked of an
/// 8.4 cluster through `pve-config`, the plan refuses it; 9.1 takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_parameter_of_9_1_is_refused_for_8_4() {
    let text = vm("local-lvm", "  pve-config:\n    allow-ksm: false\n");
    let (sim, client) = offline_simulator(of(PveVersion::V8_4)).await;
    let p = plan(&client, &[&text]).await;
    assert!(p.actions.is_empty(), "{p:#?}");
    assert_eq!(
        anomalies(&p),
        [
            "VM/web: `allow-ksm` is a config key of PVE 9.1 only; the cluster runs PVE 8.4: remove it"
        ]
    );
    sim.shutdown().await.unwrap();
    let (sim, client) = offline_simulator(of(PveVersion::V9_1)).await;
    let p = plan(&client, &[&text]).await;
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    assert_eq!(sim.state().guests[&120].config["allow-ksm"], "0");
    sim.shutdown().await.unwrap();
}

/// The release is read once per connection: plans on one client ask `/version` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_is_read_once_per_connection() {
    let (sim, client) = offline_simulator(one_node()).await;
    let text = vm("local-lvm", "");
    for _ in 0..3 {
        plan(&client, &[&text]).await;
    }
    assert_eq!(client.counters().count("GET", "/version"), 1);
    assert_eq!(sim.count("GET", "/version"), 1);
    sim.shutdown().await.unwrap();
}
