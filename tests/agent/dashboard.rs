//! The dashboard in a real headless Chromium: the agent over both clusters of the example on
//! the in-process simulator, one browser session for every check (a browser starts in about a
//! second; the agent's first pass in a few).

use super::browser::{self, Driver, attr, click, screenshot, text, until};
use super::support::{AGENT_TOKEN, Agent, LAB, Repo, wait_for};
use crate::support::{ChildGuard, free_port, http_with, proxops_bin};
use fantoccini::{Client, Locator};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

const STATES: [&str; 4] = ["CLEAN", "READY", "WAIT", "DELETING"];

/// Each cluster's resources counted by state, as `/status` has them.
fn counts(status: &Value) -> BTreeMap<String, BTreeMap<&'static str, usize>> {
    status["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let rows = c["resources"].as_array().unwrap();
            let by_state = STATES
                .iter()
                .map(|s| (*s, rows.iter().filter(|r| r["state"] == *s).count()))
                .collect();
            (c["name"].as_str().unwrap().to_owned(), by_state)
        })
        .collect()
}

fn cycles_of(agent: &Agent, cluster: &str) -> u64 {
    let status = agent.status().unwrap();
    status["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == cluster)
        .and_then(|c| c["cycles"].as_u64())
        .unwrap()
}

/// The steps of `cluster`'s graph as `proxops graph --format json` reports them.
fn graph_steps(repo: &Repo, cluster: &str) -> usize {
    let out = Command::new(proxops_bin())
        .args(["graph", "--format", "json", "--cluster", cluster, "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["clusters"][0]["steps"].as_array().unwrap().len()
}

#[test]
fn the_dashboard_shows_the_clusters_and_their_resources_live_and_guards_its_actions() {
    let Some((driver, chromium)) = browser::tools() else {
        return;
    };
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let sim = data.path().join("sim.json");
    let port = free_port();
    let child = Command::new(proxops_bin())
        .args(["run", "--interval", "1h", "--backend", "sim", "--sim-state"])
        .arg(&sim)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--repo"])
        .arg(repo.path())
        .arg("--data-dir")
        .arg(data.path().join("agent"))
        .env("PROXOPS_AGENT_TOKEN", AGENT_TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent {
        child: ChildGuard(child),
        port,
        log: None,
    };
    let status = wait_for(
        Duration::from_secs(120),
        "a pass over both clusters",
        || {
            let status = agent.status()?;
            let clusters = status["clusters"].as_array()?;
            (clusters.len() == 2 && clusters.iter().all(|c| !c["lastCycle"].is_null()))
                .then(|| status.clone())
        },
    );
    let expected = counts(&status);
    assert_eq!(expected["lab"]["CLEAN"], LAB.len(), "{status}");
    // Home last: its graph, the larger, is the one photographed.
    let steps = [
        ("lab", graph_steps(&repo, "lab")),
        ("home", graph_steps(&repo, "home")),
    ];

    let driver = Driver::start(&driver, &chromium);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = driver.session().await;
        let base = format!("http://127.0.0.1:{port}");
        checks(
            &client,
            &agent,
            &base,
            &expected,
            &steps,
            &data.path().join("sim.lab.json"),
        )
        .await;
        client.close().await.unwrap();
    });
}

async fn checks(
    client: &Client,
    agent: &Agent,
    base: &str,
    expected: &BTreeMap<String, BTreeMap<&'static str, usize>>,
    steps: &[(&str, usize)],
    lab_state: &std::path::Path,
) {
    let wait = Duration::from_secs(60);

    // The overview: every cluster, its resources counted by state as /status counts them.
    client.goto(&format!("{base}/")).await.unwrap();
    for (cluster, by_state) in expected {
        for (state, n) in by_state {
            let css =
                format!("#clusters tr[data-cluster='{cluster}'] td.count[data-state='{state}']");
            assert_eq!(
                text(client, &css).await,
                Some(n.to_string()),
                "{cluster} {state}"
            );
        }
    }
    let rows = client
        .find_all(Locator::Css("#clusters tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), expected.len());
    until(wait, "the live indicator", || async {
        (text(client, "#live").await.as_deref() == Some("live")).then_some(())
    })
    .await;
    screenshot(client, "dashboard-overview", 1280, 1200).await;

    // A resource page: its receipt, its desired document and the commit that brought it.
    client
        .goto(&format!("{base}/ui/clusters/lab/resources/VM/sandbox-01"))
        .await
        .unwrap();
    let receipt = text(client, "#receipt").await.unwrap_or_default();
    assert!(receipt.contains("kind: Receipt"), "{receipt}");
    assert!(receipt.contains("vmid: 100"), "{receipt}");
    let desired = text(client, "#desired").await.unwrap_or_default();
    assert!(desired.contains("name: sandbox-01"), "{desired}");
    let history = client.find_all(Locator::Css("#history li")).await.unwrap();
    assert!(!history.is_empty(), "no desired commit listed");

    // The graphs: one box per step of `proxops graph`, each linking to its resource.
    for (cluster, steps) in steps {
        client
            .goto(&format!("{base}/ui/clusters/{cluster}/graph"))
            .await
            .unwrap();
        let boxes = client
            .find_all(Locator::Css("svg.graph g.step"))
            .await
            .unwrap();
        assert_eq!(boxes.len(), *steps, "{cluster}");
        let links = client
            .find_all(Locator::Css("svg.graph a.step-link"))
            .await
            .unwrap();
        assert_eq!(links.len(), *steps, "{cluster}");
    }
    let class = attr(client, "svg.graph g.step[data-name='pihole']", "class").await;
    assert_eq!(class.as_deref(), Some("step st-clean"));
    let href = attr(
        client,
        "svg.graph a.step-link:has(g[data-name='pihole'])",
        "href",
    )
    .await;
    assert_eq!(
        href.as_deref(),
        Some("/ui/clusters/home/resources/LXC/pihole")
    );
    screenshot(client, "dashboard-graph", 1280, 1000).await;

    // The cluster page follows a drift made in the simulator without a reload: a cycle finds
    // sandbox-01's memory changed behind ProxOps' back and sets it back, and the page shows it.
    client
        .goto(&format!("{base}/ui/clusters/lab"))
        .await
        .unwrap();
    until(wait, "the live updates", || async {
        (text(client, "#live").await.as_deref() == Some("live")).then_some(())
    })
    .await;
    client
        .execute("window.proxopsMarker = 42", vec![])
        .await
        .unwrap();
    let mut sim: Value =
        serde_json::from_str(&std::fs::read_to_string(lab_state).unwrap()).unwrap();
    sim["guests"]["100"]["config"]["memory"] = Value::from("4096");
    std::fs::write(lab_state, serde_json::to_vec(&sim).unwrap()).unwrap();
    let auth = format!("Bearer {AGENT_TOKEN}");
    let (code, body) = http_with(
        agent.port,
        "POST",
        "/v1/clusters/lab/reconcile",
        &[("Authorization", &auth)],
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let change = until(wait, "the drift on the page", || async {
        let t = text(client, "table.actions").await?;
        (t.contains("VM/sandbox-01") && t.contains("4096")).then_some(t)
    })
    .await;
    assert!(change.contains("memory"), "{change}");
    let marker = client
        .execute("return window.proxopsMarker", vec![])
        .await
        .unwrap();
    assert_eq!(marker, Value::from(42), "the page was reloaded");

    screenshot(client, "dashboard-cluster", 1280, 1400).await;

    // The resource table filters as one types, and sorts by a column.
    let rows = "#resources tbody tr:not([hidden])";
    client
        .find(Locator::Id("filter"))
        .await
        .unwrap()
        .send_keys("sandbox")
        .await
        .unwrap();
    until(wait, "the filter", || async {
        let shown = client.find_all(Locator::Css(rows)).await.ok()?;
        (shown.len() == 1).then_some(())
    })
    .await;
    assert_eq!(
        text(client, "#shown").await.as_deref(),
        Some("1 of 5 shown")
    );
    client
        .find(Locator::Id("filter"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    client
        .execute(
            "document.getElementById('filter').dispatchEvent(new Event('input', {bubbles: true}))",
            vec![],
        )
        .await
        .unwrap();
    click(client, "#resources button.sort[data-col='1']").await;
    click(client, "#resources button.sort[data-col='1']").await;
    let first = text(client, "#resources tbody tr:first-child td:nth-child(2)").await;
    assert_eq!(
        first.as_deref(),
        Some("sandbox-01"),
        "names sorted descending"
    );

    // Reconcile without the token: refused by the agent, no cycle.
    let before = cycles_of(agent, "lab");
    let reconcile = "button.act[data-action='reconcile']";
    click(client, reconcile).await;
    let refused = until(wait, "the refusal", || async {
        let t = text(client, "#notice").await?;
        t.starts_with("refused").then_some(t)
    })
    .await;
    assert!(refused.starts_with("refused (401)"), "{refused}");
    assert_eq!(
        cycles_of(agent, "lab"),
        before,
        "a refused reconcile ran a cycle"
    );

    // With the token, entered once for the tab: the pass runs and the page follows.
    click(client, "#token-button").await;
    let input = client.find(Locator::Id("token-input")).await.unwrap();
    input.send_keys(AGENT_TOKEN).await.unwrap();
    click(client, "#token-form button[type='submit']").await;
    click(client, reconcile).await;
    let done = until(wait, "the pass", || async {
        let t = text(client, "#notice").await?;
        t.starts_with("cluster lab:").then_some(t)
    })
    .await;
    assert!(done.starts_with("cluster lab: converged"), "{done}");
    assert_eq!(cycles_of(agent, "lab"), before + 1);
    let shown = (before + 1).to_string();
    until(wait, "the new cycle count on the page", || async {
        (text(client, "#cycles").await? == shown).then_some(())
    })
    .await;

    // The dark theme (kept for the tab's origin) and a phone's width.
    click(client, "#theme-button").await;
    let theme = client
        .execute("return document.documentElement.dataset.theme", vec![])
        .await
        .unwrap();
    assert!(theme == "dark" || theme == "light", "{theme}");
    if theme == "light" {
        click(client, "#theme-button").await;
    }
    screenshot(client, "dashboard-cluster-dark", 1280, 1400).await;
    client.goto(&format!("{base}/")).await.unwrap();
    screenshot(client, "dashboard-phone", 390, 1400).await;
    // Nothing is wider than a phone's screen but the tables, which scroll inside their box.
    client.set_window_size(390, 844).await.unwrap();
    let overflow = client
        .execute(
            "return document.documentElement.scrollWidth > document.documentElement.clientWidth",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        overflow,
        Value::Bool(false),
        "the overview is wider than a phone"
    );
}

/// Reads from `stream` until `buf` holds `needle`, for at most `limit`.
fn read_until(stream: &mut std::net::TcpStream, buf: &mut String, needle: &str, limit: Duration) {
    use std::io::Read;
    let deadline = std::time::Instant::now() + limit;
    let mut chunk = [0u8; 16384];
    while !buf.contains(needle) {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {needle:?} in {buf}"
        );
        match stream.read(&mut chunk) {
            Ok(0) => panic!("the stream ended before {needle:?}: {buf}"),
            Ok(n) => buf.push_str(&String::from_utf8_lossy(&chunk[..n])),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
        }
    }
}

fn open_events(port: u16) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    write!(
        s,
        "GET /ui/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    s
}

#[test]
fn the_live_update_stream_sends_the_status_on_every_change_and_is_bounded() {
    let repo = Repo::new();
    let data = tempfile::tempdir().unwrap();
    let sim = data.path().join("sim.json").to_string_lossy().into_owned();
    let backend = ["--backend", "sim", "--sim-state", &sim];
    let agent = Agent::start(&repo, &data.path().join("agent"), "agent-a", "1h", &backend);
    wait_for(Duration::from_secs(120), "the first pass", || {
        (agent.lab()?["cycles"].as_u64()? >= 1).then_some(())
    });
    let mut stream = open_events(agent.port);
    let mut buf = String::new();
    read_until(&mut stream, &mut buf, "\n\n", Duration::from_secs(30));
    assert!(buf.starts_with("HTTP/1.1 200"), "{buf}");
    assert!(
        buf.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{buf}"
    );
    read_until(
        &mut stream,
        &mut buf,
        "event: status\ndata: ",
        Duration::from_secs(30),
    );
    let first = buf
        .split("event: status\ndata: ")
        .nth(1)
        .unwrap()
        .to_owned();
    let mut rest = first;
    read_until(&mut stream, &mut rest, "\n", Duration::from_secs(30));
    let line = rest.lines().next().unwrap();
    // The same document /status serves.
    let event: Value = serde_json::from_str(line).unwrap();
    assert_eq!(event["kind"], "AgentStatus");
    assert_eq!(event["clusters"][0]["name"], "lab");
    assert_eq!(event["clusters"][0]["cycles"], 1);

    // A cycle is a change: the next event shows it.
    let auth = format!("Bearer {AGENT_TOKEN}");
    let (code, body) = http_with(
        agent.port,
        "POST",
        "/v1/clusters/lab/reconcile",
        &[("Authorization", &auth)],
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let mut after = String::new();
    read_until(
        &mut stream,
        &mut after,
        "\"cycles\":2",
        Duration::from_secs(30),
    );

    // At most 32 streams at once: the 33rd is told to come back later.
    let mut open: Vec<std::net::TcpStream> = Vec::new();
    for _ in 0..31 {
        let mut s = open_events(agent.port);
        let mut b = String::new();
        read_until(&mut s, &mut b, "event: status", Duration::from_secs(30));
        open.push(s);
    }
    let mut extra = open_events(agent.port);
    let mut b = String::new();
    read_until(&mut extra, &mut b, "\r\n\r\n", Duration::from_secs(30));
    assert!(b.starts_with("HTTP/1.1 503"), "{b}");
    // A closed stream frees its place.
    drop(open.pop());
    drop(stream);
    let ok = wait_for(Duration::from_secs(30), "a free stream", || {
        let mut s = open_events(agent.port);
        let mut b = String::new();
        read_until(&mut s, &mut b, "\r\n\r\n", Duration::from_secs(30));
        b.starts_with("HTTP/1.1 200").then_some(s)
    });
    drop(ok);

    // A resource page lists the desired commits that changed its document, and only those.
    let sandbox = repo.read("vm/lab/sandbox-01.yaml");
    repo.write(
        "vm/lab/sandbox-01.yaml",
        &sandbox.replace("memory: 2GiB", "memory: 3GiB"),
    );
    repo.commit("lab: grow sandbox-01");
    let (code, body) = http_with(
        agent.port,
        "POST",
        "/v1/clusters/lab/reconcile",
        &[("Authorization", &auth)],
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let history = |path: &str| {
        let (code, page) = crate::support::http_get(agent.port, path).unwrap();
        assert_eq!(code, 200, "{page}");
        let list = page.split(r#"id="history""#).nth(1).unwrap_or_default();
        let list = list.split("</ol>").next().unwrap_or_default();
        list.matches("<li>").count()
    };
    assert_eq!(history("/ui/clusters/lab/resources/VM/sandbox-01"), 2);
    assert_eq!(
        history("/ui/clusters/lab/resources/ISO/debian-13-netinst"),
        1
    );
    let (code, _) =
        crate::support::http_get(agent.port, "/ui/clusters/lab/resources/VM/nope").unwrap();
    assert_eq!(code, 404);
}
