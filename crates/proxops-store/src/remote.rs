//! Publishing to a remote: the git CLI (gix has no push), each call with a bounded time.
//!
//! With a remote ([`crate::Store::with_remote`]) the remote's branches are the authority and
//! the local plane branches a mirror of them:
//!
//! - reading a head asks the remote (`git ls-remote`), fetches the commit when it
//!   is not here yet and moves the local branch to it;
//! - publishing runs `git push --atomic --force-with-lease=<ref>:<expected>
//!   <remote> <commit>:<ref>`: the remote moves only if it is still where the caller read it.
//!   An ambiguous outcome (git failed, timed out or said something unclear) counts as done
//!   only when the remote head now is a commit whose only parent is the expected head and
//!   whose tree is ours; a remote head elsewhere is a [`StoreError::Conflict`], so observation
//!   publication rebuilds on it and retries as it does locally, and other publications stop.

use crate::error::{Result, StoreError};
use crate::git;
use crate::id::ObjectId;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one git command may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A configured remote: its name (`origin`), the time limit of each git call and the HTTPS
/// token git presents to it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Remote {
    /// The git remote's name.
    pub name: String,
    /// The time limit of one git command.
    pub timeout: Duration,
    /// The token git answers an HTTPS authentication request with.
    pub token: Option<GitToken>,
}

/// An HTTPS token (a forge's personal access or deploy token) that git presents as the
/// password when a remote asks for one. It reaches git through the environment of each git
/// command (a credential helper configured by `GIT_CONFIG_*`), so it is never written to
/// `.git/config`, never on a command line other users can read, and never in a remote URL.
/// `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct GitToken {
    token: String,
    username: Option<String>,
}

impl std::fmt::Debug for GitToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitToken")
            .field("token", &"***")
            .field("username", &self.username)
            .finish()
    }
}

/// The environment variable the credential helper reads the token from.
const TOKEN_VAR: &str = "PROXOPS_GIT_CREDENTIAL";

/// The user name git sends with the token when the URL names none: GitHub, GitLab and Gitea
/// accept a token as the password of any user name.
const DEFAULT_USERNAME: &str = "x-access-token";

impl GitToken {
    /// The token `token` (surrounding whitespace removed, as a token file's newline).
    pub fn new(token: &str) -> GitToken {
        GitToken {
            token: token.trim().to_owned(),
            username: None,
        }
    }

    /// The same token sent with `username` when the remote URL names no user.
    pub fn with_username(mut self, username: impl Into<String>) -> GitToken {
        self.username = Some(username.into());
        self
    }

    /// The environment that makes one git command answer an authentication request with the
    /// token: the configured credential helpers reset, then one helper that prints it (only
    /// for `get`; git's `store`/`erase` calls are ignored). A user name in the URL wins over
    /// `credential.username`, as git documents.
    pub fn git_env(&self) -> Vec<(String, String)> {
        let helper =
            format!("!f() {{ test \"$1\" = get && printf 'password=%s\\n' \"${TOKEN_VAR}\"; }}; f");
        let username = self.username.as_deref().unwrap_or(DEFAULT_USERNAME);
        [
            ("GIT_CONFIG_COUNT", "3"),
            ("GIT_CONFIG_KEY_0", "credential.helper"),
            ("GIT_CONFIG_VALUE_0", ""),
            ("GIT_CONFIG_KEY_1", "credential.helper"),
            ("GIT_CONFIG_VALUE_1", helper.as_str()),
            ("GIT_CONFIG_KEY_2", "credential.username"),
            ("GIT_CONFIG_VALUE_2", username),
            (TOKEN_VAR, self.token.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }
}

/// What a git command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `git --git-dir <dir> args` against `remote`, killing it after its timeout.
fn run(git_dir: &Path, remote: &Remote, args: &[&str]) -> Result<Ran> {
    let timeout = remote.timeout;
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .envs(remote.token.iter().flat_map(GitToken::git_env))
        .env("GIT_TERMINAL_PROMPT", "0")
        // Untranslated messages: some of them are matched (see `ref_vanished`).
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Drain both pipes on their own threads so that a chatty git never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.join().unwrap_or_default();
    let mut stderr = err.join().unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {} s)", timeout.as_secs()));
    }
    Ok(Ran {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        // git names the remote's URL in its messages: never with a password in it.
        stderr: proxops_model::config::mask_url_credentials(&stderr).into_owned(),
    })
}

fn cli_error(command: &str, ran: &Ran) -> StoreError {
    StoreError::GitCli {
        command: command.to_owned(),
        stderr: ran.stderr.trim().to_owned(),
    }
}

impl Remote {
    /// The remote `name` with the default time limit.
    pub fn new(name: &str) -> Remote {
        Remote {
            name: name.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            token: None,
        }
    }

    /// Where `full_ref` points on the remote (`git ls-remote`).
    pub fn head(&self, git_dir: &Path, full_ref: &str) -> Result<Option<ObjectId>> {
        let ran = run(
            git_dir,
            self,
            &["ls-remote", "--refs", &self.name, full_ref],
        )?;
        if !ran.ok {
            return Err(cli_error("ls-remote", &ran));
        }
        for line in ran.stdout.lines() {
            let mut parts = line.split('\t');
            if let (Some(id), Some(name)) = (parts.next(), parts.next())
                && name == full_ref
            {
                return crate::documents::parse_id(id).map(Some).ok_or_else(|| {
                    StoreError::GitCli {
                        command: "ls-remote".to_owned(),
                        stderr: format!("unreadable line `{line}`"),
                    }
                });
            }
        }
        Ok(None)
    }

    /// Fetches the remote's `full_ref` into the local branch of the same name.
    fn fetch(&self, git_dir: &Path, full_ref: &str) -> Result<()> {
        let spec = format!("+{full_ref}:{full_ref}");
        let ran = run(
            git_dir,
            self,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                &self.name,
                &spec,
            ],
        )?;
        if ran.ok {
            Ok(())
        } else {
            Err(cli_error("fetch", &ran))
        }
    }
}

/// The remote head of `full_ref`, mirrored into the local branch (see the module docs).
///
/// Another writer may move or delete the ref between `ls-remote` and `fetch` (an agent gives
/// its lease back just as another reads it): a fetch that no longer finds the ref asks the
/// remote again, a bounded number of times, and a ref gone for good is `None`, as if it had
/// never been there.
pub(crate) fn sync(
    repo: &gix::Repository,
    remote: &Remote,
    full_ref: &str,
) -> Result<Option<ObjectId>> {
    const ATTEMPTS: usize = 3;
    let git_dir = repo.git_dir();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(head) = remote.head(git_dir, full_ref)? else {
            return Ok(None);
        };
        if git::read_ref(repo, full_ref)? == Some(head) {
            return Ok(Some(head));
        }
        if repo.has_object(head.to_gix()) {
            git::force_ref(repo, full_ref, head, "mirror the remote")?;
            return Ok(Some(head));
        }
        match remote.fetch(git_dir, full_ref) {
            // The fetch took the ref as it is now, which may be newer than what ls-remote said.
            Ok(()) => return git::read_ref(repo, full_ref),
            Err(e) if attempt < ATTEMPTS && ref_vanished(&e) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Whether a failed fetch says the remote no longer has the ref it was asked for.
fn ref_vanished(error: &StoreError) -> bool {
    matches!(error, StoreError::GitCli { command, stderr }
        if command == "fetch" && stderr.contains("couldn't find remote ref"))
}

/// Moves the remote's `full_ref` from `expected` (`None`: must not exist) to `new`, whose tree
/// is `tree`, and the local mirror with it; returns the remote head (see the module docs).
pub(crate) fn push(
    repo: &gix::Repository,
    remote: &Remote,
    full_ref: &str,
    expected: Option<ObjectId>,
    new: ObjectId,
    tree: ObjectId,
) -> Result<ObjectId> {
    let git_dir = repo.git_dir();
    let lease = format!(
        "--force-with-lease={full_ref}:{}",
        expected.map(|e| e.to_string()).unwrap_or_default()
    );
    let ran = push_with_lease(git_dir, remote, &lease, &format!("{new}:{full_ref}"));
    let clear = matches!(&ran, Ok(r) if r.ok);
    if !clear {
        // Ambiguous or failed: the remote head decides.
        let actual = remote.head(git_dir, full_ref)?;
        let done = match actual {
            Some(a) if a == new => true,
            Some(a) if repo.has_object(a.to_gix()) => {
                let info = git::commit_info(repo, a)?;
                expected.is_some_and(|e| info.parents == [e]) && info.tree == tree
            }
            _ => false,
        };
        if !done {
            return Err(if actual != expected {
                StoreError::Conflict {
                    name: full_ref.to_owned(),
                    expected,
                    actual,
                }
            } else {
                match ran {
                    Ok(r) => cli_error("push", &r),
                    Err(e) => e,
                }
            });
        }
        let head = actual.unwrap_or(new);
        git::force_ref(repo, full_ref, head, "mirror the remote")?;
        return Ok(head);
    }
    git::force_ref(repo, full_ref, new, "published to the remote")?;
    Ok(new)
}

/// `git push --atomic --force-with-lease=... <remote> <refspec>`.
fn push_with_lease(git_dir: &Path, remote: &Remote, lease: &str, refspec: &str) -> Result<Ran> {
    run(
        git_dir,
        remote,
        &[
            "push",
            "--atomic",
            "--porcelain",
            "--quiet",
            lease,
            &remote.name,
            refspec,
        ],
    )
}

/// Deletes the remote's `full_ref` if it still points at `expected`, and the local mirror with
/// it. An ambiguous outcome counts as done only when the remote no longer has the ref.
pub(crate) fn delete(
    repo: &gix::Repository,
    remote: &Remote,
    full_ref: &str,
    expected: ObjectId,
) -> Result<()> {
    let git_dir = repo.git_dir();
    let lease = format!("--force-with-lease={full_ref}:{expected}");
    let ran = push_with_lease(git_dir, remote, &lease, &format!(":{full_ref}"));
    if !matches!(&ran, Ok(r) if r.ok) {
        let actual = remote.head(git_dir, full_ref)?;
        if actual.is_some() {
            return Err(if actual != Some(expected) {
                StoreError::Conflict {
                    name: full_ref.to_owned(),
                    expected: Some(expected),
                    actual,
                }
            } else {
                match ran {
                    Ok(r) => cli_error("push", &r),
                    Err(e) => e,
                }
            });
        }
    }
    git::delete_ref(repo, full_ref, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::tests::{bare_repo, commit_file};

    /// What `git credential fill` answers for `input` with `token`'s environment.
    fn fill(token: &GitToken, input: &str) -> String {
        use std::io::Write;
        let mut child = Command::new("git")
            .args(["credential", "fill"])
            .envs(token.git_env())
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn git_asks_the_token_for_the_password_and_the_url_names_the_user() {
        let token = GitToken::new("glpat-s3cr3t;$(echo no)\n");
        let https = "protocol=https\nhost=git.example\npath=infra.git\n\n";
        assert_eq!(
            fill(&token, https),
            "protocol=https\nhost=git.example\nusername=x-access-token\npassword=glpat-s3cr3t;$(echo no)\n"
        );
        let named = "protocol=https\nhost=git.example\nusername=alice\n\n";
        assert!(fill(&token, named).contains("username=alice\npassword=glpat-s3cr3t"));
        let oauth = token.clone().with_username("oauth2");
        assert!(fill(&oauth, https).contains("username=oauth2\n"));
        assert!(!format!("{token:?}").contains("s3cr3t"));
    }

    #[test]
    fn only_a_fetch_that_lost_its_ref_is_asked_again() {
        let lost = StoreError::GitCli {
            command: "fetch".to_owned(),
            stderr: "fatal: couldn't find remote ref refs/proxops/leases/lab".to_owned(),
        };
        assert!(ref_vanished(&lost));
        let refused = StoreError::GitCli {
            command: "fetch".to_owned(),
            stderr: "fatal: Could not read from remote repository.".to_owned(),
        };
        assert!(!ref_vanished(&refused));
        let other = StoreError::GitCli {
            command: "ls-remote".to_owned(),
            stderr: "fatal: couldn't find remote ref x".to_owned(),
        };
        assert!(!ref_vanished(&other));
    }

    #[test]
    fn a_lost_race_on_the_remote_is_detected_not_overwritten() {
        let (remote_dir, _) = bare_repo();
        let (_dir, repo) = bare_repo();
        let added = Command::new("git")
            .arg("--git-dir")
            .arg(repo.git_dir())
            .args(["remote", "add", "origin"])
            .arg(remote_dir.path())
            .status()
            .unwrap();
        assert!(added.success());
        let remote = Remote::new("origin");
        let name = "refs/heads/proxops/desired/home";
        let (first, first_tree) = commit_file(&repo, None, "a.yaml", "a: 1\n");
        assert_eq!(
            push(&repo, &remote, name, None, first, first_tree).unwrap(),
            first
        );
        assert_eq!(remote.head(repo.git_dir(), name).unwrap(), Some(first));
        // Another writer moves the remote on from `first`.
        let (theirs, theirs_tree) = commit_file(&repo, Some(first), "a.yaml", "a: 2\n");
        push(&repo, &remote, name, Some(first), theirs, theirs_tree).unwrap();
        // Ours, authorised against `first`: refused, the remote untouched.
        let (ours, ours_tree) = commit_file(&repo, Some(first), "a.yaml", "a: 3\n");
        let err = push(&repo, &remote, name, Some(first), ours, ours_tree).unwrap_err();
        match err {
            StoreError::Conflict {
                expected, actual, ..
            } => assert_eq!((expected, actual), (Some(first), Some(theirs))),
            other => panic!("expected a conflict, got {other}"),
        }
        assert_eq!(remote.head(repo.git_dir(), name).unwrap(), Some(theirs));
        // The local mirror follows the remote when read.
        assert_eq!(sync(&repo, &remote, name).unwrap(), Some(theirs));
        assert_eq!(git::read_ref(&repo, name).unwrap(), Some(theirs));
    }
}
