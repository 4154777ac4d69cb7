//! `proxops rollback`.

use crate::error::CommandError;
use crate::session::{ClusterPlanesArgs, RepoArgs};
use proxops_store::documents::hex;
use proxops_store::rollback::RollbackRequest;
use std::process::ExitCode;

/// Publish a historical desired snapshot of a cluster again, as a new forward commit.
///
/// REV must be a strict ancestor of the cluster's desired head, and some observed snapshot must
/// have held current receipts for every resource of REV. The new commit's parent is the current
/// head (refs never rewind); it holds REV's resource documents, each keeping the UID of the
/// incarnation that exists now, keeps the current deletion intents, records the reason and the
/// revisions in its message, and goes through the cluster's change gate. Exit status: 0 rolled
/// back, 1 refused, 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// The desired revision to restore (a commit of the desired plane's history).
    #[arg(long = "to", value_name = "REV")]
    pub to: String,
    /// Why (recorded in the commit).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Print the provenance (JSON) and publish nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub planes: ClusterPlanesArgs,
}

/// Runs `proxops rollback`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let store = args.planes.open(repo)?;
    let refs = super::get::cluster_refs(&store, std::slice::from_ref(&args.cluster))?
        .into_iter()
        .next()
        .ok_or_else(|| CommandError::usage(format!("no cluster `{}`", args.cluster), None))?;
    let to = store.resolve(&args.to).map_err(|e| {
        CommandError::usage(
            e.to_string(),
            Some("give a commit of the desired plane's history".into()),
        )
    })?;
    let outcome = store
        .rollback(&RollbackRequest::new(&refs, to, &args.reason).with_dry_run(args.dry_run))
        .map_err(CommandError::from)?;
    if args.dry_run {
        let text = serde_json::to_string_pretty(&outcome.provenance).map_err(CommandError::from)?;
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let branch = refs.desired_branch();
    match outcome.publication.as_ref().map(|p| (p, &p.candidate)) {
        Some((_, Some(c))) => println!(
            "{branch} unchanged (change gate pullRequest): rollback proposed as candidate {} at {}",
            c.refname.strip_prefix("refs/heads/").unwrap_or(&c.refname),
            &hex(c.commit)[..12]
        ),
        Some((p, None)) if p.publication.published => println!(
            "{branch} at {}: rolled back to {}",
            &hex(p.publication.head)[..12],
            &outcome.provenance.target_desired_revision[..12]
        ),
        _ => println!("{branch} already holds that content: nothing published"),
    }
    Ok(ExitCode::SUCCESS)
}
