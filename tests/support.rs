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

/// The Python of `scripts/pyenv` (or `$PROXOPS_PYTHON`), with proxmoxer, fakepve and sops; `None`
/// (with a message) when it is absent. Under `CI=true` absence is a failure: `scripts/test`
/// installs it there.
pub fn python() -> Option<PathBuf> {
    let path = std::env::var_os("PROXOPS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pyenv/bin/python")
        });
    if path.exists() {
        return Some(path);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        eprintln!(
            "the test Python {} is missing (run ./scripts/pyenv)",
            path.display()
        );
        std::process::exit(101);
    }
    eprintln!(
        "skipping: {} is absent (run ./scripts/pyenv)",
        path.display()
    );
    None
}

/// A script under `tests/python/`.
pub fn python_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// A loopback port that was free a moment ago (for servers that cannot report the port they
/// bound themselves).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until something accepts connections on the loopback port, for at most `limit`.
pub fn wait_for_port(port: u16, limit: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A child process that is killed when dropped.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
