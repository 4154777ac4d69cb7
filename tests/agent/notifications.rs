//! The agent tells a team where it works: a failing download on the simulator, reported once to
//! a `webhook`, a Slack and an ntfy sink, recovered once after the fix is pushed, and commit
//! statuses on GitHub, GitLab and Gitea going pending -> failure on the failing commit and
//! pending -> success on the fixing one. Local servers stand in for all of them.

use super::standin::{Received, StandIn};
use super::support::*;
use crate::support::http_body;
use proxops_agent::hooks::generic_signature;
use serde_json::Value;
use std::time::Duration;

const HOOK_SECRET: &str = "It's a Secret to Everybody";
const SIGNING_KEY: &str = "event-signing-key";

/// Points the lab's three artifacts at the stand-in; the ISO at a file it does not have.
fn artifacts_from(repo: &Repo, standin: &StandIn, iso: &str) {
    for (file, name) in [
        ("iso/base/debian-13-netinst.yaml", iso.to_owned()),
        (
            "ctt/base/debian-13-standard.yaml",
            "ok/debian-13-standard_13.1-2_amd64.tar.zst".to_owned(),
        ),
        (
            "diskimage/base/debian-13-genericcloud.yaml",
            "ok/debian-13-genericcloud-amd64.qcow2".to_owned(),
        ),
    ] {
        let text = repo.read(file);
        let url_line = text
            .lines()
            .find(|l| l.trim_start().starts_with("url:"))
            .unwrap();
        let text = text.replace(
            url_line,
            &format!("  url: {}", standin.url(&format!("/files/{name}"))),
        );
        repo.write(file, &text);
    }
}

/// A push notice from "GitHub" for `after`, signed with the receiver's secret.
fn push_notice(agent: &Agent, after: &str, delivery: &str) -> (u16, String) {
    let body = format!(r#"{{"ref":"refs/heads/main","after":"{after}"}}"#);
    let signature = generic_signature(HOOK_SECRET.as_bytes(), body.as_bytes());
    http_body(
        agent.port,
        "POST",
        "/v1/hooks/github",
        &[
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", delivery),
            ("X-Hub-Signature-256", &signature),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
    .unwrap()
}

fn states(statuses: &[Received], field: &str) -> Vec<(String, String)> {
    statuses
        .iter()
        .map(|r| {
            let sha = r.path.rsplit('/').next().unwrap().to_owned();
            (sha, r.json()[field].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

#[test]
fn a_failure_and_its_recovery_reach_each_sink_once_and_the_commits_carry_their_statuses() {
    let standin = StandIn::start();
    // The first Slack delivery fails: it is retried.
    standin.fail_first("/slack", 1);
    let repo = Repo::new();
    artifacts_from(&repo, &standin, "missing/debian-13.2.0-amd64-netinst.iso");
    let sim = SimServer::start_with(&repo, "50ms", false);
    repo.point_lab_at(&sim);
    let failing = git_head(&repo);

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ntfy.url"),
        format!("{}\n", standin.url("/ntfy/proxops-lab")),
    )
    .unwrap();
    let config = dir.path().join("agent.yaml");
    let api = |p: &str| standin.url(p);
    std::fs::write(
        &config,
        format!(
            "agent:
  webhooks:
    github:
      secret-env: TEST_HOOK_SECRET
notifications:
  - name: hook
    type: webhook
    url: {{env: TEST_HOOK_URL}}
    signing-secret: {{env: TEST_SIGNING_KEY}}
    events: [cycle-failed, cycle-recovered]
  - name: chat
    type: slack
    url: {{env: TEST_SLACK_URL}}
    events: [cycle-failed, cycle-recovered]
  - name: phone
    type: ntfy
    url: {{file: ntfy.url}}
    token: {{env: TEST_NTFY_TOKEN}}
    events: [cycle-failed, cycle-recovered]
  - name: github
    type: commit-status
    forge: github
    api-url: {}
    repository: infra/homelab
    token: {{env: TEST_FORGE_TOKEN}}
  - name: gitlab
    type: commit-status
    forge: gitlab
    api-url: {}
    repository: infra/homelab
    token: {{env: TEST_FORGE_TOKEN}}
  - name: gitea
    type: commit-status
    forge: gitea
    api-url: {}
    repository: infra/homelab
    token: {{env: TEST_FORGE_TOKEN}}
    context: proxops/{{cluster}}/gitea
",
            api("/github"),
            api("/gitlab/api/v4"),
            api("/gitea/api/v1"),
        ),
    )
    .unwrap();
    let repo_arg = repo.path().to_string_lossy().into_owned();
    let config_arg = config.to_string_lossy().into_owned();
    let hook_url = standin.url("/hook");
    let slack_url = standin.url("/slack/services/T0/B0/x");
    let agent = Agent::start_env(
        &dir.path().join("agent"),
        "agent-a",
        "1h",
        &[
            "--repo",
            &repo_arg,
            "--backend",
            "pve",
            "--config",
            &config_arg,
        ],
        &[
            ("TEST_HOOK_SECRET", HOOK_SECRET),
            ("TEST_HOOK_URL", &hook_url),
            ("TEST_SIGNING_KEY", SIGNING_KEY),
            ("TEST_SLACK_URL", &slack_url),
            ("TEST_NTFY_TOKEN", "ntfy-token"),
            ("TEST_FORGE_TOKEN", "forge-token"),
        ],
    );
    let result_at = |cycles: u64| {
        let lab = agent.lab()?;
        (lab["cycles"].as_u64()? >= cycles).then(|| {
            (
                lab["lastCycle"]["result"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                lab["lastCycle"]["sourceRevision"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
    };
    let first = wait_for(Duration::from_secs(120), "the first cycle", || result_at(1));
    assert_eq!(
        first,
        ("failed".to_owned(), failing.clone()),
        "{:?}",
        agent.lab()
    );

    // A second pass on the same commit, asked for by a push notice: the same failure.
    let (code, body) = push_notice(&agent, &failing, "delivery-1");
    assert_eq!(code, 202, "{body}");
    let second = wait_for(Duration::from_secs(120), "the second cycle", || {
        result_at(2)
    });
    assert_eq!(second.0, "failed");

    // The fix, pushed and announced.
    artifacts_from(&repo, &standin, "ok/debian-13.2.0-amd64-netinst.iso");
    let fixed = repo.commit("lab: the ISO from where it is");
    let (code, body) = push_notice(&agent, &fixed, "delivery-2");
    assert_eq!(code, 202, "{body}");
    wait_for(Duration::from_secs(120), "the fix to converge", || {
        clean_at(&agent.lab()?, Some(&fixed))
    });

    // Every sink heard of the failure once and of the recovery once.
    let hooks = standin.wait_for("/hook", 2, Duration::from_secs(30));
    let slack = standin.wait_for("/slack", 3, Duration::from_secs(30));
    let ntfy = standin.wait_for("/ntfy", 2, Duration::from_secs(30));
    let github = standin.wait_for("/github", 4, Duration::from_secs(30));
    let gitlab = standin.wait_for("/gitlab", 4, Duration::from_secs(30));
    let gitea = standin.wait_for("/gitea", 4, Duration::from_secs(30));
    // Nothing more trickles in.
    std::thread::sleep(Duration::from_millis(1500));
    let events: Vec<Value> = hooks.iter().map(Received::json).collect();
    let reasons: Vec<&str> = events
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(reasons, ["CycleFailed", "CycleRecovered"], "{events:#?}");
    assert_eq!(standin.received("/hook").len(), 2);
    let failed = &events[0];
    assert_eq!(failed["apiVersion"], "proxops/v1alpha1");
    assert_eq!(failed["kind"], "Event");
    assert_eq!(failed["event"], "cycle-failed");
    assert_eq!(failed["severity"], "error");
    assert_eq!(failed["cluster"], "lab");
    assert_eq!(failed["resource"], "ISO/debian-13-netinst");
    assert_eq!(failed["revision"], failing.as_str());
    assert_eq!(failed["agent"], "agent-a");
    assert!(
        failed["message"].as_str().unwrap().contains("404"),
        "{failed}"
    );
    assert!(failed["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(events[1]["revision"], fixed.as_str());
    assert_eq!(events[1]["severity"], "info");
    for h in &hooks {
        assert_eq!(
            h.header("x-proxops-signature"),
            generic_signature(SIGNING_KEY.as_bytes(), &h.body)
        );
    }

    // Slack: the first delivery was refused and retried.
    assert_eq!(standin.received("/slack").len(), 3);
    let texts: Vec<String> = slack
        .iter()
        .map(|r| r.json()["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts[0], texts[1], "the retry sends the same message");
    assert!(
        texts[1].contains("proxops lab: CycleFailed") && texts[1].contains("ISO/debian-13-netinst"),
        "{texts:?}"
    );
    assert!(texts[2].contains("CycleRecovered"), "{texts:?}");

    // ntfy: the topic, the token, a priority by severity.
    assert_eq!(standin.received("/ntfy").len(), 2);
    assert!(ntfy.iter().all(|r| r.path == "/ntfy/proxops-lab"));
    assert!(
        ntfy.iter()
            .all(|r| r.header("authorization") == "Bearer ntfy-token")
    );
    let priorities: Vec<&str> = ntfy.iter().map(|r| r.header("priority")).collect();
    assert_eq!(priorities, ["5", "3"]);
    assert_eq!(ntfy[0].header("title"), "proxops lab: CycleFailed");

    // The commit statuses, in each forge's words.
    let expect = |pending: &str, failure: &str| {
        vec![
            (failing.clone(), pending.to_owned()),
            (failing.clone(), failure.to_owned()),
            (fixed.clone(), pending.to_owned()),
            (fixed.clone(), "success".to_owned()),
        ]
    };
    assert_eq!(states(&github, "state"), expect("pending", "failure"));
    assert_eq!(states(&gitea, "state"), expect("pending", "failure"));
    assert_eq!(states(&gitlab, "state"), expect("running", "failed"));
    assert_eq!(standin.received("/github").len(), 4);
    assert_eq!(standin.received("/gitlab").len(), 4);
    assert_eq!(standin.received("/gitea").len(), 4);
    assert!(
        github[0]
            .path
            .starts_with("/github/repos/infra/homelab/statuses/")
    );
    assert_eq!(github[0].header("authorization"), "Bearer forge-token");
    assert_eq!(github[1].json()["context"], "proxops/lab");
    assert!(
        github[1].json()["description"]
            .as_str()
            .unwrap()
            .contains("ISO/debian-13-netinst")
    );
    assert!(
        gitlab[0]
            .path
            .starts_with("/gitlab/api/v4/projects/infra%2Fhomelab/statuses/")
    );
    assert_eq!(gitlab[0].header("private-token"), "forge-token");
    assert_eq!(gitlab[0].json()["name"], "proxops/lab");
    assert_eq!(gitea[0].header("authorization"), "token forge-token");
    assert_eq!(gitea[0].json()["context"], "proxops/lab/gitea");

    let metrics = agent.metrics();
    for line in [
        "proxops_notifications_total{sink=\"hook\",result=\"sent\"} 2",
        "proxops_notifications_total{sink=\"chat\",result=\"sent\"} 2",
        "proxops_notifications_total{sink=\"chat\",result=\"failed\"} 0",
        "proxops_notifications_total{sink=\"github\",result=\"sent\"} 4",
        "proxops_notifications_total{sink=\"phone\",result=\"dropped\"} 0",
        "proxops_notification_sink_up{sink=\"gitea\"} 1",
        "proxops_webhook_requests_total{receiver=\"github\",result=\"triggered\"} 2",
    ] {
        assert!(metrics.contains(line), "no `{line}` in\n{metrics}");
    }
    // No secret reached the metrics, the status or the (debug) log.
    let status = agent.status().unwrap().to_string();
    let log = std::fs::read_to_string(Agent::log_of(&dir.path().join("agent"))).unwrap();
    assert!(log.contains("notification sent"), "{log}");
    for secret in [
        "forge-token",
        "ntfy-token",
        SIGNING_KEY,
        HOOK_SECRET,
        "/slack/services",
        "proxops-lab",
    ] {
        for (what, text) in [("metrics", &metrics), ("status", &status), ("log", &log)] {
            assert!(!text.contains(secret), "`{secret}` in the {what}");
        }
    }
}

fn git_head(repo: &Repo) -> String {
    crate::support::git(repo.path(), &["rev-parse", "HEAD"])
        .trim()
        .to_owned()
}

#[test]
fn drift_corrected_without_a_new_commit_is_told_once_to_the_clusters_own_sinks() {
    let standin = StandIn::start();
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("global.url"), standin.url("/global")).unwrap();
    let hook_url = dir.path().join("hook.url");
    std::fs::write(&hook_url, standin.url("/drift")).unwrap();
    // Lab's own sinks replace the agent's: a webhook, and ntfy with its token from lab's SOPS
    // file (the cluster's `secrets-file` by default).
    let lab = repo.read("clusters/lab/config.yaml");
    repo.write(
        "clusters/lab/config.yaml",
        &format!(
            "{lab}      notifications:\n        - name: drift\n          type: webhook\n          url: {{file: {}}}\n          events: [drift, cycle-failed]\n        - name: phone\n          type: ntfy\n          url: {{env: TEST_NTFY_URL}}\n          token: {{sops: proxops-token}}\n          events: [drift]\n",
            hook_url.display()
        ),
    );
    repo.commit("lab: its own sinks");
    let key = repo.path().join("example-age-key.txt");
    let secrets = proxops_secrets::decrypt_file(
        &repo.path().join("clusters/lab/secrets.sops.yaml"),
        &proxops_secrets::IdentitySource::key_file(&key),
    )
    .unwrap();
    let token = secrets
        .get(&["secrets", "proxops-token"])
        .and_then(proxops_secrets::Value::as_secret)
        .unwrap();
    let config = dir.path().join("agent.yaml");
    std::fs::write(
        &config,
        "notifications:\n  - name: global\n    type: webhook\n    url: {file: global.url}\n",
    )
    .unwrap();
    let ntfy_url = standin.url("/ntfy/lab");
    let key_arg = key.to_string_lossy().into_owned();
    let sim_state = dir.path().join("sim.json").to_string_lossy().into_owned();
    let state = dir.path().join("sim.lab.json");
    let repo_arg = repo.path().to_string_lossy().into_owned();
    let config_arg = config.to_string_lossy().into_owned();
    let agent = Agent::start_env(
        &dir.path().join("agent"),
        "agent-a",
        "1h",
        &[
            "--repo",
            &repo_arg,
            "--config",
            &config_arg,
            "--backend",
            "sim",
            "--sim-state",
            &sim_state,
        ],
        &[
            ("SOPS_AGE_KEY_FILE", &key_arg),
            ("TEST_NTFY_URL", &ntfy_url),
        ],
    );
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    // A converged cycle on the same commit, so that the agent knows the cluster clean.
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("converged"), "{out}");
    // Someone changes the VM by hand.
    let mut sim: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    sim["guests"]["100"]["config"]["memory"] = Value::from("4096");
    std::fs::write(&state, serde_json::to_vec(&sim).unwrap()).unwrap();
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("applied: 1 planned"), "{out}");
    assert_eq!(memory_of(&state, 100), "2048");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    let got = standin.wait_for("/drift", 1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(standin.received("/drift").len(), 1, "{got:?}");
    let event = got[0].json();
    assert_eq!(event["reason"], "DriftCorrected", "{event}");
    assert_eq!(event["event"], "drift");
    assert_eq!(event["resource"], "VM/sandbox-01");
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .contains("VM/sandbox-01 update"),
        "{event}"
    );
    let phone = standin.wait_for("/ntfy", 1, Duration::from_secs(30));
    assert_eq!(phone.len(), 1, "{phone:?}");
    assert_eq!(
        phone[0].header("authorization"),
        format!("Bearer {}", token.expose())
    );
    // The agent's own sinks do not hear of a cluster that has its own.
    assert!(standin.received("/global").is_empty());
    let metrics = agent.metrics();
    for line in [
        "proxops_notifications_total{sink=\"lab/drift\",result=\"sent\"} 1",
        "proxops_notifications_total{sink=\"lab/phone\",result=\"sent\"} 1",
        "proxops_notifications_total{sink=\"global\",result=\"sent\"} 0",
    ] {
        assert!(metrics.contains(line), "no `{line}` in\n{metrics}");
    }
}

#[test]
fn drift_is_told_per_resource_while_an_anomaly_stands_elsewhere() {
    let standin = StandIn::start();
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("drift.url"), standin.url("/drift")).unwrap();
    let config = dir.path().join("agent.yaml");
    std::fs::write(
        &config,
        "notifications:\n  - name: drift\n    type: webhook\n    url: {file: drift.url}\n    events: [drift]\n",
    )
    .unwrap();
    let sim_state = dir.path().join("sim.json").to_string_lossy().into_owned();
    let state = dir.path().join("sim.lab.json");
    let repo_arg = repo.path().to_string_lossy().into_owned();
    let config_arg = config.to_string_lossy().into_owned();
    let key = repo.path().join("example-age-key.txt");
    let key_arg = key.to_string_lossy().into_owned();
    let agent = Agent::start_env(
        &dir.path().join("agent"),
        "agent-a",
        "1h",
        &[
            "--repo",
            &repo_arg,
            "--config",
            &config_arg,
            "--backend",
            "sim",
            "--sim-state",
            &sim_state,
        ],
        &[("SOPS_AGE_KEY_FILE", &key_arg)],
    );
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    let edit = |change: &dyn Fn(&mut Value)| {
        let mut sim: Value =
            serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        change(&mut sim);
        std::fs::write(&state, serde_json::to_vec(&sim).unwrap()).unwrap();
    };
    // The container is made a template by hand: an anomaly that stands (nothing converts a
    // template back), so the cluster is never clean again.
    edit(&|sim| sim["guests"]["200"]["config"]["template"] = Value::from("1"));
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert!(out.contains("LXC/ci-runner-01"), "{code}: {out}");
    // A commit changes the container's manifest: a desired head the cluster was never clean
    // at, and the anomaly still stands.
    let runner = repo.read("lxc/lab/ci-runner-01.yaml");
    repo.write(
        "lxc/lab/ci-runner-01.yaml",
        &runner.replace("memory: 4GiB", "memory: 2GiB"),
    );
    repo.commit("ci-runner: less memory");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert!(out.contains("LXC/ci-runner-01"), "{code}: {out}");
    // Then someone changes the VM by hand: corrected, and told, though the anomaly stands.
    edit(&|sim| sim["guests"]["100"]["config"]["memory"] = Value::from("4096"));
    let (_, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert!(out.contains("stuck: 1 planned, 1 succeeded"), "{out}");
    assert_eq!(memory_of(&state, 100), "2048");
    let got = standin.wait_for("/drift", 1, Duration::from_secs(30));
    let event = got[0].json();
    assert_eq!(event["reason"], "DriftCorrected", "{event}");
    assert_eq!(event["resource"], "VM/sandbox-01", "{event}");
    // A cycle with nothing corrected tells nothing more.
    control(&agent, &["reconcile", "--cluster", "lab"]);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(standin.received("/drift").len(), 1);
}
