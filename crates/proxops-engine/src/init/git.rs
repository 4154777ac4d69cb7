//! The first commit of a new repository, through the `git` command (the user's own git, with
//! their identity, hooks and signing settings, as if they had typed it).

use super::InitError;
use std::path::Path;
use std::process::Command;

/// Who a commit is by when git has no `user.name`/`user.email` of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitIdentity {
    /// `user.name`.
    pub name: String,
    /// `user.email`.
    pub email: String,
}

impl Default for CommitIdentity {
    fn default() -> Self {
        CommitIdentity {
            name: "ProxOps init".into(),
            email: "proxops-init@localhost".into(),
        }
    }
}

impl CommitIdentity {
    /// An identity with this name and e-mail.
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        CommitIdentity {
            name: name.into(),
            email: email.into(),
        }
    }
}

pub(crate) struct CommitOutcome {
    pub(crate) initialized: bool,
    pub(crate) commit: Option<String>,
    pub(crate) fallback_identity_used: bool,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, InitError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| InitError::Git {
            args: args.join(" "),
            stderr: format!("cannot run git: {e}"),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(InitError::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Whether git would find an identity for a commit in `dir`.
fn has_identity(dir: &Path) -> bool {
    ["user.name", "user.email"]
        .iter()
        .all(|key| git(dir, &["config", "--get", key]).is_ok_and(|v| !v.is_empty()))
        || std::env::var_os("GIT_AUTHOR_EMAIL").is_some()
}

/// `git init -b main` unless `dir` is the top of a work tree already, then commits `paths`
/// (relative to `dir`) and nothing else the index may hold.
pub(crate) fn commit_new(
    dir: &Path,
    paths: &[String],
    cluster: &str,
    fallback: &super::CommitIdentity,
) -> Result<CommitOutcome, InitError> {
    let initialized = !dir.join(".git").exists();
    if initialized {
        git(dir, &["init", "-q", "-b", "main"])?;
    }
    if paths.is_empty() {
        return Ok(CommitOutcome {
            initialized,
            commit: None,
            fallback_identity_used: false,
        });
    }
    let mut add = vec!["add", "--"];
    add.extend(paths.iter().map(String::as_str));
    git(dir, &add)?;
    let message = format!("proxops init: cluster {cluster}");
    let fallback_identity_used = !has_identity(dir);
    let name = format!("user.name={}", fallback.name);
    let email = format!("user.email={}", fallback.email);
    let mut commit: Vec<&str> = Vec::new();
    if fallback_identity_used {
        commit.extend(["-c", &name, "-c", &email]);
    }
    commit.extend(["commit", "-q", "-m", &message, "--"]);
    commit.extend(paths.iter().map(String::as_str));
    git(dir, &commit)?;
    let id = git(dir, &["rev-parse", "HEAD"])?;
    Ok(CommitOutcome {
        initialized,
        commit: Some(id),
        fallback_identity_used,
    })
}
