//! Firewall rules, as pve-firewall `src/PVE/API2/Firewall/Rules.pm` (`RulesBase` and its
//! `ClusterRules`, `GroupRules`, `VMRules`, `CTRules`) serves them: the list (each rule with
//! its `pos` and the list's `digest`), one rule, create (at the top, disabled unless
//! `enable`d), update (or `moveto`), delete. Rules are checked by `verify_rule`
//! ([`crate::firewall::verify`]); a rule of `type` `group` names a security group by pattern
//! only (PVE does not ask whether it exists: the compiler skips a missing one).

use serde_json::Value;

use super::Ctx;
use super::firewall::{Target, assert_digest};
use crate::error::ApiError;
use crate::firewall::verify::{self, Env, Scope};
use crate::firewall::{FwConf, Rule, loaded_rules};
use crate::state::State;

/// The rule list a request works on: a file's `[RULES]` or a security group's.
#[derive(Debug, Clone)]
enum List {
    File(Target),
    Group(String),
}

impl List {
    fn of(ctx: &Ctx) -> Result<List, ApiError> {
        match ctx.p("group") {
            Some(g) if ctx.template.starts_with("/cluster/firewall/groups/") => {
                Ok(List::Group(g.to_owned()))
            }
            _ => Target::of(ctx).map(List::File),
        }
    }

    /// The file holding the list (security groups live in `cluster.fw`).
    fn target(&self) -> Target {
        match self {
            List::File(t) => *t,
            List::Group(_) => Target::Cluster,
        }
    }

    fn env(&self) -> Env {
        match self {
            List::File(t) => t.env(),
            List::Group(_) => Env::Group,
        }
    }

    /// `GroupRules` `load_config`: a group that does not exist fails.
    fn rules<'a>(&self, conf: &'a mut FwConf) -> Result<&'a mut Vec<Rule>, ApiError> {
        match self {
            List::File(_) => Ok(&mut conf.rules),
            List::Group(g) => conf
                .groups
                .get_mut(g)
                .map(|group| &mut group.rules)
                .ok_or_else(|| ApiError::fail(format!("no such security group '{g}'"))),
        }
    }

    /// The list as loaded (each rule verified again) and its digest.
    fn loaded(
        &self,
        st: &State,
        conf: &FwConf,
    ) -> Result<(Vec<crate::firewall::LoadedRule>, String), ApiError> {
        let mut copy = conf.clone();
        let rules = self.rules(&mut copy)?.clone();
        let scope = match self {
            List::File(t) => t.load_scope(st, conf),
            List::Group(_) => Scope {
                cluster: Some(conf),
                local: None,
            },
        };
        Ok(loaded_rules(&rules, self.env(), &scope))
    }

    /// `rules_audit_permissions`/`rules_modify_permissions` (`group`: as the cluster's).
    fn audit(&self, ctx: &Ctx) -> Result<(), ApiError> {
        self.target().audit(ctx)
    }

    fn modify(&self, ctx: &Ctx) -> Result<(), ApiError> {
        self.target().modify(ctx)
    }
}

/// The keys `copy_rule_data` copies from the request (of `$rule_properties`; `pos` and
/// `digest` are copied too but never written to the file).
const RULE_KEYS: &[&str] = &[
    "type",
    "action",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "enable",
    "log",
    "sport",
    "dport",
    "comment",
    "icmp-type",
];

/// `copy_rule_data`: each given property set, an empty or `-` value removing it.
fn copy_rule_data(ctx: &Ctx, rule: &mut Rule) {
    for key in RULE_KEYS {
        match ctx.p(key) {
            None => {}
            Some("" | "-") => {
                rule.remove(*key);
            }
            Some(v) => {
                rule.insert((*key).to_owned(), v.to_owned());
            }
        }
    }
}

/// `delete_rule_properties`.
fn delete_rule_properties(ctx: &Ctx, rule: &mut Rule) -> Result<(), ApiError> {
    for opt in crate::schema::split_list(ctx.p("delete").unwrap_or_default()) {
        if !RULE_KEYS.contains(&opt.as_str()) && opt != "pos" && opt != "digest" {
            return Err(ApiError::param(
                "delete",
                format!("no such property ('{opt}')"),
            ));
        }
        if opt == "type" || opt == "action" {
            return Err(ApiError::param(
                "delete",
                format!("unable to delete required property '{opt}'"),
            ));
        }
        rule.remove(&opt);
    }
    Ok(())
}

fn pos(ctx: &Ctx) -> usize {
    ctx.int("pos")
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(usize::MAX)
}

fn no_rule(ctx: &Ctx) -> ApiError {
    ApiError::fail(format!(
        "no rule at position {}",
        ctx.p("pos").unwrap_or_default()
    ))
}

/// `get_rules`: the loaded rules, each with its `pos`.
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let list = List::of(ctx)?;
    list.audit(ctx)?;
    let st = ctx.state();
    let conf = list.target().load(&st);
    let (rules, digest) = list.loaded(&st, &conf)?;
    Ok(rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = r.json();
            v.insert("digest".into(), digest.clone().into());
            v.insert("pos".into(), i.into());
            Value::Object(v)
        })
        .collect())
}

/// `get_rule`: one rule with `pos` and the list's `digest`; `no rule at position N` past the
/// end.
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let list = List::of(ctx)?;
    list.audit(ctx)?;
    let st = ctx.state();
    let conf = list.target().load(&st);
    let (rules, digest) = list.loaded(&st, &conf)?;
    let pos = pos(ctx);
    let rule = rules.get(pos).ok_or_else(|| no_rule(ctx))?;
    let mut v = rule.json();
    v.insert("digest".into(), digest.into());
    v.insert("pos".into(), pos.into());
    Ok(Value::Object(v))
}

/// `create_rule`: the rule from the request, verified, `enable` 0 unless given, put first.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let list = List::of(ctx)?;
    list.modify(ctx)?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let target = list.target();
    let mut conf = target.load(&st);
    list.rules(&mut conf)?;
    let mut rule = Rule::new();
    copy_rule_data(ctx, &mut rule);
    verify::verify_rule(&mut rule, list.env(), &target.api_scope(&st, &conf))?;
    if ctx.p("enable").is_none() {
        rule.insert("enable".into(), "0".into());
    }
    list.rules(&mut conf)?.insert(0, rule);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `update_rule`: the digest, the position, then either `moveto` (nothing else applied) or
/// the properties given, `delete`, and `verify_rule` on the result.
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let list = List::of(ctx)?;
    list.modify(ctx)?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let target = list.target();
    let mut conf = target.load(&st);
    let (loaded, digest) = list.loaded(&st, &conf)?;
    assert_digest(ctx, &digest)?;
    let pos = pos(ctx);
    if pos >= loaded.len() {
        return Err(no_rule(ctx));
    }
    let mut rules: Vec<Rule> = loaded.into_iter().map(|r| r.rule).collect();
    let moveto = ctx.int("moveto").and_then(|m| usize::try_from(m).ok());
    match moveto {
        Some(to) if to != pos => {
            let rule = rules.remove(pos);
            // PVE puts the rule before the one that was at `moveto`, or last.
            let at = if to > pos { to - 1 } else { to };
            if to > rules.len() {
                rules.push(rule);
            } else {
                rules.insert(at, rule);
            }
        }
        _ => {
            let rule = &mut rules[pos];
            copy_rule_data(ctx, rule);
            delete_rule_properties(ctx, rule)?;
            let scope_conf = conf.clone();
            verify::verify_rule(rule, list.env(), &target.api_scope(&st, &scope_conf))?;
        }
    }
    *list.rules(&mut conf)? = rules;
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `delete_rule`: the digest, the position, the rule removed.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let list = List::of(ctx)?;
    list.modify(ctx)?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let target = list.target();
    let mut conf = target.load(&st);
    let (loaded, digest) = list.loaded(&st, &conf)?;
    assert_digest(ctx, &digest)?;
    let pos = pos(ctx);
    if pos >= loaded.len() {
        return Err(no_rule(ctx));
    }
    let mut rules: Vec<Rule> = loaded.into_iter().map(|r| r.rule).collect();
    rules.remove(pos);
    *list.rules(&mut conf)? = rules;
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}
