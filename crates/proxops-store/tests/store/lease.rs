//! Per-cluster leases: one holder at a time, takeover only of expired or dead holders,
//! recovery by breaking.

use crate::support::*;
use proxops_store::lease::{Holder, lease_ref, parse_utc};
use proxops_store::{Store, StoreError};
use std::time::{Duration, SystemTime};

fn holder(name: &str, pid: u32) -> Holder {
    Holder {
        name: name.to_owned(),
        host: "host-a".to_owned(),
        pid,
    }
}

#[test]
fn a_second_holder_is_refused_while_the_first_holds_the_lease() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let first = store
        .acquire_lease("lab", &holder("agent-1", 1), Duration::from_secs(60))
        .unwrap();
    let err = store
        .acquire_lease("lab", &holder("agent-2", 2), Duration::from_secs(60))
        .unwrap_err();
    match err {
        StoreError::Leased { holder, pid, .. } => {
            assert_eq!((holder.as_str(), pid), ("agent-1", 1))
        }
        other => panic!("expected Leased, got {other}"),
    }
    // Another cluster is independent.
    store
        .acquire_lease("home", &holder("agent-2", 2), Duration::from_secs(60))
        .unwrap();
    first.release().unwrap();
    let second = store
        .acquire_lease("lab", &holder("agent-2", 2), Duration::from_secs(60))
        .unwrap();
    assert_eq!(second.record().holder, "agent-2");
    assert_fsck_clean(repo.path());
}

#[test]
fn an_expired_lease_is_taken_over_and_its_old_holder_cannot_renew_it() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let mut stale = store
        .acquire_lease("lab", &holder("agent-1", 1), Duration::ZERO)
        .unwrap();
    let fresh = store
        .acquire_lease("lab", &holder("agent-2", 2), Duration::from_secs(60))
        .unwrap();
    assert_ne!(stale.record().token, fresh.record().token);
    // The new holder knows whose lease it replaced; the first acquisition replaced none.
    assert!(stale.taken_over().is_none());
    assert_eq!(
        fresh.taken_over().map(|r| r.holder.as_str()),
        Some("agent-1")
    );
    // The old holder learns that it lost the lease instead of overwriting the new one.
    let err = stale.renew(Duration::from_secs(60)).unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    // Releasing a lost lease leaves the new holder's alone.
    assert!(stale.release().is_err());
    assert_eq!(
        store.read_lease("lab").unwrap().unwrap().token,
        fresh.record().token
    );
}

#[test]
fn a_lease_of_a_dead_process_on_this_host_is_taken_over_at_once() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let mut gone = Holder::this_process("crashed-agent");
    gone.pid = dead;
    // The dead process never released it.
    std::mem::forget(
        store
            .acquire_lease("lab", &gone, Duration::from_secs(3600))
            .unwrap(),
    );
    let now = store
        .acquire_lease(
            "lab",
            &Holder::this_process("restarted-agent"),
            Duration::from_secs(60),
        )
        .unwrap();
    assert_eq!(now.record().holder, "restarted-agent");
    assert_eq!(
        now.taken_over().map(|r| (r.holder.as_str(), r.pid)),
        Some(("crashed-agent", dead))
    );
}

#[test]
fn renewing_moves_the_expiry_and_the_lease_reads_back_with_git() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let mut lease = store
        .acquire_lease("lab", &holder("agent-1", 1), Duration::from_secs(10))
        .unwrap();
    let before = parse_utc(&lease.record().expires).unwrap();
    lease.renew(Duration::from_secs(3600)).unwrap();
    let after = parse_utc(&lease.record().expires).unwrap();
    assert!(after > before + Duration::from_secs(3000));
    assert!(after > SystemTime::now());
    let shown = repo.git(&["show", &format!("{}:lease.yaml", lease_ref("lab").unwrap())]);
    assert!(shown.contains("holder: agent-1"), "{shown}");
    assert!(shown.contains(&lease.record().token), "{shown}");
    assert_fsck_clean(repo.path());
}

#[test]
fn breaking_a_lease_frees_the_cluster_and_checks_the_token_when_given() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let lease = store
        .acquire_lease("lab", &holder("agent-1", 1), Duration::from_secs(3600))
        .unwrap();
    assert!(store.break_lease("lab", Some("lease-wrong")).is_err());
    let broken = store
        .break_lease("lab", Some(&lease.record().token))
        .unwrap()
        .unwrap();
    assert_eq!(broken.holder, "agent-1");
    assert!(store.read_lease("lab").unwrap().is_none());
    assert!(store.break_lease("lab", None).unwrap().is_none());
    store
        .acquire_lease("lab", &holder("agent-2", 2), Duration::from_secs(60))
        .unwrap();
}

#[test]
fn of_many_threads_racing_for_a_free_lease_exactly_one_wins_and_the_others_see_it_held() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u32)
            .map(|i| {
                let store = store.clone();
                s.spawn(move || {
                    store.acquire_lease(
                        "lab",
                        &holder(&format!("agent-{i}"), 100 + i),
                        Duration::from_secs(60),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(matches!(r, StoreError::Leased { .. }), "{r}");
    }
}

#[test]
fn dropping_a_lease_gives_it_back() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    drop(
        store
            .acquire_lease("lab", &holder("agent-1", 1), Duration::from_secs(3600))
            .unwrap(),
    );
    assert!(store.read_lease("lab").unwrap().is_none());
}
