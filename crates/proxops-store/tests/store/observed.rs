//! The observed plane and the derived state: receipts, artifacts, teardowns, and the scenarios
//! of planes-spec.md section 9 that apply to ProxOps (state, automatic deletion).

use crate::support::*;
use proxops_model::ResourceKey;
use proxops_store::documents::{Outcome, utc_timestamp};
use proxops_store::{
    Freshness, Observation, ObservationBatch, ObservationState, PlaneRefs, ResourceState, Store,
    TeardownRecord, documents::DesiredPin,
};
use serde_json::json;

fn key(kind: &str, name: &str) -> ResourceKey {
    ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// An observation of the live desired document of (kind, name), with one artifact.
fn observe(store: &Store, refs: &PlaneRefs, k: &ResourceKey, round: u32) -> Observation {
    let desired = store.read_desired(refs, None).unwrap().unwrap();
    let mut obs = Observation::of(&desired.resources[k], desired.revision(), Outcome::Created);
    obs.upids = vec![format!(
        "UPID:pve1:0000{round:04X}:00000000:00000000:qmcreate:{}:root@pam:",
        k.name
    )];
    obs.artifacts = vec![(
        "mac-addresses".to_owned(),
        "MacAddresses".to_owned(),
        json!({"net0": "BC:24:11:00:00:01", "round": round}),
    )];
    obs
}

fn publish(store: &Store, refs: &PlaneRefs, observations: Vec<Observation>) {
    let batch = ObservationBatch {
        observations,
        teardowns: Vec::new(),
    };
    store.publish_observations(refs, &batch, 8).unwrap();
}

#[test]
fn receipt_and_artifact_land_in_one_commit_readable_with_the_git_cli() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let desired = publish_head(&store, "home").publication.head;
    let jumpbox = key("VM", "jumpbox");
    publish(&store, &refs, vec![observe(&store, &refs, &jumpbox, 0)]);
    assert_fsck_clean(repo.path());
    let docs = cli_documents(repo.path(), "proxops/observed/home");
    assert_eq!(
        docs.keys().collect::<Vec<_>>(),
        [
            "artifacts/VM/jumpbox/mac-addresses.yaml",
            "receipts/VM/jumpbox.yaml"
        ]
    );
    let receipt = &docs["receipts/VM/jumpbox.yaml"];
    assert_eq!(receipt["kind"], "Receipt");
    assert_eq!(receipt["spec"]["subject"]["name"], "jumpbox");
    assert_eq!(receipt["spec"]["desired"]["revision"], desired.to_string());
    let blob = repo.git(&[
        "rev-parse",
        "proxops/desired/home:resources/VM/jumpbox.yaml",
    ]);
    assert_eq!(receipt["spec"]["desired"]["blob"], blob.trim());
    let result = &receipt["spec"]["result"];
    assert_eq!(result["outcome"], "created");
    assert!(result["pveIdentity"]["vmid"].is_number());
    assert!(result["upids"][0].as_str().unwrap().starts_with("UPID:"));
    assert!(result["finishedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(result["controllerVersion"], env!("CARGO_PKG_VERSION"));
    let artifact_blob = repo.git(&[
        "rev-parse",
        "proxops/observed/home:artifacts/VM/jumpbox/mac-addresses.yaml",
    ]);
    assert_eq!(
        result["artifacts"]["mac-addresses"]["blob"],
        artifact_blob.trim()
    );
    let log = repo.git(&["log", "--format=%B", "proxops/observed/home"]);
    assert!(
        log.contains(&format!("Desired-Revision: {desired}")),
        "{log}"
    );
}

#[test]
fn state_is_clean_for_a_current_receipt_and_ready_otherwise() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let view = store.view(&refs).unwrap();
    assert_eq!(view.count(ResourceState::Ready), 26);
    assert!(view.observed_revision.is_none());
    let jumpbox = key("VM", "jumpbox");
    publish(&store, &refs, vec![observe(&store, &refs, &jumpbox, 0)]);
    let view = store.view(&refs).unwrap();
    let row = view.resource("VM", "jumpbox").unwrap();
    assert_eq!(row.state, ResourceState::Clean);
    assert_eq!(row.observation, ObservationState::Current);
    assert_eq!(view.count(ResourceState::Ready), 25);
    assert_eq!(view.artifacts[0].freshness, Freshness::Current);
    let other = view.resource("VM", "truenas").unwrap();
    assert_eq!(other.observation, ObservationState::Missing);
    assert_eq!(other.reason, "no observation receipt");
}

#[test]
fn a_changed_desired_document_turns_its_receipt_stale_and_a_new_receipt_current() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let jumpbox = key("VM", "jumpbox");
    let truenas = key("VM", "truenas");
    publish(
        &store,
        &refs,
        vec![
            observe(&store, &refs, &jumpbox, 0),
            observe(&store, &refs, &truenas, 0),
        ],
    );
    let path = "vm/home/jumpbox.yaml";
    repo.write(
        path,
        &repo.read(path).replacen("memory: ", "memory: 3GiB # ", 1),
    );
    repo.commit_all("edit");
    publish_head(&store, "home");
    let view = store.view(&refs).unwrap();
    let row = view.resource("VM", "jumpbox").unwrap();
    assert_eq!(
        (row.state, row.observation),
        (ResourceState::Ready, ObservationState::Stale)
    );
    assert_eq!(
        view.resource("VM", "truenas").unwrap().state,
        ResourceState::Clean,
        "the receipt of an unchanged resource stays current across desired commits"
    );
    let stale: Vec<_> = view
        .artifacts
        .iter()
        .map(|a| (a.producer.name.as_str(), a.freshness))
        .collect();
    assert_eq!(
        stale,
        [
            ("jumpbox", Freshness::Stale),
            ("truenas", Freshness::Current)
        ]
    );
    publish(&store, &refs, vec![observe(&store, &refs, &jumpbox, 1)]);
    assert_eq!(
        store
            .view(&refs)
            .unwrap()
            .resource("VM", "jumpbox")
            .unwrap()
            .state,
        ResourceState::Clean
    );
    assert_fsck_clean(repo.path());
}

#[test]
fn automatic_deletion_waits_for_teardown_then_cleans_up_the_intent() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let jumpbox = key("VM", "jumpbox");
    publish(&store, &refs, vec![observe(&store, &refs, &jumpbox, 0)]);
    remove_resource(&repo, "home", "vm/home/jumpbox.yaml");
    repo.commit_all("drop jumpbox");
    publish_head(&store, "home");
    let view = store.view(&refs).unwrap();
    let row = view.resource("VM", "jumpbox").unwrap();
    assert_eq!(row.state, ResourceState::Deleting);
    assert_eq!(view.receipts[0].freshness, Freshness::Orphan);
    assert_eq!(view.artifacts[0].freshness, Freshness::Orphan);

    // The engine tears the guest down and records it against the intent it read.
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let intent = &desired.deletions[&jumpbox];
    let teardown = TeardownRecord {
        subject: intent.intent.spec.subject.clone(),
        intent: DesiredPin {
            blob: intent.blob.to_string(),
            revision: desired.revision().to_string(),
        },
        upids: vec!["UPID:pve1:00000001:00000000:00000000:qmdestroy:104:root@pam:".to_owned()],
        finished_at: utc_timestamp(std::time::SystemTime::now()),
    };
    let batch = ObservationBatch {
        observations: Vec::new(),
        teardowns: vec![teardown],
    };
    store.publish_observations(&refs, &batch, 8).unwrap();
    let docs = cli_documents(repo.path(), "proxops/observed/home");
    let uid = &intent.intent.spec.subject.uid;
    assert_eq!(
        docs.keys().collect::<Vec<_>>(),
        [&format!("teardowns/VM/jumpbox/{uid}.yaml")],
        "the teardown removes the receipt and the artifacts"
    );
    let view = store.view(&refs).unwrap();
    assert_eq!(
        view.resource("VM", "jumpbox").unwrap().state,
        ResourceState::Wait
    );

    // The next desired publication drops the intent.
    let p = publish_head(&store, "home");
    assert_eq!(p.changes.finalized, vec![jumpbox.clone()]);
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    assert!(desired.deletions.is_empty());
    assert!(
        store
            .view(&refs)
            .unwrap()
            .resource("VM", "jumpbox")
            .is_none()
    );
    let log = repo.git(&["log", "-1", "--format=%B", "proxops/desired/home"]);
    assert!(log.contains("Finalized: VM/jumpbox"), "{log}");

    // Recreated later, it is a new incarnation with a new UID.
    repo.git(&["revert", "--no-edit", "HEAD"]);
    let p = publish_head(&store, "home");
    assert_eq!(p.changes.created, vec![jumpbox.clone()]);
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    assert_ne!(&desired.resources[&jumpbox].doc.metadata.uid, uid);
    assert_fsck_clean(repo.path());
}

#[test]
fn a_teardown_of_another_incarnation_does_not_clean_up_the_intent() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    remove_resource(&repo, "home", "vm/home/jumpbox.yaml");
    repo.commit_all("drop jumpbox");
    publish_head(&store, "home");
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let jumpbox = key("VM", "jumpbox");
    let mut subject = desired.deletions[&jumpbox].intent.spec.subject.clone();
    subject.uid = "u1-00000000000000000000000000000000".to_owned();
    let batch = ObservationBatch {
        observations: Vec::new(),
        teardowns: vec![TeardownRecord {
            subject,
            intent: DesiredPin {
                blob: desired.deletions[&jumpbox].blob.to_string(),
                revision: desired.revision().to_string(),
            },
            upids: Vec::new(),
            finished_at: utc_timestamp(std::time::SystemTime::now()),
        }],
    };
    store.publish_observations(&refs, &batch, 8).unwrap();
    let p = publish_head(&store, "home");
    assert!(!p.publication.published);
    assert_eq!(
        store
            .view(&refs)
            .unwrap()
            .resource("VM", "jumpbox")
            .unwrap()
            .state,
        ResourceState::Deleting
    );
}

#[test]
fn concurrent_writers_lose_no_receipt_and_keep_the_ref_sound() {
    const WRITERS: usize = 4;
    const ROUNDS: u32 = 50;
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let keys: Vec<ResourceKey> = desired.resources.keys().take(WRITERS).cloned().collect();
    let barrier = std::sync::Barrier::new(WRITERS);
    std::thread::scope(|scope| {
        for k in &keys {
            let (barrier, refs, path) = (&barrier, &refs, repo.path());
            scope.spawn(move || {
                // Each writer has its own handle, as a separate process would.
                let store = Store::open(path).unwrap();
                for round in 0..ROUNDS {
                    barrier.wait();
                    let obs = observe(&store, refs, k, round);
                    let batch = ObservationBatch {
                        observations: vec![obs],
                        teardowns: Vec::new(),
                    };
                    store.publish_observations(refs, &batch, 64).unwrap();
                }
            });
        }
    });
    assert_fsck_clean(repo.path());
    // One commit per publication, in one line of history.
    let count = repo.git(&["rev-list", "--count", "proxops/observed/home"]);
    assert_eq!(count.trim(), (WRITERS as u32 * ROUNDS).to_string());
    let merges = repo.git(&["rev-list", "--merges", "--count", "proxops/observed/home"]);
    assert_eq!(merges.trim(), "0");
    // Every receipt of every round is in the history, and the head holds each writer's last.
    let mut seen = std::collections::BTreeSet::new();
    for commit in store.history(&refs.observed).unwrap() {
        let state = store.read_observed(&refs, Some(commit)).unwrap().unwrap();
        for (k, r) in &state.receipts {
            seen.insert((k.clone(), r.doc.spec.result.upids[0].clone()));
        }
    }
    assert_eq!(seen.len(), WRITERS * ROUNDS as usize);
    let head = store.read_observed(&refs, None).unwrap().unwrap();
    assert_eq!(head.receipts.len(), WRITERS);
    for k in &keys {
        let artifact = &head.artifacts[&(k.clone(), "mac-addresses".to_owned())];
        assert_eq!(artifact.doc.spec["round"], ROUNDS - 1);
    }
}

/// A receipt saying a snapshot-guarded update to the live document was rolled back
/// (`rolledBack`): the resource is READY, not CLEAN, the reason names the snapshot and the
/// failure, and the receipt keeps its guard record as written.
#[test]
fn a_rolled_back_receipt_of_the_live_document_is_not_clean() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let jumpbox = key("VM", "jumpbox");
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let mut obs = Observation::of(
        &desired.resources[&jumpbox],
        desired.revision(),
        Outcome::RolledBack,
    );
    let record = proxops_store::documents::GuardRecord {
        snapshot: "proxops-0123456789ab".to_owned(),
        failure: Some("check failed: the guest agent did not answer within 5m".to_owned()),
        rolled_back: true,
        restored: Some(DesiredPin {
            blob: "1".repeat(40),
            revision: "2".repeat(40),
        }),
        ..Default::default()
    };
    obs.guard = Some(record.clone());
    publish(&store, &refs, vec![obs]);
    let view = store.view(&refs).unwrap();
    let row = view.resource("VM", "jumpbox").unwrap();
    assert_eq!(row.observation, ObservationState::Current);
    assert_eq!(row.state, ResourceState::Ready);
    assert_eq!(
        row.reason,
        "rolled back to proxops-0123456789ab: check failed: the guest agent did not answer within 5m; not tried again until the desired document changes"
    );
    let receipt = row.receipt.as_ref().unwrap();
    assert_eq!(receipt.doc.spec.result.outcome, Outcome::RolledBack);
    assert_eq!(receipt.doc.spec.result.guard.as_ref(), Some(&record));
    let docs = cli_documents(repo.path(), "proxops/observed/home");
    let result = &docs["receipts/VM/jumpbox.yaml"]["spec"]["result"];
    assert_eq!(result["outcome"], "rolledBack");
    assert_eq!(result["guard"]["rolledBack"], true);
    assert_eq!(result["guard"]["restored"]["blob"], "1".repeat(40));
}
