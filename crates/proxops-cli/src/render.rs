//! Human renderings of plans and cycle reports.

use proxops_engine::execute::{ActionResult, CycleReport, Outcome};
use proxops_engine::plan::{Action, ClusterPlan, Verb};
use std::fmt::Write;

fn verb(v: Verb) -> &'static str {
    match v {
        Verb::Download => "download",
        Verb::Replace => "replace",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Start => "start",
        Verb::Stop => "stop",
        Verb::MarkTemplate => "template",
        Verb::Delete => "delete",
    }
}

fn subject(a: &Action) -> String {
    match a.vmid {
        Some(vmid) => format!("{}/{} ({vmid})", a.kind, a.name),
        None => format!("{}/{}", a.kind, a.name),
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// A cluster's plan: actions grouped by level (prunes last), then anomalies, skips, held-back
/// prunes and warnings.
pub fn plan(p: &ClusterPlan) -> String {
    let mut out = String::new();
    if p.is_empty() && !p.errors.is_empty() {
        let _ = writeln!(
            out,
            "cluster {}: no actions; {} to fix",
            p.cluster,
            plural(p.errors.len(), "error")
        );
    } else if p.is_empty() {
        let _ = writeln!(out, "cluster {}: converged, nothing to do", p.cluster);
    } else {
        let _ = writeln!(
            out,
            "cluster {}: {}",
            p.cluster,
            plural(p.actions.len(), "action")
        );
    }
    let width = p
        .actions
        .iter()
        .map(|a| subject(a).len())
        .max()
        .unwrap_or(0);
    let node_width = p.actions.iter().map(|a| a.node.len()).max().unwrap_or(0);
    let mut group = None;
    for a in &p.actions {
        let g = a
            .level
            .map_or_else(|| "prune".to_owned(), |l| format!("level {l}"));
        if group.as_ref() != Some(&g) {
            let _ = writeln!(out, "  {g}");
            group = Some(g);
        }
        let restart = if a.restart { " (restart)" } else { "" };
        let _ = writeln!(
            out,
            "    {:<8}  {:<width$}  {:<node_width$}  {}{restart}",
            verb(a.verb),
            subject(a),
            a.node,
            a.reason
        );
        for c in &a.changes {
            let from = c.from.as_deref().unwrap_or("(unset)");
            match &c.to {
                // A removal reads unlike a set: `- net1 (was virtio=...)`.
                Some(to) if !c.delete => {
                    let removed = if c.removed.is_empty() {
                        String::new()
                    } else {
                        format!(" (removed {})", c.removed.join(", "))
                    };
                    let _ = writeln!(out, "{:14}{}: {from} -> {to}{removed}", "", c.key);
                }
                _ => {
                    let _ = writeln!(out, "{:14}- {} (was {from})", "", c.key);
                }
            }
        }
        for r in &a.resizes {
            let _ = writeln!(out, "{:14}{}: {} -> {} bytes", "", r.disk, r.from, r.to);
        }
    }
    for a in &p.anomalies {
        let _ = writeln!(out, "  anomaly  {}: {}", a.subject, a.message);
    }
    for s in &p.errors {
        let _ = writeln!(
            out,
            "  error    {}: {} [proxops::cloud_init_secret]",
            s.subject, s.reason
        );
    }
    for s in &p.skipped {
        let _ = writeln!(out, "  skipped  {}: {}", s.subject, s.reason);
    }
    for s in &p.deferred_prunes {
        let _ = writeln!(out, "  kept     {}: {}", s.subject, s.reason);
    }
    for w in &p.warnings {
        let _ = writeln!(out, "  warning  {w}");
    }
    out
}

/// One line as an action ends.
pub fn result_line(cluster: &str, a: &Action, r: &ActionResult) -> String {
    let status = match &r.outcome {
        Outcome::Succeeded => "done".to_owned(),
        Outcome::Failed { error } => format!("FAILED: {error}"),
        Outcome::Deferred { blocked_by } => format!(
            "deferred (waits for action{} {})",
            if blocked_by.len() == 1 { "" } else { "s" },
            blocked_by
                .iter()
                .map(|b| format!("#{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Outcome::NotStarted => "not started (stopping)".to_owned(),
    };
    format!(
        "[{cluster}] #{} {} {} on {}: {status}",
        a.id,
        verb(a.verb),
        subject(a),
        a.node
    )
}

/// One line as an action starts.
pub fn started_line(cluster: &str, a: &Action) -> String {
    format!(
        "[{cluster}] #{} {} {} on {}: running",
        a.id,
        verb(a.verb),
        subject(a),
        a.node
    )
}

/// The totals of a cycle.
pub fn summary(report: &CycleReport) -> String {
    let count = |f: fn(&Outcome) -> bool| report.count(f);
    format!(
        "cluster {}: {} succeeded, {} failed, {} deferred, {} not started",
        report.cluster,
        count(|o| *o == Outcome::Succeeded),
        count(|o| matches!(o, Outcome::Failed { .. })),
        count(|o| matches!(o, Outcome::Deferred { .. })),
        count(|o| *o == Outcome::NotStarted),
    )
}
