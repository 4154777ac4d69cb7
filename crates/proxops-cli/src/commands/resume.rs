//! `proxops resume`.

use super::agent_url::{AgentArgs, set_suspension};
use crate::error::CommandError;
use std::process::ExitCode;

/// Tell the running agent to reconcile a suspended cluster or resource again.
///
/// The agent's control API needs its token: from --token-file FILE, else $PROXOPS_AGENT_TOKEN,
/// else `agent.token-file` or `agent.token-env` of the agent configuration given with
/// --config (which also gives the address, from its `listen`). A missing or wrong token is
/// refused (401), and so is a cluster or resource the repository does not declare (404).
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
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    set_suspension(&args.agent, &args.cluster, args.resource.as_deref(), false)
}
