//! The property-string codec against the official schemas: the formats are the schemas'
//! definitions key by key over both releases, every format round-trips a value using all its keys into PVE's
//! canonical order, and the canonical forms an independent PVE implementation (the simulator)
//! writes are fixed points.

use crate::support::{CT_TEMPLATE, Sim, map, wait};
use proxops_pve::props::{self, KeyKind, PropertyString, canonical_value};
use proxops_pve::{GuestRef, GuestType};
use proxops_test_support::shared;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn schema(file: &str) -> Option<Value> {
    let path = shared(&format!("pve-api/{file}"))?;
    Some(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

fn find<'a>(nodes: &'a Value, path: &str) -> Option<&'a Value> {
    for n in nodes.as_array()? {
        if n["path"] == path {
            return Some(n);
        }
        if let Some(found) = find(&n["children"], path) {
            return Some(found);
        }
    }
    None
}

/// The config keys of a guest type in a schema (the config update endpoint's parameters).
fn config_params<'a>(tree: &'a Value, guest: &str) -> &'a serde_json::Map<String, Value> {
    let (method, path) = match guest {
        "qemu" => ("POST", "/nodes/{node}/qemu/{vmid}/config"),
        _ => ("PUT", "/nodes/{node}/lxc/{vmid}/config"),
    };
    find(tree, path).unwrap()["info"][method]["parameters"]["properties"]
        .as_object()
        .unwrap()
}

fn truthy(v: &Value) -> bool {
    v.as_bool().unwrap_or(false) || v.as_i64().is_some_and(|n| n != 0)
}

/// Both schemas, oldest first, or `None` (skipped) without ../shared.
fn schemas() -> Option<[Value; 2]> {
    Some([
        schema("pve-api-8.4.2.tree.json")?,
        schema("pve-api-9.1.3.tree.json")?,
    ])
}

/// The schema's spec of a sub-key of a format with inline sub-keys, newest release first.
fn sub_spec<'a>(trees: &'a [Value; 2], f: &props::Format, key: &str) -> Option<&'a Value> {
    trees.iter().rev().find_map(|t| {
        config_params(t, f.guest)
            .get(f.param)
            .and_then(|p| p["format"].as_object())
            .and_then(|fmt| fmt.get(key))
    })
}

fn is_alias(kind: KeyKind) -> bool {
    matches!(kind, KeyKind::Alias(_) | KeyKind::KeyAlias { .. })
}

#[test]
fn formats_are_the_schemas_sub_keys_over_both_releases() {
    let Some(trees) = schemas() else { return };
    for f in props::formats() {
        let at = format!("{} {}", f.guest, f.param);
        // The sub-key names either release gives: inline, or in a named format's type text.
        let mut names = BTreeSet::new();
        for t in &trees {
            let Some(p) = config_params(t, f.guest).get(f.param) else {
                continue;
            };
            match (&p["format"], p["typetext"].as_str()) {
                (Value::Object(fmt), _) => names.extend(fmt.keys().map(String::as_str)),
                (_, Some(text)) => names.extend(
                    text.split(['[', ']', ','])
                        .filter_map(|part| part.trim().split_once('=').map(|(k, _)| k)),
                ),
                _ => panic!("{at}: no sub-keys in the schema"),
            }
        }
        let table: BTreeSet<&str> = f.keys.iter().map(|k| k.name).collect();
        assert_eq!(table, names, "{at}");
        for k in &f.keys {
            let Some(s) = sub_spec(&trees, f, k.name) else {
                continue; // a named format's key: its kind comes from the type text
            };
            let want = if let Some(target) = s["alias"].as_str() {
                match s["keyAlias"].as_str() {
                    Some(key) => KeyKind::KeyAlias {
                        key: leak(key),
                        value: leak(target),
                    },
                    None => KeyKind::Alias(leak(target)),
                }
            } else if s["type"] == "boolean" {
                KeyKind::Bool
            } else if s["format"] == "disk-size" {
                KeyKind::DiskSize
            } else {
                KeyKind::Plain
            };
            // A key one release has as a real key stays one where the newer made it an alias.
            if is_alias(want) && !is_alias(k.kind) {
                continue;
            }
            assert_eq!(k.kind, want, "{at} {}", k.name);
            let required =
                s.get("alias").is_none() && !truthy(&s["optional"]) && !truthy(&s["default_key"]);
            assert_eq!(k.required, required, "{at} {}", k.name);
            if truthy(&s["default_key"]) {
                assert_eq!(f.default_key, Some(k.name), "{at}");
            }
        }
    }
    // The keys the 8.4 client table did not have: what PVE 9.1 added.
    let agent = props::format_for(GuestType::Qemu, "agent").unwrap();
    assert_eq!(agent.key("freeze-fs").map(|k| k.kind), Some(KeyKind::Bool));
    assert_eq!(
        agent.key("freeze-fs-on-backup").map(|k| k.kind),
        Some(KeyKind::Bool),
        "8.4's key is not rewritten to 9.1's name"
    );
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// A sample value for a key per its schema spec, and what the codec should store for it.
fn sample(spec: &Value) -> (String, String) {
    if let Some(first) = spec["enum"].as_array().and_then(|e| e.first()) {
        let v = first.as_str().unwrap().to_string();
        return (v.clone(), v);
    }
    match (spec["type"].as_str(), spec["format"].as_str()) {
        (Some("boolean"), _) => ("on".into(), "1".into()),
        (Some("integer"), _) => ("3".into(), "3".into()),
        (Some("number"), _) => ("1.5".into(), "1.5".into()),
        (_, Some("disk-size")) => ("2048M".into(), "2G".into()),
        (_, Some("mac-addr")) => ("BC:24:11:AA:BB:CC".into(), "BC:24:11:AA:BB:CC".into()),
        _ => ("v1".into(), "v1".into()),
    }
}

#[test]
fn every_schema_format_round_trips_in_canonical_order() {
    let Some(trees) = schemas() else { return };
    let mut checked = 0;
    let inline = |f: &props::Format| {
        trees.iter().any(|t| {
            config_params(t, f.guest)
                .get(f.param)
                .is_some_and(|p| p["format"].is_object())
        })
    };
    for f in props::formats().iter().filter(|f| inline(f)) {
        let mut parts = Vec::new();
        let mut want = BTreeMap::new();
        // Every real key (aliases are checked below), written in reverse order, the default
        // key spelled out with its name.
        for k in f.keys.iter().rev() {
            if matches!(k.kind, KeyKind::Alias(_) | KeyKind::KeyAlias { .. }) {
                continue;
            }
            let (input, stored) = sample(sub_spec(&trees, f, k.name).unwrap());
            parts.push(format!("{}={input}", k.name));
            want.insert(k.name.to_string(), stored);
        }
        let text = parts.join(",");
        let p = PropertyString::parse(f, &text).unwrap_or_else(|e| panic!("{e}"));
        let got: BTreeMap<String, String> = p.entries().clone();
        assert_eq!(got, want, "{} {}", f.guest, f.param);
        assert!(p.unknown_keys().is_empty());
        let rendered = p.render();
        let again = PropertyString::parse(f, &rendered).unwrap();
        assert_eq!(again.entries(), p.entries(), "{rendered}");
        assert_eq!(again.render(), rendered, "render is a fixed point");
        // Order: the default key's bare value (or NAME=VALUE for a key alias), required keys,
        // then the rest by name.
        let mut rest: Vec<&str> = rendered.split(',').collect();
        if let Some(dk) = f.default_key {
            let first = rest.remove(0);
            let combined = f
                .keys
                .iter()
                .any(|k| matches!(k.kind, KeyKind::KeyAlias { key, .. } if key == dk));
            if combined {
                assert_eq!(
                    first.split('=').next(),
                    Some(want[dk].as_str()),
                    "{rendered}"
                );
            } else {
                assert_eq!(first, want[dk], "{rendered}");
            }
        }
        let names: Vec<&str> = rest.iter().map(|p| p.split('=').next().unwrap()).collect();
        let required: Vec<&str> = f
            .keys
            .iter()
            .filter(|k| k.required)
            .map(|k| k.name)
            .collect();
        assert_eq!(&names[..required.len()], required.as_slice(), "{rendered}");
        let tail = &names[required.len()..];
        assert!(tail.windows(2).all(|w| w[0] < w[1]), "{rendered}");
        // Aliases land on their target.
        for k in &f.keys {
            match k.kind {
                KeyKind::Alias(target) => {
                    let p = PropertyString::parse(f, &format!("{}=x1", k.name)).unwrap();
                    assert_eq!(p.get(target), Some("x1"), "{} {}", f.param, k.name);
                }
                KeyKind::KeyAlias { key, value } => {
                    let p =
                        PropertyString::parse(f, &format!("{}=BC:24:11:00:00:01", k.name)).unwrap();
                    assert_eq!(p.get(key), Some(k.name));
                    assert_eq!(p.get(value), Some("BC:24:11:00:00:01"));
                    assert_eq!(p.render(), format!("{}=BC:24:11:00:00:01", k.name));
                }
                _ => {}
            }
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        props::formats().iter().filter(|f| inline(f)).count()
    );
    assert!(checked >= 20, "{checked}");
}

#[tokio::test]
async fn the_simulators_canonical_forms_are_fixed_points() {
    let sim = Sim::start().await;
    let g = sim
        .create_vm(
            100,
            &[
                ("scsi0", "local-lvm:4,iothread=1,discard=on"),
                ("scsi1", "local-lvm:1,ssd=1"),
                ("ide2", "none,media=cdrom"),
                ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1"),
                ("tpmstate0", "local-lvm:1,version=v2.0"),
                ("net0", "virtio,bridge=vmbr0,firewall=1"),
                ("net1", "e1000=BC:24:11:00:00:02,bridge=vmbr0,tag=10"),
                ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
                ("agent", "1"),
                ("scsihw", "virtio-scsi-single"),
            ],
        )
        .await;
    sim.add_ct_template();
    let ct = GuestRef::lxc("pve1", 200);
    let u = sim
        .c
        .create_guest(
            &ct,
            &map(&[
                ("ostemplate", CT_TEMPLATE),
                ("rootfs", "local-lvm:8"),
                ("mp0", "local-lvm:2,mp=/srv,backup=1"),
                ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
                ("features", "nesting=1"),
            ]),
        )
        .await
        .unwrap();
    sim.c.wait_task(&u, &wait()).await.unwrap();
    // PVE re-prints disks, NICs and mount points (print_drive, print_net, ...) but stores other
    // property strings as given: for those, equality is of the parsed entries.
    let reprinted = |k: &str| {
        let stem = k.trim_end_matches(|c: char| c.is_ascii_digit());
        [
            "scsi", "ide", "sata", "virtio", "efidisk", "tpmstate", "net", "rootfs", "mp", "unused",
        ]
        .contains(&stem)
    };
    let mut checked = 0;
    for (r, kind) in [(g, GuestType::Qemu), (ct, GuestType::Lxc)] {
        let cfg = sim.c.guest_config(&r).await.unwrap();
        for (k, v) in &cfg.values {
            if props::format_for(kind, k).is_none() {
                continue;
            }
            let p = PropertyString::parse_key(kind, k, v).unwrap();
            assert!(p.unknown_keys().is_empty(), "{k}={v}");
            if reprinted(k) {
                assert_eq!(&canonical_value(kind, k, v), v, "{k}");
            } else {
                let again = PropertyString::parse_key(kind, k, &p.render()).unwrap();
                assert_eq!(again, p, "{k}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 12, "{checked}");
}
