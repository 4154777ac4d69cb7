//! What is absent is made: an artifact's file is downloaded to each node that needs it (and
//! downloaded again when its source changed under the same file name), and a declared guest
//! that is not live is created, or cloned from its template, on its node (placed guests: the
//! node placement picks). What PVE would refuse, and what could only be taken over, is
//! reported instead of sent.

use super::{Configs, Planner};
use crate::compat;
use crate::desired::{DesiredArtifact, DesiredGuest, identity_tag};
use crate::plan::{Anomaly, Op, Placement, ResourceError, Skipped, Verb};
use proxops_graph::StepId;
use proxops_model::ResourceKey;
use proxops_pve::{GuestConfig, GuestInfo, GuestRef, PveClient};
use std::collections::BTreeMap;

/// The plan error of a declared container without `template` that is not live.
pub const NO_TEMPLATE: &str = "proxops::no_template";

/// The plan error of a declared guest that names existing volumes but is not live.
pub const VOLUME_WITHOUT_GUEST: &str = "proxops::volume_without_guest";

impl Planner<'_> {
    /// An artifact on one node: downloaded when its file is not there, replaced when its
    /// source changed since ProxOps last reconciled it; an anomaly when its storage cannot
    /// hold it.
    pub(super) async fn artifact_step(
        &mut self,
        client: &PveClient,
        step: StepId,
        a: DesiredArtifact,
        before: Option<&DesiredArtifact>,
        node: &str,
    ) {
        let Some(storage) = self.inventory.storage(node, &a.storage) else {
            let reason = format!("storage `{}` does not exist on node `{node}`", a.storage);
            return self.block(step, reason, true);
        };
        if !storage.content.iter().any(|c| c == a.content) {
            let reason = format!(
                "storage `{}` on `{node}` does not allow `{}` content: enable it in PVE (Datacenter > Storage)",
                a.storage, a.content
            );
            return self.block(step, reason, true);
        }
        if let Some(why) = self
            .release
            .and_then(|release| compat::artifact_problem(release, &a))
        {
            return self.block(step, why, true);
        }
        match self.inventory.contents(client, node, &a.storage).await {
            Err(e) => self.block(
                step,
                format!("cannot list `{}` on `{node}`: {e}", a.storage),
                false,
            ),
            Ok(list) if list.iter().any(|v| v.volid == a.volid) => {
                let Some(changed) = before.and_then(|b| source_change(b, &a)) else {
                    return;
                };
                let shared = storage.shared;
                self.replace(client, step, a, &changed, node, shared).await;
            }
            Ok(_) => {
                let reason = format!("{} is not on {node}", a.volid);
                self.push(
                    step,
                    (node, None),
                    Verb::Download,
                    reason,
                    Op::Download { artifact: a },
                    &[],
                );
            }
        }
    }

    /// Plans replacing an artifact's file whose source changed under the same volid, unless a
    /// guest's config references that volid (then an anomaly: nothing is deleted).
    async fn replace(
        &mut self,
        client: &PveClient,
        step: StepId,
        a: DesiredArtifact,
        changed: &str,
        node: &str,
        shared: bool,
    ) {
        // A shared storage's volume is the same file on every node; a local one only here.
        let guests: Vec<GuestRef> = self
            .inventory
            .guests
            .values()
            .filter(|g| shared || g.node == node)
            .map(GuestInfo::guest_ref)
            .collect();
        let configs = client.guest_configs(guests, self.config_concurrency).await;
        let mut users = Vec::new();
        for (vmid, config) in &configs {
            match config {
                Ok(c) => {
                    for key in references(&c.values, &a.volid) {
                        users.push(format!("vmid {vmid} ({key})"));
                    }
                }
                Err(e) => {
                    // Unknown is not unused: nothing is deleted this cycle.
                    self.plan.skipped.push(Skipped {
                        subject: self.subject(step),
                        reason: format!(
                            "the {changed} of {} changed, but whether a guest uses it cannot be read (vmid {vmid}: {e}); retried next cycle",
                            a.volid
                        ),
                    });
                    return;
                }
            }
        }
        if !users.is_empty() {
            // Reported without holding back dependants: the old file is still there and usable,
            // and a dependant's own change (detaching the file) must stay possible.
            self.plan.anomalies.push(Anomaly {
                subject: self.subject(step),
                message: format!(
                    "the {changed} of {} on `{node}` changed since ProxOps last reconciled it, but {} use{} it: not replaced (deleting it would pull it from under the guest); detach it, or give the new file another name",
                    a.volid,
                    users.join(", "),
                    if users.len() == 1 { "s" } else { "" }
                ),
            });
            return;
        }
        let reason = format!("{changed} changed under the same file name {}", a.volid);
        self.push(
            step,
            (node, None),
            Verb::Replace,
            reason,
            Op::Replace { artifact: a },
            &[],
        );
    }

    /// A declared guest that is not live: created (or cloned) on its node, unless it could
    /// only be taken over or PVE would refuse it.
    pub(super) fn create_step(
        &mut self,
        step: StepId,
        mut d: DesiredGuest,
        key: &ResourceKey,
        configs: &Configs,
    ) {
        // One identity, one guest: never create a second carrier of it.
        let others = self.guests.other_carriers(key, d.vmid);
        if !others.is_empty() {
            let reason = moved_vmid(key, d.vmid, &others, self.cx.cluster);
            return self.block(step, reason, true);
        }
        if !d.creatable() {
            return self.no_template(step, d.vmid);
        }
        let named = d.named_volumes();
        if !named.is_empty() {
            return self.volume_without_guest(step, d.vmid, &named);
        }
        match self.create_node(step, &mut d, configs) {
            Ok(placed) => self.push_create(step, d, key, placed),
            Err(why) => self.block(step, why, true),
        }
    }

    /// Settles the node `d` is created on (a placed guest's: the one placement picks, whose
    /// reason is returned) and checks that PVE would create it there; why not otherwise.
    fn create_node(
        &mut self,
        step: StepId,
        d: &mut DesiredGuest,
        configs: &Configs,
    ) -> Result<Option<String>, String> {
        let mut placed = None;
        if d.placed {
            let pick = self.place(step, d, configs)?;
            d.node = pick.node;
            placed = Some(pick.reason);
        }
        if let Some(c) = &d.clone
            && c.node != d.node
            && let Some(Ok(template)) = configs.get(&c.vmid)
            && let Some(why) = self.local_drives(template, &c.node, &d.node, c.vmid)
        {
            return Err(why);
        }
        if let Some(why) = self.create_problem(d, configs) {
            return Err(why);
        }
        Ok(placed)
    }

    /// Appends the create (or clone) of `d`, then what its HA resource needs; `placed`: why
    /// placement picked its node.
    fn push_create(
        &mut self,
        step: StepId,
        d: DesiredGuest,
        key: &ResourceKey,
        placed: Option<String>,
    ) {
        let mut reason = match &d.clone {
            Some(c) => format!("absent; clone of vmid {}", c.vmid),
            None => "absent".to_owned(),
        };
        if let Some(why) = placed {
            reason.push_str(&format!("; {why}"));
            self.plan.placements.push(Placement {
                subject: key.to_string(),
                node: d.node.clone(),
                reason: why,
            });
        }
        let (node, vmid) = (d.node.clone(), d.vmid);
        // An HA guest is created stopped: the HA manager starts it once its resource exists.
        let mut create = d.clone();
        if d.ha.is_some() {
            create.power = None;
        }
        let id = self.push(
            step,
            (&node, Some(vmid)),
            Verb::Create,
            reason,
            Op::Create {
                desired: Box::new(create),
            },
            &[],
        );
        self.ha_after_create(step, &d, id);
    }

    /// Why PVE would refuse to create `d`: a parameter its release lacks, or a new volume on a
    /// storage without the guest's content type. A clone's new volumes are the slots its
    /// template does not have (the others come from the template).
    pub(super) fn create_problem(&self, d: &DesiredGuest, configs: &Configs) -> Option<String> {
        if let Some(why) = self
            .release
            .and_then(|release| compat::create_problem(release, d))
        {
            return Some(why);
        }
        let config = d.create_config();
        // A template whose config was not read: its slots are unknown, so nothing is claimed.
        let template: Option<&GuestConfig> = match &d.clone {
            Some(c) => Some(configs.get(&c.vmid)?.as_ref().ok()?),
            None => None,
        };
        let new = config
            .iter()
            .filter(|(k, _)| template.is_none_or(|t| !t.values.contains_key(*k)))
            .map(|(k, v)| (k.as_str(), v.as_str()));
        compat::storage_problem(self.inventory, &d.node, d.guest, new)
    }

    /// Why a template cannot be cloned from `from` onto node `to`, if it cannot: qemu-server
    /// `PVE::API2::Qemu` `clone_vm` refuses a target node unless every drive (cdrom and
    /// cloud-init drive included) is on shared storage ("can't clone VM to node ... (VM uses
    /// local storage)"). Checked here so the plan says it, instead of a task failing.
    pub(super) fn local_drives(
        &self,
        template: &GuestConfig,
        from: &str,
        to: &str,
        vmid: u32,
    ) -> Option<String> {
        let drive = |k: &str| {
            let digits = k.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            matches!(
                k.trim_end_matches(|c: char| c.is_ascii_digit()),
                "ide" | "sata" | "scsi" | "virtio" | "efidisk" | "tpmstate"
            ) && !digits.is_empty()
        };
        let local: Vec<String> = template
            .values
            .iter()
            .filter(|(k, _)| drive(k))
            .filter_map(|(k, v)| {
                let volume = v.split(',').next()?;
                let (storage, _) = volume.split_once(':')?;
                let shared = self
                    .inventory
                    .storage(from, storage)
                    .is_some_and(|s| s.shared);
                (!shared).then(|| format!("{k} on `{storage}`"))
            })
            .collect();
        (!local.is_empty()).then(|| {
            format!(
                "the template (vmid {vmid}) is on `{from}` and the clone on `{to}`, but PVE clones to another node only from shared storage, and its drives are local ({}): put the clone on `{from}`, or move the template's drives to shared storage",
                local.join(", ")
            )
        })
    }

    /// A container declared without `template` whose vmid is not live: it can only be taken
    /// over, so nothing is sent for it; a plan error, the rest of the cluster still plans.
    fn no_template(&mut self, step: StepId, vmid: u32) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, "not planned: no template to create from");
        self.plan.errors.push(ResourceError {
            subject,
            code: NO_TEMPLATE.to_owned(),
            reason: format!(
                "vmid {vmid} is not on the cluster, and a container without `template` can only be taken over, never created: declare `template` (a CTTemplate) to let ProxOps create it, or correct `vmid`/`node` if the container lives elsewhere"
            ),
        });
        self.blocked.insert(step);
        self.deferral = None;
    }

    /// A guest whose manifest names the volumes it has (what `adopt` writes) but is not live:
    /// those volumes went with it (or belong to something else now), so nothing is created
    /// around them; a plan error, the rest of the cluster still plans.
    fn volume_without_guest(&mut self, step: StepId, vmid: u32, slots: &[String]) {
        let subject = self.subject(step);
        tracing::debug!(cluster = %self.plan.cluster, %subject, "not planned: named volumes without their guest");
        self.plan.errors.push(ResourceError {
            subject,
            code: VOLUME_WITHOUT_GUEST.to_owned(),
            reason: format!(
                "vmid {vmid} is not on the cluster, and its manifest names the existing volumes of {}: a guest is never created around named volumes; remove `volume` from them to let ProxOps allocate new ones, or correct `vmid`/`node` if the guest lives elsewhere",
                slots.join(", ")
            ),
        });
        self.blocked.insert(step);
        self.deferral = None;
    }
}

/// The anomaly of a resource whose vmid changed while its old guest still carries it.
fn moved_vmid(key: &ResourceKey, vmid: u32, others: &[u32], cluster: &str) -> String {
    let old: Vec<String> = others.iter().map(u32::to_string).collect();
    let old = old.join(", ");
    format!(
        "{key} is declared at vmid {vmid}, but vmid {old} carries its identity (tag `{}`): PVE cannot renumber a guest, and ProxOps never makes a second one. Set vmid back to {old}, or retire the old guest first (delete it, or remove its tag to keep it unmanaged); then vmid {vmid} is created",
        identity_tag(cluster, &key.kind, &key.name)
    )
}

/// Which download parameters that identify a file's content differ between the previous and
/// the current document (`url`, `checksum`, `checksum-algorithm`), as words; `None` if none.
fn source_change(before: &DesiredArtifact, now: &DesiredArtifact) -> Option<String> {
    let get = |a: &DesiredArtifact, key: &str| {
        a.download
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let changed: Vec<&str> = ["url", "checksum", "checksum-algorithm"]
        .into_iter()
        .filter(|k| get(before, k) != get(now, k))
        .collect();
    (!changed.is_empty()).then(|| changed.join(" and "))
}

/// The config keys whose value names `volid`: as the volume (`ide2: local:iso/x.iso,media=cdrom`)
/// or in a sub-key (`import-from=local:import/x.qcow2`).
fn references<'a>(config: &'a BTreeMap<String, String>, volid: &str) -> Vec<&'a str> {
    config
        .iter()
        .filter(|(_, v)| {
            v.split(',')
                .any(|part| part == volid || part.split_once('=').is_some_and(|(_, x)| x == volid))
        })
        .map(|(k, _)| k.as_str())
        .collect()
}
