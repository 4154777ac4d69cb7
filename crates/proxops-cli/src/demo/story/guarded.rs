//! The demo's snapshot-guarded update ([`proxops_engine::guard`]): a VM of the focus cluster gets
//! `update-policy` and a disruptive change (twice its cores, and started) in one commit; its
//! guest OS will not bring the QEMU guest agent up again (the simulator's
//! `Guest::agent_missing`). The cycle snapshots, updates, starts, checks, and rolls the VM back
//! to the snapshot; the receipt records it; the next cycle sends nothing for that document.

use super::{Story, failed_run, observed_head};
use crate::demo::{DemoError, Guarded};
use proxops_engine::plan::Verb;
use proxops_store::documents::Outcome as ReceiptOutcome;

/// The manifest text with `update-policy` (a 1 s check), `cores` doubled and `state:
/// started`; `None` when it has no `cores` line to change.
fn guarded_text(text: &str) -> Option<(String, String)> {
    let mut out = String::with_capacity(text.len() + 80);
    let mut changed = None;
    let mut started = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == "spec:" {
            out.push_str(line);
            out.push_str("  update-policy: {snapshot: true, verify: {timeout: 1s}}\n");
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("    cores: ")
            && changed.is_none()
            && let Ok(n) = rest.trim().parse::<u32>()
        {
            out.push_str(&format!("    cores: {}\n", n * 2));
            changed = Some(format!("cores: {n} -> {}", n * 2));
            continue;
        }
        if trimmed.starts_with("  state: ") {
            out.push_str("  state: started\n");
            started = !trimmed.starts_with("  state: started");
            continue;
        }
        out.push_str(line);
    }
    let mut what = changed?;
    if started {
        what.push_str(", state: started");
    }
    Some((out, what))
}

impl Story<'_> {
    /// Gives the cluster's first VM that enables its guest agent an update policy and a
    /// disruptive change, makes its guest OS lose the agent, and runs two cycles: the first
    /// rolls the VM back, the second leaves it alone.
    pub(super) async fn guarded_update(&self, cluster: &str) -> Result<Guarded, DemoError> {
        let head = self.head()?;
        let graph = head
            .graph(cluster)
            .ok_or_else(|| DemoError::Repository(format!("no graph for `{cluster}`")))?;
        let Some((resource, vmid)) = graph
            .resources()
            .map(|id| (id, graph.resource(id)))
            .filter(|(_, r)| r.kind == "VM")
            .filter(|(_, r)| {
                serde_json::to_value(&r.spec)
                    .ok()
                    .and_then(|s| s.pointer("/options/agent").cloned())
                    == Some(serde_json::Value::Bool(true))
            })
            .find_map(|(id, r)| {
                let vmid = graph
                    .steps_of(id)
                    .first()
                    .and_then(|s| graph.step(*s).vmid)?;
                Some((std::sync::Arc::clone(r), vmid))
            })
        else {
            return Err(DemoError::Repository(format!(
                "cluster `{cluster}` declares no VM with a guest agent to update"
            )));
        };
        let subject = format!("VM/{}", resource.name());
        let path = self.ws.repo.join(&resource.file.path);
        let text = std::fs::read_to_string(&path).map_err(|e| DemoError::Io {
            what: format!("read {}", path.display()),
            source: e,
        })?;
        let Some((guarded, changed)) = guarded_text(&text) else {
            return Err(DemoError::Repository(format!(
                "{} has no `cores` to change",
                resource.file.path
            )));
        };
        std::fs::write(&path, guarded).map_err(|e| DemoError::Io {
            what: format!("write {}", path.display()),
            source: e,
        })?;
        self.ws.commit(&format!(
            "{subject}: {changed}, its updates guarded by a snapshot"
        ))?;
        self.note(&format!(
            "committed: {subject} gets `update-policy: {{snapshot: true, verify: {{timeout: 1s}}}}` and {changed}"
        ));
        // The guest OS will not come back with its agent after the change.
        let state_file = self.ws.sim_state(cluster);
        let mut state = self.sim_state(cluster)?;
        let Some(before) = state.guests.get_mut(&vmid).map(|g| {
            g.agent_missing = true;
            g.clone()
        }) else {
            return Err(DemoError::Repository(format!(
                "{subject} (vmid {vmid}) is not in the simulator"
            )));
        };
        state
            .save(&state_file)
            .map_err(|e| DemoError::Simulator(e.to_string()))?;
        self.note(&format!(
            "in the simulator: the guest OS of {subject} will not start its QEMU guest agent again"
        ));
        let head = self.head()?;
        let run = self.cycle(&head, cluster).await;
        failed_run(&run)?;
        let plan = run.cycles.first().map(|c| c.plan.clone());
        let guarded_steps = plan.as_ref().is_some_and(|p| {
            let verbs: Vec<Verb> = p
                .actions
                .iter()
                .filter(|a| a.vmid == Some(vmid))
                .map(|a| a.verb)
                .collect();
            verbs.first() == Some(&Verb::Snapshot) && verbs.contains(&Verb::Verify)
        });
        let failure = run
            .cycles
            .first()
            .and_then(|c| c.report.as_ref())
            .and_then(|r| {
                r.results.iter().find_map(|x| match &x.outcome {
                    proxops_engine::execute::Outcome::Failed { error } => Some(error.to_string()),
                    _ => None,
                })
            });
        let after = self.sim_state(cluster)?;
        let snapshot = after
            .guests
            .get(&vmid)
            .and_then(|g| g.snapshots.last().cloned());
        let rolled_back = after.guests.get(&vmid).is_some_and(|g| {
            let mut expected = before.config.clone();
            if let Some(s) = &snapshot {
                expected.insert("parent".into(), s.clone());
            }
            g.config == expected && g.status == before.status
        });
        let refs = self.refs(&head, cluster)?;
        let recorded = self.store.read_observed(&refs, None)?.and_then(|o| {
            o.receipts
                .get(&resource.key())
                .map(|r| r.doc.spec.result.outcome)
        }) == Some(ReceiptOutcome::RolledBack);
        self.note(&format!(
            "{subject} is back at snapshot {} as it was ({}), the receipt says rolledBack",
            snapshot.as_deref().unwrap_or("?"),
            if rolled_back {
                "config and power"
            } else {
                "NOT restored"
            }
        ));
        // The same document is not tried again.
        let tasks = after.tasks.len();
        let again = self.cycle(&head, cluster).await;
        failed_run(&again)?;
        let retried = again
            .cycles
            .first()
            .is_some_and(|c| c.plan.actions.iter().any(|a| a.vmid == Some(vmid)))
            || self.sim_state(cluster)?.tasks.len() != tasks;
        Ok(Guarded {
            cluster: cluster.to_owned(),
            subject,
            vmid,
            changed,
            snapshot,
            plan,
            guarded: guarded_steps,
            failure,
            rolled_back,
            recorded,
            retried,
            observed: observed_head(&run),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::guarded_text;

    #[test]
    fn the_manifest_gets_a_policy_twice_the_cores_and_started() {
        let text = "kind: VM\nspec:\n  node: pve1\n  state: stopped           # by hand\n  cpu:\n    type: host\n    cores: 2\n";
        let (out, what) = guarded_text(text).unwrap_or_default();
        assert_eq!(
            out,
            "kind: VM\nspec:\n  update-policy: {snapshot: true, verify: {timeout: 1s}}\n  node: pve1\n  state: started\n  cpu:\n    type: host\n    cores: 4\n"
        );
        assert_eq!(what, "cores: 2 -> 4, state: started");
        assert!(guarded_text("spec:\n  node: a\n").is_none());
    }
}
