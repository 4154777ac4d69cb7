//! Embedding the ProxOps engine: the `lab` cluster of `examples/homelab` reconciled through a
//! `Reconciler` against an in-process PVE simulator, with the planes (desired state, receipts)
//! in a throw-away git copy of the repository. A second run finds the cluster in sync.

use proxops_engine::workspace::Workspace;
use proxops_engine::{Backend, ReconcileOptions, Reconciler, RunResult};
use proxops_model::Registry;
use proxops_store::Store;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    // A git copy of the example: the planes are branches beside its `main`.
    let work = tempfile::tempdir()?;
    let repo = work.path().join("repo");
    copy_tree(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../homelab")),
        &repo,
    )?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "the homelab example"])?;

    // The repository at its commit, with the graph of the cluster `lab`.
    let store = Store::open(&repo)?;
    let registry = Arc::new(Registry::builtin());
    let head = store.source(None)?;
    let workspace = Workspace::at_commit(&head, &repo, Arc::clone(&registry), &["lab".into()])?;
    if workspace.graph("lab").is_none() {
        return Err("the cluster `lab` is not valid".into());
    }

    // A simulator seeded from the cluster, keeping its state between the runs.
    let backend = Backend::Sim {
        state_file: Some(work.path().join("sim.json")),
        task_time: Duration::from_millis(10),
    };
    let reconciler = Reconciler::builder(registry, backend)
        .store(store)
        .record_planes(true)
        .options(ReconcileOptions::default().with_holder("embed-example"))
        .build();

    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let mut results = Vec::new();
    for n in 1..=2 {
        let source = workspace.source("lab").ok_or("no cluster `lab`")?;
        let run = reconciler.cycle(source, "lab", stop.clone()).await;
        for report in run.cycles.iter().filter_map(|c| c.report.as_ref()) {
            for r in &report.results {
                println!("run {n}: {:?} {}: {:?}", r.verb, r.subject, r.outcome);
            }
        }
        for e in &run.errors {
            println!("run {n}: error: {e}");
        }
        println!("run {n}: cluster lab: {:?}", run.result);
        results.push(run.result);
    }
    // The first run applies the cluster; the second has nothing to do.
    let expected = [RunResult::Applied, RunResult::InSync];
    Ok(if results == expected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs git in `repo` as a throw-away identity, without the user's hooks or signing.
fn git(repo: &Path, args: &[&str]) -> Result<(), Box<dyn std::error::Error>> {
    let status = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "user.name=embed",
            "-c",
            "user.email=embed@proxops.invalid",
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("git {}: {status}", args.join(" ")).into())
    }
}

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
