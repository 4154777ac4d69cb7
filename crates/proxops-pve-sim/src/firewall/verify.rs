//! pve-firewall `src/PVE/Firewall.pm` `verify_rule` (with `$apply_macro`), on the checks of
//! [`super::formats`].

use super::formats::{address_list, verify_iface, verify_ports, verify_proto, words};
pub(crate) use super::formats::{alias_ref, check_format, is_name};
use super::tables::{ICMP_TYPES, ICMPV6_TYPES, MACROS, MACROS_V6, Macro};
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

/// Perl's truth of a string.
fn truthy(v: Option<&String>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0")
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
