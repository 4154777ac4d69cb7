//! Materialized payloads end to end: cluster lab of the homelab example applied with the planes
//! to a `proxops sim` server. The payloads committed beside the desired documents must be the
//! writes the apply then sends, request for request (the simulator's journal), for a creation
//! and for an update; the same source must give the same bytes; receipts name the payload they
//! applied.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::site::Site;
use crate::support::git;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Output;

const DESIRED: &str = "proxops/desired/lab";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn applied(site: &Site) {
    let out = site.proxops(&["apply", "--planes", "--yes", "--cluster", "lab"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// `get --materialized -o json`'s items by `Kind/name`.
fn payloads(site: &Site) -> BTreeMap<String, Value> {
    let out = site.proxops(&["get", "--materialized", "-o", "json", "--cluster", "lab"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "MaterializedList");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let key = format!(
                "{}/{}",
                i["kind"].as_str().unwrap(),
                i["name"].as_str().unwrap()
            );
            (key, i.clone())
        })
        .collect()
}

/// A request as (method, path, params).
fn request(method: &Value, path: &Value, params: &Value) -> Value {
    json!([
        method,
        path,
        params.as_object().cloned().unwrap_or_default()
    ])
}

/// The writes the simulator answered with success, `digest` left out (the plan adds the digest
/// of the config it read; a payload cannot know it).
fn sent(site: &Site) -> Vec<Value> {
    site.journal()
        .iter()
        .filter(|e| e["status"] == 200)
        .map(|e| {
            let mut params = e["params"].clone();
            params.as_object_mut().unwrap().remove("digest");
            request(&e["method"], &e["path"], &params)
        })
        .collect()
}

/// Every request of `items`, each payload's in its order.
fn materialized(items: &[&Value]) -> Vec<Vec<Value>> {
    items
        .iter()
        .map(|i| {
            i["spec"]["requests"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| request(&r["method"], &r["path"], &r["params"]))
                .collect()
        })
        .collect()
}

/// `journal` is exactly the requests of `payloads`, each payload's in its order (payloads of
/// different resources interleave: the apply runs them concurrently).
fn assert_same_writes(journal: &[Value], payloads: &[Vec<Value>]) {
    let mut all: Vec<String> = payloads.iter().flatten().map(Value::to_string).collect();
    let mut seen: Vec<String> = journal.iter().map(Value::to_string).collect();
    all.sort();
    seen.sort();
    assert_eq!(
        seen, all,
        "the apply sent other writes than the payloads name"
    );
    for payload in payloads {
        let positions: Vec<usize> = payload
            .iter()
            .map(|r| journal.iter().position(|j| j == r).unwrap())
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "out of order: {payload:#?}"
        );
    }
}

fn blob(site: &Site, rev: &str, path: &str) -> String {
    git(site.repo.path(), &["rev-parse", &format!("{rev}:{path}")])
        .trim()
        .to_owned()
}

/// What the receipt of `key` (`Kind/name`) names as the payload it applied.
fn receipt_names(site: &Site, key: &str) -> Value {
    let out = site.proxops(&["get", key, "-o", "json", "--cluster", "lab"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    list["items"][0]["receipt"]["spec"]["materialized"].clone()
}

#[test]
fn payloads_are_what_the_apply_sends_and_stay_the_same_bytes() {
    let site = Site::new();
    site.reset_counters();
    applied(&site);

    // One payload per resource, each of the live document, none computed against a receipt.
    let first = payloads(&site);
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        [
            "CTTemplate/debian-13-standard",
            "DiskImage/debian-13-genericcloud",
            "ISO/debian-13-netinst",
            "LXC/ci-runner-01",
            "VM/sandbox-01"
        ]
    );
    for (key, item) in &first {
        assert!(item["spec"].get("against").is_none(), "{key}: {item:#}");
        assert_eq!(
            item["spec"]["document"].as_str().unwrap(),
            blob(&site, DESIRED, &format!("resources/{key}.yaml")),
            "{key}"
        );
        assert!(item["spec"].get("error").is_none(), "{key}: {item:#}");
    }
    let vm = &first["VM/sandbox-01"]["spec"]["requests"];
    assert_eq!(vm[0]["method"], "POST");
    assert_eq!(vm[0]["path"], "/nodes/pve1/qemu");
    assert_eq!(vm[0]["params"]["vmid"], "100");
    assert_eq!(vm[0]["params"]["memory"], "2048");

    // The creation: the apply sent exactly the payloads' requests.
    let items: Vec<&Value> = first.values().collect();
    assert_same_writes(&sent(&site), &materialized(&items));

    // Each receipt names the payload it applied.
    for (key, item) in &first {
        assert_eq!(
            receipt_names(&site, key),
            json!({"path": item["path"], "blob": item["blob"]}),
            "{key}"
        );
    }

    // The same source again: nothing published, the same payload bytes.
    let head = git(site.repo.path(), &["rev-parse", DESIRED]);
    applied(&site);
    assert_eq!(git(site.repo.path(), &["rev-parse", DESIRED]), head);
    let again = payloads(&site);
    for (key, item) in &first {
        assert_eq!(again[key]["blob"], item["blob"], "{key}");
    }

    // An update: twice the memory for the sandbox. Its payload is the one config write from
    // the applied document, and that is what the apply sends.
    let path = "vm/lab/sandbox-01.yaml";
    let manifest = site.repo.read(path).replace("memory: 2GiB", "memory: 4GiB");
    site.repo.write(path, &manifest);
    site.repo.commit("sandbox: 4 GiB");
    site.reset_counters();
    applied(&site);
    let second = payloads(&site);
    let sandbox = &second["VM/sandbox-01"];
    assert_eq!(
        sandbox["spec"]["against"],
        first["VM/sandbox-01"]["spec"]["document"]
    );
    assert_eq!(
        sandbox["spec"]["requests"],
        json!([{
            "method": "PUT",
            "path": "/nodes/pve1/qemu/100/config",
            "params": {"memory": "4096"}
        }]),
        "{sandbox:#}"
    );
    // The other payloads were carried forward, byte for byte.
    for (key, item) in &first {
        if key != "VM/sandbox-01" {
            assert_eq!(second[key]["blob"], item["blob"], "{key}");
        }
    }
    assert_same_writes(&sent(&site), &materialized(&[sandbox]));
    assert_eq!(
        receipt_names(&site, "VM/sandbox-01"),
        json!({"path": sandbox["path"], "blob": sandbox["blob"]})
    );

    // For people: one row per request.
    let out = site.proxops(&["get", "VM/sandbox-01", "--materialized", "--cluster", "lab"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<String> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        rows,
        [
            "CLUSTER KIND NAME METHOD PATH PARAMS",
            "lab VM sandbox-01 PUT /nodes/pve1/qemu/100/config memory=4096"
        ]
    );
}
