//! The webhook receivers: a correctly signed push to the followed branch runs exactly one pass,
//! whichever forge signs it; a bad or missing signature, a replay, an oversized body, a ping
//! and a push to another branch run none. A gated cluster's merged candidate runs its cycle.

use super::support::*;
use crate::support::{git, http_body};
use proxops_agent::hooks::generic_signature;
use serde_json::Value;
use std::time::Duration;

/// GitHub's documented example secret ("Validating webhook deliveries").
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITEA_SECRET: &str = "gitea-hook-secret";
const GITLAB_TOKEN: &str = "gitlab-hook-token";
const GENERIC_SECRET: &str = "generic-hook-secret";

fn post(agent: &Agent, forge: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    http_body(
        agent.port,
        "POST",
        &format!("/v1/hooks/{forge}"),
        headers,
        body,
    )
    .unwrap()
}

fn passes(agent: &Agent) -> u64 {
    agent.status().unwrap()["passes"].as_u64().unwrap()
}

/// Waits for `n` passes, then checks no further one starts for a while.
fn exactly(agent: &Agent, n: u64) {
    wait_for(Duration::from_secs(120), &format!("pass {n}"), || {
        let status = agent.status()?;
        let lab = status["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lab")?
            .clone();
        (status["passes"].as_u64()? >= n && lab["cycles"].as_u64()? >= n).then_some(())
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(passes(agent), n, "more passes than deliveries asked for");
}

fn write_config(dir: &std::path::Path, body: &str) -> String {
    std::fs::write(dir.join("github.secret"), format!("{GITHUB_SECRET}\n")).unwrap();
    std::fs::write(dir.join("gitea.secret"), GITEA_SECRET).unwrap();
    let config = dir.join("agent.yaml");
    std::fs::write(&config, body).unwrap();
    config.to_string_lossy().into_owned()
}

const RECEIVERS: &str = "agent:
  webhooks:
    github:
      secret-file: github.secret
    gitlab:
      secret-env: TEST_GITLAB_TOKEN
    gitea:
      secret-file: gitea.secret
    generic:
      secret-env: TEST_GENERIC_SECRET
    max-body-bytes: 4096
";

#[test]
fn only_correctly_signed_pushes_to_the_followed_branch_run_a_pass_each() {
    let repo = Repo::new();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    let url = remote.path().to_string_lossy().into_owned();
    git(repo.path(), &["push", "-q", &url, "main"]);
    let data = tempfile::tempdir().unwrap();
    let config = write_config(data.path(), RECEIVERS);
    let sim_state = data.path().join("sim.json").to_string_lossy().into_owned();
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
            &config,
            "--backend",
            "sim",
            "--sim-state",
            &sim_state,
        ],
        &[
            ("TEST_GITLAB_TOKEN", GITLAB_TOKEN),
            ("TEST_GENERIC_SECRET", GENERIC_SECRET),
        ],
    );
    exactly(&agent, 1);

    let push =
        |branch: &str, after: &str| format!(r#"{{"ref":"refs/heads/{branch}","after":"{after}"}}"#);
    let main_push = push("main", "1111111111111111111111111111111111111111");
    let signed = generic_signature(GITHUB_SECRET.as_bytes(), main_push.as_bytes());
    let github = |delivery: &'static str, signature: &str, event: &'static str, body: &str| {
        let mut headers = vec![("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery)];
        if !signature.is_empty() {
            headers.push(("X-Hub-Signature-256", signature));
        }
        post(&agent, "github", &headers, body.as_bytes())
    };

    // GitHub's documented example verifies (a ping: acknowledged, nothing to do)...
    let (code, body) = github(
        "ping-1",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "ping",
        "Hello, World!",
    );
    assert_eq!((code, body.trim()), (200, "ignored: ping: the hook works"));
    // ... and a correctly signed push to main runs one pass.
    let (code, body) = github("d-1", &signed, "push", &main_push);
    assert_eq!(code, 202, "{body}");
    exactly(&agent, 2);

    // None of these runs a pass.
    let wrong = generic_signature(b"not the secret", main_push.as_bytes());
    assert_eq!(github("d-2", &wrong, "push", &main_push).0, 401);
    assert_eq!(github("d-3", "", "push", &main_push).0, 401);
    let tampered = main_push.replace("1111", "2222");
    assert_eq!(github("d-4", &signed, "push", &tampered).0, 401);
    // The same delivery again, and the same body under a new id.
    let (code, body) = github("d-1", &signed, "push", &main_push);
    assert_eq!((code, body.trim()), (200, "already handled: nothing done"));
    assert_eq!(github("d-5", &signed, "push", &main_push).0, 200);
    // Too large, signed or not.
    let big = format!(
        r#"{{"ref":"refs/heads/main","pad":"{}"}}"#,
        "x".repeat(5000)
    );
    let big_signed = generic_signature(GITHUB_SECRET.as_bytes(), big.as_bytes());
    assert_eq!(github("d-6", &big_signed, "push", &big).0, 413);
    // Another branch.
    let other = push("feature", "3333333333333333333333333333333333333333");
    let (code, body) = github(
        "d-7",
        &generic_signature(GITHUB_SECRET.as_bytes(), other.as_bytes()),
        "push",
        &other,
    );
    assert_eq!(code, 200);
    assert!(body.contains("not to the followed branch `main`"), "{body}");
    // GitLab with a wrong token; a browser page; an unconfigured receiver path.
    let gl = push("main", "4444444444444444444444444444444444444444");
    assert_eq!(
        post(
            &agent,
            "gitlab",
            &[("X-Gitlab-Event", "Push Hook"), ("X-Gitlab-Token", "guess")],
            gl.as_bytes()
        )
        .0,
        401
    );
    assert_eq!(
        post(
            &agent,
            "github",
            &[
                ("X-GitHub-Event", "push"),
                ("X-Hub-Signature-256", &signed),
                ("Origin", "http://evil.example")
            ],
            main_push.as_bytes()
        )
        .0,
        403
    );
    assert_eq!(post(&agent, "bitbucket", &[], b"{}").0, 404);
    exactly(&agent, 2);

    // Each other forge, signed its own way: one pass each.
    let (code, body) = post(
        &agent,
        "gitlab",
        &[
            ("X-Gitlab-Event", "Push Hook"),
            ("X-Gitlab-Token", GITLAB_TOKEN),
            ("X-Gitlab-Event-UUID", "gl-1"),
        ],
        gl.as_bytes(),
    );
    assert_eq!(code, 202, "{body}");
    exactly(&agent, 3);
    let gt = push("main", "5555555555555555555555555555555555555555");
    let gt_sig = generic_signature(GITEA_SECRET.as_bytes(), gt.as_bytes());
    let (code, body) = post(
        &agent,
        "gitea",
        &[
            ("X-Forgejo-Event", "push"),
            ("X-Gitea-Signature", gt_sig.trim_start_matches("sha256=")),
            ("X-Gitea-Delivery", "gt-1"),
        ],
        gt.as_bytes(),
    );
    assert_eq!(code, 202, "{body}");
    exactly(&agent, 4);
    let poke = br#"{"ref":"refs/heads/main"}"#;
    let (code, body) = post(
        &agent,
        "generic",
        &[(
            "X-ProxOps-Signature",
            &generic_signature(GENERIC_SECRET.as_bytes(), poke),
        )],
        poke,
    );
    assert_eq!(code, 202, "{body}");
    exactly(&agent, 5);

    let metrics = agent.metrics();
    for line in [
        "proxops_webhook_requests_total{receiver=\"github\",result=\"triggered\"} 1",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"unauthorized\"} 3",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"replayed\"} 2",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"too_large\"} 1",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"ignored\"} 2",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"forbidden\"} 1",
        "proxops_webhook_requests_total{receiver=\"gitlab\",result=\"unauthorized\"} 1",
        "proxops_webhook_requests_total{receiver=\"gitlab\",result=\"triggered\"} 1",
        "proxops_webhook_requests_total{receiver=\"gitea\",result=\"triggered\"} 1",
        "proxops_webhook_requests_total{receiver=\"generic\",result=\"triggered\"} 1",
        "proxops_webhook_requests_total{receiver=\"unknown\",result=\"not_configured\"} 1",
    ] {
        assert!(metrics.contains(line), "no `{line}` in\n{metrics}");
    }
}

#[test]
fn a_merged_candidate_of_a_gated_cluster_runs_its_cycle() {
    let repo = Repo::new();
    let config = repo.read("clusters/lab/config.yaml");
    repo.write(
        "clusters/lab/config.yaml",
        &config.replace(
            "      nodes:\n",
            "      planes:\n        change-gate: pullRequest\n      nodes:\n",
        ),
    );
    repo.commit("lab: changes go through review");
    let data = tempfile::tempdir().unwrap();
    let agent_config = write_config(data.path(), RECEIVERS);
    let sim_state = data
        .path()
        .join("sim-state.json")
        .to_string_lossy()
        .into_owned();
    let state = data.path().join("sim-state.lab.json");
    let repo_arg = repo.path().to_string_lossy().into_owned();
    let agent = Agent::start_env(
        &data.path().join("agent"),
        "agent-a",
        "1h",
        &[
            "--repo",
            &repo_arg,
            "--config",
            &agent_config,
            "--backend",
            "sim",
            "--sim-state",
            &sim_state,
        ],
        &[
            ("TEST_GITLAB_TOKEN", GITLAB_TOKEN),
            ("TEST_GENERIC_SECRET", GENERIC_SECRET),
        ],
    );
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    repo.commit("lab: grow sandbox-01");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab", "-o", "json"]);
    assert_eq!(code, 0, "{out}");
    let lab: Value = serde_json::from_str(&out).unwrap();
    let candidate = lab["lastCycle"]["candidate"].as_str().unwrap().to_owned();
    assert_eq!(memory_of(&state, 100), "2048");
    let cycles = agent.lab().unwrap()["cycles"].as_u64().unwrap();

    // The forge merges the candidate and says so.
    git(
        repo.path(),
        &["update-ref", "refs/heads/proxops/desired/lab", &candidate],
    );
    let head = candidate.trim_start_matches("refs/heads/");
    let body = format!(
        r#"{{"action":"closed","pull_request":{{"merged":true,"merge_commit_sha":"abc","head":{{"ref":"{head}"}},"base":{{"ref":"proxops/desired/lab"}}}}}}"#
    );
    let sig = generic_signature(GITHUB_SECRET.as_bytes(), body.as_bytes());
    let (code, text) = post(
        &agent,
        "github",
        &[
            ("X-GitHub-Event", "pull_request"),
            ("X-GitHub-Delivery", "pr-1"),
            ("X-Hub-Signature-256", &sig),
        ],
        body.as_bytes(),
    );
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("cluster lab"), "{text}");
    let lab = wait_for(
        Duration::from_secs(120),
        "the merged change's cycle",
        || agent.lab().filter(|l| l["cycles"].as_u64() > Some(cycles)),
    );
    assert_eq!(memory_of(&state, 100), "3072");
    // No second cycle follows.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(agent.lab().unwrap()["cycles"], lab["cycles"]);
    assert_eq!(lab["cycles"].as_u64().unwrap(), cycles + 1, "{lab}");
    assert_eq!(lab["lastCycle"]["result"], "applied", "{lab}");
}

#[test]
fn a_delivery_handled_before_a_restart_is_still_a_replay_after_it() {
    let repo = Repo::new();
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    let url = remote.path().to_string_lossy().into_owned();
    git(repo.path(), &["push", "-q", &url, "main"]);
    let data = tempfile::tempdir().unwrap();
    let config = write_config(data.path(), RECEIVERS);
    let sim_state = data.path().join("sim.json").to_string_lossy().into_owned();
    let start = || {
        Agent::start_env(
            &data.path().join("agent"),
            "agent-a",
            "1h",
            &[
                "--url",
                &url,
                "--config",
                &config,
                "--backend",
                "sim",
                "--sim-state",
                &sim_state,
            ],
            &[
                ("TEST_GITLAB_TOKEN", GITLAB_TOKEN),
                ("TEST_GENERIC_SECRET", GENERIC_SECRET),
            ],
        )
    };
    let body = r#"{"ref":"refs/heads/main","after":"5555555555555555555555555555555555555555"}"#;
    let signed = generic_signature(GITHUB_SECRET.as_bytes(), body.as_bytes());
    let deliver = |agent: &Agent, id: &str| {
        post(
            agent,
            "github",
            &[
                ("X-GitHub-Event", "push"),
                ("X-GitHub-Delivery", id),
                ("X-Hub-Signature-256", &signed),
            ],
            body.as_bytes(),
        )
    };
    let agent = start();
    exactly(&agent, 1);
    assert_eq!(deliver(&agent, "r-1").0, 202);
    exactly(&agent, 2);
    agent.kill();

    // A new process: the capture replayed, under its id or a fresh one, runs nothing.
    let agent = start();
    exactly(&agent, 1);
    let (code, said) = deliver(&agent, "r-1");
    assert_eq!((code, said.trim()), (200, "already handled: nothing done"));
    assert_eq!(deliver(&agent, "r-2").0, 200);
    exactly(&agent, 1);
}
