//! Security groups, as pve-firewall `src/PVE/API2/Firewall/Groups.pm` (`list_security_groups`,
//! `create_security_group`) and `Rules.pm` (`GroupRules` `delete_security_group`) serve them;
//! a group's rules are [`super::firewall_rules`]'. Groups live in `cluster.fw`, by the
//! lower-cased name the parser gives them.

use serde_json::{Map, Value};

use super::Ctx;
use super::firewall::{Target, assert_digest};
use crate::error::ApiError;
use crate::firewall::{FwConf, Group, Rule, with_digest};

/// `$get_security_group_list`: names and comments, with the list's digest.
fn names(conf: &FwConf) -> (Vec<Value>, String) {
    let list = conf
        .groups
        .iter()
        .map(|(name, g)| {
            let mut m = Map::new();
            m.insert("group".into(), name.clone().into());
            if let Some(c) = &g.comment {
                m.insert("comment".into(), c.clone().into());
            }
            m
        })
        .collect();
    with_digest(list)
}

/// `list_security_groups`: any user may list them.
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    Ok(names(&ctx.state().firewall.cluster).0.into())
}

/// `$rename_fw_rules`: group rules naming `old` name `new`.
fn rename_in(rules: &mut [Rule], old: &str, new: &str) {
    for rule in rules {
        if rule.get("type").is_some_and(|t| t == "group")
            && rule.get("action").is_some_and(|a| a == old)
        {
            rule.insert("action".into(), new.to_owned());
        }
    }
}

/// `create_security_group` (Sys.Modify on `/`): a new empty group; with `rename`, the group
/// `rename` copied to `group`, every rule of the cluster and of the guests' files that names
/// it renamed, then the old one removed (or only the comment changed when both names are the
/// same).
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let group = ctx.req("group")?;
    let comment = ctx.p("comment").map(str::to_owned);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = st.firewall.cluster.clone();
    let Some(rename) = ctx.p("rename").filter(|r| !r.is_empty() && *r != "0") else {
        if conf.groups.contains_key(&group) {
            return Err(ApiError::param(
                "group",
                format!("Security group '{group}' already exists"),
            ));
        }
        conf.groups.insert(
            group,
            Group {
                comment,
                rules: Vec::new(),
            },
        );
        Target::Cluster.save(&mut st, &conf);
        shared.persist(&st);
        return Ok(Value::Null);
    };
    assert_digest(ctx, &names(&conf).1)?;
    let Some(old) = conf.groups.get(rename).cloned() else {
        return Err(ApiError::param(
            "group",
            format!("Security group '{rename}' does not exist"),
        ));
    };
    if conf.groups.contains_key(&group) && group != rename {
        return Err(ApiError::param(
            "group",
            format!("Security group '{group}' does already exist"),
        ));
    }
    if group == rename {
        if let Some(g) = conf.groups.get_mut(&group)
            && comment.is_some()
        {
            g.comment = comment;
        }
        Target::Cluster.save(&mut st, &conf);
        shared.persist(&st);
        return Ok(Value::Null);
    }
    let copy = Group {
        comment: comment.or(old.comment),
        rules: old.rules,
    };
    conf.groups.insert(group.clone(), copy);
    // Every guest's `<vmid>.fw` (`get_vmlist`: guests that exist).
    let vmids: Vec<u32> = st.guests.keys().copied().collect();
    for vmid in vmids {
        if let Some(fw) = st.firewall.guests.get_mut(&vmid) {
            rename_in(&mut fw.rules, rename, &group);
        }
    }
    rename_in(&mut conf.rules, rename, &group);
    conf.groups.remove(rename);
    Target::Cluster.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `delete_security_group` (Sys.Modify on `/`): a group that does not exist fails, one with
/// rules is refused.
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Modify")?;
    let group = ctx.req("group")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = st.firewall.cluster.clone();
    let Some(g) = conf.groups.get(&group) else {
        return Err(ApiError::fail(format!("no such security group '{group}'")));
    };
    if !g.rules.is_empty() {
        return Err(ApiError::fail(format!(
            "Security group '{group}' is not empty"
        )));
    }
    conf.groups.remove(&group);
    Target::Cluster.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}
