//! `proxops promote`.

use crate::error::CommandError;
use crate::session::{ClusterPlanesArgs, RepoArgs, load_from};
use proxops_store::documents::hex;
use proxops_store::promotion::PromotionRequest;
use std::process::ExitCode;

/// Promote one cluster's reconciled state into another.
///
/// The target cluster's `promotion.allowed-sources` must list the source. The source's
/// desired and observed heads and the repository's HEAD (the specification revision) are
/// pinned; every resource of the source's desired plane must have a current receipt (CLEAN),
/// else the promotion is refused and the others are named. The target's desired plane is then
/// built from the target's own composition at HEAD, exactly as `apply --planes` builds it, with
/// a `promotion.yaml` record of the pins, and published through the target's change gate. A
/// second identical promotion publishes nothing. Exit status: 0 promoted (or nothing to do), 1
/// refused, 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The source cluster.
    #[arg(long, value_name = "A")]
    pub from: String,
    /// The target cluster.
    #[arg(long, value_name = "B")]
    pub to: String,
    /// Check and show what would be published; publish nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub planes: ClusterPlanesArgs,
}

/// Runs `proxops promote`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let store = args.planes.remote.store(&dir)?;
    let source = store.source(None).map_err(CommandError::from)?;
    let loaded = load_from(&source, &dir, &[args.from.clone(), args.to.clone()])?;
    // The target's payloads are rendered as its own publications render them.
    let options =
        proxops_engine::planes::Planes::from_config(store.clone(), loaded.repo(), &args.to)
            .map_err(CommandError::from)?
            .desired_options();
    let outcome = store
        .promote(
            &PromotionRequest::new(&args.from, &args.to, loaded.repo(), source.commit())
                .with_dry_run(args.dry_run)
                .with_options(options),
        )
        .map_err(CommandError::from)?;
    let pins = &outcome.record.spec;
    let target = outcome.target.desired_branch();
    println!(
        "promote {} to {}: source desired {}@{}, observed {}@{}, specification {}",
        args.from,
        args.to,
        pins.source.desired_ref,
        &pins.source.desired_revision[..12],
        pins.source.observed_ref,
        pins.source
            .observed_revision
            .as_deref()
            .map_or("none", |r| &r[..12]),
        &pins.specification_revision[..12],
    );
    if outcome.already {
        println!("{target} already contains this promotion: nothing published");
        return Ok(ExitCode::SUCCESS);
    }
    let changes = &outcome.changes;
    for (label, keys) in [
        ("create", &changes.created),
        ("update", &changes.updated),
        ("delete", &changes.deleting),
        ("restore", &changes.restored),
        ("finalize", &changes.finalized),
    ] {
        for key in keys {
            println!("  {label:<8} {key}");
        }
    }
    let Some(publication) = &outcome.publication else {
        println!("dry run: {target} would get this promotion; nothing published");
        return Ok(ExitCode::SUCCESS);
    };
    match &publication.candidate {
        Some(c) => println!(
            "{target} unchanged (change gate pullRequest): candidate {} at {} ({})",
            c.refname.strip_prefix("refs/heads/").unwrap_or(&c.refname),
            &hex(c.commit)[..12],
            if c.created {
                "proposed"
            } else {
                "already proposed"
            }
        ),
        None => println!(
            "{target} at {} (published)",
            &hex(publication.publication.head)[..12]
        ),
    }
    Ok(ExitCode::SUCCESS)
}
