//! Publishing 10,000 receipts in one commit: the store (gix; the new objects written as one
//! pack) against the git CLI (`git fast-import`) doing the same, in the same run, each into a
//! fresh repository.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use proxops_store::documents::{DesiredPin, Outcome, Subject, canonical_bytes};
use proxops_store::{Observation, ObservationBatch, PlaneRefs, Store};
use std::io::Write;
use std::process::{Command, Stdio};

const RECEIPTS: usize = 10_000;

fn fresh_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .current_dir(dir.path())
        .args(["init", "-q", "--bare"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    dir
}

fn observations() -> ObservationBatch {
    let observations = (0..RECEIPTS)
        .map(|i| Observation {
            materialized: None,
            subject: Subject {
                kind: "VM".to_owned(),
                name: format!("vm-{i:05}"),
                uid: format!("u1-{i:032x}"),
            },
            desired: DesiredPin {
                blob: format!("{i:040x}"),
                revision: "0".repeat(40),
            },
            outcome: Outcome::Created,
            pve_identity: [("vmid".to_owned(), serde_json::json!(100 + i))].into(),
            upids: vec![format!(
                "UPID:pve1:{i:08X}:00000000:00000000:qmcreate:{i}:root@pam:"
            )],
            started_at: "2026-11-30T12:00:00Z".to_owned(),
            finished_at: "2026-11-30T12:00:05Z".to_owned(),
            artifacts: Vec::new(),
            guard: None,
        })
        .collect();
    ObservationBatch {
        observations,
        teardowns: Vec::new(),
    }
}

/// The same receipt documents as a fast-import stream: one blob each, one commit.
fn fast_import_stream(batch: &ObservationBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut files = Vec::new();
    for (i, o) in batch.observations.iter().enumerate() {
        // The document bytes are what the store writes for the receipt (roughly: same size).
        let bytes = canonical_bytes(&serde_json::json!({
            "apiVersion": "proxops/v1alpha1", "kind": "Receipt",
            "metadata": {"name": o.subject.name},
            "spec": {"subject": o.subject, "desired": o.desired,
                     "result": {"outcome": "created", "pveIdentity": o.pve_identity,
                                "upids": o.upids, "startedAt": o.started_at,
                                "finishedAt": o.finished_at}}
        }))
        .unwrap();
        writeln!(out, "blob\nmark :{}\ndata {}", i + 1, bytes.len()).unwrap();
        out.extend_from_slice(&bytes);
        out.push(b'\n');
        files.push(format!("receipts/VM/{}.yaml", o.subject.name));
    }
    let msg = "Observe receipts\n";
    writeln!(
        out,
        "commit refs/heads/proxops/observed/bench\ncommitter proxops <proxops@localhost> 1764504000 +0000\ndata {}\n{msg}",
        msg.len()
    )
    .unwrap();
    for (i, path) in files.iter().enumerate() {
        writeln!(out, "M 100644 :{} {path}", i + 1).unwrap();
    }
    out.push(b'\n');
    out
}

fn bench(c: &mut Criterion) {
    let batch = observations();
    let refs = PlaneRefs::for_cluster("bench").unwrap();
    let mut group = c.benchmark_group("publish_10000_receipts_one_commit");
    group.sample_size(10);
    group.bench_function("proxops_store_gix", |b| {
        b.iter_batched(
            fresh_repo,
            |dir| {
                let store = Store::open(dir.path()).unwrap();
                let p = store.publish_observations(&refs, &batch, 1).unwrap();
                assert!(p.published);
                dir
            },
            BatchSize::PerIteration,
        );
    });
    let stream = fast_import_stream(&batch);
    group.bench_function("git_fast_import", |b| {
        b.iter_batched(
            fresh_repo,
            |dir| {
                let mut child = Command::new("git")
                    .current_dir(dir.path())
                    .args(["fast-import", "--quiet"])
                    .stdin(Stdio::piped())
                    .spawn()
                    .unwrap();
                child.stdin.take().unwrap().write_all(&stream).unwrap();
                assert!(child.wait().unwrap().success());
                dir
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
