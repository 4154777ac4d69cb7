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
use proxops_model::Repository;
use proxops_model::config::{mask_url_credentials, redact_url};
use proxops_store::{GitToken, ObjectId, Store};
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
        /// The HTTPS token git presents to it (`git.token`, `PROXOPS_GIT_TOKEN`), never
        /// written to the clone's `.git/config`.
        token: Option<GitToken>,
    },
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceLocation::Local(p) => write!(f, "{}", p.display()),
            SourceLocation::Remote { url, branch, .. } => {
                write!(f, "{} ({branch})", redact_url(url))
            }
        }
    }
}

impl SourceLocation {
    /// The warning an operator should see when the remote URL carries a credential: git
    /// writes such a URL into the clone's `.git/config`, and every tool that shows the URL
    /// risks showing it. ProxOps itself shows it redacted.
    pub fn credential_warning(&self) -> Option<String> {
        let SourceLocation::Remote { url, .. } = self else {
            return None;
        };
        let shown = redact_url(url);
        (shown != *url).then(|| {
            format!(
                "the repository URL {shown} carries a credential, which git keeps in the clone's .git/config: give the token as `git.token` or PROXOPS_GIT_TOKEN instead"
            )
        })
    }
}

impl SourceLocation {
    /// The same location with `token` in place of the one it was given (a remote only).
    pub(crate) fn with_token(&self, token: Option<&GitToken>) -> SourceLocation {
        match (self, token) {
            (SourceLocation::Remote { url, branch, .. }, Some(t)) => SourceLocation::Remote {
                url: url.clone(),
                branch: branch.clone(),
                token: Some(t.clone()),
            },
            _ => self.clone(),
        }
    }
}

/// The HTTPS token the repository's own SOPS files give (`secrets.git.token` of its clusters,
/// decrypted from the work tree `dir`), which wins over `git.token` and PROXOPS_GIT_TOKEN for
/// every fetch and push after the clone that brought the files. A mapped key that does not
/// resolve, and two clusters giving different tokens (one repository, one source), are errors.
pub(crate) fn sops_git_token(
    repo: &Repository,
    dir: &Path,
) -> Result<Option<GitToken>, AgentError> {
    let mut found: Option<(String, proxops_secrets::Secret)> = None;
    for cluster in &repo.clusters {
        let Some(key) = cluster
            .entry
            .as_ref()
            .and_then(|e| e.secrets.as_ref())
            .and_then(|s| s.git.as_ref())
            .and_then(|g| g.token.clone())
        else {
            continue;
        };
        let fail = |why: String| {
            AgentError::Source(format!(
                "cluster {}: `secrets.git.token` (key `{key}`): {why}",
                cluster.name
            ))
        };
        let secrets = proxops_engine::secrets::ClusterSecrets::load(Some(dir), cluster);
        let keys = proxops_secrets::SecretKeys {
            git_token: Some(key.clone()),
            ..proxops_secrets::SecretKeys::default()
        };
        let token = secrets
            .document()
            .map_err(fail)?
            .credentials(&keys)
            .map_err(|e| fail(e.to_string()))?
            .git_token;
        let Some(token) = token else { continue };
        match &found {
            Some((first, t)) if t.expose() != token.expose() => {
                return Err(AgentError::Source(format!(
                    "git token conflict: the SOPS files of clusters {first} and {} give different git tokens, and the repository is one source",
                    cluster.name
                )));
            }
            Some(_) => {}
            None => found = Some((cluster.name.clone(), token)),
        }
    }
    Ok(found.map(|(_, t)| GitToken::new(t.expose())))
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
        SourceLocation::Remote { url, branch, token } => {
            let checkout = data_dir.join("source");
            let git = |dir: PathBuf, args: Vec<String>| git(dir, args, token.as_ref());
            if checkout.join(".git").is_dir() {
                git(
                    checkout.clone(),
                    strings(&["fetch", "--quiet", "origin", branch]),
                )
                .await?;
                git(
                    checkout.clone(),
                    strings(&["checkout", "--quiet", "--force", "--detach", "FETCH_HEAD"]),
                )
                .await?;
            } else {
                std::fs::create_dir_all(data_dir).map_err(|e| AgentError::Source(e.to_string()))?;
                let target = checkout.to_string_lossy().into_owned();
                git(
                    data_dir.to_path_buf(),
                    strings(&[
                        "clone",
                        "--quiet",
                        "--branch",
                        branch,
                        "--single-branch",
                        url,
                        &target,
                    ]),
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
        SourceLocation::Remote { token, .. } => {
            store.with_remote("origin").with_remote_token(token.clone())
        }
    };
    let commit = store
        .resolve("HEAD")
        .map_err(|e| AgentError::Source(e.to_string()))?;
    Ok(Fetched { store, dir, commit })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// Runs `git ARGS` in `dir`, bounded in time, never asking on a terminal, presenting `token`
/// when the remote asks. Its messages never show a password a URL carries.
async fn git(dir: PathBuf, args: Vec<String>, token: Option<&GitToken>) -> Result<(), AgentError> {
    let child = tokio::process::Command::new("git")
        .args(&args)
        .current_dir(&dir)
        .envs(token.iter().flat_map(|t| t.git_env()))
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let what = format!(
        "git {}",
        args.first().map(String::as_str).unwrap_or_default()
    );
    match tokio::time::timeout(GIT_TIMEOUT, child).await {
        Err(_) => Err(AgentError::Source(format!(
            "{what} took longer than {}s",
            GIT_TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(AgentError::Source(format!("cannot run {what}: {e}"))),
        Ok(Ok(out)) if !out.status.success() => Err(AgentError::Source(format!(
            "{what} failed: {}",
            mask_url_credentials(String::from_utf8_lossy(&out.stderr).trim())
        ))),
        Ok(Ok(_)) => Ok(()),
    }
}
