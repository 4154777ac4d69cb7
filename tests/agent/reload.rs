//! The agent keeps the repository it loaded while the commit stays the same, and loads a new
//! commit as soon as a pass sees it: a webhook's pass reconciles what was just pushed.

use super::support::*;
use crate::support::{git, http_body};
use proxops_agent::hooks::generic_signature;
use std::time::Duration;

const SECRET: &str = "reload-hook-secret";

fn metric(agent: &Agent, name: &str) -> Option<u64> {
    agent
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A push to `main` that left it at `after` is announced: a signed generic notice runs a pass
/// (a notice with the same body again would be a replay).
fn poke(agent: &Agent, after: &str) {
    let body = format!(r#"{{"ref":"refs/heads/main","after":"{after}"}}"#);
    let body = body.as_bytes();
    let signature = generic_signature(SECRET.as_bytes(), body);
    let (code, text) = http_body(
        agent.port,
        "POST",
        "/v1/hooks/generic",
        &[("X-ProxOps-Signature", &signature)],
        body,
    )
    .unwrap();
    assert_eq!(code, 202, "{text}");
}

/// Waits until lab ran `n` cycles.
fn cycles(agent: &Agent, n: u64) -> serde_json::Value {
    wait_for(Duration::from_secs(120), &format!("cycle {n}"), || {
        agent.lab().filter(|l| l["cycles"].as_u64() >= Some(n))
    })
}

#[test]
fn an_unchanged_commit_is_not_reloaded_and_a_pushed_one_is_reconciled_by_the_webhooks_pass() {
    let repo = Repo::new();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    let url = remote.path().to_string_lossy().into_owned();
    git(repo.path(), &["push", "-q", &url, "main"]);
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("agent.yaml");
    std::fs::write(
        &config,
        "agent:\n  webhooks:\n    generic:\n      secret-env: TEST_RELOAD_SECRET\n",
    )
    .unwrap();
    let sim_state = data.path().join("sim.json").to_string_lossy().into_owned();
    let state = data.path().join("sim.lab.json");
    let agent = Agent::start_env(
        &data.path().join("agent"),
        "agent-a",
        "1h",
        &[
            "--url",
            &url,
            "--branch",
            "main",
            "--config",
            &config.to_string_lossy(),
            "--backend",
            "sim",
            "--sim-state",
            &sim_state,
        ],
        &[("TEST_RELOAD_SECRET", SECRET)],
    );
    let first = cycles(&agent, 1);
    let revision = first["lastCycle"]["sourceRevision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(metric(&agent, "proxops_source_loads_total"), Some(1));
    assert_eq!(memory_of(&state, 100), "2048");

    // Nothing new on the remote: the pass fetches, finds the same commit and reuses its load.
    poke(&agent, &revision);
    let second = cycles(&agent, 2);
    assert_eq!(second["lastCycle"]["sourceRevision"], revision.as_str());
    assert_eq!(metric(&agent, "proxops_passes_total"), Some(2));
    assert_eq!(
        metric(&agent, "proxops_source_loads_total"),
        Some(1),
        "the same commit was loaded again"
    );

    // A push: the webhook's pass loads the new commit and applies it.
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    let head = repo.commit("lab: grow sandbox-01");
    git(repo.path(), &["push", "-q", &url, "main"]);
    poke(&agent, &head);
    let third = cycles(&agent, 3);
    assert_eq!(
        third["lastCycle"]["sourceRevision"],
        head.as_str(),
        "{third}"
    );
    assert_eq!(third["lastCycle"]["result"], "applied", "{third}");
    assert_eq!(memory_of(&state, 100), "3072");
    assert_eq!(metric(&agent, "proxops_source_loads_total"), Some(2));
    assert_eq!(agent.status().unwrap()["source"]["revision"], head.as_str());
}
