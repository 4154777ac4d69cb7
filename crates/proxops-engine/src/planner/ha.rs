//! HA resources of guests (`ha:`), reconciled through `/cluster/ha/resources`
//! (pve-ha-manager `src/PVE/API2/HA/Resources.pm`): created when declared, updated when its
//! state, group or limits differ, removed when `ha:` was removed (proven by the previous
//! desired document). An HA guest's power is its HA state: the planner never starts or stops
//! it directly; the executor waits for the HA manager to bring it there.

use super::Planner;
use crate::desired::DesiredGuest;
use crate::plan::{HaWrite, Op, Verb};
use proxops_graph::StepId;
use proxops_model::kinds::HaSpec;
use proxops_pve::GuestInfo;
use proxops_pve::api::ha::{HaResource, ha_sid};

fn wait_for(ha: &HaSpec) -> Option<&'static str> {
    match ha.state().power()? {
        proxops_model::kinds::PowerState::Started => Some("running"),
        proxops_model::kinds::PowerState::Stopped => Some("stopped"),
    }
}

/// The write that makes `live` (absent: a new resource) what `ha` declares. With `rules`
/// (PVE 9) the group is not the resource's: it becomes a node-affinity rule (`ha_rules`).
fn write_of(sid: String, ha: &HaSpec, live: Option<&HaResource>, rules: bool) -> Option<HaWrite> {
    let want: [(&str, Option<String>); 4] = [
        ("state", Some(ha.state().as_str().to_owned())),
        ("group", ha.group.clone().filter(|_| !rules)),
        ("max_restart", ha.max_restart.map(|n| n.to_string())),
        ("max_relocate", ha.max_relocate.map(|n| n.to_string())),
    ];
    let have = |k: &str| -> Option<String> {
        let r = live?;
        match k {
            "state" => r.state.clone(),
            "group" => r.group.clone(),
            "max_restart" => r.max_restart.map(|n| n.to_string()),
            _ => r.max_relocate.map(|n| n.to_string()),
        }
    };
    let mut write = HaWrite {
        sid,
        set: Vec::new(),
        delete: Vec::new(),
        wait: None,
    };
    for (k, v) in want {
        if rules && k == "group" {
            continue;
        }
        match (v, have(k)) {
            (Some(v), h) if h.as_deref() != Some(v.as_str()) => {
                if k == "state" {
                    write.wait = wait_for(ha);
                }
                write.set.push((k.to_owned(), v));
            }
            // Unset in the manifest: PVE's default; a value left from before is dropped.
            (None, Some(_)) if live.is_some() => write.delete.push(k.to_owned()),
            _ => {}
        }
    }
    if live.is_none() {
        write.wait = wait_for(ha);
    }
    (!write.set.is_empty() || !write.delete.is_empty()).then_some(write)
}

impl Planner<'_> {
    /// The HA resource of a vmid, as read this cycle (`None`: none, or not read).
    pub(super) fn ha_resource(&self, guest: &GuestInfo) -> Option<&HaResource> {
        let sid = ha_sid(guest.kind, guest.vmid);
        self.ha
            .as_ref()?
            .as_ref()
            .ok()?
            .iter()
            .find(|r| r.sid == sid)
    }

    /// Why HA resources cannot be planned for `d` this cycle (the list was not readable).
    fn ha_problem(&self, d: &DesiredGuest) -> Option<String> {
        d.ha.as_ref()?;
        match &self.ha {
            Some(Err(e)) => Some(format!("cannot read the HA resources: {e}")),
            _ => None,
        }
    }

    /// Plans the HA resource of a live guest `d` (after its other actions, `after`); returns
    /// whether HA decides its power (then no direct start or stop is planned).
    pub(super) fn ha_step(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        live: &GuestInfo,
        before: Option<&DesiredGuest>,
        after: &[usize],
    ) -> bool {
        let sid = ha_sid(live.kind, live.vmid);
        let existing = self.ha_resource(live).cloned();
        let Some(ha) = &d.ha else {
            // `ha:` removed: the resource goes, when the previous document proves it was ours.
            if existing.is_some() {
                if before.is_some_and(|b| b.ha.is_some()) {
                    self.push(
                        step,
                        (&d.node, Some(d.vmid)),
                        Verb::HaRemove,
                        format!("`ha` removed: deleting HA resource {sid}"),
                        Op::HaRemove { sid },
                        after,
                    );
                    // Its power is planned once the resource is gone (next cycle).
                    return true;
                }
                // An operator's HA resource: left alone. A start or stop of ours is then one
                // PVE itself turns into an HA request (`hastart`/`hastop`).
                self.plan.warnings.push(format!(
                    "{}: HA resource {sid} exists but the manifest has no `ha`; without a previous desired document declaring it, ProxOps leaves it alone",
                    self.subject(step)
                ));
            }
            return false;
        };
        if let Some(reason) = self.ha_problem(d) {
            let subject = self.subject(step);
            self.plan
                .skipped
                .push(crate::plan::Skipped { subject, reason });
            return true;
        }
        let rules = self.ha_uses_rules();
        let Some(write) = write_of(sid.clone(), ha, existing.as_ref(), rules) else {
            // The resource is as declared; its rule (PVE 9) may not be.
            self.ha_rule_step(step, d, &sid, before, after);
            // Declared and as declared: the HA manager is (or will be) there.
            let want = wait_for(ha);
            let now = if live.status == "running" {
                "running"
            } else {
                "stopped"
            };
            if want.is_some_and(|w| w != now) {
                self.plan.skipped.push(crate::plan::Skipped {
                    subject: self.subject(step),
                    reason: format!(
                        "HA resource {sid} asks for `{}` and vmid {} is {now}: the HA manager acts on it (see `ha-manager status`)",
                        ha.state().as_str(),
                        d.vmid
                    ),
                });
            }
            return true;
        };
        let (verb, what) = match existing {
            None => (Verb::HaAdd, format!("adding HA resource {sid}")),
            Some(_) => (Verb::HaUpdate, format!("updating HA resource {sid}")),
        };
        let keys: Vec<String> = write
            .set
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain(write.delete.iter().map(|k| format!("{k} (default)")))
            .collect();
        let id = self.push(
            step,
            (&d.node, Some(d.vmid)),
            verb,
            format!("{what}: {}", keys.join(", ")),
            Op::Ha {
                write,
                create: verb == Verb::HaAdd,
                guest: live.guest_ref(),
            },
            after,
        );
        self.ha_rule_step(step, d, &sid, before, &[id]);
        true
    }

    /// The HA resource of a guest this plan creates: added once it exists; the HA manager then
    /// starts it (the create itself does not).
    pub(super) fn ha_after_create(&mut self, step: StepId, d: &DesiredGuest, create: usize) {
        let Some(ha) = &d.ha else { return };
        if let Some(reason) = self.ha_problem(d) {
            let subject = self.subject(step);
            self.plan
                .skipped
                .push(crate::plan::Skipped { subject, reason });
            return;
        }
        let sid = ha_sid(d.guest, d.vmid);
        if let Some(write) = write_of(sid.clone(), ha, None, self.ha_uses_rules()) {
            let keys: Vec<String> = write.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let guest = match d.guest {
                proxops_pve::GuestType::Qemu => proxops_pve::GuestRef::qemu(&d.node, d.vmid),
                proxops_pve::GuestType::Lxc => proxops_pve::GuestRef::lxc(&d.node, d.vmid),
            };
            let id = self.push(
                step,
                (&d.node, Some(d.vmid)),
                Verb::HaAdd,
                format!("adding HA resource {sid}: {}", keys.join(", ")),
                Op::Ha {
                    write,
                    create: true,
                    guest,
                },
                &[create],
            );
            self.ha_rule_step(step, d, &sid, None, &[id]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_model::kinds::HaState;

    fn spec(state: Option<HaState>, max_restart: Option<u32>) -> HaSpec {
        HaSpec {
            state,
            group: None,
            max_restart,
            max_relocate: None,
        }
    }

    #[test]
    fn writes_only_what_differs_and_drops_what_is_no_longer_declared() {
        let live = HaResource {
            sid: "vm:100".into(),
            state: Some("started".into()),
            max_restart: Some(3),
            ..HaResource::default()
        };
        assert_eq!(
            write_of("vm:100".into(), &spec(None, Some(3)), Some(&live), false),
            None
        );
        let w = write_of(
            "vm:100".into(),
            &spec(Some(HaState::Stopped), None),
            Some(&live),
            false,
        )
        .expect("a write");
        assert_eq!(w.set, vec![("state".to_owned(), "stopped".to_owned())]);
        assert_eq!(w.delete, vec!["max_restart".to_owned()]);
        assert_eq!(w.wait, Some("stopped"));
        let new = write_of("vm:100".into(), &spec(None, None), None, false).expect("a create");
        assert_eq!((new.set.len(), new.wait), (1, Some("running")));
    }
}
