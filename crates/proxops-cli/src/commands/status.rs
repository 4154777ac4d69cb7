//! `proxops status`.

use super::get::{cluster_refs, table};
use crate::error::CommandError;
use crate::session::{PlanesReadArgs, RepoArgs};
use proxops_engine::planes::{ClusterStatus, Head, StatusList, cluster_status};
use std::io::Write;
use std::process::ExitCode;

/// Show each cluster's git planes: the desired and observed heads, resources by state (CLEAN,
/// READY, WAIT, DELETING) and when a cycle last recorded receipts.
///
/// A cluster whose directory is gone from the repository while its desired plane remains is
/// named on stderr: its guests are left alone until it returns or the branch is deleted.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub planes: PlanesReadArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Output formats of `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One row per cluster.
    Table,
    /// The `ClusterStatusList` document.
    Json,
}

/// Runs `proxops status`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let store = args.planes.open(repo)?;
    let mut clusters = Vec::new();
    for refs in cluster_refs(&store, &args.planes.clusters.names)? {
        clusters.push(cluster_status(&store, &refs).map_err(CommandError::from)?);
    }
    let text = match args.output {
        Output::Table => render_table(&clusters),
        Output::Json => {
            serde_json::to_string_pretty(&StatusList::new(clusters)).map_err(CommandError::from)?
                + "\n"
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    if args.planes.clusters.names.is_empty() {
        for v in vanished(&store) {
            eprintln!("warning[proxops::planes::vanished]: {v}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Clusters whose desired plane outlived their directory at HEAD.
fn vanished(store: &proxops_store::Store) -> Vec<proxops_engine::reconcile::Vanished> {
    let Ok(source) = store.source(None) else {
        return Vec::new();
    };
    let registry = proxops_model::Registry::builtin();
    match proxops_model::load_repository(&source, &registry, &proxops_model::LoadOptions::default())
    {
        Ok(repo) => {
            let known: Vec<&str> = repo.clusters.iter().map(|c| c.name.as_str()).collect();
            proxops_engine::reconcile::vanished_clusters(store, &known)
        }
        Err(_) => Vec::new(),
    }
}

fn head(h: &Head) -> String {
    match &h.revision {
        Some(rev) => format!("{}@{}", h.refname, rev.chars().take(12).collect::<String>()),
        None => format!("{}@missing", h.refname),
    }
}

fn render_table(clusters: &[ClusterStatus]) -> String {
    let mut rows = vec![
        [
            "CLUSTER",
            "DESIRED",
            "OBSERVED",
            "RECONCILIATION",
            "LAST-CYCLE",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for c in clusters {
        let counts: Vec<String> = [
            ("clean", c.counts.clean),
            ("ready", c.counts.ready),
            ("wait", c.counts.wait),
            ("deleting", c.counts.deleting),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s}={n}"))
        .collect();
        rows.push(vec![
            c.cluster.clone(),
            head(&c.desired),
            head(&c.observed),
            if counts.is_empty() {
                "none".to_owned()
            } else {
                counts.join(" ")
            },
            c.observed.time.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    table(&rows)
}
