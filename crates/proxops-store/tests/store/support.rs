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
