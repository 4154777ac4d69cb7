//! Snapshot-guarded updates end to end (issue 33, point 4), through the `proxops` binary on a
//! git copy of the homelab example and the simulator: the `lab` cluster's sandbox VM with
//! `update-policy`, a disruptive update (more cores) whose guest agent never answers
//! afterwards. `apply` takes a snapshot, updates, restarts, checks, rolls back; the guest is
//! exactly what it was, the receipt says `rolledBack` with the failure and the snapshot, and
//! the next `apply` (another process) sends nothing for that desired document. A changed
//! manifest is tried again.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::proxops_bin;
use proxops_test_support::TestRepo;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

const OBSERVED: &str = "proxops/observed/lab";
const RECEIPT: &str = "receipts/VM/sandbox-01.yaml";

fn run(repo: &TestRepo, state: &Path, command: &[&str]) -> (Option<i32>, String) {
    let out: Output = std::process::Command::new(proxops_bin())
        .args(command)
        .args(["--planes", "--cluster", "lab", "--backend", "sim"])
        .arg("--sim-state")
        .arg(state)
        .arg("--repo")
        .arg(repo.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn receipt(repo: &TestRepo) -> Value {
    proxops_store::canonical::parse_yaml(&repo.git(&["show", &format!("{OBSERVED}:{RECEIPT}")]))
        .unwrap()
}

/// The sandbox VM's manifest with `cores`, started, its updates guarded (a 3 s check).
fn sandbox(repo: &TestRepo, cores: u32) {
    let path = repo.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.trim() {
            "state: stopped           # powered on by hand when needed" | "state: started" => {
                "  state: started\n  update-policy:\n    snapshot: true\n    verify: {timeout: 3s}"
                    .to_owned()
            }
            l if l.starts_with("cores: ") => format!("    cores: {cores}"),
            l if l.starts_with("update-policy:")
                || l.starts_with("snapshot: true")
                || l.starts_with("verify: {timeout") =>
            {
                continue;
            }
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    assert!(out.contains("update-policy"), "the example changed: {text}");
    std::fs::write(&path, out).unwrap();
    repo.git(&["commit", "-q", "-am", &format!("sandbox: {cores} cores")]);
}

fn sim(file: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn tasks(sim: &Value, kind: &str) -> usize {
    sim["tasks"]
        .as_array()
        .map(|t| t.iter().filter(|t| t["type"] == kind).count())
        .unwrap_or(0)
}

#[test]
fn a_guarded_update_whose_guest_does_not_come_back_is_rolled_back_recorded_and_not_retried() {
    let repo = TestRepo::homelab();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sim.json");
    let file = dir.path().join("sim.lab.json");
    sandbox(&repo, 2);
    let (code, said) = run(&repo, &state, &["converge"]);
    assert_eq!(code, Some(0), "{said}");
    let created = receipt(&repo);

    // The guest OS will not bring its agent up again after the change.
    let mut s = sim(&file);
    s["guests"]["100"]["agent_missing"] = Value::Bool(true);
    std::fs::write(&file, serde_json::to_vec(&s).unwrap()).unwrap();
    let before = s["guests"]["100"]["config"].clone();
    sandbox(&repo, 3);
    let (code, said) = run(&repo, &state, &["apply", "--yes"]);
    assert_eq!(code, Some(1), "{said}");
    for line in [
        "snapshot  VM/sandbox-01 (100)",
        "before a disruptive update (cores): snapshot `proxops-",
        "update    VM/sandbox-01 (100)",
        "verify    VM/sandbox-01 (100)",
        "its guest agent answers within 3s, else roll back to `proxops-",
        "FAILED (check-failed)",
        "the guest agent did not answer within 3.0s",
        "and started again",
    ] {
        assert!(said.contains(line), "no `{line}` in:\n{said}");
    }
    let s = sim(&file);
    let name = s["guests"]["100"]["snapshots"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(name.starts_with("proxops-"), "{name}");
    let mut expected = before.clone();
    expected["parent"] = Value::from(name.clone());
    assert_eq!(s["guests"]["100"]["config"], expected, "exactly as it was");
    assert_eq!(s["guests"]["100"]["status"], "running");
    // The receipt: the document tried, rolled back, why, and the document the guest is at.
    let r = receipt(&repo);
    let result = &r["spec"]["result"];
    assert_eq!(result["outcome"], "rolledBack", "{r}");
    assert_eq!(result["guard"]["snapshot"], Value::from(name.clone()));
    assert_eq!(result["guard"]["rolledBack"], true);
    assert!(
        result["guard"]["failure"]
            .as_str()
            .unwrap()
            .contains("the guest agent did not answer"),
        "{r}"
    );
    assert_eq!(result["guard"]["restored"], created["spec"]["desired"]);
    assert_ne!(r["spec"]["desired"], created["spec"]["desired"]);
    let get = std::process::Command::new(proxops_bin())
        .args(["get", "vm/sandbox-01", "--cluster", "lab", "--repo"])
        .arg(repo.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let get = String::from_utf8_lossy(&get.stdout).into_owned();
    assert!(
        get.contains("READY") && get.contains(&format!("rolled back to {name}")),
        "{get}"
    );

    // Another process, the same document: nothing is sent, the cluster is not in sync.
    let (snapshots, starts, shutdowns) = (
        tasks(&s, "qmsnapshot"),
        tasks(&s, "qmstart"),
        tasks(&s, "qmshutdown"),
    );
    let (code, said) = run(&repo, &state, &["apply", "--yes"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("not tried again until the manifest changes"),
        "{said}"
    );
    let again = sim(&file);
    assert_eq!(again["guests"]["100"]["config"], expected);
    assert_eq!(tasks(&again, "qmsnapshot"), snapshots);
    assert_eq!(tasks(&again, "qmstart"), starts);
    assert_eq!(tasks(&again, "qmshutdown"), shutdowns);

    // A changed manifest is tried again, and this time the guest comes back.
    let mut s = sim(&file);
    s["guests"]["100"]["agent_missing"] = Value::Bool(false);
    std::fs::write(&file, serde_json::to_vec(&s).unwrap()).unwrap();
    sandbox(&repo, 4);
    let (code, said) = run(&repo, &state, &["apply", "--yes"]);
    assert_eq!(code, Some(0), "{said}");
    let s = sim(&file);
    assert_eq!(s["guests"]["100"]["config"]["cores"], "4");
    let r = receipt(&repo);
    assert_eq!(r["spec"]["result"]["outcome"], "updated", "{r}");
    assert!(
        r["spec"]["result"]["guard"]["verified"]
            .as_str()
            .unwrap()
            .starts_with("the guest agent answered after"),
        "{r}"
    );
}
