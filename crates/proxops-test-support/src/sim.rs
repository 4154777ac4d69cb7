//! Clients of a started simulator, pinned to its certificate as a user pins a PVE node's.

use proxops_pve::{ClientBuilder, Credentials, Fingerprint, PveClient, TlsVerification};
use proxops_pve_sim::SimHandle;
use std::time::Duration;

/// How long a test's request may take before it fails.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The simulator's API token as client credentials.
pub fn token(sim: &SimHandle) -> Credentials {
    Credentials::parse_token(&sim.token.to_string()).unwrap()
}

/// A PVE client builder for `sim` with `credentials`, its certificate pinned and a test's
/// timeout; the caller adds what else it needs.
pub fn client_builder(sim: &SimHandle, credentials: Credentials) -> ClientBuilder {
    PveClient::builder(sim.base_url(), credentials)
        .tls(TlsVerification::Fingerprint(pin(&sim.fingerprint)))
        .timeout(TIMEOUT)
}

/// A PVE client for `sim` with its token, its certificate pinned.
pub fn client(sim: &SimHandle) -> PveClient {
    client_builder(sim, token(sim)).build().unwrap()
}

/// A plain HTTPS client (for requests the PVE client does not make) that accepts exactly the
/// certificate with `fingerprint`, checked as the PVE client checks a pin. It keeps the TLS
/// details, so a response's `reqwest::tls::TlsInfo` names the certificate presented.
pub fn https_client(fingerprint: &str) -> reqwest::Client {
    let tls = TlsVerification::Fingerprint(pin(fingerprint))
        .client_config()
        .unwrap();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .tls_info(true)
        .timeout(TIMEOUT)
        .build()
        .unwrap()
}

/// Node `name` with a fresh PVE install's storages: `local` (dir, for files and backups) and
/// `local-lvm` (LVM-thin, for disks and container volumes).
pub fn node_with_default_storages(name: &str) -> proxops_pve_sim::Node {
    let storage = |storage: &str, kind: &str, content: &[&str]| proxops_pve_sim::Storage {
        storage: storage.into(),
        kind: kind.into(),
        content: content.iter().map(|c| (*c).to_owned()).collect(),
        ..proxops_pve_sim::Storage::default()
    };
    proxops_pve_sim::Node {
        node: name.into(),
        storages: vec![
            storage(
                "local",
                "dir",
                &["iso", "vztmpl", "import", "backup", "snippets"],
            ),
            storage("local-lvm", "lvmthin", &["images", "rootdir"]),
        ],
        ..proxops_pve_sim::Node::default()
    }
}

/// The volume ids the simulator holds for guest `vmid`, sorted.
pub fn volumes_of(sim: &SimHandle, vmid: u32) -> Vec<String> {
    let mut v: Vec<String> = sim
        .state()
        .volumes
        .iter()
        .filter(|v| v.vmid == Some(vmid))
        .map(|v| v.volid.clone())
        .collect();
    v.sort();
    v
}

fn pin(fingerprint: &str) -> Fingerprint {
    fingerprint
        .parse()
        .unwrap_or_else(|e| panic!("fingerprint {fingerprint}: {e}"))
}
