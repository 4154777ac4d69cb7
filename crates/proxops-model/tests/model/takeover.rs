//! Containers taken over from PVE (`proxops adopt`): no `template` (PVE does not record one),
//! no `cpu.cores` when the container has all the host's CPUs, and the options real containers
//! carry (bind mounts on shared storage, host-managed interfaces).

use crate::support::*;
use proxops_model::Registry;
use proxops_model::Spec;
use proxops_model::schema::kind_schema;

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("dev", &["pve01"]);
    repo.listing("dev", files);
    repo
}

/// A container manifest as adopt writes it: no `template`, no `cpu`.
fn taken_over(lines: &[&str]) -> proxops_model::Repository {
    let text = lxc("ct", "pve01", 200, "tpl")
        .replace("  template: tpl\n", "")
        .replace("  cpu:\n    cores: 1\n", "");
    cluster_of(&[("lxc/dev/ct.yaml", with_spec(&text, lines))]).load()
}

#[test]
fn a_container_without_template_or_cores_loads_and_references_nothing() {
    let repo = taken_over(&[
        "bind-mounts:",
        "  - host-path: /mnt/pve/cephfs/media",
        "    mount-point: /media",
        "    shared: true",
        "networks:",
        "  - bridge: vmbr0",
        "    ip: dhcp",
        "    host-managed: true",
    ]);
    assert!(errors(&repo).is_empty(), "{}", dump(&repo));
    let cluster = repo.cluster("dev").unwrap();
    let r = &cluster.resources[0];
    let Spec::Lxc(spec) = &r.spec else {
        panic!("{:?}", r.spec)
    };
    assert_eq!(spec.template, None);
    assert_eq!(spec.cpu.cores, None);
    assert_eq!(spec.bind_mounts[0].shared, Some(true));
    assert_eq!(spec.networks[0].host_managed, Some(true));
    let registry = Registry::builtin();
    let kind = registry.get("LXC").unwrap();
    assert!(kind.references(&r.spec).is_empty());
    // The JSON Schema agrees: neither is required.
    let schema = kind_schema(kind);
    let text = serde_json::to_string(&schema).unwrap();
    assert!(text.contains("\"host-managed\""), "{text}");
    let spec_required: Vec<&str> = find_required(&schema, "template")
        .into_iter()
        .flatten()
        .collect();
    assert!(!spec_required.contains(&"template"), "{spec_required:?}");
    assert!(!spec_required.contains(&"cpu"), "{spec_required:?}");
    assert!(spec_required.contains(&"root"), "{spec_required:?}");
}

#[test]
fn slaac_on_a_host_managed_interface_is_refused_at_ip6() {
    let repo = taken_over(&[
        "networks:",
        "  - bridge: vmbr0",
        "    ip6: auto",
        "    host-managed: true",
    ]);
    let errs = errors(&repo);
    assert_eq!(errs.len(), 1, "{}", dump(&repo));
    assert!(errs[0].message.contains("SLAAC"), "{}", dump(&repo));
}

#[test]
fn a_named_template_must_still_resolve() {
    let text = lxc("ct", "pve01", 200, "tpl");
    let repo = cluster_of(&[("lxc/dev/ct.yaml", text)]).load();
    assert!(
        errors(&repo).iter().any(|d| d.message.contains("tpl")),
        "{}",
        dump(&repo)
    );
}

/// The `required` list of the object schema in `v` whose properties include `property`.
fn find_required<'a>(v: &'a serde_json::Value, property: &str) -> Option<Vec<&'a str>> {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("properties").and_then(|p| p.get(property)).is_some() {
                return Some(
                    m.get("required")
                        .and_then(|r| r.as_array())
                        .map(|r| r.iter().filter_map(|x| x.as_str()).collect())
                        .unwrap_or_default(),
                );
            }
            m.values().find_map(|x| find_required(x, property))
        }
        serde_json::Value::Array(a) => a.iter().find_map(|x| find_required(x, property)),
        _ => None,
    }
}

/// `disks[].volume`: the volume a slot holds, on the disk's own storage, never PVE's
/// `STORAGE:SIZE` allocation form and never beside `image`.
#[test]
fn a_disk_names_its_existing_volume_on_its_own_storage() {
    let with_volume = |volume: &str| {
        let text = vm("web", "pve01", 101).replace(
            "      size: 8GiB\n",
            &format!("      size: 8GiB\n      volume: {volume}\n"),
        );
        cluster_of(&[("vm/dev/web.yaml", text)]).load()
    };
    let ok = with_volume("local-lvm:vm-101-disk-0");
    assert!(errors(&ok).is_empty(), "{}", dump(&ok));
    let linked = with_volume("local-lvm:base-100-disk-0/vm-101-disk-0");
    assert!(errors(&linked).is_empty(), "{}", dump(&linked));
    for (volume, expected) in [
        (
            "other:vm-101-disk-0",
            "the volume is on storage `other`, the entry's `storage` is `local-lvm`",
        ),
        ("local-lvm:8", "`local-lvm:8` names no volume"),
        (
            "vm-101-disk-0",
            "is not a volume id: expected `STORAGE:NAME`",
        ),
    ] {
        let repo = with_volume(volume);
        let found = errors(&repo);
        assert_eq!(found.len(), 1, "{volume}: {}", dump(&repo));
        assert!(
            found[0].message.contains(expected),
            "{volume}: {}",
            found[0].message
        );
    }
}
