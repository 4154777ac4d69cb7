//! `proxops reconcile`.

use super::agent_url::{AgentArgs, agent_error};
use crate::error::CommandError;
use crate::render::Format as Output;
use crate::session::runtime;
use std::process::ExitCode;

/// Ask the running agent to reconcile a cluster now, and wait for the cycle to end.
///
/// Exit status: 0 when the cycle converged, applied cleanly or (drift mode `report`) only
/// found drift; 1 when it failed, was invalid, suspended or held by another agent's lease.
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
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Output format: `human`, a summary; or `json`, the cluster's state as `/status` shows it.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// Runs `proxops reconcile`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let client = args.agent.client()?;
    let state = runtime()?
        .block_on(client.reconcile(&args.cluster))
        .map_err(agent_error)?;
    let Some(cycle) = &state.last_cycle else {
        return Err(CommandError::unreachable(format!(
            "the agent ran no cycle of cluster {}",
            args.cluster
        )));
    };
    match args.output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&state).map_err(CommandError::from)?
        ),
        Output::Human => {
            println!(
                "cluster {}: {}: {} planned, {} succeeded, {} failed, {} deferred ({:.1}s)",
                state.name,
                cycle.result.label(),
                cycle.planned,
                cycle.succeeded,
                cycle.failed,
                cycle.deferred,
                cycle.duration_seconds
            );
            for e in &cycle.errors {
                println!("  {e}");
            }
            for a in &cycle.anomalies {
                println!("  anomaly: {}: {}", a.subject, a.message);
            }
        }
    }
    Ok(if cycle.result.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
