//! The desired plane: publication, no-op detection, determinism, UIDs and deletion intents.

use crate::support::*;
use proxops_store::{DesiredOptions, PlaneRefs, Store, StoreError};

#[test]
fn publishes_resolved_resources_readable_with_the_git_cli() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let p = publish_head(&store, "home");
    assert!(p.publication.published);
    assert_eq!(p.changes.created.len(), 26);
    assert_fsck_clean(repo.path());
    let docs = cli_documents(repo.path(), "proxops/desired/home");
    assert_eq!(docs.len(), 27, "{:?}", docs.keys());
    let vm = &docs["resources/VM/jumpbox.yaml"];
    assert_eq!(vm["apiVersion"], "proxops/v1alpha1");
    assert_eq!(vm["kind"], "VM");
    assert_eq!(vm["metadata"]["name"], "jumpbox");
    assert!(vm["metadata"]["uid"].as_str().unwrap().starts_with("u1-"));
    assert!(vm["spec"]["vmid"].is_number());
    let cluster = &docs["cluster.yaml"];
    assert_eq!(cluster["kind"], "ClusterConfig");
    assert_eq!(cluster["spec"]["baseUrl"], "https://pve-home.lan:8006");
    assert_eq!(cluster["spec"]["auth"], "token");
    assert_eq!(cluster["spec"]["pruneBudget"], 2);
    assert!(cluster["spec"].get("secrets").is_none());
    // The commit pins the source revision in a trailer.
    let log = repo.git(&["log", "--format=%H %P%n%B", "proxops/desired/home"]);
    assert!(
        log.contains(&format!("Source-Revision: {}", repo.head())),
        "{log}"
    );
    let trailers = repo.git(&[
        "log",
        "-1",
        "--format=%(trailers:key=Source-Revision,valueonly)",
        "proxops/desired/home",
    ]);
    assert_eq!(trailers.trim(), repo.head());
    // Read back through the store.
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let state = store.read_desired(&refs, None).unwrap().unwrap();
    assert_eq!(state.resources.len(), 26);
    assert_eq!(state.source_revision.unwrap().to_string(), repo.head());
    assert_eq!(state.revision(), p.publication.head);
}

#[test]
fn republishing_the_same_source_commits_nothing() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let first = publish_head(&store, "home");
    let again = publish_head(&store, "home");
    assert!(!again.publication.published);
    assert_eq!(again.publication.head, first.publication.head);
    assert!(again.changes.is_empty());
    // A source commit that changes nothing of this cluster publishes nothing either.
    repo.write("README.md", "changed\n");
    repo.commit_all("docs only");
    let third = publish_head(&store, "home");
    assert!(!third.publication.published);
    let count = repo.git(&["rev-list", "--count", "proxops/desired/home"]);
    assert_eq!(count.trim(), "1");
}

#[test]
fn the_same_source_yields_the_same_blobs_and_tree_in_another_clone() {
    let repo = TestRepo::homelab();
    let clone = tempfile::tempdir().unwrap();
    git(
        clone.path(),
        &["clone", "-q", repo.path().to_str().unwrap(), "."],
    );
    let a = publish_head(&Store::open(repo.path()).unwrap(), "home");
    let b = publish_head(&Store::open(clone.path()).unwrap(), "home");
    let tree = |dir: &std::path::Path| git(dir, &["rev-parse", "proxops/desired/home^{tree}"]);
    assert_eq!(tree(repo.path()), tree(clone.path()));
    // Commits differ only by their timestamps, never by content.
    assert_eq!(a.changes, b.changes);
}

#[test]
fn an_edit_changes_only_that_document_and_keeps_its_uid() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let before = store.read_desired(&refs, None).unwrap().unwrap();
    let path = "vm/home/jumpbox.yaml";
    let text = repo.read(path);
    let edited = text.replacen("memory: ", "memory: 3GiB # was ", 1);
    assert_ne!(text, edited);
    repo.write(path, &edited);
    repo.commit_all("more memory");
    let p = publish_head(&store, "home");
    assert!(p.publication.published);
    assert_eq!(p.changes.updated.len(), 1, "{:?}", p.changes);
    assert!(p.changes.created.is_empty());
    let after = store.read_desired(&refs, None).unwrap().unwrap();
    for (key, entry) in &before.resources {
        let now = &after.resources[key];
        assert_eq!(now.doc.metadata.uid, entry.doc.metadata.uid);
        assert_eq!(now.blob == entry.blob, key.name != "jumpbox", "{key}");
    }
    assert_eq!(
        after.plane.commit.parents,
        vec![before.revision()],
        "one forward commit"
    );
}

#[test]
fn a_removed_resource_becomes_a_fenced_deletion_intent() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let before = store.read_desired(&refs, None).unwrap().unwrap();
    remove_resource(&repo, "home", "vm/home/jumpbox.yaml");
    let source = repo.commit_all("drop jumpbox");
    let p = publish_head(&store, "home");
    assert_eq!(p.changes.deleting.len(), 1);
    let docs = cli_documents(repo.path(), "proxops/desired/home");
    assert!(!docs.contains_key("resources/VM/jumpbox.yaml"));
    let intent = &docs["deletions/VM/jumpbox.yaml"];
    let old = &before.resources[&p.changes.deleting[0]];
    assert_eq!(intent["kind"], "DeletionIntent");
    assert_eq!(intent["spec"]["subject"]["kind"], "VM");
    assert_eq!(intent["spec"]["subject"]["name"], "jumpbox");
    assert_eq!(
        intent["spec"]["subject"]["uid"],
        old.doc.metadata.uid.as_str()
    );
    assert_eq!(intent["spec"]["pveIdentity"]["vmid"], old.doc.spec["vmid"]);
    assert_eq!(intent["spec"]["pveIdentity"]["node"], old.doc.spec["node"]);
    assert_eq!(intent["spec"]["lastDesired"]["blob"], old.blob.to_string());
    assert_eq!(
        intent["spec"]["lastDesired"]["revision"],
        before.revision().to_string()
    );
    assert_eq!(intent["spec"]["sourceRevision"], source.as_str());
    // The intent stays, byte for byte, while nothing is observed.
    repo.write("README.md", "x\n");
    repo.commit_all("unrelated");
    let again = publish_head(&store, "home");
    assert!(!again.publication.published);
    assert_fsck_clean(repo.path());
}

#[test]
fn a_resource_back_before_teardown_keeps_its_uid() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    publish_head(&store, "home");
    let first = store.read_desired(&refs, None).unwrap().unwrap();
    let original = repo.head();
    remove_resource(&repo, "home", "vm/home/jumpbox.yaml");
    repo.commit_all("drop jumpbox");
    publish_head(&store, "home");
    repo.git(&["revert", "--no-edit", "HEAD"]);
    assert_ne!(repo.head(), original);
    let p = publish_head(&store, "home");
    assert_eq!(p.changes.restored.len(), 1);
    let back = store.read_desired(&refs, None).unwrap().unwrap();
    assert!(back.deletions.is_empty());
    // Byte-identical to the first publication: same tree.
    assert_eq!(back.plane.commit.tree, first.plane.commit.tree);
}

#[test]
fn an_empty_composition_is_refused_unless_allowed() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    publish_head(&store, "lab");
    repo.write("clusters/lab/resources.yaml", "resources: []\n");
    repo.commit_all("empty lab");
    let (rev, loaded) = load_at(&store, None);
    let refs = PlaneRefs::for_cluster("lab").unwrap();
    let err = store
        .publish_desired(&refs, &loaded, rev, &DesiredOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let ok = store
        .publish_desired(
            &refs,
            &loaded,
            rev,
            &DesiredOptions::default().with_allow_empty(true),
        )
        .unwrap();
    assert_eq!(ok.changes.deleting.len(), 5);
}

#[test]
fn a_cluster_with_errors_is_not_published() {
    let repo = TestRepo::homelab();
    repo.write(
        "vm/home/jumpbox.yaml",
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: jumpbox\nspec:\n  bogus: 1\n",
    );
    repo.commit_all("broken");
    let store = Store::open(repo.path()).unwrap();
    let source = store.source(None).unwrap();
    let loaded = proxops_model::load_repository(
        &source,
        &proxops_model::Registry::builtin(),
        &proxops_model::LoadOptions::default(),
    )
    .unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let err = store
        .publish_desired(&refs, &loaded, source.commit(), &DesiredOptions::default())
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert!(store.head(&refs.desired).unwrap().is_none());
}

#[test]
fn a_plane_known_to_the_caller_stands_in_only_at_the_head_it_was_read_at() {
    let repo = TestRepo::homelab();
    let store = Store::open(repo.path()).unwrap();
    let refs = PlaneRefs::for_cluster("home").unwrap();
    let options = DesiredOptions::default();
    publish_head(&store, "home");
    let stale = std::sync::Arc::new(store.read_desired(&refs, None).unwrap().unwrap());
    let path = "vm/home/jumpbox.yaml";
    let text = repo.read(path);
    repo.write(path, &text.replacen("memory: ", "memory: 3GiB # was ", 1));
    repo.commit_all("more memory");
    assert!(publish_head(&store, "home").publication.published);
    let current = std::sync::Arc::new(store.read_desired(&refs, None).unwrap().unwrap());
    let (rev, loaded) = load_at(&store, None);

    // The plane at the head is the one built on, not a second reading of it.
    let build = store
        .build_desired_over(&refs, &loaded, rev, &options, Some(&current))
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(
        build.previous.as_ref().unwrap(),
        &current
    ));
    let same = store
        .publish_desired_over(&refs, &loaded, rev, &options, Some(&current))
        .unwrap();
    assert!(!same.publication.published, "{:?}", same.changes);

    // A plane read at an older head is not taken for the head: against it the jumpbox would
    // look updated and a commit would follow.
    let build = store
        .build_desired_over(&refs, &loaded, rev, &options, Some(&stale))
        .unwrap();
    assert_eq!(
        build.previous.as_ref().unwrap().plane.commit.id,
        current.plane.commit.id
    );
    let again = store
        .publish_desired_over(&refs, &loaded, rev, &options, Some(&stale))
        .unwrap();
    assert!(!again.publication.published, "{:?}", again.changes);
    assert!(again.changes.updated.is_empty(), "{:?}", again.changes);
    assert_eq!(
        store.head(&refs.desired).unwrap(),
        Some(current.plane.commit.id)
    );
}
