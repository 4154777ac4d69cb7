//! `--agent URL`, `--token-file` and `--config`, shared by the commands that talk to a running
//! agent, and where an agent's control token comes from (for `proxops run` too).

use crate::error::{CommandError, ErrorKind};
use crate::session::runtime;
use proxops_agent::ControlToken;
use proxops_agent::client::{AgentClient, AgentClientError};
use proxops_model::config::ConfigFile;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The environment variable that holds the agent's control token when no file is named.
pub const TOKEN_ENV: &str = "PROXOPS_AGENT_TOKEN";

/// Where the agent is, and its control token.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The running agent's HTTP endpoint (see `proxops run --listen`; default: `listen` of
    /// --config, else http://127.0.0.1:9494).
    #[arg(long = "agent", value_name = "URL", env = "PROXOPS_AGENT")]
    pub url: Option<String>,
    /// A file holding the agent's control token (default: $PROXOPS_AGENT_TOKEN, else
    /// `agent.token-file` or `agent.token-env` of --config).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The agent's configuration file (as given to `proxops run --config`): its token and
    /// `listen` address.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// What `suspend` and `resume` act on, and the agent they tell.
#[derive(Debug, Clone, clap::Args)]
pub struct SuspensionArgs {
    /// The cluster.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// Only this resource, `KIND/NAME` (e.g. `VM/web-01`).
    #[arg(value_name = "KIND/NAME")]
    pub resource: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

impl AgentArgs {
    /// A client of the agent, with its token.
    pub fn client(&self) -> Result<AgentClient, CommandError> {
        let config = match &self.config {
            Some(path) => Some(read_agent_config(path)?),
            None => None,
        };
        let url = match (&self.url, &config) {
            (Some(url), _) => url.clone(),
            (None, Some((c, _))) => match c.listen.as_deref().and_then(|l| l.parse().ok()) {
                Some(addr) => local_url(addr),
                None => DEFAULT_URL.to_owned(),
            },
            (None, None) => DEFAULT_URL.to_owned(),
        };
        let token = control_token(
            self.token_file.as_deref(),
            config.as_ref().map(|(c, dir)| (c, dir.as_path())),
        )?;
        Ok(AgentClient::new(&url)
            .map_err(agent_error)?
            .with_token(token))
    }
}

const DEFAULT_URL: &str = "http://127.0.0.1:9494";

/// The URL a local client reaches an agent listening on `addr` at (an agent on every address
/// is reached on loopback).
fn local_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// An agent configuration file and the directory its relative paths start from.
pub fn read_agent_config(path: &Path) -> Result<(ConfigFile, PathBuf), CommandError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let config = super::run::read_config(&dir, &name)?.ok_or_else(|| {
        CommandError::usage(format!("no configuration file {}", path.display()), None)
    })?;
    Ok((config, dir))
}

/// The control token: from `file`, else `$PROXOPS_AGENT_TOKEN`, else the configuration's
/// `agent.token-file` (relative to its directory) or `agent.token-env`; `None` when none is
/// given. A source that is named but empty or unreadable is an error, never "no token".
pub fn control_token(
    file: Option<&Path>,
    config: Option<(&ConfigFile, &Path)>,
) -> Result<Option<ControlToken>, CommandError> {
    if let Some(f) = file {
        return read_token_file(f).map(Some);
    }
    if let Some(text) = std::env::var_os(TOKEN_ENV) {
        return token_from(&text.to_string_lossy(), &format!("${TOKEN_ENV}")).map(Some);
    }
    let Some((agent, dir)) = config.and_then(|(c, dir)| Some((c.agent.as_ref()?, dir))) else {
        return Ok(None);
    };
    if let Some(f) = &agent.token_file {
        return read_token_file(&dir.join(f)).map(Some);
    }
    if let Some(var) = &agent.token_env {
        let text = std::env::var(var).map_err(|_| {
            CommandError::config(format!(
                "`agent.token-env: {var}` names a variable that is not set"
            ))
            .hint(format!("set {var} to the agent's control token"))
        })?;
        return token_from(&text, &format!("${var}")).map(Some);
    }
    Ok(None)
}

fn read_token_file(path: &Path) -> Result<ControlToken, CommandError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CommandError::usage(
            format!("cannot read the agent token file {}: {e}", path.display()),
            None,
        )
    })?;
    token_from(&text, &path.display().to_string())
}

fn token_from(text: &str, what: &str) -> Result<ControlToken, CommandError> {
    ControlToken::new(text).ok_or_else(|| {
        CommandError::config(format!("the agent token in {what} is empty"))
            .hint("e.g. `head -c 32 /dev/urandom | base64 > /etc/proxops/agent.token`")
    })
}

/// An agent client error as a command error.
pub fn agent_error(e: AgentClientError) -> CommandError {
    match &e {
        AgentClientError::Unreachable { .. } => CommandError::unreachable(e.to_string())
            .hint("start the agent with `proxops run`, or point at it with --agent URL"),
        AgentClientError::Refused { status: 401, .. } => {
            CommandError::config(e.to_string()).hint(format!(
                "give the agent's control token with --token-file FILE, ${TOKEN_ENV} or \
                 --config (its `agent.token-file` or `agent.token-env`)"
            ))
        }
        // An unknown cluster or resource: the invocation's.
        AgentClientError::Refused { status: 404, .. } => CommandError::user(e.to_string()),
        AgentClientError::Refused { status, .. } if *status < 500 => {
            CommandError::new(ErrorKind::Refused, e.to_string())
        }
        AgentClientError::Refused { .. } | AgentClientError::Decode(_) => {
            CommandError::unreachable(e.to_string())
        }
        _ => CommandError::new(ErrorKind::Internal, e.to_string()),
    }
}

/// Suspends (`on`) or resumes a cluster, or one of its resources, on the agent, and says so.
pub fn set_suspension(target: &SuspensionArgs, on: bool) -> Result<ExitCode, CommandError> {
    let (agent, cluster, resource) = (&target.agent, &target.cluster, target.resource.as_deref());
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
