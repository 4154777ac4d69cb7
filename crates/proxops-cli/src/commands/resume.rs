//! `proxops resume`.

use super::agent_url::{SuspensionArgs, set_suspension};
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
    #[command(flatten)]
    pub target: SuspensionArgs,
}

/// Runs `proxops resume`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    set_suspension(&args.target, false)
}
