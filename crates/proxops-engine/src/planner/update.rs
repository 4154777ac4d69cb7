//! A declared guest that is live: whether it is this resource's to manage (its own, renamed,
//! a clone left unconfigured, or an untagged guest to adopt), moved to its node, and its config
//! brought to the manifest (guarded by a snapshot when its policy asks). Its power state
//! afterwards is `power.rs`'s.

use super::power::{Planned, stops_first};
use super::{Configs, Live, Planner};
use crate::compat;
use crate::desired::{DesiredGuest, IDENTITY_PREFIX, OWNER_TAG, identity_tag};
use crate::diff::{GuestDiff, after_clone, diff_since, mark_pending, words};
use crate::identity::{owned_by_proxops, untagged};
use crate::plan::{Anomaly, Op, Placement, Verb};
use proxops_graph::StepId;
use proxops_model::ResourceKey;
use proxops_model::kinds::PowerState;
use proxops_pve::{GuestConfig, GuestInfo, GuestType};

impl Planner<'_> {
    /// A declared guest that is live: claimed, moved to its node, updated (after a stop or a
    /// snapshot when those come first), then brought to its power state.
    pub(super) fn live_step(
        &mut self,
        step: StepId,
        mut d: DesiredGuest,
        before: Option<&DesiredGuest>,
        live: &GuestInfo,
        reads: &Live<'_>,
    ) {
        let graph = self.cx.graph;
        let resource = graph.resource(graph.step(step).resource);
        let key = resource.key();
        self.found_in_place(&mut d, live, &key);
        let (claim, running, config) = match self.admit(&d, live, &key, reads.configs) {
            Ok(admitted) => admitted,
            Err((why, anomaly)) => return self.block(step, why, anomaly),
        };
        // On a node it may not be on: migrated (or an anomaly), the rest waits for the next
        // cycle, which finds it on its node.
        if live.node != d.node {
            return self.relocate(step, &d, live, config, &key, reads.configs);
        }
        let to_template = match template_change(&d, resource.kind, live, config) {
            Ok(to_template) => to_template,
            Err(why) => return self.block(step, why, true),
        };
        let mut found = match diff_live(&d, before, &claim, config, running, reads) {
            Ok(found) => found,
            Err(why) => return self.block(step, why, false),
        };
        if matches!(claim, Claim::Adopt)
            && let Some(why) = adopt_mismatch(&d, &found, running, to_template)
        {
            let reason = self.not_adopted(&d, live, &key, &why);
            return self.block(step, reason, true);
        }
        self.report_found(&key, &found);
        let stop_first = stops_first(&d, live, running, to_template, &found);
        let running = running && !stop_first;
        self.hold_pending(&key, &d, &mut found, running, to_template, reads.restarts);
        if let Some(why) = self.write_problem(&d, &found) {
            return self.block(step, why, true);
        }
        // A disruptive update of a guest whose `update-policy` asks for snapshots: between a
        // snapshot and a check (`crate::guard`), or not at all when PVE could not snapshot it
        // or the same desired document was rolled back before.
        let guard = match claim {
            Claim::Own | Claim::Renamed(_) if !to_template => {
                match self.guard_plan(step, &d, &found, config, running) {
                    Ok(g) => g,
                    Err((why, anomaly)) => return self.block(step, why, anomaly),
                }
            }
            _ => None,
        };
        let stopped = stop_first.then(|| self.push_stop(step, &d, live, &[]));
        let snapshot = guard
            .as_ref()
            .map(|g| self.push_snapshot(step, &d, g, stopped));
        let update = if found.is_converged() {
            None
        } else {
            let after: Vec<usize> = stopped.into_iter().chain(snapshot).collect();
            let update = Update {
                claim: &claim,
                config,
                running,
                guard: guard.as_ref(),
            };
            Some(self.push_update(step, &d, &key, found, update, &after))
        };
        let planned = Planned {
            running,
            to_template,
            stopped,
            update,
            guard,
        };
        self.power_step(step, &d, live, before, planned);
    }

    /// A placed guest on one of its nodes is in place there, wherever HA or an operator put it.
    fn found_in_place(&mut self, d: &mut DesiredGuest, live: &GuestInfo, key: &ResourceKey) {
        if d.placed && d.nodes.contains(&live.node) {
            d.node = live.node.clone();
            self.plan.placements.push(Placement {
                subject: key.to_string(),
                node: live.node.clone(),
                reason: format!("found on `{}`, one of its nodes", live.node),
            });
        }
    }

    /// Whether the live guest may be planned at all, and what it is: how the resource holds
    /// it, whether it runs, its config. `Err` (why, whether an anomaly): it is not this
    /// resource's, locked, carries an identity twice, or its power state or config is unknown.
    fn admit<'c>(
        &self,
        d: &DesiredGuest,
        live: &GuestInfo,
        key: &ResourceKey,
        configs: &'c Configs,
    ) -> Result<(Claim, bool, &'c GuestConfig), (String, bool)> {
        let claim = self
            .claim(d, live, key)
            .map_err(|problem| (problem, true))?;
        if let Some(lock) = &live.lock {
            return Err((locked(live, lock), false));
        }
        let others = self.guests.other_carriers(key, d.vmid);
        if !others.is_empty() {
            let mut all = vec![d.vmid];
            all.extend(&others);
            let listed: Vec<String> = all.iter().map(u32::to_string).collect();
            let reason = format!(
                "its identity (tag `{}`) is on {} guests, vmids {}: one resource is one guest; remove the tag from the guests that are not {key} (they are then left alone), or delete them by hand",
                identity_tag(self.cx.cluster, &key.kind, &key.name),
                all.len(),
                listed.join(", ")
            );
            return Err((reason, true));
        }
        let running = match live.status.as_str() {
            "running" => true,
            "stopped" => false,
            other => {
                let reason = format!(
                    "vmid {} has power state `{other}` (its node's guest list did not show it): not planned this cycle",
                    d.vmid
                );
                return Err((reason, false));
            }
        };
        let config = match configs.get(&d.vmid) {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                return Err((
                    format!("cannot read the config of vmid {}: {e}", d.vmid),
                    false,
                ));
            }
            None => {
                return Err((format!("the config of vmid {} was not read", d.vmid), false));
            }
        };
        Ok((claim, running, config))
    }

    /// A guest on a node it may not be on: migrated to its node (a placed guest's: the one
    /// placement picks), or an anomaly when no node fits.
    fn relocate(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        live: &GuestInfo,
        config: &GuestConfig,
        key: &ResourceKey,
        configs: &Configs,
    ) {
        let why = if d.placed {
            format!(
                "vmid {} is on `{}`, not one of its nodes ({})",
                d.vmid,
                live.node,
                d.nodes.join(", ")
            )
        } else {
            format!(
                "vmid {} is on `{}`, the manifest says `{}`",
                d.vmid, live.node, d.node
            )
        };
        let target = if d.placed {
            match self.place(step, d, configs) {
                Ok(pick) => {
                    self.plan.placements.push(Placement {
                        subject: key.to_string(),
                        node: pick.node.clone(),
                        reason: pick.reason.clone(),
                    });
                    pick.node
                }
                Err(problem) => {
                    return self.block(
                        step,
                        format!("{why}, but it is not migrated: {problem}"),
                        true,
                    );
                }
            }
        } else {
            d.node.clone()
        };
        self.migrate(step, live, config, &target, &why)
    }

    /// The anomaly of an untagged guest whose live config differs from the manifest (`why`).
    fn not_adopted(
        &self,
        d: &DesiredGuest,
        live: &GuestInfo,
        key: &ResourceKey,
        why: &str,
    ) -> String {
        let tag = identity_tag(self.cx.cluster, &key.kind, &key.name);
        format!(
            "vmid {} is taken by `{}`, which ProxOps did not create (no tag `{tag}`); it is adopted (tagged `{OWNER_TAG};{tag}`) only once its live config matches the manifest, and {why}: make the manifest say what the guest has (`proxops adopt` writes it), or change the guest",
            d.vmid,
            live.name.as_deref().unwrap_or("?")
        )
    }

    /// What the diff found that is never fixed automatically (anomalies), and keys it cannot
    /// prove ProxOps set (warnings).
    fn report_found(&mut self, key: &ResourceKey, found: &GuestDiff) {
        for a in &found.anomalies {
            self.plan.anomalies.push(Anomaly {
                subject: key.to_string(),
                message: a.message.clone(),
            });
        }
        for unproven in &found.unproven {
            self.plan.warnings.push(format!(
                "{key}: {unproven} is on the guest but not in the manifest; without a previous desired document ProxOps cannot tell whether it set it: left alone"
            ));
        }
    }

    /// Why PVE would refuse the update's writes: a new volume on a storage without the guest's
    /// content type, or a key or value its release lacks.
    fn write_problem(&self, d: &DesiredGuest, found: &GuestDiff) -> Option<String> {
        // New volumes (a disk added to the manifest) must find their storage's content type.
        let added = found
            .changes
            .iter()
            .filter(|c| c.live.is_none())
            .map(|c| (c.key.as_str(), c.value.as_str()));
        if let Some(why) = compat::storage_problem(self.inventory, &d.node, d.guest, added) {
            return Some(why);
        }
        let written = found.changes.iter().map(|c| (c.key.as_str(), c.wire()));
        self.release
            .and_then(|release| compat::config_problem(release, d.guest, written))
    }

    /// Appends the update of `d` with what `found` differs in (after `after`): an update of its
    /// own guest, or the adoption, retag or repair its claim makes.
    fn push_update(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        key: &ResourceKey,
        found: GuestDiff,
        update: Update<'_>,
        after: &[usize],
    ) -> usize {
        let restart = found.needs_restart() && update.running;
        let (verb, mut reason) = update_reason(update.claim, key, &found);
        if let Some(g) = update.guard {
            reason.push_str(&format!(
                "; rolled back to `{}` if it fails",
                g.guard.snapshot
            ));
        }
        let (node, vmid) = (d.node.clone(), d.vmid);
        let op = Op::Update {
            desired: Box::new(d.clone()),
            changes: found.changes,
            removals: found.removals,
            resizes: found.resizes,
            digest: update.config.digest.clone(),
            restart,
            guard: update.guard.map(|g| g.guard.clone()),
        };
        self.push(step, (&node, Some(vmid)), verb, reason, op, after)
    }

    /// Whether the live guest at a declared vmid is this resource's to manage, and how; why
    /// not when it is not (an anomaly: nothing is changed or deleted).
    fn claim(
        &self,
        d: &DesiredGuest,
        live: &GuestInfo,
        key: &ResourceKey,
    ) -> Result<Claim, String> {
        let cluster = self.cx.cluster;
        let tag = identity_tag(cluster, &key.kind, &key.name);
        let carried = self.guests.identities(cluster, &live.tags);
        // No ProxOps tag at all: a guest made by hand, declared now (by `proxops adopt` or by
        // hand). It is tagged only if its config already matches (see `Claim::Adopt`).
        if untagged(live) && live.node == d.node && live.kind == d.guest {
            return Ok(Claim::Adopt);
        }
        if !owned_by_proxops(live) || carried.is_empty() {
            return Err(format!(
                "vmid {} is taken by `{}`, which ProxOps did not create (no tag `{tag}`): choose another vmid, or add the tags `{OWNER_TAG};{tag}` to adopt it",
                d.vmid,
                live.name.as_deref().unwrap_or("?")
            ));
        }
        if live.kind != d.guest {
            return Err(format!(
                "vmid {} is a {}, the manifest declares a {}",
                d.vmid,
                live.kind.as_str(),
                key.kind
            ));
        }
        if carried.contains(key) {
            return Ok(Claim::Own);
        }
        // Another identity of this cluster: the first one decides.
        let from = &carried[0];
        match self.guests.vmid_of(from) {
            // Renamed, or a kind changed at the same vmid: the old resource is gone from the
            // composition, so the guest is this one's.
            None => Ok(Claim::Renamed(from.clone())),
            Some(template)
                if d.clone.as_ref().is_some_and(|c| c.vmid == template) && !live.template =>
            {
                Ok(Claim::Clone { template })
            }
            Some(other) => Err(format!(
                "vmid {} carries the identity of {from} (tag `{}`), which is declared at vmid {other}: one of the two manifests has the wrong vmid; fix it (nothing is changed until then)",
                d.vmid,
                identity_tag(cluster, &from.kind, &from.name)
            )),
        }
    }
}

/// What an update is planned from besides the diff: how the resource holds the guest, the
/// config read, whether the guest runs when the update is sent, its guard.
struct Update<'a> {
    claim: &'a Claim,
    config: &'a GuestConfig,
    running: bool,
    guard: Option<&'a super::guarded::GuardPlan>,
}

/// The verb and reason of an update: its changed and removed keys, and what its claim makes
/// of it (an adoption, a retag, a repair).
fn update_reason(claim: &Claim, key: &ResourceKey, found: &GuestDiff) -> (Verb, String) {
    let mut keys: Vec<&str> = found.changes.iter().map(|c| c.key.as_str()).collect();
    keys.extend(found.resizes.iter().map(|r| r.disk.as_str()));
    let removed: Vec<&str> = found.removals.iter().map(|r| r.key.as_str()).collect();
    let changed = match (keys.is_empty(), removed.is_empty()) {
        (false, true) => format!("changed: {}", keys.join(", ")),
        (true, false) => format!("removed: {}", removed.join(", ")),
        _ => format!(
            "changed: {}; removed: {}",
            keys.join(", "),
            removed.join(", ")
        ),
    };
    match claim {
        Claim::Own => (Verb::Update, changed),
        Claim::Adopt => (
            Verb::Adopt,
            "not created by ProxOps and its config matches the manifest: adding the ownership tags"
                .into(),
        ),
        Claim::Renamed(from) => (
            Verb::Retag,
            format!("was {from} at this vmid: identity tags move to {key}; {changed}"),
        ),
        Claim::Clone { template } => (
            Verb::Retag,
            format!(
                "a clone of vmid {template} left unconfigured (it carries the template's identity): repairing; {changed}"
            ),
        ),
    }
}

/// Whether the guest becomes a template (`Ok(true)`), or why PVE cannot do what the manifest
/// asks of its template flag.
fn template_change(
    d: &DesiredGuest,
    kind: &str,
    live: &GuestInfo,
    config: &GuestConfig,
) -> Result<bool, String> {
    // The template flag from the config, which PVE writes at once; the inventory's may be
    // the stats cache's.
    let is_template = config.values.get("template").is_some_and(|v| v == "1");
    if !d.template && is_template {
        return Err(format!(
            "vmid {} is a template, the manifest declares a {}: PVE cannot turn a template back into a guest; declare it a {} again, or give the {} another vmid",
            d.vmid,
            kind,
            template_kind(d.guest),
            kind
        ));
    }
    let to_template = d.template && !is_template;
    if to_template && let Some(why) = cannot_template(live, config) {
        return Err(why);
    }
    Ok(to_template)
}

/// What differs between `d` and the live config, with what a running guest keeps pending for
/// its next start; why it cannot be told when the pending changes were not read.
fn diff_live(
    d: &DesiredGuest,
    before: Option<&DesiredGuest>,
    claim: &Claim,
    config: &GuestConfig,
    running: bool,
    reads: &Live<'_>,
) -> Result<GuestDiff, String> {
    // A half-configured clone gets what its create would have written: only its own tags,
    // no template description.
    let mut found = match claim {
        Claim::Clone { .. } => after_clone(d, &config.values),
        _ => diff_since(d, before, &config.values),
    };
    if running {
        let pending = match reads.pendings.get(&d.vmid) {
            Some(Ok(rows)) => rows.as_slice(),
            Some(Err(e)) => {
                return Err(format!(
                    "cannot read the pending changes of vmid {}: {e}",
                    d.vmid
                ));
            }
            None => {
                return Err(format!(
                    "the pending changes of vmid {} were not read",
                    d.vmid
                ));
            }
        };
        mark_pending(d, &mut found, &config.values, pending);
    }
    Ok(found)
}

/// How a resource holds the live guest at its vmid.
enum Claim {
    /// The guest carries the resource's identity.
    Own,
    /// The guest carries the identity of a resource no longer declared (a rename or a kind
    /// change at the same vmid): its tags move.
    Renamed(ResourceKey),
    /// A clone of the template at this vmid whose configuration never happened: it carries the
    /// template's identity.
    Clone { template: u32 },
    /// A guest without any ProxOps tag at a declared vmid: tagged, and nothing else, when its
    /// live config matches the manifest; otherwise an anomaly naming what differs.
    Adopt,
}

/// What keeps an untagged guest from being adopted as it is: any difference from the manifest
/// besides the ownership tags (a key to write or remove, a disk to grow, an anomaly of the
/// diff, a power state or template flag to change). `None`: only the tags differ.
fn adopt_mismatch(
    d: &DesiredGuest,
    found: &crate::diff::GuestDiff,
    running: bool,
    to_template: bool,
) -> Option<String> {
    let mut differs: Vec<String> = found
        .changes
        .iter()
        .filter(|c| c.key != "tags" || !adds_only_our_tags(c))
        .map(|c| c.key.clone())
        .collect();
    differs.extend(
        found
            .removals
            .iter()
            .map(|r| format!("{} (removed)", r.key)),
    );
    differs.extend(found.resizes.iter().map(|r| format!("{} (grown)", r.disk)));
    differs.extend(found.anomalies.iter().map(|a| a.message.clone()));
    if to_template {
        differs.push("template (the manifest declares a template)".into());
    }
    if !d.template {
        match (d.power, running) {
            (Some(PowerState::Started) | None, false) => {
                differs.push("power state (stopped, the manifest says started)".into())
            }
            (Some(PowerState::Stopped), true) => {
                differs.push("power state (running, the manifest says stopped)".into())
            }
            _ => {}
        }
    }
    (!differs.is_empty()).then(|| format!("these differ: {}", differs.join("; ")))
}

/// Whether a `tags` change only adds ProxOps's ownership and identity tags: the one difference
/// adoption itself makes. A tag of the manifest's that the guest lacks, or one taken away, is a
/// difference like any other.
fn adds_only_our_tags(change: &crate::diff::Change) -> bool {
    let have: Vec<String> = change
        .live
        .as_deref()
        .map(|t| words(t).map(str::to_ascii_lowercase).collect())
        .unwrap_or_default();
    change.removed.is_empty()
        && words(&change.value)
            .map(str::to_ascii_lowercase)
            .filter(|t| !have.contains(t))
            .all(|t| t == OWNER_TAG || t.starts_with(IDENTITY_PREFIX))
}

/// The skip of a locked guest, with the remedy when the lock is left from a crash.
fn locked(live: &GuestInfo, lock: &str) -> String {
    let tool = match live.kind {
        GuestType::Qemu => "qm",
        GuestType::Lxc => "pct",
    };
    match lock {
        "create" | "clone" => format!(
            "vmid {} is locked ({lock}): a create or clone that never finished leaves this lock; when no PVE task runs for vmid {} any more, clear it with `{tool} unlock {}` and the next cycle repairs the guest",
            live.vmid, live.vmid, live.vmid
        ),
        _ => format!(
            "vmid {} is locked ({lock}); retried next cycle (if no task holds it, `{tool} unlock {}`)",
            live.vmid, live.vmid
        ),
    }
}

/// The kind a template of `guest` is declared with.
fn template_kind(guest: GuestType) -> &'static str {
    match guest {
        GuestType::Qemu => "TemplateVM",
        GuestType::Lxc => "TemplateCT",
    }
}

/// Why PVE would refuse to make the guest a template, if it would (qemu-server
/// `API2/Qemu.pm` `template`, pve-container `API2/LXC.pm` `template`: not while running, not
/// with snapshots). ProxOps does not stop a guest to make it a template: that is a decision.
fn cannot_template(live: &GuestInfo, config: &GuestConfig) -> Option<String> {
    let tool = match live.kind {
        GuestType::Qemu => "qm",
        GuestType::Lxc => "pct",
    };
    if live.status == "running" {
        return Some(format!(
            "vmid {} is declared a template but is running: PVE makes only a stopped guest a template; shut it down (`{tool} shutdown {}`) and the next cycle converts it",
            live.vmid, live.vmid
        ));
    }
    if let Some(snapshot) = config.values.get("parent") {
        return Some(format!(
            "vmid {} is declared a template but has snapshots (current: `{snapshot}`): PVE refuses to make it a template; delete its snapshots first",
            live.vmid
        ));
    }
    None
}
