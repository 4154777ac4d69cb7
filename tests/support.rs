//! Helpers for the cross-crate end-to-end tests: where the shared reference documents and the
//! workspace's examples are.

use std::path::{Path, PathBuf};

/// A path under `<workspace>/../shared`, or `None` (with a message) when it is absent, as in a
/// user's fresh clone. Under `PROXOPS_REQUIRE_SHARED=1` (CI) absence is a failure.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared")
        .join(rel);
    if path.exists() {
        return Some(path);
    }
    if std::env::var("PROXOPS_REQUIRE_SHARED").as_deref() == Ok("1") {
        // A failure, not a skip: CI promises the shared documents are present.
        eprintln!("required shared path {} is missing", path.display());
        std::process::exit(101);
    }
    eprintln!("skipping: {} is absent", path.display());
    None
}

/// A path under the workspace's `examples/`.
pub fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(rel)
}

/// Copies a directory tree.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
