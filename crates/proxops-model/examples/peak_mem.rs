//! Peak resident memory and wall time of loading and validating one repository.
//!
//! Usage: `cargo run --release -p proxops-model --example peak_mem -- [<repo-dir> [<threads>]]`.
//! Without `<repo-dir>` (or with `-`), a repository of 10 clusters x 1,000 manifests is generated
//! into a temporary directory first (see `benches/support/scale.rs`). Without `<threads>`,
//! manifests are decoded on every core (the default of `load_repository`); `1` loads on the
//! calling thread only.
//!
//! The workspace forbids `unsafe` code, so a counting `#[global_allocator]` is not possible here;
//! the peak is the kernel's resident-set high-water mark instead (`VmHWM` of
//! `/proc/self/status`), reset just before the load through `/proc/self/clear_refs`. On systems
//! without procfs the memory figures print as unavailable; the timing still works.
//!
//! Exit status: 0 if the repository validates clean, 1 if it has errors, 2 on usage or I/O errors.

#[path = "../benches/support/scale.rs"]
mod scale;

use proxops_model::loader::load_repository_with_threads;
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Clusters of the generated repository.
const CLUSTERS: usize = 10;
/// Manifests per cluster of the generated repository.
const PER_CLUSTER: usize = 1000;

/// A `kB` field (`VmRSS`, `VmHWM`, ...) of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())?;
    Some(kb * 1024)
}

/// Resets the resident-set high-water mark to the current RSS (Linux 4.0+).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Formats a byte count as MiB.
fn mib(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{:.1} MiB ({b} bytes)", b as f64 / (1024.0 * 1024.0)),
        None => "unavailable".to_owned(),
    }
}

/// Runs the measurement; `Ok(true)` if the repository is valid.
fn run(args: &[String]) -> Result<bool, String> {
    if args.len() > 2 {
        return Err("too many arguments".to_owned());
    }
    let threads = match args.get(1) {
        None => None,
        Some(t) => Some(
            t.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("`{t}` is not a number of threads"))?,
        ),
    };
    // Keeps the generated repository alive until the end.
    let mut _tmp = None;
    let dir = match args.first().filter(|d| *d != "-") {
        Some(d) => PathBuf::from(d),
        None => {
            let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
            let stats = scale::generate(tmp.path(), CLUSTERS, PER_CLUSTER)
                .map_err(|e| format!("generating into {}: {e}", tmp.path().display()))?;
            println!(
                "generated {CLUSTERS} clusters x {PER_CLUSTER} manifests: {} files, {} bytes, in {}",
                stats.files,
                stats.bytes,
                tmp.path().display()
            );
            let dir = tmp.path().to_path_buf();
            _tmp = Some(tmp);
            dir
        }
    };
    let source = FsSource::new(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let registry = Registry::builtin();

    let rss_before = status_bytes("VmRSS");
    let reset = reset_peak();
    let start = Instant::now();
    let options = LoadOptions::default();
    let repo = match threads {
        None => load_repository(&source, &registry, &options),
        Some(n) => load_repository_with_threads(&source, &registry, &options, n),
    }
    .map_err(|e| format!("loading {}: {e}", dir.display()))?;
    let elapsed = start.elapsed();
    let peak = status_bytes("VmHWM");
    let rss_after = status_bytes("VmRSS");

    let resources: usize = repo.clusters.iter().map(|c| c.resources.len()).sum();
    let errors = repo.diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = repo.diagnostics.len() - errors;
    println!("repository:            {}", dir.display());
    println!(
        "loaded:                {} clusters, {resources} resources, {errors} errors, {warnings} warnings",
        repo.clusters.len()
    );
    println!(
        "load_repository time:  {:.1} ms",
        elapsed.as_secs_f64() * 1000.0
    );
    println!("RSS before load:       {}", mib(rss_before));
    println!("RSS after load:        {}", mib(rss_after));
    println!(
        "peak RSS (VmHWM):      {}{}",
        mib(peak),
        if reset {
            ""
        } else {
            " (high-water mark not reset: includes everything before the load)"
        }
    );
    println!(
        "peak RSS - RSS before: {}",
        mib(peak.zip(rss_before).map(|(p, b)| p.saturating_sub(b)))
    );
    let valid = repo.is_valid();
    let start = Instant::now();
    drop(repo);
    println!(
        "drop time:             {:.1} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    Ok(valid)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("error: the repository has errors (run `proxops validate --repo DIR`)");
            ExitCode::from(1)
        }
        Err(msg) => {
            eprintln!("error: {msg}");
            eprintln!("usage: peak_mem [<repo-dir> [<threads>]]");
            ExitCode::from(2)
        }
    }
}
