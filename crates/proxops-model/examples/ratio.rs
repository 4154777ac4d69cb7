//! The benchmark's two measurements, interleaved, with CPU time next to wall time.
//!
//! Usage: `cargo run --release -p proxops-model --example ratio -- [<repo-dir> [<runs>]]`.
//! Without `<repo-dir>` (or with `-`), a repository of 10 clusters x 1,000 manifests is generated
//! into a temporary directory first (see `benches/support/scale.rs`).
//!
//! Each run times, one after the other: the read+parse baseline of `benches/validate.rs`,
//! `load_repository_with_threads` on one thread, and `load_repository` (every core), each
//! including dropping what it built. On a shared machine, wall time includes the time other
//! processes hold the CPU; the calling thread's CPU time (`/proc/thread-self/schedstat`, Linux)
//! does not, which makes the single-threaded figures comparable between busy and idle runs. The
//! kernel updates that figure only at scheduler ticks, so it is printed only when a measurement
//! takes 50 ms or more.
//! Minimum and median over the runs are printed, and the ratios of the minima and of the medians.
//!
//! Exit status: 0 on success, 2 on usage or I/O errors.

#[path = "../benches/support/scale.rs"]
mod scale;

use proxops_model::loader::load_repository_with_threads;
use proxops_model::{FsSource, LoadOptions, Registry, load_repository, yaml::parse_documents};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The calling thread's CPU time in nanoseconds, if the kernel reports it.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Every `.yaml` file under `dir`, sorted.
fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", d.display()))?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The baseline: read and parse every file, dropping each tree straight away.
fn read_parse(files: &[PathBuf]) -> Result<usize, String> {
    let mut docs = 0;
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = parse_documents(&text).map_err(|e| format!("{}: {e:?}", path.display()))?;
        docs += parsed.len();
        black_box(parsed);
    }
    Ok(docs)
}

/// Wall and CPU milliseconds of one call of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, Option<f64>, T) {
    let cpu = thread_cpu_ns();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    let cpu = cpu
        .zip(thread_cpu_ns())
        .map(|(a, b)| b.saturating_sub(a) as f64 / 1e6);
    (wall, cpu, out)
}

/// Minimum and median.
fn stats(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let min = values.first().copied().unwrap_or(f64::NAN);
    let median = values.get(values.len() / 2).copied().unwrap_or(f64::NAN);
    (min, median)
}

/// The figures of one measurement over all runs.
#[derive(Default)]
struct Series {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Series {
    fn push(&mut self, wall: f64, cpu: Option<f64>) {
        self.wall.push(wall);
        if let Some(c) = cpu {
            self.cpu.push(c);
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    if args.len() > 2 {
        return Err("too many arguments".to_owned());
    }
    let runs = match args.get(1) {
        None => 10,
        Some(r) => r
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{r}` is not a number of runs"))?,
    };
    // Keeps the generated repository alive until the end.
    let mut _tmp = None;
    let dir = match args.first().filter(|d| *d != "-") {
        Some(d) => PathBuf::from(d),
        None => {
            let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
            scale::generate(tmp.path(), 10, 1000)
                .map_err(|e| format!("generating into {}: {e}", tmp.path().display()))?;
            let dir = tmp.path().to_path_buf();
            _tmp = Some(tmp);
            dir
        }
    };
    let files = yaml_files(&dir)?;
    let registry = Registry::builtin();
    let options = LoadOptions::default();
    let load = |threads: Option<usize>| -> Result<usize, String> {
        let source = FsSource::new(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let repo = match threads {
            None => load_repository(&source, &registry, &options),
            Some(n) => load_repository_with_threads(&source, &registry, &options, n),
        }
        .map_err(|e| format!("loading {}: {e}", dir.display()))?;
        Ok(repo.clusters.iter().map(|c| c.resources.len()).sum())
    };
    // One untimed round to warm the page cache and the allocator.
    read_parse(&files)?;
    load(Some(1))?;
    let (mut base, mut one, mut all) = (Series::default(), Series::default(), Series::default());
    for _ in 0..runs {
        let (wall, cpu, out) = timed(|| read_parse(&files));
        out?;
        base.push(wall, cpu);
        let (wall, cpu, out) = timed(|| load(Some(1)));
        out?;
        one.push(wall, cpu);
        let (wall, _, out) = timed(|| load(None));
        out?;
        all.push(wall, None);
    }
    println!(
        "{} files in {}, {runs} runs; min / median in ms",
        files.len(),
        dir.display()
    );
    let (bw, bwm) = stats(&mut base.wall);
    let (bc, bcm) = stats(&mut base.cpu);
    let (ow, owm) = stats(&mut one.wall);
    let (oc, ocm) = stats(&mut one.cpu);
    let (aw, awm) = stats(&mut all.wall);
    // CPU time moves in scheduler ticks: meaningless for short measurements.
    let precise = bw >= 50.0 && !base.cpu.is_empty() && !one.cpu.is_empty();
    if precise {
        println!("read_parse               wall {bw:7.1} / {bwm:7.1}   cpu {bc:7.1} / {bcm:7.1}");
        println!(
            "load_repository 1 thread wall {ow:7.1} / {owm:7.1}   cpu {oc:7.1} / {ocm:7.1}   ratio wall {:.2} / {:.2}, cpu {:.2} / {:.2}",
            ow / bw,
            owm / bwm,
            oc / bc,
            ocm / bcm
        );
    } else {
        println!("read_parse               wall {bw:7.1} / {bwm:7.1}");
        println!(
            "load_repository 1 thread wall {ow:7.1} / {owm:7.1}   ratio wall {:.2} / {:.2}",
            ow / bw,
            owm / bwm
        );
    }
    println!(
        "load_repository all     wall {aw:7.1} / {awm:7.1}   ratio wall {:.2} / {:.2}",
        aw / bw,
        awm / bwm
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            eprintln!("usage: ratio [<repo-dir> [<runs>]]");
            ExitCode::from(2)
        }
    }
}
