//! `--agent URL`, shared by the commands that talk to a running agent.

use crate::error::CliError;
use proxops_engine::agent::client::{AgentClient, AgentClientError};

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
