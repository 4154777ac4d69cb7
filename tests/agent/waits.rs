//! A consumer that waits too long is an anomaly of the agent (issue 29, point 1): the cycle is
//! `waiting`, not converged; past the expression's `waitTimeout` the wait shows in `/status`,
//! `/metrics` and the notifications.

use super::standin::StandIn;
use super::support::*;
use std::time::Duration;

#[test]
fn a_consumer_waiting_past_its_timeout_is_an_anomaly_in_status_metrics_and_notifications() {
    let standin = StandIn::start();
    let repo = Repo::new();
    let vm = repo
        .read("vm/lab/sandbox-01.yaml")
        .replace("name: sandbox-01", "name: sandbox-02")
        .replace("vmid: 100", "vmid: 101")
        .replace("10.10.50.100/24", "10.10.50.101/24")
        .replace(
            "pve-description: \"Lab sandbox VM\"",
            "pve-description: {fromArtifact: {resource: LXC/ci-runner-01, name: ip-adresses, pointer: /net0/ipv4/0, waitTimeout: 2s}}",
        );
    repo.write("vm/lab/sandbox-02.yaml", &vm);
    let composition = repo.read("clusters/lab/resources.yaml");
    repo.write(
        "clusters/lab/resources.yaml",
        &format!("{composition}  - ../../vm/lab/sandbox-02.yaml\n"),
    );
    repo.commit("a consumer of an artifact name with a typo, waiting at most 2s");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hook.url"), standin.url("/anomaly")).unwrap();
    let config = dir.path().join("agent.yaml");
    std::fs::write(
        &config,
        "notifications:\n  - name: anomalies\n    type: webhook\n    url: {file: hook.url}\n    events: [anomaly]\n",
    )
    .unwrap();
    let sim_state = dir.path().join("sim.json").to_string_lossy().into_owned();
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
    let first = wait_for(Duration::from_secs(120), "the first cycle", || {
        agent.lab()?["lastCycle"].as_object().cloned()
    });
    assert_eq!(first["result"], "waiting", "{first:?}");
    assert_eq!(first["waiting"][0]["subject"], "VM/sandbox-02", "{first:?}");
    assert!(
        agent
            .metrics()
            .contains("proxops_resources_waiting{cluster=\"lab\"} 1")
    );
    assert!(
        agent
            .metrics()
            .contains("proxops_waits_timed_out{cluster=\"lab\"} 0")
    );

    // Past the timeout: an anomaly, counted and told, once.
    std::thread::sleep(Duration::from_millis(2200));
    for _ in 0..2 {
        let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
        assert!(out.contains("waiting"), "{code}: {out}");
    }
    let last = agent.lab().unwrap()["lastCycle"].clone();
    assert_eq!(last["result"], "waiting", "{last}");
    assert_eq!(last["waitsTimedOut"][0], "VM/sandbox-02", "{last}");
    let anomaly = last["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["subject"] == "VM/sandbox-02")
        .unwrap_or_else(|| panic!("no anomaly: {last}"));
    assert!(
        anomaly["message"]
            .as_str()
            .unwrap()
            .contains("waitTimeout of 2s")
            && anomaly["message"]
                .as_str()
                .unwrap()
                .contains("no artifact `ip-adresses`"),
        "{anomaly}"
    );
    let metrics = agent.metrics();
    assert!(
        metrics.contains("proxops_waits_timed_out{cluster=\"lab\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("proxops_anomalies{cluster=\"lab\"} 1"),
        "{metrics}"
    );
    let told = standin.wait_for("/anomaly", 1, Duration::from_secs(30));
    let event = told[0].json();
    assert_eq!(event["reason"], "Anomaly", "{event}");
    assert_eq!(event["resource"], "VM/sandbox-02", "{event}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        standin.received("/anomaly").len(),
        1,
        "told once while it stands"
    );
    assert!(
        !super::support::guests(&dir.path().join("sim.lab.json")).contains(&101),
        "never created"
    );
}
