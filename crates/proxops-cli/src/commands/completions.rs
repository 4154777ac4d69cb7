//! `proxops completions`.

use crate::error::CommandError;
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// Print proxops's completion script for a shell: bash, zsh, fish, elvish or powershell.
///
/// Bash: `proxops completions bash > /usr/share/bash-completion/completions/proxops` (or
/// `~/.local/share/bash-completion/completions/proxops`). Zsh: write `_proxops` into a directory
/// of `$fpath`. Fish: `proxops completions fish > ~/.config/fish/completions/proxops.fish`.
/// The Debian package installs the bash, zsh and fish scripts.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Runs `proxops completions`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let mut command = crate::Cli::command();
    // Generated into memory first: clap_complete panics on a failed write, and a closed pipe
    // (`| head`) is an error to report, not a crash.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "proxops", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .map_err(CommandError::output)?;
    Ok(ExitCode::SUCCESS)
}
