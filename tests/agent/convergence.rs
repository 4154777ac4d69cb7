//! The agent converges commits, recovers from a kill mid-apply, and isolates clusters.

use super::support::*;
use crate::support::{ChildGuard, free_port, git, http_get, proxops_bin};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn commits_that_add_change_and_remove_manifests_are_converged_within_two_passes() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let sim_state = data
        .path()
        .join("sim-state.json")
        .to_string_lossy()
        .into_owned();
    let state = data.path().join("sim-state.lab.json");
    let agent = Agent::start(
        &repo,
        &data.path().join("agent"),
        "agent-a",
        "2s",
        &["--backend", "sim", "--sim-state", &sim_state],
    );
    let first = wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(first, names(LAB));
    assert_eq!(guests(&state), BTreeSet::from([100, 200]));
    // Two more passes, inside the ten seconds the simulator's `/cluster/resources` lags (as
    // pvestatd's): nothing is created, started or downloaded a second time.
    let seen = agent.status().unwrap()["passes"].as_u64().unwrap();
    wait_for(Duration::from_secs(60), "two more passes", || {
        (agent.status()?["passes"].as_u64()? >= seen + 2).then_some(())
    });
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let mut tasks: Vec<(String, String)> = sim["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["type"].as_str().unwrap().to_owned(),
                t["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    tasks.sort();
    let all = tasks.len();
    tasks.dedup();
    assert_eq!(tasks.len(), all, "a task ran twice: {:?}", sim["tasks"]);
    let kinds: BTreeSet<&str> = tasks.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["download", "qmcreate", "vzcreate"]),
        "{tasks:?}"
    );

    // Add sandbox-02, give sandbox-01 more memory, drop ci-runner-01.
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-02.yaml",
        &sandbox
            .replace("name: sandbox-01", "name: sandbox-02")
            .replace("vmid: 100", "vmid: 101")
            .replace("10.10.50.100/24", "10.10.50.101/24"),
    );
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    let composition = repo
        .read("clusters/lab/resources.yaml")
        .replace("  - ../../lxc/lab/ci-runner-01.yaml\n", "")
        .replace(
            "  - ../../vm/lab/sandbox-01.yaml\n",
            "  - ../../vm/lab/sandbox-01.yaml\n  - ../../vm/lab/sandbox-02.yaml\n",
        );
    repo.write("clusters/lab/resources.yaml", &composition);
    let head = repo.commit("lab: add sandbox-02, grow sandbox-01, drop ci-runner-01");
    let passes_before = agent.status().unwrap()["passes"].as_u64().unwrap();

    let (after, passes) = wait_for(Duration::from_secs(120), "the commit to converge", || {
        let status = agent.status()?;
        let lab = status["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lab")?
            .clone();
        let set = clean_at(&lab, Some(&head))?;
        (!set.contains("LXC/ci-runner-01")).then(|| (set, status["passes"].as_u64().unwrap()))
    });
    let mut expected = names(LAB);
    expected.remove("LXC/ci-runner-01");
    expected.insert("VM/sandbox-02".to_owned());
    assert_eq!(after, expected);
    assert!(
        passes <= passes_before + 2,
        "converged only after {} passes",
        passes - passes_before
    );

    // PVE (the simulator) holds exactly what the repository says.
    assert_eq!(guests(&state), BTreeSet::from([100, 101]));
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(sim["guests"]["100"]["config"]["memory"], "3072");

    // The metrics count what was done.
    let metrics = agent.metrics();
    for line in [
        "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"create\",result=\"succeeded\"} 2",
        "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"update\",result=\"succeeded\"} 1",
        "proxops_actions_total{cluster=\"lab\",kind=\"LXC\",action=\"delete\",result=\"succeeded\"} 1",
    ] {
        assert!(metrics.contains(line), "no `{line}` in\n{metrics}");
    }
    assert!(metrics.contains("proxops_last_success_timestamp_seconds{cluster=\"lab\"}"));
    assert!(metrics.contains(
        "proxops_pve_requests_total{cluster=\"lab\",endpoint=\"GET /cluster/resources\"}"
    ));
    assert_eq!(http_get(agent.port, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(agent.port, "/readyz").unwrap().0, 200);
}

#[test]
fn an_agent_killed_in_the_middle_of_an_apply_converges_after_a_restart() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "1500ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    let agent = Agent::start(&repo, data.path(), "agent-a", "1s", &["--backend", "pve"]);
    // Downloads are done and no guest is complete yet: the apply is half-way.
    wait_for(Duration::from_secs(60), "the apply to start", || {
        let text = std::fs::read_to_string(&sim.state).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        let volumes = json["volumes"].as_object().map_or(0, |v| v.len())
            + json["volumes"].as_array().map_or(0, Vec::len);
        (volumes > 0 || !guests(&sim.state).is_empty()).then_some(())
    });
    agent.kill();
    let refs = git(repo.path(), &["show-ref"]);
    assert!(
        refs.contains("refs/proxops/leases/lab"),
        "the killed agent left its lease: {refs}"
    );
    assert!(
        !refs.contains("refs/heads/proxops/observed/lab"),
        "killed before its first cycle recorded anything: {refs}"
    );

    let agent = Agent::start(&repo, data.path(), "agent-a", "1s", &["--backend", "pve"]);
    let set = wait_for(
        Duration::from_secs(120),
        "convergence after the restart",
        || clean_at(&agent.lab()?, None),
    );
    assert_eq!(set, names(LAB));
    // No duplicate guest: exactly the two the repository declares.
    assert_eq!(guests(&sim.state), BTreeSet::from([100, 200]));
    // No lost receipt: one per resource on the observed plane.
    let receipts = git(
        repo.path(),
        &[
            "ls-tree",
            "-r",
            "--name-only",
            "proxops/observed/lab",
            "receipts/",
        ],
    );
    assert_eq!(receipts.lines().count(), LAB.len(), "{receipts}");
    let fsck = git(repo.path(), &["fsck", "--no-progress"]);
    assert!(!fsck.contains("error"), "{fsck}");
}

#[test]
fn an_invalid_cluster_never_stops_the_others() {
    let repo = Repo::new();
    // Cluster home lists a manifest that does not exist.
    let composition = repo.read("clusters/home/resources.yaml");
    repo.write(
        "clusters/home/resources.yaml",
        &format!("{composition}  - ../../vm/home/missing.yaml\n"),
    );
    repo.commit("home: a broken composition");
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim.json");
    let port = free_port();
    let child = Command::new(proxops_bin())
        .args(["run", "--interval", "1h", "--backend", "sim", "--sim-state"])
        .arg(&state)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--repo"])
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent {
        child: ChildGuard(child),
        port,
        log: None,
    };
    let status = wait_for(
        Duration::from_secs(120),
        "a pass over both clusters",
        || {
            let status = agent.status()?;
            let clusters = status["clusters"].as_array()?;
            // Both clusters listed (a status taken early may know only one), each with a cycle.
            (clusters.len() == 2 && clusters.iter().all(|c| !c["lastCycle"].is_null()))
                .then(|| status.clone())
        },
    );
    let cluster = |name: &str| {
        status["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let home = cluster("home");
    assert_eq!(home["lastCycle"]["result"], "invalid", "{home}");
    assert!(
        home["lastCycle"]["errors"]
            .to_string()
            .contains("missing.yaml"),
        "{home}"
    );
    assert!(clean_at(&cluster("lab"), None).is_some(), "{status}");
    // The simulators of both clusters: only lab's has guests.
    assert_eq!(
        guests(&data.path().join("sim.lab.json")),
        BTreeSet::from([100, 200])
    );
    assert!(guests(&data.path().join("sim.home.json")).is_empty());
}
