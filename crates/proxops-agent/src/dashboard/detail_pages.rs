//! The dashboard's graph and resource pages.

use super::detail::Detail;
use super::pages::{
    State, action, actions_table, check_badge, cluster_href, layout, resource_href, when,
};
use crate::status::{ActionLine, ClusterState};
use maud::{Markup, html};

/// `GET /ui/clusters/{cluster}/graph`.
pub(crate) fn graph(cluster: &str, svg: Option<Markup>, steps: usize, levels: usize) -> Markup {
    let body = html! {
        div.head {
            h1 { "Graph of " (cluster) }
            div.acts { a.button href=(cluster_href(cluster)) { "Resources" } }
        }
        @match svg {
            Some(svg) => {
                p.muted { (steps) " steps in " (levels) " levels, prerequisites left of what needs them. Select a step for its resource." }
                ul.legend aria-label="Colours" {
                    @for s in [State::Clean, State::Ready, State::Wait, State::Deleting, State::Failed, State::Suspended] {
                        li { span class={"swatch " (s.class())} {} (s.word()) }
                    }
                }
                div.graph-wrap { (svg) }
            },
            None => p.empty { "No graph: the cluster is invalid or not loaded yet." },
        }
    };
    layout(
        &format!("Graph of {cluster}"),
        &[
            ("Overview".to_owned(), "/".to_owned()),
            (cluster.to_owned(), cluster_href(cluster)),
            (
                "graph".to_owned(),
                format!("{}/graph", cluster_href(cluster)),
            ),
        ],
        body,
    )
}

fn yaml_block(id: &str, text: Option<&str>, none: &str) -> Markup {
    html! {
        @match text {
            Some(t) => pre id=(id) tabindex="0" { code { (t) } },
            None => p.empty id=(id) { (none) },
        }
    }
}

/// `GET /ui/clusters/{cluster}/resources/{kind}/{name}`.
pub(crate) fn resource(c: &ClusterState, kind: &str, name: &str, detail: &Detail) -> Markup {
    let subject = format!("{kind}/{name}");
    let st = State::of(Some(c), kind, name);
    let row = c
        .resources
        .iter()
        .find(|r| r.kind == kind && r.name == name);
    let last = c.last_cycle.as_ref();
    let actions: Vec<&ActionLine> = last
        .map(|l| l.actions.iter().filter(|a| a.subject == subject).collect())
        .unwrap_or_default();
    let suspended = c.suspended_resources.contains(&subject);
    let body = html! {
        div.head {
            h1 { (kind) " " (name) " " span class={"badge " (st.class())} data-role="resource-state" { (st.word()) } (check_badge(row.and_then(|r| r.verify.as_ref()))) }
            div.acts {
                @if suspended { (action("Resume", "resume", &c.name, Some(&subject))) }
                @else { (action("Suspend", "suspend", &c.name, Some(&subject))) }
            }
        }
        dl.facts {
            div { dt { "Cluster" } dd { a href=(cluster_href(&c.name)) { (c.name) } } }
            div { dt { "State" } dd { (row.map_or("not in the planes", |r| r.reason.as_str())) } }
            @if let Some(n) = row.and_then(|r| r.node.as_deref()) { div { dt { "Node" } dd { (n) } } }
            @if let Some(v) = row.and_then(|r| r.vmid) { div { dt { "vmid" } dd { (v) } } }
            div { dt { "Last outcome" } dd { (row.and_then(|r| r.outcome.as_deref()).unwrap_or("—")) } }
            div { dt { "Reconciled" } dd { (when(row.and_then(|r| r.reconciled.as_deref()))) } }
            @if let Some(v) = row.and_then(|r| r.verify.as_ref()) {
                div { dt { "Verified" } dd id="verified" { (v.state.label()) " " (when(Some(&v.checked_at))) } }
            }
        }
        @if let Some(v) = row.and_then(|r| r.verify.as_ref()).filter(|v| v.state.is_drift()) {
            section {
                h2 { "Drift" }
                p { (v.reason) }
                @if !v.differences.is_empty() {
                    table.changes id="drift" {
                        thead { tr { th scope="col" { "Field" } th scope="col" { "Live" } th scope="col" { "Desired" } } }
                        tbody {
                            @for d in &v.differences {
                                tr {
                                    td { code { (d.key) } }
                                    td { code { (d.live.as_deref().unwrap_or("(unset)")) } }
                                    td { code { (d.desired.as_deref().unwrap_or("(unset)")) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "Last plan" }
            @if actions.is_empty() { p.empty id="plan" { "The last plan changes nothing here." } }
            @else { div id="plan" { (actions_table(&actions, false)) } }
            @if let Some(l) = last {
                ul.notes {
                    @for a in l.anomalies.iter().filter(|a| a.subject == subject) { li { span.badge.st-wait { "anomaly" } " " (a.message) } }
                    @for s in l.skipped.iter().filter(|s| s.subject == subject) { li { span.badge.st-suspended { "skipped" } " " (s.reason) } }
                    @for s in l.waiting.iter().filter(|s| s.subject == subject) { li { span.badge.st-wait { "waiting" } " " (s.reason) } }
                }
            }
        }
        div.columns {
            section {
                h2 { "Receipt" }
                (yaml_block("receipt", detail.receipt.as_deref(), "No receipt: it has not been reconciled yet."))
                @for (n, doc) in &detail.artifacts {
                    h3 { "Artifact " code { (n) } }
                    pre.artifact tabindex="0" { code { (doc) } }
                }
            }
            section {
                h2 { "Desired document" }
                (yaml_block("desired", detail.desired.as_deref(), "Not in the desired plane."))
            }
        }
        section {
            h2 { "History" }
            @if detail.history.is_empty() { p.empty { "No desired commit touched it yet." } }
            @else {
                ol.history id="history" {
                    @for h in &detail.history {
                        li {
                            code { (h.id.chars().take(10).collect::<String>()) } " "
                            (when(Some(&h.time))) " " (h.subject)
                            @if h.removed { " " span.badge.st-deleting { "removed" } }
                        }
                    }
                }
                @if detail.history_cut { p.muted { "Older desired commits were not searched." } }
            }
        }
    };
    layout(
        &subject,
        &[
            ("Overview".to_owned(), "/".to_owned()),
            (c.name.clone(), cluster_href(&c.name)),
            (subject.clone(), resource_href(&c.name, kind, name)),
        ],
        body,
    )
}
