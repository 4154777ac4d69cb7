//! An embedding tool registers the agent's metrics in its own `prometheus-client` registry and
//! serves them with its own; the agent's `/metrics` keeps its own names and formats.

use super::support::*;
use proxops_agent::metrics::Format;
use proxops_agent::metrics::prometheus_client::metrics::counter::Counter;
use proxops_agent::metrics::prometheus_client::registry::Registry;
use proxops_agent::{Agent, AgentBackend, AgentOptions, SourceLocation};
use std::io::{Read, Write};
use std::time::Duration;

/// `GET path` with `Accept: accept`; the response's head (lowercased) and body.
fn get(port: u16, path: &str, accept: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.to_ascii_lowercase(), body.to_owned())
}

#[test]
fn an_embedding_tool_serves_the_agents_metrics_with_its_own() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let mut options = AgentOptions::new(
        SourceLocation::Local(repo.path().to_path_buf()),
        data.path().join("agent"),
    );
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.clusters = vec!["lab".to_owned()];
    options.interval = Duration::from_secs(3600);
    options.backend = AgentBackend::Sim {
        state_file: None,
        task_time: Duration::from_millis(10),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let agent = runtime.block_on(Agent::bind(options)).unwrap();
    let port = agent.local_addr().unwrap().port();

    // The tool's own registry: one metric of its own, the agent's under its prefix.
    let mut tool = Registry::with_prefix("tool");
    let served: Counter = Counter::default();
    tool.register("requests", "Requests the tool served", served.clone());
    served.inc();
    agent.register_metrics(&mut tool);

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = runtime.spawn(agent.run(stopped));
    wait_for(Duration::from_secs(120), "the first cycle", || {
        (agent_cycles(port)? >= 1).then_some(())
    });

    let theirs = Format::Prometheus.encode(&tool).unwrap();
    for line in [
        "tool_requests_total 1\n",
        "tool_proxops_passes_total 1\n",
        "tool_proxops_cycles_total{cluster=\"lab\",result=\"applied\"} 1\n",
        "tool_proxops_actions_total{cluster=\"lab\",kind=\"VM\",action=\"create\",result=\"succeeded\"} 1\n",
    ] {
        assert!(theirs.contains(line), "no `{line}` in\n{theirs}");
    }

    // The agent's endpoint: its own names, the Prometheus text format unless OpenMetrics is
    // preferred.
    let (head, own) = get(port, "/metrics", "*/*");
    assert!(
        head.contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    assert!(
        own.contains("\nproxops_cycles_total{cluster=\"lab\",result=\"applied\"} 1\n"),
        "{own}"
    );
    assert!(!own.contains("tool_") && !own.contains("# EOF"), "{own}");
    let (head, open) = get(
        port,
        "/metrics",
        "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3",
    );
    assert!(
        head.contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{head}"
    );
    assert!(
        open.contains("# TYPE proxops_cycles counter\n")
            && open.contains("\nproxops_cycles_total{cluster=\"lab\",result=\"applied\"} 1\n")
            && open.ends_with("# EOF\n"),
        "{open}"
    );

    stop.send(true).unwrap();
    runtime.block_on(running).unwrap();
}

/// Cluster lab's cycles in the agent's `/status`.
fn agent_cycles(port: u16) -> Option<u64> {
    let (code, body) = crate::support::http_get(port, "/status")?;
    let status: serde_json::Value = serde_json::from_str(&body).ok()?;
    (code == 200).then_some(())?;
    status["clusters"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "lab")?["cycles"]
        .as_u64()
}

/// The embedder's pass hook runs once after every pass, after the pass's cycles have ended
/// (the `proxops` binary trims the allocator there).
#[test]
fn the_pass_hook_runs_once_after_each_pass() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&calls);
    let mut options = AgentOptions::new(
        SourceLocation::Local(repo.path().to_path_buf()),
        data.path().join("agent"),
    )
    .with_after_pass(Some(proxops_agent::PassHook::new(move || {
        seen.fetch_add(1, Ordering::SeqCst);
    })));
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.clusters = vec!["lab".to_owned()];
    options.interval = Duration::from_millis(50);
    options.max_passes = Some(3);
    options.backend = AgentBackend::Sim {
        state_file: None,
        task_time: Duration::from_millis(10),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let agent = runtime.block_on(Agent::bind(options)).unwrap();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let status = runtime.block_on(agent.run(stopped));
    assert_eq!(status.passes, 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
