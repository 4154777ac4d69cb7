//! Migrations PVE refuses are not planned (issue 29, point 5): snapshots of local volumes
//! (qemu-server `PVE/QemuMigrate.pm` `scan_local_volumes`), while a cloud-init drive on local
//! storage is migrated as PVE does (a generated volume). Engine + simulator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{apply, node_of, plan, sim, verbs, vm};
use proxops_engine::plan::Verb;
use proxops_pve::{GuestRef, Method, Params, PveClient, WaitOptions};

async fn snapshot(client: &PveClient, vmid: u32, name: &str) {
    let path = format!("/nodes/pve1/qemu/{vmid}/snapshot");
    let upid = client
        .call_json(
            Method::POST,
            "/nodes/{node}/qemu/{vmid}/snapshot",
            &path,
            &Params::new().set("snapname", name),
        )
        .await
        .unwrap();
    let upid = upid.as_str().unwrap().to_owned();
    client
        .wait_task(&upid.parse().unwrap(), &WaitOptions::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_pve_refuses_for_snapshots_of_local_volumes_is_not_planned() {
    let (sim, client) = sim().await;
    let running = vm("db", 101, "node: pve1", "local-lvm", "");
    let stopped = vm("cold", 102, "node: pve1", "local-lvm", "  state: stopped\n");
    let shared = vm("web", 103, "node: pve1", "ceph", "");
    apply(&client, &[running.clone(), stopped.clone(), shared.clone()]).await;
    for vmid in [101, 102, 103] {
        snapshot(&client, vmid, "before-upgrade").await;
    }
    let moved: Vec<String> = [&running, &stopped, &shared]
        .iter()
        .map(|t| t.replace("node: pve1", "node: pve2"))
        .collect();
    let p = plan(&client, &moved).await;
    // Only the VM whose snapshot sits on shared storage moves.
    assert_eq!(verbs(&p), [Verb::Migrate], "{p:#?}");
    assert_eq!(p.actions[0].name, "web");
    let of = |name: &str| {
        p.anomalies
            .iter()
            .find(|a| a.subject == format!("VM/{name}"))
            .unwrap_or_else(|| panic!("no anomaly for {name}: {p:#?}"))
            .message
            .clone()
    };
    assert!(
        of("db")
            .contains("online storage migration not possible if non-replicated snapshot exists"),
        "{}",
        of("db")
    );
    assert!(of("db").contains("before-upgrade"), "{}", of("db"));
    assert!(
        of("cold").contains("non-migratable snapshot exists"),
        "{}",
        of("cold")
    );

    // The simulator refuses both as PVE does.
    for (vmid, online) in [(101, true), (102, false)] {
        let upid = client
            .migrate(
                &GuestRef::qemu("pve1", vmid),
                &proxops_pve::api::ha::MigrateRequest::new("pve2")
                    .with_online(online)
                    .with_local_disks(true),
            )
            .await
            .unwrap();
        let err = client
            .wait_task(&upid, &WaitOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("snapshot exists"), "{vmid}: {err}");
        assert_eq!(node_of(&client, vmid).await.as_deref(), Some("pve1"));
    }
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_init_drive_on_local_storage_migrates_with_its_vm() {
    let (sim, client) = sim().await;
    let web = vm(
        "web",
        100,
        "node: pve1",
        "ceph",
        "  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n",
    );
    apply(&client, std::slice::from_ref(&web)).await;
    let moved = web.replace("node: pve1", "node: pve2");
    let p = apply(&client, std::slice::from_ref(&moved)).await;
    assert_eq!(verbs(&p), [Verb::Migrate], "{p:#?}");
    assert!(
        p.actions[0].reason.contains("online"),
        "{}",
        p.actions[0].reason
    );
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve2"));
    let p = plan(&client, std::slice::from_ref(&moved)).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_pve_refused_is_not_sent_again_until_the_manifest_or_the_guest_changes() {
    use proxops_engine::execute::{ExecOptions, execute};
    use proxops_engine::planner::PlanOptions;
    use proxops_engine::refusals::Refusals;

    let (sim, client) = sim().await;
    let db = vm("db", 101, "node: pve1", "ceph", "");
    apply(&client, std::slice::from_ref(&db)).await;
    // PVE refuses this VM's migration for a reason the planner cannot see.
    sim.set_faults(
        proxops_pve_sim::FaultConfig::default().with_failing_tasks(vec!["qmigrate:101".into()]),
    );
    let moved = db.replace("node: pve1", "node: pve2");
    let refusals = Refusals::default();
    let options = || {
        let mut o = PlanOptions::default();
        o.refused = refusals.of("t");
        o
    };
    let p = crate::placement::plan_with(&client, std::slice::from_ref(&moved), &options()).await;
    assert_eq!(verbs(&p), [Verb::Migrate], "{p:#?}");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(!report.all_succeeded(), "{report:#?}");
    refusals.record("t", &p, &report);
    // Not sent again, cycle after cycle: an anomaly naming PVE's refusal.
    for _ in 0..3 {
        let p =
            crate::placement::plan_with(&client, std::slice::from_ref(&moved), &options()).await;
        assert!(p.actions.is_empty(), "{p:#?}");
        assert!(
            p.anomalies[0].message.contains("not migrated again")
                && p.anomalies[0].message.contains("injected task failure"),
            "{p:#?}"
        );
    }
    // The guest changes (a tag by hand): tried again, and it goes through now.
    sim.set_faults(proxops_pve_sim::FaultConfig::default());
    client
        .set_config(
            &GuestRef::qemu("pve1", 101),
            &proxops_pve::ConfigChange::default().set("onboot", "1"),
        )
        .await
        .unwrap();
    let p = crate::placement::plan_with(&client, std::slice::from_ref(&moved), &options()).await;
    assert_eq!(verbs(&p), [Verb::Migrate], "{p:#?}");
    let report = execute(&client, &p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{report:#?}");
    refusals.record("t", &p, &report);
    assert!(refusals.of("t").is_empty(), "forgotten once it migrated");
    assert_eq!(node_of(&client, 101).await.as_deref(), Some("pve2"));
    sim.shutdown().await.unwrap();
}

/// pve-ha-manager: `hamigrate` only queues `ha-manager migrate` (`HA/Config.pm`
/// `queue_crm_commands`); the CRM moves the guest rounds later. The migration waits for the
/// cluster to show it on the target, and the next plan finds it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ha_migration_waits_for_the_ha_manager_to_move_the_guest() {
    let (sim, client) = sim().await;
    let web = vm(
        "web",
        100,
        "node: pve1",
        "ceph",
        "  ha:\n    max-restart: 1\n",
    );
    apply(&client, std::slice::from_ref(&web)).await;
    let moved = web.replace("node: pve1", "node: pve2");
    let p = plan(&client, std::slice::from_ref(&moved)).await;
    assert_eq!(verbs(&p), [Verb::Migrate], "{p:#?}");
    // Right after the request the guest is still on pve1, migrating: the CRM moves it a
    // migration's time later.
    let mut slow = proxops_pve_sim::TaskDurations::uniform(std::time::Duration::from_millis(10));
    slow.per_type
        .insert("qmigrate".into(), std::time::Duration::from_millis(1500));
    sim.set_task_durations(slow);
    let upid = client
        .migrate(
            &GuestRef::qemu("pve1", 100),
            &proxops_pve::api::ha::MigrateRequest::new("pve2").with_online(true),
        )
        .await
        .unwrap();
    assert_eq!(upid.kind, "hamigrate");
    client
        .wait_task(&upid, &WaitOptions::default())
        .await
        .unwrap();
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve1"));
    let status = client
        .call_json(
            Method::GET,
            "/cluster/ha/status/current",
            "/cluster/ha/status/current",
            &Params::new(),
        )
        .await
        .unwrap();
    let service = status
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["sid"] == "vm:100")
        .cloned()
        .unwrap();
    assert_eq!(service["crm_state"], "migrate", "{service}");
    // The engine's migration: it waits for the move, and the guest runs on pve2.
    let p = apply(&client, std::slice::from_ref(&moved)).await;
    assert!(
        verbs(&p).is_empty() || verbs(&p) == [Verb::Migrate],
        "{p:#?}"
    );
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve2"));
    let back = apply(&client, std::slice::from_ref(&web)).await;
    assert_eq!(verbs(&back), [Verb::Migrate], "{back:#?}");
    assert_eq!(node_of(&client, 100).await.as_deref(), Some("pve1"));
    let guest = GuestRef::qemu("pve1", 100);
    assert_eq!(client.guest_status(&guest).await.unwrap().status, "running");
    let p = plan(&client, std::slice::from_ref(&web)).await;
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
    sim.shutdown().await.unwrap();
}

/// pve-container `PVE/LXC/Migrate.pm` `prepare`: a bind or device mount point stops the
/// migration unless it is marked `shared=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_bind_mount_blocks_its_migration_unless_it_is_shared() {
    let (sim, client) = sim().await;
    let guest = |vmid: u32, mp: &str| -> proxops_pve_sim::Guest {
        serde_json::from_value(serde_json::json!({
            "vmid": vmid, "type": "lxc", "node": "pve1", "status": "stopped",
            "config": {
                "hostname": format!("ct{vmid}"), "memory": "512", "cores": "1",
                "rootfs": format!("ceph:vm-{vmid}-disk-0,size=1G"), "mp0": mp,
                "tags": format!("proxops;proxops.t.lxc.ct{vmid}"),
            },
        }))
        .unwrap()
    };
    sim.with_state(|st| {
        st.guests.insert(300, guest(300, "/srv/data,mp=/data"));
        st.guests
            .insert(301, guest(301, "/srv/data,mp=/data,shared=1"));
    });
    let ct = |vmid: u32| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct{vmid}\nspec:\n  node: pve2\n  vmid: {vmid}\n  state: stopped\n  template: debian\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: ceph\n    size: 1GiB\n"
        )
    };
    let template = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian\nspec:\n  nodes: [pve1, pve2]\n  storage: local\n  filename: debian.tar.zst\n  url: https://example.invalid/debian.tar.zst\n".to_owned();
    let p = plan(&client, &[template, ct(300), ct(301)]).await;
    let migrations: Vec<&str> = p
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Migrate)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(migrations, ["ct301"], "{p:#?}");
    let anomaly = p
        .anomalies
        .iter()
        .find(|a| a.subject == "LXC/ct300")
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert!(
        anomaly
            .message
            .contains("mp0 (a bind mount not marked shared=1)"),
        "{anomaly:?}"
    );
    // The simulator refuses it as pve-container does.
    let upid = client
        .migrate(
            &GuestRef::lxc("pve1", 300),
            &proxops_pve::api::ha::MigrateRequest::new("pve2"),
        )
        .await
        .unwrap();
    let err = client
        .wait_task(&upid, &WaitOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot migrate local bind mount point 'mp0'"),
        "{err}"
    );
    sim.shutdown().await.unwrap();
}

/// End to end (git repository + simulator, through the CLI): a VM whose local disk is in a
/// snapshot, moved to another node in its manifest, is reported and never migrated, cycle
/// after cycle; the cluster is not reported in sync meanwhile.
#[test]
fn apply_never_sends_a_migration_pve_refuses_for_a_snapshot() {
    let lab = crate::support::Lab::new();
    let state = lab.state.path().join("sim.json");
    let run = |command: &str| {
        let mut args = vec![command, "--planes", "--cluster", "home", "--backend", "sim"];
        if command == "apply" {
            args.push("--yes");
        }
        args.extend(["--sim-state", state.to_str().unwrap()]);
        let out = lab.proxops(&args);
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (code, said) = run("converge");
    assert_eq!(code, Some(0), "{said}");
    // A snapshot taken by hand of docker-host (vmid 120, disks on local-lvm, running).
    let file = lab.state.path().join("sim.home.json");
    let mut sim: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let config = sim["guests"]["120"]["config"].clone();
    sim["guests"]["120"]["snapshots"] = serde_json::json!(["before-upgrade"]);
    sim["guests"]["120"]["snapshot_data"] = serde_json::json!({
        "before-upgrade": {"config": config, "description": "", "snaptime": 1, "vmstate": false, "parent": null}
    });
    std::fs::write(&file, serde_json::to_vec(&sim).unwrap()).unwrap();
    let path = lab.path().join("vm/home/docker-host.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("node: pve1", "node: pve2", 1)).unwrap();
    // Its image must be on pve2 too (the same-node rule of `disks[].image`).
    let image = lab
        .path()
        .join("diskimage/base/debian-13-genericcloud.yaml");
    let text = std::fs::read_to_string(&image).unwrap();
    std::fs::write(
        &image,
        text.replacen("  nodes:\n", "  nodes:\n    - pve2\n", 1),
    )
    .unwrap();
    lab.commit("docker-host moves to pve2");
    for _ in 0..2 {
        let (code, said) = run("apply");
        assert_eq!(code, Some(1), "{said}");
        assert!(
            said.contains(
                "online storage migration not possible if non-replicated snapshot exists"
            ),
            "{said}"
        );
        assert!(!said.contains("migrate  "), "{said}");
        let sim: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(sim["guests"]["120"]["node"], "pve1", "never moved");
        let migrations = sim["tasks"]
            .as_array()
            .map(|t| t.iter().filter(|t| t["type"] == "qmigrate").count())
            .unwrap_or(0);
        assert_eq!(migrations, 0, "no migration was sent");
    }
}
