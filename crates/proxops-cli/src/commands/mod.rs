//! One module per subcommand, each with an `Args` struct and one `run` function.

pub mod adopt;
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

/// The subcommands. Each one's help is its `Args` struct's doc comment (first line: the
/// summary in `proxops --help`), so variants carry no doc of their own.
#[allow(missing_docs)]
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Validate(validate::Args),
    Schema(schema::Args),
    Graph(graph::Args),
    Sim(sim::Args),
    Diff(diff::Args),
    Apply(apply::Args),
    Converge(converge::Args),
    Get(get::Args),
    Status(status::Args),
    Demo(demo::Args),
    Doctor(doctor::Args),
    Run(run::Args),
    Reconcile(reconcile::Args),
    Suspend(suspend::Args),
    Resume(resume::Args),
    Lease(lease::Args),
    Promote(promote::Args),
    Rollback(rollback::Args),
    Adopt(adopt::Args),
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
        Command::Adopt(args) => adopt::run(&args),
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
