//! Control: suspend, resume, reconcile now, drift mode report, the change gate, and the
//! Debian package's agent configuration and unit.

use super::support::*;
use crate::support::{example, git, proxops_bin};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

#[test]
fn suspended_resources_and_clusters_are_left_alone_until_resumed_even_across_restarts() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    // `--sim-state` names one file per cluster: `sim-state.json` keeps lab in `sim-state.lab.json`.
    let sim_state = data
        .path()
        .join("sim-state.json")
        .to_string_lossy()
        .into_owned();
    let state = data.path().join("sim-state.lab.json");
    let backend = ["--backend", "sim", "--sim-state", &sim_state];
    // A long interval: after the first pass, only `proxops reconcile` runs cycles.
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(memory_of(&state, 100), "2048");

    let (code, out) = control(&agent, &["suspend", "--cluster", "lab", "VM/sandbox-01"]);
    assert_eq!(
        (code, out.trim()),
        (0, "VM/sandbox-01 of cluster lab: suspended")
    );
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    repo.commit("lab: grow sandbox-01");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("cluster lab: converged: 0 planned"),
        "{out}"
    );
    assert_eq!(memory_of(&state, 100), "2048", "a suspended VM was changed");
    let lab = agent.lab().unwrap();
    assert_eq!(
        lab["suspendedResources"],
        serde_json::json!(["VM/sandbox-01"])
    );
    assert!(
        lab["lastCycle"]["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["subject"] == "VM/sandbox-01"
                && s["reason"].as_str().unwrap().starts_with("suspended")),
        "{lab}"
    );

    let (code, _) = control(&agent, &["resume", "--cluster", "lab", "VM/sandbox-01"]);
    assert_eq!(code, 0);
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("cluster lab: applied: 1 planned, 1 succeeded"),
        "{out}"
    );
    assert_eq!(memory_of(&state, 100), "3072");

    // A whole cluster, and the suspension survives a restart.
    let (code, _) = control(&agent, &["suspend", "--cluster", "lab"]);
    assert_eq!(code, 0);
    agent.kill();
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    wait_for(Duration::from_secs(60), "the restarted agent", || {
        (agent.lab()?["lastCycle"]["result"] == "suspended").then_some(())
    });
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 1, "a suspended cluster's cycle is no success: {out}");
    assert!(out.starts_with("cluster lab: suspended"), "{out}");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "nowhere"]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn drift_mode_report_plans_but_changes_nothing() {
    let repo = Repo::new();
    let config = repo.read("clusters/lab/config.yaml");
    repo.write(
        "clusters/lab/config.yaml",
        &config.replace("      nodes:\n", "      drift: report\n      nodes:\n"),
    );
    repo.commit("lab: report drift only");
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim-state.lab.json");
    let out = Command::new(proxops_bin())
        .args([
            "run",
            "--once",
            "--cluster",
            "lab",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--backend", "sim", "--sim-state"])
        .arg(data.path().join("sim-state.json"))
        .arg("--repo")
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(guests(&state).is_empty(), "report mode created guests");
    // The desired plane was still published: drift is reported against it.
    git(
        repo.path(),
        &["rev-parse", "--verify", "proxops/desired/lab"],
    );
}

#[test]
fn a_gated_cluster_is_reconciled_from_its_live_desired_head_until_the_candidate_is_merged() {
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
    // `--sim-state` names one file per cluster: `sim-state.json` keeps lab in `sim-state.lab.json`.
    let sim_state = data
        .path()
        .join("sim-state.json")
        .to_string_lossy()
        .into_owned();
    let state = data.path().join("sim-state.lab.json");
    let backend = ["--backend", "sim", "--sim-state", &sim_state];
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    // The first publication has no live head to propose on: it becomes the live head.
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(memory_of(&state, 100), "2048");

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
    assert!(
        candidate.starts_with("refs/heads/proxops/candidates/lab/"),
        "{candidate}"
    );
    assert_eq!(lab["lastCycle"]["planned"], 0, "{lab}");
    assert_eq!(
        memory_of(&state, 100),
        "2048",
        "an unmerged candidate was applied"
    );

    // A forge merges the candidate: a fast-forward of the live desired branch.
    git(
        repo.path(),
        &["update-ref", "refs/heads/proxops/desired/lab", &candidate],
    );
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("cluster lab: applied: 1 planned"), "{out}");
    assert_eq!(memory_of(&state, 100), "3072");
}

/// The text of `packaging/debian/<name>`: the Debian package's unit and conffiles.
fn packaged(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging/debian")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` with its commented-out settings turned on: a line whose `#` is followed by YAML
/// (`#webhooks:`, `#  github:`) loses that `#`; notes (`# The ...`) stay comments.
fn uncommented(text: &str) -> String {
    text.lines()
        .map(|line| {
            let indent = line.len() - line.trim_start().len();
            let rest = &line[indent..];
            match rest.strip_prefix('#') {
                Some(after)
                    if after.starts_with("  ")
                        || after.starts_with(|c: char| !c.is_whitespace() && c != '#') =>
                {
                    format!("{}{after}\n", &line[..indent])
                }
                _ => format!("{line}\n"),
            }
        })
        .collect()
}

#[test]
fn the_packaged_agent_configuration_reads_cleanly_and_the_unit_uses_real_flags() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = packaged("agent.yaml");
    std::fs::write(dir.path().join("agent.yaml"), &yaml).unwrap();
    std::fs::write(dir.path().join("all.yaml"), uncommented(&yaml)).unwrap();
    let source = proxops_model::FsSource::new(dir.path()).unwrap();

    // As installed: a repository to follow, the unit's state directory, the control token the
    // package makes, and nothing that needs a secret the admin has not given yet.
    let (config, diagnostics) = proxops_model::read_config_file(&source, "agent.yaml");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = config.unwrap();
    assert!(config.git.and_then(|g| g.url).is_some());
    assert_eq!(config.data_dir.as_deref(), Some("/var/lib/proxops"));
    let agent = config.agent.clone().unwrap();
    assert_eq!(
        agent.token_file.as_deref(),
        Some("/etc/proxops/agent.token")
    );
    assert!(agent.webhooks.is_none());
    assert!(config.notifications.is_none());

    // Its commented-out settings, turned on: a GitHub receiver, and a webhook and a Slack sink
    // whose secrets agent.env shows how to give.
    let (config, diagnostics) = proxops_model::read_config_file(&source, "all.yaml");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = config.unwrap();
    let agent = config.agent.clone().unwrap();
    assert!(agent.webhooks.and_then(|w| w.github).is_some());
    let sinks = config.notifications.clone().unwrap();
    let kinds: Vec<&str> = sinks.iter().map(|s| s.kind.name()).collect();
    assert_eq!(kinds, ["webhook", "slack"]);
    let env = packaged("agent.env");
    for sink in &sinks {
        for source in [&sink.url, &sink.token, &sink.signing_secret]
            .into_iter()
            .flatten()
        {
            let var = source.env.as_deref().unwrap();
            assert!(env.contains(&format!("{var}=")), "agent.env has no {var}");
        }
    }
    // The unit's comments say how to use it with the commands' real flags.
    for command in ["reconcile", "suspend", "resume"] {
        let help = Command::new(proxops_bin())
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        for flag in ["--config", "--token-file", "PROXOPS_AGENT_TOKEN"] {
            assert!(
                help.contains(flag),
                "`proxops {command} --help` has no {flag}"
            );
        }
    }

    // The unit runs the installed binary on the installed files, as the user the package makes,
    // in the state directory agent.yaml names.
    let unit = packaged("proxops.service");
    let setting = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("proxops.service has no {key}"))
            .to_owned()
    };
    assert_eq!(
        setting("ExecStart"),
        "/usr/bin/proxops run --config /etc/proxops/agent.yaml --log-format json"
    );
    assert_eq!(setting("EnvironmentFile"), "-/etc/proxops/agent.env");
    assert_eq!(setting("User"), "proxops");
    assert_eq!(setting("StateDirectory"), "proxops");
    let exec = setting("ExecStart");
    let words: Vec<&str> = exec.split_whitespace().collect();
    let help = Command::new(proxops_bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in words.iter().filter(|w| w.starts_with("--")) {
        assert!(help.contains(flag), "`proxops run` has no {flag}");
    }
    // A broken agent configuration is refused with its diagnostics, not ignored.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(
        bad.path().join("agent.yaml"),
        "listen: [not, an, address]\nlisen: x\n",
    )
    .unwrap();
    let out = Command::new(proxops_bin())
        .args(["run", "--once", "--config"])
        .arg(bad.path().join("agent.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lisen"), "{stderr}");
}

#[test]
fn healthz_and_readyz_say_why_while_the_first_pass_runs_too_long() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "1500ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    let agent = Agent::start(
        &repo,
        data.path(),
        "agent-a",
        "1h",
        &["--backend", "pve", "--stall-timeout", "1s"],
    );
    let (health, ready) = wait_for(Duration::from_secs(60), "a stalled pass", || {
        let health = crate::support::http_get(agent.port, "/healthz")?;
        let ready = crate::support::http_get(agent.port, "/readyz")?;
        (health.0 == 503).then_some((health.1, ready))
    });
    assert!(
        health.starts_with("unhealthy: a pass has been running for"),
        "{health}"
    );
    assert_eq!(
        ready,
        (503, "not ready: no pass has completed yet\n".to_owned())
    );
    // Once the pass ends the agent is ready and healthy again.
    wait_for(Duration::from_secs(120), "the pass to end", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(
        crate::support::http_get(agent.port, "/healthz"),
        Some((200, "ok\n".to_owned()))
    );
    assert_eq!(
        crate::support::http_get(agent.port, "/readyz"),
        Some((200, "ready\n".to_owned()))
    );
}

#[test]
fn the_readmes_webhooks_and_notifications_example_reads_cleanly() {
    let readme = std::fs::read_to_string(example("../README.md")).unwrap();
    let section = readme
        .split_once("### Webhooks and notifications")
        .unwrap()
        .1;
    let yaml = section
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .unwrap()
        .0;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), yaml).unwrap();
    let source = proxops_model::FsSource::new(dir.path()).unwrap();
    let (config, diagnostics) = proxops_model::read_config_file(&source, "agent.yaml");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = config.unwrap();
    let kinds: Vec<&str> = config
        .notifications
        .iter()
        .flatten()
        .map(|s| s.kind.name())
        .collect();
    assert_eq!(kinds, ["webhook", "slack", "ntfy", "commit-status"]);
    let hooks = config.agent.and_then(|a| a.webhooks).unwrap();
    assert!(
        hooks.github.is_some()
            && hooks.gitlab.is_some()
            && hooks.gitea.is_some()
            && hooks.generic.is_some()
    );
}
