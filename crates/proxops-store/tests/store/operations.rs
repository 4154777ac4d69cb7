//! Promotion, rollback and change gates (planes-spec.md sections 1.2, 5.1-5.3 and 9.2-9.3), on
//! real repositories read back with the git CLI.

use crate::support::*;
use proxops_store::documents::Outcome;
use proxops_store::promotion::PromotionRequest;
use proxops_store::rollback::RollbackRequest;
use proxops_store::{
    DesiredOptions, Observation, ObservationBatch, PlaneRefs, Store, StoreError, TeardownRecord,
};

const HOME_CONFIG: &str = "clusters/home/config.yaml";

/// Adds `extra` (YAML lines indented for `pve.clusters.home`) to home's config and commits.
fn configure_home(repo: &TestRepo, extra: &str) {
    let text = repo.read(HOME_CONFIG);
    repo.write(HOME_CONFIG, &format!("{}\n{extra}", text.trim_end()));
    repo.commit_all("configure home");
}

/// Current receipts for every resource of the live desired plane of `cluster`.
fn observe_all(store: &Store, cluster: &str) {
    let refs = PlaneRefs::for_cluster(cluster).unwrap();
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let observations: Vec<Observation> = desired
        .resources
        .values()
        .map(|e| Observation::of(e, desired.revision(), Outcome::Created))
        .collect();
    let batch = ObservationBatch {
        observations,
        teardowns: Vec::new(),
    };
    store.publish_observations(&refs, &batch, 8).unwrap();
}

fn promote(store: &Store, dry_run: bool) -> Result<proxops_store::PromotionOutcome, StoreError> {
    let (rev, loaded) = load_at(store, None);
    store.promote(&PromotionRequest::new("lab", "home", &loaded, rev).with_dry_run(dry_run))
}

fn promotable() -> (TestRepo, Store) {
    let repo = TestRepo::homelab();
    configure_home(&repo, "      promotion:\n        allowed-sources: [lab]\n");
    let store = Store::open(repo.path()).unwrap();
    publish_head(&store, "lab");
    (repo, store)
}

fn bump_memory(repo: &TestRepo, memory: &str) {
    let path = "vm/lab/sandbox-01.yaml";
    let text = repo.read(path);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("memory:"))
        .unwrap();
    let indent = &line[..line.len() - line.trim_start().len()];
    repo.write(
        path,
        &text.replace(line, &format!("{indent}memory: {memory}")),
    );
    repo.commit_all(&format!("sandbox memory {memory}"));
}

#[test]
fn promote_refuses_a_source_with_missing_or_stale_receipts_and_names_them() {
    let (repo, store) = promotable();
    let err = promote(&store, false).unwrap_err();
    assert_eq!(err.code(), "proxops::promotion::not_reconciled");
    let text = err.to_string();
    assert!(
        text.contains("VM/sandbox-01 (READY: no observation receipt)"),
        "{text}"
    );
    observe_all(&store, "lab");
    bump_memory(&repo, "4GiB");
    publish_head(&store, "lab");
    let text = promote(&store, false).unwrap_err().to_string();
    assert!(
        text.contains("VM/sandbox-01 (READY: desired document changed since its last receipt)"),
        "{text}"
    );
    assert!(
        !text.contains("LXC/ci-runner-01"),
        "only the stale one: {text}"
    );
    assert!(
        store
            .head("refs/heads/proxops/desired/home")
            .unwrap()
            .is_none()
    );
}

#[test]
fn promote_refuses_a_source_the_target_does_not_allow() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    publish_head(&store, "lab");
    observe_all(&store, "lab");
    let err = promote(&store, false).unwrap_err();
    assert_eq!(err.code(), "proxops::promotion::not_allowed", "{err}");
}

#[test]
fn promote_succeeds_after_the_source_converged_and_writes_the_promotion_record() {
    let (repo, store) = promotable();
    observe_all(&store, "lab");
    let lab_desired = repo.git(&["rev-parse", "proxops/desired/lab"]);
    let lab_observed = repo.git(&["rev-parse", "proxops/observed/lab"]);
    let dry = promote(&store, true).unwrap();
    assert!(dry.publication.is_none() && !dry.already);
    assert!(
        store
            .head("refs/heads/proxops/desired/home")
            .unwrap()
            .is_none()
    );

    let outcome = promote(&store, false).unwrap();
    assert!(outcome.publication.as_ref().unwrap().publication.published);
    assert_fsck_clean(repo.path());
    let docs = cli_documents(repo.path(), "proxops/desired/home");
    let record = &docs["promotion.yaml"];
    assert_eq!(record["apiVersion"], "proxops/v1alpha1");
    assert_eq!(record["kind"], "Promotion");
    assert_eq!(record["metadata"]["name"], "lab");
    let source = &record["spec"]["source"];
    assert_eq!(source["cluster"], "lab");
    assert_eq!(source["desiredRef"], "proxops/desired/lab");
    assert_eq!(source["desiredRevision"], lab_desired.trim());
    assert_eq!(source["observedRef"], "proxops/observed/lab");
    assert_eq!(source["observedRevision"], lab_observed.trim());
    assert_eq!(record["spec"]["specificationRevision"], repo.head());
    // Home's own composition, not lab's.
    assert!(docs.contains_key("resources/VM/jumpbox.yaml"));
    assert!(!docs.contains_key("resources/VM/sandbox-01.yaml"));
    let message = repo.git(&["log", "-1", "--format=%B", "proxops/desired/home"]);
    assert!(
        message.starts_with(&format!("Promote lab to home from {}", lab_desired.trim())),
        "{message}"
    );
    // An apply afterwards carries the record unchanged.
    publish_head(&store, "home");
    assert_eq!(
        repo.git(&["rev-parse", "proxops/desired/home:promotion.yaml"]),
        repo.git(&["rev-parse", "proxops/desired/home~0:promotion.yaml"])
    );
}

#[test]
fn promote_twice_is_a_no_op() {
    let (repo, store) = promotable();
    observe_all(&store, "lab");
    promote(&store, false).unwrap();
    let head = repo.git(&["rev-parse", "proxops/desired/home"]);
    let again = promote(&store, false).unwrap();
    assert!(again.already && again.publication.is_none());
    assert_eq!(repo.git(&["rev-parse", "proxops/desired/home"]), head);
    assert_eq!(
        repo.git(&["rev-list", "--count", "proxops/desired/home"])
            .trim(),
        "1"
    );
}

/// Lab published at v1 and v2 (sandbox memory changed), with receipts for `clean` of them.
fn two_versions(clean: [bool; 2]) -> (TestRepo, Store, PlaneRefs, [String; 2]) {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("lab").unwrap();
    let mut revs = Vec::new();
    for (i, memory) in ["2GiB", "4GiB"].iter().enumerate() {
        if i > 0 {
            bump_memory(&repo, memory);
        }
        publish_head(&store, "lab");
        if clean[i] {
            observe_all(&store, "lab");
        }
        revs.push(
            repo.git(&["rev-parse", "proxops/desired/lab"])
                .trim()
                .to_owned(),
        );
    }
    (repo, store, refs, [revs[0].clone(), revs[1].clone()])
}

fn rollback(
    store: &Store,
    refs: &PlaneRefs,
    to: &str,
) -> Result<proxops_store::RollbackOutcome, StoreError> {
    store.rollback(&RollbackRequest::new(
        refs,
        store.resolve(to).unwrap(),
        "v2 broke the sandbox",
    ))
}

#[test]
fn rollback_creates_a_forward_commit_with_the_historical_content_and_current_uids() {
    let (repo, store, refs, [v1, v2]) = two_versions([true, true]);
    // Recreate the CI runner between v2 and now: a new incarnation with a new UID.
    let compo = repo.read("clusters/lab/resources.yaml");
    remove_resource(&repo, "lab", "lxc/lab/ci-runner-01.yaml");
    repo.commit_all("drop the runner");
    publish_head(&store, "lab");
    let desired = store.read_desired(&refs, None).unwrap().unwrap();
    let intent = desired.deletions.values().next().unwrap();
    let teardown = TeardownRecord {
        subject: intent.intent.spec.subject.clone(),
        intent: proxops_store::documents::DesiredPin {
            blob: intent.blob.to_string(),
            revision: desired.revision().to_string(),
        },
        upids: Vec::new(),
        finished_at: "2026-11-30T12:00:00Z".to_owned(),
    };
    let batch = ObservationBatch {
        observations: Vec::new(),
        teardowns: vec![teardown],
    };
    store.publish_observations(&refs, &batch, 8).unwrap();
    repo.git(&[
        "checkout",
        "-q",
        &v1_source(&repo, &v1),
        "--",
        "lxc/lab/ci-runner-01.yaml",
    ]);
    repo.write("clusters/lab/resources.yaml", &compo);
    repo.commit_all("runner back");
    publish_head(&store, "lab");
    let before = store.read_desired(&refs, None).unwrap().unwrap();
    let runner = proxops_model::ResourceKey {
        kind: "LXC".into(),
        name: "ci-runner-01".into(),
    };
    let old = store
        .read_desired(&refs, Some(store.resolve(&v1).unwrap()))
        .unwrap()
        .unwrap();
    let new_uid = before.resources[&runner].doc.metadata.uid.clone();
    assert_ne!(old.resources[&runner].doc.metadata.uid, new_uid);
    let head = repo
        .git(&["rev-parse", "proxops/desired/lab"])
        .trim()
        .to_owned();

    let outcome = rollback(&store, &refs, &v1).unwrap();
    assert!(outcome.publication.unwrap().publication.published);
    assert_fsck_clean(repo.path());
    let parents = repo.git(&["log", "-1", "--format=%P", "proxops/desired/lab"]);
    assert_eq!(parents.trim(), head, "one parent: the old head");
    let message = repo.git(&["log", "-1", "--format=%B", "proxops/desired/lab"]);
    for line in [
        format!("Rollback lab to {v1}"),
        format!("From-Desired-Revision: {head}"),
        format!("Target-Desired-Revision: {v1}"),
        "Reason: v2 broke the sandbox".to_owned(),
    ] {
        assert!(message.contains(&line), "{line}\n{message}");
    }
    let after = store.read_desired(&refs, None).unwrap().unwrap();
    let sandbox = proxops_model::ResourceKey {
        kind: "VM".into(),
        name: "sandbox-01".into(),
    };
    // v1's content: the sandbox's document is byte-identical to v1's (same UID throughout).
    assert_eq!(after.resources[&sandbox].blob, old.resources[&sandbox].blob);
    // The runner: v1's spec, today's UID.
    assert_eq!(after.resources[&runner].doc.metadata.uid, new_uid);
    assert_eq!(
        after.resources[&runner].doc.spec,
        old.resources[&runner].doc.spec
    );
    cli_documents(repo.path(), "proxops/desired/lab");
    let _ = v2;
}

/// The source commit v1 was published from.
fn v1_source(repo: &TestRepo, v1: &str) -> String {
    let message = repo.git(&["log", "-1", "--format=%B", v1]);
    message
        .lines()
        .find_map(|l| l.strip_prefix("Source-Revision: "))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn rollback_to_a_non_ancestor_or_the_head_is_refused() {
    let (repo, store, refs, [_, v2]) = two_versions([true, true]);
    let before = repo.git(&["rev-parse", "proxops/desired/lab"]);
    for rev in [repo.head(), v2] {
        let err = rollback(&store, &refs, &rev).unwrap_err();
        assert_eq!(err.code(), "proxops::rollback::not_ancestor", "{err}");
    }
    assert_eq!(repo.git(&["rev-parse", "proxops/desired/lab"]), before);
}

#[test]
fn rollback_refuses_a_revision_that_was_never_fully_clean() {
    let (repo, store, refs, [v1, _]) = two_versions([false, true]);
    let before = repo.git(&["rev-parse", "proxops/desired/lab"]);
    let err = rollback(&store, &refs, &v1).unwrap_err();
    assert_eq!(err.code(), "proxops::rollback::never_clean", "{err}");
    assert!(
        err.to_string()
            .contains("never fully clean in one observed snapshot")
    );
    assert_eq!(repo.git(&["rev-parse", "proxops/desired/lab"]), before);
}

#[test]
fn rollback_dry_run_reports_provenance_and_publishes_nothing() {
    let (repo, store, refs, [v1, v2]) = two_versions([true, true]);
    let outcome = store
        .rollback(
            &RollbackRequest::new(&refs, store.resolve(&v1).unwrap(), "  try  it ")
                .with_dry_run(true),
        )
        .unwrap();
    assert!(outcome.publication.is_none());
    let p = &outcome.provenance;
    assert_eq!(
        (
            p.from_desired_revision.as_str(),
            p.target_desired_revision.as_str()
        ),
        (v2.as_str(), v1.as_str())
    );
    assert_eq!(p.reason, "try it");
    assert!(p.target_observed_revision.is_some());
    assert_eq!(repo.git(&["rev-parse", "proxops/desired/lab"]).trim(), v2);
}

#[test]
fn a_pull_request_gate_publishes_a_candidate_and_leaves_the_live_ref_alone() {
    let repo = TestRepo::homelab();
    configure_home(&repo, "      planes:\n        change-gate: pullRequest\n");
    let store = Store::open(repo.path()).unwrap();
    let (rev, loaded) = load_at(&store, None);
    let entry = loaded.cluster("home").unwrap().entry.clone();
    let refs = PlaneRefs::from_config("home", entry.as_ref()).unwrap();
    let publish = |rev, loaded: &proxops_model::Repository| {
        store
            .publish_desired(&refs, loaded, rev, &DesiredOptions::default())
            .unwrap()
    };
    // The first publication initialises the live ref: there is nothing to propose against.
    let first = publish(rev, &loaded);
    assert!(first.publication.published && first.candidate.is_none());
    let live = repo.git(&["rev-parse", "proxops/desired/home"]);

    remove_resource(&repo, "home", "vm/home/truenas.yaml");
    repo.commit_all("drop truenas");
    let (rev, loaded) = load_at(&store, None);
    let gated = publish(rev, &loaded);
    assert!(!gated.publication.published);
    let candidate = gated.candidate.clone().unwrap();
    assert!(candidate.created);
    assert!(
        candidate
            .refname
            .starts_with("refs/heads/proxops/candidates/home/")
    );
    assert_eq!(
        repo.git(&["rev-parse", "proxops/desired/home"]),
        live,
        "live ref unmoved"
    );
    let parents = repo.git(&["log", "-1", "--format=%P", &candidate.refname]);
    assert_eq!(parents.trim(), live.trim(), "only parent: the live head");
    assert_eq!(
        repo.git(&[
            "rev-list",
            "--count",
            &format!("{}..{}", live.trim(), candidate.refname)
        ])
        .trim(),
        "1"
    );
    let files = repo.git(&["ls-tree", "-r", "--name-only", &candidate.refname]);
    assert!(files.contains("deletions/VM/truenas.yaml"), "{files}");
    assert_fsck_clean(repo.path());

    // The same content again: the same candidate, nothing written.
    let again = publish(rev, &loaded);
    let reused = again.candidate.unwrap();
    assert_eq!(
        (reused.refname.as_str(), reused.commit, reused.created),
        (candidate.refname.as_str(), candidate.commit, false)
    );
    let candidates = repo.git(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/heads/proxops/candidates/",
    ]);
    assert_eq!(candidates.lines().count(), 1, "{candidates}");
}

#[test]
fn configured_plane_branches_are_used() {
    let repo = TestRepo::homelab();
    configure_home(
        &repo,
        "      planes:\n        desired: deploy/home\n        observed: seen/home\n",
    );
    let store = Store::open(repo.path()).unwrap();
    let (rev, loaded) = load_at(&store, None);
    let entry = loaded.cluster("home").unwrap().entry.clone();
    let refs = PlaneRefs::from_config("home", entry.as_ref()).unwrap();
    store
        .publish_desired(&refs, &loaded, rev, &DesiredOptions::default())
        .unwrap();
    repo.git(&["rev-parse", "--verify", "refs/heads/deploy/home"]);
    assert!(repo.git(&["branch", "--list", "proxops/*"]).is_empty());
}

/// A materializer that renders one request per resource, or refuses `VM/sandbox-01` when
/// `fail` is set.
struct OneRequest {
    fail: bool,
}

impl proxops_store::materialized::Materializer for OneRequest {
    fn materialize(
        &self,
        request: &proxops_store::materialized::MaterializeRequest<'_>,
    ) -> std::collections::BTreeMap<
        proxops_model::ResourceKey,
        Result<proxops_store::materialized::Materialization, String>,
    > {
        request
            .targets
            .iter()
            .map(|key| {
                let rendered = if self.fail && key.name == "sandbox-01" {
                    Err("cannot render".to_owned())
                } else {
                    let call = proxops_store::materialized::ApiRequest {
                        method: "POST".to_owned(),
                        path: format!("/x/{}", key.name),
                        params: Default::default(),
                    };
                    Ok(proxops_store::materialized::Materialization::new(
                        vec![call],
                        Vec::new(),
                    ))
                };
                (key.clone(), rendered)
            })
            .collect()
    }
}

fn publish_with_payloads(store: &Store, cluster: &str, fail: bool) {
    let (rev, loaded) = load_at(store, None);
    let refs = PlaneRefs::for_cluster(cluster).unwrap();
    let options =
        DesiredOptions::default().with_materializer(std::sync::Arc::new(OneRequest { fail }));
    store
        .publish_desired(&refs, &loaded, rev, &options)
        .unwrap();
}

#[test]
fn a_target_asking_for_materialized_evidence_takes_payloads_for_receipts_and_records_them() {
    let repo = TestRepo::homelab();
    configure_home(
        &repo,
        "      promotion:\n        allowed-sources: [lab]\n        minimum-evidence: materialized\n",
    );
    let store = Store::open(repo.path()).unwrap();
    // A payload that did not render is no evidence: refused, and named.
    publish_with_payloads(&store, "lab", true);
    let text = promote(&store, false).unwrap_err().to_string();
    assert!(text.contains("VM/sandbox-01 (READY"), "{text}");
    assert!(!text.contains("LXC/ci-runner-01"), "{text}");

    // Every payload rendered: promoted without a single receipt, each payload recorded.
    std::process::Command::new("git")
        .args(["update-ref", "-d", "refs/heads/proxops/desired/lab"])
        .current_dir(repo.path())
        .status()
        .unwrap();
    publish_with_payloads(&store, "lab", false);
    let outcome = promote(&store, false).unwrap();
    assert!(outcome.publication.as_ref().unwrap().publication.published);
    let lab = store
        .read_desired(&PlaneRefs::for_cluster("lab").unwrap(), None)
        .unwrap()
        .unwrap();
    let docs = cli_documents(repo.path(), "proxops/desired/home");
    let evidence = &docs["promotion.yaml"]["spec"]["evidence"];
    assert_eq!(evidence["minimum"], "materialized");
    let recorded = evidence["materialized"].as_object().unwrap();
    assert_eq!(recorded.len(), lab.resources.len());
    for (key, entry) in &lab.resources {
        let pin = entry.materialized.as_ref().unwrap();
        assert_eq!(
            recorded[&key.to_string()]["blob"],
            pin.blob.as_str(),
            "{key}"
        );
        assert_eq!(
            recorded[&key.to_string()]["path"],
            pin.path.as_str(),
            "{key}"
        );
    }

    // A target that keeps the default asks for receipts: the same source is refused.
    let strict = TestRepo::homelab();
    configure_home(
        &strict,
        "      promotion:\n        allowed-sources: [lab]\n",
    );
    let store = Store::open(strict.path()).unwrap();
    publish_with_payloads(&store, "lab", false);
    let err = promote(&store, false).unwrap_err();
    assert_eq!(err.code(), "proxops::promotion::not_reconciled");
}
