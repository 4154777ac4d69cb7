//! A guest's payload: its create (or clone, then the write of what differs from the template),
//! template conversion and start; or, once applied, the config write and resizes that take it
//! from the applied document to this one.

use super::api_request;
use crate::desired::{Context, Desired, DesiredGuest, Drivers};
use crate::diff::{GuestDiff, after_clone, diff_since};
use crate::execute::config_write::{asynchronous, request};
use crate::execute::{clone_request, create_request_config, guest_ref};
use proxops_model::kinds::PowerState;
use proxops_pve::props::format_size;
use proxops_pve::{GuestRef, GuestType, Request};
use proxops_store::materialized::{ApiRequest, Materialization};
use std::collections::BTreeMap;

/// What creates `d`.
pub(super) fn create(cx: &Context<'_>, drivers: &Drivers, d: &DesiredGuest) -> Materialization {
    let target = guest_ref(d);
    let mut requests = Vec::new();
    let mut notes = Vec::new();
    if let Some(source) = &d.clone {
        let template = GuestRef::qemu(&source.node, source.vmid);
        requests.push(api_request(Request::clone_guest(
            &template,
            &clone_request(d, source),
        )));
        match template_config(cx, drivers, source.vmid) {
            Some(live) => {
                notes.push(
                    "the write after the clone is computed against the template's declared config; the apply computes it against the clone's live config, which PVE copies from the template"
                        .to_owned(),
                );
                let found = after_clone(d, &live);
                writes(&target, &found, &mut requests, &mut notes);
            }
            None => notes.push(format!(
                "template {} is not declared in this cluster: the write after the clone depends on its live config",
                source.vmid
            )),
        }
        if d.power == Some(PowerState::Started) {
            requests.push(api_request(Request::start(&target)));
        }
    } else {
        requests.push(api_request(Request::create_guest(
            &target,
            &create_request_config(d),
        )));
        if d.template {
            requests.push(api_request(Request::make_template(&target)));
        }
    }
    ha_note(d, &mut notes);
    Materialization::new(requests, notes)
}

/// What takes a guest from the applied document `p` to `d`, assuming PVE holds what `p` wrote.
pub(super) fn update(d: &DesiredGuest, p: &DesiredGuest) -> Materialization {
    let mut requests = Vec::new();
    let mut notes = Vec::new();
    if (d.vmid, d.guest) != (p.vmid, p.guest) {
        notes.push(format!(
            "its identity changed (vmid {} to {}): the plan decides against live state",
            p.vmid, d.vmid
        ));
        return Materialization::new(requests, notes);
    }
    if d.node != p.node && !d.placed {
        notes.push(format!(
            "its node changed ({} to {}): the plan migrates it first",
            p.node, d.node
        ));
    }
    let target = guest_ref(d);
    let live = p.create_config();
    let found = diff_since(d, Some(p), &live);
    writes(&target, &found, &mut requests, &mut notes);
    if found.needs_restart() {
        notes.push(
            "some of it takes effect at the next start: a running guest is restarted by the plan (after a snapshot with update-policy)"
                .to_owned(),
        );
    }
    if d.power != p.power
        && let Some(power) = d.power
    {
        notes.push(
            format!("its power state becomes {power:?} (started or stopped by the plan)")
                .to_lowercase(),
        );
    }
    ha_note(d, &mut notes);
    Materialization::new(requests, notes)
}

/// The config write and resizes of a diff, and its anomalies as notes.
fn writes(
    target: &GuestRef,
    found: &GuestDiff,
    requests: &mut Vec<ApiRequest>,
    notes: &mut Vec<String>,
) {
    let changes: Vec<_> = found.changes.iter().collect();
    let removals: Vec<_> = found.removals.iter().collect();
    if !changes.is_empty() || !removals.is_empty() {
        let change = request(&changes, &removals, None);
        let asynchronous = asynchronous(target, &changes);
        requests.push(api_request(Request::set_config(
            target,
            &change,
            asynchronous,
        )));
        notes.push(
            "the config write carries the `digest` of the config the plan reads, and sub-keys the manifest does not set keep their live values"
                .to_owned(),
        );
    }
    for r in &found.resizes {
        requests.push(api_request(Request::resize(
            target,
            &r.disk,
            &format_size(r.to),
            None,
        )));
    }
    for a in &found.anomalies {
        notes.push(format!("{}: {}", a.key, a.message));
    }
}

/// The config a clone of the declared template `vmid` starts from, as its manifest declares it.
fn template_config(
    cx: &Context<'_>,
    drivers: &Drivers,
    vmid: u32,
) -> Option<BTreeMap<String, String>> {
    cx.graph.resources().find_map(|id| {
        let resource = cx.graph.resource(id);
        match drivers.desired(cx, resource).ok()? {
            Desired::Guest(t) if t.template && t.vmid == vmid && t.guest == GuestType::Qemu => {
                Some(t.create_config())
            }
            _ => None,
        }
    })
}

fn ha_note(d: &DesiredGuest, notes: &mut Vec<String>) {
    if d.ha.is_some() {
        notes.push(
            "its HA resource is written against the live HA state by the plan, not part of this payload"
                .to_owned(),
        );
    }
}
