//! `proxops resume`.

use super::agent_url::{AgentArgs, set_suspension};
use crate::error::CliError;
use std::process::ExitCode;

/// Tell the running agent to reconcile a suspended cluster or resource again.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// Only this resource, `KIND/NAME`.
    #[arg(value_name = "KIND/NAME")]
    pub resource: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Runs `proxops resume`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    set_suspension(&args.agent, &args.cluster, args.resource.as_deref(), false)
}
