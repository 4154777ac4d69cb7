//! Shared test support: a simulator with a pinned client, the shared-data and Python lookups
//! (skip with a message, fail under `PROXOPS_REQUIRE_SHARED=1` / `CI=true`), and a tiny HTTP file
//! server for download-url.

use proxops_pve::{Credentials, GuestRef, PveClient, RetryPolicy, TlsVerification, WaitOptions};
use proxops_pve_sim::{SimConfig, SimHandle, TaskDurations, User, Volume, start};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub const PASSWORD: &str = "s3cret";
pub const CT_TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// Fast tasks and a password user.
pub fn config() -> SimConfig {
    SimConfig {
        task_durations: TaskDurations::uniform(Duration::from_millis(40)),
        users: vec![User {
            userid: "root@pam".into(),
            password: PASSWORD.into(),
        }],
        ..SimConfig::default()
    }
}

/// Quick retries for tests (bounded, seeded).
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(6)
        .with_base_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_millis(40))
        .with_seed(Some(42))
}

/// A client for a simulator: token auth, fingerprint pin, fast retries.
pub fn client(h: &SimHandle) -> PveClient {
    client_with(h, fast_retry())
}

pub fn client_with(h: &SimHandle, retry: RetryPolicy) -> PveClient {
    PveClient::builder(
        h.base_url(),
        Credentials::parse_token(&h.token.to_string()).unwrap(),
    )
    .tls(TlsVerification::Fingerprint(h.fingerprint.parse().unwrap()))
    .timeout(Duration::from_secs(20))
    .retry(retry)
    .build()
    .unwrap()
}

pub struct Sim {
    pub h: SimHandle,
    pub c: PveClient,
}

impl Sim {
    pub async fn start() -> Sim {
        Sim::with(config()).await
    }

    pub async fn with(cfg: SimConfig) -> Sim {
        let h = start(cfg).await.unwrap();
        let c = client(&h);
        Sim { h, c }
    }

    /// Adds an LXC template volume to `local` on pve1.
    pub fn add_ct_template(&self) {
        self.h.with_state(|st| {
            st.volumes.push(Volume {
                node: "pve1".into(),
                storage: "local".into(),
                volid: CT_TEMPLATE.into(),
                content: "vztmpl".into(),
                format: "tzst".into(),
                size: 120 << 20,
                ..Default::default()
            })
        });
    }

    /// Creates a VM and waits for it.
    pub async fn create_vm(&self, vmid: u32, cfg: &[(&str, &str)]) -> GuestRef {
        let g = GuestRef::qemu("pve1", vmid);
        let upid = self.c.create_guest(&g, &map(cfg)).await.unwrap();
        self.c.wait_task(&upid, &wait()).await.unwrap();
        g
    }
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A bounded wait for tests.
pub fn wait() -> WaitOptions {
    WaitOptions::default()
        .timeout(Duration::from_secs(20))
        .with_first_poll(Duration::from_millis(10))
        .with_max_poll(Duration::from_millis(100))
}

fn required(var: &str, value: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == value)
}

/// `../shared` next to the workspace (CI has it there). `None` (after a message) when absent,
/// a failure when `PROXOPS_REQUIRE_SHARED=1`.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared")
        .join(rel);
    if path.exists() {
        return Some(path);
    }
    if required("PROXOPS_REQUIRE_SHARED", "1") {
        panic!("{} is missing (PROXOPS_REQUIRE_SHARED=1)", path.display());
    }
    eprintln!("skipping: {} is missing", path.display());
    None
}

/// The Python of `scripts/pyenv` (or `$PROXOPS_PYTHON`); `None` after a message when absent, a
/// failure under `CI=true`.
pub fn python() -> Option<PathBuf> {
    let path = std::env::var_os("PROXOPS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv/bin/python")
        });
    if path.exists() {
        return Some(path);
    }
    if required("CI", "true") {
        panic!(
            "{} is missing (CI=true); run ./scripts/pyenv",
            path.display()
        );
    }
    eprintln!(
        "skipping: {} is missing (run ./scripts/pyenv)",
        path.display()
    );
    None
}

/// A tiny HTTP/1.1 file server on 127.0.0.1 (one request per connection); aborted on drop.
pub struct FileServer {
    pub base: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve_files(files: HashMap<String, Vec<u8>>) -> FileServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let files = Arc::new(files);
    let task = tokio::spawn(async move {
        for _ in 0..32 {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let files = files.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let resp = match files.get(&path) {
                    Some(body) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = sock.write_all(&resp).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    FileServer { base, task }
}
