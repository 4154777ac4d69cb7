//! Temporary repositories driven with the git CLI.
#![allow(dead_code)] // each test module uses a different part

use std::path::Path;

pub use proxops_test_support::{TestRepo, git, git_output};

/// Loads the repository at `rev` (default HEAD) through the store.
pub fn load_at(
    store: &proxops_store::Store,
    rev: Option<&str>,
) -> (proxops_store::ObjectId, proxops_model::Repository) {
    let source = store.source(rev).unwrap();
    let loaded = proxops_model::load_repository(
        &source,
        &proxops_model::Registry::builtin(),
        &proxops_model::LoadOptions::default(),
    )
    .unwrap();
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    (source.commit(), loaded)
}

/// Publishes the desired plane of `cluster` from the source at HEAD.
pub fn publish_head(
    store: &proxops_store::Store,
    cluster: &str,
) -> proxops_store::DesiredPublication {
    let (rev, loaded) = load_at(store, None);
    let refs = proxops_store::PlaneRefs::for_cluster(cluster).unwrap();
    store
        .publish_desired(
            &refs,
            &loaded,
            rev,
            &proxops_store::DesiredOptions::default(),
        )
        .unwrap()
}

/// Removes a manifest from the work tree and from its cluster's composition.
pub fn remove_resource(repo: &TestRepo, cluster: &str, manifest: &str) {
    std::fs::remove_file(repo.path().join(manifest)).unwrap();
    let compo_path = format!("clusters/{cluster}/resources.yaml");
    let compo = repo.read(&compo_path);
    let line = format!("  - ../../{manifest}\n");
    assert!(compo.contains(&line), "{compo}");
    repo.write(&compo_path, &compo.replace(&line, ""));
}

/// `git fsck --strict` passes.
pub fn assert_fsck_clean(dir: &Path) {
    let out = git_output(dir, &["fsck", "--strict", "--no-dangling"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "git fsck: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file of a plane branch, read with the git CLI, parses as YAML; returns path -> value.
pub fn cli_documents(
    dir: &Path,
    branch: &str,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    for path in git(dir, &["ls-tree", "-r", "--name-only", branch]).lines() {
        let text = git(dir, &["show", &format!("{branch}:{path}")]);
        let value = proxops_store::canonical::parse_yaml(&text)
            .unwrap_or_else(|e| panic!("{branch}:{path} does not parse: {e}\n{text}"));
        // Canonical: writing the parsed value again gives the same bytes.
        assert_eq!(proxops_store::canonical::to_yaml(&value), text, "{path}");
        out.insert(path.to_owned(), value);
    }
    out
}
