//! Human renderings of plans and cycle reports.

use proxops_engine::execute::{ActionResult, CycleReport, Outcome};
use proxops_engine::plan::{Action, ClusterPlan, PlanState, Verb};
use std::fmt::Write;

/// `--output` of the commands that print either a report for people or one JSON document
/// (each command's help says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Human,
    /// The command's JSON document.
    Json,
}

fn verb(v: Verb) -> &'static str {
    match v {
        Verb::Download => "download",
        Verb::Replace => "replace",
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Retag => "retag",
        Verb::Adopt => "adopt",
        Verb::Start => "start",
        Verb::Stop => "stop",
        Verb::MarkTemplate => "template",
        Verb::Delete => "delete",
        Verb::Migrate => "migrate",
        Verb::HaAdd => "ha-add",
        Verb::HaUpdate => "ha-update",
        Verb::HaRemove => "ha-remove",
        Verb::Snapshot => "snapshot",
        Verb::Verify => "verify",
        Verb::PruneSnapshots => "prune-snapshots",
        _ => "change",
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
    } else if matches!(p.state(), PlanState::Stuck | PlanState::Waiting) {
        let _ = writeln!(
            out,
            "cluster {}: no actions, but not in sync: {}",
            p.cluster,
            p.stuck_summary()
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
        let _ = writeln!(out, "  error    {}: {} [{}]", s.subject, s.reason, s.code);
    }
    for s in &p.skipped {
        let _ = writeln!(out, "  skipped  {}: {}", s.subject, s.reason);
    }
    for s in &p.waiting {
        let _ = writeln!(out, "  waiting  {}: {}", s.subject, s.reason);
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
        // The kind first (and PVE's status): what to do next differs between a refusal, an
        // unreachable node and a lost answer more than the message text shows.
        Outcome::Failed { error } => match error.status() {
            Some(status) => format!("FAILED ({} {status}): {error}", error.kind()),
            None => format!("FAILED ({}): {error}", error.kind()),
        },
        Outcome::Deferred {
            reason: Some(reason),
            ..
        } => format!("deferred: {reason}; retried next cycle"),
        Outcome::Deferred { blocked_by, .. } => format!(
            "deferred (waits for action{} {})",
            if blocked_by.len() == 1 { "" } else { "s" },
            blocked_by
                .iter()
                .map(|b| format!("#{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Outcome::NotStarted => "not started (stopping)".to_owned(),
        other => format!("{other:?}"),
    };
    format!(
        "[{cluster}] #{} {} {}{}: {status}",
        a.id,
        verb(a.verb),
        subject(a),
        on_node(a)
    )
}

/// ` on <node>`, or nothing for a cluster-wide action (a cluster object's).
fn on_node(a: &Action) -> String {
    if a.node.is_empty() {
        String::new()
    } else {
        format!(" on {}", a.node)
    }
}

/// One line as an action starts.
pub fn started_line(cluster: &str, a: &Action) -> String {
    format!(
        "[{cluster}] #{} {} {}{}: running",
        a.id,
        verb(a.verb),
        subject(a),
        on_node(a)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use proxops_engine::execute::{ExecOptions, execute};
    use proxops_engine::planner::{PlanOptions, plan_cluster};
    use proxops_graph::Graph;
    use proxops_model::Registry;
    use proxops_model::diagnostic::SourceFile;
    use proxops_model::manifest::load_manifest;
    use proxops_pve_sim::{Node, SimConfig, State, Storage};
    use std::sync::Arc;

    fn vm(second_nic: bool, firewall: bool, tags: &str) -> Arc<proxops_model::Resource> {
        let mut text = String::from(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 1GiB\n  networks:\n    - model: virtio\n      bridge: vmbr0\n",
        );
        if firewall {
            text.push_str("      firewall: true\n");
        }
        if second_nic {
            text.push_str("    - model: virtio\n      bridge: vmbr1\n");
        }
        text.push_str(&format!("  tags: [{tags}]\n"));
        let loaded = load_manifest(
            &SourceFile::new("web.yaml", text),
            &Registry::builtin(),
            None,
        );
        loaded
            .resource
            .unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
    }

    /// Removals read unlike sets: a deleted key as `- key (was …)`, sub-keys and tags taken out
    /// of a value named after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn removed_keys_sub_keys_and_tags_render_as_removals() {
        let state = State {
            nodes: vec![Node {
                node: "pve1".into(),
                storages: vec![Storage {
                    storage: "local-lvm".into(),
                    kind: "lvmthin".into(),
                    content: vec!["images".into()],
                    ..Storage::default()
                }],
                ..Node::default()
            }],
            ..State::default()
        };
        let sim = proxops_pve_sim::start(SimConfig::default().with_state(state))
            .await
            .unwrap();
        let client = proxops_test_support::sim::client(&sim);
        let registry = Registry::builtin();
        let (v1, v2) = (vm(true, true, "web, blue"), vm(false, false, "web"));
        let graph = Graph::build(&registry, std::slice::from_ref(&v1)).unwrap();
        let created = plan_cluster(&client, "t", &graph, &PlanOptions::default())
            .await
            .unwrap();
        assert!(
            execute(&client, &created, &ExecOptions::default())
                .await
                .all_succeeded()
        );
        let options = PlanOptions::default().with_previous(Some([(v1.key(), v1.clone())].into()));
        let graph = Graph::build(&registry, std::slice::from_ref(&v2)).unwrap();
        let p = plan_cluster(&client, "t", &graph, &options).await.unwrap();
        let text = plan(&p);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert!(
            lines.contains(&"update    VM/web (120)  pve1  changed: net0, tags; removed: net1"),
            "{text}"
        );
        let line = |key: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(key))
                .copied()
                .unwrap_or_else(|| panic!("no {key} in {text}"))
        };
        let net1 = line("- net1 ");
        assert!(
            net1.starts_with("- net1 (was virtio=") && net1.ends_with(",bridge=vmbr1)"),
            "{text}"
        );
        assert!(
            line("net0: ").ends_with(",bridge=vmbr0 (removed firewall)"),
            "{text}"
        );
        assert!(line("tags: ").ends_with(" (removed blue)"), "{text}");
        sim.shutdown().await.unwrap();
    }
}
