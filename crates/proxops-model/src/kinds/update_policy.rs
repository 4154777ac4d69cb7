//! `spec.update-policy` of a VM or a container: snapshot-guarded disruptive updates.
//!
//! Before an update that restarts the guest or changes what it boots with (a change PVE applies
//! only at the next start: CPU, machine type, cores, ...), ProxOps takes a PVE snapshot of its
//! own, applies the update, restarts the guest, checks it, and rolls back to the snapshot when
//! a task or the check fails. PVE cannot snapshot a template (pve-guest-common
//! `PVE/AbstractConfig.pm` `__snapshot_prepare`: "you can't take a snapshot if it's a
//! template"), nor save a container's memory (pve-container `PVE/API2/LXC/Snapshot.pm`
//! `snapshot` has no `vmstate`), nor ask a container's guest agent (there is none).

use super::basics::PowerState;
use crate::kind::context::SpecContext;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many ProxOps snapshots a guest keeps when `keep` is not given.
pub const DEFAULT_KEEP: u32 = 3;

/// How long the check after a guarded update waits when `verify.timeout` is not given.
pub const DEFAULT_VERIFY_TIMEOUT: &str = "5m";

/// What ProxOps does around a disruptive update of the guest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct UpdatePolicy {
    /// Take a PVE snapshot (`proxops-<revision>`) before a disruptive update, check the guest
    /// after it, and roll back to the snapshot when a task or the check fails. Every disk and
    /// mount point must be on a storage with snapshots (lvmthin, zfspool, rbd, btrfs, qcow2
    /// files on dir/nfs/cifs), else the update is an anomaly and nothing is sent.
    #[serde(default)]
    pub snapshot: bool,
    /// How many ProxOps snapshots the guest keeps (the newest, at least 1; default 3); older
    /// ones are deleted after a guarded update succeeds. Snapshots ProxOps did not take are
    /// never deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
    /// Save a running VM's memory in the snapshot (PVE `vmstate`), so a rollback resumes it
    /// as it was (default false). VMs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstate: Option<bool>,
    /// The check after the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyPolicy>,
}

/// How a guarded update is checked once the guest runs again.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct VerifyPolicy {
    /// A VM passes when its QEMU guest agent answers (`agent/ping`); default: whether the VM
    /// enables the agent (`options.agent`). Without it a VM passes when it runs. VMs only: a
    /// container passes when it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent: Option<bool>,
    /// How long the check waits for the guest, a duration such as `5m`, `90s` or `1h30m`
    /// (default `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"))]
    pub timeout: Option<String>,
}

impl UpdatePolicy {
    /// The number of ProxOps snapshots kept.
    pub fn keep(&self) -> u32 {
        self.keep.unwrap_or(DEFAULT_KEEP).max(1)
    }

    /// How long the check waits (the default when `verify.timeout` is absent or unreadable).
    pub fn timeout(&self) -> std::time::Duration {
        self.verify
            .as_ref()
            .and_then(|v| v.timeout.as_deref())
            .and_then(crate::quantity::parse_duration)
            .filter(|d| !d.is_zero())
            .unwrap_or(std::time::Duration::from_secs(300))
    }

    /// Whether the check asks the QEMU guest agent, for a VM whose agent is `agent_enabled`.
    pub fn guest_agent(&self, agent_enabled: bool) -> bool {
        self.verify
            .as_ref()
            .and_then(|v| v.guest_agent)
            .unwrap_or(agent_enabled)
    }
}

/// The checks of `update-policy` (`kind`: `VM` or `LXC`; `template`: the template kind's name
/// for a TemplateVM or TemplateCT; `agent`: whether a VM enables its guest agent).
pub(crate) fn check(
    cx: &SpecContext<'_>,
    policy: Option<&UpdatePolicy>,
    (kind, template): (&str, Option<&str>),
    agent: bool,
    state: Option<PowerState>,
) {
    let Some(policy) = policy else { return };
    if let Some(template) = template {
        cx.invalid(
            &path!["update-policy"],
            format!("a {template} cannot have an update policy: PVE cannot snapshot a template"),
            Some(format!(
                "PVE refuses (\"you can't take a snapshot if it's a template\"); remove `update-policy`, or declare the guest a {kind}"
            )),
        );
        return;
    }
    if policy.keep == Some(0) {
        cx.invalid(
            &path!["update-policy", "keep"],
            "`keep` must be at least 1: the snapshot a guarded update takes is kept",
            Some("keep the newest N ProxOps snapshots, N >= 1 (default 3)".into()),
        );
    }
    let container = kind != "VM";
    if container && policy.vmstate == Some(true) {
        cx.invalid(
            &path!["update-policy", "vmstate"],
            "`vmstate` is for VMs: PVE does not save a container's memory in a snapshot",
            Some("remove `vmstate`".into()),
        );
    }
    if policy.vmstate == Some(true) && state == Some(PowerState::Stopped) {
        cx.invalid(
            &path!["update-policy", "vmstate"],
            "`vmstate` saves the memory of a running VM, and this VM is declared stopped",
            Some("remove `vmstate`, or declare `state: started`".into()),
        );
    }
    let Some(verify) = &policy.verify else { return };
    if let Some(timeout) = &verify.timeout {
        match crate::quantity::parse_duration(timeout) {
            Some(d) if !d.is_zero() => {}
            _ => cx.invalid(
                &path!["update-policy", "verify", "timeout"],
                format!("`{timeout}` is not a duration"),
                Some(
                    "a positive duration: a number and a unit (ms, s, m, h), e.g. `5m`, `90s` or `1h30m`"
                        .into(),
                ),
            ),
        }
    }
    match verify.guest_agent {
        Some(true) if container => cx.invalid(
            &path!["update-policy", "verify", "guest-agent"],
            "a container has no QEMU guest agent: it passes the check when it runs",
            Some("remove `guest-agent`".into()),
        ),
        Some(true) if !agent => cx.invalid(
            &path!["update-policy", "verify", "guest-agent"],
            "the check asks the QEMU guest agent, which this VM does not enable",
            Some("enable it with `options.agent: true` (and install qemu-guest-agent in the guest), or set `guest-agent: false` to check only that the VM runs".into()),
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = UpdatePolicy {
            snapshot: true,
            ..UpdatePolicy::default()
        };
        assert_eq!(p.keep(), 3);
        assert_eq!(p.timeout(), std::time::Duration::from_secs(300));
        assert!(p.guest_agent(true));
        assert!(!p.guest_agent(false));
        let p = UpdatePolicy {
            snapshot: true,
            keep: Some(1),
            vmstate: None,
            verify: Some(VerifyPolicy {
                guest_agent: Some(false),
                timeout: Some("1m30s".into()),
            }),
        };
        assert_eq!(p.keep(), 1);
        assert_eq!(p.timeout(), std::time::Duration::from_secs(90));
        assert!(!p.guest_agent(true));
    }
}
