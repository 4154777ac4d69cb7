//! `proxops resume`.

use super::agent_url::{AgentArgs, agent_error};
use crate::error::CliError;
use crate::session::runtime;
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
    let client = args.agent.client()?;
    let s = runtime()?
        .block_on(client.resume(&args.cluster, args.resource.as_deref()))
        .map_err(agent_error)?;
    let what = match &s.resource {
        Some(r) => format!("{r} of cluster {}", s.cluster),
        None => format!("cluster {}", s.cluster),
    };
    println!(
        "{what}: resumed{}",
        if s.changed {
            ""
        } else {
            " (was not suspended)"
        }
    );
    Ok(ExitCode::SUCCESS)
}
