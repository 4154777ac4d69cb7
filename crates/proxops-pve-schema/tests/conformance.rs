//! The generated table against PVE's official API schemas (../shared/pve-api/, read only here):
//! for each release, every endpoint's rows of that release equal the schema's parameters, and
//! each guest type's config keys are exactly the config endpoint's parameters without the ones
//! that steer the request; and each endpoint's permission check of each release is the schema's.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proxops_pve_schema::{
    CONFIG_CONTROL, Check, ENDPOINTS, Fmt, GroupsParam, GuestType, Param, PermUser, Permissions,
    PveRelease, Sub, Ty, UseridParam, endpoint, key, keys,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn schema(release: PveRelease) -> Option<Value> {
    let file = match release {
        PveRelease::V8_4 => "pve-api/pve-api-8.4.2.tree.json",
        PveRelease::V9_1 => "pve-api/pve-api-9.1.3.tree.json",
    };
    let path = proxops_test_support::shared(file)?;
    let text = std::fs::read_to_string(&path).unwrap();
    Some(serde_json::from_str(&text).expect("the schema is JSON"))
}

/// Each path's `info` (its methods).
fn index(tree: &Value) -> BTreeMap<String, Value> {
    fn walk(n: &Value, out: &mut BTreeMap<String, Value>) {
        if let Some(p) = n["path"].as_str() {
            out.insert(p.to_string(), n["info"].clone());
        }
        for c in n["children"].as_array().into_iter().flatten() {
            walk(c, out);
        }
    }
    let mut out = BTreeMap::new();
    for n in tree.as_array().unwrap() {
        walk(n, &mut out);
    }
    out
}

fn opt_num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|x| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn truthy(v: &Value) -> bool {
    matches!(v, Value::Bool(true)) || v.as_i64() == Some(1)
}

fn check_sub(s: &Sub, k: &Value, at: &str, errs: &mut Vec<String>) {
    let same = s.alias == k["alias"].as_str()
        && s.key_alias == k["keyAlias"].as_str()
        && (s.alias.is_some()
            || (s.ty.name() == k["type"].as_str().unwrap_or("string")
                && s.optional == truthy(&k["optional"])
                && s.default_key == truthy(&k["default_key"])
                && s.enums.iter().map(|e| e.to_string()).collect::<Vec<_>>() == strs(&k["enum"])
                && s.format == k["format"].as_str()
                && s.min == opt_num(&k["minimum"])
                && s.max == opt_num(&k["maximum"])
                && s.max_len.map(|m| m as u64) == k["maxLength"].as_u64()
                && s.pattern == k["pattern"].as_str()));
    if !same {
        errs.push(format!("{at}.{}: property-string key differs", s.name));
    }
}

/// One parameter row against the schema's definition of it.
fn check_param(p: &Param, d: &Value, at: &str, errs: &mut Vec<String>) {
    let want_ty = d["type"].as_str().unwrap_or("string");
    if p.ty.name() != want_ty {
        errs.push(format!("{at}: type {} != {want_ty}", p.ty.name()));
    }
    if p.optional != truthy(&d["optional"]) {
        errs.push(format!("{at}: optional differs"));
    }
    if p.enums.iter().map(|s| s.to_string()).collect::<Vec<_>>() != strs(&d["enum"]) {
        errs.push(format!("{at}: enum differs"));
    }
    if p.min != opt_num(&d["minimum"]) || p.max != opt_num(&d["maximum"]) {
        errs.push(format!("{at}: limits differ"));
    }
    if p.max_len.map(|m| m as u64) != d["maxLength"].as_u64() {
        errs.push(format!("{at}: maxLength differs"));
    }
    if p.pattern != d["pattern"].as_str() || p.requires != d["requires"].as_str() {
        errs.push(format!("{at}: pattern or requires differ"));
    }
    match (p.items, &d["items"]["format"]) {
        (Fmt::Prop(subs), Value::Object(keys)) => {
            let ours: BTreeSet<&str> = subs.iter().map(|s| s.name).collect();
            let theirs: BTreeSet<&str> = keys.keys().map(String::as_str).collect();
            if ours != theirs {
                errs.push(format!("{at}: item keys differ"));
            }
            for s in subs {
                if let Some(k) = keys.get(s.name) {
                    check_sub(s, k, &format!("{at}[]"), errs);
                }
            }
        }
        (Fmt::None, Value::Null | Value::String(_)) => {}
        (ours, theirs) => errs.push(format!("{at}: item format {ours:?} != {theirs}")),
    }
    match (p.format, &d["format"]) {
        (Fmt::None, Value::Null) => {}
        (Fmt::Named(f), Value::String(s)) if f == s => {}
        (Fmt::NamedProp(f, subs), Value::String(s)) if f == s => {
            // Sub-keys read from the typetext: each is spelled `name=` there.
            let text = d["typetext"].as_str().unwrap_or_default();
            for sub in subs {
                if !text.contains(&format!("{}=", sub.name)) {
                    errs.push(format!("{at}.{}: not in the typetext {text:?}", sub.name));
                }
            }
        }
        (Fmt::Prop(subs), Value::Object(keys)) => {
            let ours: BTreeSet<&str> = subs.iter().map(|s| s.name).collect();
            let theirs: BTreeSet<&str> = keys.keys().map(String::as_str).collect();
            if ours != theirs {
                errs.push(format!("{at}: property-string keys differ"));
            }
            for s in subs {
                if let Some(k) = keys.get(s.name) {
                    check_sub(s, k, at, errs);
                }
            }
        }
        (ours, theirs) => errs.push(format!("{at}: format {ours:?} != {theirs}")),
    }
}

/// The rows of one release against the schema's properties: the same names, one row each,
/// each equal to the schema's definition.
fn check_rows<'a>(
    rows: impl Iterator<Item = &'a Param>,
    props: &serde_json::Map<String, Value>,
    skip: &[&str],
    where_: &str,
    errs: &mut Vec<String>,
) {
    let rows: Vec<&Param> = rows.collect();
    let ours: BTreeSet<&str> = rows.iter().map(|p| p.name).collect();
    if ours.len() != rows.len() {
        errs.push(format!(
            "{where_}: a parameter has two rows for one release"
        ));
    }
    let theirs: BTreeSet<&str> = props
        .keys()
        .map(String::as_str)
        .filter(|k| !skip.contains(k))
        .collect();
    if ours != theirs {
        errs.push(format!(
            "{where_}: parameter names differ: ours-only {:?}, schema-only {:?}",
            ours.difference(&theirs).collect::<Vec<_>>(),
            theirs.difference(&ours).collect::<Vec<_>>()
        ));
    }
    for p in rows {
        if let Some(d) = props.get(p.name) {
            check_param(p, d, &format!("{where_} {}", p.name), errs);
        }
    }
}

fn properties<'a>(
    idx: &'a BTreeMap<String, Value>,
    method: &str,
    path: &str,
) -> Option<&'a serde_json::Map<String, Value>> {
    static NONE: std::sync::LazyLock<serde_json::Map<String, Value>> =
        std::sync::LazyLock::new(serde_json::Map::new);
    let info = idx.get(path)?.get(method)?;
    Some(
        info["parameters"]["properties"]
            .as_object()
            .unwrap_or(&NONE),
    )
}

#[test]
fn every_endpoint_agrees_with_each_schema() {
    let mut errs = Vec::new();
    for release in PveRelease::ALL {
        let Some(tree) = schema(release) else { return };
        let idx = index(&tree);
        for ep in ENDPOINTS {
            let where_ = format!("{} {} {}", release.as_str(), ep.method, ep.path);
            let props = properties(&idx, ep.method, ep.path);
            match (ep.versions.contains(release), props) {
                (true, Some(props)) => {
                    check_rows(ep.params_of(release), props, &[], &where_, &mut errs)
                }
                (true, None) => errs.push(format!("{where_}: not in the schema")),
                (false, Some(_)) => errs.push(format!(
                    "{where_}: in the schema but marked as not of this release"
                )),
                (false, None) => {}
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} differences:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

#[test]
fn the_guest_keys_are_the_config_endpoints_parameters() {
    let mut errs = Vec::new();
    for release in PveRelease::ALL {
        let Some(tree) = schema(release) else { return };
        let idx = index(&tree);
        for (guest, method, path) in [
            (GuestType::Qemu, "POST", "/nodes/{node}/qemu/{vmid}/config"),
            (GuestType::Lxc, "PUT", "/nodes/{node}/lxc/{vmid}/config"),
        ] {
            let props = properties(&idx, method, path).unwrap();
            let rows = keys(guest).iter().filter(|k| k.versions.contains(release));
            check_rows(
                rows,
                props,
                CONFIG_CONTROL,
                &format!("{} {guest:?} keys", release.as_str()),
                &mut errs,
            );
            // The same definitions the endpoint's own rows hold.
            let ep = endpoint(method, path).unwrap();
            for k in keys(guest).iter().filter(|k| k.versions.contains(release)) {
                let probe = k.name.replace("[n]", "0");
                let by_key = key(guest, &probe, Some(release)).map(|p| p.name);
                let by_endpoint = ep.param(release, &probe).map(|p| p.name);
                if by_key != by_endpoint || by_key != Some(k.name) {
                    errs.push(format!(
                        "{guest:?} {probe}: {by_key:?} by key, {by_endpoint:?} by endpoint"
                    ));
                }
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} differences:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

#[test]
fn a_named_property_string_reads_its_keys_from_the_typetext() {
    // `pve-qm-watchdog`: `[[model=]<i6300esb|ib700>] [,action=<...>]`.
    let watchdog = key(GuestType::Qemu, "watchdog", None).unwrap();
    let Fmt::NamedProp("pve-qm-watchdog", subs) = watchdog.format else {
        panic!("{:?}", watchdog.format)
    };
    let model = subs.iter().find(|s| s.name == "model").unwrap();
    assert!(model.default_key && model.optional);
    assert_eq!(model.enums, ["i6300esb", "ib700"]);
    assert_eq!(watchdog.ty, Ty::Str);
}

/// A check of the schema in one spelling (options by name), `?...` for a form it does not know.
fn schema_check(c: &Value) -> String {
    let Some((head, args)) = c.as_array().and_then(|a| a.split_first()) else {
        return format!("?{c}");
    };
    let list = |v: &Value| format!("[{}]", strs(v).join(","));
    // The `key, value` options after `fixed` arguments, by name.
    let opts = |fixed: usize| {
        let rest = args.get(fixed..).unwrap_or_default();
        let mut o: Vec<String> = rest
            .chunks(2)
            .map(|kv| match kv {
                [Value::String(k), v] if k == "any" => format!(";any={}", truthy(v)),
                [Value::String(k), Value::String(v)] => format!(";{k}={v}"),
                other => format!(";?{other:?}"),
            })
            .collect();
        o.sort();
        o.concat()
    };
    match (head.as_str().unwrap_or_default(), args) {
        (h @ ("and" | "or"), subs) => {
            let subs: Vec<String> = subs.iter().map(schema_check).collect();
            format!("{h}({})", subs.join(","))
        }
        ("perm", [Value::String(path), privs, ..]) => {
            format!("perm({path};{}{})", list(privs), opts(2))
        }
        ("userid-param", [Value::String(t)]) => format!("userid-param({t})"),
        ("userid-group", [privs, ..]) => format!("userid-group({}{})", list(privs), opts(1)),
        ("perm-modify", [Value::String(path)]) => format!("perm-modify({path})"),
        _ => format!("?{c}"),
    }
}

/// One of the table's checks in the spelling of [`schema_check`].
fn our_check(c: &Check) -> String {
    let list = |privs: &[&str]| format!("[{}]", privs.join(","));
    match c {
        Check::And(subs) | Check::Or(subs) => {
            let h = if matches!(c, Check::And(_)) {
                "and"
            } else {
                "or"
            };
            let subs: Vec<String> = subs.iter().map(our_check).collect();
            format!("{h}({})", subs.join(","))
        }
        Check::Perm {
            path,
            privs,
            any,
            require_param,
        } => {
            let mut o = Vec::new();
            if *any {
                o.push(";any=true".to_string());
            }
            if let Some(p) = require_param {
                o.push(format!(";require_param={p}"));
            }
            o.sort();
            format!("perm({path};{}{})", list(privs), o.concat())
        }
        Check::UseridParam(UseridParam::SelfUser) => "userid-param(self)".into(),
        Check::UseridParam(UseridParam::RealmAllocateUser) => {
            "userid-param(Realm.AllocateUser)".into()
        }
        Check::UseridGroup {
            privs,
            groups_param,
        } => {
            let gp = match groups_param {
                None => "",
                Some(GroupsParam::Create) => ";groups_param=create",
                Some(GroupsParam::Update) => ";groups_param=update",
            };
            format!("userid-group({}{gp})", list(privs))
        }
        Check::PermModify(path) => format!("perm-modify({path})"),
    }
}

/// A method's `permissions` (`null` when it has none) as `user=...;check=...`.
fn schema_permissions(perm: &Value) -> String {
    let user = perm["user"].as_str().unwrap_or("-");
    let check = match &perm["check"] {
        Value::Null => "-".to_string(),
        c => schema_check(c),
    };
    let unknown: Vec<&String> = perm
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .filter(|k| !["user", "check", "description"].contains(&k.as_str()))
        .collect();
    format!("user={user};check={check};unknown={unknown:?}")
}

fn our_permissions(p: &Permissions) -> String {
    let user = match p.user {
        None => "-",
        Some(PermUser::All) => "all",
        Some(PermUser::World) => "world",
    };
    let check = p.check.as_ref().map_or("-".to_string(), our_check);
    format!("user={user};check={check};unknown=[]")
}

#[test]
fn every_endpoints_permissions_are_each_schemas() {
    let mut errs = Vec::new();
    for release in PveRelease::ALL {
        let Some(tree) = schema(release) else { return };
        let idx = index(&tree);
        for ep in ENDPOINTS.iter().filter(|e| e.versions.contains(release)) {
            let where_ = format!("{} {} {}", release.as_str(), ep.method, ep.path);
            let Some(info) = idx.get(ep.path).and_then(|i| i.get(ep.method)) else {
                errs.push(format!("{where_}: not in the schema"));
                continue;
            };
            let rows: Vec<&Permissions> = ep
                .permissions
                .iter()
                .filter(|p| p.versions.contains(release))
                .collect();
            let [ours] = rows[..] else {
                errs.push(format!("{where_}: {} permission rows", rows.len()));
                continue;
            };
            let (ours, theirs) = (
                our_permissions(ours),
                schema_permissions(&info["permissions"]),
            );
            if ours != theirs {
                errs.push(format!("{where_}: {ours} != {theirs}"));
            }
        }
    }
    assert!(
        errs.is_empty(),
        "{} differences:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

/// A check list for a test's mutated checks (the table's are static).
fn leak(checks: Vec<Check>) -> &'static [Check] {
    checks.leak()
}

#[test]
fn the_permission_comparison_sees_a_changed_check() {
    let Some(tree) = schema(PveRelease::V9_1) else {
        return;
    };
    let idx = index(&tree);
    let theirs = schema_permissions(&idx["/nodes/{node}/qemu/{vmid}/clone"]["POST"]["permissions"]);
    let ours = endpoint("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .and_then(|e| e.permissions_of(PveRelease::V9_1))
        .unwrap();
    assert_eq!(our_permissions(ours), theirs);
    let Some(Check::And([source, target])) = ours.check else {
        panic!("{ours:?}")
    };
    let Check::Or([new, Check::Perm { path, privs, .. }]) = target else {
        panic!("{target:?}")
    };
    // The pool alternative without its `require_param`, `any` set, `user: all` added, the
    // order of `and` turned: each reads differently.
    let pool_without_require = Check::Perm {
        path,
        privs,
        any: false,
        require_param: None,
    };
    let pool_any = Check::Perm {
        path,
        privs,
        any: true,
        require_param: Some("pool"),
    };
    let mutations = [
        Permissions {
            check: Some(Check::And(leak(vec![
                *source,
                Check::Or(leak(vec![*new, pool_without_require])),
            ]))),
            ..*ours
        },
        Permissions {
            check: Some(Check::And(leak(vec![
                *source,
                Check::Or(leak(vec![*new, pool_any])),
            ]))),
            ..*ours
        },
        Permissions {
            user: Some(PermUser::All),
            ..*ours
        },
        Permissions {
            check: Some(Check::And(leak(vec![*target, *source]))),
            ..*ours
        },
    ];
    for m in mutations {
        assert_ne!(our_permissions(&m), theirs, "{m:?}");
    }
}
