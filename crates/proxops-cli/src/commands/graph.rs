//! `proxops graph`.

use crate::error::CommandError;
use crate::session::{ClustersArgs, RepoArgs};
use proxops_graph::{Graph, GraphReport};
use std::io::Write;
use std::process::ExitCode;

/// Show each cluster's dependency graph: the levels of the create order and the steps in each.
///
/// Exit status: 0 when every selected cluster has a graph, 1 when a cluster is invalid (its
/// problems go to stderr; the other clusters are still shown), 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub clusters: ClustersArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Output formats of `graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Levels and their steps, in create order.
    Text,
    /// Graphviz DOT (`proxops graph --format dot | dot -Tsvg > graph.svg`).
    Dot,
    /// The `Graph` JSON document.
    Json,
}

/// Runs `proxops graph`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let loaded = crate::session::load(&dir, &args.clusters.names)?;
    // Every selected cluster, with its graph when it is valid.
    let graphs: Vec<(&str, Option<&Graph>)> = loaded
        .repo()
        .clusters
        .iter()
        .map(|c| {
            let graph = loaded.graphs().iter().find(|(n, _)| *n == c.name);
            (c.name.as_str(), graph.map(|(_, g)| g))
        })
        .collect();
    let built: Vec<(&str, &Graph)> = graphs
        .iter()
        .filter_map(|(name, g)| g.map(|g| (*name, g)))
        .collect();
    let mut out = std::io::stdout().lock();
    let text = match args.format {
        Format::Json => {
            serde_json::to_string_pretty(&GraphReport::new(built.iter().copied()))
                .map_err(CommandError::from)?
                + "\n"
        }
        Format::Dot => proxops_graph::to_dot(built.iter().copied()),
        Format::Text => text(&graphs),
    };
    out.write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if graphs.iter().all(|(_, g)| g.is_some()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The text rendering: per cluster, each level with its steps and what each waits for.
fn text(graphs: &[(&str, Option<&Graph>)]) -> String {
    let mut out = String::new();
    for (cluster, graph) in graphs {
        let Some(g) = graph else {
            out += &format!("cluster {cluster}: INVALID (see the errors above)\n");
            continue;
        };
        out += &format!(
            "cluster {cluster}: {}, {}, {}\n",
            plural(g.resource_count(), "resource"),
            plural(g.step_count(), "step"),
            plural(g.level_count(), "level")
        );
        let name = |s: &proxops_graph::Step| {
            let mut n = g.key(s.resource).to_string();
            if let Some(vmid) = s.vmid {
                n += &format!(" ({vmid})");
            }
            n
        };
        let width = g.steps().iter().map(|s| name(s).len()).max().unwrap_or(0);
        let node_width = g
            .steps()
            .iter()
            .map(|s| s.node.as_deref().map_or(1, str::len))
            .max()
            .unwrap_or(0);
        for (level, steps) in g.levels().enumerate() {
            out += &format!("  level {level}\n");
            for s in steps {
                let node = s.node.as_deref().unwrap_or("-");
                let mut line = format!("    {:<width$}  {node}", name(s));
                if !g.prerequisites(s.id).is_empty() {
                    let after: Vec<String> = g
                        .prerequisites(s.id)
                        .iter()
                        .map(|p| {
                            let p = g.step(*p);
                            let mut n = g.key(p.resource).to_string();
                            // Name the node when the prerequisite has one step per node.
                            if g.steps_of(p.resource).len() > 1
                                && let Some(node) = &p.node
                            {
                                n += &format!("@{node}");
                            }
                            n
                        })
                        .collect();
                    let w = 4 + width + 2 + node_width;
                    line = format!("{line:<w$}  after {}", after.join(", "));
                }
                out += line.trim_end();
                out.push('\n');
            }
        }
    }
    out
}
