#![allow(clippy::unwrap_used)]

use super::pages::{self, State};
use crate::status::{AgentStatus, ClusterState, CycleRecord, CycleResult, ResourceRow};
use proxops_graph::Graph;

fn status(clusters: Vec<ClusterState>) -> AgentStatus {
    AgentStatus {
        api_version: "proxops/v1alpha1".to_owned(),
        kind: "AgentStatus".to_owned(),
        holder: "agent@test".to_owned(),
        started: "2026-01-01T00:00:00Z".to_owned(),
        interval_seconds: 30.0,
        passes: 3,
        source: Default::default(),
        clusters,
        vanished: Vec::new(),
    }
}

fn lab() -> ClusterState {
    let mut c = ClusterState::new("lab");
    c.resources = vec![
        ResourceRow::new("VM", "web", "CLEAN", "reconciled"),
        ResourceRow::new("VM", "db", "CLEAN", "reconciled"),
        ResourceRow::new("ISO", "netinst", "WAIT", "waiting"),
    ];
    c.last_cycle = Some(CycleRecord::new(
        "2026-01-01T00:00:00Z",
        CycleResult::Converged,
    ));
    c
}

#[test]
fn the_overview_counts_resources_by_state_and_escapes_names() {
    let mut evil = ClusterState::new("<script>x</script>");
    evil.suspended = true;
    let html = pages::overview(&status(vec![lab(), evil])).into_string();
    assert!(
        html.contains(r#"data-state="CLEAN" data-label="CLEAN">2<"#),
        "{html}"
    );
    assert!(
        html.contains(r#"data-state="WAIT" data-label="WAIT">1<"#),
        "{html}"
    );
    assert!(
        html.contains(r#"data-state="READY" data-label="READY">0<"#),
        "{html}"
    );
    assert!(
        !html.contains("<script>x"),
        "a cluster name was not escaped"
    );
    assert!(html.contains("&lt;script&gt;x"));
    assert!(html.contains(">suspended<"));
    assert!(html.contains(">clean<"));
}

#[test]
fn a_failed_action_colours_its_resource_failed() {
    let mut c = lab();
    let mut record = CycleRecord::new("t", CycleResult::Failed);
    record.actions = vec![crate::status::ActionLine {
        subject: "VM/web".to_owned(),
        node: "pve1".to_owned(),
        verb: "update".to_owned(),
        reason: "memory".to_owned(),
        outcome: Some("failed".to_owned()),
        error: Some("PVE said no".to_owned()),
        millis: Some(3),
        changes: Vec::new(),
    }];
    c.last_cycle = Some(record);
    assert_eq!(State::of(Some(&c), "VM", "web"), State::Failed);
    assert_eq!(State::of(Some(&c), "VM", "db"), State::Clean);
    assert_eq!(State::of(Some(&c), "VM", "nope"), State::Unknown);
    c.suspended_resources = vec!["VM/db".to_owned()];
    assert_eq!(State::of(Some(&c), "VM", "db"), State::Suspended);
    let html = pages::cluster(&c).into_string();
    assert!(html.contains("PVE said no"));
    assert!(html.contains(r#"data-subject="VM/web""#));
}

#[test]
fn path_segments_are_percent_encoded() {
    assert_eq!(pages::seg("web-01.lab_x~"), "web-01.lab_x~");
    assert_eq!(pages::seg("a/b c"), "a%2Fb%20c");
    assert_eq!(
        pages::resource_href("lab", "VM", "web 1"),
        "/ui/clusters/lab/resources/VM/web%201"
    );
}

#[test]
fn the_graph_svg_has_one_box_per_step_linking_to_its_resource() {
    let repo = proxops_test_support::homelab();
    let registry = std::sync::Arc::new(proxops_model::Registry::builtin());
    let ws = proxops_engine::workspace::Workspace::open(&repo, registry, &[]).unwrap();
    let graph: &Graph = ws.graph("lab").unwrap();
    assert!(graph.step_count() > 1);
    let svg = super::graph::svg("lab", graph, Some(&ClusterState::new("lab"))).into_string();
    assert_eq!(
        svg.matches(r#"<g class="step "#).count(),
        graph.step_count()
    );
    assert!(
        svg.contains(r#"href="/ui/clusters/lab/resources/VM/sandbox-01""#),
        "{svg}"
    );
    let edges: usize = graph
        .steps()
        .iter()
        .map(|s| graph.prerequisites(s.id).len())
        .sum();
    assert_eq!(svg.matches(" C").count(), edges);
}

#[test]
fn a_resource_a_verification_found_drifted_has_a_badge_here_and_on_the_overview() {
    use crate::status::ResourceCheck;
    use proxops_engine::verify::{Difference, VerifyState};
    let mut c = lab();
    let html = pages::cluster(&c).into_string();
    assert!(!html.contains(r#"data-role="drifted""#), "{html}");
    c.resources[0].verify = Some(ResourceCheck {
        differences: vec![Difference::new(
            "memory",
            Some("2048".into()),
            Some("4096".into()),
        )],
        ..ResourceCheck::new(
            VerifyState::Drifted,
            "2026-01-01T00:00:00Z",
            "changed: memory",
        )
    });
    c.resources[1].verify = Some(ResourceCheck::new(
        VerifyState::InSync,
        "2026-01-01T00:00:00Z",
        "in sync",
    ));
    let html = pages::cluster(&c).into_string();
    // The cluster's heading and the one drifted row; the row names what differs.
    assert_eq!(html.matches(r#"data-role="drifted""#).count(), 2, "{html}");
    assert!(html.contains(">1 drifted<"), "{html}");
    assert!(html.contains(">drifted<"), "{html}");
    assert!(html.contains("live: memory"), "{html}");
    let overview = pages::overview(&status(vec![c.clone()])).into_string();
    assert!(overview.contains(">1 drifted<"), "{overview}");
    // The resource page shows both values.
    let page = super::detail_pages::resource(&c, "VM", "web", &Default::default()).into_string();
    assert!(page.contains(r#"id="drift""#), "{page}");
    assert!(page.contains("<code>4096</code>") && page.contains("<code>2048</code>"));
}
