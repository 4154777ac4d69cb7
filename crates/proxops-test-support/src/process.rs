//! Child processes that die with the test, loopback ports, and a `proxops sim` server.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A child process that is killed (and reaped) when dropped.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port that was free a moment ago (for servers that cannot report the port they
/// bound themselves).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// Waits until something accepts connections on the loopback port, for at most `limit`.
pub fn wait_for_port(port: u16, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A running `proxops sim` server, as its first three lines of output describe it.
pub struct SimProcess {
    /// The server; killed when this is dropped.
    pub child: ChildGuard,
    /// Its URL without the API path (`https://127.0.0.1:<port>`), as a cluster's `base-url`.
    pub url: String,
    /// Its certificate's SHA-256 fingerprint, in PVE's `AA:BB:…` form.
    pub fingerprint: String,
    /// The API token it accepts (`user@realm!name=secret`).
    pub token: String,
}

impl SimProcess {
    /// Spawns `sim` (a `proxops sim --listen 127.0.0.1:0 …` command) and reads what it prints
    /// once it listens. Its standard output stays open while it runs (it must be able to
    /// print); its standard error is discarded.
    pub fn spawn(mut sim: Command) -> SimProcess {
        let mut child = ChildGuard(
            sim.stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut stdout = std::io::BufReader::new(child.0.stdout.take().expect("piped"));
        let lines: Vec<String> = (&mut stdout).lines().take(3).map(Result::unwrap).collect();
        std::mem::forget(stdout);
        let field = |i: usize, name: &str| -> String {
            lines
                .get(i)
                .and_then(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("`proxops sim` printed {lines:?}, not {name}…"))
                .to_owned()
        };
        let api = field(0, "url: ");
        let url = api
            .strip_suffix("/api2/json")
            .unwrap_or_else(|| panic!("`proxops sim` printed url {api}"))
            .to_owned();
        SimProcess {
            url,
            fingerprint: field(1, "fingerprint: "),
            token: field(2, "token: "),
            child,
        }
    }

    /// A cluster config (`clusters/<cluster>/config.yaml`) pointing `cluster` on `nodes` at
    /// this server.
    pub fn cluster_config(&self, cluster: &str, nodes: &str) -> String {
        format!(
            "pve:\n  clusters:\n    {cluster}:\n      base-url: {}\n      fingerprint: {}\n      nodes: {nodes}\n",
            self.url, self.fingerprint
        )
    }
}
