//! Where the agent reads the repository: a local git work tree (its `HEAD` commit), or a remote
//! URL cloned into the data directory and fetched before every pass.
//!
//! With a remote repository the planes and the cluster leases live on the remote too (the
//! clone's branches mirror them), so agents on different machines see each other's leases.
//!
//! Remote clones and fetches run the git CLI, as publishing to a remote already must (gix has
//! no push): one transport for both directions, with the user's credential helpers and ssh
//! configuration, and no second HTTP stack in the binary.

use super::AgentError;
use proxops_store::{ObjectId, Store};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The repository the agent follows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceLocation {
    /// A local git work tree; each pass reads its `HEAD` commit.
    Local(PathBuf),
    /// A remote repository, cloned into `<data-dir>/source` and fetched each pass.
    Remote {
        /// The URL (`https://`, `ssh://`, `git@host:path`, `file://` or a path).
        url: String,
        /// The branch to follow.
        branch: String,
    },
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceLocation::Local(p) => write!(f, "{}", p.display()),
            SourceLocation::Remote { url, branch } => write!(f, "{url} ({branch})"),
        }
    }
}

/// The repository as one pass reads it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Fetched {
    /// The git repository holding the source and the planes.
    pub store: Store,
    /// Its work tree (where secrets files are read).
    pub dir: PathBuf,
    /// The source commit.
    pub commit: ObjectId,
}

/// How long one git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// Brings the source up to date and names the commit to reconcile.
pub async fn refresh(location: &SourceLocation, data_dir: &Path) -> Result<Fetched, AgentError> {
    let dir = match location {
        SourceLocation::Local(dir) => dir.clone(),
        SourceLocation::Remote { url, branch } => {
            let checkout = data_dir.join("source");
            if checkout.join(".git").is_dir() {
                git(&checkout, &["fetch", "--quiet", "origin", branch]).await?;
                git(
                    &checkout,
                    &["checkout", "--quiet", "--force", "--detach", "FETCH_HEAD"],
                )
                .await?;
            } else {
                std::fs::create_dir_all(data_dir).map_err(|e| AgentError::Source(e.to_string()))?;
                let target = checkout.to_string_lossy().into_owned();
                git(
                    data_dir,
                    &[
                        "clone",
                        "--quiet",
                        "--branch",
                        branch,
                        "--single-branch",
                        url,
                        &target,
                    ],
                )
                .await?;
            }
            checkout
        }
    };
    let store = Store::open(&dir).map_err(|e| AgentError::Source(e.to_string()))?;
    // A clone publishes its planes and takes its leases on the remote, where other agents see
    // them.
    let store = match location {
        SourceLocation::Local(_) => store,
        SourceLocation::Remote { .. } => store.with_remote("origin"),
    };
    let commit = store
        .resolve("HEAD")
        .map_err(|e| AgentError::Source(e.to_string()))?;
    Ok(Fetched { store, dir, commit })
}

/// Runs `git ARGS` in `dir`, bounded in time, never asking on a terminal.
async fn git(dir: &Path, args: &[&str]) -> Result<(), AgentError> {
    let child = tokio::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let what = format!("git {}", args.first().copied().unwrap_or_default());
    match tokio::time::timeout(GIT_TIMEOUT, child).await {
        Err(_) => Err(AgentError::Source(format!(
            "{what} took longer than {}s",
            GIT_TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(AgentError::Source(format!("cannot run {what}: {e}"))),
        Ok(Ok(out)) if !out.status.success() => Err(AgentError::Source(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Ok(Ok(_)) => Ok(()),
    }
}
