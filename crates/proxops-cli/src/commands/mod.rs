//! One module per subcommand, each with an `Args` struct and one `run` function.

pub mod adopt;
pub mod agent_url;
pub mod apply;
pub mod completions;
pub mod converge;
pub mod delete;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod get;
pub mod graph;
pub mod init;
pub mod lease;
pub mod man;
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
pub mod verify;

use crate::error::CommandError;
use crate::session::RepoArgs;
use std::path::Path;
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
    Verify(verify::Args),
    Demo(demo::Args),
    Doctor(doctor::Args),
    Run(run::Args),
    Reconcile(reconcile::Args),
    Suspend(suspend::Args),
    Resume(resume::Args),
    Lease(lease::Args),
    Promote(promote::Args),
    Rollback(rollback::Args),
    Delete(delete::Args),
    Adopt(adopt::Args),
    Init(init::Args),
    Completions(completions::Args),
    Man(man::Args),
}

/// Runs a subcommand on the repository of `--repo`.
pub fn run(command: Command, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    match command {
        Command::Validate(args) => validate::run(&args, repo),
        Command::Schema(args) => schema::run(&args),
        Command::Graph(args) => graph::run(&args, repo),
        Command::Sim(args) => sim::run(&args),
        Command::Diff(args) => diff::run(&args, repo),
        Command::Doctor(args) => doctor::run(&args, repo),
        Command::Apply(args) => apply::run(&args, repo),
        Command::Demo(args) => demo::run(&args, repo),
        Command::Converge(args) => converge::run(&args, repo),
        Command::Get(args) => get::run(&args, repo),
        Command::Status(args) => status::run(&args, repo),
        Command::Verify(args) => verify::run(&args, repo),
        Command::Run(args) => run::run(&args, repo),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Suspend(args) => suspend::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::Lease(args) => lease::run(&args, repo),
        Command::Promote(args) => promote::run(&args, repo),
        Command::Rollback(args) => rollback::run(&args, repo),
        Command::Delete(args) => delete::run(&args, repo),
        Command::Adopt(args) => adopt::run(&args, repo),
        Command::Init(args) => init::run(&args, repo),
        Command::Completions(args) => completions::run(&args),
        Command::Man(args) => man::run(&args),
    }
}

impl Command {
    /// The repository the command reads when `--repo` is not given, where that is not the
    /// current git work tree: `demo`'s example, `init`'s `DIR` (`main` reads the default log
    /// level from its `proxops.yaml`).
    pub fn default_repo(&self) -> Option<&Path> {
        match self {
            Command::Demo(_) => Some(Path::new(demo::DEFAULT_REPO)),
            Command::Init(a) => a.dir.as_deref(),
            _ => None,
        }
    }

    /// The agent configuration file the command reads (`run --config`, and the agent
    /// clients' `--config`).
    pub fn agent_config(&self) -> Option<&Path> {
        match self {
            Command::Run(a) => a.config.as_deref(),
            Command::Reconcile(a) => a.agent.config.as_deref(),
            Command::Suspend(a) => a.target.agent.config.as_deref(),
            Command::Resume(a) => a.target.agent.config.as_deref(),
            _ => None,
        }
    }
}
