//! Temporary repositories driven with the git CLI, with a fixed identity and no user
//! configuration, so that a developer's settings cannot change what a test sees.

use std::path::Path;

/// A git command in `dir` with that identity and no system or user configuration; the
/// caller adds arguments (and, for fixed commit ids, `GIT_*_DATE`).
pub fn git_command(dir: &Path) -> std::process::Command {
    let mut git = std::process::Command::new("git");
    git.current_dir(dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    git
}

/// Runs git in `dir` and returns everything it did.
pub fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    git_command(dir).args(args).output().unwrap()
}

/// Runs git in `dir` and returns its standard output; fails the test when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A git repository in a temporary directory, on branch `main`.
pub struct TestRepo {
    /// Keeps the directory alive.
    pub dir: tempfile::TempDir,
}

impl TestRepo {
    /// A copy of the tree at `from`, committed once with `message`.
    pub fn copy_of(from: &Path, message: &str) -> TestRepo {
        let dir = tempfile::tempdir().unwrap();
        crate::copy_tree(from, dir.path());
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let repo = TestRepo { dir };
        repo.commit_all(message);
        repo
    }

    /// The homelab example, committed once.
    pub fn homelab() -> TestRepo {
        TestRepo::copy_of(&crate::homelab(), "homelab")
    }

    /// The work tree.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file of the work tree, creating its directories.
    pub fn write(&self, rel: &str, text: &str) {
        crate::write(self.path(), rel, text);
    }

    /// Reads a file of the work tree.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Commits everything (an empty commit when nothing changed) and returns the commit id.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.head()
    }

    /// `git rev-parse HEAD`.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// Runs git here.
    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }
}
