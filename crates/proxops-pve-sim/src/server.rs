//! Starting and stopping the HTTPS server: [`start`] binds, generates the certificate and serves
//! the API; [`SimHandle`] gives the address, URL, fingerprint, token, counters, journal, state
//! and shutdown.

use axum::Router;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::{AbortHandle, JoinHandle};

use crate::config::{ApiToken, SimConfig};

use crate::error::SimError;
use crate::journal::{Journal, JournalEntry};
use crate::reset::KillAcceptor;
use crate::state::State;
use crate::{dispatch, rng, tls};

/// The largest request body the simulator reads: an upload is held in memory while its task
/// runs (PVE streams it to a temporary file instead), so it is bounded at 1 GiB.
const UPLOAD_LIMIT: usize = 1 << 30;

/// Locks a mutex, tolerating poisoning (a panicked holder must not take the simulator down).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What every request handler shares.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub config: SimConfig,
    /// Faults and task durations in force (changeable while running).
    pub faults: Mutex<crate::config::FaultConfig>,
    pub durations: Mutex<crate::config::TaskDurations>,
    pub fingerprint: String,
    pub ticket_secret: Vec<u8>,
    pub counters: Mutex<BTreeMap<String, u64>>,
    /// The write requests answered, newest 10,000 ([`Journal`]).
    pub journal: Mutex<Journal>,
    pub task_counts: Mutex<BTreeMap<String, u64>>,
    pub kills: Arc<Mutex<HashMap<SocketAddr, Arc<AtomicBool>>>>,
    pub running: Mutex<HashMap<String, AbortHandle>>,
    /// Guests' config locks (pve-guest-common `lock_config`), by vmid.
    pub config_locks: Mutex<HashMap<u32, Arc<tokio::sync::Mutex<()>>>>,
    pub http: reqwest::Client,
    pub started: std::time::Instant,
}

impl Shared {
    /// Saves the state when a state file is configured; a failed save is kept for the handle.
    pub fn persist(&self, st: &State) {
        if let Some(path) = &self.config.state_file {
            let _ = st.save(path);
        }
    }
}

/// A running simulator.
pub struct SimHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// SHA-256 of the certificate's DER, `AA:BB:...` (what PVE clients pin).
    pub fingerprint: String,
    /// The accepted API token (every privilege on `/`).
    pub token: ApiToken,
    /// The certificate in PEM form (for clients that add it as a root instead of pinning).
    pub cert_pem: String,
    /// The certificate in DER form.
    pub cert_der: Vec<u8>,
    shared: Arc<Shared>,
    server: axum_server::Handle,
    join: JoinHandle<std::io::Result<()>>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle")
            .field("addr", &self.addr)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// Starts a simulator on the configured address (in the current tokio runtime).
pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    names.extend(config.cert_names.iter().cloned());
    let identity = tls::generate(names)?;
    let fingerprint = tls::fingerprint(&identity.cert_der);

    let listener =
        std::net::TcpListener::bind(config.listen).map_err(|e| SimError::Bind(config.listen, e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| SimError::Bind(config.listen, e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| SimError::Bind(config.listen, e))?;

    let http = download_client()?;
    let kills = Arc::new(Mutex::new(HashMap::new()));
    let mut state = config.state.clone();
    if state.cluster_name.is_empty() {
        state.cluster_name = "sim".into();
    }
    state.pve_version = config.pve_version;
    // The configured users and grants join those a saved state already holds.
    for user in &config.users {
        state
            .users
            .entry(user.userid.clone())
            .or_insert_with(|| crate::state::UserAccount {
                enable: true,
                password_sha256: Some(crate::state::UserAccount::hash(&user.password)),
                ..Default::default()
            });
    }
    for entry in &config.acl {
        if !state.acl.contains(entry) {
            state.acl.push(entry.clone());
        }
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        config: config.clone(),
        faults: Mutex::new(config.faults.clone()),
        durations: Mutex::new(config.task_durations.clone()),
        fingerprint: fingerprint.clone(),
        ticket_secret: rng::os_random_bytes(32).map_err(|e| SimError::Random(e.to_string()))?,
        counters: Mutex::new(BTreeMap::new()),
        journal: Mutex::new(Journal::default()),
        task_counts: Mutex::new(BTreeMap::new()),
        kills: kills.clone(),
        running: Mutex::new(HashMap::new()),
        config_locks: Mutex::new(HashMap::new()),
        http,
        started: std::time::Instant::now(),
    });
    // Tasks that were running when a state was saved never finish: close them as PVE would
    // after a restart of its daemon.
    {
        let mut st = lock(&shared.state);
        for t in st.tasks.iter_mut().filter(|t| t.status == "running") {
            t.status = "stopped".into();
            t.exitstatus = Some("unexpected status".into());
            t.endtime = Some(t.starttime);
        }
    }

    // Uploads arrive whole in memory; axum's 2 MiB default would refuse an ISO. Plain bodies
    // keep PVE's own 512 KiB limit (`dispatch`).
    let app = Router::new()
        .fallback(dispatch::handle)
        .layer(axum::extract::DefaultBodyLimit::max(UPLOAD_LIMIT))
        .with_state(shared.clone());
    let server = axum_server::Handle::new();
    let acceptor = RustlsAcceptor::new(RustlsConfig::from_config(identity.config))
        .acceptor(KillAcceptor::new(kills));
    let serve = axum_server::from_tcp(listener)
        .acceptor(acceptor)
        .handle(server.clone())
        .serve(app.into_make_service_with_connect_info::<SocketAddr>());
    let join = tokio::spawn(serve);

    Ok(SimHandle {
        addr,
        fingerprint,
        token: config.token.clone(),
        cert_pem: identity.cert_pem,
        cert_der: identity.cert_der,
        shared,
        server,
        join,
    })
}

fn download_client() -> Result<reqwest::Client, SimError> {
    // download-url fetches over plain HTTP in tests; HTTPS sources are checked against no roots
    // unless verify-certificates=0 (the simulator carries no CA bundle).
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimError::Tls(e.to_string()))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| SimError::Tls(e.to_string()))
}

impl SimHandle {
    /// `https://127.0.0.1:PORT/api2/json`.
    pub fn base_url(&self) -> String {
        format!("https://{}/api2/json", self.addr)
    }

    /// `https://127.0.0.1:PORT` (where the debug endpoints `/_sim/counters`, `/_sim/journal` and
    /// `/_sim/state` live).
    pub fn root_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Request counts by `METHOD /path/{template}` (unknown paths count as `METHOD <unknown>`).
    pub fn counters(&self) -> BTreeMap<String, u64> {
        lock(&self.shared.counters).clone()
    }

    /// The count of one `(method, path template)`.
    pub fn count(&self, method: &str, template: &str) -> u64 {
        lock(&self.shared.counters)
            .get(&format!("{method} {template}"))
            .copied()
            .unwrap_or(0)
    }

    /// The total number of API requests.
    pub fn total_requests(&self) -> u64 {
        lock(&self.shared.counters).values().sum()
    }

    /// Clears the counters.
    pub fn reset_counters(&self) {
        lock(&self.shared.counters).clear();
    }

    /// The write requests (every method but GET) that reached an API handler, in the order they
    /// were answered, with the status and their parameters (secrets masked): what a client sent,
    /// for a test to compare parameter by parameter. Only the newest 10,000 are kept.
    pub fn journal(&self) -> Vec<JournalEntry> {
        lock(&self.shared.journal).entries()
    }

    /// Empties the journal (e.g. after a test has set up its cluster).
    pub fn clear_journal(&self) {
        lock(&self.shared.journal).clear();
    }

    /// A snapshot of the state.
    pub fn state(&self) -> State {
        lock(&self.shared.state).clone()
    }

    /// The state as pretty JSON.
    pub fn dump_state(&self) -> String {
        lock(&self.shared.state).to_json()
    }

    /// Changes the state in place (tests use it to stage locks, snapshots or content).
    pub fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = lock(&self.shared.state);
        let r = f(&mut st);
        self.shared.persist(&st);
        r
    }

    /// Saves the state to a file.
    pub fn save_state(&self, path: impl Into<PathBuf>) -> Result<(), SimError> {
        lock(&self.shared.state).save(&path.into())
    }

    /// Replaces the fault configuration while running (e.g. after a test has set up its cluster).
    pub fn set_faults(&self, faults: crate::config::FaultConfig) {
        *lock(&self.shared.faults) = faults;
    }

    /// Replaces the task durations while running.
    pub fn set_task_durations(&self, durations: crate::config::TaskDurations) {
        *lock(&self.shared.durations) = durations;
    }

    /// Waits until no task runs, polling every 10 ms up to `timeout`; returns whether it got there.
    pub async fn wait_tasks_idle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.tasks_running() == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether any task is still running.
    pub fn tasks_running(&self) -> usize {
        lock(&self.shared.state)
            .tasks
            .iter()
            .filter(|t| t.status == "running")
            .count()
    }

    /// Stops serving: refuses new connections, lets requests in flight finish (up to a second),
    /// aborts running tasks and saves the state when a state file is configured.
    pub async fn shutdown(self) -> Result<(), SimError> {
        self.server.graceful_shutdown(Some(Duration::from_secs(1)));
        let result = self.join.await;
        for (_, h) in lock(&self.shared.running).drain() {
            h.abort();
        }
        if let Some(path) = &self.shared.config.state_file {
            lock(&self.shared.state).save(path)?;
        }
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(SimError::Server(e.to_string())),
            Err(e) => Err(SimError::Server(e.to_string())),
        }
    }
}
