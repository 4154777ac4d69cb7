//! `proxops suspend`.

use super::agent_url::{SuspensionArgs, set_suspension};
use crate::error::CommandError;
use std::process::ExitCode;

/// Tell the running agent to leave a cluster, or one of its resources, alone until resumed.
///
/// A suspended resource is neither changed nor pruned; the agent keeps suspensions across
/// restarts (in its data directory). To suspend a resource in git instead, annotate it
/// `proxops/reconcile: disabled`.
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

/// Runs `proxops suspend`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    set_suspension(&args.target, true)
}
