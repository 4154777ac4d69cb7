//! `proxops verify` end to end: the homelab example committed in a temporary git repository,
//! its cluster lab applied with the planes to a `proxops sim` server, then changed by hand
//! through the PVE API. Verify finds the change (and later a guest deleted by hand) from the
//! simulator's answers to GET requests alone, and leaves the planes as they were.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::site::Site;
use proxops_pve::{ConfigChange, GuestRef};
use serde_json::Value;

/// The entries of lab's resources in a `VerifyReport`, as (`Kind/name`, state).
fn states(report: &Value) -> Vec<(String, String)> {
    let clusters = report["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{report:#}");
    assert_eq!(clusters[0]["cluster"], "lab");
    clusters[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                ),
                r["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn resource<'a>(report: &'a Value, subject: &str) -> &'a Value {
    report["clusters"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            format!(
                "{}/{}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            ) == subject
        })
        .unwrap_or_else(|| panic!("{subject} in {report:#}"))
}

fn with_state(subjects: &[(&str, &str)]) -> Vec<(String, String)> {
    subjects
        .iter()
        .map(|(s, st)| ((*s).to_owned(), (*st).to_owned()))
        .collect()
}

const SANDBOX: &str = "VM/sandbox-01";

#[test]
fn verify_finds_a_hand_change_and_a_deleted_guest_with_only_gets_and_writes_nothing() {
    let site = Site::new();
    let out = site.proxops(&["apply", "--planes", "--yes", "--cluster", "lab"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A cluster as reconciled: every resource in sync, exit 0 (with and without the flag).
    let (code, stdout) = site.verify(&["--detailed-exitcode"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.ends_with("RESULT CLEAN: 5 in sync, 0 not verified\n"),
        "{stdout}"
    );
    assert_eq!(site.verify(&[]).0, Some(0));

    // By hand in PVE, as in its web UI: VM/sandbox-01 (vmid 100, stopped) gets twice the memory.
    site.rt
        .block_on(site.client.set_config(
            &GuestRef::qemu("pve1", 100),
            &ConfigChange::default().set("memory", "4096"),
        ))
        .unwrap();
    let refs = site.refs();
    assert!(refs.contains("refs/heads/proxops/desired/lab"), "{refs}");
    assert!(refs.contains("refs/heads/proxops/observed/lab"), "{refs}");
    site.reset_counters();

    let (code, stdout) = site.verify(&["-o", "json", "--detailed-exitcode"]);
    assert_eq!(code, Some(3), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["apiVersion"], "proxops/v1alpha1");
    assert_eq!(report["kind"], "VerifyReport");
    assert_eq!(
        states(&report),
        with_state(&[
            ("CTTemplate/debian-13-standard", "inSync"),
            ("DiskImage/debian-13-genericcloud", "inSync"),
            ("ISO/debian-13-netinst", "inSync"),
            ("LXC/ci-runner-01", "inSync"),
            (SANDBOX, "drifted"),
        ])
    );
    assert_eq!(
        resource(&report, SANDBOX)["differences"],
        serde_json::json!([{"key": "memory", "desired": "2048", "live": "4096"}])
    );
    // PVE was only read, and neither plane, nor a lease, moved.
    let counters = site.counters();
    assert!(
        counters.keys().any(|k| k == "GET /cluster/resources"),
        "{counters:?}"
    );
    let writes: Vec<&String> = counters.keys().filter(|k| !k.starts_with("GET ")).collect();
    assert!(writes.is_empty(), "verify sent {writes:?}");
    assert_eq!(site.refs(), refs);

    // For people: the table's row and the RESULT line; without the flag drift exits 1.
    let (code, stdout) = site.verify(&[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.starts_with("CLUSTER  KIND "), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.contains("sandbox-01"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        row,
        "lab VM sandbox-01 Drifted memory: desired 2048, live 4096"
    );
    assert!(
        stdout.ends_with("RESULT DRIFT: lab VM/sandbox-01 drifted\n"),
        "{stdout}"
    );

    // The guest deleted by hand: missing.
    site.rt.block_on(async {
        let upid = site
            .client
            .destroy(&GuestRef::qemu("pve1", 100), &Default::default())
            .await
            .unwrap();
        site.client
            .wait_task(&upid, &proxops_pve::WaitOptions::default())
            .await
            .unwrap();
    });
    site.reset_counters();
    let (code, stdout) = site.verify(&["-o", "json", "--detailed-exitcode"]);
    assert_eq!(code, Some(3), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(resource(&report, SANDBOX)["state"], "missing", "{report:#}");
    assert_eq!(resource(&report, "LXC/ci-runner-01")["state"], "inSync");
    assert!(site.counters().keys().all(|k| k.starts_with("GET ")));
    assert_eq!(site.refs(), refs);
}
