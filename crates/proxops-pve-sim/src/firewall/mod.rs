//! The firewall configuration, as pve-firewall keeps it in `/etc/pve/firewall/cluster.fw`
//! (options, aliases, IP sets, rules and security groups) and `<vmid>.fw` (a guest's options,
//! aliases, IP sets and rules). [`Firewall`] holds what those files hold: every write stores
//! what `save_clusterfw_conf`/`save_vmfw_conf` would write and a later `load_*fw_conf` read back
//! ([`FwConf::saved`]), and every read annotates it as the loader does ([`LoadedRule`]: each
//! rule verified again with its `ipversion` and `errors`, a rule the parser rejects dropped; IP
//! set entries checked). [`verify`] is `verify_rule`, [`formats`] the names and parameter
//! formats, [`addr`] the address checks, [`tables`] the macros and name tables.

pub(crate) mod addr;
pub(crate) mod formats;
pub(crate) mod tables;
pub(crate) mod verify;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One rule: the keys of `$rule_properties` PVE stores (`type`, `action`, `macro`, `iface`,
/// `source`, `dest`, `proto`, `dport`, `sport`, `log`, `icmp-type`, `enable`, `comment`).
pub type Rule = BTreeMap<String, String>;

/// The firewall files of the cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Firewall {
    /// `cluster.fw` (its security groups included).
    #[serde(skip_serializing_if = "FwConf::is_empty")]
    pub cluster: FwConf,
    /// `<vmid>.fw` by VMID (qemu and lxc share the one file name).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guests: BTreeMap<u32, FwConf>,
}

impl Firewall {
    /// Whether no file exists.
    pub fn is_empty(&self) -> bool {
        self.cluster.is_empty() && self.guests.is_empty()
    }
}

/// One `.fw` file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FwConf {
    /// `[OPTIONS]`: option -> value as written.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// `[ALIASES]` by lower-cased name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, Alias>,
    /// `[IPSET <name>]` by (lower-cased) name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ipsets: BTreeMap<String, Ipset>,
    /// `[RULES]`, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// `[group <name>]` (cluster only) by (lower-cased) name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Group>,
}

/// An IP alias.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Alias {
    /// The name as given.
    pub name: String,
    /// Address or network.
    pub cidr: String,
    /// Comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// An IP set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Ipset {
    /// Comment of the `[IPSET]` line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Entries.
    pub entries: Vec<IpsetEntry>,
}

/// One IP set entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct IpsetEntry {
    /// Address, network or alias name.
    pub cidr: String,
    /// `!` entries (excluded).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nomatch: bool,
    /// Comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A security group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Group {
    /// Comment of the `[group]` line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Its rules.
    pub rules: Vec<Rule>,
}

/// A comment as the file keeps it: `# <text>` written only when not blank, read back trimmed.
fn kept_comment(c: Option<&String>) -> Option<String> {
    c.map(|c| c.trim().to_owned()).filter(|c| !c.is_empty())
}

/// A rule as `$format_rules` writes it and `parse_fw_rule` reads it back: `enable` 0 or 1,
/// `type` lower case, no `iface` where the section takes none (security groups), only `iface`
/// and the comment on a group rule.
fn saved_rule(rule: &Rule, allow_iface: bool) -> Rule {
    let mut out = Rule::new();
    let ty = rule
        .get("type")
        .map(|t| t.to_lowercase())
        .unwrap_or_default();
    let disabled = rule.get("enable").is_some_and(|e| e.is_empty() || e == "0");
    out.insert("enable".into(), if disabled { "0" } else { "1" }.into());
    for key in ["action", "macro"] {
        if let Some(v) = rule.get(key).filter(|v| !v.is_empty()) {
            out.insert(key.into(), v.clone());
        }
    }
    let mut keys = vec![];
    if allow_iface {
        keys.push("iface");
    }
    if ty != "group" {
        keys.extend([
            "source",
            "dest",
            "proto",
            "dport",
            "sport",
            "log",
            "icmp-type",
        ]);
    }
    for key in keys {
        if let Some(v) = rule.get(key).filter(|v| !v.is_empty()) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(c) = kept_comment(rule.get("comment")) {
        out.insert("comment".into(), c);
    }
    out.insert("type".into(), ty);
    out
}

impl FwConf {
    /// Whether `save_*fw_conf` would write nothing (and remove the file).
    pub fn is_empty(&self) -> bool {
        self.options.is_empty()
            && self.aliases.is_empty()
            && self.ipsets.is_empty()
            && self.rules.is_empty()
            && self.groups.is_empty()
    }

    /// The file as written and read back: names lower-cased where the parser lower-cases
    /// them, IP set entries sorted by address without duplicates, hosts' `/32` and `/128`
    /// dropped, blank comments gone.
    pub fn saved(&self) -> FwConf {
        let aliases = self
            .aliases
            .values()
            .map(|a| {
                let cidr = addr::parse_ip_or_cidr(&a.cidr).map_or(a.cidr.clone(), |(c, _)| c);
                let alias = Alias {
                    name: a.name.clone(),
                    cidr,
                    comment: kept_comment(a.comment.as_ref()),
                };
                (a.name.to_lowercase(), alias)
            })
            .collect();
        let ipsets = self
            .ipsets
            .iter()
            .map(|(name, set)| {
                let mut by_cidr: BTreeMap<String, IpsetEntry> = BTreeMap::new();
                for e in &set.entries {
                    by_cidr.entry(e.cidr.clone()).or_insert_with(|| IpsetEntry {
                        cidr: e.cidr.clone(),
                        nomatch: e.nomatch,
                        comment: kept_comment(e.comment.as_ref()),
                    });
                }
                let set = Ipset {
                    comment: kept_comment(set.comment.as_ref()),
                    entries: by_cidr.into_values().collect(),
                };
                (name.to_lowercase(), set)
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| {
                let group = Group {
                    comment: kept_comment(g.comment.as_ref()),
                    rules: g.rules.iter().map(|r| saved_rule(r, false)).collect(),
                };
                (name.to_lowercase(), group)
            })
            .collect();
        FwConf {
            options: self.options.clone(),
            aliases,
            ipsets,
            rules: self.rules.iter().map(|r| saved_rule(r, true)).collect(),
            groups,
        }
    }
}

/// `copy_list_with_digest`'s SHA-1: each entry's keys sorted, `key:value\n` for every value
/// that is not a reference (an `errors` hash).
pub(crate) fn list_digest(list: &[Map<String, Value>]) -> String {
    let mut text = String::new();
    for entry in list {
        let mut keys: Vec<&String> = entry.keys().collect();
        keys.sort();
        for k in keys {
            match &entry[k.as_str()] {
                Value::String(s) => text.push_str(&format!("{k}:{s}\n")),
                Value::Number(n) => text.push_str(&format!("{k}:{n}\n")),
                _ => {}
            }
        }
    }
    crate::hashes::sha1_hex(text.as_bytes())
}

/// `copy_list_with_digest`: the entries, each with the list's `digest`.
pub(crate) fn with_digest(list: Vec<Map<String, Value>>) -> (Vec<Value>, String) {
    let digest = list_digest(&list);
    let out = list
        .into_iter()
        .map(|mut e| {
            e.insert("digest".into(), digest.clone().into());
            Value::Object(e)
        })
        .collect();
    (out, digest)
}

/// A rule as the API lists it: `enable` and `ipversion` numbers, the rest strings.
pub(crate) fn rule_json(rule: &Rule) -> Map<String, Value> {
    rule.iter()
        .map(|(k, v)| {
            let value = match k.as_str() {
                "enable" | "ipversion" => v.parse::<i64>().map_or(v.clone().into(), Value::from),
                _ => v.clone().into(),
            };
            (k.clone(), value)
        })
        .collect()
}

/// A rule as loaded: verified again (`parse_fw_rule` runs `verify_rule` without raising), so
/// it carries `ipversion` and any `errors`.
#[derive(Debug, Clone)]
pub(crate) struct LoadedRule {
    pub rule: Rule,
    pub errors: BTreeMap<String, String>,
}

impl LoadedRule {
    /// The API's object for it.
    pub fn json(&self) -> Map<String, Value> {
        let mut v = rule_json(&self.rule);
        if !self.errors.is_empty() {
            let errors: Map<String, Value> = self
                .errors
                .iter()
                .map(|(k, e)| (k.clone(), e.clone().into()))
                .collect();
            v.insert("errors".into(), errors.into());
        }
        v
    }
}

/// The rules of a list as loaded, and the list's digest.
pub(crate) fn loaded_rules(
    rules: &[Rule],
    env: verify::Env,
    scope: &verify::Scope,
) -> (Vec<LoadedRule>, String) {
    let loaded: Vec<LoadedRule> = rules
        .iter()
        .filter_map(|r| verify::load_rule(r, env, scope))
        .collect();
    let json: Vec<Map<String, Value>> = loaded.iter().map(LoadedRule::json).collect();
    (loaded, list_digest(&json))
}

/// An option's value as the loader reads it: the numeric options as numbers. A cluster
/// `enable` set to a timestamp (the anti-lockout call) reads as 0 once a minute has passed
/// (`parse_clusterfw_option`).
pub(crate) fn option_json(cluster: bool, key: &str, value: &str) -> Value {
    let numeric = if cluster {
        matches!(key, "enable" | "ebtables")
    } else {
        matches!(
            key,
            "enable" | "dhcp" | "ndp" | "radv" | "macfilter" | "ipfilter" | "ips"
        )
    };
    match value.parse::<u64>() {
        Ok(n) if numeric => {
            let now = crate::auth::now_ms() / 1000;
            if cluster && key == "enable" && n > 1 && now.saturating_sub(n) > 60 {
                Value::from(0)
            } else {
                Value::from(n)
            }
        }
        _ => value.into(),
    }
}

/// `copy_opject_with_digest` of a file's options: the options and their digest
/// (`key:value\n` over the sorted keys).
pub(crate) fn options_json(cluster: bool, options: &BTreeMap<String, String>) -> (Value, String) {
    let mut out = Map::new();
    let mut text = String::new();
    for (k, v) in options {
        let value = option_json(cluster, k, v);
        let shown = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("{k}:{shown}\n"));
        out.insert(k.clone(), value);
    }
    let digest = crate::hashes::sha1_hex(text.as_bytes());
    out.insert("digest".into(), digest.clone().into());
    (Value::Object(out), digest)
}
