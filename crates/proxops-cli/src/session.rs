//! What diff, apply and demo share: loading the repository with its graphs, and reaching each
//! cluster's PVE (or a simulator) as the flags say.

use crate::error::CommandError;
use proxops_engine::backend::{Backend, Connection, connect_with, per_cluster_state_file};
use proxops_engine::workspace::{Workspace, WorkspaceError};
use proxops_graph::Graph;
use proxops_model::config::LogLevel;
use proxops_model::settings::{ClusterSettings, FlagSettings};
use proxops_model::source::RepoSource;
use proxops_model::{Cluster, FsSource, Registry, Repository};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The global flags that are configuration layers (`--log-level`), set once by `main`.
static FLAGS: OnceLock<FlagSettings> = OnceLock::new();

/// Records the global flags for [`Loaded::settings`].
pub fn set_flags(flags: FlagSettings) {
    let _ = FLAGS.set(flags);
}

/// The global flags given (none before `main` sets them).
pub fn flags() -> FlagSettings {
    FLAGS.get().cloned().unwrap_or_default()
}

/// `log.level` of the repository's `proxops.yaml`, if it has a readable one (a malformed file is
/// reported when the repository is loaded).
pub fn configured_log_level(repo: Option<&Path>) -> Option<LogLevel> {
    let dir = repo_dir(repo).ok()?;
    let text = std::fs::read_to_string(dir.join("proxops.yaml")).ok()?;
    proxops_model::settings::configured_log_level(&text)
}

/// `--repo`: the repository every command works on. A global flag, one for all commands, so
/// that it goes before or after the subcommand (`proxops --repo X validate`,
/// `proxops validate --repo X`) and `main` finds it without asking each command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RepoArgs {
    /// The repository (default: the git work tree of the current directory; for `run`,
    /// `git.path` first; for `demo`, examples/homelab).
    // The id is `repo`, not the field's name: `init` has a positional `dir` of its own.
    #[arg(id = "repo", long = "repo", value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
}

impl RepoArgs {
    /// The repository directory (see [`repo_dir`]).
    pub fn resolve(&self) -> Result<PathBuf, CommandError> {
        repo_dir(self.dir.as_deref())
    }
}

/// `--cluster`: the clusters of the repository a command works on.
#[derive(Debug, Clone, clap::Args)]
pub struct ClustersArgs {
    /// Only this cluster (repeatable; default: every cluster of the repository).
    #[arg(long = "cluster", value_name = "C")]
    pub names: Vec<String>,
}

/// The clusters and the backend: what a command that talks to PVE is given (with `--repo`).
#[derive(Debug, Clone, clap::Args)]
pub struct LiveArgs {
    #[command(flatten)]
    pub clusters: ClustersArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// What a command that plans is given: the live target, which state of the repository, and
/// the budget and timeouts (`diff`, and through [`crate::writer::CycleArgs`] `apply` and
/// `converge`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// The planes a reading command opens (`get`, `status`): the clusters, and the remote whose
/// branches count.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanesReadArgs {
    #[command(flatten)]
    pub clusters: ClustersArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

impl PlanesReadArgs {
    /// The planes of the repository `repo`.
    pub fn open(&self, repo: &RepoArgs) -> Result<proxops_store::Store, CommandError> {
        self.remote.store(&repo.resolve()?)
    }
}

/// The planes a command of one named cluster opens (`promote`, `rollback`, `lease`): the
/// remote whose branches count (the command names its cluster with its own `--cluster`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterPlanesArgs {
    #[command(flatten)]
    pub remote: RemoteArgs,
}

impl ClusterPlanesArgs {
    /// The planes of the repository `repo`.
    pub fn open(&self, repo: &RepoArgs) -> Result<proxops_store::Store, CommandError> {
        self.remote.store(&repo.resolve()?)
    }
}

/// The repository directory: `--repo`, else the git work tree holding the current directory,
/// else the current directory.
pub fn repo_dir(repo: Option<&Path>) -> Result<PathBuf, CommandError> {
    if let Some(dir) = repo {
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CommandError::io("cannot read the current directory", e))?;
    Ok(cwd
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&cwd)
        .to_path_buf())
}

/// `--backend` and `--sim-state`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendArgs {
    /// Where the clusters' PVE API is: the cluster's `base-url`, or a simulator started here.
    #[arg(long, value_enum, default_value_t = BackendKind::Pve)]
    pub backend: BackendKind,
    /// With `--backend sim`: keep the simulated state between runs under FILE's name, one file
    /// per cluster with `.<cluster>` before the extension (`sim.json` → `sim.home.json`),
    /// whichever clusters a run selects.
    #[arg(long, value_name = "FILE")]
    pub sim_state: Option<PathBuf>,
}

/// The backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The real Proxmox VE API (credentials from the environment, e.g. `PROXOPS_PVE_TOKEN_<CLUSTER>`
    /// or `PROXOPS_PVE_TOKEN`, else the cluster's SOPS secrets file).
    Pve,
    /// The embedded simulator, seeded from each cluster's config and manifests.
    Sim,
}

/// The repository as a command loaded it ([`Workspace`]), with the flags layer of its settings.
pub struct Loaded {
    /// The loaded repository.
    pub ws: Workspace,
    /// The flags layer of the settings: the global flags, plus the command's own.
    pub flags: FlagSettings,
}

impl Loaded {
    /// Where the repository's files are.
    pub fn dir(&self) -> &Path {
        self.ws.dir()
    }

    /// The loaded repository.
    pub fn repo(&self) -> &Repository {
        self.ws.repo()
    }

    /// The valid clusters' graphs.
    pub fn graphs(&self) -> &[(String, Graph)] {
        self.ws.graphs()
    }

    /// The kinds.
    pub fn registry(&self) -> &Arc<Registry> {
        self.ws.registry()
    }

    /// The valid clusters, in name order, with their graphs.
    pub fn clusters(&self) -> impl Iterator<Item = (&Cluster, &Graph)> {
        self.ws.clusters()
    }

    /// A cluster's effective settings: defaults, `proxops.yaml`, its config, the global flags
    /// and the environment.
    pub fn settings(&self, cluster: &Cluster) -> ClusterSettings {
        self.ws.settings(cluster, &self.flags)
    }

    /// Whether any selected cluster is invalid.
    pub fn any_invalid(&self) -> bool {
        self.ws.any_invalid()
    }
}

/// Loads and validates the repository, builds the graphs, prints the errors of invalid clusters.
pub fn load(dir: &Path, clusters: &[String]) -> Result<Loaded, CommandError> {
    load_from(&fs_source(dir)?, dir, clusters)
}

/// `--prune-budget` and `--task-timeout`: the settings a command line may override.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TuningArgs {
    /// Most guests deleted per cycle and cluster; 0: no limit [default:
    /// `reconcile.prune-budget` of the cluster's config, else of proxops.yaml, else 3].
    #[arg(long, value_name = "N")]
    pub prune_budget: Option<u32>,
    /// Longest wait for one PVE task, e.g. `30m` [default: `reconcile.task-timeout`, else per
    /// task type].
    #[arg(long, value_name = "DURATION", value_parser = task_timeout)]
    pub task_timeout: Option<Duration>,
}

fn task_timeout(text: &str) -> Result<Duration, String> {
    proxops_model::config::parse_duration(text)
        .ok_or_else(|| format!("`{text}` is not a duration such as 30m or 90s"))
}

impl TuningArgs {
    /// Adds these flags to `loaded`'s flags layer.
    pub fn apply_to(&self, loaded: &mut Loaded) {
        if self.prune_budget.is_some() {
            loaded.flags.prune_budget = self.prune_budget;
        }
        if self.task_timeout.is_some() {
            loaded.flags.task_timeout = self.task_timeout;
        }
    }
}

/// `--revision` and `--worktree`: which state of the repository a command reads.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceArgs {
    /// Read the repository at this commit (a branch, tag or commit id) [default: HEAD when the
    /// repository is a git work tree, else the directory as it is].
    #[arg(long, value_name = "REV", conflicts_with = "worktree")]
    pub revision: Option<String>,
    /// Read the work tree as it is, uncommitted changes included.
    #[arg(long)]
    pub worktree: bool,
}

impl SourceArgs {
    /// Loads the repository at `dir` as the flags say; the commit read, if one was.
    ///
    /// What changes PVE is what was committed: without flags, a directory that is the root of
    /// a git work tree is read at `HEAD` (and uncommitted changes are ignored, which stderr
    /// says); any other directory is read as it is. `commit_needed` (the planes pin what they
    /// record) refuses `--worktree` and reads `HEAD` of any git repository.
    pub fn load(
        &self,
        dir: &Path,
        clusters: &[String],
        commit_needed: bool,
    ) -> Result<(Loaded, Option<proxops_store::ObjectId>), CommandError> {
        if commit_needed && self.worktree {
            return Err(CommandError::usage(
                "--planes records the commit it reconciled; --worktree has none",
                Some("commit your changes, or drop --planes".into()),
            ));
        }
        let git_root = dir.join(".git").exists() || commit_needed;
        if self.worktree || (self.revision.is_none() && !git_root) {
            if self.worktree {
                crate::logging::note("reading the work tree, uncommitted changes included");
            }
            return Ok((load(dir, clusters)?, None));
        }
        let store = open_store(dir)?;
        let source = store
            .source(self.revision.as_deref())
            .map_err(CommandError::from)?;
        let commit = source.commit();
        let short = &commit.to_string()[..12];
        match &self.revision {
            Some(rev) => crate::logging::note(&format!("reading commit {short} ({rev})")),
            None => crate::logging::note(&format!(
                "reading commit {short} (HEAD); uncommitted changes are not read (--worktree reads them)"
            )),
        }
        Ok((load_from(&source, dir, clusters)?, Some(commit)))
    }
}

/// [`load`] from any source: the work tree, or a commit ([`proxops_store::GitSource`]).
pub fn load_from(
    source: &dyn RepoSource,
    dir: &Path,
    clusters: &[String],
) -> Result<Loaded, CommandError> {
    let loaded = open_from(source, dir, clusters)?;
    let mut err = std::io::stderr().lock();
    for d in loaded.repo().diagnostics.iter().filter(|d| d.is_error()) {
        let _ = writeln!(err, "{:?}", miette::Report::new(d.to_miette()));
    }
    Ok(loaded)
}

/// Loads the repository at `dir` like [`load`], printing nothing: for `validate`, which
/// prints every finding its own way.
pub fn open(dir: &Path, clusters: &[String]) -> Result<Loaded, CommandError> {
    open_from(&fs_source(dir)?, dir, clusters)
}

fn fs_source(dir: &Path) -> Result<FsSource, CommandError> {
    FsSource::new(dir).map_err(|e| {
        CommandError::user(format!("cannot open repository {}", dir.display()))
            .with_source(e)
            .hint("pass the repository directory with --repo DIR")
    })
}

fn open_from(
    source: &dyn RepoSource,
    dir: &Path,
    clusters: &[String],
) -> Result<Loaded, CommandError> {
    let registry = Arc::new(Registry::builtin());
    let ws =
        Workspace::from_source(source, dir, registry, clusters, None).map_err(|e| match e {
            WorkspaceError::Load(e) => CommandError::from(e),
            other => {
                let message = other.to_string();
                CommandError::user(message).with_source(other)
            }
        })?;
    Ok(Loaded { ws, flags: flags() })
}

impl BackendArgs {
    /// The engine's backend for a cluster.
    pub fn backend(&self, cluster: &str) -> Backend {
        match self.backend {
            BackendKind::Pve => Backend::Pve,
            BackendKind::Sim => Backend::Sim {
                state_file: self
                    .sim_state
                    .as_ref()
                    .map(|f| per_cluster_state_file(f, cluster)),
                task_time: Duration::from_millis(50),
            },
        }
    }

    /// Connects to a cluster.
    pub async fn connect(
        &self,
        loaded: &Loaded,
        cluster: &Cluster,
    ) -> Result<Connection, CommandError> {
        let backend = self.backend(&cluster.name);
        connect_with(
            loaded.registry(),
            cluster,
            &backend,
            loaded.settings(cluster),
            Some(loaded.dir()),
        )
        .await
        .map_err(CommandError::from)
    }
}

/// A multi-threaded runtime for the async engine.
pub fn runtime() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CommandError::internal("cannot start the async runtime").with_source(e))
}

/// The git repository at or above `dir`, which holds the planes.
pub fn open_store(dir: &Path) -> Result<proxops_store::Store, CommandError> {
    proxops_store::Store::open(dir).map_err(|e| {
        CommandError::usage(
            format!("{} is not a git repository: {e}", dir.display()),
            Some(
                "the planes live in the repository's git: pass a git work tree with --repo".into(),
            ),
        )
    })
}

/// `--remote`: where the planes are published besides this repository.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// Publish the planes (and take leases) on this git remote, e.g. `origin`, with
    /// `git push --atomic --force-with-lease`; its branches are then the ones that count.
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
}

impl RemoteArgs {
    /// The planes of the repository at or above `dir`, with the remote when one is given.
    pub fn store(&self, dir: &Path) -> Result<proxops_store::Store, CommandError> {
        let store = open_store(dir)?;
        Ok(match &self.remote {
            Some(name) => store.with_remote(name),
            None => store,
        })
    }
}
