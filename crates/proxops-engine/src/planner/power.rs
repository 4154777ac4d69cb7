//! A live guest's state once its config is planned: whether it is stopped before the update,
//! whether a change PVE applies only at the next start is restarted for or reported as
//! pending, then its template flag, its HA state or its power state, and the checks of a
//! guarded update.

use super::Planner;
use super::guarded::GuardPlan;
use crate::desired::DesiredGuest;
use crate::diff::GuestDiff;
use crate::plan::{Anomaly, Op, Verb};
use proxops_graph::StepId;
use proxops_model::ResourceKey;
use proxops_model::kinds::PowerState;
use proxops_pve::GuestInfo;

/// What the config steps of a live guest planned, that its power step goes on from.
pub(super) struct Planned {
    /// Whether the guest runs when the update is sent (one stopped first does not).
    pub running: bool,
    /// Whether the guest becomes a template.
    pub to_template: bool,
    /// The stop planned before the update.
    pub stopped: Option<usize>,
    /// The update.
    pub update: Option<usize>,
    /// The update's guard.
    pub guard: Option<GuardPlan>,
}

/// Whether a running guest is stopped before its update: a running guest declared stopped is
/// stopped first, so that PVE applies the changes at once instead of keeping them for a next
/// start.
pub(super) fn stops_first(
    d: &DesiredGuest,
    live: &GuestInfo,
    running: bool,
    to_template: bool,
    found: &GuestDiff,
) -> bool {
    running
        && d.ha.is_none()
        && live.hastate.is_none()
        && d.power == Some(PowerState::Stopped)
        && !d.template
        && !to_template
        && !found.is_converged()
}

impl Planner<'_> {
    /// Takes out of `found`, and reports, the changes of a running guest that PVE applies only
    /// at the next start, when the plan may not restart it (restarts not allowed, or the guest
    /// not declared started).
    pub(super) fn hold_pending(
        &mut self,
        key: &ResourceKey,
        d: &DesiredGuest,
        found: &mut GuestDiff,
        running: bool,
        to_template: bool,
        restarts: bool,
    ) {
        if !running
            || !found.needs_restart()
            || (restarts && d.power == Some(PowerState::Started) && !to_template)
        {
            return;
        }
        // PVE would keep these for a start that this plan may not do: report them, never
        // count them as converged.
        let waiting: Vec<String> = found
            .changes
            .iter()
            .filter(|c| c.restart)
            .map(|c| c.key.clone())
            .chain(
                found
                    .removals
                    .iter()
                    .filter(|r| r.restart)
                    .map(|r| r.key.clone()),
            )
            .collect();
        let why = if restarts {
            "the plan does not restart it"
        } else {
            "restarts are not allowed"
        };
        self.plan.anomalies.push(Anomaly {
            subject: key.to_string(),
            message: format!(
                "{}: pending until restart (vmid {} runs and {why}); PVE applies it at the next start",
                waiting.join(", "),
                d.vmid
            ),
        });
        found.changes.retain(|c| !c.restart);
        found.removals.retain(|r| !r.restart);
    }

    /// After the update: the guest made a template, or its HA resource set (which then decides
    /// its power), or started or stopped as declared; then a guarded update's check.
    pub(super) fn power_step(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        live: &GuestInfo,
        before: Option<&DesiredGuest>,
        planned: Planned,
    ) {
        let Planned {
            running,
            to_template,
            stopped,
            update,
            guard,
        } = planned;
        let after: Vec<usize> = update.into_iter().collect();
        let guest = live.guest_ref();
        if to_template {
            let (node, vmid) = (d.node.clone(), d.vmid);
            self.push(
                step,
                (&node, Some(vmid)),
                Verb::MarkTemplate,
                "declared a template".into(),
                Op::MarkTemplate {
                    guest,
                    running: false,
                },
                &after,
            );
            return;
        }
        if d.template {
            return;
        }
        // An HA guest's power is its HA state: set through its HA resource, never directly.
        if self.ha_step(step, d, live, before, &after) {
            if let Some(g) = guard {
                self.guard_after(step, d, g, running, update);
            }
            return;
        }
        let mut last = update;
        match d.power {
            Some(PowerState::Started) if !running => {
                let op = match &guard {
                    Some(g) => Op::GuardedStart {
                        guest,
                        guard: g.guard.clone(),
                    },
                    None => Op::Start { guest },
                };
                last = Some(self.push(
                    step,
                    (&d.node, Some(d.vmid)),
                    Verb::Start,
                    format!("is {}", live.status),
                    op,
                    &after,
                ));
            }
            Some(PowerState::Stopped) if running && stopped.is_none() => {
                self.push_stop(step, d, live, &after);
            }
            _ => {}
        }
        if let Some(g) = guard {
            let runs = running || matches!(d.power, Some(PowerState::Started));
            self.guard_after(step, d, g, runs, last);
        }
    }

    /// Appends the stop of the running guest `live` (after `after`).
    pub(super) fn push_stop(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        live: &GuestInfo,
        after: &[usize],
    ) -> usize {
        let guest = live.guest_ref();
        self.push(
            step,
            (&d.node, Some(d.vmid)),
            Verb::Stop,
            "is running".into(),
            Op::Stop { guest },
            after,
        )
    }
}
