//! A running guest's network as seen from inside it: the QEMU guest agent's
//! `network-get-interfaces` ([`super::agent::interfaces`]) and a container's `GET
//! .../interfaces` ([`lxc`]). Both list `lo`, then one interface per `netN` in index order with
//! its MAC and addresses:
//!
//! - static ones from the config (a VM's `ipconfigN` `ip=`/`ip6=`, a container's `netN`
//!   `ip=`/`ip6=`), at once;
//! - a DHCP-like IPv4 address (`ip=dhcp`; for a VM also no `ipconfigN` or no `ip=`, the guest
//!   OS's default) and a SLAAC-like IPv6 one (`ip6=dhcp` or `auto`) once the guest has run for
//!   [`crate::TaskDurations::agent_start`], both derived from the MAC so that a guest keeps
//!   its addresses across runs and restarts;
//! - the EUI-64 link-local IPv6 address of every NIC.

use serde_json::{Map, Value, json};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Ctx, check_node};
use crate::error::ApiError;
use crate::state::{Guest, GuestType};

/// One address: IPv4 or not, the address, its prefix length.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Addr {
    pub v4: bool,
    pub ip: String,
    pub prefix: u8,
}

/// One interface inside the guest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Nic {
    pub name: String,
    /// Lower case, as Linux prints it.
    pub mac: String,
    pub addrs: Vec<Addr>,
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next().filter(|p| p.len() == 2)?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// The address leased to `mac`: `10.<b3>.<b4>.<b5>` in one flat `10.0.0.0/8`, so the low 24
/// bits of each MAC (the part PVE draws at random) give each guest its own host; the network
/// and broadcast addresses, which are no host's, become their neighbours.
fn dhcp_v4(mac: [u8; 6]) -> Addr {
    let ip = match (mac[3], mac[4], mac[5]) {
        (0, 0, 0) => Ipv4Addr::new(10, 0, 0, 1),
        (255, 255, 255) => Ipv4Addr::new(10, 255, 255, 254),
        (a, b, c) => Ipv4Addr::new(10, a, b, c),
    };
    Addr {
        v4: true,
        ip: ip.to_string(),
        prefix: 8,
    }
}

/// `prefix` + the modified EUI-64 interface identifier of `mac` (RFC 4291 appendix A).
fn eui64(prefix: u16, mac: [u8; 6]) -> Addr {
    let w = |a: u8, b: u8| (u16::from(a) << 8) | u16::from(b);
    let ip = Ipv6Addr::new(
        prefix,
        0,
        0,
        0,
        w(mac[0] ^ 0x02, mac[1]),
        w(mac[2], 0xff),
        w(0xfe, mac[3]),
        w(mac[4], mac[5]),
    );
    Addr {
        v4: false,
        ip: ip.to_string(),
        prefix: 64,
    }
}

/// A static `a.b.c.d/p` or `x::y/p` of the family asked for.
fn cidr(text: &str, v4: bool) -> Option<Addr> {
    let (ip, prefix) = text.split_once('/')?;
    let ok = if v4 {
        ip.parse::<Ipv4Addr>().is_ok()
    } else {
        ip.parse::<Ipv6Addr>().is_ok()
    };
    Some(Addr {
        v4,
        ip: ip.to_owned(),
        prefix: prefix.parse().ok().filter(|_| ok)?,
    })
}

/// `key=value` of a property string.
fn prop<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .filter_map(|p| p.split_once('='))
        .find_map(|(k, v)| (k == key).then_some(v))
}

/// The interfaces of `g`; `up`: it has run long enough for DHCP and SLAAC.
pub(crate) fn nics(g: &Guest, up: bool) -> Vec<Nic> {
    let mut out = vec![Nic {
        name: "lo".into(),
        mac: "00:00:00:00:00:00".into(),
        addrs: vec![
            Addr {
                v4: true,
                ip: "127.0.0.1".into(),
                prefix: 8,
            },
            Addr {
                v4: false,
                ip: "::1".into(),
                prefix: 128,
            },
        ],
    }];
    let mut nets: Vec<(u32, &String)> = g
        .config
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("net")?.parse().ok()?, v)))
        .collect();
    nets.sort_unstable_by_key(|(i, _)| *i);
    for (i, value) in nets {
        // qemu-server writes `virtio=<MAC>,bridge=..`, pve-container `name=eth0,hwaddr=<MAC>`.
        let mac_text = match g.kind {
            GuestType::Qemu => value
                .split(',')
                .filter_map(|p| p.split_once('='))
                .map(|(_, v)| v)
                .find(|v| parse_mac(v).is_some()),
            GuestType::Lxc => prop(value, "hwaddr"),
        };
        let Some(mac) = mac_text.and_then(parse_mac) else {
            continue;
        };
        let (name, ip, ip6) = match g.kind {
            GuestType::Qemu => {
                let ipc = g.config.get(&format!("ipconfig{i}"));
                let ip = ipc.and_then(|c| prop(c, "ip")).unwrap_or("dhcp");
                (format!("eth{i}"), ip, ipc.and_then(|c| prop(c, "ip6")))
            }
            GuestType::Lxc => (
                prop(value, "name").map_or_else(|| format!("eth{i}"), str::to_owned),
                prop(value, "ip").unwrap_or("manual"),
                prop(value, "ip6"),
            ),
        };
        let mut addrs = Vec::new();
        match ip {
            "dhcp" if up => addrs.push(dhcp_v4(mac)),
            other => addrs.extend(cidr(other, true)),
        }
        match ip6 {
            Some("dhcp" | "auto") if up => addrs.push(eui64(0xfd00, mac)),
            Some(other) => addrs.extend(cidr(other, false)),
            None => {}
        }
        addrs.push(eui64(0xfe80, mac));
        out.push(Nic {
            name,
            mac: mac_text.unwrap_or_default().to_ascii_lowercase(),
            addrs,
        });
    }
    out
}

/// How long a guest runs before it is [`up`] (read before the state is locked).
pub(crate) fn agent_start(ctx: &Ctx) -> std::time::Duration {
    crate::server::lock(&ctx.shared.durations).agent_start
}

/// Whether `g` has run for `wait` ([`agent_start`]): its agent answers, its leases are taken.
pub(crate) fn up(g: &Guest, wait: std::time::Duration) -> bool {
    g.running() && g.uptime() >= wait
}

/// `network-get-interfaces` as the QEMU guest agent (qga `qmp_guest_network_get_interfaces`)
/// reports it: families `ipv4`/`ipv6`, and traffic counters (none simulated).
pub(crate) fn agent_json(nics: &[Nic]) -> Value {
    Value::Array(
        nics.iter()
            .map(|n| {
                let addrs: Vec<Value> = n
                    .addrs
                    .iter()
                    .map(|a| {
                        json!({
                            "ip-address": a.ip,
                            "ip-address-type": if a.v4 { "ipv4" } else { "ipv6" },
                            "prefix": a.prefix,
                        })
                    })
                    .collect();
                let stats: Map<String, Value> = [
                    "rx-bytes",
                    "rx-dropped",
                    "rx-errs",
                    "rx-packets",
                    "tx-bytes",
                    "tx-dropped",
                    "tx-errs",
                    "tx-packets",
                ]
                .iter()
                .map(|k| ((*k).to_owned(), json!(0)))
                .collect();
                json!({
                    "name": n.name,
                    "hardware-address": n.mac,
                    "ip-addresses": addrs,
                    "statistics": stats,
                })
            })
            .collect(),
    )
}

/// pve-container `PVE::LXC::get_interfaces`: `ip --json a` turned into `name`, `hwaddr` and
/// `hardware-address`, `ip-addresses` with `ip`'s families `inet`/`inet6`, and (deprecated)
/// `inet`/`inet6` holding the last address of each family as `address/prefix`.
pub(crate) fn lxc_json(nics: &[Nic]) -> Value {
    Value::Array(
        nics.iter()
            .map(|n| {
                let mut obj = Map::new();
                obj.insert("name".into(), json!(n.name));
                let mut list = Vec::new();
                for a in &n.addrs {
                    let family = if a.v4 { "inet" } else { "inet6" };
                    obj.insert(family.into(), json!(format!("{}/{}", a.ip, a.prefix)));
                    list.push(json!({
                        "ip-address-type": family,
                        "ip-address": a.ip,
                        "prefix": a.prefix,
                    }));
                }
                obj.insert("ip-addresses".into(), Value::Array(list));
                obj.insert("hardware-address".into(), json!(n.mac));
                obj.insert("hwaddr".into(), json!(n.mac));
                Value::Object(obj)
            })
            .collect(),
    )
}

/// `GET /nodes/{node}/lxc/{vmid}/interfaces` (pve-container `API2/LXC.pm` `ip`): `VM.Audit`,
/// then `PVE::LXC::get_interfaces`, which loads no config and returns nothing (`null`) when
/// `find_lxc_pid` finds no running container of that id.
pub(crate) fn lxc(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, vmid) = (ctx.node(), ctx.vmid());
    ctx.require(&format!("/vms/{vmid}"), "VM.Audit")?;
    let wait = agent_start(ctx);
    let st = ctx.state();
    check_node(&st, &node)?;
    let Some(g) = st
        .guests
        .get(&vmid)
        .filter(|g| g.kind == GuestType::Lxc && g.node == node && g.running())
    else {
        return Ok(Value::Null);
    };
    Ok(lxc_json(&nics(g, up(g, wait))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(kind: GuestType, conf: &[(&str, &str)]) -> Guest {
        Guest {
            vmid: 100,
            kind,
            status: "running".into(),
            config: conf
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Guest::default()
        }
    }

    fn ips(n: &Nic) -> Vec<String> {
        n.addrs
            .iter()
            .map(|a| format!("{}/{}", a.ip, a.prefix))
            .collect()
    }

    #[test]
    fn static_addresses_at_once_leases_from_the_mac_once_up() {
        let vm = guest(
            GuestType::Qemu,
            &[
                ("net0", "virtio=BC:24:11:0A:0B:0C,bridge=vmbr0"),
                ("net1", "virtio=BC:24:11:00:00:FF,bridge=vmbr0"),
                (
                    "ipconfig0",
                    "ip=192.168.1.5/24,gw=192.168.1.1,ip6=fd12::5/64",
                ),
                ("ipconfig1", "ip6=auto"),
            ],
        );
        let down = nics(&vm, false);
        assert_eq!(down[0].name, "lo");
        assert_eq!(
            ips(&down[1]),
            [
                "192.168.1.5/24",
                "fd12::5/64",
                "fe80::be24:11ff:fe0a:b0c/64"
            ]
        );
        assert_eq!(down[1].mac, "bc:24:11:0a:0b:0c");
        assert_eq!(ips(&down[2]), ["fe80::be24:11ff:fe00:ff/64"]);
        let up = nics(&vm, true);
        assert_eq!(up[1], down[1], "static addresses do not wait");
        assert_eq!(
            ips(&up[2]),
            [
                "10.0.0.255/8",
                "fd00::be24:11ff:fe00:ff/64",
                "fe80::be24:11ff:fe00:ff/64"
            ]
        );
    }

    #[test]
    fn a_container_names_its_interfaces_and_has_no_address_without_ip() {
        let ct = guest(
            GuestType::Lxc,
            &[
                (
                    "net0",
                    "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp",
                ),
                ("net1", "name=mgmt,bridge=vmbr0,hwaddr=BC:24:11:00:00:02"),
                ("net2", "name=eth2,bridge=vmbr0"),
            ],
        );
        let up = nics(&ct, true);
        assert_eq!(up.len(), 3, "a NIC without a MAC is not there yet");
        assert_eq!(up[1].name, "eth0");
        assert_eq!(ips(&up[1])[0], "10.0.0.1/8");
        assert_eq!(up[2].name, "mgmt");
        assert_eq!(ips(&up[2]), ["fe80::be24:11ff:fe00:2/64"]);
        let json = lxc_json(&up);
        assert_eq!(json[1]["inet"], "10.0.0.1/8");
        assert_eq!(json[1]["inet6"], "fe80::be24:11ff:fe00:1/64");
        assert_eq!(json[1]["ip-addresses"][0]["ip-address-type"], "inet");
        assert_eq!(json[1]["hwaddr"], "bc:24:11:00:00:01");
        assert!(json[2].get("inet").is_none());
    }
}
