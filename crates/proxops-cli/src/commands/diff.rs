//! `proxops diff`.

use crate::error::CommandError;
use crate::render;
use crate::render::Format as Output;
use crate::session::{PlanArgs, RepoArgs, open_store, runtime};
use proxops_engine::plan::Plan;
use proxops_engine::{Event, PlanState, ReconcileOptions, Reconciler, Source};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Show what `apply` would do: each cluster's plan against live PVE state. Changes nothing.
///
/// In a git work tree the plan uses the desired plane's previous documents, as `apply` does, so
/// keys removed from a manifest show as removals (`--no-planes`: reported, not planned).
///
/// Exit status: 0 (with `--detailed-exitcode`: 0 every cluster in sync, 2 changes planned, 3
/// nothing can be planned but a cluster does not match: anomalies, blocked or locked
/// resources, prunes held back, consumers waiting for what their references read), 1 when a cluster is invalid or cannot be planned, 2 for usage
/// or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Do not read the planes' previous documents (removed keys are then only reported).
    #[arg(long)]
    pub no_planes: bool,
    /// Output format: `human`, a table per cluster grouped by level; or `json`, the `Plan` JSON
    /// document.
    #[arg(long, value_enum, default_value_t = Output::Human)]
    pub output: Output,
    /// Exit 2 when changes are planned, 3 when a cluster is stuck or a consumer waits, 0 when
    /// every cluster is in sync.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// Runs `proxops diff`. With `--detailed-exitcode` every error exits 1, as Terraform's does:
/// 2 and 3 then mean only "changes" and "stuck", never a usage error.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    match plan(args, repo) {
        Err(e) if args.detailed_exitcode => {
            e.report();
            Ok(ExitCode::from(1))
        }
        other => other,
    }
}

fn plan(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let plan = &args.plan;
    let dir = repo.resolve()?;
    let (mut loaded, revision) = plan.source.load(&dir, &plan.live.clusters.names, false)?;
    plan.tuning.apply_to(&mut loaded);
    let mut failed = loaded.any_invalid();
    // Read-only: the planes' previous documents, never a lease or a publication.
    let store = (!args.no_planes && dir.join(".git").exists())
        .then(|| open_store(&dir))
        .transpose()?;
    let registry = Arc::clone(loaded.registry());
    let options = ReconcileOptions::default()
        .with_dry_run(true)
        .with_flags(loaded.flags.clone())
        .with_events(Arc::new(|e: &Event<'_>| {
            if let Event::Warning { cluster, message } = e {
                eprintln!("warning: cluster `{cluster}`: {message}");
            }
        }));
    let plans = runtime()?.block_on(async {
        let mut plans = Vec::new();
        for (cluster, graph) in loaded.clusters() {
            let mut builder = Reconciler::builder(
                Arc::clone(&registry),
                plan.live.backend.backend(&cluster.name),
            )
            .options(options.clone());
            if let Some(store) = &store {
                builder = builder.store(store.clone()).record_planes(true);
            }
            let source = Source::new(loaded.repo(), Some(graph), loaded.dir()).at(revision);
            let (_, stop) = tokio::sync::watch::channel(false);
            let mut run = builder.build().cycle(source, &cluster.name, stop).await;
            for e in &run.errors {
                eprintln!("error[{}]: cluster {}: {e}", e.code(), cluster.name);
                failed = true;
            }
            if let Some(cycle) = run.cycles.pop() {
                failed |= !cycle.plan.errors.is_empty();
                plans.push(cycle.plan);
            }
        }
        plans
    });
    let changes = plans.iter().any(|p| p.state() == PlanState::Changes);
    // Waiting consumers are not in sync either: exit 3 like a stuck cluster.
    let stuck = plans
        .iter()
        .any(|p| matches!(p.state(), PlanState::Stuck | PlanState::Waiting));
    let mut out = std::io::stdout().lock();
    let text = match args.output {
        Output::Json => {
            serde_json::to_string_pretty(&Plan::new(plans)).map_err(CommandError::from)? + "\n"
        }
        Output::Human => plans.iter().map(render::plan).collect(),
    };
    out.write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if failed {
        ExitCode::from(1)
    } else if args.detailed_exitcode && changes {
        ExitCode::from(2)
    } else if args.detailed_exitcode && stuck {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}
