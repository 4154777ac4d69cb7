//! `proxops converge`.

use crate::error::CommandError;
use crate::session::RepoArgs;
use crate::writer::{CycleArgs, Writer};
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
    pub cycle: CycleArgs,
    /// Most cycles per cluster.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_cycles: usize,
}

/// Runs `proxops converge`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    Writer {
        holder: "converge",
        dir: &dir,
        cycle: &args.cycle,
        dry_run: false,
        confirm: false,
        max_cycles: args.max_cycles.max(1),
    }
    .run()
}
