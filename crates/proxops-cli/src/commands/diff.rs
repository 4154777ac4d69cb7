//! `proxops diff`.

use super::repo_dir;
use crate::error::CliError;
use crate::render;
use crate::session::{BackendArgs, SourceArgs, TuningArgs, runtime};
use proxops_engine::plan::Plan;
use proxops_engine::planner::plan_cluster;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Show what `apply` would do: each cluster's plan against live PVE state. Changes nothing.
///
/// Exit status: 0 (with `--detailed-exitcode`: 0 nothing to do, 2 changes planned), 1 when a
/// cluster is invalid or cannot be planned, 2 for usage or I/O problems.
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
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Human)]
    pub output: Output,
    /// Exit 2 when changes are planned, 0 when there are none.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// Output formats of `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A table per cluster, grouped by level.
    Human,
    /// The `Plan` JSON document.
    Json,
}

/// Runs `proxops diff`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let (mut loaded, _) = args.source.load(&dir, &args.clusters, false)?;
    args.tuning.apply_to(&mut loaded);
    let mut failed = loaded.any_invalid();
    let plans = runtime()?.block_on(async {
        let mut plans = Vec::new();
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
            match plan_cluster(
                &conn.client,
                &cluster.name,
                graph,
                &conn.plan_options(cluster),
            )
            .await
            {
                Ok(p) => {
                    failed |= !p.errors.is_empty();
                    plans.push(p);
                }
                Err(e) => {
                    eprintln!("error: cluster {}: {e}", cluster.name);
                    failed = true;
                }
            }
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
        }
        plans
    });
    let changes = plans.iter().any(|p| !p.is_empty());
    let mut out = std::io::stdout().lock();
    let text = match args.output {
        Output::Json => {
            serde_json::to_string_pretty(&Plan::new(plans))
                .map_err(|e| CliError::Io(e.to_string()))?
                + "\n"
        }
        Output::Human => plans.iter().map(render::plan).collect(),
    };
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::Io(e.to_string()))?;
    Ok(if failed {
        ExitCode::from(1)
    } else if args.detailed_exitcode && changes {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
