//! What the agent tests share: a git copy of the example, a simulator server, a running agent
//! and ways to read their state.

use crate::support::{ChildGuard, free_port, http_get, proxops_bin};
use proxops_test_support::{SimProcess, TestRepo};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The homelab example committed in a temporary git repository.
pub struct Repo(TestRepo);

impl Repo {
    pub fn new() -> Repo {
        Repo(TestRepo::homelab())
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn commit(&self, message: &str) -> String {
        self.0.commit_all(message)
    }

    pub fn write(&self, rel: &str, text: &str) {
        self.0.write(rel, text);
    }

    pub fn read(&self, rel: &str) -> String {
        self.0.read(rel)
    }

    /// Points cluster lab at a simulator server.
    pub fn point_lab_at(&self, sim: &SimServer) {
        self.write(
            "clusters/lab/config.yaml",
            &sim.process.cluster_config("lab", "[pve1]"),
        );
        self.commit("lab: the simulator");
    }
}

pub const TOKEN: &str = "root@pam!agent=agent-test-secret";

/// The control token of the agents these tests start.
pub const AGENT_TOKEN: &str = "agent-control-test-token";

/// `proxops sim` serving cluster lab, its state in a file.
pub struct SimServer {
    pub process: SimProcess,
    pub state: PathBuf,
    pub _dir: tempfile::TempDir,
}

impl SimServer {
    pub fn start(repo: &Repo, task_time: &str) -> SimServer {
        SimServer::start_with(repo, task_time, true)
    }

    /// A simulator that fetches the URLs of downloads (`offline: false`) or makes them up.
    pub fn start_with(repo: &Repo, task_time: &str, offline: bool) -> SimServer {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let mut sim = Command::new(proxops_bin());
        sim.args(["sim", "--listen", "127.0.0.1:0", "--token", TOKEN])
            .args(offline.then_some("--offline-downloads"))
            .args(["--task-time", task_time])
            .args(["--cluster", "lab", "--seed-repo"])
            .arg(repo.path())
            .arg("--state")
            .arg(&state);
        SimServer {
            process: SimProcess::spawn(sim),
            state,
            _dir: dir,
        }
    }
}

/// The vmids of the guests in a simulator state file.
pub fn guests(state: &Path) -> BTreeSet<u64> {
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
pub struct Agent {
    pub child: ChildGuard,
    pub port: u16,
    /// Its log file, when the test started it with one.
    pub log: Option<std::path::PathBuf>,
}

impl Agent {
    pub fn start(
        repo: &Repo,
        data: &Path,
        holder: &str,
        interval: &str,
        backend: &[&str],
    ) -> Agent {
        let repo_arg = repo.path().to_string_lossy().into_owned();
        let mut args = vec!["--repo", repo_arg.as_str()];
        args.extend_from_slice(backend);
        Agent::start_at(data, holder, interval, &args)
    }

    /// An agent with `args` naming its repository (`--repo` or `--url`) and backend.
    pub fn start_at(data: &Path, holder: &str, interval: &str, args: &[&str]) -> Agent {
        Agent::start_env(data, holder, interval, args, &[])
    }

    /// [`Agent::start_at`] with more environment variables; its log (debug level) goes to
    /// [`Agent::log_of`].
    pub fn start_env(
        data: &Path,
        holder: &str,
        interval: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Agent {
        let port = free_port();
        std::fs::create_dir_all(data).unwrap();
        let log = std::fs::File::create(Agent::log_of(data)).unwrap();
        let child = Command::new(proxops_bin())
            .envs(env.iter().copied())
            .args(["run", "--cluster", "lab", "--interval", interval])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--holder", holder])
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .env("PROXOPS_PVE_TOKEN_LAB", TOKEN)
            .env("PROXOPS_AGENT_TOKEN", AGENT_TOKEN)
            .env_remove("PROXOPS_PVE_TOKEN")
            .env("PROXOPS_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Agent {
            child: ChildGuard(child),
            port,
            log: Some(Agent::log_of(data)),
        }
    }

    /// Where [`Agent::start_env`] writes the log of an agent with data directory `data`
    /// (inside it, so that it goes with the test's temporary directory).
    pub fn log_of(data: &Path) -> std::path::PathBuf {
        data.join("agent-test.log")
    }

    /// The warning and error lines of its log, for an assertion's message.
    pub fn log_problems(&self) -> String {
        let Some(text) = self
            .log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        else {
            return String::new();
        };
        text.lines()
            .filter(|l| !l.contains("DEBUG") || l.to_lowercase().contains("error"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn status(&self) -> Option<Value> {
        let (code, body) = http_get(self.port, "/status")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }

    pub fn metrics(&self) -> String {
        http_get(self.port, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Cluster lab in `/status`.
    pub fn lab(&self) -> Option<Value> {
        let status = self.status()?;
        status["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lab")
            .cloned()
    }

    pub fn kill(mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// Polls `probe` every 50 ms until it answers, for at most `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
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
pub fn clean_at(lab: &Value, revision: Option<&str>) -> Option<BTreeSet<String>> {
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

pub fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

pub const LAB: &[&str] = &[
    "CTTemplate/debian-13-standard",
    "DiskImage/debian-13-genericcloud",
    "ISO/debian-13-netinst",
    "LXC/ci-runner-01",
    "VM/sandbox-01",
];

/// `proxops ARGS` against a running agent; exit code and standard output.
pub fn control(agent: &Agent, args: &[&str]) -> (i32, String) {
    let out = Command::new(proxops_bin())
        .args(args)
        .args(["--agent", &format!("http://127.0.0.1:{}", agent.port)])
        .env("PROXOPS_AGENT_TOKEN", AGENT_TOKEN)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

pub fn memory_of(state: &Path, vmid: u32) -> String {
    let sim: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    sim["guests"][vmid.to_string()]["config"]["memory"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
