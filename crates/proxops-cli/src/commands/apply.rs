//! `proxops apply`.

use super::repo_dir;
use crate::error::CliError;
use crate::render;
use crate::session::{BackendArgs, load, runtime};
use proxops_engine::cycle::plan_options;
use proxops_engine::execute::{ExecOptions, Progress, execute};
use proxops_engine::planner::plan_cluster;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Make each cluster match the repository: plan, show the plan, then execute it.
///
/// Independent actions run in parallel; a failed action defers its dependants to the next run.
/// Ctrl-C starts nothing new and waits for the actions in flight. Exit status: 0 when every
/// action succeeded, 1 when one failed or a cluster is invalid, 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository (default: the git work tree of the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Only this cluster (repeatable).
    #[arg(long = "cluster", value_name = "C")]
    pub clusters: Vec<String>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Show the plan and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
}

/// Runs `proxops apply`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let loaded = load(&dir, &args.clusters)?;
    let budget = loaded
        .repo
        .config
        .as_ref()
        .and_then(|c| c.reconcile.as_ref())
        .and_then(|r| r.prune_budget);
    let mut failed = loaded.any_invalid();
    let runtime = runtime()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stopping: no new actions; waiting for the ones in flight");
            let _ = stop_tx.send(true);
        }
    });
    let outcome: Result<(), CliError> = runtime.block_on(async {
        for (cluster, graph) in loaded.clusters() {
            let conn = match args.backend.connect(&loaded, cluster).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    failed = true;
                    continue;
                }
            };
            for w in &conn.warnings {
                eprintln!("warning: {w}");
            }
            let plan = match plan_cluster(
                &conn.client,
                &cluster.name,
                graph,
                &plan_options(cluster, budget),
            )
            .await
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: cluster {}: {e}", cluster.name);
                    failed = true;
                    continue;
                }
            };
            print!("{}", render::plan(&plan));
            if args.dry_run || plan.is_empty() {
                continue;
            }
            if !args.yes && !confirm(&cluster.name, plan.actions.len())? {
                println!("cluster {}: not applied", cluster.name);
                continue;
            }
            let options = ExecOptions {
                stop: Some(stop_rx.clone()),
                progress: Some(progress(&cluster.name)),
                ..ExecOptions::default()
            };
            let report = execute(&conn.client, &plan, &options).await;
            println!("{}", render::summary(&report));
            failed |= !report.all_succeeded();
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
        }
        Ok(())
    });
    outcome?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Asks on the terminal; refuses without one.
fn confirm(cluster: &str, actions: usize) -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "apply needs confirmation and stdin is not a terminal",
            Some("pass --yes to apply without asking, or --dry-run to only show the plan".into()),
        ));
    }
    print!("apply {actions} action(s) to cluster {cluster}? [y/N] ");
    std::io::stdout()
        .flush()
        .map_err(|e| CliError::Io(e.to_string()))?;
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| CliError::Io(e.to_string()))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Progress on stderr: a spinner per running action on a terminal, a line per ended action
/// otherwise.
fn progress(cluster: &str) -> proxops_engine::execute::ProgressFn {
    let cluster = cluster.to_owned();
    if !std::io::stderr().is_terminal() {
        return Arc::new(move |p: Progress<'_>| {
            if let Progress::Ended(a, r) = p {
                eprintln!("{}", render::result_line(&cluster, a, r));
            }
        });
    }
    let bars = indicatif::MultiProgress::new();
    let running: std::sync::Mutex<std::collections::HashMap<usize, indicatif::ProgressBar>> =
        std::sync::Mutex::new(std::collections::HashMap::new());
    Arc::new(move |p: Progress<'_>| match p {
        Progress::Started(a) => {
            let bar = bars.add(indicatif::ProgressBar::new_spinner());
            bar.set_message(render::started_line(&cluster, a));
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            if let Ok(mut map) = running.lock() {
                map.insert(a.id, bar);
            }
        }
        Progress::Ended(a, r) => {
            let bar = running.lock().ok().and_then(|mut map| map.remove(&a.id));
            match bar {
                Some(bar) => bar.finish_with_message(render::result_line(&cluster, a, r)),
                None => eprintln!("{}", render::result_line(&cluster, a, r)),
            }
        }
    })
}
