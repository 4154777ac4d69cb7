//! Writes a large, valid ProxOps repository for benchmarks and profiling.
//!
//! Usage: `cargo run -p proxops-model --example scale -- <out-dir> [clusters] [per-cluster]`
//! (defaults: 10 clusters of 1000 manifests). `<out-dir>` must be new or empty.
//! Prints what was written; on error prints it and exits with status 2.

#[path = "../benches/support/scale.rs"]
mod scale;

use std::path::PathBuf;
use std::process::ExitCode;

/// Default number of clusters.
const DEFAULT_CLUSTERS: usize = 10;
/// Default number of manifests per cluster.
const DEFAULT_PER_CLUSTER: usize = 1000;

/// Parses the optional count at `args[index]`, falling back to `default`.
fn count(args: &[String], index: usize, what: &str, default: usize) -> Result<usize, String> {
    match args.get(index) {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .map_err(|e| format!("invalid {what} {v:?}: {e}")),
    }
}

/// Parses `<out-dir> [clusters] [per-cluster]`.
fn parse(args: &[String]) -> Result<(PathBuf, usize, usize), String> {
    if args.len() > 3 {
        return Err("too many arguments".to_owned());
    }
    let out = args.first().ok_or_else(|| "missing <out-dir>".to_owned())?;
    let clusters = count(args, 1, "clusters", DEFAULT_CLUSTERS)?;
    let per_cluster = count(args, 2, "per-cluster", DEFAULT_PER_CLUSTER)?;
    Ok((PathBuf::from(out), clusters, per_cluster))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, clusters, per_cluster) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(msg) => {
            eprintln!("error: {msg}");
            eprintln!(
                "usage: scale <out-dir> [clusters (default {DEFAULT_CLUSTERS})] [per-cluster (default {DEFAULT_PER_CLUSTER})]"
            );
            return ExitCode::from(2);
        }
    };
    match scale::generate(&out, clusters, per_cluster) {
        Ok(stats) => {
            println!(
                "wrote {} files ({} manifests, {} bytes) for {clusters} clusters x {per_cluster} manifests to {}",
                stats.files,
                stats.manifests,
                stats.bytes,
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: generating into {}: {e}", out.display());
            ExitCode::from(2)
        }
    }
}
