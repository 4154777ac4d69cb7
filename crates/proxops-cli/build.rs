//! Names the commit the binary is built from, for `proxops --version` and the man pages.
//!
//! Sets `PROXOPS_VERSION` (`0.1.0 (a1b2c3d4e5f6 2026-12-06)`: the crate's version, the commit's
//! first 12 hex digits and its commit date) and `PROXOPS_BUILD_DATE` (the date alone, empty when
//! unknown). The commit comes from `PROXOPS_BUILD_COMMIT` (and `PROXOPS_BUILD_DATE`) when set, as
//! a package build from a tarball sets them, else from `git` in the checkout, else it is
//! `unknown`. No network: git only reads the local repository.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PROXOPS_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=PROXOPS_BUILD_DATE");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let given = std::env::var("PROXOPS_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let built = match given {
        Some(commit) => Some(Built {
            commit,
            date: std::env::var("PROXOPS_BUILD_DATE")
                .ok()
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty()),
        }),
        None => from_git(),
    };
    let (what, date) = match &built {
        Some(b) => {
            let short: String = b.commit.chars().take(12).collect();
            match &b.date {
                Some(d) => (format!("{short} {d}"), d.clone()),
                None => (short, String::new()),
            }
        }
        None => ("unknown".to_owned(), String::new()),
    };
    println!("cargo:rustc-env=PROXOPS_VERSION={version} ({what})");
    println!("cargo:rustc-env=PROXOPS_BUILD_DATE={date}");
}

/// A commit and its date.
struct Built {
    commit: String,
    date: Option<String>,
}

/// The checkout's `HEAD` commit and its commit date, and the files that change when `HEAD`
/// moves, so that cargo reruns this script on a new commit or checkout and at no other time.
fn from_git() -> Option<Built> {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    // One call: the git directory (a worktree's own), the common one (its refs), and the
    // branch `HEAD` names (`HEAD` itself when detached).
    let paths = git(
        &dir,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
            "--symbolic-full-name",
            "HEAD",
        ],
    )?;
    let mut lines = paths.lines();
    let (git_dir, common, head_ref) = (
        PathBuf::from(lines.next()?),
        PathBuf::from(lines.next()?),
        lines.next().unwrap_or("HEAD").to_owned(),
    );
    watch(&git_dir.join("HEAD"));
    if head_ref.starts_with("refs/") {
        let loose = common.join(&head_ref);
        if loose.exists() {
            watch(&loose);
        } else if let Some(parent) = loose.parent().filter(|p| p.exists()) {
            // A packed ref: a commit writes it loose, a new file in this directory.
            watch(parent);
        }
    }
    // A ref may live only here (after `git gc` or `git pack-refs`).
    let packed = common.join("packed-refs");
    if packed.exists() {
        watch(&packed);
    }
    let out = git(&dir, &["log", "-1", "--format=%H %cs", "HEAD"])?;
    let (commit, date) = out.trim().split_once(' ')?;
    Some(Built {
        commit: commit.to_owned(),
        date: Some(date.to_owned()),
    })
}

fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// `git ARGS` in `dir`: its stdout when it succeeded (no git, or no repository: `None`).
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}
