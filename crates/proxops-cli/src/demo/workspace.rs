//! The demo's private copy of a repository: a fresh directory holding the copied repository (a
//! new git repository with one commit) and the simulators' state files beside it, removed at
//! the end unless kept. The user's repository is only read.

use super::error::DemoError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The demo's directory: `repo/` (the git copy) and `sim/` (one state file per cluster).
pub(crate) struct Workspace {
    pub root: PathBuf,
    pub repo: PathBuf,
    keep: bool,
}

impl Workspace {
    /// Copies `source` (its files, not its `.git`) into a new directory under `parent` (the
    /// system's temporary directory by default) and commits it.
    pub fn create(
        source: &Path,
        parent: Option<&Path>,
        keep: bool,
    ) -> Result<Workspace, DemoError> {
        if !source.is_dir() {
            return Err(DemoError::NoRepository(source.to_path_buf()));
        }
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let root = unique_dir(&parent)?;
        let workspace = Workspace {
            repo: root.join("repo"),
            root,
            keep,
        };
        copy_tree(source, &workspace.repo).map_err(|e| DemoError::Io {
            what: format!("copy {} to {}", source.display(), workspace.repo.display()),
            source: e,
        })?;
        std::fs::create_dir_all(workspace.sim_dir()).map_err(|e| DemoError::Io {
            what: format!("create {}", workspace.sim_dir().display()),
            source: e,
        })?;
        workspace.git(&["init", "-q", "-b", "main"])?;
        workspace.commit("the example repository, as the demo found it")?;
        Ok(workspace)
    }

    /// Where the simulators keep their state.
    pub fn sim_dir(&self) -> PathBuf {
        self.root.join("sim")
    }

    /// A cluster's simulator state file.
    pub fn sim_state(&self, cluster: &str) -> PathBuf {
        self.sim_dir().join(format!("sim.{cluster}.json"))
    }

    /// Commits every change of the work tree.
    pub fn commit(&self, message: &str) -> Result<(), DemoError> {
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "--no-verify", "-m", message])
    }

    /// Runs git in the copy, as a throw-away identity, ignoring the user's hooks and signing.
    fn git(&self, args: &[&str]) -> Result<(), DemoError> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.repo)
            .args([
                "-c",
                "user.name=ProxOps demo",
                "-c",
                "user.email=demo@proxops.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.hooksPath=/dev/null",
            ])
            .args(args)
            .output()
            .map_err(|e| DemoError::Io {
                what: "run git (the demo keeps its planes in a git repository)".into(),
                source: e,
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(DemoError::Git {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// Whether the directory stays after the demo.
    pub fn kept(&self) -> bool {
        self.keep
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// A new directory `proxops-demo-<pid>-<n>` under `parent`.
fn unique_dir(parent: &Path) -> Result<PathBuf, DemoError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for n in 0..100u32 {
        let dir = parent.join(format!(
            "proxops-demo-{}-{:x}",
            std::process::id(),
            stamp.wrapping_add(n)
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(DemoError::Io {
                    what: format!("create a directory in {}", parent.display()),
                    source: e,
                });
            }
        }
    }
    Err(DemoError::Io {
        what: format!("create a directory in {}", parent.display()),
        source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    })
}

/// Copies a directory tree, leaving out `.git` (the copy gets its own history).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_name() == ".git" {
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
