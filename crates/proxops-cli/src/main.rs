//! The `proxops` command: parses flags and calls into the ProxOps libraries. No domain logic here.

mod commands;
mod error;
mod render;
mod session;

use clap::Parser;
use std::process::ExitCode;

/// Keeps Proxmox VE clusters in the state a git repository describes.
#[derive(Debug, Parser)]
#[command(name = "proxops", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}
