//! `proxops delete`.

use crate::error::CommandError;
use crate::session::{ClusterPlanesArgs, RepoArgs};
use proxops_model::ResourceKey;
use proxops_store::deletion::{DeletionRequestOptions, DeletionTarget};
use proxops_store::documents::hex;
use std::process::ExitCode;

/// Mark resources for deletion: the next cycle tears their guests down, even though their
/// manifests are still in the repository.
///
/// Records a deletion intent for each resource's current incarnation (its UID) in the
/// cluster's desired plane, through the change gate like any desired change; `Stack/NAME`
/// marks every resource the Stack projects. The next `apply` or agent pass deletes the guests
/// (dependants first: a resource still declared that depends on a marked one keeps it, with an
/// anomaly), under the usual prune guards, and records their teardown. The manifests are not
/// created again while the intent stands; it stays until they leave the composition
/// (`validate` warns while they are still listed). Exit status: 0 marked, 1 refused (a stale
/// UID, a resource the desired plane does not hold), 2 for usage problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to delete: `Kind/name` (e.g. `VM/web-01`), or `Stack/name`.
    #[arg(value_name = "KIND/NAME", required = true)]
    pub targets: Vec<String>,
    /// The cluster.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// Refuse unless the resource is still this incarnation (its UID, as `proxops get -o yaml`
    /// shows it): the deletion is of what you looked at. Only with one target.
    #[arg(long, value_name = "UID")]
    pub uid: Option<String>,
    /// Why (recorded in the intents and the commit).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Say what would be marked; publish nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub planes: ClusterPlanesArgs,
}

fn parse_target(text: &str) -> Result<ResourceKey, CommandError> {
    match text.split_once('/') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(ResourceKey {
                kind: kind.to_owned(),
                name: name.to_owned(),
            })
        }
        _ => Err(CommandError::usage(
            format!("`{text}` is not KIND/NAME"),
            Some("e.g. VM/web-01, LXC/pihole or Stack/k3s".into()),
        )),
    }
}

/// Runs `proxops delete`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    if args.uid.is_some() && args.targets.len() != 1 {
        return Err(CommandError::usage(
            "--uid fences one resource: name exactly one",
            None,
        ));
    }
    let mut targets = Vec::new();
    for text in &args.targets {
        targets.push(DeletionTarget::new(parse_target(text)?).with_uid(args.uid.clone()));
    }
    let store = args.planes.open(repo)?;
    let refs = super::get::cluster_refs(&store, std::slice::from_ref(&args.cluster))?
        .into_iter()
        .next()
        .ok_or_else(|| CommandError::usage(format!("no cluster `{}`", args.cluster), None))?;
    let request = DeletionRequestOptions::new(&refs, targets)
        .with_reason(args.reason.clone())
        .with_dry_run(args.dry_run);
    let outcome = store
        .request_deletion(&request)
        .map_err(CommandError::from)?;
    let cluster = &args.cluster;
    for m in &outcome.marked {
        let state = match (m.already, args.dry_run) {
            (true, _) => "already marked for deletion",
            (false, true) => "would be marked for deletion",
            (false, false) => "marked for deletion",
        };
        println!("{} (uid {}) of cluster {cluster}: {state}", m.key, m.uid);
    }
    if outcome.marked.is_empty() {
        println!("nothing to mark: the Stack projects no resource any more");
    }
    let branch = refs.desired_branch();
    match outcome.publication.as_ref().map(|p| (p, &p.candidate)) {
        Some((_, Some(c))) => println!(
            "{branch} unchanged (change gate pullRequest): proposed as candidate {} at {}; it takes effect once merged",
            c.refname.strip_prefix("refs/heads/").unwrap_or(&c.refname),
            &hex(c.commit)[..12]
        ),
        Some((p, None)) if p.publication.published => println!(
            "{branch} at {}: the next cycle tears it down",
            &hex(p.publication.head)[..12]
        ),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}
