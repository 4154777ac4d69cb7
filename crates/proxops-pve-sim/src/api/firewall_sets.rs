//! Firewall aliases and IP sets of the cluster and of guests, as pve-firewall
//! `src/PVE/API2/Firewall/Aliases.pm` (`AliasesBase`) and `IPSet.pm` (`BaseIPSetList`,
//! `IPSetBase`) serve them. Aliases are keyed by their lower-cased name and read back with
//! their `ipversion`; IP set names and entries are matched as given (the file's parser
//! lower-cases set names, so a set created as `Web` is `web` afterwards), entries are kept
//! sorted by address. Permissions are the file's ([`Target`]).

use serde_json::{Map, Value};

use super::Ctx;
use super::firewall::{Target, assert_digest};
use crate::error::ApiError;
use crate::firewall::verify::alias_ref;
use crate::firewall::{Alias, FwConf, Ipset, IpsetEntry, addr, with_digest};
use crate::state::State;

/// Perl's truth of an optional parameter.
fn truthy(v: Option<&str>) -> Option<String> {
    v.filter(|v| !v.is_empty() && *v != "0").map(str::to_owned)
}

/// An alias as `parse_alias` reads it back: `name`, `cidr`, `ipversion`, `comment`.
fn alias_json(a: &Alias) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), a.name.clone().into());
    m.insert("cidr".into(), a.cidr.clone().into());
    if let Ok((_, v)) = addr::parse_ip_or_cidr(&a.cidr) {
        m.insert("ipversion".into(), v.into());
    }
    if let Some(c) = &a.comment {
        m.insert("comment".into(), c.clone().into());
    }
    m
}

fn aliases_list(conf: &FwConf) -> (Vec<Value>, String) {
    with_digest(conf.aliases.values().map(alias_json).collect())
}

/// `get_aliases`: sorted by name, each with the list's digest.
pub(crate) fn alias_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let conf = target.load(&ctx.state());
    Ok(aliases_list(&conf).0.into())
}

/// `create_alias`: a name taken (in any case) is a parameter error.
pub(crate) fn alias_create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let (name, cidr) = (ctx.req("name")?, ctx.req("cidr")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    let key = name.to_lowercase();
    if conf.aliases.contains_key(&key) {
        return Err(ApiError::param(
            "name",
            format!("alias '{name}' already exists"),
        ));
    }
    let comment = truthy(ctx.p("comment"));
    conf.aliases.insert(
        key,
        Alias {
            name,
            cidr,
            comment,
        },
    );
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `read_alias`: the alias without a digest; `no such alias` as a parameter error.
pub(crate) fn alias_read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let name = ctx.req("name")?.to_lowercase();
    let conf = target.load(&ctx.state());
    match conf.aliases.get(&name) {
        Some(a) => Ok(Value::Object(alias_json(a))),
        None => Err(ApiError::param("name", "no such alias")),
    }
}

/// `update_alias`: the digest, the alias replaced by the request's `cidr` and `comment` (a
/// comment not given is gone), then `rename` (to a free name).
pub(crate) fn alias_update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let (name, cidr) = (ctx.req("name")?, ctx.req("cidr")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    assert_digest(ctx, &aliases_list(&conf).1)?;
    let key = name.to_lowercase();
    if !conf.aliases.contains_key(&key) {
        return Err(ApiError::param("name", "no such alias"));
    }
    let comment = truthy(ctx.p("comment"));
    let mut alias = Alias {
        name,
        cidr,
        comment,
    };
    match truthy(ctx.p("rename")) {
        Some(rename) if rename.to_lowercase() != key => {
            if conf.aliases.contains_key(&rename.to_lowercase()) {
                return Err(ApiError::param(
                    "name",
                    format!("alias '{rename}' already exists"),
                ));
            }
            conf.aliases.remove(&key);
            alias.name = rename.clone();
            conf.aliases.insert(rename.to_lowercase(), alias);
        }
        _ => {
            conf.aliases.insert(key, alias);
        }
    }
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `remove_alias`: the digest; an alias that is not there is no error.
pub(crate) fn alias_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let name = ctx.req("name")?.to_lowercase();
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    assert_digest(ctx, &aliases_list(&conf).1)?;
    conf.aliases.remove(&name);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `$get_ipset_list`: the sets' names and comments, with the list's digest.
fn ipset_names(conf: &FwConf) -> (Vec<Value>, String) {
    let list = conf
        .ipsets
        .iter()
        .map(|(name, set)| {
            let mut m = Map::new();
            m.insert("name".into(), name.clone().into());
            if let Some(c) = &set.comment {
                m.insert("comment".into(), c.clone().into());
            }
            m
        })
        .collect();
    with_digest(list)
}

/// `ipset_index`.
pub(crate) fn ipset_list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let conf = target.load(&ctx.state());
    Ok(ipset_names(&conf).0.into())
}

/// `create_ipset`: a new empty set, or with `rename` the set `rename` renamed to `name` (or
/// only its comment changed when both are the same).
pub(crate) fn ipset_create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let name = ctx.req("name")?;
    let comment = ctx.p("comment").map(str::to_owned);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    if let Some(rename) = truthy(ctx.p("rename")) {
        assert_digest(ctx, &ipset_names(&conf).1)?;
        let Some(mut set) = conf.ipsets.remove(&rename) else {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{rename}' does not exist"),
            ));
        };
        if conf.ipsets.contains_key(&name) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{name}' does already exist"),
            ));
        }
        if comment.is_some() {
            set.comment = comment;
        }
        conf.ipsets.insert(name, set);
    } else {
        if conf.ipsets.contains_key(&name) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{name}' already exists"),
            ));
        }
        let set = Ipset {
            comment,
            entries: Vec::new(),
        };
        conf.ipsets.insert(name, set);
    }
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// The set of a `{name}` request: `load_config`'s `no such IPSet`.
fn set_of<'a>(conf: &'a mut FwConf, name: &str) -> Result<&'a mut Ipset, ApiError> {
    conf.ipsets
        .get_mut(name)
        .ok_or_else(|| ApiError::fail(format!("no such IPSet '{name}'")))
}

/// The entries as loaded (`generic_fw_config_parser`: an alias entry must resolve, a zero
/// prefix is an error) with the list's digest.
fn entries(st: &State, target: Target, conf: &FwConf, set: &Ipset) -> (Vec<Value>, String) {
    let scope = target.load_scope(st, conf);
    let list = set
        .entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("cidr".into(), e.cidr.clone().into());
            if e.nomatch {
                m.insert("nomatch".into(), 1.into());
            }
            if let Some(c) = &e.comment {
                m.insert("comment".into(), c.clone().into());
            }
            let mut errors = Map::new();
            if let Some((pfx, alias)) = alias_ref(&e.cidr)
                && resolve_alias(&scope, pfx, alias).is_err()
            {
                errors.insert("cidr".into(), format!("no such alias '{alias}'").into());
            }
            if zero_prefix(&e.cidr) {
                let msg = "a zero prefix is not allowed in ipset entries\n";
                errors.insert("cidr".into(), msg.into());
            }
            if !errors.is_empty() {
                m.insert("errors".into(), errors.into());
            }
            m
        })
        .collect();
    with_digest(list)
}

fn zero_prefix(cidr: &str) -> bool {
    cidr.rsplit_once('/')
        .is_some_and(|(_, l)| !l.is_empty() && l.bytes().all(|b| b == b'0'))
}

/// `resolve_alias`: the local file first (unless `dc/`), then the cluster's (unless
/// `guest/`).
fn resolve_alias(
    scope: &crate::firewall::verify::Scope,
    pfx: &str,
    alias: &str,
) -> Result<(), ApiError> {
    let (cluster, local) = match scope.cluster {
        None => (scope.local, None),
        Some(c) => (Some(c), scope.local),
    };
    let lc = alias.to_lowercase();
    let found = (pfx != "dc/" && local.is_some_and(|c| c.aliases.contains_key(&lc)))
        || (pfx != "guest/" && cluster.is_some_and(|c| c.aliases.contains_key(&lc)));
    if found {
        Ok(())
    } else {
        Err(ApiError::fail(format!("no such alias '{alias}'")))
    }
}

/// `get_ipset`: the set's entries.
pub(crate) fn ipset_read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let name = ctx.req("name")?;
    let st = ctx.state();
    let mut conf = target.load(&st);
    let set = set_of(&mut conf, &name)?.clone();
    Ok(entries(&st, target, &conf, &set).0.into())
}

/// `delete_ipset`: refused while it has entries, unless `force`.
pub(crate) fn ipset_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let name = ctx.req("name")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    let set = set_of(&mut conf, &name)?;
    if !set.entries.is_empty() && !ctx.flag("force").unwrap_or(false) {
        return Err(ApiError::fail(format!("IPSet '{name}' is not empty")));
    }
    conf.ipsets.remove(&name);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `create_ip`: an alias must resolve; an address is cleaned (`clean_cidr`, a host's `/32`
/// dropped); a duplicate or a zero prefix is a parameter error.
pub(crate) fn ip_create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let (name, given) = (ctx.req("name")?, ctx.req("cidr")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    set_of(&mut conf, &name)?;
    let cidr = match alias_ref(&given) {
        Some((pfx, alias)) => {
            resolve_alias(&target.api_scope(&st, &conf), pfx, alias)?;
            given
        }
        None => {
            addr::parse_ip_or_cidr(&addr::clean_cidr(&given))
                .map_err(ApiError::fail)?
                .0
        }
    };
    let set = set_of(&mut conf, &name)?;
    if set.entries.iter().any(|e| e.cidr == cidr) {
        return Err(ApiError::param(
            "cidr",
            format!("address '{cidr}' already exists"),
        ));
    }
    if zero_prefix(&cidr) {
        return Err(ApiError::param(
            "cidr",
            "a zero prefix is not allowed in ipset entries",
        ));
    }
    let entry = IpsetEntry {
        cidr,
        nomatch: ctx.flag("nomatch").unwrap_or(false),
        comment: truthy(ctx.p("comment")),
    };
    set.entries.insert(0, entry);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `read_ip`: the entry whose `cidr` is the path's, as listed (with the digest).
pub(crate) fn ip_read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let (name, cidr) = (ctx.req("name")?, ctx.req("cidr")?);
    let st = ctx.state();
    let mut conf = target.load(&st);
    let set = set_of(&mut conf, &name)?.clone();
    entries(&st, target, &conf, &set)
        .0
        .into_iter()
        .find(|e| e["cidr"] == cidr.as_str())
        .ok_or_else(|| ApiError::param("cidr", "no such IP/Network"))
}

/// `update_ip`: the digest; the entry's `nomatch` and `comment` set to the request's (what
/// is not given is cleared).
pub(crate) fn ip_update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let (name, cidr) = (ctx.req("name")?, ctx.req("cidr")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    let set = set_of(&mut conf, &name)?.clone();
    assert_digest(ctx, &entries(&st, target, &conf, &set).1)?;
    let set = set_of(&mut conf, &name)?;
    let Some(entry) = set.entries.iter_mut().find(|e| e.cidr == cidr) else {
        return Err(ApiError::param("cidr", "no such IP/Network"));
    };
    entry.nomatch = ctx.flag("nomatch").unwrap_or(false);
    entry.comment = ctx.p("comment").map(str::to_owned);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `remove_ip`: the digest; an entry that is not there is no error.
pub(crate) fn ip_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let (name, cidr) = (ctx.req("name")?, ctx.req("cidr")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    let set = set_of(&mut conf, &name)?.clone();
    assert_digest(ctx, &entries(&st, target, &conf, &set).1)?;
    set_of(&mut conf, &name)?.entries.retain(|e| e.cidr != cidr);
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}
