//! `proxops adopt`.

use crate::error::CommandError;
use crate::render::Format as Output;
use crate::session::{BackendArgs, RepoArgs, load, runtime};
use proxops_engine::adopt::{
    AdoptContext, AdoptReport, AdoptedObject, ObjectOutcome, Outcome, Selection, adopt_live,
    adopt_objects, manifest_path, write, write_objects,
};
use proxops_model::kinds::ObjectClass;
use std::io::Write;
use std::process::ExitCode;

/// Write manifests for guests, or with `--kind` cluster objects, that ProxOps did not create,
/// from what PVE has. Changes nothing in PVE.
///
/// Each guest becomes `<kind>/<cluster>/<name>.yaml` (typed fields where ProxOps has one,
/// `pve-config` for the rest, every key it cannot declare listed in a comment and the report),
/// and its entry is appended to `clusters/<cluster>/resources.yaml`. A guest that carries a
/// ProxOps identity, sits on a node outside the allowlist or at a vmid the repository declares
/// is refused with the reason (exit 1). With `--kind Storage` (`Pool`, `BackupJob`,
/// `ResourceMapping`, `User`, `Group`, `Role`, `Acl`) the arguments are the objects' ids (an
/// ACL's: its path), and the next plan takes each over without rewriting it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cluster to adopt into.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// The guests to adopt (with `--kind`: the objects' ids).
    #[arg(
        value_name = "VMID|ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub targets: Vec<String>,
    /// Every guest (with `--kind`: every object of the kind) without a ProxOps identity, not
    /// yet declared.
    #[arg(long)]
    pub all: bool,
    /// Adopt cluster objects of this kind instead of guests.
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Print the manifests and the report; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Output format: `human`, what was written (with `--dry-run`: the manifests) and each
    /// guest's unplaced keys; or `json`, the `AdoptReport` of each guest as a JSON list.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// Runs `proxops adopt`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let loaded = load(&dir, std::slice::from_ref(&args.cluster))?;
    let cluster = loaded.repo().cluster(&args.cluster).ok_or_else(|| {
        CommandError::usage(
            format!("no cluster `{}` in {}", args.cluster, dir.display()),
            Some("name a directory under clusters/".into()),
        )
    })?;
    if let Some(kind) = &args.kind {
        let class = ObjectClass::ALL
            .into_iter()
            .find(|c| c.kind().eq_ignore_ascii_case(kind))
            .ok_or_else(|| {
                let kinds: Vec<&str> = ObjectClass::ALL.iter().map(|c| c.kind()).collect();
                CommandError::usage(
                    format!("`{kind}` is not a kind of cluster object"),
                    Some(format!(
                        "one of: {}; guests are adopted without --kind",
                        kinds.join(", ")
                    )),
                )
            })?;
        return run_objects(args, &dir, &loaded, cluster, class);
    }
    let ctx = AdoptContext::for_cluster(cluster);
    let selection = if args.all {
        Selection::All
    } else {
        let vmids = args
            .targets
            .iter()
            .map(|t| {
                t.parse::<u32>().map_err(|_| {
                    CommandError::usage(
                        format!("`{t}` is not a vmid"),
                        Some("to adopt a cluster object, name its kind with --kind".into()),
                    )
                })
            })
            .collect::<Result<Vec<u32>, CommandError>>()?;
        Selection::Vmids(vmids)
    };
    let outcomes = runtime()?.block_on(async {
        let conn = args.backend.connect(&loaded, cluster).await?;
        let out = adopt_live(&conn.client, &ctx, &selection).await;
        // adopt wrote nothing to the simulator; a failed shutdown only loses nothing.
        if let Some(sim) = conn.sim
            && let Err(e) = sim.shutdown().await
        {
            eprintln!("warning: stopping the simulator: {e}");
        }
        out.map_err(CommandError::from)
    })?;
    let mut refused = false;
    let mut adopted = Vec::new();
    for (_, outcome) in &outcomes {
        match outcome {
            Outcome::Adopted(a) => adopted.push(a.as_ref()),
            Outcome::Refused(r) => {
                eprintln!("error[proxops::adopt::refused]: {r}");
                refused = true;
            }
            other => {
                eprintln!("error[proxops::adopt::refused]: {other:?}");
                refused = true;
            }
        }
    }
    let mut text = String::new();
    match args.output {
        Output::Json => {
            let reports: Vec<&AdoptReport> = adopted.iter().map(|a| &a.report).collect();
            text = serde_json::to_string_pretty(&reports).map_err(CommandError::from)? + "\n";
        }
        Output::Human => {
            for a in &adopted {
                let path = manifest_path(&args.cluster, a);
                let (t, p, r) = a.report.counts();
                if args.dry_run {
                    text.push_str(&format!("--- {}\n{}", path.display(), a.to_yaml()));
                }
                text.push_str(&format!(
                    "vmid {} -> {} ({t} keys typed, {p} via pve-config, {r} reported)\n",
                    a.report.vmid,
                    path.display()
                ));
                for note in &a.report.notes {
                    text.push_str(&format!("  note: {note}\n"));
                }
            }
        }
    }
    if !args.dry_run && !adopted.is_empty() {
        let written = write(&dir, &args.cluster, &adopted)?;
        if written.composition_rewritten {
            text.push_str(&format!(
                "note: clusters/{}/resources.yaml was rewritten in canonical form (its comments and layout are gone): its list could not be edited in place\n",
                args.cluster
            ));
        }
    }
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if refused {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `proxops adopt --kind <Kind>`: the cluster objects of one kind.
fn run_objects(
    args: &Args,
    dir: &std::path::Path,
    loaded: &crate::session::Loaded,
    cluster: &proxops_model::Cluster,
    class: ObjectClass,
) -> Result<ExitCode, CommandError> {
    let ids = (!args.all).then_some(args.targets.as_slice());
    let outcomes = runtime()?.block_on(async {
        let conn = args.backend.connect(loaded, cluster).await?;
        let out = adopt_objects(&conn.client, cluster, class, ids).await;
        if let Some(sim) = conn.sim
            && let Err(e) = sim.shutdown().await
        {
            eprintln!("warning: stopping the simulator: {e}");
        }
        out.map_err(CommandError::from)
    })?;
    let mut refused = false;
    let mut adopted: Vec<&AdoptedObject> = Vec::new();
    for o in &outcomes {
        match o {
            ObjectOutcome::Adopted(a) => adopted.push(a),
            ObjectOutcome::Refused { id, reason } => {
                // Asked for by name: a refusal fails the command; with --all it is a note.
                if args.all {
                    eprintln!("note: {} `{id}` left alone: {reason}", class.kind());
                } else {
                    eprintln!(
                        "error[proxops::adopt::refused]: {} `{id}`: {reason}",
                        class.kind()
                    );
                    refused = true;
                }
            }
            other => {
                eprintln!("error[proxops::adopt::refused]: {other:?}");
                refused = true;
            }
        }
    }
    let mut text = String::new();
    match args.output {
        Output::Json => {
            let docs: Vec<&serde_json::Value> = adopted.iter().map(|a| &a.manifest).collect();
            text = serde_json::to_string_pretty(&docs).map_err(CommandError::from)? + "\n";
        }
        Output::Human => {
            for a in &adopted {
                let path = a.path(&cluster.name);
                if args.dry_run {
                    text.push_str(&format!("--- {}\n{}", path.display(), a.to_yaml()));
                }
                text.push_str(&format!("{} `{}` -> {}\n", a.kind, a.id, path.display()));
                for note in &a.notes {
                    text.push_str(&format!("  note: {note}\n"));
                }
            }
        }
    }
    if !args.dry_run && !adopted.is_empty() {
        let written = write_objects(dir, &cluster.name, &adopted)?;
        if written.composition_rewritten {
            text.push_str(&format!(
                "note: clusters/{}/resources.yaml was rewritten in canonical form (its comments and layout are gone): its list could not be edited in place\n",
                cluster.name
            ));
        }
    }
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if refused {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
