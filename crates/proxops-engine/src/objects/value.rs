//! A cluster object's parameter value, and when a live one equals a desired one: compared in
//! the form PVE keeps, which the parameter's schema says (booleans as `1`/`0`, lists as sets,
//! property strings as sets of `key=value`, numbers as numbers).

use proxops_pve_schema::{Fmt, Param, Ty, parse_bool};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

/// One parameter value: a scalar, or the items of an array parameter (a mapping's `map`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ObjValue {
    /// A scalar as text.
    One(String),
    /// An array's items (sent as repeated parameters).
    Many(Vec<String>),
}

impl fmt::Display for ObjValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjValue::One(s) => f.write_str(s),
            ObjValue::Many(items) => f.write_str(&items.join("; ")),
        }
    }
}

impl ObjValue {
    /// A value of a list read: text, number, boolean (`1`/`0`) or an array of those; `None` for
    /// anything else (an object, `null`).
    pub fn from_json(v: &Value) -> Option<ObjValue> {
        let scalar = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
            _ => None,
        };
        match v {
            Value::Array(items) => Some(ObjValue::Many(items.iter().filter_map(scalar).collect())),
            other => scalar(other).map(ObjValue::One),
        }
    }
}

/// Whether `live` holds what `desired` asks for, read as parameter `param` of the create
/// endpoint (`None`: compared as text).
pub fn same(param: Option<&Param>, desired: &ObjValue, live: &ObjValue) -> bool {
    match (desired, live) {
        (ObjValue::One(d), ObjValue::One(l)) => same_scalar(param, param.map(|p| p.format), d, l),
        (ObjValue::Many(d), ObjValue::Many(l)) => {
            let items = param.map_or(Fmt::None, |p| p.items);
            let norm = |v: &[String]| {
                let mut out: Vec<String> = v.iter().map(|i| canonical(items, i)).collect();
                out.sort();
                out
            };
            norm(d) == norm(l)
        }
        // PVE lists a one-item array as a plain string in some reads.
        (ObjValue::Many(d), ObjValue::One(l)) | (ObjValue::One(l), ObjValue::Many(d)) => {
            let items = param.map_or(Fmt::None, |p| p.items);
            d.len() == 1 && canonical(items, &d[0]) == canonical(items, l)
        }
    }
}

fn same_scalar(param: Option<&Param>, format: Option<Fmt>, d: &str, l: &str) -> bool {
    if d == l {
        return true;
    }
    match param.map(|p| p.ty) {
        Some(Ty::Bool) => parse_bool(d).is_some() && parse_bool(d) == parse_bool(l),
        Some(Ty::Int | Ty::Num) => match (d.parse::<f64>(), l.parse::<f64>()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
        _ => canonical(format.unwrap_or(Fmt::None), d) == canonical(format.unwrap_or(Fmt::None), l),
    }
}

/// A value in a form that does not depend on order: a list format's items sorted, a property
/// string's `key=value` parts sorted.
fn canonical(format: Fmt, value: &str) -> String {
    let is_list = format.name().is_some_and(|n| n.ends_with("-list"));
    if is_list {
        let items: BTreeSet<&str> = value
            .split([',', ';', ' ', '\0'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        return items.into_iter().collect::<Vec<_>>().join(",");
    }
    if format.sub_keys().is_some() {
        let parts: BTreeSet<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        return parts.into_iter().collect::<Vec<_>>().join(",");
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(method: &str, path: &str, name: &str) -> &'static Param {
        proxops_pve_schema::endpoint(method, path)
            .and_then(|e| e.params.iter().rev().find(|p| p.name == name))
            .unwrap_or_else(|| panic!("{method} {path} has no {name}"))
    }

    #[test]
    fn content_lists_compare_as_sets_and_booleans_as_pve_keeps_them() {
        let content = param("POST", "/storage", "content");
        let one = |s: &str| ObjValue::One(s.to_owned());
        assert!(same(Some(content), &one("iso,backup"), &one("backup,iso")));
        assert!(!same(Some(content), &one("iso,backup"), &one("iso")));
        let shared = param("POST", "/storage", "shared");
        assert!(same(Some(shared), &one("1"), &one("1")));
        assert!(!same(Some(shared), &one("1"), &one("0")));
        let prune = param("POST", "/storage", "prune-backups");
        assert!(same(
            Some(prune),
            &one("keep-last=3,keep-daily=7"),
            &one("keep-daily=7,keep-last=3")
        ));
    }

    #[test]
    fn array_items_compare_without_order() {
        let map = param("POST", "/cluster/mapping/pci", "map");
        let d = ObjValue::Many(vec![
            "id=1000:0087,node=pve2,path=0000:03:00.0".into(),
            "id=1000:0087,node=pve1,path=0000:01:00.0".into(),
        ]);
        let l = ObjValue::Many(vec![
            "node=pve1,path=0000:01:00.0,id=1000:0087".into(),
            "node=pve2,path=0000:03:00.0,id=1000:0087".into(),
        ]);
        assert!(same(Some(map), &d, &l));
        let other = ObjValue::Many(vec!["node=pve1,path=0000:01:00.0,id=1000:0087".into()]);
        assert!(!same(Some(map), &d, &other));
    }
}
