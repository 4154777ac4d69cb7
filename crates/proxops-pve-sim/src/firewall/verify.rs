//! pve-firewall `src/PVE/Firewall.pm` `verify_rule` (with `$apply_macro`), the checks it
//! calls (`parse_address_list`, `parse_port_name_number_or_range`,
//! `pve_fw_verify_protocol_spec`, the ICMP type names) and the parameter formats registered on
//! them (`pve-fw-addr-spec`, `pve-fw-sport-spec`, `pve-fw-dport-spec`, `pve-fw-protocol-spec`,
//! `pve-fw-icmp-type-spec`, `IPorCIDR`, `IPorCIDRorAlias`, and pve-common's `pve-iface`).

use super::tables::{ICMP_TYPES, ICMPV6_TYPES, MACROS, MACROS_V6, Macro, PROTOCOLS, SERVICES};
use super::{FwConf, LoadedRule, Rule, addr};
use crate::error::ApiError;

/// `verify_rule`'s `$rule_env`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Env {
    Cluster,
    Group,
    Vm,
    Ct,
}

impl Env {
    /// `$rule_env_direction_lookup`.
    fn types(self) -> &'static [&'static str] {
        match self {
            Env::Cluster => &["in", "out", "forward", "group"],
            Env::Group => &["in", "out", "forward"],
            Env::Vm | Env::Ct => &["in", "out", "group"],
        }
    }

    fn name(self) -> &'static str {
        match self {
            Env::Cluster => "cluster",
            Env::Group => "group",
            Env::Vm => "vm",
            Env::Ct => "ct",
        }
    }
}

/// The configs a rule's names are looked up in: `verify_rule`'s `$cluster_conf` and
/// `$fw_conf`.
pub(crate) struct Scope<'a> {
    pub cluster: Option<&'a FwConf>,
    pub local: Option<&'a FwConf>,
}

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

/// Perl's truth of a string.
fn truthy(v: Option<&String>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0")
}

fn words(list: &'static str) -> impl Iterator<Item = &'static str> {
    list.split_whitespace()
}

fn is_icmp_name(v: &str) -> bool {
    words(ICMP_TYPES).any(|t| t == v) || words(ICMPV6_TYPES).any(|t| t == v)
}

/// `pve_fw_verify_protocol_spec`.
fn verify_proto(proto: &str) -> Result<(), String> {
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
fn verify_ports(s: &str, icmp: bool) -> Result<(), String> {
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
fn address_list(s: &str) -> Result<Option<u8>, String> {
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
fn verify_iface(v: &str) -> Result<(), String> {
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

/// The macro's canonical name (`$pve_fw_preferred_macro_names`).
fn macro_name(name: &str) -> Option<&'static str> {
    let lc = name.to_lowercase();
    MACROS
        .iter()
        .chain(MACROS_V6)
        .map(|(n, _)| *n)
        .find(|n| n.to_lowercase() == lc)
}

/// `$apply_macro` as `verify_rule` runs it: a parameter the macro defines otherwise is
/// refused.
fn apply_macro(name: &str, rule: &Rule, ipversion: Option<u8>) -> Result<(), (String, String)> {
    let find = |table: &'static [Macro]| table.iter().find(|(n, _)| *n == name);
    let v6 = find(MACROS_V6);
    let (templates, required) = match (find(MACROS), v6) {
        (Some(_), Some(m)) if ipversion == Some(6) => (m.1, None),
        (Some(m), _) => (m.1, None),
        (None, Some(m)) => (m.1, Some(6)),
        (None, None) => return Ok(()),
    };
    if let (Some(v), Some(r)) = (ipversion, required)
        && v != r
    {
        return Ok(());
    }
    for t in templates {
        for pair in t.split_whitespace() {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            if let Some(given) = rule.get(k)
                && given != v
            {
                return Err((
                    k.to_owned(),
                    format!("parameter '{k}' already define in macro (value = '{v}')"),
                ));
            }
        }
    }
    Ok(())
}

const PORT_PROTOS: &[&str] = &[
    "udp", "17", "udplite", "136", "tcp", "6", "dccp", "33", "sctp", "132",
];

/// What `verify_rule` found: the errors in the order it adds them, the IP version, or the
/// `die` it does not catch (mixed versions through an alias).
struct Found {
    errors: Vec<(String, String)>,
    ipversion: Option<u8>,
}

/// `verify_rule`: fills in the canonical macro name and collects the errors.
fn check(rule: &mut Rule, env: Env, scope: &Scope) -> Result<Found, String> {
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut err = |p: &str, m: String| errors.push((p.to_owned(), m.trim_end().to_owned()));
    let mut ipversion: Option<u8> = None;
    let set_version = |cur: &mut Option<u8>, v: Option<u8>| -> Result<(), String> {
        if let Some(v) = v {
            if cur.is_some_and(|c| c != v) {
                return Err("detected mixed ipv4/ipv6 addresses in rule".into());
            }
            *cur = Some(v);
        }
        Ok(())
    };
    let ty = rule.get("type").cloned().filter(|t| truthy(Some(t)));
    let action = rule.get("action").cloned().filter(|a| truthy(Some(a)));
    if ty.is_none() {
        err("type", "missing property".into());
    }
    if action.is_none() {
        err("action", "missing property".into());
    }
    let action_s = action.clone().unwrap_or_default();
    if let Some(ty) = &ty {
        if !env.types().contains(&ty.as_str()) {
            err(
                "type",
                format!("invalid rule type '{ty}' for rule_env '{}'", env.name()),
            );
        }
        match ty.as_str() {
            "in" | "out" | "forward" => {
                if ty == "forward" && action_s == "REJECT" {
                    err(
                        "action",
                        "cannot define REJECT rules on forward chain".into(),
                    );
                }
                if action.is_some() && !["ACCEPT", "DROP", "REJECT"].contains(&action_s.as_str()) {
                    err("action", format!("unknown action '{action_s}'"));
                }
            }
            "group" => {
                if env == Env::Group {
                    err("type", "security groups not allowed".into());
                }
                if action.is_some() && !is_name(&action_s) {
                    err("action", "invalid characters in security group name".into());
                }
            }
            _ => err("type", format!("unknown rule type '{ty}'")),
        }
    }
    if let Some(iface) = rule.get("iface").filter(|v| truthy(Some(v))) {
        if env == Env::Group {
            err("type", "parameter -i not allowed for this rule type".into());
        }
        if let Err(e) = verify_iface(iface) {
            err("iface", e);
        }
        let net = iface
            .strip_prefix("net")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if matches!(env, Env::Vm | Env::Ct) && !net {
            err(
                "iface",
                r"value does not match the regex pattern 'net\d+'".into(),
            );
        }
    }
    if let Some(m) = rule.get("macro").filter(|v| truthy(Some(v))).cloned() {
        match macro_name(&m) {
            Some(name) => {
                rule.insert("macro".into(), name.into());
            }
            None => err("macro", format!("unknown macro '{m}'")),
        }
    }
    let proto = rule.get("proto").cloned().unwrap_or_default();
    let is_icmp = matches!(proto.as_str(), "icmp" | "icmpv6" | "ipv6-icmp");
    if truthy(rule.get("proto")) {
        if let Err(e) = verify_proto(&proto) {
            err("proto", e);
        }
        match proto.as_str() {
            "icmp" => ipversion = Some(4),
            "icmpv6" | "ipv6-icmp" => ipversion = Some(6),
            _ => {}
        }
    }
    if let Some(dport) = rule.get("dport").filter(|v| truthy(Some(v))) {
        if let Err(e) = verify_ports(dport, is_icmp) {
            err("dport", e);
        }
        if proto.is_empty() {
            err(
                "proto",
                "missing property - 'dport' requires this property".into(),
            );
        }
        if !PORT_PROTOS.contains(&proto.as_str()) && !is_icmp {
            err(
                "dport",
                format!("protocol '{proto}' does not support ports"),
            );
        }
    }
    if let Some(icmp_type) = rule.get("icmp-type").filter(|v| truthy(Some(v))) {
        if !is_icmp {
            err(
                "proto",
                "missing property - 'icmp-type' requires this property".into(),
            );
        }
        if truthy(rule.get("dport")) {
            err(
                "icmp-type",
                "'icmp-type' cannot be specified together with 'dport'".into(),
            );
        }
        let known = |list| words(list).any(|t| t == icmp_type);
        if proto == "icmp" && !known(ICMP_TYPES) {
            err(
                "icmp-type",
                format!("invalid icmp-type '{icmp_type}' for proto 'icmp'"),
            );
        } else if (proto == "icmpv6" || proto == "ipv6-icmp") && !known(ICMPV6_TYPES) {
            err(
                "icmp-type",
                format!("invalid icmp-type '{icmp_type}' for proto '{proto}'"),
            );
        }
    }
    if let Some(sport) = rule.get("sport").filter(|v| truthy(Some(v))) {
        if let Err(e) = verify_ports(sport, false) {
            err("sport", e);
        }
        if proto.is_empty() {
            err(
                "proto",
                "missing property - 'sport' requires this property".into(),
            );
        }
        if !PORT_PROTOS.contains(&proto.as_str()) {
            err(
                "sport",
                format!("protocol '{proto}' does not support ports"),
            );
        }
    }
    for key in ["source", "dest"] {
        let Some(value) = rule.get(key).filter(|v| truthy(Some(v))) else {
            continue;
        };
        if let Err(e) = address_list(value).and_then(|v| set_version(&mut ipversion, v)) {
            err(key, e);
        }
        // `$check_ipset_or_alias_property`.
        if let Some(set) = value.strip_prefix('+') {
            let name = ["guest/", "dc/", "sdn/"]
                .iter()
                .find_map(|p| set.strip_prefix(p))
                .unwrap_or(set);
            if !is_name(name) {
                err(key, format!("invalid ipset name '{value}'"));
            } else if ![scope.cluster, scope.local]
                .iter()
                .flatten()
                .any(|c| c.ipsets.contains_key(name))
            {
                err(key, format!("no such ipset '{name}'"));
            }
        } else if let Some((pfx, name)) = alias_ref(value) {
            let lc = name.to_lowercase();
            fn found<'c>(c: Option<&'c FwConf>, lc: &str) -> Option<&'c super::Alias> {
                c.and_then(|c| c.aliases.get(lc))
            }
            if found(scope.cluster, &lc).is_none() && found(scope.local, &lc).is_none() {
                err(key, format!("no such alias '{value}'"));
            }
            let local = found(scope.local, &lc).filter(|_| pfx != "dc/");
            let e = local.or_else(|| found(scope.cluster, &lc).filter(|_| pfx != "guest/"));
            let v = e.and_then(|a| addr::parse_ip_or_cidr(&a.cidr).ok().map(|(_, v)| v));
            set_version(&mut ipversion, v)?;
        }
    }
    if let Some(v) = ipversion {
        rule.insert("ipversion".into(), v.to_string());
    }
    if errors.is_empty()
        && let Some(m) = rule.get("macro").filter(|v| truthy(Some(v)))
        && let Err((k, msg)) = apply_macro(m, rule, ipversion)
    {
        errors.push((k, msg));
    }
    Ok(Found { errors, ipversion })
}

/// `verify_rule` as the API calls it: the first error refused as a parameter error (400), the
/// uncaught `die` as a failure (500). Leaves the canonical macro name in the rule; the
/// `ipversion` it works out is not stored (the file has no place for it).
pub(crate) fn verify_rule(rule: &mut Rule, env: Env, scope: &Scope) -> Result<(), ApiError> {
    let found = check(rule, env, scope).map_err(ApiError::fail)?;
    rule.remove("ipversion");
    match found.errors.into_iter().next() {
        Some((param, msg)) => Err(ApiError::param(&param, msg)),
        None => Ok(()),
    }
}

/// A stored rule as `parse_fw_rule` loads it: verified without raising; `None` where the
/// parser drops the line.
pub(crate) fn load_rule(rule: &Rule, env: Env, scope: &Scope) -> Option<LoadedRule> {
    let mut rule = rule.clone();
    let found = check(&mut rule, env, scope).ok()?;
    let mut errors = std::collections::BTreeMap::new();
    for (k, m) in found.errors {
        errors.entry(k).or_insert(m);
    }
    if let Some(v) = found.ipversion {
        rule.insert("ipversion".into(), v.to_string());
    }
    Some(LoadedRule { rule, errors })
}
