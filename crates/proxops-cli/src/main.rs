//! The `proxops` command: parses flags and calls into the ProxOps libraries. No domain logic here.

mod commands;
mod demo;
mod error;
mod logging;
mod memory;
mod render;
mod session;
mod writer;

use clap::{CommandFactory, FromArgMatches, Parser};
use proxops_model::config::LogLevel;
use proxops_model::settings::FlagSettings;
use std::process::ExitCode;

/// Keeps Proxmox VE clusters in the state a git repository describes.
// The version names the commit the binary was built from (build.rs).
#[derive(Debug, Parser)]
#[command(
    name = "proxops",
    version = env!("PROXOPS_VERSION"),
    about,
    propagate_version = true
)]
struct Cli {
    /// Log level on stderr: debug, info, warn or error (default: `log.level` of proxops.yaml,
    /// else warn). `PROXOPS_LOG` (a tracing filter such as `proxops_pve=debug`) overrides it.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = parse_level)]
    log_level: Option<LogLevel>,
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, value_name = "FORMAT", default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    #[command(flatten)]
    repo: session::RepoArgs,
    #[command(subcommand)]
    command: commands::Command,
}

fn parse_level(text: &str) -> Result<LogLevel, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => Ok(LogLevel::Debug),
        "info" => Ok(LogLevel::Info),
        "warn" | "warning" => Ok(LogLevel::Warn),
        "error" => Ok(LogLevel::Error),
        _ => Err("expected debug, info, warn or error".into()),
    }
}

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(x) => x,
        Err(e) => {
            let _ = e.print();
            // Help and version are successes; any other parse failure is a usage error.
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(2),
            };
        }
    };
    // The default level comes from the repository's proxops.yaml, so find the repository the
    // subcommand reads (`--repo`, else its own default, else the current git work tree).
    let repo = cli
        .repo
        .dir
        .clone()
        .or_else(|| cli.command.default_repo().map(std::path::Path::to_path_buf));
    // The agent's own configuration file (`run --config`) comes before the repository's.
    let agent_config = cli
        .command
        .agent_config()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|text| proxops_model::settings::configured_log_level(&text));
    // A long-running agent says what it does; one-shot commands only warn.
    let default = match cli.command {
        commands::Command::Run(_) => LogLevel::Info,
        _ => LogLevel::Warn,
    };
    let level = cli
        .log_level
        .or(agent_config)
        .or_else(|| session::configured_log_level(repo.as_deref()))
        .unwrap_or(default);
    logging::init(level, cli.log_format);
    session::set_flags(FlagSettings {
        log_level: cli.log_level,
        ..FlagSettings::default()
    });
    match commands::run(cli.command, &cli.repo) {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}
