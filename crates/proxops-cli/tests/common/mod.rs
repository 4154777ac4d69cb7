//! Helpers the CLI test binaries share.

use std::path::{Path, PathBuf};

/// Writes `text` to `root/rel`, creating its directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
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

/// A tool the test setup installs (`scripts/pyenv` for sops, Debian's age); `None` with a message
/// when absent, a failure under `CI=true`.
pub fn tool(path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing (scripts/pyenv and .ci/run install it)",
        path.display()
    );
    eprintln!("skipping: {} is absent", path.display());
    None
}
