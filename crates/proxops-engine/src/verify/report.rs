//! A cluster's plan, read as verification: each current resource's actions, anomalies and skips
//! turned into its [`VerifyState`] and [`Difference`]s. Pure: the comparison itself is the
//! planner's.

use super::{Difference, ResourceVerification, VerifyState};
use crate::plan::{Action, ClusterPlan, Op, Verb};
use proxops_store::state::ResourceView;
use proxops_store::{ClusterView, ObservationState, ResourceState};

/// One verification per row of `view` (every desired resource and deletion intent, in its
/// order): a resource with a current receipt from `plan`, or, when there is no plan, not
/// verified for the reason `plan` gives; the others not verified, with why.
pub(crate) fn verifications(
    view: &ClusterView,
    plan: Result<&ClusterPlan, &str>,
) -> Vec<ResourceVerification> {
    view.resources
        .iter()
        .map(|row| match (row.state, plan) {
            (ResourceState::Clean, Ok(plan)) => compared(row, plan),
            (ResourceState::Clean, Err(why)) => not_verified(row, format!("not compared: {why}")),
            _ => not_verified(row, uncurrent(row)),
        })
        .collect()
}

fn not_verified(row: &ResourceView, reason: String) -> ResourceVerification {
    ResourceVerification::new(
        &row.key.kind,
        &row.key.name,
        VerifyState::NotVerified,
        reason,
    )
}

/// Why a resource without a current receipt is not verified.
fn uncurrent(row: &ResourceView) -> String {
    match (row.state, row.observation) {
        (ResourceState::Ready, ObservationState::Missing) => {
            "never reconciled: it has no receipt".to_owned()
        }
        (ResourceState::Ready, ObservationState::Stale) => {
            "stale receipt: its desired document changed since it was last reconciled".to_owned()
        }
        // A receipt of the live document that does not say it is reconciled (a guarded update
        // rolled back): the planes' reason.
        (ResourceState::Ready, _) => format!("not reconciled: {}", row.reason),
        (ResourceState::Deleting, _) => format!("being deleted: {}", row.reason),
        _ => format!("waiting: {}", row.reason),
    }
}

/// A current resource as `plan` found it.
fn compared(row: &ResourceView, plan: &ClusterPlan) -> ResourceVerification {
    let (kind, name) = (row.key.kind.as_str(), row.key.name.as_str());
    let subject = row.key.to_string();
    if let Some(e) = plan.errors.iter().find(|e| e.subject == subject) {
        return not_verified(row, format!("not compared: {}", e.reason));
    }
    let actions: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.kind == kind && a.name == name && a.verb != Verb::Delete)
        .collect();
    let anomalies: Vec<&str> = plan
        .anomalies
        .iter()
        .filter(|a| a.subject == subject)
        .map(|a| a.message.as_str())
        .collect();
    let gone: Vec<&str> = actions
        .iter()
        .filter(|a| matches!(a.verb, Verb::Create | Verb::Download))
        .map(|a| a.reason.as_str())
        .collect();
    if !gone.is_empty() {
        return ResourceVerification::new(kind, name, VerifyState::Missing, gone.join("; "));
    }
    if !actions.is_empty() || !anomalies.is_empty() {
        let reasons: Vec<&str> = actions
            .iter()
            .map(|a| a.reason.as_str())
            .chain(anomalies)
            .collect();
        return ResourceVerification {
            differences: actions.iter().flat_map(|a| differences(a)).collect(),
            ..ResourceVerification::new(kind, name, VerifyState::Drifted, reasons.join("; "))
        };
    }
    if let Some(s) = plan
        .skipped
        .iter()
        .chain(&plan.waiting)
        .find(|s| s.subject == subject)
    {
        return not_verified(row, format!("not compared: {}", s.reason));
    }
    ResourceVerification::new(
        kind,
        name,
        VerifyState::InSync,
        "live state matches its reconciled desired document",
    )
}

/// What one action of a current resource says differs.
fn differences(a: &Action) -> Vec<Difference> {
    let some = |s: &str| Some(s.to_owned());
    match (a.verb, &a.op) {
        (Verb::Update | Verb::Retag | Verb::Adopt, _) => a
            .changes
            .iter()
            .map(|c| Difference::new(&c.key, c.to.clone().filter(|_| !c.delete), c.from.clone()))
            .chain(a.resizes.iter().map(|r| {
                Difference::new(
                    format!("{} size", r.disk),
                    Some(proxops_pve::props::format_size(r.to)),
                    Some(proxops_pve::props::format_size(r.from)),
                )
            }))
            .collect(),
        (Verb::Start, _) => vec![Difference::new(
            "state",
            some("started"),
            a.reason.strip_prefix("is ").map(str::to_owned),
        )],
        (Verb::Stop, _) => vec![Difference::new("state", some("stopped"), some("running"))],
        (Verb::MarkTemplate, _) => vec![Difference::new("template", some("1"), some("0"))],
        (Verb::Migrate, Op::Migrate { request, .. }) => vec![Difference::new(
            "node",
            Some(request.target.clone()),
            Some(a.node.clone()),
        )],
        (Verb::HaAdd | Verb::HaUpdate, Op::Ha { write, .. }) => write
            .set
            .iter()
            .map(|(k, v)| Difference::new(format!("ha.{k}"), Some(v.clone()), None))
            .chain(
                write
                    .delete
                    .iter()
                    .map(|k| Difference::new(format!("ha.{k}"), None, None)),
            )
            .collect(),
        (Verb::HaAdd | Verb::HaUpdate, Op::HaRule { id, .. }) => {
            vec![Difference::new(format!("ha rule {id}"), None, None)]
        }
        (Verb::HaRemove, Op::HaRemove { sid }) => {
            vec![Difference::new("ha", None, Some(sid.clone()))]
        }
        (Verb::HaRemove, Op::HaRuleRemove { id }) => {
            vec![Difference::new(format!("ha rule {id}"), None, None)]
        }
        (Verb::Replace, _) => vec![Difference::new("file", None, None)],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::plan::{Anomaly, KeyChange, ResourceError, Skipped};
    use proxops_model::ResourceKey;
    use proxops_pve::GuestRef;
    use proxops_store::ObjectId;

    fn row(kind: &str, name: &str, state: ResourceState, obs: ObservationState) -> ResourceView {
        ResourceView {
            key: ResourceKey {
                kind: kind.to_owned(),
                name: name.to_owned(),
            },
            uid: String::new(),
            blob: ObjectId::from_bytes([0; 20]),
            observation: obs,
            state,
            reason: "as the planes say".to_owned(),
            receipt: None,
            owner: None,
        }
    }

    fn clean(kind: &str, name: &str) -> ResourceView {
        row(kind, name, ResourceState::Clean, ObservationState::Current)
    }

    fn view(resources: Vec<ResourceView>) -> ClusterView {
        ClusterView {
            cluster: "lab".to_owned(),
            desired_revision: None,
            observed_revision: None,
            resources,
            receipts: Vec::new(),
            artifacts: Vec::new(),
        }
    }

    fn plan(actions: Vec<Action>) -> ClusterPlan {
        ClusterPlan {
            cluster: "lab".to_owned(),
            actions,
            anomalies: Vec::new(),
            skipped: Vec::new(),
            waiting: Vec::new(),
            errors: Vec::new(),
            deferred_prunes: Vec::new(),
            warnings: Vec::new(),
            placements: Vec::new(),
            addressable: Default::default(),
            migration_fingerprints: Default::default(),
        }
    }

    fn action(kind: &str, name: &str, verb: Verb, reason: &str, op: Op) -> Action {
        Action {
            id: 0,
            level: Some(1),
            kind: kind.to_owned(),
            name: name.to_owned(),
            node: "pve1".to_owned(),
            vmid: Some(100),
            verb,
            reason: reason.to_owned(),
            changes: Vec::new(),
            resizes: Vec::new(),
            restart: false,
            after: Vec::new(),
            op,
        }
    }

    fn start(kind: &str, name: &str, verb: Verb, reason: &str) -> Action {
        action(
            kind,
            name,
            verb,
            reason,
            Op::Start {
                guest: GuestRef::qemu("pve1", 100),
            },
        )
    }

    fn change(key: &str, from: Option<&str>, to: Option<&str>, delete: bool) -> KeyChange {
        KeyChange {
            key: key.to_owned(),
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            delete,
            removed: Vec::new(),
        }
    }

    #[test]
    fn an_update_of_a_current_resource_is_drift_with_desired_and_live_values() {
        let mut update = start("VM", "sandbox-01", Verb::Update, "changed: memory, tags");
        update.changes = vec![
            change("memory", Some("4096"), Some("2048"), false),
            change("onboot", Some("1"), None, true),
        ];
        update.resizes = vec![crate::plan::DiskGrowth {
            disk: "scsi0".to_owned(),
            from: 4 << 30,
            to: 8 << 30,
        }];
        let got = verifications(
            &view(vec![clean("VM", "sandbox-01"), clean("ISO", "netinst")]),
            Ok(&plan(vec![update])),
        );
        assert_eq!(got.len(), 2);
        let vm = &got[0];
        assert_eq!(vm.state, VerifyState::Drifted);
        assert_eq!(vm.reason, "changed: memory, tags");
        assert_eq!(
            vm.differences,
            [
                Difference::new("memory", Some("2048".into()), Some("4096".into())),
                Difference::new("onboot", None, Some("1".into())),
                Difference::new("scsi0 size", Some("8G".into()), Some("4G".into())),
            ]
        );
        // Nothing planned for the other one: in sync, nothing listed.
        assert_eq!(got[1].state, VerifyState::InSync);
        assert!(got[1].differences.is_empty());
    }

    #[test]
    fn a_create_or_download_is_missing_and_power_is_drift() {
        let create = start("VM", "gone", Verb::Create, "absent");
        let ha = action(
            "VM",
            "gone",
            Verb::HaAdd,
            "adding HA resource vm:100",
            Op::HaRemove { sid: "x".into() },
        );
        let download = start(
            "ISO",
            "netinst",
            Verb::Download,
            "local:iso/d.iso is not on pve1",
        );
        let power = start("LXC", "ci", Verb::Start, "is stopped");
        let got = verifications(
            &view(vec![
                clean("VM", "gone"),
                clean("ISO", "netinst"),
                clean("LXC", "ci"),
            ]),
            Ok(&plan(vec![create, ha, download, power])),
        );
        let states: Vec<(VerifyState, &str)> =
            got.iter().map(|v| (v.state, v.reason.as_str())).collect();
        assert_eq!(
            states,
            [
                (VerifyState::Missing, "absent"),
                (VerifyState::Missing, "local:iso/d.iso is not on pve1"),
                (VerifyState::Drifted, "is stopped"),
            ]
        );
        assert_eq!(
            got[2].differences,
            [Difference::new(
                "state",
                Some("started".into()),
                Some("stopped".into())
            )]
        );
    }

    #[test]
    fn resources_without_a_current_receipt_are_not_verified_and_say_why() {
        let never = row("VM", "new", ResourceState::Ready, ObservationState::Missing);
        let stale = row(
            "VM",
            "edited",
            ResourceState::Ready,
            ObservationState::Stale,
        );
        let waiting = row(
            "VM",
            "consumer",
            ResourceState::Wait,
            ObservationState::Current,
        );
        let deleting = row(
            "LXC",
            "old",
            ResourceState::Deleting,
            ObservationState::NotApplicable,
        );
        let rolled_back = row(
            "VM",
            "guarded",
            ResourceState::Ready,
            ObservationState::Current,
        );
        // Even with actions planned for them, they are not drift.
        let planned = plan(vec![
            start("VM", "new", Verb::Create, "absent"),
            start("VM", "edited", Verb::Update, "changed: memory"),
        ]);
        let got = verifications(
            &view(vec![never, stale, waiting, deleting, rolled_back]),
            Ok(&planned),
        );
        assert!(got.iter().all(|v| v.state == VerifyState::NotVerified));
        let reasons: Vec<&str> = got.iter().map(|v| v.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "never reconciled: it has no receipt",
                "stale receipt: its desired document changed since it was last reconciled",
                "waiting: as the planes say",
                "being deleted: as the planes say",
                "not reconciled: as the planes say",
            ]
        );
    }

    #[test]
    fn anomalies_are_drift_skips_and_errors_are_not_verified_and_no_plan_verifies_nothing() {
        let mut p = plan(Vec::new());
        p.anomalies.push(Anomaly::new(
            "VM/grown",
            "scsi0 is 16G, the manifest says 8G",
        ));
        p.skipped
            .push(Skipped::new("VM/locked", "locked (backup) by PVE"));
        p.errors.push(ResourceError {
            subject: "VM/secret".to_owned(),
            code: "proxops::cloud_init_secret".to_owned(),
            reason: "no such SOPS key".to_owned(),
        });
        let rows = view(vec![
            clean("VM", "grown"),
            clean("VM", "locked"),
            clean("VM", "secret"),
        ]);
        let got = verifications(&rows, Ok(&p));
        let states: Vec<(VerifyState, &str)> =
            got.iter().map(|v| (v.state, v.reason.as_str())).collect();
        assert_eq!(
            states,
            [
                (VerifyState::Drifted, "scsi0 is 16G, the manifest says 8G"),
                (
                    VerifyState::NotVerified,
                    "not compared: locked (backup) by PVE"
                ),
                (VerifyState::NotVerified, "not compared: no such SOPS key"),
            ]
        );
        let unread = verifications(&rows, Err("PVE cannot be reached"));
        assert!(unread.iter().all(|v| v.state == VerifyState::NotVerified
            && v.reason == "not compared: PVE cannot be reached"));
    }
}
