//! `proxops graph`.

use super::repo_dir;
use crate::error::CliError;
use proxops_graph::{ClusterGraph, Graph, GraphReport, check_repository};
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Show each cluster's dependency graph: the levels of the create order and the steps in each.
///
/// Exit status: 0 when every selected cluster has a graph, 1 when a cluster is invalid (its
/// problems go to stderr; the other clusters are still shown), 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository (default: the git work tree of the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Only this cluster (repeatable).
    #[arg(long = "cluster", value_name = "C")]
    pub clusters: Vec<String>,
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
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let source = FsSource::new(&dir).map_err(|e| {
        CliError::usage(
            format!("cannot open repository {}: {e}", dir.display()),
            Some("pass the repository directory with --repo DIR".into()),
        )
    })?;
    let registry = Registry::builtin();
    let options = LoadOptions {
        clusters: args.clusters.clone(),
    };
    let mut repo = load_repository(&source, &registry, &options)?;
    let graphs = check_repository(&registry, &mut repo);
    let mut err = std::io::stderr().lock();
    for d in repo.diagnostics.iter().filter(|d| d.is_error()) {
        let _ = writeln!(err, "{:?}", miette::Report::new(d.to_miette()));
    }
    let built: Vec<(&str, &Graph)> = graphs
        .iter()
        .filter_map(|c| c.graph.as_ref().map(|g| (c.name.as_str(), g)))
        .collect();
    let mut out = std::io::stdout().lock();
    let text = match args.format {
        Format::Json => {
            serde_json::to_string_pretty(&GraphReport::new(built.iter().copied()))
                .map_err(|e| CliError::Io(e.to_string()))?
                + "\n"
        }
        Format::Dot => proxops_graph::to_dot(built.iter().copied()),
        Format::Text => text(&graphs),
    };
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::Io(e.to_string()))?;
    Ok(if graphs.iter().all(|c| c.graph.is_some()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The text rendering: per cluster, each level with its steps and what each waits for.
fn text(graphs: &[ClusterGraph]) -> String {
    let mut out = String::new();
    for c in graphs {
        let Some(g) = &c.graph else {
            out += &format!("cluster {}: INVALID (see the errors above)\n", c.name);
            continue;
        };
        out += &format!(
            "cluster {}: {}, {}, {}\n",
            c.name,
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
