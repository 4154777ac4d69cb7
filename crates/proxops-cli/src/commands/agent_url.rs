//! `--agent URL`, shared by the commands that talk to a running agent.

use crate::error::CliError;
use crate::session::runtime;
use proxops_engine::agent::client::{AgentClient, AgentClientError};
use std::process::ExitCode;

/// Where the agent is.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The running agent's HTTP endpoint (see `proxops run --listen`).
    #[arg(
        long = "agent",
        value_name = "URL",
        env = "PROXOPS_AGENT",
        default_value = "http://127.0.0.1:9494"
    )]
    pub url: String,
}

impl AgentArgs {
    /// A client of the agent.
    pub fn client(&self) -> Result<AgentClient, CliError> {
        AgentClient::new(&self.url).map_err(agent_error)
    }
}

/// An agent client error as a command error.
pub fn agent_error(e: AgentClientError) -> CliError {
    match e {
        AgentClientError::Unreachable { .. } => CliError::usage(
            e.to_string(),
            Some("start the agent with `proxops run`, or point at it with --agent URL".into()),
        ),
        other => CliError::Io(other.to_string()),
    }
}

/// Suspends (`on`) or resumes a cluster, or one of its resources, on the agent, and says so.
pub fn set_suspension(
    agent: &AgentArgs,
    cluster: &str,
    resource: Option<&str>,
    on: bool,
) -> Result<ExitCode, CliError> {
    let client = agent.client()?;
    let runtime = runtime()?;
    let s = if on {
        runtime.block_on(client.suspend(cluster, resource))
    } else {
        runtime.block_on(client.resume(cluster, resource))
    }
    .map_err(agent_error)?;
    let what = match &s.resource {
        Some(r) => format!("{r} of cluster {}", s.cluster),
        None => format!("cluster {}", s.cluster),
    };
    let done = match (on, s.changed) {
        (true, true) => "suspended",
        (true, false) => "suspended (already)",
        (false, true) => "resumed",
        (false, false) => "resumed (was not suspended)",
    };
    println!("{what}: {done}");
    Ok(ExitCode::SUCCESS)
}
