//! Leases: two agents (one repository, or clones of one remote), apply against a held lease,
//! and a graceful stop that gives the lease back.

use super::support::*;
use crate::support::{git, proxops_bin};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

/// Waits until one of two agents converged lab and both ran three more passes, then checks
/// that lab was reconciled once between them: had both worked on it at once, each would have
/// created and downloaded everything. Returns a sum over both agents' metrics lines.
fn reconciled_once_between<'a>(
    a: &'a Agent,
    b: &'a Agent,
    sim: &SimServer,
) -> impl Fn(&str) -> u64 + 'a {
    wait_for(Duration::from_secs(120), "convergence", || {
        let done = |agent: &Agent| agent.lab().and_then(|l| clean_at(&l, None));
        (done(a).is_some() || done(b).is_some()).then_some(())
    });
    let passes = |agent: &Agent| agent.status().and_then(|s| s["passes"].as_u64());
    let (pa, pb) = (passes(a).unwrap_or(0), passes(b).unwrap_or(0));
    wait_for(Duration::from_secs(60), "more passes", || {
        (passes(a)? >= pa + 3 && passes(b)? >= pb + 3).then_some(())
    });
    let metrics = [a.metrics(), b.metrics()];
    assert!(
        !metrics.iter().any(|m| m.contains("result=\"failed\"")),
        "agent a:\n{}\nagent b:\n{}",
        a.log_problems(),
        b.log_problems()
    );
    let sum = move |pattern: &str| -> u64 {
        metrics
            .iter()
            .flat_map(|m| m.lines())
            .filter(|l| l.starts_with(pattern))
            .filter_map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()))
            .sum()
    };
    for (kind, action) in [("VM", "create"), ("LXC", "create"), ("ISO", "download")] {
        let line = format!(
            "proxops_actions_total{{cluster=\"lab\",kind=\"{kind}\",action=\"{action}\",result=\"succeeded\"}}"
        );
        assert_eq!(sum(&line), 1, "{line}");
    }
    assert_eq!(guests(&sim.state), BTreeSet::from([100, 200]));
    sum
}

#[test]
fn two_agents_on_one_repository_never_reconcile_the_same_cluster_at_once() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "700ms");
    repo.point_lab_at(&sim);
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Agent::start(
        &repo,
        data_a.path(),
        "agent-a",
        "500ms",
        &["--backend", "pve"],
    );
    let b = Agent::start(
        &repo,
        data_b.path(),
        "agent-b",
        "500ms",
        &["--backend", "pve"],
    );
    let sum = reconciled_once_between(&a, &b, &sim);
    // The loser of the first race waited for the lease instead of reconciling.
    assert!(sum("proxops_cycles_total{cluster=\"lab\",result=\"leased\"}") >= 1);
}

#[test]
fn apply_with_planes_refuses_a_cluster_whose_lease_another_process_holds() {
    let repo = Repo::new();
    let store = proxops_store::Store::open(repo.path()).unwrap();
    let elsewhere = proxops_store::Holder {
        name: "agent-x".to_owned(),
        host: "another-host".to_owned(),
        pid: 1,
    };
    // Held by a live agent on another machine (never released here).
    std::mem::forget(
        store
            .acquire_lease("lab", &elsewhere, Duration::from_secs(3600))
            .unwrap(),
    );
    let state = tempfile::tempdir().unwrap();
    let apply = || {
        Command::new(proxops_bin())
            .args([
                "apply",
                "--planes",
                "--yes",
                "--cluster",
                "lab",
                "--backend",
                "sim",
            ])
            .arg("--sim-state")
            .arg(state.path().join("sim.json"))
            .arg("--repo")
            .arg(repo.path())
            .output()
            .unwrap()
    };
    let out = apply();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is being reconciled by agent-x (pid 1 on another-host)"),
        "{stderr}"
    );
    assert!(guests(&state.path().join("sim.lab.json")).is_empty());

    let lease = |args: &[&str]| {
        let out = Command::new(proxops_bin())
            .args(["lease", "--cluster", "lab"])
            .args(args)
            .arg("--repo")
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(lease(&[]).starts_with("cluster lab: held by agent-x"));
    assert!(lease(&["--break"]).starts_with("cluster lab: broke the lease of agent-x"));
    let out = apply();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        guests(&state.path().join("sim.lab.json")),
        BTreeSet::from([100, 200])
    );
    // Given back when the run ended.
    assert_eq!(lease(&[]).trim(), "cluster lab: no lease");
}

#[test]
fn two_agents_with_their_own_clones_of_a_remote_share_its_leases_and_planes() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "700ms");
    repo.point_lab_at(&sim);
    // The shared remote: a bare repository (no network).
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    let url = remote.path().to_string_lossy().into_owned();
    git(repo.path(), &["push", "-q", &url, "main"]);
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let from_remote = ["--backend", "pve", "--url", url.as_str()];
    let a = Agent::start_at(data_a.path(), "agent-a", "500ms", &from_remote);
    let b = Agent::start_at(data_b.path(), "agent-b", "500ms", &from_remote);
    let _ = reconciled_once_between(&a, &b, &sim);
    // The planes were published to the remote, where both agents read them.
    let receipts = git(
        remote.path(),
        &[
            "ls-tree",
            "-r",
            "--name-only",
            "proxops/observed/lab",
            "receipts/",
        ],
    );
    assert_eq!(receipts.lines().count(), LAB.len(), "{receipts}");
}

#[test]
fn sigterm_starts_no_new_action_waits_for_those_in_flight_and_gives_the_lease_back() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "1500ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(&repo, data.path(), "agent-a", "1h", &["--backend", "pve"]);
    // The three downloads run (no guest yet): stop now.
    wait_for(Duration::from_secs(60), "the downloads to start", || {
        let text = std::fs::read_to_string(&sim.state).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        let running = json["tasks"]
            .as_array()?
            .iter()
            .filter(|t| t["status"] == "running")
            .count();
        (running > 0).then_some(())
    });
    let pid = agent.child.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = agent.child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the agent did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // The downloads in flight finished and were recorded; the guests after them never started.
    assert!(
        guests(&sim.state).is_empty(),
        "a new action started after SIGTERM"
    );
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
    assert_eq!(receipts.lines().count(), 3, "{receipts}");
    let refs = git(repo.path(), &["show-ref"]);
    assert!(!refs.contains("refs/proxops/leases/lab"), "{refs}");
}
