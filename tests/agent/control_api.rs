//! The control API is not open to any web page: a bearer token, the agent's own `Host`, no
//! foreign `Origin`, 404 for what the repository does not declare, and no public listener
//! without a token.

use super::support::*;
use crate::support::{ChildGuard, free_port, http_with, proxops_bin};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `proxops ARGS --agent URL` with `env` (and no token in the environment unless `env` sets it);
/// exit code, stdout and stderr.
fn cli(agent: &Agent, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(proxops_bin());
    cmd.args(args)
        .args(["--agent", &format!("http://127.0.0.1:{}", agent.port)])
        .env_remove("PROXOPS_AGENT_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cycles(agent: &Agent) -> u64 {
    agent.lab().unwrap()["cycles"].as_u64().unwrap()
}

fn suspensions(data: &Path) -> Option<String> {
    std::fs::read_to_string(data.join("suspensions.json")).ok()
}

#[test]
fn control_requests_need_the_token_the_agents_own_host_and_origin_and_a_declared_target() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let agent_data = data.path().join("agent");
    let state = data.path().join("sim-state.json");
    // The token comes from the file the agent configuration names, relative to it.
    std::fs::write(data.path().join("agent.token"), format!("{AGENT_TOKEN}\n")).unwrap();
    let port = free_port();
    let config = data.path().join("agent.yaml");
    std::fs::write(
        &config,
        format!("listen: 127.0.0.1:{port}\nagent:\n  token-file: agent.token\n"),
    )
    .unwrap();
    let child = Command::new(proxops_bin())
        .args(["run", "--cluster", "lab", "--interval", "1h", "--config"])
        .arg(&config)
        .arg("--repo")
        .arg(repo.path())
        .args(["--backend", "sim", "--sim-state"])
        .arg(&state)
        .arg("--data-dir")
        .arg(&agent_data)
        .env_remove("PROXOPS_AGENT_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent {
        child: ChildGuard(child),
        port,
        log: None,
    };
    // The read-only routes need no token.
    wait_for(Duration::from_secs(120), "the first convergence", || {
        clean_at(&agent.lab()?, None)
    });
    assert_eq!(
        crate::support::http_get(port, "/healthz").map(|r| r.0),
        Some(200)
    );
    assert_eq!(
        crate::support::http_get(port, "/metrics").map(|r| r.0),
        Some(200)
    );
    let before = cycles(&agent);
    let bearer = format!("Bearer {AGENT_TOKEN}");
    let post =
        |path: &str, headers: &[(&str, &str)]| http_with(port, "POST", path, headers).unwrap();

    // No token, or another one: 401, saying so, and nothing happens.
    let (code, body) = post("/v1/clusters/lab/reconcile", &[]);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("needs the agent's token"), "{body}");
    let (code, body) = post(
        "/v1/clusters/lab/suspend",
        &[("Authorization", "Bearer guess")],
    );
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("the bearer token is wrong"), "{body}");
    assert_eq!(suspensions(&agent_data), None);
    assert_eq!(cycles(&agent), before, "a refused reconcile ran a cycle");

    // A page of another site, even with the token (a rebinding page that learnt it): 403.
    let (code, body) = post(
        "/v1/clusters/lab/suspend",
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("http://evil.example"), "{body}");
    // A request addressed to another host name (DNS rebinding): 403.
    let (code, body) = post(
        "/v1/clusters/lab/reconcile",
        &[
            ("Authorization", &bearer),
            ("Host", &format!("evil.example:{port}")),
        ],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("is not this agent's address"), "{body}");
    assert_eq!(suspensions(&agent_data), None);
    assert_eq!(cycles(&agent), before, "a refused reconcile ran a cycle");

    // The agent's own origin and names are fine.
    let (code, body) = post(
        "/v1/clusters/lab/suspend?resource=VM/sandbox-01",
        &[
            ("Authorization", &bearer),
            ("Host", &format!("localhost:{port}")),
            ("Origin", &format!("http://localhost:{port}")),
        ],
    );
    assert_eq!(code, 200, "{body}");
    let saved = suspensions(&agent_data).unwrap();
    assert!(saved.contains("VM/sandbox-01"), "{saved}");

    // What the repository does not declare: 404, and nothing is saved.
    let auth = [("Authorization", bearer.as_str())];
    for path in [
        "/v1/clusters/nowhere/suspend",
        "/v1/clusters/nowhere/suspend?resource=VM/sandbox-01",
        "/v1/clusters/lab/suspend?resource=VM/no-such-vm",
        "/v1/clusters/lab/suspend?resource=LXC/sandbox-01",
        "/v1/clusters/lab/resume?resource=VM/no-such-vm",
        "/v1/clusters/nowhere/reconcile",
    ] {
        let (code, body) = post(path, &auth);
        assert_eq!(code, 404, "{path}: {body}");
    }
    assert_eq!(suspensions(&agent_data).as_deref(), Some(saved.as_str()));

    // The CLI: no token is a 401 with a hint; --token-file, the environment and the agent
    // configuration each give it.
    let (code, _, err) = cli(
        &agent,
        &["resume", "--cluster", "lab", "VM/sandbox-01"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("401") && err.contains("--token-file"), "{err}");
    let token_file = data
        .path()
        .join("agent.token")
        .to_string_lossy()
        .into_owned();
    let (code, out, err) = cli(
        &agent,
        &[
            "resume",
            "--cluster",
            "lab",
            "VM/sandbox-01",
            "--token-file",
            &token_file,
        ],
        &[],
    );
    assert_eq!(
        (code, out.trim()),
        (0, "VM/sandbox-01 of cluster lab: resumed"),
        "{err}"
    );
    let (code, out, err) = cli(
        &agent,
        &["suspend", "--cluster", "lab", "VM/no-such-vm"],
        &[("PROXOPS_AGENT_TOKEN", AGENT_TOKEN)],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("404") && err.contains("VM/no-such-vm"),
        "{err}"
    );
    // `--config` alone: the token file and the address both come from it.
    let out = Command::new(proxops_bin())
        .args(["reconcile", "--cluster", "lab", "--config"])
        .arg(&config)
        .env_remove("PROXOPS_AGENT_TOKEN")
        .env_remove("PROXOPS_AGENT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("cluster lab: converged: 0 planned"),
        "{stdout}"
    );
    assert_eq!(cycles(&agent), before + 1);
}

#[test]
fn a_listener_beyond_loopback_needs_a_token() {
    let data = tempfile::tempdir().unwrap();
    let repo = Repo::new();
    // The engine refuses before it binds anything.
    let mut options = proxops_agent::AgentOptions::new(
        proxops_agent::SourceLocation::Local(repo.path().to_path_buf()),
        data.path().join("agent"),
    );
    options.listen = "0.0.0.0:0".parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let bound = runtime.block_on(proxops_agent::Agent::bind(options.clone()));
    let err = bound.err().unwrap();
    assert!(
        matches!(err, proxops_agent::AgentError::Unprotected { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("without a control token"), "{err}");
    // On loopback it binds, token or not (the control routes then refuse everything).
    options.listen = "127.0.0.1:0".parse().unwrap();
    assert!(
        runtime
            .block_on(proxops_agent::Agent::bind(options))
            .is_ok()
    );

    // And so does `proxops run`, with a clear error.
    let out = Command::new(proxops_bin())
        .args(["run", "--once", "--listen", "0.0.0.0:0", "--backend", "sim"])
        .arg("--repo")
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .env_remove("PROXOPS_AGENT_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without a control token"),
        "{stderr}"
    );
    // An empty token file is an error, never "no token".
    let empty = data.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let out = Command::new(proxops_bin())
        .args(["run", "--once", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&empty)
        .arg("--repo")
        .arg(repo.path())
        .env_remove("PROXOPS_AGENT_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is empty"));
}
