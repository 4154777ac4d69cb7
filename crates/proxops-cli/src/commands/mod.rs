//! One module per subcommand, each with an `Args` struct and one `run` function.

pub mod agent_url;
pub mod apply;
pub mod converge;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod get;
pub mod graph;
pub mod lease;
pub mod promote;
pub mod reconcile;
pub mod resume;
pub mod rollback;
pub mod run;
pub mod schema;
pub mod sim;
pub mod status;
pub mod suspend;
pub mod validate;

use crate::error::CliError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check a GitOps repository and report every problem at once.
    Validate(validate::Args),
    /// Write the JSON Schemas of the manifest kinds (for editors).
    Schema(schema::Args),
    /// Show each cluster's dependency graph: create order by level.
    Graph(graph::Args),
    /// Run the Proxmox VE API simulator as an HTTPS server.
    Sim(sim::Args),
    /// Show what apply would do, against live PVE state.
    Diff(diff::Args),
    /// Make each cluster match the repository.
    Apply(apply::Args),
    /// Apply cycles until nothing is left to do.
    Converge(converge::Args),
    /// Show desired resources joined with their receipts (from the git planes).
    Get(get::Args),
    /// Show each cluster's planes: desired and observed heads, resources by state.
    Status(status::Args),
    /// Plan and apply the example repository on embedded simulators (no PVE needed).
    Demo(demo::Args),
    /// Check config, credentials, TLS, authentication and the token's privileges per cluster.
    Doctor(doctor::Args),
    /// Run the agent: keep every cluster converged, with health, metrics and status over HTTP.
    Run(run::Args),
    /// Ask the running agent to reconcile a cluster now.
    Reconcile(reconcile::Args),
    /// Tell the running agent to leave a cluster or resource alone.
    Suspend(suspend::Args),
    /// Tell the running agent to reconcile a suspended cluster or resource again.
    Resume(resume::Args),
    /// Show or break a cluster's lease.
    Lease(lease::Args),
    /// Promote one cluster's reconciled state into another (a new desired commit of the target).
    Promote(promote::Args),
    /// Publish a historical desired snapshot of a cluster again, as a new forward commit.
    Rollback(rollback::Args),
}

/// Runs a subcommand.
pub fn run(command: Command) -> Result<ExitCode, CliError> {
    match command {
        Command::Validate(args) => validate::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Graph(args) => graph::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Apply(args) => apply::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Converge(args) => converge::run(&args),
        Command::Get(args) => get::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Suspend(args) => suspend::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::Lease(args) => lease::run(&args),
        Command::Promote(args) => promote::run(&args),
        Command::Rollback(args) => rollback::run(&args),
    }
}

/// The repository directory: `--repo`, else the git work tree holding the current directory,
/// else the current directory.
pub fn repo_dir(repo: Option<&Path>) -> Result<PathBuf, CliError> {
    if let Some(dir) = repo {
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Io(format!("cannot read the current directory: {e}")))?;
    Ok(cwd
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(&cwd)
        .to_path_buf())
}
