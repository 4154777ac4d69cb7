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
