//! The names and parameter formats pve-firewall `src/PVE/Firewall.pm` checks: its name
//! patterns, `parse_address_list`, `parse_port_name_number_or_range`,
//! `pve_fw_verify_protocol_spec`, the ICMP type names, and the formats registered on them
//! (`pve-fw-addr-spec`, `pve-fw-sport-spec`, `pve-fw-dport-spec`, `pve-fw-protocol-spec`,
//! `pve-fw-icmp-type-spec`, `IPorCIDR`, `IPorCIDRorAlias`, and pve-common's `pve-iface`).

use super::addr;
use super::tables::{ICMP_TYPES, ICMPV6_TYPES, PROTOCOLS, SERVICES};

/// `$security_group_name_pattern`, `$ipset_name_pattern` and `$ip_alias_pattern` (all the
/// same), matched whole.
pub(crate) fn is_name(v: &str) -> bool {
    let mut chars = v.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && v.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// An alias reference: `(dc/|guest/)?<alias>`, its scope and name.
pub(crate) fn alias_ref(v: &str) -> Option<(&str, &str)> {
    let (scope, name) = match v.split_once('/') {
        Some((s @ ("dc" | "guest"), n)) => (&v[..s.len() + 1], n),
        Some(_) => return None,
        None => ("", v),
    };
    is_name(name).then_some((scope, name))
}

pub(crate) fn words(list: &'static str) -> impl Iterator<Item = &'static str> {
    list.split_whitespace()
}

pub(crate) fn is_icmp_name(v: &str) -> bool {
    words(ICMP_TYPES).any(|t| t == v) || words(ICMPV6_TYPES).any(|t| t == v)
}

/// `pve_fw_verify_protocol_spec`.
pub(crate) fn verify_proto(proto: &str) -> Result<(), String> {
    let known = proto == "icmpv6"
        || words(PROTOCOLS).any(|p| {
            p.split_once(':')
                .is_some_and(|(name, num)| name == proto || num == proto)
        });
    if proto.is_empty() || known {
        Ok(())
    } else {
        Err(format!("unknown protocol '{proto}'"))
    }
}

/// Perl's `split /,/` (trailing empty fields dropped) and the check that nothing was lost.
fn comma_list(s: &str) -> Result<Vec<&str>, String> {
    let mut items: Vec<&str> = s.split(',').collect();
    while items.last().is_some_and(|i| i.is_empty()) {
        items.pop();
    }
    if items.join(",") != s {
        return Err("extraneous commas in list".into());
    }
    Ok(items)
}

/// `parse_port_name_number_or_range`; `icmp` lets ICMP type names pass (a `dport` of an ICMP
/// protocol).
pub(crate) fn verify_ports(s: &str, icmp: bool) -> Result<(), String> {
    let port = |p: &str| -> Result<u64, String> {
        match p.parse::<u64>() {
            Ok(n) if n <= 65535 => Ok(n),
            _ => Err(format!("invalid port '{p}'")),
        }
    };
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let (mut count, mut icmp_port) = (0, false);
    for item in comma_list(s)? {
        match item.split_once(':') {
            Some((a, b)) if digits(a) && digits(b) => {
                count += 2;
                let (a, b) = (port(a)?, port(b)?);
                if a > b {
                    return Err(format!(
                        "backwards range '{a}:{b}' not allowed, did you mean '{b}:{a}'?"
                    ));
                }
            }
            _ if digits(item) => {
                count += 1;
                port(item)?;
            }
            _ if icmp && is_icmp_name(item) => icmp_port = true,
            _ if words(SERVICES).any(|n| n == item) => {}
            _ => return Err(format!("invalid port '{item}'")),
        }
    }
    if icmp_port && count > 0 {
        return Err("ICMP ports not allowed in port range".into());
    }
    if count > 15 {
        return Err("too many entries in port list (> 15 numbers)".into());
    }
    Ok(())
}

/// `parse_address_list`: the list's IP version (none for an IP set or alias reference).
pub(crate) fn address_list(s: &str) -> Result<Option<u8>, String> {
    if s.len() > 1 && s.starts_with('+') && !s.contains(char::is_whitespace) {
        if s.len() > 65 {
            return Err("ipset name too long".into());
        }
        return Ok(None);
    }
    if alias_ref(s).is_some() {
        if s.len() > 64 {
            return Err("alias name too long".into());
        }
        return Ok(None);
    }
    let items = comma_list(s)?;
    let (mut version, mut range) = (None, false);
    for item in &items {
        let v = addr::net_ip(item).map_err(|e| format!("invalid IP address: {e}"))?;
        range |= item.contains('-');
        if version.is_some_and(|old| old != v) {
            return Err(format!(
                "detected mixed ipv4/ipv6 addresses in address list '{s}'"
            ));
        }
        version = Some(v);
    }
    if range && items.len() > 1 {
        return Err("you can't use a range in a list".into());
    }
    Ok(version)
}

/// The formats PVE registers for the firewall's parameters; `None` for another format.
pub(crate) fn check_format(format: &str, v: &str) -> Option<Result<(), String>> {
    Some(match format {
        "pve-fw-addr-spec" => address_list(v).map(|_| ()),
        "pve-fw-sport-spec" => verify_ports(v, false),
        "pve-fw-dport-spec" => verify_ports(v, true),
        "pve-fw-protocol-spec" => verify_proto(v),
        "pve-fw-icmp-type-spec" if v.is_empty() || is_icmp_name(v) => Ok(()),
        "pve-fw-icmp-type-spec" => Err(format!("invalid icmp-type value '{v}'")),
        "IPorCIDR" => addr::verify_ip_or_cidr(v),
        "IPorCIDRorAlias" if alias_ref(v).is_some() => Ok(()),
        "IPorCIDRorAlias" => addr::verify_ip_or_cidr(v),
        "pve-iface" => verify_iface(v),
        _ => return None,
    })
}

/// pve-common `pve_verify_iface`.
pub(crate) fn verify_iface(v: &str) -> Result<(), String> {
    let (name, tail) = match v.find([':', '.']) {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && (2..=21).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && tail.is_none_or(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(format!("invalid network interface name '{v}'"))
    }
}
