//! Where a guest runs and how PVE's HA stack keeps it: `node:` (pinned) or `nodes:` (placed on
//! one of them by the planner), and `ha:` (an HA resource, `/cluster/ha/resources`). Shared by
//! `VM` and `LXC`; templates are pinned and never HA-managed.

use super::basics::{PowerState, check_node};
use crate::kind::context::SpecContext;
use crate::kind::terms::PlacementView;
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The HA resource of a guest (pve-ha-manager `src/PVE/HA/Resources.pm` properties).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HaSpec {
    /// The state the HA manager keeps the guest in (PVE's default: `started`). It decides the
    /// guest's power: with `ha:` the guest takes no `state:`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<HaState>,
    /// The HA group whose nodes the guest prefers (PVE 8; PVE 9 has migrated groups to rules
    /// and refuses it). The group must exist in PVE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Restart attempts on the same node after a failed start (PVE's default: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restart: Option<u32>,
    /// Relocations to another node after failed starts (PVE's default: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_relocate: Option<u32>,
}

impl HaSpec {
    /// The requested state, PVE's default when unset.
    pub fn state(&self) -> HaState {
        self.state.unwrap_or(HaState::Started)
    }
}

/// A requested HA state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HaState {
    /// Kept running, restarted or relocated on failure.
    Started,
    /// Kept stopped; still moved away from a failed node.
    Stopped,
    /// Kept stopped and never relocated.
    Disabled,
    /// Not acted on by HA at all (power is then nobody's: ProxOps leaves it alone).
    Ignored,
}

impl HaState {
    /// PVE's word.
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Started => "started",
            HaState::Stopped => "stopped",
            HaState::Disabled => "disabled",
            HaState::Ignored => "ignored",
        }
    }

    /// The power state the HA manager keeps (`None`: HA ignores the guest).
    pub fn power(self) -> Option<PowerState> {
        match self {
            HaState::Started => Some(PowerState::Started),
            HaState::Stopped | HaState::Disabled => Some(PowerState::Stopped),
            HaState::Ignored => None,
        }
    }
}

/// The nodes a guest may run on, in order: its `node`, or its `nodes`.
pub fn allowed_nodes(node: Option<&str>, nodes: &[String]) -> Vec<String> {
    match node {
        Some(n) => vec![n.to_owned()],
        None => nodes.to_vec(),
    }
}

/// The nodes a guest may run on, with the spec path of each: `node`, or `nodes` in order.
pub(crate) fn placement_nodes(node: Option<&str>, nodes: &[String]) -> Vec<(String, Vec<PathSeg>)> {
    match node {
        Some(n) => vec![(n.to_owned(), path!["node"].to_vec())],
        None => nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), path!["nodes", i].to_vec()))
            .collect(),
    }
}

/// The graph's view: a pinned guest's node; a placed guest has no node until the planner picks
/// one (its one step then needs every step of a same-node prerequisite, and the planner picks
/// a node that has it).
pub(crate) fn placement_view<'s>(node: Option<&'s str>, vmid: u32) -> PlacementView<'s> {
    PlacementView {
        nodes: node.map(Cow::Borrowed).into_iter().collect(),
        vmid: Some(vmid),
    }
}

/// `node:` or `nodes:`, exactly one; `nodes:` non-empty, without repeats, not on templates.
pub(crate) fn check_placement(
    cx: &SpecContext<'_>,
    node: Option<&str>,
    nodes: &[String],
    what: &str,
    template: bool,
) {
    match (node, nodes.is_empty()) {
        (Some(_), false) => cx.invalid(
            &path!["nodes"],
            "set either `node` (pinned) or `nodes` (placed on one of them), not both",
            Some("`node: pve1` keeps the guest on pve1; `nodes: [pve1, pve2]` lets ProxOps pick one and leaves the guest wherever it is among them".into()),
        ),
        (None, true) => cx.report_missing(
            &path!["node"],
            format!("a {what} needs `node` (or `nodes`, the nodes it may be placed on)"),
        ),
        _ => {}
    }
    if let Some(n) = node {
        check_node(cx, n, &path!["node"]);
    }
    if template && !nodes.is_empty() {
        cx.invalid(
            &path!["nodes"],
            format!("a {what} is pinned to one node: use `node`"),
            Some("clones find their template on its node; a template that may be anywhere cannot be found".into()),
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        check_node(cx, n, &path!["nodes", i]);
        if nodes[..i].contains(n) {
            cx.invalid(
                &path!["nodes", i],
                format!("node `{n}` is listed twice"),
                None,
            );
        }
    }
}

/// `ha:`: not on templates, not beside `state:` (the HA state decides the power), a group
/// name PVE accepts (`pve-configid`).
pub(crate) fn check_ha(
    cx: &SpecContext<'_>,
    ha: Option<&HaSpec>,
    state: Option<PowerState>,
    what: &str,
    template: bool,
) {
    let Some(ha) = ha else { return };
    if template {
        cx.invalid(
            &path!["ha"],
            format!("a {what} cannot be an HA resource"),
            Some(
                "PVE's HA manager starts and relocates guests; a template is never started".into(),
            ),
        );
        return;
    }
    if state.is_some() {
        cx.invalid(
            &path!["state"],
            "an HA guest's power is its HA state: `state` is not set beside `ha`",
            Some(format!(
                "remove `state` and set `ha.state` (`started`, `stopped`, `disabled` or `ignored`; now {})",
                ha.state().as_str()
            )),
        );
    }
    if let Some(group) = &ha.group
        && !is_config_id(group)
    {
        cx.invalid(
            &path!["ha", "group"],
            format!("`{group}` is not an HA group name PVE accepts"),
            Some("a letter first, then letters, digits, `-` or `_` (PVE's `pve-configid`)".into()),
        );
    }
}

/// pve-common `PVE::JSONSchema` `pve_verify_configid`: `^[a-z][a-z0-9_-]+$` (case-insensitive).
fn is_config_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && id.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_follow_pve_configid() {
        assert!(is_config_id("prefer-a") && is_config_id("g_1"));
        assert!(!is_config_id("1g") && !is_config_id("g") && !is_config_id("a b"));
    }

    #[test]
    fn ha_state_decides_power() {
        assert_eq!(HaState::Started.power(), Some(PowerState::Started));
        assert_eq!(HaState::Disabled.power(), Some(PowerState::Stopped));
        assert_eq!(HaState::Ignored.power(), None);
    }
}
