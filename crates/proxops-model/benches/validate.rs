//! Read+parse baseline versus full validation of generated repositories.
//!
//! Run with `cargo bench -p proxops-model --bench validate`. Each case generates its repository
//! once into a temporary directory (see `support/scale.rs`), checks that it validates clean, then
//! measures:
//!
//! - `read_parse`: read every `.yaml` file of the repository and parse it with
//!   [`proxops_model::yaml::parse_documents`], the YAML parse the loader does. The file list is
//!   collected once, outside the timed loop.
//! - `load_repository`: [`proxops_model::load_repository`] on an [`FsSource`] of the directory
//!   (discovery, reads, parse, decode, per-cluster validation, unlisted-file scan), which reads
//!   and decodes manifests on every core ([`std::thread::available_parallelism`]).
//! - `load_repository_1_thread`: the same on the calling thread only
//!   ([`load_repository_with_threads`] with 1 thread), to compare like with like against the
//!   single-threaded baseline.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/scale.rs"]
mod scale;

use criterion::{Criterion, SamplingMode, Throughput, criterion_main};
use proxops_model::loader::load_repository_with_threads;
use proxops_model::{FsSource, LoadOptions, Registry, load_repository, yaml::parse_documents};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every `.yaml` file under `dir`, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("list directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Reads and parses every file; returns the number of documents (so nothing is optimised away).
fn read_parse(files: &[PathBuf]) -> usize {
    let mut docs = 0;
    for path in files {
        let text = std::fs::read_to_string(path).expect("read yaml file");
        let parsed = parse_documents(&text).expect("valid yaml");
        docs += parsed.len();
        black_box(parsed);
    }
    docs
}

/// Loads and validates the repository at `dir` on `threads` threads (`None`: the default of
/// [`load_repository`]); returns the number of resources.
fn validate(dir: &Path, registry: &Registry, threads: Option<usize>) -> usize {
    let source = FsSource::new(dir).expect("repository directory");
    let options = LoadOptions::default();
    let repo = match threads {
        None => load_repository(&source, registry, &options),
        Some(n) => load_repository_with_threads(&source, registry, &options, n),
    }
    .expect("loadable");
    let resources = repo.clusters.iter().map(|c| c.resources.len()).sum();
    black_box(repo);
    resources
}

/// Generates `clusters` x `per_cluster` and benchmarks both measurements in one group.
fn bench_case(c: &mut Criterion, clusters: usize, per_cluster: usize, large: bool) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let stats = scale::generate(tmp.path(), clusters, per_cluster).expect("generate repository");
    let files = yaml_files(tmp.path());
    assert_eq!(files.len(), stats.files, "every generated file is .yaml");
    let registry = Registry::builtin();

    // The generated repository must validate clean, or the comparison is meaningless.
    let source = FsSource::new(tmp.path()).expect("repository directory");
    let repo = load_repository(&source, &registry, &LoadOptions::default()).expect("loadable");
    assert!(
        repo.is_valid(),
        "generated repository has errors: {:#?}",
        repo.diagnostics
    );
    assert_eq!(validate(tmp.path(), &registry, None), stats.manifests);
    assert_eq!(validate(tmp.path(), &registry, Some(1)), stats.manifests);
    assert_eq!(read_parse(&files), stats.files);
    drop(repo);

    let mut group = c.benchmark_group(format!("validate/{clusters}x{per_cluster}"));
    group.throughput(Throughput::Bytes(stats.bytes));
    group.sample_size(10);
    if large {
        // One iteration takes a large fraction of a second: same iteration count per sample.
        group.sampling_mode(SamplingMode::Flat);
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(8));
    } else {
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
    }
    group.bench_function("read_parse", |b| b.iter(|| read_parse(black_box(&files))));
    group.bench_function("load_repository", |b| {
        b.iter(|| validate(black_box(tmp.path()), &registry, None))
    });
    group.bench_function("load_repository_1_thread", |b| {
        b.iter(|| validate(black_box(tmp.path()), &registry, Some(1)))
    });
    group.finish();
}

/// 1 cluster x 100 manifests.
fn small(c: &mut Criterion) {
    bench_case(c, 1, 100, false);
}

/// 10 clusters x 1,000 manifests.
fn large(c: &mut Criterion) {
    bench_case(c, 10, 1000, true);
}

/// The benchmark group (in a module: `criterion_group!` emits an undocumented `pub fn`).
mod group {
    use super::{large, small};
    use criterion::criterion_group;

    criterion_group!(benches, small, large);
}

criterion_main!(group::benches);
