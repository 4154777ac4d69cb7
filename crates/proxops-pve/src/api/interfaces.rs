//! A running guest's network interfaces and addresses, as the guest itself reports them: a VM's
//! through its QEMU guest agent (`GET .../agent/network-get-interfaces`, qemu-server
//! `PVE/API2/Qemu/Agent.pm`), a container's from its network namespace (`GET
//! .../lxc/{vmid}/interfaces`, pve-container `PVE::LXC::get_interfaces`). Both come back as
//! [`GuestInterface`]s.

use reqwest::Method;
use serde::Serialize;
use serde_json::Value;

use crate::client::PveClient;
use crate::error::PveError;
use crate::params::{Params, seg};
use crate::types::{GuestRef, GuestType};

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum IpFamily {
    /// IPv4 (the agent's `ipv4`, `ip`'s `inet`).
    Ipv4,
    /// IPv6 (the agent's `ipv6`, `ip`'s `inet6`).
    Ipv6,
}

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GuestAddress {
    /// Its family.
    pub family: IpFamily,
    /// The address, as the guest prints it.
    pub address: String,
    /// The prefix length, when reported.
    pub prefix: Option<u8>,
}

/// One network interface inside a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GuestInterface {
    /// Its name in the guest (`lo`, `eth0`, `ens18`).
    pub name: String,
    /// Its MAC address in lower case, when reported (an agent may leave it out).
    pub mac: Option<String>,
    /// Its addresses, in the guest's order.
    pub addresses: Vec<GuestAddress>,
}

impl GuestAddress {
    /// An address of `family`.
    pub fn new(family: IpFamily, address: impl Into<String>, prefix: Option<u8>) -> GuestAddress {
        GuestAddress {
            family,
            address: address.into(),
            prefix,
        }
    }
}

impl GuestInterface {
    /// An interface (`mac` as given: the answers' is lower case).
    pub fn new(
        name: impl Into<String>,
        mac: Option<String>,
        addresses: Vec<GuestAddress>,
    ) -> GuestInterface {
        GuestInterface {
            name: name.into(),
            mac,
            addresses,
        }
    }
}

/// Reads one interface object of either answer; entries without a name are left out, and so
/// are addresses of an unknown family, so that one odd entry does not hide the rest.
fn interface(v: &Value) -> Option<GuestInterface> {
    let name = v.get("name")?.as_str()?.to_owned();
    let mac = v
        .get("hardware-address")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let addresses = v
        .get("ip-addresses")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|a| {
                    let family = match a.get("ip-address-type")?.as_str()? {
                        "ipv4" | "inet" => IpFamily::Ipv4,
                        "ipv6" | "inet6" => IpFamily::Ipv6,
                        _ => return None,
                    };
                    let prefix = match a.get("prefix") {
                        Some(Value::Number(n)) => n.as_u64(),
                        Some(Value::String(s)) => s.parse().ok(),
                        _ => None,
                    }
                    .and_then(|p| u8::try_from(p).ok());
                    Some(GuestAddress {
                        family,
                        address: a.get("ip-address")?.as_str()?.to_owned(),
                        prefix,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(GuestInterface {
        name,
        mac,
        addresses,
    })
}

fn interfaces(method: &str, path: &str, list: &Value) -> Result<Vec<GuestInterface>, PveError> {
    match list {
        Value::Array(items) => Ok(items.iter().filter_map(interface).collect()),
        other => Err(PveError::Decode {
            method: method.into(),
            path: path.into(),
            detail: format!("expected a list of interfaces, got {other}"),
        }),
    }
}

impl PveClient {
    /// `GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces`: the interfaces the VM's
    /// guest agent reports. PVE answers 500 while the agent is not configured (`No QEMU guest
    /// agent configured`), the VM is not running, or the agent does not answer yet (`QEMU
    /// guest agent is not running`); needs `VM.Monitor` (PVE 8) or `VM.GuestAgent.Audit`
    /// (PVE 9).
    pub async fn agent_interfaces(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Vec<GuestInterface>, PveError> {
        let path = format!(
            "/nodes/{}/qemu/{vmid}/agent/network-get-interfaces",
            seg(node)
        );
        let data = self
            .call_json(
                Method::GET,
                "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
                &path,
                &Params::new(),
            )
            .await?;
        interfaces("GET", &path, data.get("result").unwrap_or(&Value::Null))
    }

    /// `GET /nodes/{node}/lxc/{vmid}/interfaces`: the container's interfaces, `None` when PVE
    /// finds no running container of that id (it answers `null` then); needs `VM.Audit`.
    pub async fn lxc_interfaces(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Option<Vec<GuestInterface>>, PveError> {
        let path = format!("/nodes/{}/lxc/{vmid}/interfaces", seg(node));
        let data = self
            .call_json(
                Method::GET,
                "/nodes/{node}/lxc/{vmid}/interfaces",
                &path,
                &Params::new(),
            )
            .await?;
        match data {
            Value::Null => Ok(None),
            list => interfaces("GET", &path, &list).map(Some),
        }
    }

    /// The interfaces of a guest of either type ([`PveClient::agent_interfaces`],
    /// [`PveClient::lxc_interfaces`]); `None` when there is nothing to list yet.
    pub async fn guest_interfaces(
        &self,
        g: &GuestRef,
    ) -> Result<Option<Vec<GuestInterface>>, PveError> {
        match g.kind {
            GuestType::Qemu => self.agent_interfaces(&g.node, g.vmid).await.map(Some),
            GuestType::Lxc => self.lxc_interfaces(&g.node, g.vmid).await,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn both_answers_read_alike_and_odd_entries_are_left_out() {
        let agent = json!([
            {"name": "lo", "hardware-address": "00:00:00:00:00:00",
             "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}]},
            {"name": "eth0", "hardware-address": "BC:24:11:00:00:01",
             "ip-addresses": [{"ip-address": "fe80::1", "ip-address-type": "ipv6", "prefix": 64},
                              {"ip-address": "x", "ip-address-type": "ipx"}]},
            {"name": "Loopback Pseudo-Interface 1"},
            {"hardware-address": "no name"}
        ]);
        let lxc = json!([
            {"name": "eth0", "hwaddr": "bc:24:11:00:00:01", "hardware-address": "bc:24:11:00:00:01",
             "inet": "10.0.0.1/8",
             "ip-addresses": [{"ip-address-type": "inet", "ip-address": "10.0.0.1", "prefix": "8"}]}
        ]);
        let a = interfaces("GET", "/p", &agent).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[1].mac.as_deref(), Some("bc:24:11:00:00:01"));
        assert_eq!(a[1].addresses.len(), 1);
        assert_eq!(a[1].addresses[0].family, IpFamily::Ipv6);
        assert_eq!((a[2].mac.as_deref(), a[2].addresses.len()), (None, 0));
        let l = interfaces("GET", "/p", &lxc).unwrap();
        assert_eq!(
            l[0].addresses,
            [GuestAddress {
                family: IpFamily::Ipv4,
                address: "10.0.0.1".into(),
                prefix: Some(8)
            }]
        );
        assert!(interfaces("GET", "/p", &json!({"error": 1})).is_err());
    }
}
