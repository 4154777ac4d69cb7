//! Conformance with PVE's official API schemas (../shared/pve-api/pve-api-8.4.2.tree.json and
//! pve-api-9.1.3.tree.json, read only here, never by the simulator): the simulator routes the
//! endpoints of the parameter table (`proxops-pve-schema`, checked against each schema there),
//! and the responses of a scripted session against a simulator
//! of that version match the schema's `returns`.

use crate::support::{Sim, enc};
use proxops_pve_sim::PveVersion;
use proxops_pve_sim::schema::ENDPOINTS;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The schema file of a version.
fn schema_file(version: PveVersion) -> &'static str {
    match version {
        PveVersion::V8_4 => "pve-api-8.4.2.tree.json",
        PveVersion::V9_1 => "pve-api-9.1.3.tree.json",
    }
}

/// The schema of a version, or `None` (test skipped) when ../shared is absent and not required.
pub(crate) fn schema(version: PveVersion) -> Option<Value> {
    let path = proxops_test_support::shared(&format!("pve-api/{}", schema_file(version)))?;
    let text = std::fs::read_to_string(&path).unwrap();
    Some(serde_json::from_str(&text).expect("the schema is JSON"))
}

pub(crate) fn index(tree: &Value) -> BTreeMap<String, Value> {
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

fn truthy(v: &Value) -> bool {
    matches!(v, Value::Bool(true)) || v.as_i64() == Some(1)
}

/// The table's rows against the schemas are `proxops-pve-schema`'s conformance test; here, that
/// the simulator routes exactly the table's endpoints.
#[test]
fn every_table_endpoint_is_routed_and_no_other() {
    let routes: BTreeSet<(&str, &str)> = proxops_pve_sim::implemented().into_iter().collect();
    let table: BTreeSet<(&str, &str)> = ENDPOINTS.iter().map(|e| (e.method, e.path)).collect();
    assert_eq!(routes, table, "routes and parameter table differ");
}

/// Fields real PVE returns beyond what its schema lists for an endpoint (checked against PVE's
/// sources and real output): the simulator returns them on purpose.
fn beyond_schema(endpoint: &str) -> &'static [&'static str] {
    match endpoint {
        // pve-container 9 `src/PVE/LXC.pm` `vmstatus` sets `pressurecpufull` of a running
        // container too, though its schema lists only the other five pressure fields.
        "GET /nodes/{node}/lxc" | "GET /nodes/{node}/lxc/{vmid}/status/current" => {
            &["type", "pressurecpufull"]
        }
        // /nodes rows come from the same resource data as /cluster/resources.
        "GET /nodes" => &["id", "type", "disk", "maxdisk"],
        // Storage rows of /cluster/resources carry the shared flag.
        "GET /cluster/resources" => &["shared"],
        // GET /storage returns each storage's whole config, not only its id.
        "GET /storage" => &["type", "content", "shared", "nodes", "digest"],
        // pve-ha-manager `src/PVE/API2/HA/Resources.pm` `index` returns each resource's whole
        // config (`$api_copy_config`: the config, `sid` and `digest`), though the schema names `sid`.
        "GET /cluster/ha/resources" => &[
            "type",
            "state",
            "digest",
            "comment",
            "max_restart",
            "max_relocate",
        ],
        // pve-manager `PVE/API2/Cluster/Mapping/PCI.pm` and `USB.pm` `index` return each
        // mapping's whole config (the section's `type`) and the config `digest`.
        "GET /cluster/mapping/pci" => &["type", "digest"],
        // The USB index sets `errors` (with `check-node` only); its 8.4 schema names a
        // required `error` instead.
        "GET /cluster/mapping/usb" => &["type", "digest", "-error"],
        // The 8.4 schema lists no fields of a VNet; 9.1's lists these (pve-network
        // `PVE/API2/Network/SDN/Vnets.pm` `index`: the VNet's config with `vnet` and `digest`).
        "GET /cluster/sdn/vnets" => &["vnet", "type", "zone", "tag", "alias", "digest"],
        // qemu-server `PVE/QemuServer.pm` `vmstatus` sets `disk: 0` for every VM ("no info
        // available"); the list and `status/current` return its rows as they are.
        "GET /nodes/{node}/qemu" | "GET /nodes/{node}/qemu/{vmid}/status/current" => &["disk"],
        // qemu-server writes `meta` into every new config; config GET returns it.
        "GET /nodes/{node}/qemu/{vmid}/config" => &["meta"],
        // Content rows name their content type.
        "GET /nodes/{node}/storage/{storage}/content" => &["content"],
        _ => &[],
    }
}

/// Checks a value against a schema `returns` node; `extra` names fields allowed beyond it, and
/// (as `-name`) required fields PVE does not send.
pub(crate) fn check_value(
    schema: &Value,
    v: &Value,
    at: &str,
    extra: &[&str],
    errs: &mut Vec<String>,
) {
    let ty = schema["type"].as_str();
    let ok = match ty {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.as_u64().is_some_and(|n| n <= 1) || v.is_boolean(),
        Some("string") => v.is_string(),
        Some("null") => v.is_null(),
        _ => true,
    };
    if !ok {
        errs.push(format!("{at}: {v} is not {}", ty.unwrap_or("?")));
        return;
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check_value(items, x, &format!("{at}[{i}]"), extra, errs);
        }
    }
    if let (Some(props), Some(obj)) = (schema["properties"].as_object(), v.as_object()) {
        let open = truthy(&schema["additionalProperties"]);
        for (k, x) in obj {
            let family = format!("{}[n]", k.trim_end_matches(|c: char| c.is_ascii_digit()));
            match props.get(k).or_else(|| props.get(&family)) {
                Some(s) => check_value(s, x, &format!("{at}.{k}"), extra, errs),
                None if !open && !extra.contains(&k.as_str()) => {
                    errs.push(format!("{at}.{k}: not in the schema's returns"))
                }
                None => {}
            }
        }
        for (k, s) in props {
            if !truthy(&s["optional"])
                && !k.ends_with("[n]")
                && !obj.contains_key(k)
                && !extra.contains(&format!("-{k}").as_str())
            {
                errs.push(format!("{at}.{k}: required but missing"));
            }
        }
    }
}

#[tokio::test]
async fn responses_match_the_schema_returns() {
    for version in PveVersion::ALL {
        let Some(tree) = schema(version) else { return };
        let errs = scripted_session(version, &index(&tree)).await;
        assert!(
            errs.is_empty(),
            "{version}: {} differences:\n{}",
            errs.len(),
            errs.join("\n")
        );
    }
}

/// Runs the scripted session against a simulator of `version`; returns the differences from
/// that version's schema `returns`.
async fn scripted_session(version: PveVersion, idx: &BTreeMap<String, Value>) -> Vec<String> {
    let sim = Sim::of(version).await;
    sim.h.with_state(|st| {
        st.volumes.push(proxops_pve_sim::Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: "local:vztmpl/debian-12.tar.zst".into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 1 << 20,
            ..Default::default()
        });
        let mapping = |entry: &str| proxops_pve_sim::Mapping {
            description: Some("d".into()),
            map: vec![entry.into()],
            ..Default::default()
        };
        st.mappings.pci.insert(
            "hba".into(),
            mapping("id=1000:0087,node=pve1,path=0000:03:00.0"),
        );
        st.mappings
            .usb
            .insert("stick".into(), mapping("id=0951:1666,node=pve1"));
        st.vnets.insert(
            "tenant1".into(),
            proxops_pve_sim::Vnet {
                zone: "tenants".into(),
                tag: Some(100),
                alias: Some("a".into()),
            },
        );
    });
    // (method, path template, request path, parameters)
    type Call<'a> = (&'a str, &'a str, String, Vec<(&'a str, &'a str)>);
    let mut calls: Vec<Call> = Vec::new();
    let create = sim
        .post(
            "/nodes/pve1/qemu",
            &[
                ("vmid", "100"),
                ("scsi0", "local-lvm:4"),
                ("net0", "virtio,bridge=vmbr0"),
                ("tags", "a"),
            ],
        )
        .await;
    let upid = create.body["data"].clone();
    sim.wait_ok(&upid).await;
    sim.wait_ok(
        &sim.post(
            "/nodes/pve1/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", "local:vztmpl/debian-12.tar.zst"),
                ("rootfs", "local-lvm:2"),
            ],
        )
        .await
        .ok(),
    )
    .await;
    // HA-managed, so that `hastate` and the `ha` status are checked too.
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
    )
    .await
    .ok();
    let u = enc(upid.as_str().unwrap());
    for (m, t, p) in [
        ("GET", "/version", "/version".to_string()),
        (
            "GET",
            "/cluster/ha/resources",
            "/cluster/ha/resources".into(),
        ),
        ("GET", "/nodes", "/nodes".into()),
        ("GET", "/cluster/mapping/pci", "/cluster/mapping/pci".into()),
        (
            "GET",
            "/cluster/mapping/pci/{id}",
            "/cluster/mapping/pci/hba".into(),
        ),
        ("GET", "/cluster/mapping/usb", "/cluster/mapping/usb".into()),
        (
            "GET",
            "/cluster/mapping/usb/{id}",
            "/cluster/mapping/usb/stick".into(),
        ),
        ("GET", "/cluster/sdn/vnets", "/cluster/sdn/vnets".into()),
        ("GET", "/nodes/{node}/status", "/nodes/pve1/status".into()),
        ("GET", "/cluster/resources", "/cluster/resources".into()),
        ("GET", "/cluster/status", "/cluster/status".into()),
        ("GET", "/storage", "/storage".into()),
        ("GET", "/nodes/{node}/qemu", "/nodes/pve1/qemu".into()),
        (
            "GET",
            "/nodes/{node}/qemu/{vmid}",
            "/nodes/pve1/qemu/100".into(),
        ),
        (
            "GET",
            "/nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve1/qemu/100/config".into(),
        ),
        (
            "GET",
            "/nodes/{node}/qemu/{vmid}/pending",
            "/nodes/pve1/qemu/100/pending".into(),
        ),
        (
            "GET",
            "/nodes/{node}/qemu/{vmid}/status/current",
            "/nodes/pve1/qemu/100/status/current".into(),
        ),
        ("GET", "/nodes/{node}/lxc", "/nodes/pve1/lxc".into()),
        (
            "GET",
            "/nodes/{node}/lxc/{vmid}",
            "/nodes/pve1/lxc/200".into(),
        ),
        (
            "GET",
            "/nodes/{node}/lxc/{vmid}/config",
            "/nodes/pve1/lxc/200/config".into(),
        ),
        (
            "GET",
            "/nodes/{node}/lxc/{vmid}/pending",
            "/nodes/pve1/lxc/200/pending".into(),
        ),
        (
            "GET",
            "/nodes/{node}/lxc/{vmid}/status/current",
            "/nodes/pve1/lxc/200/status/current".into(),
        ),
        ("GET", "/nodes/{node}/storage", "/nodes/pve1/storage".into()),
        (
            "GET",
            "/nodes/{node}/storage/{storage}/content",
            "/nodes/pve1/storage/local-lvm/content".into(),
        ),
        (
            "GET",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            format!(
                "/nodes/pve1/storage/local-lvm/content/{}",
                enc("local-lvm:vm-100-disk-0")
            ),
        ),
        ("GET", "/nodes/{node}/tasks", "/nodes/pve1/tasks".into()),
        (
            "GET",
            "/nodes/{node}/tasks/{upid}/status",
            format!("/nodes/pve1/tasks/{u}/status"),
        ),
        (
            "GET",
            "/nodes/{node}/tasks/{upid}/log",
            format!("/nodes/pve1/tasks/{u}/log"),
        ),
        (
            "PUT",
            "/nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve1/qemu/100/config".into(),
        ),
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/start",
            "/nodes/pve1/qemu/100/status/start".into(),
        ),
        (
            "PUT",
            "/nodes/{node}/lxc/{vmid}/config",
            "/nodes/pve1/lxc/200/config".into(),
        ),
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/template",
            "/nodes/pve1/lxc/200/template".into(),
        ),
    ] {
        let params: Vec<(&str, &str)> = if t.ends_with("/config") && m == "PUT" {
            vec![("description", "d")]
        } else {
            vec![]
        };
        calls.push((m, t, p, params));
    }
    let mut errs = Vec::new();
    // POST qemu create answered a string UPID.
    check_value(
        &idx["/nodes/{node}/qemu"]["POST"]["returns"],
        &upid,
        "POST /nodes/{node}/qemu",
        &[],
        &mut errs,
    );
    for (m, t, p, params) in &calls {
        let data = sim.req(m, p, params).await.ok();
        let at = format!("{m} {t}");
        check_value(
            &idx[*t][*m]["returns"],
            &data,
            &at,
            beyond_schema(&at),
            &mut errs,
        );
        if data.is_string() {
            sim.wait(&data).await;
        }
    }
    // VM 100 runs soon (HA-managed: the start only queued a request); then what a running
    // guest's rows carry (9.1: `memhost`, pressure stalls).
    for _ in 0..200 {
        let now = sim.get("/nodes/pve1/qemu/100/status/current").await.ok();
        if now["status"] == "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let running = [
        ("/nodes/{node}/qemu", "/nodes/pve1/qemu"),
        (
            "/nodes/{node}/qemu/{vmid}/status/current",
            "/nodes/pve1/qemu/100/status/current",
        ),
    ];
    for (t, p) in running {
        let data = sim.get(p).await.ok();
        let row = if data.is_array() { &data[0] } else { &data };
        assert_eq!(row["status"], "running", "{t}");
        assert_eq!(
            row.get("pressurecpusome").is_some(),
            version >= PveVersion::V9_1,
            "{version} {t}: pressure fields are PVE 9's"
        );
        let at = format!("GET {t}");
        check_value(
            &idx[t]["GET"]["returns"],
            &data,
            &at,
            beyond_schema(&at),
            &mut errs,
        );
    }
    // Writes that answer UPIDs or null, each waited for before the next.
    let writes: Vec<Call> = vec![
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve1/qemu/100/config".into(),
            vec![("name", "n")],
        ),
        (
            "PUT",
            "/nodes/{node}/qemu/{vmid}/resize",
            "/nodes/pve1/qemu/100/resize".into(),
            vec![("disk", "scsi0"), ("size", "+1G")],
        ),
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/shutdown",
            "/nodes/pve1/qemu/100/status/shutdown".into(),
            vec![],
        ),
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/status/stop",
            "/nodes/pve1/qemu/100/status/stop".into(),
            vec![],
        ),
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/clone",
            "/nodes/pve1/qemu/100/clone".into(),
            vec![("newid", "101")],
        ),
        (
            "POST",
            "/nodes/{node}/qemu/{vmid}/template",
            "/nodes/pve1/qemu/101/template".into(),
            vec![],
        ),
        (
            "DELETE",
            "/nodes/{node}/qemu/{vmid}",
            "/nodes/pve1/qemu/101".into(),
            vec![],
        ),
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/clone",
            "/nodes/pve1/lxc/200/clone".into(),
            vec![("newid", "201")],
        ),
        (
            "PUT",
            "/nodes/{node}/lxc/{vmid}/resize",
            "/nodes/pve1/lxc/201/resize".into(),
            vec![("disk", "rootfs"), ("size", "+1G")],
        ),
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/start",
            "/nodes/pve1/lxc/201/status/start".into(),
            vec![],
        ),
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/shutdown",
            "/nodes/pve1/lxc/201/status/shutdown".into(),
            vec![],
        ),
        // A stopped CT's stop is refused ("CT N not running"): start it again first.
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/start",
            "/nodes/pve1/lxc/201/status/start".into(),
            vec![],
        ),
        (
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/stop",
            "/nodes/pve1/lxc/201/status/stop".into(),
            vec![],
        ),
        (
            "DELETE",
            "/nodes/{node}/lxc/{vmid}",
            "/nodes/pve1/lxc/201".into(),
            vec![],
        ),
        (
            "DELETE",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            "/nodes/pve1/storage/local/content/vztmpl/debian-12.tar.zst".into(),
            vec![],
        ),
    ];
    for (m, t, p, params) in &writes {
        let data = sim.req(m, p, params).await.ok();
        let at = format!("{m} {t}");
        check_value(&idx[*t][*m]["returns"], &data, &at, &[], &mut errs);
        if data.is_string() {
            sim.wait(&data).await;
        }
    }
    // PVE answers nextid's integer as a string (a known quirk clients must accept).
    let next = sim.get("/cluster/nextid").await.ok();
    assert!(next.as_str().is_some_and(|s| s.parse::<u32>().is_ok()));
    assert_eq!(idx["/cluster/nextid"]["GET"]["returns"]["type"], "integer");
    errs
}

/// docs/simulator-vs-fakepve.md lists every endpoint the simulator serves, and only those.
#[test]
fn the_docs_list_the_endpoints_served() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulator-vs-fakepve.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let listed: BTreeSet<String> = text
        .split("<!-- endpoints -->")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("- `")?
                .strip_suffix('`')
                .map(str::to_owned)
        })
        .collect();
    let served: BTreeSet<String> = proxops_pve_sim::implemented()
        .into_iter()
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    let missing: Vec<_> = served.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&served).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not listed: {missing:?}; not served: {extra:?}"
    );
    // The counts the doc and the crate README state are the number served.
    let readme = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&readme).unwrap();
    for (what, claim) in [
        ("doc", format!("serves these {} endpoints", served.len())),
        ("README", format!("({} method+path pairs", served.len())),
    ] {
        let haystack = if what == "doc" { &text } else { &readme };
        assert!(
            haystack
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(&claim),
            "the {what} does not say {claim:?}"
        );
    }
}
