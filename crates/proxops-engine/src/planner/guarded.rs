//! The planner's side of snapshot-guarded updates ([`crate::guard`]): whether an update is
//! disruptive, whether PVE could snapshot the guest first, whether the same desired document
//! was rolled back before; and the visible steps around the update (`snapshot`, `verify`,
//! `prune-snapshots`).

use super::Planner;
use crate::desired::DesiredGuest;
use crate::diff::GuestDiff;
use crate::plan::{Check, Guard, Op, Verb};
use proxops_graph::StepId;
use proxops_model::ResourceKey;
use proxops_pve::{GuestConfig, GuestRef, GuestType, PveClient, SnapshotEntry};
use std::collections::BTreeMap;
use std::time::Duration;

/// The keys PVE applies only at the next start, or that change what the guest boots with:
/// what makes an update disruptive.
fn disruptive_keys(found: &GuestDiff) -> Vec<&str> {
    let mut keys: Vec<&str> = found
        .changes
        .iter()
        .filter(|c| c.restart || matches!(c.key.as_str(), "machine" | "cpu"))
        .map(|c| c.key.as_str())
        .chain(
            found
                .removals
                .iter()
                .filter(|r| r.restart)
                .map(|r| r.key.as_str()),
        )
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A guarded update as planned.
pub(super) struct GuardPlan {
    /// What a rollback needs.
    pub guard: Guard,
    /// Whether the snapshot saves the VM's memory.
    pub vmstate: bool,
    /// The snapshot step's reason.
    pub reason: String,
    /// How the guest is checked afterwards, and for how long.
    pub check: Check,
    pub timeout: Duration,
    /// ProxOps snapshots kept, and those to delete after the update succeeded.
    pub keep: u32,
    pub prune: Vec<String>,
}

/// The snapshots of each guest whose updates are guarded; a read that failed keeps its error.
pub(super) async fn read(
    client: &PveClient,
    guests: Vec<GuestRef>,
) -> BTreeMap<u32, Result<Vec<SnapshotEntry>, String>> {
    let mut out = BTreeMap::new();
    for g in guests {
        let listed = client.snapshot_list(&g).await.map_err(|e| e.to_string());
        out.insert(g.vmid, listed);
    }
    out
}

impl Planner<'_> {
    /// The guard of `d`'s update when it is disruptive and its policy asks for one; `Err`
    /// (why, whether an anomaly) when it cannot be done and nothing may be sent.
    pub(super) fn guard_plan(
        &self,
        step: StepId,
        d: &DesiredGuest,
        found: &GuestDiff,
        config: &GuestConfig,
        running: bool,
    ) -> Result<Option<GuardPlan>, (String, bool)> {
        let Some(policy) = crate::guard::policy(d) else {
            return Ok(None);
        };
        let keys = disruptive_keys(found);
        if found.is_converged() || keys.is_empty() {
            return Ok(None);
        }
        let keys = keys.join(", ");
        let graph = self.cx.graph;
        let resource = graph.resource(graph.step(step).resource);
        let subject = resource.key();
        let document = crate::guard::document_id(&resource.spec);
        let listed = self.guarded_snapshots(d, &keys)?;
        if let Some(why) = self.rolled_back_before(d, &subject, &document, listed) {
            return Err((why, true));
        }
        let vmstate = policy.vmstate == Some(true) && running && d.guest == GuestType::Qemu;
        if let Some(why) = crate::guard::snapshot_problem(
            self.inventory,
            &d.node,
            d.guest,
            &config.values,
            vmstate,
        ) {
            return Err((
                format!(
                    "update-policy: the update is disruptive ({keys}) and PVE cannot snapshot vmid {} first (\"snapshot feature is not available\"): {why}; nothing is changed: put its volumes on storage with snapshots (lvmthin, zfspool, rbd, btrfs, qcow2 files), or set `update-policy.snapshot: false`",
                    d.vmid
                ),
                true,
            ));
        }
        let revision: String = self
            .source_revision
            .as_deref()
            .unwrap_or(&document)
            .chars()
            .take(12)
            .collect();
        let name = crate::guard::snapshot_name(&revision, listed);
        let agent = d
            .owned("agent")
            .is_some_and(|o| crate::guest_config::agent_enabled(&o.value));
        let check = if d.guest == GuestType::Qemu && policy.guest_agent(agent) {
            Check::Agent
        } else {
            Check::Running
        };
        let guest = match d.guest {
            GuestType::Qemu => GuestRef::qemu(&d.node, d.vmid),
            GuestType::Lxc => GuestRef::lxc(&d.node, d.vmid),
        };
        let reason = format!(
            "before a disruptive update ({keys}): snapshot `{name}` of the {} guest{}",
            if running { "running" } else { "stopped" },
            if vmstate { ", with its memory" } else { "" }
        );
        Ok(Some(GuardPlan {
            guard: Guard {
                guest,
                description: crate::guard::description(&revision, &subject.to_string(), &document),
                snapshot: name,
                running,
                document,
            },
            vmstate,
            reason,
            check,
            timeout: policy.timeout(),
            keep: policy.keep(),
            prune: crate::guard::to_prune(listed, policy.keep()),
        }))
    }

    /// The snapshots of the guest of a guarded update (`keys`: what makes it disruptive); why
    /// the update waits when they were not read.
    fn guarded_snapshots(
        &self,
        d: &DesiredGuest,
        keys: &str,
    ) -> Result<&[SnapshotEntry], (String, bool)> {
        match self.guard_snapshots.get(&d.vmid) {
            Some(Ok(l)) => Ok(l.as_slice()),
            Some(Err(e)) => Err((
                format!(
                    "cannot read the snapshots of vmid {}: {e}; its guarded update ({keys}) is not planned without them",
                    d.vmid
                ),
                false,
            )),
            None => Err((
                format!(
                    "the snapshots of vmid {} were not read; its guarded update ({keys}) waits",
                    d.vmid
                ),
                false,
            )),
        }
    }

    /// Why an update of `d` to `document` is not tried again: it was rolled back before, as
    /// this process remembers or a ProxOps snapshot's description says.
    fn rolled_back_before(
        &self,
        d: &DesiredGuest,
        subject: &ResourceKey,
        document: &str,
        listed: &[SnapshotEntry],
    ) -> Option<String> {
        // Remembered by this process (`converge`, the agent) while the snapshot it rolled back
        // to is there: deleting the snapshot lets it be tried again.
        if let Some(r) = self
            .refused_updates
            .get(subject)
            .filter(|r| r.fingerprint == *document)
            .filter(|r| {
                r.snapshot
                    .as_ref()
                    .is_none_or(|s| listed.iter().any(|l| l.name == *s))
            })
        {
            return Some(format!(
                "a disruptive update of vmid {} to this desired document failed at {} and was rolled back ({}); it is not tried again until the manifest changes (or the snapshot is deleted)",
                d.vmid, r.at, r.message
            ));
        }
        let (name, why) = listed
            .iter()
            .find_map(|s| crate::guard::rolled_back(s, document).map(|w| (&s.name, w)))?;
        Some(format!(
            "a disruptive update of vmid {} to this desired document was rolled back to snapshot `{name}` ({why}); it is not tried again until the manifest changes (or the snapshot is deleted)",
            d.vmid
        ))
    }

    /// Appends the snapshot a guarded update starts with (after the stop planned first, if
    /// any).
    pub(super) fn push_snapshot(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        g: &GuardPlan,
        stopped: Option<usize>,
    ) -> usize {
        let after: Vec<usize> = stopped.into_iter().collect();
        self.push(
            step,
            (&d.node, Some(d.vmid)),
            Verb::Snapshot,
            g.reason.clone(),
            Op::Snapshot {
                guard: g.guard.clone(),
                vmstate: g.vmstate,
            },
            &after,
        )
    }

    /// The steps after a guarded update (`last`: its last action): the check when the guest
    /// runs afterwards (`runs`), then the snapshots beyond `keep`.
    pub(super) fn guard_after(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        g: GuardPlan,
        runs: bool,
        last: Option<usize>,
    ) {
        let mut last = last;
        if runs {
            let what = match g.check {
                Check::Agent => "its guest agent answers",
                Check::Running => "it runs",
            };
            let reason = format!(
                "{what} within {}, else roll back to `{}`{}",
                humanize(g.timeout),
                g.guard.snapshot,
                if g.guard.running {
                    " and start it again"
                } else {
                    ""
                }
            );
            let after: Vec<usize> = last.into_iter().collect();
            last = Some(self.push(
                step,
                (&d.node, Some(d.vmid)),
                Verb::Verify,
                reason,
                Op::Verify {
                    guard: g.guard.clone(),
                    check: g.check,
                    timeout: g.timeout,
                },
                &after,
            ));
        }
        if !g.prune.is_empty() {
            let reason = format!(
                "keep the newest {} ProxOps snapshot{}: delete {}",
                g.keep,
                if g.keep == 1 { "" } else { "s" },
                g.prune.join(", ")
            );
            let after: Vec<usize> = last.into_iter().collect();
            self.push(
                step,
                (&d.node, Some(d.vmid)),
                Verb::PruneSnapshots,
                reason,
                Op::PruneSnapshots {
                    guest: g.guard.guest.clone(),
                    snapshot: g.guard.snapshot.clone(),
                    names: g.prune,
                    keep: g.keep,
                },
                &after,
            );
        }
    }
}

/// `5m`, `90s`, `1h30m`, `500ms`.
fn humanize(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s % 3600 / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::humanize;
    use std::time::Duration;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(humanize(Duration::from_secs(300)), "5m");
        assert_eq!(humanize(Duration::from_secs(90)), "1m30s");
        assert_eq!(humanize(Duration::from_secs(5400)), "1h30m");
        assert_eq!(humanize(Duration::from_millis(500)), "500ms");
    }
}
