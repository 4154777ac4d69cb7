//! What the VM and LXC drivers build the same way: the guest before its keys, the keys every
//! guest begins with, and options written as they are given.

use super::guest::{Compare, DesiredGuest, Owned, flag, owned};
use proxops_model::kinds::placement::allowed_nodes;
use proxops_model::kinds::{HaSpec, PowerState};
use proxops_model::quantity::Quantity;
use proxops_pve::GuestType;

impl DesiredGuest {
    /// A `guest` with no keys yet on its `node` (pinned) or the first of its `nodes` (placed,
    /// until the planner picks one): kept in `state` (started by default), or in the power its
    /// HA state decides; never started when it is a template.
    pub(super) fn empty(
        guest: GuestType,
        template: bool,
        (node, nodes): (Option<&str>, &[String]),
        vmid: u32,
        state: Option<PowerState>,
        ha: Option<&HaSpec>,
    ) -> DesiredGuest {
        let nodes = allowed_nodes(node, nodes);
        DesiredGuest {
            guest,
            template,
            node: nodes.first().cloned().unwrap_or_default(),
            placed: node.is_none(),
            nodes,
            vmid,
            power: match ha {
                _ if template => None,
                Some(ha) => ha.state().power(),
                None => Some(state.unwrap_or(PowerState::Started)),
            },
            ha: ha.cloned().filter(|_| !template),
            clone: None,
            owned: Vec::new(),
            create_only: Vec::new(),
            warnings: Vec::new(),
            update_policy: None,
            firewall: None,
            pool: None,
        }
    }
}

/// The keys every guest begins with: its PVE name under `name_key` (qemu's `name`, lxc's
/// `hostname`), its description, its memory in whole MiB (`memory_restart`: whether a change
/// needs a restart).
pub(super) fn identity(
    o: &mut Vec<Owned>,
    name_key: &str,
    name: String,
    description: Option<&str>,
    memory: &Quantity,
    memory_restart: bool,
) {
    o.push(owned(name_key, name, Compare::Canonical, false));
    if let Some(d) = description {
        // Only the end is trimmed (a YAML block's newline): PVE keeps a leading space of its
        // `#` lines (qemu-server `QemuServer.pm` `parse_vm_config`, pve-container
        // `PVE/LXC/Config.pm` `parse_pct_config`: `# GATEWAY` reads back as ` GATEWAY`), which
        // adopt writes back.
        o.push(owned(
            "description",
            d.trim_end(),
            Compare::Canonical,
            false,
        ));
    }
    if let Some(mib) = memory.whole_mib() {
        o.push(owned(
            "memory",
            mib.to_string(),
            Compare::Canonical,
            memory_restart,
        ));
    }
}

/// Each boolean option that is set, as `1` or `0`; none needs a restart.
pub(super) fn flags(o: &mut Vec<Owned>, options: &[(&str, Option<bool>)]) {
    for (key, value) in options {
        if let Some(b) = value {
            o.push(owned(*key, flag(*b), Compare::Canonical, false));
        }
    }
}

/// `startup` (compared by its sub-keys) and `hookscript`, when set; neither needs a restart.
pub(super) fn startup_and_hookscript(
    o: &mut Vec<Owned>,
    startup: Option<&String>,
    hookscript: Option<&String>,
) {
    if let Some(s) = startup {
        o.push(owned("startup", s.clone(), Compare::SubKeys, false));
    }
    if let Some(h) = hookscript {
        o.push(owned("hookscript", h.clone(), Compare::Canonical, false));
    }
}

/// `nameserver`, the servers in order and space-separated, when there are any.
pub(super) fn nameservers(o: &mut Vec<Owned>, servers: &[String]) {
    if !servers.is_empty() {
        o.push(owned(
            "nameserver",
            servers.join(" "),
            Compare::WordList,
            false,
        ));
    }
}
