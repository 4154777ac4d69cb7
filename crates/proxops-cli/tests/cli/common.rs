//! Helpers the CLI test binaries share.
// Each test binary uses only some of these.
#![allow(dead_code)]

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

/// The example repository.
pub fn homelab() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/homelab")
}

/// Kills the child when dropped.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `proxops sim` server seeded from the example's lab cluster, with `extra` arguments: the
/// running process, its URL without the API path, and its certificate's fingerprint.
pub fn lab_sim(extra: &[&str]) -> (Running, String, String) {
    use std::io::BufRead;
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("proxops"))
        .args(["sim", "--listen", "127.0.0.1:0"])
        .args(extra)
        .args(["--cluster", "lab", "--seed-repo"])
        .arg(homelab())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Running(child);
    let mut stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    let lines: Vec<String> = (&mut stdout).lines().take(3).map(Result::unwrap).collect();
    // Keep the pipe open while the server runs: it must be able to print.
    std::mem::forget(stdout);
    let url = lines[0]
        .strip_prefix("url: ")
        .and_then(|u| u.strip_suffix("/api2/json"))
        .unwrap()
        .to_owned();
    let fingerprint = lines[1].strip_prefix("fingerprint: ").unwrap().to_owned();
    (server, url, fingerprint)
}
