//! What several kinds share and that needs nothing of them: the power state, the node-name
//! check, slot numbering.

use crate::kind::context::SpecContext;
use crate::names::is_valid_node;
use crate::yaml::PathSeg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired power state of a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    /// Running.
    Started,
    /// Stopped.
    Stopped,
}

pub(crate) fn check_node(cx: &SpecContext<'_>, node: &str, at: &[PathSeg]) {
    if !is_valid_node(node) {
        cx.invalid(
            at,
            format!("`{node}` is not a valid PVE node name"),
            Some("node names are host names: letters, digits and inner hyphens".into()),
        );
    }
}

pub(crate) fn slot_in(slot: &str, prefix: &str, max: u32) -> bool {
    slot.strip_prefix(prefix)
        .filter(|n| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && (n.len() == 1 || !n.starts_with('0'))
        })
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n <= max)
}
