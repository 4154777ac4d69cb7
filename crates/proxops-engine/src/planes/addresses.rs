//! The `ip-addresses` artifact (kind `IpAddresses`) of a running guest's receipt: what the guest
//! reports about its network, read through the QEMU guest agent for a VM and from the
//! container's network namespace for an LXC ([`PveClient::guest_interfaces`]).
//!
//! The payload maps each interface to its MAC and addresses, keyed by the guest's `netN` whose
//! MAC it carries (the receipt's `mac-addresses`), else by the interface's name (`lo`):
//!
//! ```yaml
//! net0: {name: eth0, mac: BC:24:11:0A:0B:0C, ipv4: [192.168.1.5], ipv6: [fd00::5, fe80::be24:11ff:fe0a:b0c]}
//! lo: {name: lo, mac: 00:00:00:00:00:00, ipv4: [127.0.0.1], ipv6: ['::1']}
//! ```
//!
//! so that `/net0/ipv4/0` (RFC 6901) is the first IPv4 address of the guest's first NIC.
//! Addresses keep the guest's order, but link-local IPv6 ones (`fe80::/10`) come after the
//! others, so that `/net0/ipv6/0` is a routable one when the guest has one.
//!
//! Reading never holds a cycle up: a guest that does not answer yet (its agent still starting)
//! gets no artifact this cycle, and a later cycle adds it to the current receipt.

// Re-exported: its public path was here; it moved so that the planner and the privileges read it
// without importing the planes.
pub use crate::guest_config::agent_enabled;
use proxops_pve::{GuestInterface, GuestRef, GuestType, IpFamily, PveClient};
use serde_json::{Map, Value, json};
use std::net::Ipv6Addr;

/// The artifact's name in a receipt.
pub const NAME: &str = proxops_model::kinds::reach::IP_ADDRESSES;
/// The artifact's kind.
pub const KIND: &str = "IpAddresses";

fn link_local(address: &str) -> bool {
    address
        .parse::<Ipv6Addr>()
        .is_ok_and(|a| a.segments()[0] & 0xffc0 == 0xfe80)
}

/// The payload for `interfaces`, with `macs` the receipt's `mac-addresses` (`netN` -> MAC).
pub fn payload(interfaces: &[GuestInterface], macs: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for nic in interfaces {
        let mac = nic.mac.as_deref().map(str::to_ascii_uppercase);
        let net = mac.as_deref().and_then(|m| {
            macs.iter()
                .find(|(k, v)| v.as_str() == Some(m) && !out.contains_key(k.as_str()))
                .map(|(k, _)| k.clone())
        });
        let key = match net {
            Some(k) => k,
            None if !out.contains_key(&nic.name) => nic.name.clone(),
            // Two interfaces of one name (or named like a `netN`): the first one is kept.
            None => continue,
        };
        let of = |family: IpFamily| {
            let mut list: Vec<&str> = Vec::new();
            for a in nic.addresses.iter().filter(|a| a.family == family) {
                if !list.contains(&a.address.as_str()) {
                    list.push(&a.address);
                }
            }
            list.sort_by_key(|a| link_local(a));
            list
        };
        let mut entry = json!({
            "name": nic.name,
            "ipv4": of(IpFamily::Ipv4),
            "ipv6": of(IpFamily::Ipv6),
        });
        if let Some(mac) = mac {
            entry["mac"] = json!(mac);
        }
        out.insert(key, entry);
    }
    Value::Object(out)
}

/// Whether every NIC of the guest (`netN` keys) has an address other than a link-local one:
/// until then a later cycle reads the guest again (a lease may still be coming).
pub fn complete(payload: &Value) -> bool {
    let Some(map) = payload.as_object() else {
        return false;
    };
    map.iter()
        .filter(|(k, _)| {
            k.strip_prefix("net")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .all(|(_, v)| {
            let has = |family: &str| {
                v.get(family)
                    .and_then(Value::as_array)
                    .is_some_and(|l| l.iter().filter_map(Value::as_str).any(|a| !link_local(a)))
            };
            has("ipv4") || has("ipv6")
        })
}

/// How many guests are asked at once ([`PveClient::guests_interfaces`]), as many as the
/// planner's config reads.
pub const CONCURRENCY: usize = 8;

/// Reads the guest's interfaces: the artifact, or `None` when it does not answer (yet).
pub async fn read(
    client: &PveClient,
    guest: &GuestRef,
    macs: &Map<String, Value>,
) -> Option<(String, String, Value)> {
    artifact(guest, client.guest_interfaces(guest).await, macs)
}

/// The artifact of one guest's answer (`None`: no answer, or nothing configured yet).
pub fn artifact(
    guest: &GuestRef,
    answer: Result<Option<Vec<GuestInterface>>, proxops_pve::PveError>,
    macs: &Map<String, Value>,
) -> Option<(String, String, Value)> {
    let nics = match answer {
        Ok(Some(nics)) => nics,
        Ok(None) => return None,
        Err(e) => {
            tracing::debug!(vmid = guest.vmid, error = %e, "no addresses from the guest this cycle");
            return None;
        }
    };
    // A VM whose agent lists nothing but `lo` has not configured its NICs yet.
    if guest.kind == GuestType::Qemu && nics.iter().all(|n| n.name == "lo") {
        return None;
    }
    Some((NAME.to_owned(), KIND.to_owned(), payload(&nics, macs)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proxops_pve::GuestAddress;

    fn nic(name: &str, mac: Option<&str>, addrs: &[(&str, bool)]) -> GuestInterface {
        let addresses = addrs
            .iter()
            .map(|(a, v4)| {
                let family = if *v4 { IpFamily::Ipv4 } else { IpFamily::Ipv6 };
                GuestAddress::new(family, *a, Some(24))
            })
            .collect();
        GuestInterface::new(name, mac.map(str::to_owned), addresses)
    }

    #[test]
    fn interfaces_are_keyed_by_the_net_whose_mac_they_carry_link_local_last() {
        let macs: Map<String, Value> = [
            ("net0".to_owned(), json!("BC:24:11:00:00:01")),
            ("net1".to_owned(), json!("BC:24:11:00:00:02")),
        ]
        .into_iter()
        .collect();
        let nics = [
            nic(
                "lo",
                Some("00:00:00:00:00:00"),
                &[("127.0.0.1", true), ("::1", false)],
            ),
            nic(
                "ens18",
                Some("bc:24:11:00:00:02"),
                &[("fe80::1", false), ("10.0.0.2", true), ("fd00::2", false)],
            ),
            nic("eth0", Some("bc:24:11:00:00:01"), &[("fe80::2", false)]),
            nic("eth0.50", Some("bc:24:11:00:00:01"), &[("10.50.0.1", true)]),
            nic("wg0", None, &[("10.9.0.1", true), ("10.9.0.1", true)]),
        ];
        let p = payload(&nics, &macs);
        assert_eq!(
            p,
            json!({
                "lo": {"name": "lo", "mac": "00:00:00:00:00:00", "ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
                "net1": {"name": "ens18", "mac": "BC:24:11:00:00:02", "ipv4": ["10.0.0.2"], "ipv6": ["fd00::2", "fe80::1"]},
                "net0": {"name": "eth0", "mac": "BC:24:11:00:00:01", "ipv4": [], "ipv6": ["fe80::2"]},
                "eth0.50": {"name": "eth0.50", "mac": "BC:24:11:00:00:01", "ipv4": ["10.50.0.1"], "ipv6": []},
                "wg0": {"name": "wg0", "ipv4": ["10.9.0.1"], "ipv6": []},
            })
        );
        assert_eq!(p.pointer("/net1/ipv4/0"), Some(&json!("10.0.0.2")));
        assert_eq!(p.pointer("/net1/ipv6/0"), Some(&json!("fd00::2")));
        assert!(!complete(&p), "net0 has only a link-local address");
        let mut done = p.clone();
        done["net0"]["ipv4"] = json!(["192.168.1.9"]);
        assert!(complete(&done));
        assert!(complete(&json!({"lo": {"ipv4": ["127.0.0.1"]}})));
        assert!(!complete(&json!([])));
    }

    #[test]
    fn the_agent_option_as_qemu_server_parses_it() {
        for (v, on) in [
            ("1", true),
            ("0", false),
            ("enabled=1,fstrim_cloned_disks=1", true),
            ("fstrim_cloned_disks=1", false),
            ("enabled=0", false),
            ("yes", true),
        ] {
            assert_eq!(agent_enabled(v), on, "{v}");
        }
    }
}
