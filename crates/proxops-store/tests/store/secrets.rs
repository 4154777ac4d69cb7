//! No secret of the source repository reaches any object of either plane.

use crate::support::*;
use proxops_store::documents::Outcome;
use proxops_store::{Observation, ObservationBatch, PlaneRefs, Store};
use std::process::{Command, Stdio};

const SECRET: &str = "s3cr3t-9f2c41d7-token-value";

/// Every object reachable from `revs`, each as its raw content.
fn objects(dir: &std::path::Path, revs: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut args = vec!["rev-list", "--objects"];
    args.extend_from_slice(revs);
    let list = git(dir, &args);
    let ids: Vec<&str> = list.lines().filter_map(|l| l.split(' ').next()).collect();
    let mut out = Vec::new();
    for id in ids {
        let kind = git(dir, &["cat-file", "-t", id]);
        let content = Command::new("git")
            .current_dir(dir)
            .args(["cat-file", kind.trim(), id])
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .stdout;
        out.push((id.to_owned(), content));
    }
    out
}

fn hits(objects: &[(String, Vec<u8>)]) -> Vec<&str> {
    objects
        .iter()
        .filter(|(_, c)| c.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()))
        .map(|(id, _)| id.as_str())
        .collect()
}

#[test]
fn no_object_of_either_plane_holds_a_secret_of_the_source() {
    let repo = TestRepo::homelab();
    for cluster in ["home", "lab"] {
        repo.write(
            &format!("clusters/{cluster}/secrets.sops.yaml"),
            &format!(
                "secrets:\n  proxops-user: proxops@pve\n  proxops-token-id: ci\n  proxops-token: {SECRET}\n"
            ),
        );
    }
    // Also as an inline bootstrap token of the process-wide config.
    let config = repo.read("proxops.yaml").replace(
        "  auth: token\n",
        &format!("  auth: token\n  token: {SECRET}\n"),
    );
    repo.write("proxops.yaml", &config);
    repo.commit_all("secrets");
    let store = Store::open(repo.path()).unwrap();
    for cluster in ["home", "lab"] {
        publish_head(&store, cluster);
        let refs = PlaneRefs::for_cluster(cluster).unwrap();
        let desired = store.read_desired(&refs, None).unwrap().unwrap();
        let observations = desired
            .resources
            .values()
            .map(|e| Observation::of(e, desired.revision(), Outcome::Created))
            .collect();
        let batch = ObservationBatch {
            observations,
            teardowns: Vec::new(),
        };
        store.publish_observations(&refs, &batch, 4).unwrap();
    }
    // The check itself finds the secret where it is.
    assert!(!hits(&objects(repo.path(), &["main"])).is_empty());
    let planes = objects(
        repo.path(),
        &[
            "proxops/desired/home",
            "proxops/observed/home",
            "proxops/desired/lab",
            "proxops/observed/lab",
        ],
    );
    assert!(planes.len() > 40, "{} objects", planes.len());
    assert_eq!(hits(&planes), Vec::<&str>::new());
    assert_fsck_clean(repo.path());
}
