//! Whether a reference expression reading a built-in kind's artifact can ever resolve
//! ([`crate::kind::KindDef::artifact_unreachable`]).
//!
//! The artifacts are what the engine publishes with a receipt (`proxops-engine` `planes`):
//! every guest's `mac-addresses` (`netN` -> MAC, from its config), a running guest's
//! `ip-addresses` (read through the QEMU guest agent for a VM, from the container otherwise:
//! `netN` or the interface's name -> `{name, mac, ipv4: [...], ipv6: [...]}`), a placed guest's
//! `placement` (`{node, reason}`), and a downloaded file's `file` (`{volid, nodes: {NODE: {volid,
//! size, format}}, checksum}`). A consumer waiting on anything else would wait forever.

use super::artifact_spec::ArtifactSpec;
use super::basics::PowerState;
use super::lxc_spec::LxcSpec;
use super::placement::HaState;
use super::vm_spec::VmSpec;
use crate::kind::terms::Unreachable;
use crate::pointer::{Pointer, array_index};
use crate::pve_config::PveConfig;

/// The fields of a receipt's `spec.result` (`proxops-store` `ReceiptResult`), which
/// `fromReceipt` pointers read.
pub const RECEIPT_RESULT_FIELDS: [&str; 8] = [
    "outcome",
    "pveIdentity",
    "upids",
    "startedAt",
    "finishedAt",
    "controllerVersion",
    "artifacts",
    "guard",
];

/// Every guest's `netN` -> MAC.
pub const MAC_ADDRESSES: &str = "mac-addresses";
/// A running guest's addresses, by `netN` (or interface name).
pub const IP_ADDRESSES: &str = "ip-addresses";
/// A placed guest's node and why.
pub const PLACEMENT: &str = "placement";
/// The artifact names a guest's receipts may carry.
pub const GUEST_ARTIFACTS: [&str; 3] = [MAC_ADDRESSES, IP_ADDRESSES, PLACEMENT];
/// The artifact name a downloaded file's receipts carry.
pub const FILE_ARTIFACT: &str = "file";

/// What decides which artifacts a guest's receipts carry.
pub(crate) struct GuestFacts {
    /// Its network device slots (`net0`, ...); `None` when they are not known from the
    /// manifest (a clone keeping its template's NICs).
    pub nics: Option<Vec<String>>,
    /// Why it never runs under ProxOps, if it never does.
    pub never_runs: Option<String>,
    /// Why it can never tell its addresses although it runs (a VM's guest agent is off).
    pub no_addresses: Option<String>,
    /// Whether it is placed (`nodes:`): only then is there a `placement`.
    pub placed: bool,
}

impl GuestFacts {
    pub(crate) fn of_vm(spec: &VmSpec, template: bool) -> GuestFacts {
        let slots = spec
            .networks
            .iter()
            .enumerate()
            .map(|(i, n)| n.slot.clone().unwrap_or_else(|| format!("net{i}")));
        let nics = (!spec.networks.is_empty() || spec.clone.is_none())
            .then(|| with_raw_nics(slots.collect(), &spec.pve_config));
        let agent_off = if spec.options.as_ref().and_then(|o| o.agent) == Some(false) {
            Some("its QEMU guest agent is off (`options.agent: false`)".to_owned())
        } else {
            spec.pve_config
                .get("agent")
                .filter(|v| agent_value_enabled(v.as_str()) == Some(false))
                .map(|v| {
                    format!(
                        "its QEMU guest agent is off (`pve-config.agent: {}`)",
                        v.as_str()
                    )
                })
        };
        GuestFacts {
            nics,
            never_runs: never_runs(template, spec.state, spec.ha.as_ref().map(|h| h.state())),
            no_addresses: agent_off,
            placed: !spec.nodes.is_empty(),
        }
    }

    pub(crate) fn of_lxc(spec: &LxcSpec, template: bool) -> GuestFacts {
        let slots = spec
            .networks
            .iter()
            .enumerate()
            .map(|(i, n)| n.slot.clone().unwrap_or_else(|| format!("net{i}")));
        GuestFacts {
            nics: Some(with_raw_nics(slots.collect(), &spec.pve_config)),
            never_runs: never_runs(template, spec.state, spec.ha.as_ref().map(|h| h.state())),
            no_addresses: None,
            placed: !spec.nodes.is_empty(),
        }
    }
}

fn with_raw_nics(mut slots: Vec<String>, raw: &PveConfig) -> Vec<String> {
    slots.extend(raw.keys().filter(|k| is_nic_slot(k)).cloned());
    slots.sort_by_key(|s| s[3..].parse::<u32>().unwrap_or(u32::MAX));
    slots.dedup();
    slots
}

fn never_runs(template: bool, state: Option<PowerState>, ha: Option<HaState>) -> Option<String> {
    if template {
        return Some("a template never runs".to_owned());
    }
    match (ha, state) {
        (Some(s @ (HaState::Stopped | HaState::Disabled)), _) => {
            Some(format!("its HA state is `{}`", s.as_str()))
        }
        (None, Some(PowerState::Stopped)) => Some("it is declared `state: stopped`".to_owned()),
        _ => None,
    }
}

/// Whether a QEMU `agent` value enables the guest agent; `None` when it cannot be read.
/// qemu-server `PVE/QemuServer/Agent.pm` `parse_guest_agent`: `enabled` is the default key and
/// defaults to off.
fn agent_value_enabled(value: &str) -> Option<bool> {
    match value
        .split(',')
        .find(|p| !p.contains('=') || p.starts_with("enabled="))
    {
        Some(part) => {
            crate::pve_config::check::parse_bool(part.strip_prefix("enabled=").unwrap_or(part))
        }
        None => Some(false),
    }
}

fn is_nic_slot(token: &str) -> bool {
    token
        .strip_prefix("net")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn never(why: impl Into<String>, accepted: &[&str]) -> Option<Unreachable> {
    Some(Unreachable {
        why: why.into(),
        accepted: accepted.iter().map(|s| (*s).to_owned()).collect(),
    })
}

/// A guest's artifact `name` at `pointer`, for a guest with `facts`.
pub(crate) fn guest(facts: &GuestFacts, name: &str, pointer: &Pointer) -> Option<Unreachable> {
    let carried: Vec<&str> = GUEST_ARTIFACTS
        .into_iter()
        .filter(|n| *n != PLACEMENT || facts.placed)
        .collect();
    if !GUEST_ARTIFACTS.contains(&name) {
        return never(format!("its receipts list no artifact `{name}`"), &carried);
    }
    let tokens: Vec<String> = pointer.tokens().collect();
    match name {
        PLACEMENT => {
            if !facts.placed {
                return never(
                    "it has a fixed `node:`, and only a guest placed by `nodes:` has a `placement`",
                    &carried,
                );
            }
            match tokens.as_slice() {
                [] => None,
                [t] if t == "node" || t == "reason" => None,
                _ => never(
                    format!(
                        "`placement` holds `node` and `reason`, which `{pointer}` does not read"
                    ),
                    &["/node", "/reason"],
                ),
            }
        }
        MAC_ADDRESSES => match tokens.as_slice() {
            [] => None,
            [slot] => nic(facts, slot),
            _ => never(
                format!("each MAC is text: the pointer ends at the NIC (`/net0`), not `{pointer}`"),
                &nics_as_pointers(facts),
            ),
        },
        _ => {
            if let Some(why) = facts.never_runs.as_ref().or(facts.no_addresses.as_ref()) {
                return never(
                    format!(
                        "only a running guest that can tell them has `ip-addresses`, and {why}"
                    ),
                    &carried
                        .iter()
                        .copied()
                        .filter(|n| *n != IP_ADDRESSES)
                        .collect::<Vec<_>>(),
                );
            }
            let (first, rest) = tokens.split_first()?;
            // Interfaces no `netN` MAC matches are keyed by their name (`lo`): not judged.
            if is_nic_slot(first)
                && let Some(found) = nic(facts, first)
            {
                return Some(found);
            }
            interface_field(rest, pointer)
        }
    }
}

fn nics_as_pointers(facts: &GuestFacts) -> Vec<&str> {
    facts
        .nics
        .as_ref()
        .map(|n| n.iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Whether NIC `slot` is one the guest has.
fn nic(facts: &GuestFacts, slot: &str) -> Option<Unreachable> {
    let nics = facts.nics.as_ref()?;
    if nics.iter().any(|n| n == slot) {
        return None;
    }
    let has = if nics.is_empty() {
        "it declares no network device".to_owned()
    } else {
        format!("it has {}", nics.join(", "))
    };
    never(
        format!("it has no NIC `{slot}`: {has}"),
        &nics.iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

/// What follows the interface in an `ip-addresses` pointer.
fn interface_field(rest: &[String], pointer: &Pointer) -> Option<Unreachable> {
    const FIELDS: [&str; 4] = ["name", "mac", "ipv4", "ipv6"];
    let (field, tail) = rest.split_first()?;
    if !FIELDS.contains(&field.as_str()) {
        return never(
            format!("an interface of `ip-addresses` holds name, mac, ipv4 and ipv6, not `{field}`"),
            &FIELDS,
        );
    }
    let list = field.starts_with("ip");
    match tail {
        [] => None,
        [index] if list && array_index(index).is_some() => None,
        _ => never(
            format!(
                "`{pointer}` reads past the {}",
                if list {
                    "address (`/net0/ipv4/0` is one)"
                } else {
                    "text it names"
                }
            ),
            &["/net0/ipv4/0", "/net0/ipv6/0", "/net0/mac", "/net0/name"],
        ),
    }
}

/// A downloaded file's artifact `name` at `pointer`.
pub(crate) fn file(spec: &ArtifactSpec, name: &str, pointer: &Pointer) -> Option<Unreachable> {
    if name != FILE_ARTIFACT {
        return never(
            format!("its receipts list no artifact `{name}`"),
            &[FILE_ARTIFACT],
        );
    }
    let tokens: Vec<String> = pointer.tokens().collect();
    let nodes = spec.placed_nodes();
    let fields: &[&str] = if spec.checksum.is_some() {
        &["volid", "nodes", "checksum"]
    } else {
        &["volid", "nodes"]
    };
    match tokens.as_slice() {
        [] => None,
        [t, ..] if !fields.contains(&t.as_str()) => never(
            format!("`file` holds {}, not `{t}`", fields.join(", ")),
            fields,
        ),
        [_] => None,
        [t, rest @ ..] if t == "volid" => never(
            format!(
                "the volume id is text: `{pointer}` reads past it ({})",
                rest.join("/")
            ),
            &["/volid"],
        ),
        [t, field] if t == "checksum" => {
            (field != "algorithm" && field != "value").then(|| Unreachable {
                why: format!("the checksum holds algorithm and value, not `{field}`"),
                accepted: vec!["algorithm".to_owned(), "value".to_owned()],
            })
        }
        [t, node, rest @ ..] if t == "nodes" => {
            if !nodes.iter().any(|n| n == node) {
                return never(
                    format!(
                        "the file is not placed on node `{node}`: it is on {}",
                        nodes.join(", ")
                    ),
                    &nodes.iter().map(String::as_str).collect::<Vec<_>>(),
                );
            }
            match rest {
                [] => None,
                [f] if ["volid", "size", "format"].contains(&f.as_str()) => None,
                _ => never(
                    format!(
                        "a node's entry holds volid, size and format, which `{pointer}` does not read"
                    ),
                    &["volid", "size", "format"],
                ),
            }
        }
        _ => never(
            format!("`{pointer}` reads past the `file` artifact"),
            fields,
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn facts(nics: &[&str]) -> GuestFacts {
        GuestFacts {
            nics: Some(nics.iter().map(|s| (*s).to_owned()).collect()),
            never_runs: None,
            no_addresses: None,
            placed: false,
        }
    }

    fn reach(f: &GuestFacts, name: &str, pointer: &str) -> Option<Unreachable> {
        guest(f, name, &Pointer::parse(pointer).unwrap())
    }

    #[test]
    fn what_a_running_guest_can_tell_is_reachable() {
        let f = facts(&["net0", "net1"]);
        for (name, pointer) in [
            ("mac-addresses", ""),
            ("mac-addresses", "/net1"),
            ("ip-addresses", "/net0/ipv4/0"),
            ("ip-addresses", "/net1/ipv6/2"),
            ("ip-addresses", "/net0/mac"),
            ("ip-addresses", "/lo/ipv4/0"),
            ("ip-addresses", "/eth0"),
        ] {
            assert_eq!(reach(&f, name, pointer), None, "{name} {pointer}");
        }
    }

    #[test]
    fn what_can_never_be_there_says_why_and_what_is() {
        let f = facts(&["net0"]);
        let typo = reach(&f, "ip-adresses", "/net0/ipv4/0").unwrap();
        assert!(
            typo.accepted.contains(&"ip-addresses".to_owned()),
            "{typo:?}"
        );
        assert!(
            !typo.accepted.contains(&"placement".to_owned()),
            "not placed"
        );
        let nic = reach(&f, "ip-addresses", "/net5/ipv4/0").unwrap();
        assert_eq!(nic.accepted, ["net0"]);
        assert!(nic.why.contains("net5"), "{nic:?}");
        for (name, pointer) in [
            ("mac-addresses", "/net0/x"),
            ("ip-addresses", "/net0/ipv5"),
            ("ip-addresses", "/net0/ipv4/first"),
            ("ip-addresses", "/net0/name/0"),
            ("placement", "/node"),
        ] {
            assert!(reach(&f, name, pointer).is_some(), "{name} {pointer}");
        }
        let placed = GuestFacts {
            placed: true,
            ..facts(&["net0"])
        };
        assert_eq!(reach(&placed, "placement", "/node"), None);
        assert!(reach(&placed, "placement", "/nodes").is_some());
        let off = GuestFacts {
            no_addresses: Some("its QEMU guest agent is off".to_owned()),
            ..facts(&["net0"])
        };
        let why = reach(&off, "ip-addresses", "/net0/ipv4/0").unwrap();
        assert!(why.why.contains("agent"), "{why:?}");
        assert_eq!(reach(&off, "mac-addresses", "/net0"), None);
    }

    #[test]
    fn nics_a_clone_inherits_are_not_judged() {
        let f = GuestFacts {
            nics: None,
            ..facts(&[])
        };
        assert_eq!(reach(&f, "ip-addresses", "/net3/ipv4/0"), None);
        assert!(reach(&facts(&[]), "mac-addresses", "/net0").is_some());
    }

    #[test]
    fn an_agent_value_is_read_as_qemu_server_reads_it() {
        for (value, enabled) in [
            ("1", Some(true)),
            ("0", Some(false)),
            ("enabled=0,fstrim_cloned_disks=1", Some(false)),
            ("fstrim_cloned_disks=1,enabled=1", Some(true)),
            ("1,type=virtio", Some(true)),
            ("type=virtio", Some(false)),
            ("maybe", None),
        ] {
            assert_eq!(agent_value_enabled(value), enabled, "{value}");
        }
    }
}
