//! Prunes: the guests tagged as this cluster's resources that the repository no longer declares
//! are deleted, bounded by the command's prune budget and guarded (node allowlist, a composition
//! that declares guests, locks, PVE's protection flag), clones before their templates.

use super::{PlanOptions, Planner};
use crate::desired::{Desired, OWNER_TAG, identity_tag};
use crate::identity::owned_by_proxops;
use crate::plan::{Action, Op, Skipped, Verb};
use proxops_model::ResourceKey;
use proxops_pve::{GuestInfo, PveClient};

impl<'a> Planner<'a> {
    /// Guests tagged as this cluster's resources that the repository no longer declares.
    pub(super) async fn prunes(&mut self, client: &PveClient, options: &PlanOptions) {
        let candidates = self.prune_candidates();
        let declares_guests = self.graph().resources().any(|r| {
            matches!(
                options.drivers.desired(&self.cx, self.graph().resource(r)),
                Ok(Desired::Guest(_))
            )
        });
        // The budget bounds a command: deletions earlier cycles of it made count.
        let mut budget = if options.prune_budget == 0 {
            usize::MAX
        } else {
            options.prune_budget.saturating_sub(options.prunes_used) as usize
        };
        // A template goes only after the guests pruned with it: a linked clone's disks rest
        // on its base volumes (PVE refuses to remove them), and a clone is its dependant.
        let mut guest_deletes = Vec::new();
        for (live, subject) in candidates {
            let deferral = self
                .prune_deferral(client, live, options, declares_guests, budget)
                .await;
            if let Some(reason) = deferral {
                self.plan.deferred_prunes.push(Skipped {
                    subject: format!("{subject} (vmid {})", live.vmid),
                    reason,
                });
            } else {
                budget -= 1;
                let reason = prune_reason(&subject, self.cx.cluster, options, budget);
                self.push_delete(live, &subject, reason, &mut guest_deletes);
            }
        }
    }

    /// The guests of ours gone from the repository, with the identity they are pruned as:
    /// clones before their templates, then by vmid, newest first.
    fn prune_candidates(&self) -> Vec<(&'a GuestInfo, String)> {
        let mut candidates: Vec<(&GuestInfo, String)> = Vec::new();
        for live in self.inventory.guests.values() {
            // A guest at a vmid the composition declares belongs to that resource's step
            // (updated, retagged or reported), whatever its tags say: never pruned.
            if !owned_by_proxops(live) || self.guests.is_declared(live.vmid) {
                continue;
            }
            let carried = self.guests.identities(self.cx.cluster, &live.tags);
            // Only a guest whose every identity is undeclared is gone from the repository.
            if carried.is_empty()
                || carried
                    .iter()
                    .any(|k| self.graph().find(&k.kind, &k.name).is_some())
            {
                continue;
            }
            candidates.push((live, carried[0].to_string()));
        }
        // Clones before their templates; then by vmid, newest first.
        candidates.sort_by(|(a, _), (b, _)| {
            (a.template, std::cmp::Reverse(a.vmid)).cmp(&(b.template, std::cmp::Reverse(b.vmid)))
        });
        candidates
    }

    /// Why `live` is not deleted this cycle, if it is not; `budget` is what the run has left.
    /// The guards are checked in this order, so a guest's protection flag is read only when
    /// nothing else defers it.
    async fn prune_deferral(
        &self,
        client: &PveClient,
        live: &GuestInfo,
        options: &PlanOptions,
        declares_guests: bool,
        budget: usize,
    ) -> Option<String> {
        if !options.allowed_nodes.is_empty() && !options.allowed_nodes.contains(&live.node) {
            Some(format!("node `{}` is not in the allowlist", live.node))
        } else if !declares_guests {
            Some("the composition declares no guests: refusing to delete (a probable bad push); declare one, or delete by hand".into())
        } else if live.lock.is_some() {
            Some(format!(
                "locked ({})",
                live.lock.as_deref().unwrap_or_default()
            ))
        } else if budget == 0 {
            Some(format!(
                "prune budget of {} per run used (raise --prune-budget or reconcile.prune-budget, or run again)",
                options.prune_budget
            ))
        } else {
            // PVE's protection flag exists to stop deletions; ProxOps honours it.
            protected(client, live).await
        }
    }

    /// Appends the deletion of `live`; a template's waits for the guests deleted before it
    /// (`guest_deletes`), which a guest's joins.
    fn push_delete(
        &mut self,
        live: &GuestInfo,
        subject: &str,
        reason: String,
        guest_deletes: &mut Vec<usize>,
    ) {
        let (kind, name) = subject.split_once('/').unwrap_or(("", subject));
        let id = self.plan.actions.len();
        let after = if live.template {
            guest_deletes.clone()
        } else {
            guest_deletes.push(id);
            Vec::new()
        };
        self.plan.actions.push(Action {
            id,
            level: None,
            kind: kind.to_owned(),
            name: name.to_owned(),
            node: live.node.clone(),
            vmid: Some(live.vmid),
            verb: Verb::Delete,
            reason,
            changes: Vec::new(),
            resizes: Vec::new(),
            restart: false,
            after,
            op: Op::Delete {
                guest: live.guest_ref(),
                running: live.status == "running",
                ha: live
                    .hastate
                    .is_some()
                    .then(|| proxops_pve::api::ha::ha_sid(live.kind, live.vmid)),
            },
        });
    }
}

/// Why a guest is pruned, with the guards it passed: it is ours by its tags, and the prune
/// fits the run's budget (`left` prunes remain after it).
fn prune_reason(subject: &str, cluster: &str, options: &PlanOptions, left: usize) -> String {
    let (kind, name) = subject.split_once('/').unwrap_or(("", subject));
    let key = ResourceKey {
        kind: kind.to_owned(),
        name: name.to_owned(),
    };
    let why = match options.marked.get(&key) {
        Some(Some(reason)) => format!("marked for deletion with `proxops delete` ({reason})"),
        Some(None) => "marked for deletion with `proxops delete`".to_owned(),
        None => "no longer declared".to_owned(),
    };
    let ours = format!(
        "{why}; ours by its tags `{OWNER_TAG}` and `{}`",
        identity_tag(cluster, kind, name)
    );
    if options.prune_budget == 0 {
        format!("{ours}; no prune budget")
    } else {
        let used = options.prune_budget as usize - left;
        format!("{ours}; prune {used} of {} this run", options.prune_budget)
    }
}

/// Why a guest must not be deleted, if PVE's `protection` flag (or an unreadable config) says so.
async fn protected(client: &PveClient, live: &GuestInfo) -> Option<String> {
    match client.guest_config(&live.guest_ref()).await {
        Ok(c) if c.values.get("protection").is_some_and(|p| p == "1") => Some(
            "protected in PVE (`protection: 1`): clear the flag to let ProxOps delete it, or delete it by hand".into(),
        ),
        Ok(_) => None,
        Err(e) => Some(format!("cannot read its config to check protection: {e}")),
    }
}
