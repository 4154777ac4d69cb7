//! `proxops validate`.

use crate::error::CommandError;
use crate::render::Format as Output;
use crate::session::{ClustersArgs, RepoArgs};
use proxops_model::report::ValidationReport;
use std::io::Write;
use std::process::ExitCode;

/// Check a GitOps repository: every cluster's config, composition and manifests, all at once.
///
/// Exit status: 0 when there is no error (warnings allowed), 1 when there is any error, 2 for
/// usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub clusters: ClustersArgs,
    /// Output format: `human`, miette's graphical report on stderr and a summary on stdout; or
    /// `json`, the `ValidationReport` JSON document on stdout.
    #[arg(long, value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// Runs `proxops validate`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let mut repo = crate::session::open(&dir, &args.clusters.names)?
        .ws
        .into_repo();
    // What only the planes can tell: a `fromPromotion` in a cluster never promoted.
    let store = proxops_store::Store::open(&dir).ok();
    let unresolvable = proxops_engine::planes::unresolvable_promotions(store.as_ref(), &repo);
    repo.diagnostics.extend(unresolvable);
    let deleted = proxops_engine::planes::deleting::still_composed(store.as_ref(), &repo);
    repo.diagnostics.extend(deleted);
    let mut out = std::io::stdout().lock();
    let written = match args.output {
        Output::Json => {
            let report = ValidationReport::new(&repo);
            serde_json::to_string_pretty(&report)
                .map_err(CommandError::from)
                .and_then(|s| writeln!(out, "{s}").map_err(CommandError::output))
        }
        Output::Human => {
            let mut err = std::io::stderr().lock();
            for d in &repo.diagnostics {
                let _ = writeln!(err, "{:?}", miette::Report::new(d.to_miette()));
            }
            crate::commands::validate::summary(&repo, &mut out).map_err(CommandError::output)
        }
    };
    written?;
    Ok(if repo.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One line per cluster, then the totals.
pub fn summary(repo: &proxops_model::Repository, out: &mut impl Write) -> std::io::Result<()> {
    for c in &repo.clusters {
        let state = if c.valid { "valid" } else { "INVALID" };
        let n = c.resources.len();
        writeln!(
            out,
            "cluster {}: {state}, {n} resource{}",
            c.name,
            if n == 1 { "" } else { "s" }
        )?;
    }
    let errors = repo.diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = repo.diagnostics.len() - errors;
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    writeln!(
        out,
        "{}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    )
}
