//! What the ProxOps test binaries share, once instead of a copy per crate: where the workspace,
//! its examples and the shared reference material (`../shared`) are, tools a test may need,
//! temporary git repositories, child processes that die with the test, and (features) a tiny
//! HTTP file server and simulators with clients pinned to their certificates.
//!
//! A dev-dependency only: no library crate of the workspace may depend on it normally.

// Test support: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "files")]
mod files;
mod git;
mod process;
#[cfg(feature = "sim")]
pub mod sim;

#[cfg(feature = "files")]
pub use files::{FileServer, serve_files};
pub use git::{TestRepo, git, git_command, git_output};
pub use process::{ChildGuard, SimProcess, free_port, wait_for_port};

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A path under the shared reference material (`<workspace>/../shared`), or `None` after a
/// message naming it when it is absent, as in a user's fresh clone. Under
/// `PROXOPS_REQUIRE_SHARED=1` (CI) absence fails the test.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let path = workspace().join("../shared").join(rel);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("PROXOPS_REQUIRE_SHARED").as_deref() != Ok("1"),
        "PROXOPS_REQUIRE_SHARED=1 but {} is missing",
        path.display()
    );
    eprintln!("skipping: {} is absent", path.display());
    None
}

/// A path under the workspace's `examples/`.
pub fn example(rel: &str) -> PathBuf {
    workspace().join("examples").join(rel)
}

/// The homelab example repository.
pub fn homelab() -> PathBuf {
    example("homelab")
}

/// A tool the test setup installs (`scripts/pyenv` for sops, Debian's age); `None` after a
/// message when absent, a failure under `CI=true`, where `.ci/run` installs it.
pub fn tool(path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing (CI=true; scripts/pyenv and .ci/run install it)",
        path.display()
    );
    eprintln!(
        "skipping: {} is absent (run ./scripts/pyenv)",
        path.display()
    );
    None
}

/// The Python of `scripts/pyenv` (or `$PROXOPS_PYTHON`), with proxmoxer, fakepve and sops: as
/// [`tool`], `None` after a message when absent, a failure under `CI=true`.
pub fn python() -> Option<PathBuf> {
    tool(
        std::env::var_os("PROXOPS_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/pyenv/bin/python")),
    )
}

/// The sops of `scripts/pyenv` (or `$PROXOPS_SOPS`): as [`tool`].
pub fn sops() -> Option<PathBuf> {
    tool(
        std::env::var_os("PROXOPS_SOPS")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/pyenv/bin/sops")),
    )
}

/// Debian's `age-keygen` (`/usr/bin`, else the first on `PATH`): as [`tool`].
pub fn age_keygen() -> Option<PathBuf> {
    let usr_bin = PathBuf::from("/usr/bin/age-keygen");
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("age-keygen"))
            .find(|p| p.is_file())
    });
    tool(
        Some(usr_bin.clone())
            .filter(|p| p.is_file())
            .or(on_path)
            .unwrap_or(usr_bin),
    )
}

/// Writes `text` to `root/rel`, creating its directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a file has a parent")).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Copies a directory tree.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
