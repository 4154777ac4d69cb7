//! HA rules (PVE 9): `GET`/`POST /cluster/ha/rules` and `GET`/`PUT`/`DELETE
//! /cluster/ha/rules/{rule}` as pve-ha-manager `src/PVE/API2/HA/Rules.pm` answers them, with the
//! rule plugins `src/PVE/HA/Rules/NodeAffinity.pm` and `Rules/ResourceAffinity.pm`. PVE 8 has no
//! such path (the route table serves it on 9.x only). Feasibility covers the checks a single
//! rule can fail on its own: a resource in two node-affinity rules, a resource-affinity rule
//! with fewer than two resources, a negative one with more resources than nodes (the
//! inter-rule consistency checks of `Rules.pm` are not simulated).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::Ctx;
use super::ha::groups_migrated;
use crate::error::ApiError;
use crate::state::{HaRule, State};

const NODE_AFFINITY: &str = "node-affinity";
const RESOURCE_AFFINITY: &str = "resource-affinity";

/// `PVE::SectionConfig` digest of `rules.cfg` (changes with every write).
fn digest(st: &State) -> String {
    let text = serde_json::to_string(&st.ha_rules).unwrap_or_default();
    crate::hashes::sha1_hex(text.as_bytes())
}

/// The options a rule type takes (`options` of each plugin).
fn options(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        NODE_AFFINITY => Some(&["resources", "nodes", "strict", "disable", "comment"]),
        RESOURCE_AFFINITY => Some(&["resources", "affinity", "disable", "comment"]),
        _ => None,
    }
}

/// `NodeAffinity.pm` `encode_plugin_value`: sorted nodes, `node:prio` when a priority is set.
fn encode_nodes(nodes: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = nodes
        .iter()
        .map(|(n, p)| {
            if *p == 0 {
                n.clone()
            } else {
                format!("{n}:{p}")
            }
        })
        .collect();
    parts.join(",")
}

/// `$get_api_ha_rule`: the rule with `rule`, `digest`, `order`, encoded lists and its errors.
/// (`set_rule_defaults` adds nothing: no optional property has a true default.)
fn row(
    id: &str,
    r: &HaRule,
    digest: &str,
    errors: Option<&BTreeMap<String, Vec<String>>>,
) -> Value {
    let mut v = json!({ "rule": id, "type": r.kind, "digest": digest, "order": r.order });
    if !r.resources.is_empty() {
        let list: Vec<&str> = r.resources.iter().map(String::as_str).collect();
        v["resources"] = list.join(",").into();
    }
    if !r.nodes.is_empty() {
        v["nodes"] = encode_nodes(&r.nodes).into();
    }
    if let Some(s) = r.strict {
        v["strict"] = u8::from(s).into();
    }
    if let Some(a) = &r.affinity {
        v["affinity"] = a.clone().into();
    }
    if r.disable {
        v["disable"] = 1.into();
    }
    if let Some(c) = &r.comment {
        v["comment"] = c.clone().into();
    }
    if let Some(e) = errors {
        let map: serde_json::Map<String, Value> = e
            .iter()
            .map(|(k, msgs)| (k.clone(), Value::from(msgs.join(", "))))
            .collect();
        v["errors"] = Value::Object(map);
    }
    v
}

/// `$get_full_rules_config`: the rules plus, while groups are not yet migrated, the rules
/// `PVE::HA::Groups::migrate_groups_to_rules` derives from the groups in use.
fn full_rules(st: &State) -> BTreeMap<String, HaRule> {
    let mut rules = st.ha_rules.clone();
    let mut used: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (sid, r) in &st.ha_resources {
        if let Some(g) = &r.group {
            used.entry(g.as_str()).or_default().insert(sid.clone());
        }
    }
    for (group, resources) in used {
        let Some(g) = st.ha_groups.get(group) else {
            continue;
        };
        let nodes = g
            .nodes
            .split([',', ';', ' '])
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (n, p) = e.split_once(':').unwrap_or((e, "0"));
                (n.to_owned(), p.parse().unwrap_or(0))
            })
            .collect();
        let order = next_ordinal(&rules);
        rules.insert(
            format!("ha-group-{group}"),
            HaRule {
                kind: NODE_AFFINITY.into(),
                resources,
                nodes,
                strict: Some(g.restricted),
                comment: Some(
                    g.comment
                        .clone()
                        .unwrap_or_else(|| format!("Generated from HA group '{group}'.")),
                ),
                order,
                ..HaRule::default()
            },
        );
    }
    rules
}

/// `PVE::HA::Rules::get_next_ordinal`: one more than the *lowest* ordinal in use (PVE sorts
/// ascending and takes the first), 1 for none.
fn next_ordinal(rules: &BTreeMap<String, HaRule>) -> u64 {
    rules.values().map(|r| r.order).min().unwrap_or(0) + 1
}

/// `PVE::HA::Rules->check_feasibility`: per rule id, per option, the messages (enabled rules
/// only, as `get_plugin_check_arguments` collects them).
fn feasibility(
    rules: &BTreeMap<String, HaRule>,
    node_count: usize,
) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut errors: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut push = |id: &str, msg: String| {
        errors
            .entry(id.to_owned())
            .or_default()
            .entry("resources".into())
            .or_default()
            .push(msg);
    };
    let enabled = || rules.iter().filter(|(_, r)| !r.disable);
    // NodeAffinity.pm `check_single_resource_reference`.
    let mut by_sid: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, r) in enabled().filter(|(_, r)| r.kind == NODE_AFFINITY) {
        for sid in &r.resources {
            by_sid.entry(sid).or_default().push(id);
        }
    }
    let mut conflicts: Vec<(&str, &str)> = by_sid
        .iter()
        .filter(|(_, ids)| ids.len() > 1)
        .flat_map(|(sid, ids)| ids.iter().map(move |id| (*id, *sid)))
        .collect();
    conflicts.sort_unstable();
    for (id, sid) in conflicts {
        push(
            id,
            format!("resource '{sid}' is already used in another node affinity rule"),
        );
    }
    for (id, r) in enabled().filter(|(_, r)| r.kind == RESOURCE_AFFINITY) {
        // ResourceAffinity.pm `check_resource_affinity_resources_count`.
        if r.resources.len() < 2 {
            push(
                id,
                "rule is ineffective as there are less than two resources".into(),
            );
        }
        // `check_negative_resource_affinity_resources_count`.
        if r.affinity.as_deref() == Some("negative") && r.resources.len() > node_count {
            push(
                id,
                "rule defines more resources than available nodes".into(),
            );
        }
    }
    errors
}

/// `$assert_feasibility` inside `lock_ha_domain`: the 400 `PVE::Exception` is stringified by
/// the lock's `die "$errmsg: $err"` (code, message, then each `option: messages` line), so
/// the caller sees a 500.
fn assert_feasible(
    st: &State,
    rules: &BTreeMap<String, HaRule>,
    id: &str,
    what: &str,
) -> Result<(), ApiError> {
    let all = feasibility(rules, st.nodes.len());
    let Some(errs) = all.get(id) else {
        return Ok(());
    };
    let mut msg = format!("{what}: 400 Rule '{id}' is invalid.\n");
    for (k, msgs) in errs {
        msg.push_str(&format!("{k}: {}\n", msgs.join(", ")));
    }
    Err(ApiError::fail(msg))
}

/// `pve-ha-resource-id-list` decoded (`decode_value`): the sids, deduplicated.
fn parse_resources(v: &str) -> BTreeSet<String> {
    v.split([',', ';', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `pve-ha-node-list` decoded (`NodeAffinity.pm` `decode_plugin_value`).
fn parse_nodes(v: &str) -> Result<BTreeMap<String, u64>, ApiError> {
    let mut out = BTreeMap::new();
    for e in v.split([',', ';', ' ']).filter(|e| !e.is_empty()) {
        let (n, p) = e.split_once(':').unwrap_or((e, "0"));
        let Ok(p) = p.parse::<u64>() else {
            return Err(ApiError::param(
                "nodes",
                format!("invalid format - value '{e}' does not look like a valid ha node"),
            ));
        };
        out.insert(n.to_owned(), p);
    }
    Ok(out)
}

/// `check_config` of the type's plugin: every given option must be one of the type's
/// (`check_value`'s "unexpected property"), then decoded.
fn check_options(ctx: &Ctx, kind: &str, rule: &mut HaRule) -> Result<(), ApiError> {
    let Some(allowed) = options(kind) else {
        return Err(ApiError::fail(format!("unknown section type '{kind}'")));
    };
    for key in [
        "resources",
        "nodes",
        "strict",
        "affinity",
        "disable",
        "comment",
    ] {
        let Some(v) = ctx.p(key) else { continue };
        // `delete $param->{disable} if !$param->{disable}`.
        if key == "disable" && ctx.flag("disable") != Some(true) {
            continue;
        }
        if !allowed.contains(&key) {
            return Err(ApiError::fail(format!("unexpected property '{key}'")));
        }
        match key {
            "resources" => rule.resources = parse_resources(v),
            "nodes" => rule.nodes = parse_nodes(v)?,
            "strict" => rule.strict = ctx.flag("strict"),
            "affinity" => rule.affinity = Some(v.to_owned()),
            "disable" => rule.disable = true,
            _ => rule.comment = Some(v.to_owned()),
        }
    }
    Ok(())
}

/// `$assert_valid_resources_param` and `$assert_valid_nodes_param`.
fn check_refs(st: &State, ctx: &Ctx, rule: &HaRule) -> Result<(), ApiError> {
    if ctx.p("resources").is_some() {
        if rule.resources.is_empty() {
            return Err(ApiError::fail("no resources were specified"));
        }
        let unmanaged: Vec<&str> = rule
            .resources
            .iter()
            .filter(|s| !st.ha_resources.contains_key(*s))
            .map(String::as_str)
            .collect();
        if !unmanaged.is_empty() {
            return Err(ApiError::fail(format!(
                "cannot use unmanaged resource(s) {}.",
                unmanaged.join(", ")
            )));
        }
    }
    if ctx.p("nodes").is_some() {
        if rule.nodes.is_empty() {
            return Err(ApiError::fail("no nodes were specified"));
        }
        let missing: Vec<&str> = rule
            .nodes
            .keys()
            .filter(|n| st.node(n).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(ApiError::fail(format!(
                "cannot use non-existent node(s) {}.",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let kind = ctx.p("type").map(str::to_string);
    let resource = ctx.p("resource").map(str::to_string);
    let st = ctx.state();
    let rules = full_rules(&st);
    let errors = feasibility(&rules, st.nodes.len());
    let d = digest(&st);
    let mut ids: Vec<(&String, &HaRule)> = rules
        .iter()
        .filter(|(_, r)| kind.as_deref().is_none_or(|k| k == r.kind))
        .filter(|(_, r)| resource.as_ref().is_none_or(|s| r.resources.contains(s)))
        .collect();
    // `foreach_rule(..., sorted => 1)`: by ordinal (ties by id, for a stable answer).
    ids.sort_by(|a, b| (a.1.order, a.0).cmp(&(b.1.order, b.0)));
    Ok(Value::Array(
        ids.into_iter()
            .map(|(id, r)| row(id, r, &d, errors.get(id)))
            .collect(),
    ))
}

pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let id = ctx.req("rule")?;
    let st = ctx.state();
    let rules = full_rules(&st);
    let errors = feasibility(&rules, st.nodes.len());
    match rules.get(&id) {
        Some(r) => Ok(row(&id, r, &digest(&st), errors.get(&id))),
        None => Err(ApiError::fail(format!("no such ha rule '{id}'"))),
    }
}

pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    if !groups_migrated(&st) {
        return Err(ApiError::fail(
            "cannot create ha rule: ha groups have not been migrated yet",
        ));
    }
    let kind = ctx.req("type")?;
    let id = ctx.req("rule")?;
    let mut rule = HaRule {
        kind: kind.clone(),
        ..HaRule::default()
    };
    check_options(ctx, &kind, &mut rule)?;
    // `check_config($ruleid, $param, 1, 1)`: the required options of the type.
    let required: &[&str] = if kind == NODE_AFFINITY {
        &["resources", "nodes"]
    } else {
        &["resources", "affinity"]
    };
    if let Some(k) = required.iter().find(|k| ctx.p(k).is_none()) {
        return Err(ApiError::fail(format!(
            "missing value for required option '{k}'"
        )));
    }
    const WHAT: &str = "create ha rule failed";
    let locked = |e: ApiError| ApiError::fail(format!("{WHAT}: {}\n", e.text()));
    if st.ha_rules.contains_key(&id) {
        return Err(locked(ApiError::fail(format!(
            "HA rule '{id}' already defined"
        ))));
    }
    check_refs(&st, ctx, &rule).map_err(locked)?;
    let mut rules = st.ha_rules.clone();
    rule.order = next_ordinal(&rules);
    rules.insert(id.clone(), rule);
    assert_feasible(&st, &rules, &id, WHAT)?;
    st.ha_rules = rules;
    shared.persist(&st);
    Ok(Value::Null)
}

pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let id = ctx.req("rule")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    if !groups_migrated(&st) {
        return Err(ApiError::fail(
            "cannot update ha rule: ha groups have not been migrated yet",
        ));
    }
    const WHAT: &str = "update HA rules failed";
    let locked = |e: ApiError| ApiError::fail(format!("{WHAT}: {}\n", e.text()));
    if let Some(d) = ctx.p("digest")
        && d != digest(&st)
    {
        return Err(locked(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        )));
    }
    let Some(current) = st.ha_rules.get(&id).cloned() else {
        return Err(locked(ApiError::fail(format!(
            "HA rule '{id}' does not exist"
        ))));
    };
    let mut rule = current.clone();
    check_options(ctx, &current.kind, &mut rule).map_err(locked)?;
    check_refs(&st, ctx, &rule).map_err(locked)?;
    // `PVE::SectionConfig::delete_from_config`: optional options of the type only.
    let allowed = options(&current.kind).unwrap_or_default();
    for key in ctx.p("delete").unwrap_or_default().split([',', ';', ' ']) {
        match key {
            "" => {}
            "resources" | "nodes" | "affinity" if allowed.contains(&key) => {
                return Err(locked(ApiError::fail(format!(
                    "unable to delete required option '{key}'"
                ))));
            }
            "strict" if allowed.contains(&key) => rule.strict = None,
            "disable" => rule.disable = false,
            "comment" => rule.comment = None,
            other => {
                return Err(locked(ApiError::fail(format!(
                    "unexpected property '{other}'"
                ))));
            }
        }
    }
    let mut rules = st.ha_rules.clone();
    rules.insert(id.clone(), rule);
    assert_feasible(&st, &rules, &id, WHAT)?;
    st.ha_rules = rules;
    shared.persist(&st);
    Ok(Value::Null)
}

/// `delete_rule`: a rule that is not there is no error.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Console")?;
    let id = ctx.req("rule")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    st.ha_rules.remove(&id);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `PVE::HA::Config::delete_service_from_config` with `purge` (the default): the resource
/// leaves every rule, and a rule left without resources goes.
pub(crate) fn purge(st: &mut State, sid: &str) {
    for r in st.ha_rules.values_mut() {
        r.resources.remove(sid);
    }
    st.ha_rules.retain(|_, r| !r.resources.is_empty());
}
