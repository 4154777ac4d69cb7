//! `proxops converge`.

use crate::error::CommandError;
use crate::session::RepoArgs;
use crate::session::{BackendArgs, RemoteArgs, SourceArgs, TuningArgs};
use crate::writer::{PlanesArgs, Writer};
use std::process::ExitCode;

/// Apply cycles until one plans nothing (or `--max-cycles` is reached), without asking.
///
/// The cycles of one run share the cluster's lease and its prune budget: `--prune-budget N`
/// deletes at most N guests over the whole run, and the rest are reported as held back. A
/// cycle that can plan nothing more while the cluster still does not match (anomalies, locked
/// or blocked resources, prunes held back) ends the run as not converged. In a git work tree
/// every cycle is recorded in the planes, as with `apply` (`--no-planes` turns that off).
///
/// Exit status: 0 when every cluster converged, 1 when one did not (stuck, failed, leased or
/// invalid), 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
    #[command(flatten)]
    pub planes: PlanesArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Never restart a running guest for a change PVE keeps pending until its next start: such
    /// a change is reported "pending until restart" and the cluster is not converged (exit 1).
    #[arg(long)]
    pub no_restart: bool,
    /// Most cycles per cluster.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_cycles: usize,
}

/// Runs `proxops converge`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let dir = args.repo.resolve()?;
    Writer {
        holder: "converge",
        dir: &dir,
        clusters: &args.repo.clusters,
        backend: &args.backend,
        source: &args.source,
        tuning: &args.tuning,
        planes: &args.planes,
        remote: &args.remote,
        dry_run: false,
        confirm: false,
        restarts: !args.no_restart,
        max_cycles: args.max_cycles.max(1),
    }
    .run()
}
