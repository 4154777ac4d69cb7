//! `proxops run`.

use super::agent_url::{control_token, read_agent_config};
use crate::error::CommandError;
use crate::session::{BackendArgs, BackendKind, RepoArgs, repo_dir, runtime};
use proxops_agent::hooks::Receivers;
use proxops_agent::notify::ConfiguredSinks;
use proxops_agent::{Agent, AgentBackend, AgentOptions, PassHook, SourceLocation};
use proxops_model::config::{ConfigFile, parse_duration};
use proxops_model::settings::agent::{AgentFiles, AgentFlags, agent_settings};
use proxops_model::{FsSource, read_config_file};
use proxops_store::GitToken;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The variable holding the HTTPS token of a remote repository.
const GIT_TOKEN_ENV: &str = "PROXOPS_GIT_TOKEN";

/// Run the agent: reconcile every cluster each interval, until SIGTERM or Ctrl-C.
///
/// Each pass reads the repository (the local work tree's HEAD commit, or a remote branch
/// fetched into the data directory), then reconciles the clusters in parallel, each under a
/// lease so that two agents never reconcile one cluster at once, recording every cycle in the
/// git planes. An HTTP endpoint serves /healthz, /readyz, /metrics (Prometheus) and /status,
/// a web dashboard at / (live, its actions behind the token), and the control API of
/// `proxops reconcile`, `suspend` and `resume`. On SIGTERM or SIGINT no
/// new action starts; actions in flight get --shutdown-timeout to end; leases are given back.
///
/// Settings come from, lowest first: built-in defaults, the repository's `proxops.yaml` (local
/// repositories), the agent configuration file (`--config`: `git.url`, `git.branch`,
/// `git.token`, `git.path`, `listen`, `data-dir`, `reconcile.poll-interval`,
/// `reconcile.verify-interval`), then these flags.
/// An HTTPS remote that asks for authentication gets the token of $PROXOPS_GIT_TOKEN, else
/// `git.token`, as the password (through git's credential mechanism; never written to the
/// clone's `.git/config`); a URL carrying a credential is shown redacted, with a warning.
///
/// Signed webhook receivers (`agent.webhooks`: GitHub, GitLab, Gitea/Forgejo, generic) serve
/// `POST /v1/hooks/<forge>`: a push to the followed branch (with a local repository, any push
/// notice) runs a pass at once. Events (failures, recoveries, drift, anomalies, deferred
/// prunes, waiting resources, lease takeovers, an invalid repository) go to the sinks of
/// `notifications:` (this file's, else the repository's; a cluster's entry overrides them) and
/// commit statuses to the forge, off the reconcile path.
///
/// The control API (`proxops reconcile`, `suspend`, `resume`) needs a bearer token, read from
/// --token-file, else $PROXOPS_AGENT_TOKEN, else the file `agent.token-file` or the variable
/// `agent.token-env` of the agent configuration (then of `proxops.yaml`). Without a token the
/// control routes refuse every request, and --listen must be a loopback address. Control
/// requests must be addressed to the agent itself (`Host`) and carry no foreign `Origin`, so
/// that no web page can steer the agent.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// An agent configuration file (the `proxops.yaml` shape; see packaging/debian/agent.yaml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Follow a remote repository instead of a local work tree (`--repo`, default: `git.path`,
    /// else the one holding the current directory); default: `git.url`. Cloned into the data
    /// directory, fetched each pass.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The branch of the remote repository to follow (default: `git.branch`, else main).
    #[arg(long, value_name = "BRANCH")]
    pub branch: Option<String>,
    /// Only this cluster (repeatable).
    #[arg(long = "cluster", value_name = "C")]
    pub clusters: Vec<String>,
    /// Time between passes, e.g. `30s`, `5m`, jittered by ±10% (default:
    /// `reconcile.poll-interval`, else 30s).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub interval: Option<Duration>,
    /// Time between verifications of every cluster (`proxops verify`, between passes: reads
    /// only; drift stays in /status, /metrics and the dashboard until a cycle or verification
    /// finds it in sync), e.g. `15m`, jittered by ±10% (default: `reconcile.verify-interval`,
    /// else none).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub verify_interval: Option<Duration>,
    /// Address of the HTTP endpoint (default: `listen`, else 127.0.0.1:9494). Any address but
    /// a loopback one needs a control token.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// A file holding the control API's bearer token (default: $PROXOPS_AGENT_TOKEN, else
    /// `agent.token-file` or `agent.token-env`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Where the agent keeps its clone of a remote repository and its suspensions (default:
    /// `data-dir`, else `proxops` in a local repository's git directory, else `proxops-agent`
    /// under the current directory).
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

/// The agent configuration file, or the repository's `proxops.yaml`, read with diagnostics.
pub(crate) fn read_config(dir: &Path, file: &str) -> Result<Option<ConfigFile>, CommandError> {
    if !dir.join(file).is_file() {
        return Ok(None);
    }
    let source = FsSource::new(dir)
        .map_err(|e| CommandError::io(format!("cannot open {}", dir.display()), e))?;
    let (config, diagnostics) = read_config_file(&source, file);
    for d in &diagnostics {
        eprintln!("{:?}", miette::Report::new(d.to_miette()));
    }
    config.map(Some).ok_or_else(|| {
        CommandError::config(format!(
            "{} is not a usable configuration",
            dir.join(file).display()
        ))
        .hint("fix the problems above")
    })
}

/// Runs `proxops run`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    // Checked here, not by clap: `--repo` is global, and clap sees no conflict between a flag
    // given before the subcommand and one of the subcommand's.
    if repo.dir.is_some() && args.url.is_some() {
        return Err(CommandError::usage(
            "--repo and --url name two repositories",
            Some("give --repo for a local work tree, or --url for a remote".into()),
        ));
    }
    let (file, file_dir) = match &args.config {
        Some(path) => {
            let (config, dir) = read_agent_config(path)?;
            (Some(config), dir)
        }
        None => (None, PathBuf::from(".")),
    };
    let git = file
        .as_ref()
        .and_then(|c| c.git.clone())
        .unwrap_or_default();
    let url = args.url.clone().or(git.url.clone());
    let (source, repo_config, default_data_dir, repo_dir_of) = match url {
        Some(url) => (
            SourceLocation::Remote {
                url,
                branch: args
                    .branch
                    .clone()
                    .or(git.branch.clone())
                    .unwrap_or_else(|| "main".to_owned()),
                // The environment wins over the configuration file, which better not hold it.
                token: std::env::var(GIT_TOKEN_ENV)
                    .ok()
                    .or(git.token.clone())
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| GitToken::new(&t)),
            },
            None,
            PathBuf::from("proxops-agent"),
            None,
        ),
        None => {
            let repo = repo
                .dir
                .clone()
                .or_else(|| git.path.as_ref().map(|p| file_dir.join(p)));
            let dir = repo_dir(repo.as_deref())?;
            let store = crate::session::open_store(&dir)?;
            let repo_config = read_config(&dir, "proxops.yaml")?;
            let data_dir = store.git_dir().join("proxops");
            (
                SourceLocation::Local(dir.clone()),
                repo_config,
                data_dir,
                Some(dir),
            )
        }
    };
    // Flags, then the agent configuration file, then the repository's proxops.yaml.
    let files = AgentFiles::new(
        file.as_ref().map(|c| (c, file_dir.as_path())),
        repo_config.as_ref().zip(repo_dir_of.as_deref()),
    );
    let flags = AgentFlags::new(
        args.interval,
        args.verify_interval,
        args.listen,
        args.data_dir.clone(),
    );
    let settings = agent_settings(&flags, &files, default_data_dir)
        .map_err(|e| CommandError::usage(e.to_string(), None))?;
    let token_config = files.agent_file();
    let token = control_token(args.token_file.as_deref(), token_config)?;
    let webhooks = match token_config {
        Some((c, dir)) => match c.agent.as_ref().and_then(|a| a.webhooks.as_ref()) {
            Some(w) => Some(Receivers::from_config(w, dir).map_err(|e| {
                CommandError::usage(e.to_string(), Some("see `agent.webhooks`".into()))
            })?),
            None => None,
        },
        None => None,
    };
    let mut options = AgentOptions::new(source, settings.data_dir);
    options.token = token;
    options.webhooks = webhooks;
    // The agent configuration's sinks win over the repository's, which the agent reads at
    // every pass (with the clusters' own).
    options.notifications = file
        .as_ref()
        .and_then(|c| c.notifications.clone())
        .map(|sinks| ConfiguredSinks::new(sinks, file_dir.clone()));
    options.clusters = args.clusters.clone();
    options.interval = settings.interval;
    options.verify_interval = settings.verify_interval;
    options.listen = settings.listen;
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
    options.after_pass = Some(PassHook::new(|| {
        let released = crate::memory::release_freed_memory();
        tracing::debug!(released, "freed memory handed back after the pass");
    }));
    let runtime = runtime()?;
    runtime
        .block_on(async {
            let agent = Agent::bind(options.clone())
                .await
                .map_err(CommandError::from)?;
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
            Ok::<_, CommandError>(agent.run(stop_rx).await)
        })
        .map(|status| {
            // A repository that could not be read reconciled nothing: not a success.
            let clean = status.source.error.is_none()
                && status
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
