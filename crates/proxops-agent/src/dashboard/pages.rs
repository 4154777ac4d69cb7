//! The dashboard's layout, overview and cluster pages, rendered on the server from the agent's
//! [`AgentStatus`] (the value `/status` serialises).

use crate::status::{ActionLine, AgentStatus, ClusterState, CycleResult, ResourceCheck};
use maud::{DOCTYPE, Markup, html};

/// The four resource states of the planes, in the order the counts show them.
pub(crate) const STATES: [&str; 4] = ["CLEAN", "READY", "WAIT", "DELETING"];

/// A resource's state as the pages colour it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Clean,
    Ready,
    Wait,
    Deleting,
    /// Its action failed in the last cycle.
    Failed,
    /// Suspended through the agent.
    Suspended,
    /// Not in the planes (yet).
    Unknown,
}

impl State {
    /// The state of `kind`/`name` in `cluster`.
    pub(crate) fn of(cluster: Option<&ClusterState>, kind: &str, name: &str) -> State {
        let Some(c) = cluster else {
            return State::Unknown;
        };
        let subject = format!("{kind}/{name}");
        let failed = c.last_cycle.as_ref().is_some_and(|l| {
            l.actions
                .iter()
                .any(|a| a.subject == subject && a.outcome.as_deref() == Some("failed"))
        });
        if failed {
            return State::Failed;
        }
        if c.suspended || c.suspended_resources.contains(&subject) {
            return State::Suspended;
        }
        let row = c
            .resources
            .iter()
            .find(|r| r.kind == kind && r.name == name);
        match row.map(|r| r.state.as_str()) {
            Some("CLEAN") => State::Clean,
            Some("READY") => State::Ready,
            Some("WAIT") => State::Wait,
            Some("DELETING") => State::Deleting,
            _ => State::Unknown,
        }
    }

    pub(crate) fn class(self) -> &'static str {
        match self {
            State::Clean => "st-clean",
            State::Ready => "st-ready",
            State::Wait => "st-wait",
            State::Deleting => "st-deleting",
            State::Failed => "st-failed",
            State::Suspended => "st-suspended",
            State::Unknown => "st-unknown",
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            State::Clean => "CLEAN",
            State::Ready => "READY",
            State::Wait => "WAIT",
            State::Deleting => "DELETING",
            State::Failed => "FAILED",
            State::Suspended => "SUSPENDED",
            State::Unknown => "UNKNOWN",
        }
    }
}

/// A cluster's state on the overview, from its last cycle.
pub(crate) fn cluster_word(c: &ClusterState) -> (&'static str, &'static str) {
    if c.suspended {
        return ("suspended", "st-suspended");
    }
    match c.last_cycle.as_ref().map(|l| l.result) {
        None => ("pending", "st-unknown"),
        Some(CycleResult::Converged) => ("clean", "st-clean"),
        Some(CycleResult::Applied | CycleResult::Drifted) => ("changes", "st-ready"),
        Some(CycleResult::Invalid) => ("invalid", "st-failed"),
        Some(CycleResult::Leased) => ("leased elsewhere", "st-wait"),
        Some(CycleResult::Suspended) => ("suspended", "st-suspended"),
        Some(CycleResult::Waiting) => ("waiting", "st-wait"),
        Some(_) => ("failing", "st-failed"),
    }
}

/// A path segment, percent-encoded past the characters names are made of.
pub(crate) fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn cluster_href(cluster: &str) -> String {
    format!("/ui/clusters/{}", seg(cluster))
}

pub(crate) fn resource_href(cluster: &str, kind: &str, name: &str) -> String {
    format!(
        "/ui/clusters/{}/resources/{}/{}",
        seg(cluster),
        seg(kind),
        seg(name)
    )
}

pub(super) fn short(id: Option<&str>) -> String {
    id.map_or_else(|| "—".to_owned(), |i| i.chars().take(10).collect())
}

/// `2026-12-01T20:33:54Z` as `2026-12-01 20:33:54Z`, in a `<time>`.
pub(super) fn when(t: Option<&str>) -> Markup {
    match t {
        Some(t) if !t.is_empty() => html! { time datetime=(t) { (t.replacen('T', " ", 1)) } },
        _ => html! { "—" },
    }
}

/// The page around `body`: header, navigation, theme and token controls, live updates.
pub(crate) fn layout(title: &str, crumbs: &[(String, String)], body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · ProxOps" }
                link rel="stylesheet" href="/ui/assets/style.css";
                // Not deferred: it sets the theme chosen earlier before the first paint.
                script src="/ui/assets/app.js" {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/" { span.logo aria-hidden="true" { "◆" } " ProxOps" }
                    nav aria-label="Breadcrumb" {
                        ol.crumbs {
                            @for (label, href) in crumbs {
                                li { a href=(href) { (label) } }
                            }
                        }
                    }
                    div.tools {
                        span.live id="live" title="Live updates" { "offline" }
                        button.tool id="token-button" type="button" aria-haspopup="dialog" { "Token" }
                        button.tool id="theme-button" type="button" aria-label="Switch theme" { "Theme" }
                    }
                }
                dialog id="token-dialog" aria-labelledby="token-title" {
                    form id="token-form" method="dialog" {
                        h2 id="token-title" { "Control token" }
                        p { "Actions need the agent's bearer token. It is kept in this tab only (sessionStorage)." }
                        label for="token-input" { "Token" }
                        input id="token-input" type="password" autocomplete="off" required;
                        div.row {
                            button type="submit" value="save" { "Save" }
                            button id="token-forget" type="button" { "Forget" }
                            button id="token-cancel" type="button" { "Cancel" }
                        }
                    }
                }
                div id="notice" role="status" aria-live="polite" {}
                main id="main" tabindex="-1" { (body) }
                footer { "proxops agent · " a href="/status" { "/status" } " · " a href="/metrics" { "/metrics" } }
            }
        }
    }
}

/// The `drifted` badge of a cluster whose last verification found resources drifted or missing
/// (nothing when none are).
pub(super) fn drifted_badge(c: &ClusterState) -> Markup {
    let n = c.drifted();
    html! {
        @if n > 0 {
            " " span.badge.st-drifted data-role="drifted"
                title="found by a verification; until a cycle or verification finds them in sync" {
                (n) " drifted"
            }
        }
    }
}

/// A resource's `drifted` (or `missing`) badge, when a verification found it so.
pub(super) fn check_badge(check: Option<&ResourceCheck>) -> Markup {
    html! {
        @if let Some(v) = check.filter(|v| v.state.is_drift()) {
            " " span.badge.st-drifted data-role="drifted"
                title=(format!("verified at {}: {}", v.checked_at, v.reason)) {
                (v.state.label().to_lowercase())
            }
        }
    }
}

pub(super) fn action(label: &str, verb: &str, cluster: &str, resource: Option<&str>) -> Markup {
    html! {
        button.act type="button" data-action=(verb) data-cluster=(cluster)
            data-resource=[resource] { (label) }
    }
}

fn counts(c: &ClusterState, state: &str) -> usize {
    c.resources.iter().filter(|r| r.state == state).count()
}

/// `GET /`: every cluster.
pub(crate) fn overview(status: &AgentStatus) -> Markup {
    let body = html! {
        section.agent {
            h1 { "Clusters" }
            dl.facts {
                div { dt { "Agent" } dd { (status.holder) } }
                div { dt { "Source" } dd { code { (status.source.location) } } }
                div { dt { "Revision" } dd { code { (short(status.source.revision.as_deref())) } } }
                div { dt { "Passes" } dd id="passes" { (status.passes) } }
                div { dt { "Interval" } dd { (status.interval_seconds) " s" } }
                div { dt { "Started" } dd { (when(Some(&status.started))) } }
            }
            @if let Some(e) = &status.source.error {
                p.error { "The repository could not be read: " (e) }
            }
            @for v in &status.vanished {
                p.warn { (v) }
            }
        }
        @if status.clusters.is_empty() {
            p.empty { "No cluster yet: the first pass has not loaded the repository." }
        }
        div.table-wrap {
            table.grid id="clusters" {
                caption.sr { "Clusters and their resources by state" }
                thead { tr {
                    th scope="col" { "Cluster" } th scope="col" { "State" }
                    th scope="col" { "Desired" } th scope="col" { "Observed" }
                    th scope="col" { "Last pass" }
                    @for s in STATES { th scope="col" class="num" { (s) } }
                    th scope="col" { "Pending" } th scope="col" { span.sr { "Actions" } }
                } }
                tbody {
                    @for c in &status.clusters {
                        @let (word, class) = cluster_word(c);
                        @let last = c.last_cycle.as_ref();
                        tr data-cluster=(c.name) {
                            th scope="row" { a href=(cluster_href(&c.name)) { (c.name) } }
                            td data-label="State" {
                                span class={"badge " (class)} data-role="cluster-state" { (word) }
                                " " span.muted title="drift mode" { (format!("{:?}", c.drift).to_lowercase()) }
                                (drifted_badge(c))
                            }
                            td data-label="Desired" { code { (short(last.and_then(|l| l.desired_head.as_deref()))) } }
                            td data-label="Observed" { code { (short(last.and_then(|l| l.observed_head.as_deref()))) } }
                            td data-label="Last pass" {
                                (when(last.map(|l| l.finished.as_str())))
                                @if let Some(l) = last { " " span.muted title="duration" { (format!("{:.2} s", l.duration_seconds)) } }
                            }
                            @for s in STATES {
                                td.num.count data-state=(s) data-label=(s) { (counts(c, s)) }
                            }
                            td data-label="Pending" { @match last.and_then(|l| l.candidate.as_deref()) {
                                Some(cand) => code.candidate { (cand) },
                                None => "—",
                            } }
                            td { div.acts.nowrap {
                                (action("Reconcile", "reconcile", &c.name, None))
                                @if c.suspended { (action("Resume", "resume", &c.name, None)) }
                                @else { (action("Suspend", "suspend", &c.name, None)) }
                            } }
                        }
                    }
                }
            }
        }
    };
    layout("Overview", &[("Overview".to_owned(), "/".to_owned())], body)
}

fn outcome_class(o: Option<&str>) -> &'static str {
    match o {
        Some("succeeded") => "st-clean",
        Some("failed") => "st-failed",
        Some("deferred" | "notStarted") => "st-wait",
        _ => "st-ready",
    }
}

fn changes_of(a: &ActionLine) -> Markup {
    html! {
        @if !a.changes.is_empty() {
            table.changes {
                thead { tr { th scope="col" { "Field" } th scope="col" { "Live" } th scope="col" { "Desired" } } }
                tbody {
                    @for ch in &a.changes {
                        tr {
                            td { code { (ch.key) } }
                            td.from { code { (ch.from.as_deref().unwrap_or("(unset)")) } }
                            td.to { @match &ch.to {
                                Some(to) => code { (to) },
                                None => em { "removed" },
                            } }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn actions_table(actions: &[&ActionLine], with_subject: bool) -> Markup {
    html! {
        div.table-wrap { table.grid.actions {
            thead { tr {
                @if with_subject { th scope="col" { "Resource" } }
                th scope="col" { "Action" } th scope="col" { "Node" } th scope="col" { "Reason" }
                th scope="col" { "Outcome" } th scope="col" class="num" { "ms" }
            } }
            tbody {
                @for a in actions {
                    tr {
                        @if with_subject { td { (a.subject) } }
                        td { (a.verb) } td { (a.node) }
                        td.reason { (a.reason) (changes_of(a)) }
                        td {
                            span class={"badge " (outcome_class(a.outcome.as_deref()))} {
                                (a.outcome.as_deref().unwrap_or("planned"))
                            }
                            @if let Some(e) = &a.error { div.error { (e) } }
                        }
                        td.num { (a.millis.map_or_else(String::new, |m| m.to_string())) }
                    }
                }
            }
        } }
    }
}

/// `GET /ui/clusters/{cluster}`.
pub(crate) fn cluster(c: &ClusterState) -> Markup {
    let (word, class) = cluster_word(c);
    let last = c.last_cycle.as_ref();
    let actions: Vec<&ActionLine> = last.map(|l| l.actions.iter().collect()).unwrap_or_default();
    let body = html! {
        div.head {
            h1 { "Cluster " (c.name) " " span class={"badge " (class)} data-role="cluster-state" { (word) } (drifted_badge(c)) }
            div.acts {
                (action("Reconcile now", "reconcile", &c.name, None))
                @if c.suspended { (action("Resume", "resume", &c.name, None)) }
                @else { (action("Suspend", "suspend", &c.name, None)) }
                a.button href=(format!("{}/graph", cluster_href(&c.name))) { "Graph" }
            }
        }
        dl.facts {
            div { dt { "Cycles" } dd id="cycles" { (c.cycles) } }
            div { dt { "Last result" } dd id="last-result" { (last.map_or("—", |l| l.result.label())) } }
            div { dt { "Finished" } dd { (when(last.map(|l| l.finished.as_str()))) } }
            div { dt { "Took" } dd { (last.map_or_else(|| "—".to_owned(), |l| format!("{:.2} s", l.duration_seconds))) } }
            div { dt { "Last success" } dd { (when(c.last_success.as_deref())) } }
            div { dt { "Source" } dd { code { (short(last.and_then(|l| l.source_revision.as_deref()))) } } }
            div { dt { "Desired" } dd { code { (short(last.and_then(|l| l.desired_head.as_deref()))) } } }
            div { dt { "Observed" } dd { code { (short(last.and_then(|l| l.observed_head.as_deref()))) } } }
            @if let Some(cand) = last.and_then(|l| l.candidate.as_deref()) {
                div { dt { "Candidate" } dd { code { (cand) } } }
            }
        }
        @if let Some(l) = last {
            @if !l.errors.is_empty() {
                section { h2 { "Errors" } ul.errors { @for e in &l.errors { li { (e) } } } }
            }
            section {
                h2 { "Last cycle" }
                p { (l.planned) " planned, " (l.succeeded) " succeeded, " (l.failed) " failed, "
                    (l.deferred) " deferred, " (l.not_started) " not started" }
                @if !actions.is_empty() { (actions_table(&actions, true)) }
                @if !l.anomalies.is_empty() || !l.skipped.is_empty() || !l.waiting.is_empty() || !l.deferred_prunes.is_empty() {
                    ul.notes {
                        @for a in &l.anomalies { li { span.badge.st-wait { "anomaly" } " " (a.subject) ": " (a.message) } }
                        @for s in &l.skipped { li { span.badge.st-suspended { "skipped" } " " (s.subject) ": " (s.reason) } }
                        @for s in &l.waiting { li { span.badge.st-wait { "waiting" } " " (s.subject) ": " (s.reason) } }
                        @for s in &l.deferred_prunes { li { span.badge.st-deleting { "kept" } " " (s.subject) ": " (s.reason) } }
                    }
                }
            }
        }
        section {
            h2 { "Resources" }
            div.filters role="search" {
                label for="filter" { "Filter" }
                input id="filter" type="search" placeholder="kind, name, node…" autocomplete="off";
                label for="state-filter" { "State" }
                select id="state-filter" {
                    option value="" { "any" }
                    @for s in STATES { option value=(s) { (s) } }
                    option value="FAILED" { "FAILED" }
                    option value="SUSPENDED" { "SUSPENDED" }
                }
                span.muted id="shown" {}
            }
            div.table-wrap { table.grid.sortable id="resources" {
                thead { tr {
                    @for (i, h) in ["Kind", "Name", "Node / vmid", "State", "Drift", "Anomaly", "Last action", "Time"].iter().enumerate() {
                        th scope="col" aria-sort="none" { button.sort type="button" data-col=(i) { (h) } }
                    }
                } }
                tbody {
                    @for r in &c.resources {
                        @let subject = format!("{}/{}", r.kind, r.name);
                        @let st = State::of(Some(c), &r.kind, &r.name);
                        @let planned: Vec<&ActionLine> = actions.iter().copied().filter(|a| a.subject == subject).collect();
                        @let anomaly = last.and_then(|l| l.anomalies.iter().find(|a| a.subject == subject));
                        tr data-state=(st.word()) data-subject=(subject) {
                            td { (r.kind) }
                            td { a href=(resource_href(&c.name, &r.kind, &r.name)) { (r.name) } }
                            td { (r.node.as_deref().unwrap_or("")) @if let Some(v) = r.vmid { " · " (v) } }
                            td { span class={"badge " (st.class())} title=(r.reason) { (st.word()) } (check_badge(r.verify.as_ref())) }
                            td {
                                @for a in &planned { span.drift { (a.verb) @if !a.changes.is_empty() { " " (a.changes.iter().map(|c| c.key.as_str()).collect::<Vec<_>>().join(", ")) } } " " }
                                @if let Some(v) = r.verify.as_ref().filter(|v| v.state.is_drift() && !v.differences.is_empty()) {
                                    span.drift title="found by a verification" { "live: " (v.differences.iter().map(|d| d.key.as_str()).collect::<Vec<_>>().join(", ")) }
                                }
                            }
                            td { @if let Some(a) = anomaly { (a.message) } }
                            td { @match planned.first() {
                                Some(a) => { (a.verb) " " (a.outcome.as_deref().unwrap_or("planned")) },
                                None => { (r.outcome.as_deref().unwrap_or("")) },
                            } }
                            td { (when(r.reconciled.as_deref())) }
                        }
                    }
                }
            } }
        }
    };
    layout(
        &format!("Cluster {}", c.name),
        &[
            ("Overview".to_owned(), "/".to_owned()),
            (c.name.clone(), cluster_href(&c.name)),
        ],
        body,
    )
}

/// A page for what does not exist.
pub(crate) fn missing(what: &str) -> Markup {
    layout(
        "Not found",
        &[("Overview".to_owned(), "/".to_owned())],
        html! { h1 { "Not found" } p { (what) } },
    )
}
