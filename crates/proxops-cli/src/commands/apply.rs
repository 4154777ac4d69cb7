//! `proxops apply`.

use crate::error::CommandError;
use crate::session::RepoArgs;
use crate::writer::{CycleArgs, Writer};
use std::process::ExitCode;

/// Make each cluster match the repository: plan, show the plan, then execute it.
///
/// Independent actions run in parallel; a failed action defers its dependants to the next run.
/// Ctrl-C starts nothing new and waits for the actions in flight. Exit status: 0 when every
/// cluster is in sync or every action succeeded with nothing left in the way; 1 when an action
/// failed, a cluster is invalid, leased by another writer, or stuck (anomalies, blocked or
/// locked resources, prunes held back); 2 for usage or I/O problems.
///
/// In a git work tree the repository is read at its `HEAD` commit and the cycle is recorded in
/// the git planes (`--no-planes` turns that off): each cluster's desired plane
/// (`proxops/desired/<cluster>`) is published before its plan runs and receipts of what it
/// reconciled (`proxops/observed/<cluster>`) after; see `proxops get` and `proxops status`.
/// With `planes.change-gate: pullRequest` a change is proposed as a candidate branch
/// `proxops/candidates/<cluster>/<id>` instead, and the cycle reconciles the live desired head.
/// Each cluster's lease is held while it is applied (see `proxops lease`): a cluster an agent or
/// another apply is reconciling is refused.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub cycle: CycleArgs,
    /// Show the plan and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
}

/// Runs `proxops apply`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    Writer {
        holder: "apply",
        dir: &dir,
        cycle: &args.cycle,
        dry_run: args.dry_run,
        confirm: !args.yes && !args.dry_run,
        max_cycles: 1,
    }
    .run()
}
