//! `proxops apply --planes`, `proxops get` and `proxops status` end to end: the homelab example
//! committed in a temporary git repository, applied to a persistent simulator, its planes read
//! back with the git CLI.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{Lab, copy_tree, example, git, git_output, proxops_bin};
use serde_json::Value;
use std::process::Command;

impl Lab {
    /// `proxops apply --planes` on cluster lab's persistent simulator; its standard output.
    fn apply(&self) -> String {
        let out = self.apply_on("lab", &["--planes"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "apply failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// `proxops get ... -o json` for cluster lab.
    fn get_json(&self, selector: &str) -> Value {
        let out = self.proxops(&["get", selector, "--cluster", "lab", "-o", "json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn commits(&self, branch: &str) -> usize {
        self.git(&["rev-list", "--count", branch])
            .trim()
            .parse()
            .unwrap()
    }
}

const DESIRED: &str = "proxops/desired/lab";
const OBSERVED: &str = "proxops/observed/lab";

fn fsck_is_clean(lab: &Lab) {
    let out = git_output(lab.path(), &["fsck", "--strict", "--no-dangling"]);
    assert!(
        out.status.success(),
        "git fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every desired resource has a receipt, and each receipt pins its resource's live blob.
fn receipts_are_current(lab: &Lab) {
    let resources = lab.files(DESIRED, "resources");
    assert_eq!(resources.len(), 5, "{resources:?}");
    let receipts = lab.files(OBSERVED, "receipts");
    let expected: Vec<String> = resources
        .iter()
        .map(|r| r.replacen("resources/", "receipts/", 1))
        .collect();
    assert_eq!(receipts, expected);
    for (resource, receipt) in resources.iter().zip(&receipts) {
        let blob = lab.git(&["rev-parse", &format!("{DESIRED}:{resource}")]);
        let text = lab.git(&["show", &format!("{OBSERVED}:{receipt}")]);
        let blob = blob.trim();
        assert!(
            text.contains(&format!("blob: \"{blob}\"")) || text.contains(&format!("blob: {blob}")),
            "{receipt} does not pin {resource} ({blob}):\n{text}"
        );
    }
}

#[test]
fn apply_with_planes_publishes_desired_then_current_receipts_and_get_and_status_show_them() {
    let lab = Lab::new();
    let head = lab.git(&["rev-parse", "HEAD"]);
    let stdout = lab.apply();
    assert!(
        stdout.contains("cluster lab: proxops/desired/lab at ") && stdout.contains("(published)"),
        "{stdout}"
    );
    assert!(stdout.contains("cluster lab: 5 succeeded"), "{stdout}");
    assert!(
        stdout.contains("receipt(s), 0 teardown(s)") && stdout.contains(": 5 receipt(s)"),
        "{stdout}"
    );

    // Both planes exist, read back with the git CLI.
    lab.git(&["rev-parse", "--verify", &format!("refs/heads/{DESIRED}")]);
    lab.git(&["rev-parse", "--verify", &format!("refs/heads/{OBSERVED}")]);
    fsck_is_clean(&lab);
    let message = lab.git(&["log", "-1", "--format=%B", DESIRED]);
    assert!(
        message.contains(&format!("Source-Revision: {}", head.trim())),
        "{message}"
    );
    assert!(lab.files(DESIRED, "cluster.yaml") == ["cluster.yaml"]);
    receipts_are_current(&lab);
    let receipt = lab.git(&["show", &format!("{OBSERVED}:receipts/VM/sandbox-01.yaml")]);
    assert!(receipt.contains("outcome: created"), "{receipt}");
    assert!(receipt.contains("UPID:"), "{receipt}");
    assert!(receipt.contains("startedAt: "), "{receipt}");

    // A second apply: converged, nothing to do; the container it started reports its
    // addresses now, and only its receipt is published again, with them.
    let (desired, observed) = (lab.commits(DESIRED), lab.commits(OBSERVED));
    assert_eq!((desired, observed), (1, 1));
    let stdout = lab.apply();
    assert!(stdout.contains("converged, nothing to do"), "{stdout}");
    assert!(stdout.contains("(unchanged)"), "{stdout}");
    assert!(stdout.contains(": 1 receipt(s), 0 teardown(s)"), "{stdout}");
    assert_eq!((lab.commits(DESIRED), lab.commits(OBSERVED)), (1, 2));
    assert!(
        lab.files(OBSERVED, "artifacts/LXC/ci-runner-01")
            .contains(&"artifacts/LXC/ci-runner-01/ip-addresses.yaml".to_owned())
    );
    // A third: nothing new in either plane.
    let stdout = lab.apply();
    assert!(
        stdout.contains("proxops/observed/lab unchanged: receipts are current"),
        "{stdout}"
    );
    assert_eq!((lab.commits(DESIRED), lab.commits(OBSERVED)), (1, 2));
    fsck_is_clean(&lab);

    // get: every resource CLEAN with a current receipt.
    let list = lab.get_json("all");
    assert_eq!(list["apiVersion"], "proxops/v1alpha1");
    assert_eq!(list["kind"], "ResourceList");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    let desired_head = lab.git(&["rev-parse", DESIRED]);
    for item in items {
        assert_eq!(item["cluster"], "lab");
        assert_eq!(item["state"], "CLEAN", "{item}");
        assert_eq!(item["desired"]["revision"], desired_head.trim());
        assert_eq!(item["receipt"]["observation"], "CURRENT", "{item}");
        assert_eq!(
            item["receipt"]["spec"]["desired"]["blob"],
            item["desired"]["blob"]
        );
    }
    let names: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["kind"].as_str().unwrap(),
                i["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "CTTemplate/debian-13-standard",
            "DiskImage/debian-13-genericcloud",
            "ISO/debian-13-netinst",
            "LXC/ci-runner-01",
            "VM/sandbox-01"
        ]
    );

    let out = lab.proxops(&["get", "vm/sandbox-01", "--cluster", "lab"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("CLUSTER  KIND  NAME        DESIRED       OBSERVATION  STATE  REASON"),
        "{table}"
    );
    let blob = lab.git(&[
        "rev-parse",
        &format!("{DESIRED}:resources/VM/sandbox-01.yaml"),
    ]);
    assert_eq!(
        lines[1],
        format!(
            "lab      VM    sandbox-01  {}  CURRENT      CLEAN  observation matches desired state",
            &blob[..12]
        )
    );
    let yaml = lab.proxops(&["get", "LXC", "--cluster", "lab", "-o", "yaml"]);
    let yaml = String::from_utf8_lossy(&yaml.stdout).into_owned();
    assert!(yaml.contains("kind: ResourceList"), "{yaml}");
    assert!(yaml.contains("name: ci-runner-01"), "{yaml}");
    let missing = lab.proxops(&["get", "VM/nope", "--cluster", "lab"]);
    assert_eq!(missing.status.code(), Some(1));

    // status: one row per cluster of the repository; home was never applied.
    let out = lab.proxops(&["status"]);
    assert!(out.status.success(), "{out:?}");
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let observed_head = lab.git(&["rev-parse", OBSERVED]);
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines.len(), 3, "{status}");
    let fields =
        |line: &str| -> Vec<String> { line.split_whitespace().map(str::to_owned).collect() };
    assert_eq!(
        fields(lines[0]),
        [
            "CLUSTER",
            "DESIRED",
            "OBSERVED",
            "RECONCILIATION",
            "LAST-CYCLE"
        ]
    );
    assert_eq!(
        fields(lines[1]),
        [
            "home",
            "proxops/desired/home@missing",
            "proxops/observed/home@missing",
            "none",
            "-"
        ]
    );
    let lab_row = fields(lines[2]);
    assert_eq!(
        lab_row[..4],
        [
            "lab".to_owned(),
            format!("proxops/desired/lab@{}", &desired_head[..12]),
            format!("proxops/observed/lab@{}", &observed_head[..12]),
            "clean=5".to_owned()
        ]
    );
    assert!(lab_row[4].ends_with('Z'), "{status}");
    let out = lab.proxops(&["status", "--cluster", "lab", "-o", "json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["kind"], "ClusterStatusList");
    let lab_status = &status["clusters"][0];
    assert_eq!(lab_status["cluster"], "lab");
    assert_eq!(lab_status["desired"]["ref"], DESIRED);
    assert_eq!(lab_status["desired"]["revision"], desired_head.trim());
    assert_eq!(lab_status["sourceRevision"], head.trim());
    assert_eq!(lab_status["observed"]["revision"], observed_head.trim());
    assert_eq!(
        lab_status["counts"],
        serde_json::json!({"clean": 5, "ready": 0, "wait": 0, "deleting": 0})
    );
    assert_eq!(lab_status["receipts"], serde_json::json!({"current": 5}));
}

#[test]
fn a_changed_manifest_gets_a_new_desired_commit_and_an_updated_receipt() {
    let lab = Lab::new();
    lab.apply();
    let before = lab.get_json("VM/sandbox-01")["items"][0].clone();
    let path = lab.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("memory: 2GiB"), "{text}");
    std::fs::write(&path, text.replace("memory: 2GiB", "memory: 4GiB")).unwrap();
    // Uncommitted: apply --planes reads HEAD, so nothing changes.
    let stdout = lab.apply();
    assert!(stdout.contains("converged, nothing to do"), "{stdout}");
    assert_eq!(lab.commits(DESIRED), 1);
    lab.commit("more memory");
    let stdout = lab.apply();
    assert!(stdout.contains("update    VM/sandbox-01 (100)"), "{stdout}");
    assert!(stdout.contains("(published)"), "{stdout}");
    assert!(stdout.contains(": 1 receipt(s), 0 teardown(s)"), "{stdout}");
    // Three observed commits: the first apply's, the container's addresses (the second
    // apply's), the update's.
    assert_eq!((lab.commits(DESIRED), lab.commits(OBSERVED)), (2, 3));
    receipts_are_current(&lab);
    let after = lab.get_json("VM/sandbox-01")["items"][0].clone();
    assert_eq!(after["state"], "CLEAN");
    assert_eq!(after["uid"], before["uid"], "same incarnation");
    assert_ne!(after["desired"]["blob"], before["desired"]["blob"]);
    assert_eq!(after["receipt"]["spec"]["result"]["outcome"], "updated");
    fsck_is_clean(&lab);
}

#[test]
fn a_removed_guest_is_deleted_its_teardown_recorded_then_its_intent_cleaned_up() {
    let lab = Lab::new();
    lab.apply();
    let resources = lab.path().join("clusters/lab/resources.yaml");
    let text = std::fs::read_to_string(&resources).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains("ci-runner-01"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&resources, kept).unwrap();
    lab.commit("drop the CI runner");

    let stdout = lab.apply();
    assert!(
        stdout.contains("delete    LXC/ci-runner-01 (200)"),
        "{stdout}"
    );
    assert!(stdout.contains(": 0 receipt(s), 1 teardown(s)"), "{stdout}");
    let intents = lab.files(DESIRED, "deletions");
    assert_eq!(intents, ["deletions/LXC/ci-runner-01.yaml"]);
    let teardowns = lab.files(OBSERVED, "teardowns");
    assert_eq!(teardowns.len(), 1, "{teardowns:?}");
    assert!(teardowns[0].starts_with("teardowns/LXC/ci-runner-01/u1-"));
    assert!(lab.files(OBSERVED, "receipts/LXC").is_empty());
    let row = lab.get_json("LXC/ci-runner-01")["items"][0].clone();
    assert_eq!(row["state"], "WAIT", "{row}");

    // The next publication finalizes the intent.
    let stdout = lab.apply();
    assert!(stdout.contains("(published)"), "{stdout}");
    assert!(lab.files(DESIRED, "deletions").is_empty());
    let message = lab.git(&["log", "-1", "--format=%B", DESIRED]);
    assert!(message.contains("Finalized: LXC/ci-runner-01"), "{message}");
    let out = lab.proxops(&["get", "LXC", "--cluster", "lab"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No resources found.\n"
    );
    fsck_is_clean(&lab);
}

#[test]
fn apply_with_planes_needs_a_git_repository() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&example("homelab"), dir.path());
    let out = Command::new(proxops_bin())
        .args([
            "apply",
            "--planes",
            "--dry-run",
            "--cluster",
            "lab",
            "--backend",
            "sim",
        ])
        .arg("--repo")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a git repository"), "{stderr}");
}

#[test]
fn resources_applied_before_planes_get_in_sync_receipts() {
    let lab = Lab::new();
    let out = lab.apply_on("lab", &["--no-planes"]);
    assert!(out.status.success(), "{out:?}");
    let plain = lab.git(&["branch", "--list", "proxops/*"]);
    assert_eq!(plain, "", "apply --no-planes writes no plane");
    let stdout = lab.apply();
    assert!(stdout.contains("converged, nothing to do"), "{stdout}");
    assert!(stdout.contains(": 5 receipt(s), 0 teardown(s)"), "{stdout}");
    receipts_are_current(&lab);
    let list = lab.get_json("all");
    for item in list["items"].as_array().unwrap() {
        assert_eq!(item["state"], "CLEAN", "{item}");
        assert_eq!(item["receipt"]["spec"]["result"]["outcome"], "inSync");
        assert!(item["receipt"]["spec"]["result"].get("upids").is_none());
    }
}

/// A cycle that publishes nothing new reconciles the plane it read before publishing (shared,
/// not read again); one that moves the head reconciles the new head.
#[test]
fn the_plane_read_before_publishing_is_the_one_reconciled_while_the_head_stays() {
    use proxops_engine::planes::Planes;
    use proxops_model::{LoadOptions, Registry, load_repository};
    use proxops_store::Store;
    use std::sync::Arc;

    let lab = Lab::new();
    let store = Store::open(lab.path()).unwrap();
    let registry = Registry::builtin();
    let load = || {
        let source = store.source(None).unwrap();
        let repo = load_repository(&source, &registry, &LoadOptions::default()).unwrap();
        (source.commit(), repo)
    };
    let planes = Planes::for_cluster(store.clone(), "lab").unwrap();
    let (commit, repo) = load();
    let first = planes.publish_desired_over(&repo, commit, None).unwrap();
    assert!(first.publication.publication.published);
    let prior = Arc::new(store.read_desired(&planes.refs, None).unwrap().unwrap());
    let same = planes
        .publish_desired_over(&repo, commit, Some(&prior))
        .unwrap();
    assert!(!same.publication.publication.published);
    assert!(Arc::ptr_eq(&same.state, &prior), "the plane was read again");

    set_sandbox_memory(&lab, "2GiB", "3GiB");
    let (commit, repo) = load();
    let moved = planes
        .publish_desired_over(&repo, commit, Some(&prior))
        .unwrap();
    assert!(moved.publication.publication.published);
    assert!(!Arc::ptr_eq(&moved.state, &prior));
    assert_eq!(
        moved.state.plane.commit.id,
        moved.publication.publication.head
    );
    assert_ne!(moved.state.plane.commit.id, prior.plane.commit.id);
}

/// The engine with planes, without the CLI: a failed download and the VM deferred behind it get
/// no receipt and stay READY; the next cycle reconciles them and only them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_deferred_actions_earn_no_receipt_until_a_later_cycle_succeeds() {
    use proxops_engine::backend::{Backend, connect};
    use proxops_engine::cycle::{plan_options, reconcile};
    use proxops_engine::execute::ExecOptions;
    use proxops_engine::planes::{Planes, Selector, resource_items};
    use proxops_graph::check_repository;
    use proxops_model::{LoadOptions, Registry, load_repository};
    use proxops_pve_sim::FaultConfig;
    use proxops_store::{ResourceState, Store};

    let lab = Lab::new();
    let store = Store::open(lab.path()).unwrap();
    let source = store.source(None).unwrap();
    let registry = Registry::builtin();
    let mut repo = load_repository(&source, &registry, &LoadOptions::default()).unwrap();
    let graph = check_repository(&registry, &mut repo)
        .into_iter()
        .find(|c| c.name == "lab")
        .and_then(|c| c.graph)
        .unwrap();
    let cluster = repo.cluster("lab").unwrap();
    let backend = Backend::Sim {
        state_file: None,
        task_time: std::time::Duration::from_millis(10),
    };
    let conn = connect(&registry, cluster, &backend).await.unwrap();
    let sim = conn.sim.as_ref().unwrap();
    sim.set_faults(
        FaultConfig::default()
            .with_failing_tasks(vec!["download:debian-13-genericcloud-amd64.qcow2".into()]),
    );
    let planes = Planes::for_cluster(store.clone(), "lab").unwrap();
    let (plan, exec) = (plan_options(cluster, None), ExecOptions::default());

    let mut states = Vec::new();
    for _ in 0..2 {
        let started = std::time::SystemTime::now();
        let desired = planes.publish_desired(&repo, source.commit()).unwrap();
        let cycle = reconcile(&conn.client, "lab", &graph, &plan, &exec, false)
            .await
            .unwrap();
        let published = planes
            .publish_receipts(&desired.state, &cycle.plan, cycle.report.as_ref(), started)
            .unwrap();
        let withheld: Vec<String> = published
            .withheld
            .iter()
            .map(|(k, why)| format!("{k}: {}", why.split(':').next().unwrap()))
            .collect();
        let view = store.view(&planes.refs).unwrap();
        let rows: Vec<(String, ResourceState)> = resource_items(&view, &Selector::default())
            .into_iter()
            .map(|i| (format!("{}/{}", i.kind, i.name), i.state))
            .collect();
        states.push((published.receipts, withheld, rows));
        sim.set_faults(FaultConfig::default());
    }
    use ResourceState::{Clean, Ready};
    let row = |k: &str, s| (k.to_owned(), s);
    assert_eq!(states[0].0, 3);
    assert_eq!(
        states[0].1,
        [
            "DiskImage/debian-13-genericcloud: failed",
            "VM/sandbox-01: deferred"
        ]
    );
    assert_eq!(
        states[0].2,
        [
            row("CTTemplate/debian-13-standard", Clean),
            row("DiskImage/debian-13-genericcloud", Ready),
            row("ISO/debian-13-netinst", Clean),
            row("LXC/ci-runner-01", Clean),
            row("VM/sandbox-01", Ready),
        ]
    );
    // Second cycle: the two left over are created; the three current receipts are not rewritten.
    assert_eq!(states[1].0, 2);
    assert!(states[1].1.is_empty(), "{:?}", states[1].1);
    assert!(
        states[1].2.iter().all(|(_, s)| *s == Clean),
        "{:?}",
        states[1].2
    );
    assert_eq!(lab.commits(DESIRED), 1);
    assert_eq!(lab.commits(OBSERVED), 2);
    receipts_are_current(&lab);
    fsck_is_clean(&lab);
    conn.sim.unwrap().shutdown().await.unwrap();
}

/// Appends `extra` (lines indented for `pve.clusters.<cluster>`) to a cluster's config.
fn configure(lab: &Lab, cluster: &str, extra: &str) {
    let path = lab.path().join(format!("clusters/{cluster}/config.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{}\n{extra}", text.trim_end())).unwrap();
    lab.commit(&format!("configure {cluster}"));
}

fn set_sandbox_memory(lab: &Lab, from: &str, to: &str) {
    let path = lab.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("memory: {from}")), "{text}");
    std::fs::write(
        &path,
        text.replace(&format!("memory: {from}"), &format!("memory: {to}")),
    )
    .unwrap();
    lab.commit(&format!("sandbox memory {to}"));
}

#[test]
fn promote_after_the_source_converged_writes_the_promotion_record_and_twice_is_a_no_op() {
    let lab = Lab::new();
    configure(
        &lab,
        "home",
        "      promotion:\n        allowed-sources: [lab]\n",
    );
    let refused = lab.proxops(&["promote", "--from", "lab", "--to", "home"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    lab.apply();
    // Artifacts' receipts carry their downloaded file.
    let artifacts = lab.files(OBSERVED, "artifacts");
    assert!(
        artifacts.contains(&"artifacts/ISO/debian-13-netinst/file.yaml".to_owned()),
        "{artifacts:?}"
    );
    let file = lab.git(&[
        "show",
        &format!("{OBSERVED}:artifacts/ISO/debian-13-netinst/file.yaml"),
    ]);
    assert!(
        file.contains("volid: local:iso/debian-13.2.0-amd64-netinst.iso"),
        "{file}"
    );
    let out = lab.proxops(&["promote", "--from", "lab", "--to", "home"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("proxops/desired/home at "), "{stdout}");
    fsck_is_clean(&lab);
    let record = lab.git(&["show", "proxops/desired/home:promotion.yaml"]);
    let record = proxops_store::canonical::parse_yaml(&record).unwrap();
    assert_eq!(record["kind"], "Promotion");
    assert_eq!(
        record["spec"]["source"]["desiredRevision"],
        lab.git(&["rev-parse", DESIRED]).trim()
    );
    assert_eq!(
        record["spec"]["source"]["observedRevision"],
        lab.git(&["rev-parse", OBSERVED]).trim()
    );
    assert_eq!(
        record["spec"]["specificationRevision"],
        lab.git(&["rev-parse", "HEAD"]).trim()
    );
    let again = lab.proxops(&["promote", "--from", "lab", "--to", "home"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already contains this promotion"));
    assert_eq!(lab.commits("proxops/desired/home"), 1);
}

#[test]
fn a_pull_request_gate_makes_apply_propose_a_candidate_and_reconcile_the_live_head() {
    let lab = Lab::new();
    configure(
        &lab,
        "lab",
        "      planes:\n        change-gate: pullRequest\n",
    );
    let stdout = lab.apply();
    assert!(
        stdout.contains("(published)"),
        "first publication initialises: {stdout}"
    );
    let live = lab.git(&["rev-parse", DESIRED]);
    set_sandbox_memory(&lab, "2GiB", "4GiB");
    let stdout = lab.apply();
    assert!(
        stdout.contains("candidate proxops/candidates/lab/") && stdout.contains("(proposed)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("converged, nothing to do"),
        "live head reconciled: {stdout}"
    );
    assert_eq!(lab.git(&["rev-parse", DESIRED]), live);
    let candidates = lab.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/proxops/candidates",
    ]);
    let candidate = candidates.trim();
    assert_eq!(lab.git(&["rev-parse", &format!("{candidate}~1")]), live);
    let stdout = lab.apply();
    assert!(stdout.contains("(already proposed)"), "{stdout}");
    receipts_are_current(&lab);
    fsck_is_clean(&lab);
}

#[test]
fn rollback_via_the_cli_publishes_a_forward_commit_with_the_historical_content() {
    let lab = Lab::new();
    lab.apply();
    let v1 = lab.git(&["rev-parse", DESIRED]).trim().to_owned();
    set_sandbox_memory(&lab, "2GiB", "4GiB");
    lab.apply();
    let v2 = lab.git(&["rev-parse", DESIRED]).trim().to_owned();
    let out = lab.proxops(&[
        "rollback",
        "--cluster",
        "lab",
        "--to",
        &v1,
        "--reason",
        "too big",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(lab.git(&["rev-parse", &format!("{DESIRED}~1")]).trim(), v2);
    assert_eq!(
        lab.git(&["rev-parse", &format!("{DESIRED}:resources")]),
        lab.git(&["rev-parse", &format!("{v1}:resources")]),
        "the resources of v1, byte for byte"
    );
    let message = lab.git(&["log", "-1", "--format=%B", DESIRED]);
    assert!(message.contains("Reason: too big"), "{message}");
    fsck_is_clean(&lab);
}

#[test]
fn diff_reads_the_committed_head_unless_asked_for_the_work_tree_or_another_revision() {
    let lab = Lab::new();
    let first = lab.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let composition = lab.path().join("clusters/lab/resources.yaml");
    let text = std::fs::read_to_string(&composition).unwrap();
    let without_runner = text.replace("  - ../../lxc/lab/ci-runner-01.yaml\n", "");
    std::fs::write(&composition, &without_runner).unwrap();
    lab.commit("lab: no CI runner");
    let head = lab.git(&["rev-parse", "HEAD"]).trim().to_owned();
    // Not committed: the sandbox goes too.
    std::fs::write(
        &composition,
        without_runner.replace("  - ../../vm/lab/sandbox-01.yaml\n", ""),
    )
    .unwrap();
    let actions = |extra: &[&str]| {
        let mut args = vec![
            "diff",
            "--cluster",
            "lab",
            "--backend",
            "sim",
            "--output",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = lab.proxops(&args);
        assert!(out.status.code() == Some(0), "{out:?}");
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            plan["clusters"][0]["actions"].as_array().unwrap().len(),
            stderr,
        )
    };
    let (n, stderr) = actions(&[]);
    assert_eq!(n, 4, "three downloads and the sandbox, as committed");
    assert!(
        stderr.contains(&format!(
            "reading commit {} (HEAD); uncommitted changes are not read",
            &head[..12]
        )),
        "{stderr}"
    );
    let (n, stderr) = actions(&["--worktree"]);
    assert_eq!(n, 3, "the work tree has no guest left");
    assert!(stderr.contains("reading the work tree, uncommitted changes included"));
    let (n, stderr) = actions(&["--revision", &first]);
    assert_eq!(n, 5, "the first commit has both guests");
    assert!(stderr.contains(&format!("reading commit {} ({first})", &first[..12])));
    let out = lab.proxops(&[
        "apply",
        "--planes",
        "--worktree",
        "--yes",
        "--backend",
        "sim",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// planes-spec.md 9.6 (verify): ProxOps's verify is `diff --detailed-exitcode`: it reads the
/// live state against the desired head, reports drift per resource, and never writes a ref.
#[test]
fn verify_with_diff_reports_drift_per_resource_and_writes_no_ref() {
    let lab = Lab::new();
    lab.apply();
    let refs_before = lab.git(&["show-ref"]);
    let state = lab.state.path().join("lab.json");
    let diff = || {
        lab.proxops(&[
            "diff",
            "--detailed-exitcode",
            "--cluster",
            "lab",
            "--backend",
            "sim",
            "--sim-state",
            state.to_str().unwrap(),
        ])
    };
    let clean = diff();
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    // Drift: someone changes the VM in PVE.
    let saved_file = lab.state.path().join("lab.lab.json");
    let mut saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&saved_file).unwrap()).unwrap();
    saved["guests"]["100"]["config"]["memory"] = "8192".into();
    std::fs::write(&saved_file, saved.to_string()).unwrap();
    let drift = diff();
    assert_eq!(drift.status.code(), Some(2), "{drift:?}");
    let stdout = String::from_utf8_lossy(&drift.stdout);
    assert!(
        stdout.contains("update") && stdout.contains("VM/sandbox-01"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("LXC/ci-runner-01"),
        "only the drifted resource: {stdout}"
    );
    assert_eq!(lab.git(&["show-ref"]), refs_before, "diff wrote a ref");
    // Receipts stay current: verifying does not touch them.
    receipts_are_current(&lab);
}

#[test]
fn apply_with_a_remote_publishes_the_planes_there_and_gives_the_remote_lease_back() {
    let lab = Lab::new();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    lab.git(&["remote", "add", "origin", remote.path().to_str().unwrap()]);
    lab.git(&["push", "-q", "origin", "main"]);
    let out = lab.apply_on("lab", &["--planes", "--remote", "origin"]);
    assert!(out.status.success(), "{out:?}");
    let on_remote = git(remote.path(), &["show-ref"]);
    for branch in [DESIRED, OBSERVED] {
        let local = lab.git(&["rev-parse", branch]);
        assert!(
            on_remote.contains(&format!("{} refs/heads/{branch}", local.trim())),
            "{branch} not on the remote: {on_remote}"
        );
    }
    assert!(!on_remote.contains("refs/proxops/leases/"), "{on_remote}");
    let fsck = git(remote.path(), &["fsck", "--no-progress"]);
    assert!(!fsck.contains("error"), "{fsck}");
}

#[test]
fn receipts_carry_what_pve_says_file_sizes_and_mac_addresses() {
    let lab = Lab::new();
    lab.apply();
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(lab.state.path().join("lab.lab.json")).unwrap(),
    )
    .unwrap();
    let doc = |path: &str| -> Value {
        let text = lab.git(&["show", &format!("{OBSERVED}:{path}")]);
        plane_yaml(&text)
    };
    // The VM's MAC address as PVE assigned it.
    let net0 = state["guests"]["100"]["config"]["net0"].as_str().unwrap();
    let mac = net0.split(',').next().unwrap().split('=').nth(1).unwrap();
    let macs = doc("artifacts/VM/sandbox-01/mac-addresses.yaml");
    assert_eq!(macs["kind"], "MacAddresses");
    assert_eq!(macs["spec"]["net0"], mac.to_uppercase());
    // The ISO's size as PVE lists it.
    let iso = state["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["content"] == "iso")
        .unwrap();
    let file = doc("artifacts/ISO/debian-13-netinst/file.yaml");
    assert_eq!(file["kind"], "DownloadedFile");
    assert_eq!(file["spec"]["nodes"]["pve1"]["size"], iso["size"]);
    assert_eq!(file["spec"]["nodes"]["pve1"]["volid"], iso["volid"]);
}

/// A plane document (canonical YAML) read by the store's own parser.
fn plane_yaml(text: &str) -> Value {
    proxops_store::canonical::parse_yaml(text).unwrap()
}
