//! `proxops schema`.

use crate::error::CommandError;
use proxops_model::Registry;
use proxops_model::schema::{combined_schema, schema_files};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write JSON Schema (draft-07) for every manifest kind, Stack and StackTemplate, and one
/// combined schema.
///
/// Without --out, prints the combined schema. Point an editor at it with a modeline:
/// `# yaml-language-server: $schema=<path>/proxops.schema.json`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write `<kind>.schema.json` per kind and `proxops.schema.json` into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `proxops schema`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let registry = Registry::builtin();
    let Some(dir) = &args.out else {
        let text = serde_json::to_string_pretty(&combined_schema(&registry))
            .map_err(CommandError::from)?;
        writeln!(std::io::stdout().lock(), "{text}").map_err(CommandError::output)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CommandError::io(format!("cannot create {}", dir.display()), e))?;
    for (name, text) in schema_files(&registry) {
        let path = dir.join(&name);
        // Write beside, then rename: an interrupted run never leaves a half-written schema.
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CommandError::io(format!("cannot write {}", path.display()), e))?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
