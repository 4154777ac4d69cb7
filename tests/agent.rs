//! `proxops run` end to end: the agent against a simulator and a git repository in a
//! temporary directory, observed through its HTTP endpoint, the simulator's state and the git
//! planes.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proxops_e2e::{ChildGuard, copy_tree, example, free_port, git, http_get, proxops_bin};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The homelab example committed in a temporary git repository.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&example("homelab"), dir.path()).unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        Repo::commit_in(dir.path(), "homelab");
        Repo { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn commit_in(dir: &Path, message: &str) -> String {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", message]);
        git(dir, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    fn commit(&self, message: &str) -> String {
        Repo::commit_in(self.path(), message)
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path().join(rel), text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Points cluster lab at a simulator server.
    fn point_lab_at(&self, sim: &SimServer) {
        self.write(
            "clusters/lab/config.yaml",
            &format!(
                "pve:\n  clusters:\n    lab:\n      base-url: {}\n      fingerprint: {}\n      nodes: [pve1]\n",
                sim.url, sim.fingerprint
            ),
        );
        self.commit("lab: the simulator");
    }
}

const TOKEN: &str = "root@pam!agent=agent-test-secret";

/// `proxops sim` serving cluster lab, its state in a file.
struct SimServer {
    _child: ChildGuard,
    url: String,
    fingerprint: String,
    state: PathBuf,
    _dir: tempfile::TempDir,
}

impl SimServer {
    fn start(repo: &Repo, task_time: &str) -> SimServer {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let mut child = Command::new(proxops_bin())
            .args(["sim", "--listen", "127.0.0.1:0", "--token", TOKEN])
            .args(["--offline-downloads", "--task-time", task_time])
            .args(["--cluster", "lab", "--seed-repo"])
            .arg(repo.path())
            .arg("--state")
            .arg(&state)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let lines: Vec<String> = (&mut stdout).lines().take(3).map(Result::unwrap).collect();
        // Keep the pipe open while the server runs: it must be able to print.
        std::mem::forget(stdout);
        let url = lines[0]
            .strip_prefix("url: ")
            .and_then(|u| u.strip_suffix("/api2/json"))
            .unwrap()
            .to_owned();
        let fingerprint = lines[1].strip_prefix("fingerprint: ").unwrap().to_owned();
        SimServer {
            _child: ChildGuard(child),
            url,
            fingerprint,
            state,
            _dir: dir,
        }
    }
}

/// The vmids of the guests in a simulator state file.
fn guests(state: &Path) -> BTreeSet<u64> {
    let Ok(text) = std::fs::read_to_string(state) else {
        return BTreeSet::new();
    };
    let Ok(json) = serde_json::from_str::<Value>(&text) else {
        return BTreeSet::new();
    };
    json["guests"]
        .as_object()
        .map(|g| g.values().filter_map(|v| v["vmid"].as_u64()).collect())
        .unwrap_or_default()
}

/// A running agent.
struct Agent {
    child: ChildGuard,
    port: u16,
}

impl Agent {
    fn start(repo: &Repo, data: &Path, holder: &str, interval: &str, backend: &[&str]) -> Agent {
        let repo_arg = repo.path().to_string_lossy().into_owned();
        let mut args = vec!["--repo", repo_arg.as_str()];
        args.extend_from_slice(backend);
        Agent::start_at(data, holder, interval, &args)
    }

    /// An agent with `args` naming its repository (`--repo` or `--url`) and backend.
    fn start_at(data: &Path, holder: &str, interval: &str, args: &[&str]) -> Agent {
        let port = free_port().unwrap();
        let child = Command::new(proxops_bin())
            .args(["run", "--cluster", "lab", "--interval", interval])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--holder", holder])
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .env("PROXOPS_PVE_TOKEN_LAB", TOKEN)
            .env_remove("PROXOPS_PVE_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Agent {
            child: ChildGuard(child),
            port,
        }
    }

    fn status(&self) -> Option<Value> {
        let (code, body) = http_get(self.port, "/status")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }

    fn metrics(&self) -> String {
        http_get(self.port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Cluster lab in `/status`.
    fn lab(&self) -> Option<Value> {
        let status = self.status()?;
        status["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lab")
            .cloned()
    }

    fn kill(mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// Polls `probe` every 50 ms until it answers, for at most `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `(kind/name, state)` of lab's resources when its last cycle reconciled `revision` and
/// succeeded, and every resource is CLEAN.
fn clean_at(lab: &Value, revision: Option<&str>) -> Option<BTreeSet<String>> {
    let cycle = &lab["lastCycle"];
    let ok = matches!(cycle["result"].as_str(), Some("converged" | "applied"));
    let at = revision.is_none_or(|r| cycle["sourceRevision"] == r);
    let rows = lab["resources"].as_array()?;
    let all_clean = !rows.is_empty() && rows.iter().all(|r| r["state"] == "CLEAN");
    (ok && at && all_clean).then(|| {
        rows.iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                )
            })
            .collect()
    })
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

const LAB: &[&str] = &[
    "CTTemplate/debian-13-standard",
    "DiskImage/debian-13-genericcloud",
    "ISO/debian-13-netinst",
    "LXC/ci-runner-01",
    "VM/sandbox-01",
];

#[test]
fn commits_that_add_change_and_remove_manifests_are_converged_within_two_passes() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim-state.json");
    let sim_state = state.to_string_lossy().into_owned();
    let agent = Agent::start(
        &repo,
        &data.path().join("agent"),
        "agent-a",
        "2s",
        &["--backend", "sim", "--sim-state", &sim_state],
    );
    let first = wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(first, names(LAB));
    assert_eq!(guests(&state), BTreeSet::from([100, 200]));

    // Add sandbox-02, give sandbox-01 more memory, drop ci-runner-01.
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-02.yaml",
        &sandbox
            .replace("name: sandbox-01", "name: sandbox-02")
            .replace("vmid: 100", "vmid: 101")
            .replace("10.10.50.100/24", "10.10.50.101/24"),
    );
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    let composition = repo
        .read("clusters/lab/resources.yaml")
        .replace("  - ../../lxc/lab/ci-runner-01.yaml\n", "")
        .replace(
            "  - ../../vm/lab/sandbox-01.yaml\n",
            "  - ../../vm/lab/sandbox-01.yaml\n  - ../../vm/lab/sandbox-02.yaml\n",
        );
    repo.write("clusters/lab/resources.yaml", &composition);
    let head = repo.commit("lab: add sandbox-02, grow sandbox-01, drop ci-runner-01");
    let passes_before = agent.status().unwrap()["passes"].as_u64().unwrap();

    let (after, passes) = wait_for(Duration::from_secs(120), "the commit to converge", || {
        let status = agent.status()?;
        let lab = status["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lab")?
            .clone();
        let set = clean_at(&lab, Some(&head))?;
        (!set.contains("LXC/ci-runner-01")).then(|| (set, status["passes"].as_u64().unwrap()))
    });
    let mut expected = names(LAB);
    expected.remove("LXC/ci-runner-01");
    expected.insert("VM/sandbox-02".to_owned());
    assert_eq!(after, expected);
    assert!(
        passes <= passes_before + 2,
        "converged only after {} passes",
        passes - passes_before
    );

    // PVE (the simulator) holds exactly what the repository says.
    assert_eq!(guests(&state), BTreeSet::from([100, 101]));
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(sim["guests"]["100"]["config"]["memory"], "3072");

    // The metrics count what was done.
    let metrics = agent.metrics();
    for line in [
        "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"create\",result=\"succeeded\"} 2",
        "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"update\",result=\"succeeded\"} 1",
        "proxops_actions_total{cluster=\"lab\",kind=\"LXC\",action=\"delete\",result=\"succeeded\"} 1",
    ] {
        assert!(metrics.contains(line), "no `{line}` in\n{metrics}");
    }
    assert!(metrics.contains("proxops_last_success_timestamp_seconds{cluster=\"lab\"}"));
    assert!(metrics.contains(
        "proxops_pve_requests_total{cluster=\"lab\",endpoint=\"GET /cluster/resources\"}"
    ));
    assert_eq!(http_get(agent.port, "/healthz").unwrap().0, 200);
    assert_eq!(http_get(agent.port, "/readyz").unwrap().0, 200);
}

#[test]
fn an_agent_killed_in_the_middle_of_an_apply_converges_after_a_restart() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "1500ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    let agent = Agent::start(&repo, data.path(), "agent-a", "1s", &["--backend", "pve"]);
    // Downloads are done and no guest is complete yet: the apply is half-way.
    wait_for(Duration::from_secs(60), "the apply to start", || {
        let text = std::fs::read_to_string(&sim.state).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        let volumes = json["volumes"].as_object().map_or(0, |v| v.len())
            + json["volumes"].as_array().map_or(0, Vec::len);
        (volumes > 0 || !guests(&sim.state).is_empty()).then_some(())
    });
    agent.kill();
    let refs = git(repo.path(), &["show-ref"]);
    assert!(
        refs.contains("refs/proxops/leases/lab"),
        "the killed agent left its lease: {refs}"
    );
    assert!(
        !refs.contains("refs/heads/proxops/observed/lab"),
        "killed before its first cycle recorded anything: {refs}"
    );

    let agent = Agent::start(&repo, data.path(), "agent-a", "1s", &["--backend", "pve"]);
    let set = wait_for(
        Duration::from_secs(120),
        "convergence after the restart",
        || clean_at(&agent.lab()?, None),
    );
    assert_eq!(set, names(LAB));
    // No duplicate guest: exactly the two the repository declares.
    assert_eq!(guests(&sim.state), BTreeSet::from([100, 200]));
    // No lost receipt: one per resource on the observed plane.
    let receipts = git(
        repo.path(),
        &[
            "ls-tree",
            "-r",
            "--name-only",
            "proxops/observed/lab",
            "receipts/",
        ],
    );
    assert_eq!(receipts.lines().count(), LAB.len(), "{receipts}");
    let fsck = git(repo.path(), &["fsck", "--no-progress"]);
    assert!(!fsck.contains("error"), "{fsck}");
}

#[test]
fn two_agents_on_one_repository_never_reconcile_the_same_cluster_at_once() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "700ms");
    repo.point_lab_at(&sim);
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Agent::start(
        &repo,
        data_a.path(),
        "agent-a",
        "500ms",
        &["--backend", "pve"],
    );
    let b = Agent::start(
        &repo,
        data_b.path(),
        "agent-b",
        "500ms",
        &["--backend", "pve"],
    );
    wait_for(Duration::from_secs(120), "convergence", || {
        let done = |agent: &Agent| agent.lab().and_then(|l| clean_at(&l, None));
        (done(&a).is_some() || done(&b).is_some()).then_some(())
    });
    // Let both run a few more passes against the converged cluster.
    let passes = |agent: &Agent| agent.status().and_then(|s| s["passes"].as_u64());
    let (pa, pb) = (passes(&a).unwrap_or(0), passes(&b).unwrap_or(0));
    wait_for(Duration::from_secs(60), "more passes", || {
        (passes(&a)? >= pa + 3 && passes(&b)? >= pb + 3).then_some(())
    });
    let sum = |pattern: &str| -> u64 {
        [a.metrics(), b.metrics()]
            .iter()
            .flat_map(|m| m.lines().map(str::to_owned).collect::<Vec<_>>())
            .filter(|l| l.starts_with(pattern))
            .filter_map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()))
            .sum()
    };
    // Had both reconciled at once, each would have created and downloaded everything.
    assert_eq!(
        sum(
            "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"create\",result=\"succeeded\"}"
        ),
        1
    );
    assert_eq!(
        sum(
            "proxops_actions_total{cluster=\"lab\",kind=\"LXC\",action=\"create\",result=\"succeeded\"}"
        ),
        1
    );
    assert_eq!(
        sum(
            "proxops_actions_total{cluster=\"lab\",kind=\"ISO\",action=\"download\",result=\"succeeded\"}"
        ),
        1
    );
    let failed: Vec<String> = [a.metrics(), b.metrics()]
        .iter()
        .flat_map(|m| m.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("result=\"failed\""))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    // The loser of the first race waited for the lease instead of reconciling.
    assert!(sum("proxops_cycles_total{cluster=\"lab\",result=\"leased\"}") >= 1);
    assert_eq!(guests(&sim.state), BTreeSet::from([100, 200]));
}

/// `proxops ARGS` against a running agent; exit code and standard output.
fn control(agent: &Agent, args: &[&str]) -> (i32, String) {
    let out = Command::new(proxops_bin())
        .args(args)
        .args(["--agent", &format!("http://127.0.0.1:{}", agent.port)])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn memory_of(state: &Path, vmid: u32) -> String {
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    sim["guests"][vmid.to_string()]["config"]["memory"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn suspended_resources_and_clusters_are_left_alone_until_resumed_even_across_restarts() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim-state.json");
    let sim_state = state.to_string_lossy().into_owned();
    let backend = ["--backend", "sim", "--sim-state", &sim_state];
    // A long interval: after the first pass, only `proxops reconcile` runs cycles.
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(memory_of(&state, 100), "2048");

    let (code, out) = control(&agent, &["suspend", "--cluster", "lab", "VM/sandbox-01"]);
    assert_eq!(
        (code, out.trim()),
        (0, "VM/sandbox-01 of cluster lab: suspended")
    );
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    repo.commit("lab: grow sandbox-01");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("cluster lab: converged: 0 planned"),
        "{out}"
    );
    assert_eq!(memory_of(&state, 100), "2048", "a suspended VM was changed");
    let lab = agent.lab().unwrap();
    assert_eq!(
        lab["suspendedResources"],
        serde_json::json!(["VM/sandbox-01"])
    );
    assert!(
        lab["lastCycle"]["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["subject"] == "VM/sandbox-01"
                && s["reason"].as_str().unwrap().starts_with("suspended")),
        "{lab}"
    );

    let (code, _) = control(&agent, &["resume", "--cluster", "lab", "VM/sandbox-01"]);
    assert_eq!(code, 0);
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("cluster lab: applied: 1 planned, 1 succeeded"),
        "{out}"
    );
    assert_eq!(memory_of(&state, 100), "3072");

    // A whole cluster, and the suspension survives a restart.
    let (code, _) = control(&agent, &["suspend", "--cluster", "lab"]);
    assert_eq!(code, 0);
    agent.kill();
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    wait_for(Duration::from_secs(60), "the restarted agent", || {
        (agent.lab()?["lastCycle"]["result"] == "suspended").then_some(())
    });
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 1, "a suspended cluster's cycle is no success: {out}");
    assert!(out.starts_with("cluster lab: suspended"), "{out}");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "nowhere"]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn drift_mode_report_plans_but_changes_nothing() {
    let repo = Repo::new();
    let config = repo.read("clusters/lab/config.yaml");
    repo.write(
        "clusters/lab/config.yaml",
        &config.replace("      nodes:\n", "      drift: report\n      nodes:\n"),
    );
    repo.commit("lab: report drift only");
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim-state.json");
    let out = Command::new(proxops_bin())
        .args([
            "run",
            "--once",
            "--cluster",
            "lab",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--backend", "sim", "--sim-state"])
        .arg(&state)
        .arg("--repo")
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(guests(&state).is_empty(), "report mode created guests");
    // The desired plane was still published: drift is reported against it.
    git(
        repo.path(),
        &["rev-parse", "--verify", "proxops/desired/lab"],
    );
}

#[test]
fn the_example_agent_configuration_reads_cleanly_and_the_unit_uses_real_flags() {
    let dir = example("agent");
    let source = proxops_model::FsSource::new(&dir).unwrap();
    let (config, diagnostics) = proxops_model::read_config_file(&source, "proxops-agent.yaml");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let config = config.unwrap();
    assert!(config.git.and_then(|g| g.url).is_some());
    assert!(config.data_dir.is_some());

    let unit = std::fs::read_to_string(dir.join("proxops-agent.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert!(
        words[0].ends_with("/proxops") && words[1] == "run",
        "{exec}"
    );
    let help = Command::new(proxops_bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in words.iter().filter(|w| w.starts_with("--")) {
        assert!(help.contains(flag), "`proxops run` has no {flag}");
    }
    // A broken agent configuration is refused with its diagnostics, not ignored.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(
        bad.path().join("agent.yaml"),
        "listen: [not, an, address]\nlisen: x\n",
    )
    .unwrap();
    let out = Command::new(proxops_bin())
        .args(["run", "--once", "--config"])
        .arg(bad.path().join("agent.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lisen"), "{stderr}");
}

#[test]
fn apply_with_planes_refuses_a_cluster_whose_lease_another_process_holds() {
    let repo = Repo::new();
    let store = proxops_store::Store::open(repo.path()).unwrap();
    let elsewhere = proxops_store::Holder {
        name: "agent-x".to_owned(),
        host: "another-host".to_owned(),
        pid: 1,
    };
    // Held by a live agent on another machine (never released here).
    std::mem::forget(
        store
            .acquire_lease("lab", &elsewhere, Duration::from_secs(3600))
            .unwrap(),
    );
    let state = tempfile::tempdir().unwrap();
    let apply = || {
        Command::new(proxops_bin())
            .args([
                "apply",
                "--planes",
                "--yes",
                "--cluster",
                "lab",
                "--backend",
                "sim",
            ])
            .arg("--sim-state")
            .arg(state.path().join("sim.json"))
            .arg("--repo")
            .arg(repo.path())
            .output()
            .unwrap()
    };
    let out = apply();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is being reconciled by agent-x (pid 1 on another-host)"),
        "{stderr}"
    );
    assert!(guests(&state.path().join("sim.json")).is_empty());

    let lease = |args: &[&str]| {
        let out = Command::new(proxops_bin())
            .args(["lease", "--cluster", "lab"])
            .args(args)
            .arg("--repo")
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(lease(&[]).starts_with("cluster lab: held by agent-x"));
    assert!(lease(&["--break"]).starts_with("cluster lab: broke the lease of agent-x"));
    let out = apply();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        guests(&state.path().join("sim.json")),
        BTreeSet::from([100, 200])
    );
    // Given back when the run ended.
    assert_eq!(lease(&[]).trim(), "cluster lab: no lease");
}

#[test]
fn a_gated_cluster_is_reconciled_from_its_live_desired_head_until_the_candidate_is_merged() {
    let repo = Repo::new();
    let config = repo.read("clusters/lab/config.yaml");
    repo.write(
        "clusters/lab/config.yaml",
        &config.replace(
            "      nodes:\n",
            "      planes:\n        change-gate: pullRequest\n      nodes:\n",
        ),
    );
    repo.commit("lab: changes go through review");
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim-state.json");
    let sim_state = state.to_string_lossy().into_owned();
    let backend = ["--backend", "sim", "--sim-state", &sim_state];
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    // The first publication has no live head to propose on: it becomes the live head.
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(memory_of(&state, 100), "2048");

    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    repo.commit("lab: grow sandbox-01");
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab", "-o", "json"]);
    assert_eq!(code, 0, "{out}");
    let lab: Value = serde_json::from_str(&out).unwrap();
    let candidate = lab["lastCycle"]["candidate"].as_str().unwrap().to_owned();
    assert!(
        candidate.starts_with("refs/heads/proxops/candidates/lab/"),
        "{candidate}"
    );
    assert_eq!(lab["lastCycle"]["planned"], 0, "{lab}");
    assert_eq!(
        memory_of(&state, 100),
        "2048",
        "an unmerged candidate was applied"
    );

    // A forge merges the candidate: a fast-forward of the live desired branch.
    git(
        repo.path(),
        &["update-ref", "refs/heads/proxops/desired/lab", &candidate],
    );
    let (code, out) = control(&agent, &["reconcile", "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("cluster lab: applied: 1 planned"), "{out}");
    assert_eq!(memory_of(&state, 100), "3072");
}

#[test]
fn two_agents_with_their_own_clones_of_a_remote_share_its_leases_and_planes() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "700ms");
    repo.point_lab_at(&sim);
    // The shared remote: a bare repository (no network).
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare", "-b", "main"]);
    let url = remote.path().to_string_lossy().into_owned();
    git(repo.path(), &["push", "-q", &url, "main"]);
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let from_remote = ["--backend", "pve", "--url", url.as_str()];
    let a = Agent::start_at(data_a.path(), "agent-a", "500ms", &from_remote);
    let b = Agent::start_at(data_b.path(), "agent-b", "500ms", &from_remote);
    wait_for(Duration::from_secs(120), "convergence", || {
        let done = |agent: &Agent| agent.lab().and_then(|l| clean_at(&l, None));
        (done(&a).is_some() || done(&b).is_some()).then_some(())
    });
    let passes = |agent: &Agent| agent.status().and_then(|s| s["passes"].as_u64());
    let (pa, pb) = (passes(&a).unwrap_or(0), passes(&b).unwrap_or(0));
    wait_for(Duration::from_secs(60), "more passes", || {
        (passes(&a)? >= pa + 3 && passes(&b)? >= pb + 3).then_some(())
    });
    let metrics = [a.metrics(), b.metrics()];
    let sum = |pattern: &str| -> u64 {
        metrics
            .iter()
            .flat_map(|m| m.lines())
            .filter(|l| l.starts_with(pattern))
            .filter_map(|l| l.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()))
            .sum()
    };
    assert_eq!(
        sum(
            "proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"create\",result=\"succeeded\"}"
        ),
        1
    );
    assert_eq!(
        sum(
            "proxops_actions_total{cluster=\"lab\",kind=\"LXC\",action=\"create\",result=\"succeeded\"}"
        ),
        1
    );
    assert!(
        !metrics.iter().any(|m| m.contains("result=\"failed\"")),
        "{metrics:?}"
    );
    assert_eq!(guests(&sim.state), BTreeSet::from([100, 200]));
    // The planes were published to the remote, where both agents read them.
    let receipts = git(
        remote.path(),
        &[
            "ls-tree",
            "-r",
            "--name-only",
            "proxops/observed/lab",
            "receipts/",
        ],
    );
    assert_eq!(receipts.lines().count(), LAB.len(), "{receipts}");
}

#[test]
fn sigterm_starts_no_new_action_waits_for_those_in_flight_and_gives_the_lease_back() {
    let repo = Repo::new();
    let sim = SimServer::start(&repo, "1500ms");
    repo.point_lab_at(&sim);
    let data = tempfile::tempdir().unwrap();
    let mut agent = Agent::start(&repo, data.path(), "agent-a", "1h", &["--backend", "pve"]);
    // The three downloads run (no guest yet): stop now.
    wait_for(Duration::from_secs(60), "the downloads to start", || {
        let text = std::fs::read_to_string(&sim.state).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        let running = json["tasks"]
            .as_array()?
            .iter()
            .filter(|t| t["status"] == "running")
            .count();
        (running > 0).then_some(())
    });
    let pid = agent.child.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = agent.child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the agent did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // The downloads in flight finished and were recorded; the guests after them never started.
    assert!(
        guests(&sim.state).is_empty(),
        "a new action started after SIGTERM"
    );
    let receipts = git(
        repo.path(),
        &[
            "ls-tree",
            "-r",
            "--name-only",
            "proxops/observed/lab",
            "receipts/",
        ],
    );
    assert_eq!(receipts.lines().count(), 3, "{receipts}");
    let refs = git(repo.path(), &["show-ref"]);
    assert!(!refs.contains("refs/proxops/leases/lab"), "{refs}");
}

#[test]
fn an_invalid_cluster_never_stops_the_others() {
    let repo = Repo::new();
    // Cluster home lists a manifest that does not exist.
    let composition = repo.read("clusters/home/resources.yaml");
    repo.write(
        "clusters/home/resources.yaml",
        &format!("{composition}  - ../../vm/home/missing.yaml\n"),
    );
    repo.commit("home: a broken composition");
    let data = tempfile::tempdir().unwrap();
    let state = data.path().join("sim.json");
    let port = free_port().unwrap();
    let child = Command::new(proxops_bin())
        .args(["run", "--interval", "1h", "--backend", "sim", "--sim-state"])
        .arg(&state)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--repo"])
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent {
        child: ChildGuard(child),
        port,
    };
    let status = wait_for(
        Duration::from_secs(120),
        "a pass over both clusters",
        || {
            let status = agent.status()?;
            let clusters = status["clusters"].as_array()?;
            clusters
                .iter()
                .all(|c| !c["lastCycle"].is_null())
                .then(|| status.clone())
        },
    );
    let cluster = |name: &str| {
        status["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let home = cluster("home");
    assert_eq!(home["lastCycle"]["result"], "invalid", "{home}");
    assert!(
        home["lastCycle"]["errors"]
            .to_string()
            .contains("missing.yaml"),
        "{home}"
    );
    assert!(clean_at(&cluster("lab"), None).is_some(), "{status}");
    // The simulators of both clusters: only lab's has guests.
    assert_eq!(
        guests(&data.path().join("sim.lab.json")),
        BTreeSet::from([100, 200])
    );
    assert!(guests(&data.path().join("sim.home.json")).is_empty());
}
