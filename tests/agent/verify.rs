//! The agent's verifications (`--verify-interval`): between its passes it verifies each cluster
//! (only reads), and drift found stays in `/metrics`, `/status` and the dashboard until a cycle
//! finds the resource in sync again.

use super::support::{
    Agent, LAB, Repo, SimServer, TOKEN, clean_at, control, memory_of, names, wait_for,
};
use crate::support::http_get;
use proxops_pve::{ConfigChange, Credentials, GuestRef, PveClient, TlsVerification};
use serde_json::Value;
use std::time::Duration;

/// `/status`'s entry of `VM/sandbox-01` in cluster lab.
fn sandbox(agent: &Agent) -> Option<Value> {
    let lab = agent.lab()?;
    lab["resources"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "VM" && r["name"] == "sandbox-01")
        .cloned()
}

/// The value of a metric line, as written.
fn metric(agent: &Agent, line: &str) -> Option<String> {
    agent
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ').map(str::to_owned))
}

#[test]
fn the_verify_interval_keeps_a_hand_change_as_drift_until_a_cycle_sets_it_back() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "50ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    // One timed pass (the first); verifications every few hundred milliseconds after it.
    let agent = Agent::start(
        &repo,
        data.path(),
        "agent-v",
        "1h",
        &["--backend", "pve", "--verify-interval", "300ms"],
    );
    let rows = wait_for(Duration::from_secs(120), "lab applied", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(rows, names(LAB));
    // Verified in sync, with the time of the run in the metrics.
    wait_for(Duration::from_secs(60), "a verification in sync", || {
        (sandbox(&agent)?["verify"]["state"] == "inSync").then_some(())
    });
    assert_eq!(
        metric(&agent, "proxops_resources_drifted{cluster=\"lab\"}").as_deref(),
        Some("0")
    );
    let ran = metric(
        &agent,
        "proxops_verify_last_run_timestamp_seconds{cluster=\"lab\"}",
    )
    .unwrap();
    assert!(ran.parse::<f64>().unwrap() > 1.0e9, "{ran}");

    // By hand in PVE: the stopped VM gets twice the memory.
    let client = PveClient::builder(
        format!("{}/api2/json", sim.process.url),
        Credentials::parse_token(TOKEN).unwrap(),
    )
    .tls(TlsVerification::Fingerprint(
        sim.process.fingerprint.parse().unwrap(),
    ))
    .build()
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(client.set_config(
            &GuestRef::qemu("pve1", 100),
            &ConfigChange::default().set("memory", "4096"),
        ))
        .unwrap();

    let found = wait_for(Duration::from_secs(60), "the drift in /status", || {
        let row = sandbox(&agent)?;
        (row["verify"]["state"] == "drifted").then_some(row)
    });
    assert_eq!(
        found["verify"]["differences"],
        serde_json::json!([{"key": "memory", "desired": "2048", "live": "4096"}])
    );
    assert!(found["verify"]["checkedAt"].is_string(), "{found:#}");
    // The planes still say CLEAN: a verification writes no receipt.
    assert_eq!(found["state"], "CLEAN");
    let lab = agent.lab().unwrap();
    assert_eq!(lab["lastVerify"]["drifted"], 1, "{lab:#}");
    assert_eq!(
        metric(&agent, "proxops_resources_drifted{cluster=\"lab\"}").as_deref(),
        Some("1")
    );
    let (code, page) = http_get(agent.port, "/ui/clusters/lab").unwrap();
    assert_eq!(code, 200);
    assert!(page.contains(r#"data-role="drifted""#), "{page}");
    let (_, overview) = http_get(agent.port, "/").unwrap();
    assert!(overview.contains(">1 drifted<"), "{overview}");
    // It lasts: later verifications find it again, none corrects it.
    let first = found["verify"]["checkedAt"].clone();
    wait_for(Duration::from_secs(60), "a later verification", || {
        let row = sandbox(&agent)?;
        (row["verify"]["checkedAt"] != first && row["verify"]["state"] == "drifted").then_some(())
    });
    assert_eq!(memory_of(&sim.state, 100), "4096");

    // A cycle sets it back, and with it the drift is gone.
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    wait_for(Duration::from_secs(60), "in sync after the cycle", || {
        (sandbox(&agent)?["verify"]["state"] == "inSync").then_some(())
    });
    assert_eq!(memory_of(&sim.state, 100), "2048");
    assert_eq!(
        metric(&agent, "proxops_resources_drifted{cluster=\"lab\"}").as_deref(),
        Some("0")
    );
    let (_, page) = http_get(agent.port, "/ui/clusters/lab").unwrap();
    assert!(!page.contains(r#"data-role="drifted""#), "{page}");
}
