//! Placement and migration of guests over their allowed nodes.
//!
//! A placed guest (`nodes:`) that is not live is created on the listed node with the most free
//! memory among those that have what it needs (online, the storages of its new volumes with
//! their content, the same-node artifacts it uses, a template it can be cloned from), ties
//! going to the earlier listed node; free memory is `/cluster/resources`' node `maxmem - mem`
//! less what this plan already puts there. A live guest on one of its nodes stays where it is.
//! A pinned guest on another node, or a placed one outside its list, is migrated, once the
//! planner has checked what PVE would refuse (qemu-server `PVE/QemuMigrate/Helpers.pm`
//! `check_local_resources`, `PVE/QemuMigrate.pm` `prepare`, pve-container `PVE/LXC/Migrate.pm`
//! `prepare`): a refusal is an anomaly, nothing is sent.

use super::Planner;
use crate::desired::DesiredGuest;
use crate::plan::{Op, Verb};
use proxops_graph::StepId;
use proxops_pve::api::ha::MigrateRequest;
use proxops_pve::{GuestConfig, GuestInfo, GuestType, PveError};
use std::collections::BTreeMap;

/// The node picked for a placed guest, and why.
pub(super) struct Pick {
    pub node: String,
    pub reason: String,
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// The memory a guest asks for, in bytes (its `memory` key, MiB).
fn memory_of(d: &DesiredGuest) -> u64 {
    d.owned
        .iter()
        .find(|o| o.key == "memory")
        .and_then(|o| {
            o.value
                .split(',')
                .next()?
                .trim_start_matches("current=")
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |mib| mib << 20)
}

impl Planner<'_> {
    /// Picks the node of a placed guest (see the module docs); why none fits otherwise.
    pub(super) fn place(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        configs: &BTreeMap<u32, Result<GuestConfig, PveError>>,
    ) -> Result<Pick, String> {
        let graph = self.cx.graph;
        let resource = graph.step(step).resource;
        let need = memory_of(d);
        let mut fits: Vec<(u64, usize, &str)> = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        for (i, n) in d.nodes.iter().enumerate() {
            let Some(entry) = self.inventory.nodes.iter().find(|e| e.node == *n) else {
                refused.push(format!("`{n}` is not in the cluster"));
                continue;
            };
            if entry.status != "online" {
                refused.push(format!("`{n}` is {}", entry.status));
                continue;
            }
            // Same-node prerequisites (an ISO in its cdrom, its container template) must be
            // placed there, live or planned.
            let missing: Vec<String> = graph
                .dependencies(resource)
                .iter()
                .filter(|dep| dep.same_node)
                .filter(|dep| {
                    let steps = graph.steps_of(dep.target);
                    let placed = steps.iter().any(|s| graph.step(*s).node.is_some());
                    placed
                        && !steps
                            .iter()
                            .any(|s| graph.step(*s).node.as_deref() == Some(n))
                })
                .map(|dep| graph.key(dep.target).to_string())
                .collect();
            if !missing.is_empty() {
                refused.push(format!("`{n}` lacks {}", missing.join(", ")));
                continue;
            }
            let mut there = d.clone();
            there.node = n.clone();
            if let Some(why) = self.create_problem(&there, configs) {
                refused.push(format!("`{n}`: {why}"));
                continue;
            }
            if let Some(c) = &d.clone
                && c.node != *n
                && let Some(Ok(template)) = configs.get(&c.vmid)
                && self.local_drives(template, &c.node, n, c.vmid).is_some()
            {
                refused.push(format!(
                    "`{n}`: the template's drives are local to `{}`",
                    c.node
                ));
                continue;
            }
            let planned = self.planned_memory.get(n).copied().unwrap_or(0);
            let free = entry.free_memory().map(|f| f.saturating_sub(planned));
            match free {
                Some(f) if f < need => {
                    refused.push(format!("`{n}` has {} free, it needs {}", gib(f), gib(need)));
                }
                // Unknown free memory ranks below any known amount.
                _ => fits.push((free.unwrap_or(0), i, n.as_str())),
            }
        }
        // Most free memory first; ties by list order.
        fits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let Some(&(free, _, node)) = fits.first() else {
            return Err(format!(
                "none of its nodes can take it: {}",
                refused.join("; ")
            ));
        };
        let node = node.to_owned();
        *self.planned_memory.entry(node.clone()).or_default() += need;
        let others: Vec<String> = fits[1..]
            .iter()
            .map(|(f, _, n)| format!("`{n}` {}", gib(*f)))
            .chain(refused)
            .collect();
        let mut reason = format!(
            "placed on `{node}`: the most free memory ({}, it needs {}) of its nodes that have what it needs",
            gib(free),
            gib(need)
        );
        if !others.is_empty() {
            reason.push_str(&format!(" (others: {})", others.join("; ")));
        }
        Ok(Pick { node, reason })
    }

    /// Why PVE would refuse to migrate `live` to `target`, or how to ask it (see the module
    /// docs).
    pub(super) fn migration(
        &self,
        live: &GuestInfo,
        config: &GuestConfig,
        target: &str,
    ) -> Result<(MigrateRequest, String), String> {
        let running = live.status == "running";
        match self.inventory.nodes.iter().find(|e| e.node == target) {
            Some(e) if e.status == "online" => {}
            Some(e) => return Err(format!("target node `{target}` is {}", e.status)),
            None => return Err(format!("target node `{target}` is not in the cluster")),
        }
        let mut blocking = Vec::new();
        let mut mapped = Vec::new();
        let mut local = Vec::new();
        // Local volumes PVE makes itself (a cloud-init drive): moved offline, even for a
        // running VM, without `with-local-disks` (`scan_local_volumes`: `generated`).
        let mut generated = Vec::new();
        for (key, value) in &config.values {
            let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
            let indexed = family.len() < key.len();
            if live.kind == GuestType::Qemu && indexed {
                let mapping = value.split(',').any(|p| p.starts_with("mapping="));
                let spice = value
                    .split(',')
                    .any(|p| p.eq_ignore_ascii_case("host=spice"));
                match family {
                    "usb" if spice => {}
                    "usb" | "hostpci" if mapping => mapped.push(key.clone()),
                    "serial" if value == "socket" => {}
                    "usb" | "hostpci" | "serial" | "parallel" | "virtiofs" => {
                        blocking.push(key.clone())
                    }
                    _ => {}
                }
            }
            // pve-container `PVE/LXC/Migrate.pm` `prepare`: a bind or device mount point
            // stops the migration unless it is marked `shared=1` (the same path on every node).
            if live.kind == GuestType::Lxc && family == "mp" && value.starts_with('/') {
                let shared = value.split(',').any(|p| {
                    p.strip_prefix("shared=")
                        .is_some_and(|v| proxops_pve::lenient::parse_bool(v) == Some(true))
                });
                if !shared {
                    blocking.push(format!("{key} (a bind mount not marked shared=1)"));
                }
                continue;
            }
            if !crate::compat::is_disk_key(live.kind, key) {
                continue;
            }
            let volume = value.split(',').next().unwrap_or_default();
            let Some((sid, _)) = volume.split_once(':') else {
                continue;
            };
            if volume == "none"
                || self
                    .inventory
                    .storage(&live.node, sid)
                    .is_some_and(|s| s.shared)
            {
                continue;
            }
            let cloud_init = live.kind == GuestType::Qemu && is_cloud_init_volume(volume);
            if value.split(',').any(|p| p == "media=cdrom") && !cloud_init {
                blocking.push(format!("{key} (a cdrom on local storage `{sid}`)"));
                continue;
            }
            if self.inventory.storage(target, sid).is_none() {
                return Err(format!(
                    "{key} is on local storage `{sid}`, which node `{target}` does not have: PVE cannot move it there"
                ));
            }
            if cloud_init {
                generated.push(format!("{key} on `{sid}`"));
            } else {
                local.push(format!("{key} on `{sid}`"));
            }
        }
        self.snapshot_refusals(live, running)?;
        if !blocking.is_empty() {
            return Err(format!(
                "it uses local resources PVE cannot migrate ({}): detach them, or declare the node it is on",
                blocking.join(", ")
            ));
        }
        if running && !mapped.is_empty() {
            return Err(format!(
                "it runs with mapped devices ({}), which PVE cannot live-migrate: stop it, or declare the node it is on",
                mapped.join(", ")
            ));
        }
        let mut request = MigrateRequest::new(target);
        let with_generated = if generated.is_empty() {
            String::new()
        } else {
            format!(
                "; its cloud-init drive moves with it ({})",
                generated.join(", ")
            )
        };
        let how = match (live.kind, running) {
            (GuestType::Qemu, true) => {
                request.online = true;
                request.with_local_disks = !local.is_empty();
                if local.is_empty() {
                    "online (running, storage shared)".to_owned()
                } else {
                    format!("online with its local disks ({})", local.join(", "))
                }
            }
            (GuestType::Lxc, true) => {
                request.restart = true;
                "in restart mode (a running container stops here and starts there)".to_owned()
            }
            (_, false) if local.is_empty() => "offline (stopped)".to_owned(),
            (_, false) => format!("offline with its local volumes ({})", local.join(", ")),
        };
        Ok((request, how + &with_generated))
    }

    /// What migrating `live` to `target` is decided from ([`crate::refusals`]).
    fn migration_fingerprint(
        &self,
        step: StepId,
        live: &GuestInfo,
        config: &GuestConfig,
        target: &str,
    ) -> String {
        let values: BTreeMap<&String, &String> =
            config.values.iter().filter(|(k, _)| *k != "lock").collect();
        let snapshots = match self.snapshots.get(&live.vmid) {
            Some(Ok(v)) => serde_json::to_string(v).unwrap_or_default(),
            _ => String::new(),
        };
        let spec =
            serde_json::to_string(&self.graph().resource(self.graph().step(step).resource).spec)
                .unwrap_or_default();
        format!(
            "{target}\n{}\n{snapshots}\n{spec}",
            serde_json::to_string(&values).unwrap_or_default()
        )
    }

    /// Why PVE would refuse to migrate `live` for what its snapshots hold on local storage.
    fn snapshot_refusals(&self, live: &GuestInfo, running: bool) -> Result<(), String> {
        let volumes = match self.snapshots.get(&live.vmid) {
            None => return Ok(()),
            Some(Err(e)) => return Err(format!("its snapshots cannot be read: {e}")),
            Some(Ok(v)) => v,
        };
        let refusals: Vec<String> = volumes
            .iter()
            .filter_map(|(volume, names)| {
                let sid = volume.split_once(':')?.0;
                let storage = self.inventory.storage(&live.node, sid);
                if storage.is_some_and(|s| s.shared) || is_cloud_init_volume(volume) {
                    return None;
                }
                super::snapshots::refusal(live.kind, volume, names, storage, running)
            })
            .collect();
        if refusals.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{}: delete the snapshots, or declare the node it is on",
            refusals.join("; ")
        ))
    }

    /// Plans the migration of `live` to `target`, or the anomaly of one PVE would refuse.
    pub(super) fn migrate(
        &mut self,
        step: StepId,
        live: &GuestInfo,
        config: &GuestConfig,
        target: &str,
        why: &str,
    ) {
        let key = self.graph().key(self.graph().step(step).resource);
        let fingerprint = self.migration_fingerprint(step, live, config, target);
        if let Some(refused) = self
            .refused
            .get(&key)
            .filter(|r| r.fingerprint == fingerprint)
        {
            let reason = format!(
                "{why}, but it is not migrated again: PVE refused migrating it to `{target}` at {}: {}; it is tried again once the manifest or the guest changes",
                refused.at, refused.message
            );
            self.block(step, reason, true);
            return;
        }
        match self.migration(live, config, target) {
            Ok((request, how)) => {
                self.plan
                    .migration_fingerprints
                    .insert(key.to_string(), fingerprint);
                let reason = format!("{why}: migrating to `{target}` {how}");
                self.push(
                    step,
                    (&live.node, Some(live.vmid)),
                    Verb::Migrate,
                    reason,
                    Op::Migrate {
                        guest: live.guest_ref(),
                        request,
                    },
                    &[],
                );
            }
            Err(problem) => {
                let reason = format!("{why}, but it is not migrated: {problem}");
                self.block(step, reason, true);
            }
        }
    }
}

/// Whether a volume id names a VM's cloud-init drive (`local-lvm:vm-100-cloudinit`), which
/// PVE generates (qemu-server `PVE/QemuMigrate.pm` `scan_local_volumes`: `vm-\d+-cloudinit`).
fn is_cloud_init_volume(volume: &str) -> bool {
    volume
        .split_once(':')
        .map(|(_, name)| name.rsplit('/').next().unwrap_or(name))
        .and_then(|name| name.strip_prefix("vm-"))
        .and_then(|rest| rest.split_once("-cloudinit"))
        .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}
