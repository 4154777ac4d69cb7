//! The spec types of PVE's firewall as ProxOps declares it: the cluster's (`kind: Firewall`:
//! options, aliases, IP sets, security groups, rules) and a guest's own (`firewall:` on VM and
//! LXC: options and rules). Rules and options are written as PVE names their parameters and
//! checked against the official schema of the endpoints that write them.

use crate::pve_config::PveConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `kind: Firewall`: the cluster's firewall (`/cluster/firewall`), one per cluster. Rules,
/// aliases, IP sets and groups ProxOps wrote carry its mark in their `comment`; anything added
/// by hand is left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FirewallSpec {
    /// Cluster options (`PUT /cluster/firewall/options`: `enable`, `policy_in`, `policy_out`,
    /// `ebtables`, `log_ratelimit`, ...). Only the keys given are managed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
    /// Named addresses rules may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<FirewallAlias>,
    /// IP sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipsets: Vec<IpSet>,
    /// Security groups: named rule lists guests apply with a `type: group` rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<SecurityGroup>,
    /// The cluster-wide rules, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<BTreeMap<String, serde_json::Value>>")]
    pub rules: Vec<PveConfig>,
}

/// A firewall alias.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FirewallAlias {
    /// Its name.
    pub name: String,
    /// The address or network it stands for.
    pub cidr: String,
    /// A comment (ProxOps appends its mark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// An IP set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IpSet {
    /// Its name.
    pub name: String,
    /// A comment (ProxOps appends its mark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Its addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<IpSetEntry>,
}

/// An address of an IP set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IpSetEntry {
    /// An address, network or alias name.
    pub cidr: String,
    /// Excluded from the set instead of in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nomatch: Option<bool>,
    /// A comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A security group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SecurityGroup {
    /// Its name (2-18 characters, a letter first).
    pub name: String,
    /// A comment (ProxOps appends its mark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Its rules, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<BTreeMap<String, serde_json::Value>>")]
    pub rules: Vec<PveConfig>,
}

/// A guest's own firewall (`firewall:` on VM and LXC): its options and rules. The NICs' own
/// `firewall` flag is set on each network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GuestFirewall {
    /// Options (`enable`, `policy_in`, `policy_out`, `dhcp`, `ipfilter`, `macfilter`, ...):
    /// only the keys given are managed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
    /// Its rules, in order (`type: group` with `action: <security group>` applies a group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<BTreeMap<String, serde_json::Value>>")]
    pub rules: Vec<PveConfig>,
}
