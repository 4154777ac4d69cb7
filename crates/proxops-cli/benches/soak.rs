//! Soak: the agent (`proxops run`, this package's binary, as a child process) on N clusters of
//! M manifests each (one ISO held by four nodes, M - 1 VMs mounting it), each cluster a
//! simulator in this process, for a duration of passes.
//!
//! Reports the agent's resident memory (`VmRSS` of its process) after the first pass, after the
//! first converged pass, at its highest and at the end, and the PVE requests of each converged
//! pass (from the agent's `/metrics`) against the plan bound: per cluster, guests +
//! (node, storage) pairs + nodes + 2 (see BENCHMARKS.md, "Engine plan and apply").
//!
//! `cargo bench -p proxops-cli --bench soak -- --duration 10m` (also `--clusters 10`,
//! `--manifests 1000`, `--interval 15s`, `--parallel 4`, `--task-time 1ms`; or the variables
//! `SOAK_DURATION`, `SOAK_CLUSTERS`, ...). The first pass creates every guest; the duration
//! counts from the end of it. The agent inherits the environment (`_RJEM_MALLOC_CONF`, ...);
//! `SOAK_WRAP` runs it under a profiler (`SOAK_WRAP="heaptrack -o /tmp/agent"`).
//!
//! RSS is sampled between passes, a third of an interval (at most 2 s) after a pass ended: the
//! level the agent idles at, after `proxops run` handed the pass's freed memory back. Exit
//! status 1 when RSS at the end, or at any sample, is more than 10% above its level after the
//! first pass, or a converged pass made more requests than the bound.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proxops_model::config::parse_duration;
use proxops_pve_sim::{ApiToken, SimConfig, SimHandle, State, TaskDurations};
use proxops_test_support::sim::node_with_default_storages;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NODES: [&str; 4] = ["pve01", "pve02", "pve03", "pve04"];

struct Settings {
    duration: Duration,
    clusters: usize,
    manifests: usize,
    interval: Duration,
    parallel: usize,
    task_time: Duration,
}

fn setting(args: &[String], flag: &str, var: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| std::env::var(var).ok())
}

fn settings() -> Settings {
    let args: Vec<String> = std::env::args().collect();
    let d = |flag: &str, var: &str, default: &str| {
        let text = setting(&args, flag, var).unwrap_or_else(|| default.to_owned());
        parse_duration(&text).unwrap_or_else(|| panic!("{flag}: `{text}` is not a duration"))
    };
    let n = |flag: &str, var: &str, default: usize| {
        setting(&args, flag, var)
            .map(|t| {
                t.parse()
                    .unwrap_or_else(|_| panic!("{flag}: `{t}` is not a number"))
            })
            .unwrap_or(default)
    };
    Settings {
        duration: d("--duration", "SOAK_DURATION", "5m"),
        clusters: n("--clusters", "SOAK_CLUSTERS", 10).max(1),
        manifests: n("--manifests", "SOAK_MANIFESTS", 1000).max(2),
        interval: d("--interval", "SOAK_INTERVAL", "15s"),
        parallel: n("--parallel", "SOAK_PARALLEL", 4).max(1),
        task_time: d("--task-time", "SOAK_TASK_TIME", "1ms"),
    }
}

fn empty_cluster(name: &str) -> State {
    State {
        cluster_name: name.into(),
        nodes: NODES
            .iter()
            .map(|n| node_with_default_storages(n))
            .collect(),
        ..State::default()
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The repository: `clusters/soak-NN/` with the simulator's endpoint, an ISO and VMs.
fn generate(dir: &Path, sims: &[(String, SimHandle)], manifests: usize) {
    write(&dir.join("proxops.yaml"), "pve:\n  auth: token\n");
    let head = "apiVersion: proxops/v1alpha1\n";
    let nodes: String = NODES.iter().map(|n| format!("    - {n}\n")).collect();
    for (name, sim) in sims {
        let c = dir.join("clusters").join(name);
        write(
            &c.join("config.yaml"),
            &format!(
                "pve:\n  clusters:\n    {name}:\n      base-url: https://{}\n      fingerprint: {}\n      nodes: [{}]\n",
                sim.addr,
                sim.fingerprint,
                NODES.join(", ")
            ),
        );
        let mut listing = String::from("resources:\n");
        write(
            &dir.join(format!("iso/{name}/soak-iso.yaml")),
            &format!(
                "{head}kind: ISO\nmetadata:\n  name: soak-iso\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: soak.iso\n  url: https://example.invalid/soak.iso\n"
            ),
        );
        listing.push_str(&format!("  - ../../iso/{name}/soak-iso.yaml\n"));
        for i in 0..manifests - 1 {
            let node = NODES[i % NODES.len()];
            let vmid = 1000 + i;
            write(
                &dir.join(format!("vm/{name}/vm-{i:04}.yaml")),
                &format!(
                    "{head}kind: VM\nmetadata:\n  name: vm-{i:04}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  hardware:\n    cdrom:\n      iso: soak-iso\n"
                ),
            );
            listing.push_str(&format!("  - ../../vm/{name}/vm-{i:04}.yaml\n"));
        }
        write(&c.join("resources.yaml"), &listing);
    }
    for args in [
        vec!["init", "-q", "-b", "main"],
        vec!["add", "-A"],
        vec!["commit", "-q", "-m", "soak"],
    ] {
        let ok = Command::new("git")
            .current_dir(dir)
            .args(&args)
            .env("GIT_AUTHOR_NAME", "soak")
            .env("GIT_AUTHOR_EMAIL", "soak@example.invalid")
            .env("GIT_COMMITTER_NAME", "soak")
            .env("GIT_COMMITTER_EMAIL", "soak@example.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `kB` line of the agent's `/proc/PID/status`, 0 when unreadable.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What RSS is made of: the heap and other anonymous memory, and pages of the binary and other
/// mapped files (these grow as a pass runs code the first pass did not, and are not the heap).
fn rss_split(pid: u32) -> String {
    format!(
        "anon {}, file {}",
        mib(status_kib(pid, "RssAnon:")),
        mib(status_kib(pid, "RssFile:"))
    )
}

/// Requests so far, per cluster and endpoint, from `/metrics`.
fn requests(port: u16) -> BTreeMap<(String, String), u64> {
    let text = http_get(port, "/metrics").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("proxops_pve_requests_total{cluster=\""))
        .filter_map(|rest| {
            let (cluster, rest) = rest.split_once("\",endpoint=\"")?;
            let (endpoint, n) = rest.split_once("\"} ")?;
            Some((
                (cluster.to_owned(), endpoint.to_owned()),
                n.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// Each cluster's cycles and last result.
fn cycles(port: u16) -> Option<BTreeMap<String, (u64, String)>> {
    let status: serde_json::Value = serde_json::from_str(&http_get(port, "/status")?).ok()?;
    Some(
        status["clusters"]
            .as_array()?
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    (
                        c["cycles"].as_u64().unwrap_or(0),
                        c["lastCycle"]["result"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    ),
                )
            })
            .collect(),
    )
}

/// Waits until every one of `clusters` ran `n` cycles; their results.
fn pass_done(port: u16, clusters: usize, n: u64, limit: Duration) -> Option<Vec<String>> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(c) = cycles(port)
            && c.len() == clusters
            && c.values().all(|(k, _)| *k >= n)
        {
            return Some(c.into_values().map(|(_, r)| r).collect());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn main() {
    let s = settings();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let token = ApiToken::new("root@pam!soak", "00000000-0000-4000-8000-000000000001");
    let sims: Vec<(String, SimHandle)> = runtime.block_on(async {
        let mut sims = Vec::new();
        for i in 0..s.clusters {
            let name = format!("soak-{i:02}");
            let config = SimConfig::default()
                .with_state(empty_cluster(&name))
                .with_token(token.clone())
                .with_task_durations(TaskDurations::uniform(s.task_time))
                .with_offline_downloads(true);
            sims.push((name, proxops_pve_sim::start(config).await.unwrap()));
        }
        sims
    });
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    generate(&repo, &sims, s.manifests);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(work.path().join("agent.log")).unwrap();
    let interval = format!("{}ms", s.interval.as_millis());
    // `SOAK_WRAP` (e.g. `heaptrack -o /tmp/agent`) runs the agent under a profiler: the RSS
    // figures are then the wrapper's and say nothing.
    let wrap: Vec<String> = std::env::var("SOAK_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut command = match wrap.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(env!("CARGO_BIN_EXE_proxops"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_proxops")),
    };
    let mut agent = command
        .args([
            "run",
            "--backend",
            "pve",
            "--interval",
            &interval,
            "--holder",
            "soak",
        ])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--parallel",
            &s.parallel.to_string(),
        ])
        .arg("--repo")
        .arg(&repo)
        .arg("--data-dir")
        .arg(work.path().join("data"))
        .env(
            "PROXOPS_PVE_TOKEN",
            format!("{}={}", token.id, token.secret),
        )
        .env("PROXOPS_LOG", "warn")
        .env_remove("PROXOPS_AGENT_TOKEN")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = agent.id();
    println!(
        "soak: {} clusters x {} manifests ({} guests), a pass every {:?}, {} clusters at once, tasks {:?}, for {:?} after the first pass; {} CPUs, load {}",
        s.clusters,
        s.manifests,
        s.clusters * (s.manifests - 1),
        s.interval,
        s.parallel,
        s.task_time,
        s.duration,
        std::thread::available_parallelism().map_or(1, usize::from),
        load()
    );
    let started = Instant::now();
    let first = pass_done(port, s.clusters, 1, Duration::from_secs(3600)).expect("a first pass");
    let settle = (s.interval / 3).min(Duration::from_secs(2));
    std::thread::sleep(settle);
    let first_rss = rss_kib(pid);
    let first_split = rss_split(pid);
    println!(
        "first pass: {:.0} s, results {:?}, agent RSS {} ({first_split})",
        started.elapsed().as_secs_f64(),
        tally(&first),
        mib(first_rss)
    );
    let soak_start = Instant::now();
    let bound_per_cluster = (s.manifests - 1) + NODES.len() + NODES.len() + 2;
    let bound = bound_per_cluster * s.clusters;
    let mut previous = requests(port);
    let mut n = 1;
    let mut max_rss = first_rss;
    let mut converged_rss = None;
    let mut converged_requests: Vec<u64> = Vec::new();
    let mut converged_rss_all: Vec<u64> = Vec::new();
    let mut worst_breakdown = BTreeMap::new();
    let mut over = 0;
    while soak_start.elapsed() < s.duration {
        n += 1;
        let Some(results) = pass_done(
            port,
            s.clusters,
            n,
            s.interval * 4 + Duration::from_secs(600),
        ) else {
            println!("pass {n} did not finish");
            break;
        };
        let now = requests(port);
        std::thread::sleep(settle);
        let rss = rss_kib(pid);
        let split = rss_split(pid);
        max_rss = max_rss.max(rss);
        let mut delta = 0;
        let mut breakdown: BTreeMap<String, u64> = BTreeMap::new();
        for (key, v) in &now {
            let d = v - previous.get(key).copied().unwrap_or(0);
            delta += d;
            *breakdown.entry(key.1.clone()).or_default() += d;
        }
        previous = now;
        let all_converged = results.iter().all(|r| r == "converged");
        if all_converged {
            converged_rss.get_or_insert(rss);
            converged_rss_all.push(rss);
            if delta as usize > bound {
                over += 1;
            }
            if converged_requests.iter().all(|r| delta >= *r) {
                worst_breakdown = breakdown;
            }
            converged_requests.push(delta);
        }
        println!(
            "pass {n:>3} at {:>5.0} s: {:?}, {delta} PVE requests{}, agent RSS {} ({split})",
            soak_start.elapsed().as_secs_f64(),
            tally(&results),
            if all_converged {
                format!(" (bound {bound})")
            } else {
                String::new()
            },
            mib(rss)
        );
    }
    let end_rss = rss_kib(pid);
    let end_split = rss_split(pid);
    let _ = agent.kill();
    let _ = agent.wait();
    let pct = |v: u64, base: u64| (v as f64 - base as f64) / base.max(1) as f64 * 100.0;
    let growth = pct(end_rss, first_rss);
    let peak = pct(max_rss, first_rss);
    let base = converged_rss.unwrap_or(first_rss);
    let mean = |v: &[u64]| v.iter().sum::<u64>() / (v.len().max(1) as u64);
    let k = (converged_rss_all.len() / 4)
        .max(1)
        .min(converged_rss_all.len());
    println!("--");
    println!(
        "passes after the first: {}, of which converged: {}",
        n - 1,
        converged_requests.len()
    );
    println!(
        "agent RSS: after the first pass {} ({first_split}), after the first converged pass {}, highest {} ({peak:+.1}%), at the end {} ({growth:+.1}% of the first pass's; {end_split})",
        mib(first_rss),
        converged_rss.map_or("-".to_owned(), mib),
        mib(max_rss),
        mib(end_rss)
    );
    if !converged_rss_all.is_empty() {
        let (lo, hi) = (
            converged_rss_all.iter().min().copied().unwrap_or(0),
            converged_rss_all.iter().max().copied().unwrap_or(0),
        );
        println!(
            "agent RSS over the converged passes: {}..{} ({:+.1}%..{:+.1}% of the first converged pass's); mean of the first quarter {}, of the last quarter {}; at the end {:+.1}%",
            mib(lo),
            mib(hi),
            pct(lo, base),
            pct(hi, base),
            mib(mean(&converged_rss_all[..k])),
            mib(mean(&converged_rss_all[converged_rss_all.len() - k..])),
            pct(end_rss, base)
        );
    }
    if let (Some(lo), Some(hi)) = (
        converged_requests.iter().min(),
        converged_requests.iter().max(),
    ) {
        println!(
            "PVE requests per converged pass: {lo}..{hi} against a bound of {bound} ({} clusters x ({} guests + {} node-storage pairs + {} nodes + 2)); over the bound: {over}",
            s.clusters,
            s.manifests - 1,
            NODES.len(),
            NODES.len()
        );
        println!("the largest converged pass, by endpoint: {worst_breakdown:?}");
    }
    println!("load at the end: {}", load());
    drop(sims);
    drop(work);
    let ok = growth <= 10.0 && peak <= 10.0 && over == 0 && !converged_requests.is_empty();
    std::process::exit(i32::from(!ok));
}

fn tally(results: &[String]) -> BTreeMap<&str, usize> {
    let mut t = BTreeMap::new();
    for r in results {
        *t.entry(r.as_str()).or_default() += 1;
    }
    t
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
