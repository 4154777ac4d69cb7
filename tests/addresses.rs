//! Guest-agent facts end to end (issue 16): the homelab's `lab` cluster with the sandbox VM
//! (guest agent enabled, static `ipconfig0`) started. The cycle that creates and starts the
//! guests (`apply --planes`, one cycle) writes their receipts without addresses (a guest that
//! just booted cannot tell them); `converge --planes`, once the simulated agent answers,
//! publishes the same receipts again with an `ip-addresses` artifact, and after that nothing
//! more.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::proxops_bin;
use proxops_test_support::TestRepo;
use serde_json::Value;
use std::process::Output;

const OBSERVED: &str = "proxops/observed/lab";
const VM: &str = "artifacts/VM/sandbox-01/ip-addresses.yaml";
const CT: &str = "artifacts/LXC/ci-runner-01/ip-addresses.yaml";

fn run(repo: &TestRepo, state: &std::path::Path, command: &[&str]) -> Output {
    std::process::Command::new(proxops_bin())
        .args(command)
        .args(["--planes", "--cluster", "lab", "--backend", "sim"])
        .arg("--sim-state")
        .arg(state)
        .arg("--repo")
        .arg(repo.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "the run failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn observed_files(repo: &TestRepo) -> Vec<String> {
    repo.git(&["ls-tree", "-r", "--name-only", OBSERVED])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn doc(repo: &TestRepo, path: &str) -> Value {
    proxops_store::canonical::parse_yaml(&repo.git(&["show", &format!("{OBSERVED}:{path}")]))
        .unwrap()
}

/// Declares the sandbox VM (guest agent enabled) `state: started`, committed.
fn start_sandbox(repo: &TestRepo) {
    let path = repo.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let started = text.replace(
        "state: stopped           # powered on by hand when needed",
        "state: started",
    );
    assert_ne!(started, text, "the example changed: {text}");
    std::fs::write(&path, started).unwrap();
    repo.git(&["commit", "-q", "-am", "start the sandbox"]);
}

#[test]
fn receipts_of_running_guests_gain_ip_addresses_in_a_later_cycle_and_no_cycle_fails() {
    let repo = TestRepo::homelab();
    start_sandbox(&repo);
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().join("lab.json");

    succeeded(&run(&repo, &state, &["apply", "--yes"]));
    let first = observed_files(&repo);
    assert!(
        first.contains(&"receipts/VM/sandbox-01.yaml".to_owned()),
        "{first:?}"
    );
    assert!(
        !first.iter().any(|f| f.ends_with("/ip-addresses.yaml")),
        "guests started by this cycle cannot tell their addresses yet: {first:?}"
    );
    let receipt_before = doc(&repo, "receipts/VM/sandbox-01.yaml");

    // The simulator's agent answers 3 task times (150 ms) after the start: well before the
    // next run reads it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = run(&repo, &state, &["converge"]);
    succeeded(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(": 2 receipt(s), 0 teardown(s)"), "{stdout}");
    let files = observed_files(&repo);
    assert!(files.contains(&VM.to_owned()), "{files:?}");
    assert!(files.contains(&CT.to_owned()), "{files:?}");
    let vm = doc(&repo, VM);
    assert_eq!(vm["kind"], "IpAddresses");
    let macs = doc(&repo, "artifacts/VM/sandbox-01/mac-addresses.yaml");
    assert_eq!(vm["spec"]["net0"]["mac"], macs["spec"]["net0"]);
    assert_eq!(
        vm["spec"].pointer("/net0/ipv4/0"),
        Some(&Value::from("10.10.50.100")),
        "{vm}"
    );
    assert_eq!(vm["spec"]["lo"]["ipv4"][0], "127.0.0.1");
    let ct = doc(&repo, CT);
    assert_eq!(
        ct["spec"].pointer("/net0/ipv4/0"),
        Some(&Value::from("10.10.50.20")),
        "{ct}"
    );
    assert_eq!(ct["spec"]["net0"]["name"], "eth0");
    // The same receipt, published again with the artifact: still current, its result kept.
    let receipt = doc(&repo, "receipts/VM/sandbox-01.yaml");
    assert_eq!(
        receipt["spec"]["desired"],
        receipt_before["spec"]["desired"]
    );
    assert_eq!(
        receipt["spec"]["result"]["outcome"],
        receipt_before["spec"]["result"]["outcome"]
    );
    assert_eq!(
        receipt["spec"]["result"]["upids"],
        receipt_before["spec"]["result"]["upids"]
    );
    assert!(
        receipt["spec"]["result"]["artifacts"]
            .get("ip-addresses")
            .is_some(),
        "{receipt}"
    );

    // Complete and unchanged: nothing more is published.
    let head = repo.git(&["rev-parse", OBSERVED]);
    succeeded(&run(&repo, &state, &["converge"]));
    assert_eq!(repo.git(&["rev-parse", OBSERVED]), head);
}

/// Per cycle of `lab` (the sandbox VM started when `started`): receipts published, agent
/// reads, container interface reads. Planned, executed and recorded as the reconciler does.
async fn counted_cycles(started: bool) -> Vec<(usize, u64, u64)> {
    use proxops_engine::backend::{Backend, connect};
    use proxops_engine::cycle::{plan_options, reconcile};
    use proxops_engine::execute::ExecOptions;
    use proxops_engine::planes::Planes;
    use proxops_graph::check_repository;
    use proxops_model::{LoadOptions, Registry, load_repository};
    use proxops_store::Store;

    let repo = TestRepo::homelab();
    if started {
        start_sandbox(&repo);
    }
    let store = Store::open(repo.path()).unwrap();
    let source = store.source(None).unwrap();
    let registry = Registry::builtin();
    let mut loaded = load_repository(&source, &registry, &LoadOptions::default()).unwrap();
    let graph = check_repository(&registry, &mut loaded)
        .into_iter()
        .find(|c| c.name == "lab")
        .and_then(|c| c.graph)
        .unwrap();
    let cluster = loaded.cluster("lab").unwrap();
    let backend = Backend::Sim {
        state_file: None,
        task_time: std::time::Duration::from_millis(10),
    };
    let conn = connect(&registry, cluster, &backend).await.unwrap();
    let planes = Planes::for_cluster(store.clone(), "lab").unwrap();
    let (plan, exec) = (plan_options(cluster, None), ExecOptions::default());
    let counters = conn.client.counters();
    let agent = || {
        counters.count(
            "GET",
            "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
        )
    };
    let lxc = || counters.count("GET", "/nodes/{node}/lxc/{vmid}/interfaces");
    let mut out = Vec::new();
    for _ in 0..3 {
        let (agent_before, lxc_before) = (agent(), lxc());
        let started_at = std::time::SystemTime::now();
        let desired = std::sync::Arc::new(
            planes
                .publish_desired(&loaded, source.commit())
                .unwrap()
                .state,
        );
        let cycle = reconcile(&conn.client, "lab", &graph, &plan, &exec, false)
            .await
            .unwrap();
        if let Some(report) = &cycle.report {
            assert!(report.all_succeeded(), "{report:#?}");
        }
        let published = planes
            .record_cycle(
                &conn.client,
                &desired,
                &cycle.plan,
                cycle.report.as_ref(),
                started_at,
            )
            .await
            .unwrap();
        out.push((
            published.receipts,
            agent() - agent_before,
            lxc() - lxc_before,
        ));
        // Past the simulated agent's start (3 task times).
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    conn.sim.unwrap().shutdown().await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_is_asked_for_its_addresses_only_while_running_and_until_it_told_them() {
    // The homelab as it is: the sandbox VM has its agent enabled but stays stopped, so it is
    // never asked; the container is asked once, in the first cycle after it started.
    assert_eq!(
        counted_cycles(false).await,
        [(5, 0, 0), (1, 0, 1), (0, 0, 0)]
    );
    // Started, the VM's agent is asked once too.
    assert_eq!(
        counted_cycles(true).await,
        [(5, 0, 0), (2, 1, 1), (0, 0, 0)]
    );
}
