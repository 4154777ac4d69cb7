//! Root-only and privilege-gated config options, as qemu-server and pve-container check them.
//! The principal token is `root@pam!<name>`: it holds every privilege, yet it is not `root@pam`
//! (pve-manager `PVE/HTTPServer.pm` `auth_handler` makes the token id the request's user), so
//! every root-only option is refused to it with PVE's wording; `root@pam` by ticket may set them.

use crate::support::{Auth, PASSWORD, Sim, config, config_of};
use proxops_pve_sim::{AclEntry, ApiToken, Mapping, PveVersion, Vnet, Volume};

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// A simulator with a CT template, a PCI mapping `hba` and a USB mapping `stick` on pve1.
async fn sim() -> Sim {
    let sim = Sim::start().await;
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        });
        st.mappings.pci.insert(
            "hba".into(),
            Mapping {
                description: Some("SAS HBA".into()),
                map: vec!["id=1000:0087,node=pve1,path=0000:03:00.0".into()],
                ..Default::default()
            },
        );
        st.mappings.usb.insert(
            "stick".into(),
            Mapping {
                description: None,
                map: vec!["id=0951:1666,node=pve1".into()],
                ..Default::default()
            },
        );
    });
    sim
}

/// `root@pam` logged in with a ticket.
async fn root(sim: &Sim) -> Auth {
    let login = sim
        .send(
            "POST",
            "/access/ticket",
            &[("username", "root@pam"), ("password", PASSWORD)],
            &Auth::None,
        )
        .await
        .ok();
    Auth::Ticket {
        ticket: login["ticket"].as_str().unwrap().into(),
        csrf: Some(login["CSRFPreventionToken"].as_str().unwrap().into()),
    }
}

async fn put_vm(sim: &Sim, params: &[(&str, &str)], auth: &Auth) -> crate::support::Resp {
    sim.send("PUT", "/nodes/pve1/qemu/100/config", params, auth)
        .await
}

async fn create_ct(
    sim: &Sim,
    vmid: &str,
    extra: &[(&str, &str)],
    auth: &Auth,
) -> crate::support::Resp {
    let mut params = vec![
        ("vmid", vmid),
        ("ostemplate", TEMPLATE),
        ("rootfs", "local-lvm:4"),
    ];
    params.extend_from_slice(extra);
    sim.send("POST", "/nodes/pve1/lxc", &params, auth).await
}

// qemu-server `src/PVE/API2/Qemu.pm` `check_hostpci_perm` (create: `check_vm_create_hostpci_perm`,
// update: `update_vm_api`'s `$updatefn`).
#[tokio::test]
async fn raw_hostpci_is_root_only_and_a_mapping_needs_mapping_use() {
    let sim = sim().await;
    let token = sim.auth.clone();
    let refused = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "100"), ("hostpci0", "0000:03:00.0,pcie=1")],
        )
        .await;
    assert_eq!(
        refused.fail(500),
        "only root can set 'hostpci0' config for non-mapped devices"
    );
    sim.create_vm("100", &[("hostpci0", "mapping=hba,pcie=1")])
        .await;
    assert_eq!(
        put_vm(&sim, &[("hostpci1", "host=0000:04:00.0")], &token)
            .await
            .fail(500),
        "only root can set 'hostpci1' config for non-mapped devices"
    );
    // `romfile` stays root@pam's even on a mapped device.
    let rom = put_vm(&sim, &[("hostpci1", "mapping=hba,romfile=x.rom")], &token)
        .await
        .errors();
    assert_eq!(rom["hostpci1"], "only root@pam can set 'romfile' option");
    // root@pam may pass the raw device; afterwards a token may not even touch the slot (the old
    // value is checked too) nor delete it.
    let root = root(&sim).await;
    put_vm(&sim, &[("hostpci1", "0000:04:00.0")], &root)
        .await
        .ok();
    assert_eq!(
        put_vm(&sim, &[("hostpci1", "mapping=hba")], &token)
            .await
            .fail(500),
        "only root can set 'hostpci1' config for non-mapped devices"
    );
    assert_eq!(
        put_vm(&sim, &[("delete", "hostpci1")], &token)
            .await
            .fail(500),
        "only root can set 'hostpci1' config for non-mapped devices"
    );
    // A token without Mapping.Use on the mapping.
    let mut cfg = config();
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry {
        principal: "ops@pve!ci".into(),
        path: "/vms".into(),
        privs: vec!["*".into()],
        propagate: true,
    }]);
    let limited = Sim::with(cfg).await;
    let denied = limited
        .send(
            "POST",
            "/nodes/pve1/qemu",
            &[("vmid", "101"), ("hostpci0", "mapping=hba")],
            &Auth::Header(ops.header()),
        )
        .await;
    assert_eq!(
        denied.fail(403),
        "Permission check failed (/mapping/pci/hba, Mapping.Use)"
    );
}

// qemu-server `check_usb_perm`.
#[tokio::test]
async fn raw_usb_is_root_only_spice_and_mappings_are_not() {
    let sim = sim().await;
    sim.create_vm("100", &[]).await;
    let token = sim.auth.clone();
    for raw in ["0951:1666", "host=1-2.3"] {
        assert_eq!(
            put_vm(&sim, &[("usb0", raw)], &token).await.fail(500),
            "only root can set 'usb0' config for real devices",
            "{raw}"
        );
    }
    put_vm(&sim, &[("usb0", "spice")], &token).await.ok();
    put_vm(&sim, &[("usb1", "mapping=stick,usb3=1")], &token)
        .await
        .ok();
    let root = root(&sim).await;
    put_vm(&sim, &[("usb2", "0951:1666")], &root).await.ok();
    let config = sim.get("/nodes/pve1/qemu/100/config").await.ok();
    assert_eq!(config["usb1"], "mapping=stick,usb3=1");
    assert_eq!(config["usb2"], "0951:1666");
}

// qemu-server `$check_vm_modify_config_perm`: a key in none of its option lists.
#[tokio::test]
async fn args_is_root_only() {
    let sim = sim().await;
    sim.create_vm("100", &[]).await;
    let refused = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "101"), ("args", "-no-reboot")],
        )
        .await;
    assert_eq!(refused.fail(500), "only root can set 'args' config");
    assert_eq!(
        put_vm(&sim, &[("args", "-no-reboot")], &sim.auth)
            .await
            .fail(500),
        "only root can set 'args' config"
    );
    let root = root(&sim).await;
    put_vm(&sim, &[("args", "-no-reboot")], &root).await.ok();
    // A user other than root@pam, by ticket, with every privilege on `/`: refused too.
    let mut cfg = config();
    cfg.users.push(proxops_pve_sim::User {
        userid: "admin@pve".into(),
        password: "pw".into(),
    });
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry::admin("admin@pve")]);
    let other = Sim::with(cfg).await;
    other.create_vm("100", &[]).await;
    let login = other
        .send(
            "POST",
            "/access/ticket",
            &[("username", "admin@pve"), ("password", "pw")],
            &Auth::None,
        )
        .await
        .ok();
    let admin = Auth::Ticket {
        ticket: login["ticket"].as_str().unwrap().into(),
        csrf: Some(login["CSRFPreventionToken"].as_str().unwrap().into()),
    };
    assert_eq!(
        put_vm(&other, &[("args", "-no-reboot")], &admin)
            .await
            .fail(500),
        "only root can set 'args' config"
    );
    put_vm(&other, &[("memory", "2048")], &admin).await.ok();
}

// qemu-server `$check_vm_create_serial_perm` and `update_vm_api`: a socket is VM.Config.HWType,
// a host device root-only.
#[tokio::test]
async fn a_real_serial_device_is_root_only() {
    let sim = sim().await;
    sim.create_vm("100", &[("serial0", "socket")]).await;
    assert_eq!(
        put_vm(&sim, &[("serial1", "/dev/ttyS0")], &sim.auth)
            .await
            .fail(500),
        "only root can modify 'serial1' config for real devices"
    );
    let refused = sim
        .post(
            "/nodes/pve1/qemu",
            &[("vmid", "101"), ("serial0", "/dev/ttyS0")],
        )
        .await;
    assert_eq!(
        refused.fail(500),
        "only root can set 'serial0' config for real devices"
    );
}

/// A token `ops@pve!ci` holding `privs` on `/vms` (and Datastore.AllocateSpace on storages).
async fn limited(privs: &[&str]) -> (Sim, Auth) {
    limited_on(PveVersion::default(), privs).await
}

/// [`limited`] on a given PVE release.
async fn limited_on(version: PveVersion, privs: &[&str]) -> (Sim, Auth) {
    let mut cfg = config_of(version);
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/vms".into(),
            privs: privs.iter().map(|p| (*p).to_owned()).collect(),
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/storage".into(),
            privs: vec!["*".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    sim.h.with_state(|st| {
        st.volumes.push(Volume {
            node: "pve1".into(),
            storage: "local".into(),
            volid: TEMPLATE.into(),
            content: "vztmpl".into(),
            format: "tzst".into(),
            size: 120 << 20,
            ..Default::default()
        });
    });
    (sim, Auth::Header(ops.header()))
}

// qemu-server `$check_vm_modify_config_perm`: "special case for startup since it changes host
// behaviour" (`Sys.Modify` on `/`); pve-container's `check_ct_modify_config_perm` has no such
// case (`VM.Config.Options` only).
#[tokio::test]
async fn startup_of_a_vm_needs_sys_modify() {
    let (sim, ops) = limited(&["*"]).await;
    sim.create_vm("100", &[]).await;
    assert_eq!(
        put_vm(&sim, &[("startup", "order=2")], &ops)
            .await
            .fail(403),
        "Permission check failed (/, Sys.Modify)"
    );
    put_vm(&sim, &[("onboot", "1")], &ops).await.ok();
    let upid = create_ct(&sim, "200", &[("startup", "order=2")], &ops)
        .await
        .ok();
    sim.wait_ok(&upid).await;
    // The principal token holds Sys.Modify.
    put_vm(&sim, &[("startup", "order=2")], &sim.auth)
        .await
        .ok();
}

// qemu-server `$check_vm_modify_config_perm` (`$cloudinitoptions`, `ipconfigN`: either
// privilege, `check_vm_perm(..., 1)`) and `update_vm_api` `$check_drive_perms` (a cloud-init
// drive needs both VM.Config.Cloudinit and VM.Config.CDROM).
#[tokio::test]
async fn cloud_init_keys_accept_either_privilege_and_the_drive_needs_both() {
    let (sim, ops) = limited(&["VM.Allocate", "VM.Audit", "VM.Config.Network"]).await;
    sim.create_vm("100", &[]).await;
    put_vm(&sim, &[("ciuser", "ops"), ("ipconfig0", "ip=dhcp")], &ops)
        .await
        .ok();
    assert_eq!(
        put_vm(&sim, &[("ide2", "local-lvm:cloudinit")], &ops)
            .await
            .fail(403),
        "Permission check failed (/vms/100, VM.Config.Cloudinit)"
    );
    let (sim, ops) = limited(&["VM.Allocate", "VM.Audit", "VM.Config.Cloudinit"]).await;
    sim.create_vm("100", &[]).await;
    put_vm(&sim, &[("ciuser", "ops")], &ops).await.ok();
    assert_eq!(
        put_vm(&sim, &[("ide2", "local-lvm:cloudinit")], &ops)
            .await
            .fail(403),
        "Permission check failed (/vms/100, VM.Config.CDROM)"
    );
    let (sim, ops) = limited(&["VM.Allocate", "VM.Audit", "VM.Config.Disk"]).await;
    sim.create_vm("100", &[]).await;
    assert_eq!(
        put_vm(&sim, &[("nameserver", "1.1.1.1")], &ops)
            .await
            .fail(403),
        "Permission check failed (/vms/100, VM.Config.Cloudinit|VM.Config.Network)"
    );
    let (sim, ops) = limited(&["VM.Allocate", "VM.Config.Cloudinit", "VM.Config.CDROM"]).await;
    sim.create_vm("100", &[]).await;
    put_vm(&sim, &[("ide2", "local-lvm:cloudinit")], &ops)
        .await
        .ok();
}

// pve-container `src/PVE/LXC.pm` `check_ct_modify_config_perm`: "mount point type $type is only
// allowed for root@pam" (`classify_mountpoint`: an absolute path is a bind mount, `/dev/...` a
// device).
#[tokio::test]
async fn lxc_bind_and_device_mounts_are_root_only() {
    let sim = sim().await;
    let token = sim.auth.clone();
    let bind = create_ct(&sim, "200", &[("mp0", "/srv/data,mp=/data")], &token).await;
    assert_eq!(
        bind.fail(403),
        "Permission check failed (mount point type bind is only allowed for root@pam)"
    );
    let device = create_ct(&sim, "200", &[("mp0", "/dev/sdb1,mp=/data")], &token).await;
    assert_eq!(
        device.fail(403),
        "Permission check failed (mount point type device is only allowed for root@pam)"
    );
    let upid = create_ct(&sim, "200", &[("unprivileged", "1")], &token)
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let update = sim
        .put("/nodes/pve1/lxc/200/config", &[("mp1", "/srv/x,mp=/x")])
        .await;
    assert_eq!(
        update.fail(403),
        "Permission check failed (mount point type bind is only allowed for root@pam)"
    );
    // `dev[n]` passthrough too.
    let dev = sim
        .put("/nodes/pve1/lxc/200/config", &[("dev0", "/dev/ttyUSB0")])
        .await;
    assert_eq!(
        dev.fail(403),
        "Permission check failed (configuring device passthrough is only allowed for root@pam)"
    );
    let root = root(&sim).await;
    sim.send(
        "PUT",
        "/nodes/pve1/lxc/200/config",
        &[("mp1", "/srv/x,mp=/x"), ("mp2", "/dev/sdb1,mp=/y")],
        &root,
    )
    .await
    .ok();
}

// pve-container `check_ct_modify_config_perm`, `features`: only a change of `nesting` alone
// (with VM.Allocate) is allowed to others than root@pam.
#[tokio::test]
async fn lxc_features_other_than_nesting_are_root_only() {
    let sim = sim().await;
    let token = sim.auth.clone();
    let refused = create_ct(
        &sim,
        "200",
        &[("unprivileged", "1"), ("features", "nesting=1,keyctl=1")],
        &token,
    )
    .await;
    assert_eq!(
        refused.fail(403),
        "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)"
    );
    let upid = create_ct(
        &sim,
        "200",
        &[("unprivileged", "1"), ("features", "nesting=1")],
        &token,
    )
    .await
    .ok();
    sim.wait_ok(&upid).await;
    let put = |v: &'static str| {
        let sim = &sim;
        async move {
            sim.put("/nodes/pve1/lxc/200/config", &[("features", v)])
                .await
        }
    };
    assert_eq!(
        put("nesting=1,fuse=1").await.fail(403),
        "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)"
    );
    // Only nesting changes (booleans compare as parsed: `true` is `1`).
    put("nesting=0").await.ok();
    put("nesting=true").await.ok();
    let root = root(&sim).await;
    sim.send(
        "PUT",
        "/nodes/pve1/lxc/200/config",
        &[("features", "nesting=1,keyctl=1")],
        &root,
    )
    .await
    .ok();
    // Taking keyctl back out is a change of another feature as well.
    assert_eq!(
        put("nesting=1").await.fail(403),
        "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)"
    );
}

// pve-container `check_ct_modify_config_perm`: "changing feature flags for privileged container
// is only allowed for root@pam"; creating a privileged container needs Sys.Modify on `/`
// (`API2/LXC.pm` `create_vm`).
#[tokio::test]
async fn any_feature_change_on_a_privileged_container_is_root_only() {
    let sim = sim().await;
    let refused = create_ct(
        &sim,
        "200",
        &[("unprivileged", "0"), ("features", "nesting=1")],
        &sim.auth,
    )
    .await;
    assert_eq!(
        refused.fail(403),
        "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)"
    );
    let upid = create_ct(&sim, "200", &[("unprivileged", "0")], &sim.auth)
        .await
        .ok();
    sim.wait_ok(&upid).await;
    let update = sim
        .put("/nodes/pve1/lxc/200/config", &[("features", "nesting=1")])
        .await;
    assert_eq!(
        update.fail(403),
        "Permission check failed (changing feature flags for privileged container is only allowed for root@pam)"
    );
    let root = root(&sim).await;
    sim.send(
        "PUT",
        "/nodes/pve1/lxc/200/config",
        &[("features", "nesting=1")],
        &root,
    )
    .await
    .ok();
    let (limited, ops) = limited(&["*"]).await;
    let denied = create_ct(&limited, "201", &[("unprivileged", "0")], &ops).await;
    assert_eq!(denied.fail(403), "Permission check failed (/, Sys.Modify)");
}

// pve-container 6.0.6 (PVE 9.0) made `unprivileged` default to 1 and a privileged container
// need Sys.Modify on `/` ("api: create: default to unprivileged containers", "create/restore:
// require Sys.Modify for privileged containers"); on 8.4 the default is the schema's 0 and
// VM.Allocate is enough.
#[tokio::test]
async fn the_unprivileged_default_and_its_sys_modify_follow_the_release() {
    for (version, unprivileged) in [(PveVersion::V8_4, false), (PveVersion::V9_1, true)] {
        let (sim, ops) = limited_on(version, &["*"]).await;
        let created = create_ct(&sim, "200", &[], &ops).await.ok();
        sim.wait_ok(&created).await;
        let c = sim.get("/nodes/pve1/lxc/200/config").await.ok();
        let got = c.get("unprivileged").is_some_and(|v| v == 1);
        assert_eq!(got, unprivileged, "{version}: {c}");
        let privileged = create_ct(&sim, "201", &[("unprivileged", "0")], &ops).await;
        if unprivileged {
            assert_eq!(
                privileged.fail(403),
                "Permission check failed (/, Sys.Modify)"
            );
        } else {
            sim.wait_ok(&privileged.ok()).await;
        }
    }
}

// pve-container `src/PVE/API2/LXC/Config.pm` `update_vm` (and `API2/LXC.pm` `create_vm`): the
// parameters are the config schema with `additionalProperties => 0`, so raw `lxc.*` keys
// (which only `/etc/pve/lxc/<vmid>.conf` can hold) are refused by parameter verification, to
// root@pam as well.
#[tokio::test]
async fn raw_lxc_keys_are_never_settable_through_the_api() {
    let sim = sim().await;
    let root = root(&sim).await;
    let upid = create_ct(&sim, "200", &[("unprivileged", "1")], &root)
        .await
        .ok();
    sim.wait_ok(&upid).await;
    for auth in [&sim.auth, &root] {
        let errors = sim
            .send(
                "PUT",
                "/nodes/pve1/lxc/200/config",
                &[("lxc.apparmor.profile", "unconfined")],
                auth,
            )
            .await
            .errors();
        assert_eq!(
            errors["lxc.apparmor.profile"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        let errors = create_ct(&sim, "201", &[("lxc.cap.drop", "")], auth)
            .await
            .errors();
        assert_eq!(
            errors["lxc.cap.drop"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
    }
}

// pve-manager `PVE/API2/Cluster/Mapping/PCI.pm` and `USB.pm` `index`/`get`; qemu-server
// `QemuServer/PCI.pm` `parse_hostpci` at start: "PCI device mapping not found for '$mapping'".
#[tokio::test]
async fn mappings_are_listed_by_privilege_and_needed_on_the_node_at_start() {
    let sim = sim().await;
    let list = sim.get("/cluster/mapping/pci").await.ok();
    assert_eq!(list[0]["id"], "hba");
    assert_eq!(list[0]["type"], "pci");
    assert_eq!(
        list[0]["map"][0],
        "id=1000:0087,node=pve1,path=0000:03:00.0"
    );
    assert_eq!(list[0]["description"], "SAS HBA");
    let checked = sim
        .req("GET", "/cluster/mapping/usb", &[("check-node", "pve1")])
        .await
        .ok();
    assert_eq!(checked[0]["errors"], serde_json::json!([]));
    let one = sim.get("/cluster/mapping/usb/stick").await.ok();
    assert_eq!(one["map"][0], "id=0951:1666,node=pve1");
    assert_eq!(
        sim.get("/cluster/mapping/pci/nope").await.fail(500),
        "mapping 'nope' not found"
    );
    // A token that may not see the mapping gets an empty list and a bare 403.
    let (limited, ops) = limited(&["*"]).await;
    limited.h.with_state(|st| {
        st.mappings.pci.insert("hba".into(), Mapping::default());
    });
    let none = limited
        .send("GET", "/cluster/mapping/pci", &[], &ops)
        .await
        .ok();
    assert_eq!(none, serde_json::json!([]));
    assert_eq!(
        limited
            .send("GET", "/cluster/mapping/pci/hba", &[], &ops)
            .await
            .fail(403),
        "Permission check failed"
    );
    // Accepted at config time; a mapping that is not on the VM's node fails the start.
    sim.create_vm("100", &[("hostpci0", "mapping=gpu")]).await;
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    let status = sim.wait(&upid).await;
    assert_eq!(
        status["exitstatus"],
        "PCI device mapping not found for 'gpu'"
    );
    sim.h.with_state(|st| {
        st.mappings.pci.insert(
            "gpu".into(),
            Mapping {
                description: None,
                map: vec!["id=10de:2204,node=pve2,path=0000:17:00.0".into()],
                ..Default::default()
            },
        );
    });
    let upid = sim
        .post("/nodes/pve1/qemu/100/status/start", &[])
        .await
        .ok();
    let status = sim.wait(&upid).await;
    assert_eq!(
        status["exitstatus"],
        "PCI device mapping not found for 'gpu'"
    );
    sim.create_vm("101", &[("hostpci0", "mapping=hba")]).await;
    let upid = sim
        .post("/nodes/pve1/qemu/101/status/start", &[])
        .await
        .ok();
    sim.wait_ok(&upid).await;
}

// pve-manager `PVE/API2/Cluster.pm` `resources`: storage rows need Datastore.Audit.
#[tokio::test]
async fn storage_rows_of_cluster_resources_need_datastore_audit() {
    let mut cfg = config();
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![AclEntry {
        principal: "ops@pve!ci".into(),
        path: "/storage/local".into(),
        privs: vec!["Datastore.AllocateSpace".into()],
        propagate: true,
    }]);
    let sim = Sim::with(cfg).await;
    let rows = |auth: Auth| {
        let sim = &sim;
        async move {
            let all = sim
                .send("GET", "/cluster/resources", &[("type", "storage")], &auth)
                .await
                .ok();
            all.as_array()
                .unwrap()
                .iter()
                .map(|r| r["storage"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert!(rows(Auth::Header(ops.header())).await.is_empty());
    let mut all = rows(sim.auth.clone()).await;
    all.sort();
    assert_eq!(all, ["local", "local-lvm"]);
}

// pve-guest-common `src/PVE/GuestHelpers.pm` `check_vnet_access` (qemu-server and pve-container
// `check_bridge_access`): SDN.Use on `/sdn/zones/<zone>/<bridge>[/<tag>]`, the zone of the VNet
// (pve-network's `/cluster/sdn/vnets`), `localnetwork` for a plain bridge.
#[tokio::test]
async fn bridges_need_sdn_use_in_their_real_zone() {
    let mut cfg = config();
    let ops = ApiToken::new("ops@pve!ci", "s");
    cfg.extra_tokens.push(ops.clone());
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/vms".into(),
            privs: vec!["*".into()],
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/sdn/zones/localnetwork/vmbr0".into(),
            privs: vec!["SDN.Use".into()],
            propagate: true,
        },
        AclEntry {
            principal: "ops@pve!ci".into(),
            path: "/sdn/zones/tenants".into(),
            privs: vec!["SDN.Audit".into()],
            propagate: true,
        },
    ]);
    let sim = Sim::with(cfg).await;
    sim.h.with_state(|st| {
        st.vnets.insert(
            "tenant1".into(),
            Vnet {
                zone: "tenants".into(),
                tag: Some(100),
                alias: None,
            },
        );
    });
    let ops = Auth::Header(ops.header());
    let vnets = sim.send("GET", "/cluster/sdn/vnets", &[], &ops).await.ok();
    assert_eq!(vnets[0]["vnet"], "tenant1");
    assert_eq!(vnets[0]["zone"], "tenants");
    assert_eq!(vnets[0]["tag"], 100);
    let create = |vmid: &'static str, net: &'static str| {
        let (sim, ops) = (&sim, &ops);
        async move {
            sim.send(
                "POST",
                "/nodes/pve1/qemu",
                &[("vmid", vmid), ("net0", net)],
                ops,
            )
            .await
        }
    };
    let upid = create("100", "virtio,bridge=vmbr0").await.ok();
    sim.wait_ok(&upid).await;
    // The grant on the bridge propagates to its VLANs.
    let upid = create("101", "virtio,bridge=vmbr0,tag=20").await.ok();
    sim.wait_ok(&upid).await;
    assert_eq!(
        create("102", "virtio,bridge=vmbr1").await.fail(403),
        "Permission check failed (/sdn/zones/localnetwork/vmbr1, SDN.Use)"
    );
    assert_eq!(
        create("103", "virtio,bridge=tenant1").await.fail(403),
        "Permission check failed (/sdn/zones/tenants/tenant1, SDN.Use)"
    );
    assert_eq!(
        create("104", "virtio,bridge=vmbr1,trunks=10;20")
            .await
            .fail(403),
        "Permission check failed (/sdn/zones/localnetwork/vmbr1/10, SDN.Use)"
    );
}
