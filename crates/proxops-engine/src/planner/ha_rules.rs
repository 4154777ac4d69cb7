//! `ha.group` on PVE 9, which has migrated HA groups to rules (pve-ha-manager
//! `src/PVE/HA/Groups.pm` `migrate_groups_to_rules`, `src/PVE/API2/HA/Rules.pm`): the resource
//! gets a node-affinity rule of its own, `proxops-<vm|ct>-<vmid>`, made, updated and removed
//! by ProxOps. Its nodes are those of the rule PVE migrated the group to (`ha-group-<group>`,
//! strict when the group was restricted), or, with no such rule, the guest's own nodes. A
//! resource PVE itself migrated into `ha-group-<group>` is as declared. The rule goes with its
//! resource (`DELETE /cluster/ha/resources/{sid}` purges it from rules by default), and on its
//! own only when `ha.group` was removed and the previous desired document declared it.

use super::Planner;
use crate::desired::DesiredGuest;
use crate::plan::{Anomaly, Op, Verb};
use proxops_graph::StepId;
use proxops_pve::Params;
use proxops_pve::api::ha::HaRule;

const NODE_AFFINITY: &str = "node-affinity";

/// The id of the node-affinity rule ProxOps keeps for an HA resource (`pve-configid`).
pub(crate) fn rule_id(sid: &str) -> String {
    format!("proxops-{}", sid.replace(':', "-"))
}

/// The rule as ProxOps wants it: `(nodes, strict, comment)`, `nodes` as PVE encodes them
/// (`NodeAffinity.pm` `encode_plugin_value`: sorted, `node:prio` for a priority).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Want {
    nodes: String,
    strict: bool,
    comment: String,
}

impl Want {
    fn params(&self, sid: &str, create: bool) -> Params {
        let mut p = Params::new()
            .set("type", NODE_AFFINITY)
            .set("nodes", &self.nodes)
            .set("strict", u8::from(self.strict))
            .set("comment", &self.comment);
        if create {
            p.push("resources", sid);
        }
        p
    }

    /// What differs from the live rule (`None`: nothing).
    fn differs(&self, sid: &str, live: &HaRule) -> Vec<&'static str> {
        let mut out = Vec::new();
        if live.resource_list() != [sid] {
            out.push("resources");
        }
        if live.nodes.as_deref() != Some(self.nodes.as_str()) {
            out.push("nodes");
        }
        if (live.strict == Some(1)) != self.strict {
            out.push("strict");
        }
        if live.comment.as_deref() != Some(self.comment.as_str()) {
            out.push("comment");
        }
        out
    }
}

fn sorted_nodes(nodes: &[String]) -> String {
    let mut n: Vec<&str> = nodes.iter().map(String::as_str).collect();
    n.sort_unstable();
    n.dedup();
    n.join(",")
}

impl Planner<'_> {
    /// Whether the cluster runs PVE 9, where `ha.group` becomes a node-affinity rule.
    pub(super) fn ha_uses_rules(&self) -> bool {
        self.release.is_some_and(|r| r.0 >= 9)
    }

    /// Plans the node-affinity rule standing for `ha.group` of `d` (HA resource `sid`), after
    /// the actions `after` (the HA resource must exist first: `Rules.pm` refuses unmanaged
    /// resources).
    pub(super) fn ha_rule_step(
        &mut self,
        step: StepId,
        d: &DesiredGuest,
        sid: &str,
        before: Option<&DesiredGuest>,
        after: &[usize],
    ) {
        if !self.ha_uses_rules() {
            return;
        }
        let group = d.ha.as_ref().and_then(|h| h.group.clone());
        let was_declared = before.is_some_and(|b| b.ha.as_ref().is_some_and(|h| h.group.is_some()));
        let rules = match &self.ha_rules {
            Some(Ok(r)) => r.clone(),
            // Unreadable: it matters only to a guest whose rule ProxOps keeps or kept.
            Some(Err(_)) if group.is_none() && !was_declared => return,
            Some(Err(e)) => {
                let reason = format!("cannot read the HA rules: {e}");
                let subject = self.subject(step);
                self.plan
                    .skipped
                    .push(crate::plan::Skipped { subject, reason });
                return;
            }
            None => return,
        };
        let id = rule_id(sid);
        let ours = rules.iter().find(|r| r.rule == id);
        let Some(group) = group else {
            if ours.is_some() {
                if was_declared {
                    self.push(
                        step,
                        (&d.node, Some(d.vmid)),
                        Verb::HaRemove,
                        format!("`ha.group` removed: deleting HA rule {id}"),
                        Op::HaRuleRemove { id },
                        after,
                    );
                } else {
                    self.plan.warnings.push(format!(
                        "{}: HA rule {id} exists but the manifest has no `ha.group`; without a previous desired document declaring it, ProxOps leaves it alone",
                        self.subject(step)
                    ));
                }
            }
            return;
        };
        let migrated_id = format!("ha-group-{group}");
        let migrated = rules.iter().find(|r| r.rule == migrated_id);
        if migrated.is_some_and(|m| m.resource_list().contains(&sid)) {
            // PVE migrated the group with this resource in it: as declared.
            return;
        }
        // `NodeAffinity.pm` `check_single_resource_reference`: one node-affinity rule per
        // resource, so one ProxOps did not make is in the way.
        if let Some(other) = rules
            .iter()
            .find(|r| r.kind == NODE_AFFINITY && r.rule != id && r.resource_list().contains(&sid))
        {
            let subject = self.subject(step);
            self.plan.anomalies.push(Anomaly {
                subject,
                message: format!(
                    "ha.group `{group}`: {sid} is in the node-affinity rule `{}`, which ProxOps did not make, and PVE 9 allows one per resource; take it out of that rule, or remove `ha.group`",
                    other.rule
                ),
            });
            return;
        }
        let (nodes, strict, from) = match migrated {
            Some(m) => (
                m.nodes.clone().unwrap_or_default(),
                m.strict == Some(1),
                format!("the nodes of `{migrated_id}`, PVE's migration of the group"),
            ),
            None => (
                sorted_nodes(&d.nodes),
                false,
                format!("the guest's nodes (no rule `{migrated_id}` holds the group)"),
            ),
        };
        let want = Want {
            nodes,
            strict,
            comment: format!("ProxOps: ha.group {group} of {}", self.subject(step)),
        };
        let (verb, create, what) = match ours {
            None => (Verb::HaAdd, true, format!("adding HA rule {id}")),
            Some(live) => {
                let keys = want.differs(sid, live);
                if keys.is_empty() {
                    return;
                }
                (
                    Verb::HaUpdate,
                    false,
                    format!("updating HA rule {id} ({})", keys.join(", ")),
                )
            }
        };
        self.push(
            step,
            (&d.node, Some(d.vmid)),
            verb,
            format!(
                "{what} for ha.group `{group}` (PVE 9 has rules, not groups): node-affinity, nodes={}, strict={}, from {from}",
                want.nodes,
                u8::from(want.strict)
            ),
            Op::HaRule {
                params: want.params(sid, create),
                id,
                create,
            },
            after,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_id_is_a_config_id_and_the_live_rule_is_compared_as_pve_encodes_it() {
        assert_eq!(rule_id("vm:130"), "proxops-vm-130");
        let want = Want {
            nodes: sorted_nodes(&["pve2".into(), "pve1".into()]),
            strict: false,
            comment: "c".into(),
        };
        assert_eq!(want.nodes, "pve1,pve2");
        let live = HaRule {
            rule: "proxops-vm-130".into(),
            kind: NODE_AFFINITY.into(),
            resources: Some("vm:130".into()),
            nodes: Some("pve1,pve2".into()),
            strict: None,
            comment: Some("c".into()),
        };
        assert!(want.differs("vm:130", &live).is_empty());
        let strict = Want {
            strict: true,
            ..want.clone()
        };
        assert_eq!(strict.differs("vm:130", &live), ["strict"]);
        assert_eq!(want.differs("vm:131", &live), ["resources"]);
    }
}
