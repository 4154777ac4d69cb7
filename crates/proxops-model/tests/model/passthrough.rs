//! Passed-through devices (`hardware.pci-devices`, `hardware.usb-devices`): a raw host device or
//! a resource mapping, exactly one; and raw `lxc.*` keys, which no API user may set.

use crate::support::*;
use proxops_model::Code;

fn cluster_of(files: &[(&str, String)]) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("dev", &["pve01"]);
    repo.listing("dev", files);
    repo
}

fn vm_with(lines: &[&str]) -> proxops_model::Repository {
    let mut spec = vec!["hardware:", "  machine: q35"];
    spec.extend_from_slice(lines);
    cluster_of(&[("vm/dev/a.yaml", with_spec(&vm("a", "pve01", 142), &spec))]).load()
}

#[test]
fn a_device_is_a_raw_address_or_a_mapping() {
    for ok in [
        &[
            "  pci-devices:",
            "    - slot: hostpci0",
            "      device: 0000:03:00.0",
        ][..],
        &[
            "  pci-devices:",
            "    - slot: hostpci0",
            "      mapping: hba",
            "      pcie: true",
        ],
        &[
            "  usb-devices:",
            "    - slot: usb0",
            "      host: 0951:1666",
        ],
        &["  usb-devices:", "    - slot: usb1", "      host: 1-2.3"],
        &["  usb-devices:", "    - slot: usb2", "      host: spice"],
        &[
            "  usb-devices:",
            "    - slot: usb13",
            "      mapping: stick",
            "      usb3: true",
        ],
    ] {
        let loaded = vm_with(ok);
        assert!(errors(&loaded).is_empty(), "{ok:?}: {}", dump(&loaded));
    }
    let both = vm_with(&[
        "  pci-devices:",
        "    - slot: hostpci0",
        "      device: 0000:03:00.0",
        "      mapping: hba",
    ]);
    only_error(
        &both,
        Code::InvalidValue,
        &["`device` and `mapping` exclude each other"],
    );
    let neither = vm_with(&["  usb-devices:", "    - slot: usb0", "      usb3: true"]);
    only_error(&neither, Code::MissingField, &["needs `host` or `mapping`"]);
    let bad_id = vm_with(&[
        "  pci-devices:",
        "    - slot: hostpci0",
        "      mapping: 0hba",
    ]);
    only_error(&bad_id, Code::InvalidValue, &["`0hba` is not a mapping id"]);
    let bad_host = vm_with(&["  usb-devices:", "    - slot: usb0", "      host: '0951'"]);
    only_error(
        &bad_host,
        Code::InvalidValue,
        &["`0951` is not a USB device"],
    );
    let bad_slot = vm_with(&["  usb-devices:", "    - slot: usb14", "      host: spice"]);
    only_error(
        &bad_slot,
        Code::InvalidValue,
        &["`usb14` is not a USB slot"],
    );
    let twice = vm_with(&[
        "  usb-devices:",
        "    - slot: usb0",
        "      host: spice",
        "    - slot: usb0",
        "      mapping: stick",
    ]);
    only_error(
        &twice,
        Code::InvalidValue,
        &["USB slot `usb0` is used twice"],
    );
    // USB slots are a typed field's: not through `pve-config`.
    let raw = cluster_of(&[(
        "vm/dev/a.yaml",
        with_spec(&vm("a", "pve01", 142), &["pve-config:", "  usb0: spice"]),
    )])
    .load();
    let d = only_error(
        &raw,
        Code::PveConfigTyped,
        &["`usb0` is managed by a typed field"],
    );
    assert_eq!(d.help.as_deref(), Some("use hardware.usb-devices"));
}

#[test]
fn raw_lxc_keys_are_refused() {
    let text = with_spec(
        &lxc("ct", "pve01", 200, "tpl"),
        &["pve-config:", "  lxc.apparmor.profile: unconfined"],
    );
    let repo = cluster_of(&[
        (
            "ctt/dev/tpl.yaml",
            artifact("CTTemplate", "tpl", &["pve01"]),
        ),
        ("lxc/dev/ct.yaml", text),
    ]);
    let loaded = repo.load();
    let d = only_error(
        &loaded,
        Code::NotSettable,
        &["`lxc.apparmor.profile`", "raw LXC key"],
    );
    assert!(
        d.help
            .as_deref()
            .is_some_and(|h| h.contains("/etc/pve/lxc/200.conf")),
        "{d:?}"
    );
}
