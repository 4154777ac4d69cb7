//! `proxops run`.

use super::repo_dir;
use crate::error::CliError;
use crate::session::{BackendArgs, BackendKind, runtime};
use proxops_engine::agent::{Agent, AgentBackend, AgentOptions, SourceLocation};
use proxops_model::config::parse_duration;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Run the agent: reconcile every cluster each interval, until SIGTERM or Ctrl-C.
///
/// Each pass reads the repository (the local work tree's HEAD commit, or a remote branch
/// fetched into the data directory), then reconciles the clusters in parallel, each under a
/// lease so that two agents never reconcile one cluster at once, recording every cycle in the
/// git planes. An HTTP endpoint serves /healthz, /readyz, /metrics (Prometheus) and /status,
/// and the control API of `proxops reconcile`, `suspend` and `resume`. On SIGTERM or SIGINT no
/// new action starts; actions in flight get --shutdown-timeout to end; leases are given back.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository, a local git work tree (default: the one holding the current directory).
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub repo: Option<PathBuf>,
    /// Follow a remote repository instead: cloned into the data directory, fetched each pass.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The branch of --url to follow.
    #[arg(long, value_name = "BRANCH", default_value = "main", requires = "url")]
    pub branch: String,
    /// Only this cluster (repeatable).
    #[arg(long = "cluster", value_name = "C")]
    pub clusters: Vec<String>,
    /// Time between passes, e.g. `30s`, `5m` (jittered by ±10%).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub interval: Duration,
    /// Address of the HTTP endpoint.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9494")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Where the agent keeps its clone of --url and its suspensions (default: `proxops` in the
    /// repository's git directory; with --url, `proxops-agent` under the current directory).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// This agent's name in cluster leases.
    #[arg(long, value_name = "NAME")]
    pub holder: Option<String>,
    /// How long a cluster lease lasts unless renewed (renewed every third of it).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = duration)]
    pub lease_ttl: Duration,
    /// How long a stop waits for actions in flight.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub shutdown_timeout: Duration,
    /// /healthz fails when a pass runs longer than this, or none ran for the interval plus this.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = duration)]
    pub stall_timeout: Duration,
    /// Clusters reconciled at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub parallel: usize,
    /// Run one pass and exit (0 when every cluster converged or applied cleanly, 1 otherwise).
    #[arg(long)]
    pub once: bool,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration such as 30s, 5m or 1h"))
}

/// Runs `proxops run`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let (source, data_dir) = match &args.url {
        Some(url) => (
            SourceLocation::Remote {
                url: url.clone(),
                branch: args.branch.clone(),
            },
            args.data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("proxops-agent")),
        ),
        None => {
            let dir = repo_dir(args.repo.as_deref())?;
            let store = crate::session::open_store(&dir)?;
            let data_dir = args
                .data_dir
                .clone()
                .unwrap_or_else(|| store.git_dir().join("proxops"));
            (SourceLocation::Local(dir), data_dir)
        }
    };
    let mut options = AgentOptions::new(source, data_dir);
    options.clusters = args.clusters.clone();
    options.interval = args.interval;
    options.listen = args.listen;
    options.backend = match args.backend.backend {
        BackendKind::Pve => AgentBackend::Pve,
        BackendKind::Sim => AgentBackend::Sim {
            state_file: args.backend.sim_state.clone(),
            task_time: Duration::from_millis(50),
        },
    };
    options.parallel_clusters = args.parallel.max(1);
    if let Some(h) = &args.holder {
        options.holder = h.clone();
    }
    options.lease_ttl = args.lease_ttl;
    options.shutdown_timeout = args.shutdown_timeout;
    options.stall_timeout = args.stall_timeout;
    options.max_passes = args.once.then_some(1);
    let runtime = runtime()?;
    runtime
        .block_on(async {
            let agent = Agent::bind(options.clone())
                .await
                .map_err(|e| CliError::Io(e.to_string()))?;
            let addr = agent.local_addr().unwrap_or(options.listen);
            eprintln!(
                "proxops agent {}: following {}, a pass every {:?}; http://{addr}/status",
                options.holder, options.source, options.interval
            );
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                wait_for_signal().await;
                eprintln!("stopping: no new actions; waiting for the ones in flight");
                let _ = stop_tx.send(true);
            });
            Ok::<_, CliError>(agent.run(stop_rx).await)
        })
        .map(|status| {
            let clean = status
                .clusters
                .iter()
                .all(|c| c.last_cycle.as_ref().is_some_and(|r| r.result.is_success()));
            if args.once && !clean {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        })
}

/// SIGTERM or SIGINT.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
