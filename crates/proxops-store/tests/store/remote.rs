//! Publishing to a remote with `git push --atomic --force-with-lease` (a local bare repository
//! stands in for the remote: no network), and the lost-race check.

use crate::support::*;
use proxops_store::documents::Outcome;
use proxops_store::{Observation, ObservationBatch, PlaneRefs, Store, StoreError};

const DESIRED: &str = "refs/heads/proxops/desired/home";
const OBSERVED: &str = "refs/heads/proxops/observed/home";

/// A bare "remote" and two work repositories of the homelab using it as `origin`.
fn remote_and_clones() -> (tempfile::TempDir, TestRepo, TestRepo) {
    let bare = tempfile::tempdir().unwrap();
    git(bare.path(), &["init", "-q", "--bare", "-b", "main"]);
    let a = TestRepo::homelab();
    a.git(&["remote", "add", "origin", bare.path().to_str().unwrap()]);
    a.git(&["push", "-q", "origin", "main"]);
    let b = TestRepo::homelab();
    b.git(&["remote", "add", "origin", bare.path().to_str().unwrap()]);
    b.git(&["fetch", "-q", "origin"]);
    b.git(&["reset", "-q", "--hard", "origin/main"]);
    (bare, a, b)
}

fn remote_head(bare: &std::path::Path, name: &str) -> Option<String> {
    let out = git_output(bare, &["rev-parse", "--verify", "-q", name]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn remote_push_to_a_local_bare_repository_moves_the_remote_ref_atomically() {
    let (bare, a, _b) = remote_and_clones();
    let store = Store::open(a.path()).unwrap().with_remote("origin");
    let published = publish_head(&store, "home");
    assert!(published.publication.published);
    let head = published.publication.head.to_string();
    assert_eq!(
        remote_head(bare.path(), DESIRED).as_deref(),
        Some(head.as_str())
    );
    assert_eq!(a.git(&["rev-parse", DESIRED]).trim(), head, "local mirror");
    assert_fsck_clean(bare.path());
    cli_documents(bare.path(), "proxops/desired/home");
    // Unchanged content: nothing pushed.
    let again = publish_head(&store, "home");
    assert!(!again.publication.published);
    assert_eq!(
        remote_head(bare.path(), DESIRED).as_deref(),
        Some(head.as_str())
    );
}

#[test]
fn observations_rebuild_on_the_newer_remote_head_and_keep_both_receipts() {
    let (bare, a, b) = remote_and_clones();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let store_a = Store::open(a.path()).unwrap().with_remote("origin");
    publish_head(&store_a, "home");
    let store_b = Store::open(b.path()).unwrap().with_remote("origin");
    let desired = store_b.read_desired(&refs, None).unwrap().unwrap();
    let mut keys = desired.resources.keys();
    for (store, key) in [
        (&store_a, keys.next().unwrap()),
        (&store_b, keys.next().unwrap()),
    ] {
        let obs = Observation::of(
            &desired.resources[key],
            desired.revision(),
            Outcome::Created,
        );
        let batch = ObservationBatch {
            observations: vec![obs],
            teardowns: Vec::new(),
        };
        store.publish_observations(&refs, &batch, 8).unwrap();
    }
    let receipts = git(
        bare.path(),
        &["ls-tree", "-r", "--name-only", OBSERVED, "receipts"],
    );
    assert_eq!(receipts.lines().count(), 2, "{receipts}");
    assert_eq!(
        git(bare.path(), &["rev-list", "--count", OBSERVED]).trim(),
        "2"
    );
    assert_fsck_clean(bare.path());
}

#[test]
fn a_lease_on_the_remote_keeps_a_process_with_another_clone_out_until_released() {
    use proxops_store::Holder;
    use std::time::Duration;
    let (bare, a, b) = remote_and_clones();
    let store_a = Store::open(a.path()).unwrap().with_remote("origin");
    let store_b = Store::open(b.path()).unwrap().with_remote("origin");
    let holder = |name: &str, pid: u32| Holder {
        name: name.to_owned(),
        host: format!("{name}-host"),
        pid,
    };
    let mut lease = store_a
        .acquire_lease("home", &holder("agent-a", 1), Duration::from_secs(60))
        .unwrap();
    assert!(remote_head(bare.path(), "refs/proxops/leases/home").is_some());
    let err = store_b
        .acquire_lease("home", &holder("agent-b", 2), Duration::from_secs(60))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Leased { ref holder, .. } if holder == "agent-a"),
        "{err}"
    );
    assert_eq!(
        store_b.read_lease("home").unwrap().unwrap().token,
        lease.record().token
    );
    lease.renew(Duration::from_secs(120)).unwrap();
    lease.release().unwrap();
    assert!(remote_head(bare.path(), "refs/proxops/leases/home").is_none());
    let taken = store_b
        .acquire_lease("home", &holder("agent-b", 2), Duration::from_secs(60))
        .unwrap();
    assert_eq!(taken.record().holder, "agent-b");
    drop(taken);
    assert!(remote_head(bare.path(), "refs/proxops/leases/home").is_none());
    assert_fsck_clean(bare.path());
}
