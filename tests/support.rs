//! Helpers of the cross-crate end-to-end tests beyond `proxops-test-support`'s: the `proxops`
//! binary, plain HTTP requests to a loopback port, the compat example's storages.

// Test support: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

pub use proxops_test_support::{
    ChildGuard, copy_tree, example, free_port, git, git_output, python, shared, wait_for_port,
};

/// A script under `tests/python/`.
pub fn python_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// The `proxops` binary. Cargo builds another package's binary for neither
/// `cargo test -p proxops-e2e` nor nextest, so it is built here when it is missing or older than
/// a source of the workspace's crates (`PROXOPS_BIN` names a binary to use as it is).
pub fn proxops_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("PROXOPS_BIN") {
            return PathBuf::from(bin);
        }
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/planes-<hash>
        let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let bin = profile_dir.join(format!("proxops{}", std::env::consts::EXE_SUFFIX));
        let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let newest = newest_source(&workspace.join("crates"))
            .max(newest_source(&workspace.join("Cargo.lock")));
        if built.is_none_or(|b| newest.is_some_and(|n| n > b)) {
            let target = profile_dir.parent().unwrap();
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build
                .args([
                    "build",
                    "-q",
                    "-p",
                    "proxops-cli",
                    "--bin",
                    "proxops",
                    "--target-dir",
                ])
                .arg(target);
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                build.arg("--release");
            }
            let status = build.status().unwrap();
            assert!(status.success() && bin.exists(), "cannot build {bin:?}");
        }
        bin
    })
}

/// The newest modification time of a file, or of the `.rs` and `.toml` files under a directory.
fn newest_source(path: &Path) -> Option<std::time::SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_file() {
        return meta.modified().ok();
    }
    let mut newest = None;
    for entry in std::fs::read_dir(path).ok()?.flatten() {
        let p = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let counts = is_dir || p.extension().is_some_and(|e| e == "rs" || e == "toml");
        if counts && p.file_name().is_some_and(|n| n != "target") {
            newest = newest.max(newest_source(&p));
        }
    }
    newest
}

/// `GET path` on a loopback port over plain HTTP/1.0; the status code and body (`None` when
/// nothing answers).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http(port, "GET", path)
}

/// `METHOD path` on a loopback port over plain HTTP/1.0, with an empty body.
pub fn http(port: u16, method: &str, path: &str) -> Option<(u16, String)> {
    http_with(port, method, path, &[])
}

/// `METHOD path` on a loopback port over plain HTTP/1.0 with `headers` (`Host` defaults to
/// `127.0.0.1:<port>`), an empty body.
pub fn http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<(u16, String)> {
    http_body(port, method, path, headers, b"")
}

/// `METHOD path` on a loopback port over plain HTTP/1.0 with `headers` (`Host` defaults to
/// `127.0.0.1:<port>`) and `body`.
pub fn http_body(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .ok()?;
    let mut head = format!("{method} {path} HTTP/1.0\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).ok()?;
    // A server may answer (413) before reading all of a large body, and close.
    let _ = stream.write_all(body);
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The shared compat example's cluster with the storages its manifests use beyond a fresh PVE
/// install's, declared as the cluster config's `simulation.storages` would (the example must
/// not be edited): VM disks go on `vm_disks`, an LVM-thin pool the administrator added, and
/// container root volumes on `local`, which such a cluster has enabled for container volumes
/// besides the installer's iso, vztmpl, backup and import.
pub fn with_compat_storages(cluster: &proxops_model::Cluster) -> proxops_model::Cluster {
    use proxops_model::config::{ContentType::*, SimStorage, StorageType};
    let storage = |name: &str, kind, content: &[proxops_model::config::ContentType]| {
        SimStorage::new(name, kind, content.to_vec())
    };
    let mut cluster = cluster.clone();
    let entry = cluster
        .entry
        .as_mut()
        .expect("the compat example's cluster has a config");
    entry.simulation.get_or_insert_default().storages.extend([
        storage(
            "local",
            StorageType::Dir,
            &[Iso, Vztmpl, Backup, Import, Rootdir],
        ),
        storage("vm_disks", StorageType::Lvmthin, &[Images, Rootdir]),
    ]);
    cluster
}

/// A client of `sim` as `root@pam` with the password the e2e simulators give it, pinned to
/// the simulator's certificate.
pub fn root_password_client(sim: &proxops_pve_sim::SimHandle) -> proxops_pve::PveClient {
    proxops_pve::PveClient::builder(
        sim.base_url(),
        proxops_pve::Credentials::password("root@pam", "root-password"),
    )
    .tls(proxops_pve::TlsVerification::Fingerprint(
        sim.fingerprint.parse().unwrap(),
    ))
    .build()
    .unwrap()
}

/// A temporary git repository holding the homelab example, and a simulator state file: the
/// site of the planes and references tests (each adds its own methods).
pub struct Lab {
    pub repo: proxops_test_support::TestRepo,
    pub state: tempfile::TempDir,
}

impl Lab {
    pub fn new() -> Lab {
        Lab {
            repo: proxops_test_support::TestRepo::homelab(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.repo.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.repo.git(args)
    }

    /// `proxops ARGS --repo <repo>`.
    pub fn proxops(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(proxops_bin())
            .args(args)
            .arg("--repo")
            .arg(self.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// Commits every change of the work tree.
    /// `proxops apply --yes --cluster CLUSTER` with `extra`, on the cluster's persistent
    /// simulator (`--backend sim --sim-state <state>/<cluster>.json`).
    pub fn apply_on(&self, cluster: &str, extra: &[&str]) -> std::process::Output {
        let state = self.state.path().join(format!("{cluster}.json"));
        let mut args = vec!["apply", "--yes", "--cluster", cluster, "--backend", "sim"];
        args.extend(["--sim-state", state.to_str().unwrap()]);
        args.extend(extra);
        self.proxops(&args)
    }

    pub fn commit(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// The files of `branch` under `dir`.
    pub fn files(&self, branch: &str, dir: &str) -> Vec<String> {
        self.git(&["ls-tree", "-r", "--name-only", branch, "--", dir])
            .lines()
            .map(str::to_owned)
            .collect()
    }
}
