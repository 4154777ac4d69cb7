//! `proxops converge`.

use super::repo_dir;
use crate::error::CliError;
use crate::render;
use crate::session::{BackendArgs, SourceArgs, TuningArgs, runtime};
use proxops_engine::cycle::reconcile;
use std::path::PathBuf;
use std::process::ExitCode;

/// Apply cycles until one plans nothing (or `--max-cycles` is reached), without asking.
///
/// Exit status: 0 when every cluster converged, 1 when one did not (or is invalid), 2 for usage
/// or I/O problems.
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
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
    /// Most cycles per cluster.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_cycles: usize,
}

/// Runs `proxops converge`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let (mut loaded, _) = args.source.load(&dir, &args.clusters, false)?;
    args.tuning.apply_to(&mut loaded);
    let mut failed = loaded.any_invalid();
    runtime()?.block_on(async {
        for (cluster, graph) in loaded.clusters() {
            let conn = match args.backend.connect(&loaded, cluster).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    failed = true;
                    continue;
                }
            };
            let options = conn.plan_options(cluster);
            let exec = conn.exec_options();
            let mut converged = false;
            for cycle in 1..=args.max_cycles.max(1) {
                match reconcile(&conn.client, &cluster.name, graph, &options, &exec, false).await {
                    Ok(c) => {
                        println!("-- cycle {cycle}");
                        print!("{}", render::plan(&c.plan));
                        if let Some(report) = &c.report {
                            println!("{}", render::summary(report));
                        }
                        if c.plan.is_empty() {
                            converged = true;
                            break;
                        }
                    }
                    Err(e) => {
                        eprintln!("error: cluster {}: {e}", cluster.name);
                        break;
                    }
                }
            }
            if !converged {
                eprintln!(
                    "cluster {} did not converge in {} cycles",
                    cluster.name, args.max_cycles
                );
                failed = true;
            }
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
        }
    });
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
