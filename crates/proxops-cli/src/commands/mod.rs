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

/// Runs a subcommand.
pub fn run(command: Command) -> Result<ExitCode, CommandError> {
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
        Command::Verify(args) => verify::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Suspend(args) => suspend::run(&args),
        Command::Resume(args) => resume::run(&args),
        Command::Lease(args) => lease::run(&args),
        Command::Promote(args) => promote::run(&args),
        Command::Rollback(args) => rollback::run(&args),
        Command::Delete(args) => delete::run(&args),
        Command::Adopt(args) => adopt::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Completions(args) => completions::run(&args),
        Command::Man(args) => man::run(&args),
    }
}

impl Command {
    /// The repository the command reads, when its `--repo` says (`main` reads the default log
    /// level from its `proxops.yaml`).
    pub fn repo(&self) -> Option<&Path> {
        match self {
            Command::Validate(a) => a.repo.dir.as_deref(),
            Command::Graph(a) => a.repo.dir.as_deref(),
            Command::Diff(a) => a.plan.live.repo.dir.as_deref(),
            Command::Apply(a) => a.cycle.plan.live.repo.dir.as_deref(),
            Command::Converge(a) => a.cycle.plan.live.repo.dir.as_deref(),
            Command::Get(a) => a.planes.repo.dir.as_deref(),
            Command::Status(a) => a.planes.repo.dir.as_deref(),
            Command::Verify(a) => a.planes.repo.dir.as_deref(),
            Command::Doctor(a) => a.live.repo.dir.as_deref(),
            Command::Adopt(a) => a.repo.dir.as_deref(),
            Command::Init(a) => a.dir.as_deref(),
            Command::Lease(a) => a.planes.repo.dir.as_deref(),
            Command::Promote(a) => a.planes.repo.dir.as_deref(),
            Command::Rollback(a) => a.planes.repo.dir.as_deref(),
            Command::Delete(a) => a.planes.repo.dir.as_deref(),
            Command::Demo(a) => Some(&a.repo),
            Command::Run(a) => a.repo.as_deref(),
            Command::Schema(_)
            | Command::Sim(_)
            | Command::Reconcile(_)
            | Command::Suspend(_)
            | Command::Resume(_)
            | Command::Completions(_)
            | Command::Man(_) => None,
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
