//! Concurrency acceptance: four processes (not threads) publishing receipts for one cluster at
//! once, fifty rounds each. The test re-executes its own binary as the writers: with
//! `PROXOPS_STORE_WRITER` set, the same test function is a writer instead.

use crate::support::*;
use proxops_store::documents::{DesiredPin, Outcome, Subject};
use proxops_store::{Observation, ObservationBatch, PlaneRefs, Store};

const WRITERS: usize = 4;
const ROUNDS: usize = 50;
const TEST: &str = "processes::four_processes_publishing_receipts_lose_none_and_keep_git_sound";

fn writer(index: usize, repo: &str) {
    let store = Store::open(repo).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    for round in 0..ROUNDS {
        let obs = Observation {
            materialized: None,
            subject: Subject {
                kind: "VM".to_owned(),
                name: format!("w{index}-r{round:02}"),
                uid: format!("u1-{index:016x}{round:016x}"),
            },
            desired: DesiredPin {
                blob: format!("{round:040x}"),
                revision: "0".repeat(40),
            },
            outcome: Outcome::Created,
            pve_identity: [("vmid".to_owned(), serde_json::json!(1000 + round))].into(),
            upids: Vec::new(),
            started_at: "2026-11-30T12:00:00Z".to_owned(),
            finished_at: "2026-11-30T12:00:01Z".to_owned(),
            artifacts: Vec::new(),
            guard: None,
        };
        let batch = ObservationBatch {
            observations: vec![obs],
            teardowns: Vec::new(),
        };
        store.publish_observations(&refs, &batch, 1000).unwrap();
    }
}

#[test]
fn four_processes_publishing_receipts_lose_none_and_keep_git_sound() {
    if let (Ok(index), Ok(repo)) = (
        std::env::var("PROXOPS_STORE_WRITER"),
        std::env::var("PROXOPS_STORE_REPO"),
    ) {
        writer(index.parse().unwrap(), &repo);
        return;
    }
    let repo = TestRepo::homelab();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WRITERS)
        .map(|i| {
            std::process::Command::new(&exe)
                .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
                .env("PROXOPS_STORE_WRITER", i.to_string())
                .env("PROXOPS_STORE_REPO", repo.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "writer failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The writer really ran (a filter matching no test would pass silently).
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_fsck_clean(repo.path());
    let branch = "proxops/observed/home";
    assert_eq!(
        repo.git(&["rev-list", "--count", branch]).trim(),
        (WRITERS * ROUNDS).to_string(),
        "one commit per publication"
    );
    assert_eq!(
        repo.git(&["rev-list", "--merges", "--count", branch])
            .trim(),
        "0"
    );
    let docs = cli_documents(repo.path(), branch);
    assert_eq!(docs.len(), WRITERS * ROUNDS, "no receipt lost");
    for i in 0..WRITERS {
        for r in 0..ROUNDS {
            assert!(docs.contains_key(&format!("receipts/VM/w{i}-r{r:02}.yaml")));
        }
    }
}

#[test]
fn a_large_publication_is_written_as_one_valid_pack() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let observations = (0..300)
        .map(|i| Observation {
            materialized: None,
            subject: Subject {
                kind: "VM".to_owned(),
                name: format!("vm-{i:03}"),
                uid: format!("u1-{i:032x}"),
            },
            desired: DesiredPin {
                blob: format!("{i:040x}"),
                revision: "0".repeat(40),
            },
            outcome: Outcome::InSync,
            pve_identity: Default::default(),
            upids: Vec::new(),
            started_at: "2026-11-30T12:00:00Z".to_owned(),
            finished_at: "2026-11-30T12:00:01Z".to_owned(),
            artifacts: Vec::new(),
            guard: None,
        })
        .collect();
    let batch = ObservationBatch {
        observations,
        teardowns: Vec::new(),
    };
    store.publish_observations(&refs, &batch, 1).unwrap();
    let packs: Vec<_> = std::fs::read_dir(repo.path().join(".git/objects/pack"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .collect();
    assert_eq!(packs.len(), 1);
    // The pack and its index only: no `.keep` left to hold it out of `git gc`, no temporary file.
    let mut names: Vec<String> = std::fs::read_dir(repo.path().join(".git/objects/pack"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let stem = packs[0]
        .path()
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(names, [format!("{stem}.idx"), format!("{stem}.pack")]);
    let verify = git(
        repo.path(),
        &["verify-pack", "-v", packs[0].path().to_str().unwrap()],
    );
    assert!(verify.contains("blob") && verify.contains("tree") && verify.contains("commit"));
    assert_fsck_clean(repo.path());
    assert_eq!(
        cli_documents(repo.path(), "proxops/observed/home").len(),
        300
    );
    // Read back through gix in a fresh handle too.
    let state = Store::open(repo.path())
        .unwrap()
        .read_observed(&refs, None)
        .unwrap()
        .unwrap();
    assert_eq!(state.receipts.len(), 300);
}
