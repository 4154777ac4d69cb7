//! Temporary repositories driven with the git CLI.
#![allow(dead_code)] // each test module uses a different part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The homelab example shipped with the workspace.
pub fn homelab() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/homelab")
}

/// Runs git in `dir` and returns its standard output; panics when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs git in `dir` and returns everything it did.
pub fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap()
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A git repository holding a copy of the homelab example, committed on `main`.
pub struct TestRepo {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
}

impl TestRepo {
    /// The homelab example, committed once.
    pub fn homelab() -> TestRepo {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&homelab(), dir.path());
        git(dir.path(), &["init", "-q", "-b", "main"]);
        git(dir.path(), &["add", "-A"]);
        git(dir.path(), &["commit", "-q", "-m", "homelab"]);
        TestRepo { dir }
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file of the work tree.
    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Reads a file of the work tree.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Commits everything and returns the new commit id.
    pub fn commit_all(&self, message: &str) -> String {
        git(self.path(), &["add", "-A"]);
        git(
            self.path(),
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        self.head()
    }

    /// `git rev-parse HEAD`.
    pub fn head(&self) -> String {
        git(self.path(), &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// Runs git here.
    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }
}

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
