//! `proxops man`.

use crate::error::CommandError;
use clap::CommandFactory;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Print the proxops(1) manual page (roff), or write one page per subcommand.
///
/// `proxops man | man -l -` reads it. With --dir, writes `proxops.1`, `proxops-apply.1`, ...
/// (one page per subcommand), uncompressed; the Debian package ships them gzipped.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write every page into this directory (created if missing) instead of printing the main
    /// page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs `proxops man`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let mut command = crate::Cli::command().disable_help_subcommand(true);
    // Built, the subcommands know their full names (`proxops apply`) and page names.
    command.build();
    let Some(dir) = &args.dir else {
        let page = render(&command).map_err(CommandError::output)?;
        std::io::stdout()
            .lock()
            .write_all(&page)
            .map_err(CommandError::output)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CommandError::io(format!("cannot create {}", dir.display()), e))?;
    write_pages(&command, dir)?;
    Ok(ExitCode::SUCCESS)
}

/// The page of `command`, dated with the commit the binary was built from (no date when that
/// is unknown: a page's date never depends on when it was generated).
fn render(command: &clap::Command) -> std::io::Result<Vec<u8>> {
    // roff's zero-width `\&` holds the empty date's place in `.TH` (an empty word would shift
    // the later fields left: clap_mangen does not quote it).
    let date = match env!("PROXOPS_BUILD_DATE") {
        "" => r"\&",
        date => date,
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .date(date)
        .manual("ProxOps Manual")
        .render(&mut page)?;
    Ok(page)
}

/// Writes the page of `command` and of each of its visible subcommands, depth first.
fn write_pages(command: &clap::Command, dir: &Path) -> Result<(), CommandError> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let name = format!(
        "{}.1",
        command.get_display_name().unwrap_or(command.get_name())
    );
    let path = dir.join(&name);
    let page = render(command).map_err(CommandError::output)?;
    // Write beside, then rename: an interrupted run never leaves a half-written page.
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, page)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| CommandError::io(format!("cannot write {}", path.display()), e))?;
    println!("wrote {}", path.display());
    Ok(())
}
