//! Power actions as qemu-server `src/PVE/API2/Qemu.pm` and pve-container
//! `src/PVE/API2/LXC/Status.pm` do them: which refusals are synchronous and which fail the
//! worker, which actions go through HA, the task names, and suspend (to RAM, to disk, and a
//! container's checkpoint).

use crate::support::{Auth, Sim, config};
use proxops_pve_sim::{AclEntry, ApiToken, Guest, GuestType};
use std::time::Duration;

const VM: &str = "/nodes/pve1/qemu/100";
const CT: &str = "/nodes/pve1/lxc/200";

async fn current(sim: &Sim, path: &str) -> serde_json::Value {
    sim.get(&format!("{path}/status/current")).await.ok()
}

async fn wait_status(sim: &Sim, path: &str, want: &str) {
    for _ in 0..300 {
        if current(sim, path).await["status"] == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path} never became {want}");
}

/// The task type in a UPID (`UPID:node:pid:pstart:starttime:TYPE:id:user:`).
fn task_type(upid: &serde_json::Value) -> String {
    upid.as_str().unwrap().split(':').nth(5).unwrap().to_owned()
}

async fn running_vm(sim: &Sim, extra: &[(&str, &str)]) {
    sim.create_vm("100", extra).await;
    sim.wait_ok(&sim.post(&format!("{VM}/status/start"), &[]).await.ok())
        .await;
}

fn add_ct(sim: &Sim, status: &str, lock: Option<&str>) {
    sim.h.with_state(|st| {
        let mut g = Guest {
            vmid: 200,
            kind: GuestType::Lxc,
            node: "pve1".into(),
            status: status.into(),
            ..Default::default()
        };
        g.config.insert("hostname".into(), "ct".into());
        if let Some(l) = lock {
            g.config.insert("lock".into(), l.into());
        }
        st.guests.insert(200, g);
    });
}

fn set_lock(sim: &Sim, vmid: u32, lock: Option<&str>) {
    sim.h.with_state(|st| {
        let g = st.guests.get_mut(&vmid).unwrap();
        match lock {
            Some(l) => g.config.insert("lock".into(), l.into()),
            None => g.config.remove("lock"),
        };
    });
}

#[tokio::test]
async fn only_start_stop_and_shutdown_go_through_ha() {
    let sim = Sim::start().await;
    running_vm(&sim, &[]).await;
    sim.post("/cluster/ha/resources", &[("sid", "vm:100")])
        .await
        .ok();
    // qemu-server forks `qmreboot`, `qmreset`, `qmpause`, `qmresume` whatever HA says.
    for (op, task) in [
        ("reboot", "qmreboot"),
        ("reset", "qmreset"),
        ("suspend", "qmpause"),
        ("resume", "qmresume"),
    ] {
        let upid = sim.post(&format!("{VM}/status/{op}"), &[]).await.ok();
        assert_eq!(task_type(&upid), task, "{op}");
        sim.wait_ok(&upid).await;
        assert_eq!(current(&sim, VM).await["status"], "running", "{op}");
    }
    let to_disk = sim
        .post(&format!("{VM}/status/suspend"), &[("todisk", "1")])
        .await
        .fail(500);
    assert_eq!(to_disk, "Cannot suspend HA managed VM to disk");
    // `ha.state` and `hastate` are the manager status's: a stop request is still `started`
    // until the LRM acted, then `stopped`.
    let upid = sim.post(&format!("{VM}/status/stop"), &[]).await.ok();
    assert_eq!(task_type(&upid), "hastop");
    sim.wait_ok(&upid).await;
    assert_eq!(current(&sim, VM).await["ha"]["state"], "started");
    wait_status(&sim, VM, "stopped").await;
    assert_eq!(current(&sim, VM).await["ha"]["state"], "stopped");
    let hastate = |rows: serde_json::Value| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == "qemu/100")
            .unwrap()["hastate"]
            .clone()
    };
    assert_eq!(hastate(sim.get("/cluster/resources").await.ok()), "stopped");
    // An ignored resource is not in the manager status: `hastate` falls back to the config.
    sim.put("/cluster/ha/resources/vm:100", &[("state", "ignored")])
        .await
        .ok();
    assert_eq!(hastate(sim.get("/cluster/resources").await.ok()), "ignored");
    assert_eq!(
        current(&sim, VM).await["ha"],
        serde_json::json!({"managed": 0})
    );
    let upid = sim.post(&format!("{VM}/status/start"), &[]).await.ok();
    assert_eq!(task_type(&upid), "qmstart");
}

#[tokio::test]
async fn refusals_answer_where_pve_answers_them() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[]).await;
    add_ct(&sim, "stopped", None);
    // pve-container refuses before forking.
    for op in ["stop", "shutdown", "suspend"] {
        let err = sim.post(&format!("{CT}/status/{op}"), &[]).await.fail(500);
        assert_eq!(err, "CT 200 not running", "{op}");
    }
    let err = sim
        .post(&format!("{CT}/status/reboot"), &[])
        .await
        .fail(500);
    assert_eq!(err, "VM 200 not running");
    // qemu-server's `_do_vm_stop` is done at once for a stopped VM.
    for op in ["stop", "shutdown"] {
        assert_eq!(sim.task_exit(&format!("{VM}/status/{op}"), &[]).await, "OK");
    }
    for op in ["reboot", "reset", "suspend", "resume"] {
        let err = sim.post(&format!("{VM}/status/{op}"), &[]).await.fail(500);
        assert_eq!(err, "VM 100 not running", "{op}");
    }
    // A paused VM: reboot and shutdown are refused; shutdown with forceStop stops it.
    sim.wait_ok(&sim.post(&format!("{VM}/status/start"), &[]).await.ok())
        .await;
    sim.wait_ok(&sim.post(&format!("{VM}/status/suspend"), &[]).await.ok())
        .await;
    assert_eq!(current(&sim, VM).await["qmpstatus"], "paused");
    for op in ["reboot", "shutdown"] {
        let err = sim.post(&format!("{VM}/status/{op}"), &[]).await.fail(500);
        assert_eq!(err, "VM is paused - cannot shutdown", "{op}");
    }
    let upid = sim
        .post(&format!("{VM}/status/shutdown"), &[("forceStop", "1")])
        .await
        .ok();
    assert_eq!(task_type(&upid), "qmshutdown");
    sim.wait_ok(&upid).await;
    assert_eq!(current(&sim, VM).await["status"], "stopped");
}

#[tokio::test]
async fn lock_checks_run_in_the_worker_with_pves_exemptions() {
    let sim = Sim::start().await;
    running_vm(&sim, &[]).await;
    // A backup does not stop a pause, a resume or a start (which only resumes the backup's
    // QEMU); it stops a reset, and a suspend to disk.
    set_lock(&sim, 100, Some("backup"));
    for op in ["suspend", "resume", "start"] {
        assert_eq!(
            sim.task_exit(&format!("{VM}/status/{op}"), &[]).await,
            "OK",
            "{op}"
        );
    }
    assert_eq!(
        sim.task_exit(&format!("{VM}/status/reset"), &[]).await,
        "VM is locked (backup)"
    );
    assert_eq!(
        sim.task_exit(&format!("{VM}/status/suspend"), &[("todisk", "1")])
            .await,
        "cannot suspend to disk during backup"
    );
    set_lock(&sim, 100, Some("clone"));
    for op in ["suspend", "reboot", "stop"] {
        assert_eq!(
            sim.task_exit(&format!("{VM}/status/{op}"), &[]).await,
            "VM is locked (clone)",
            "{op}"
        );
    }
    assert_eq!(current(&sim, VM).await["status"], "running");
    // pve-container: a `mounted` lock does not stop a start; any other lock does.
    add_ct(&sim, "stopped", Some("backup"));
    assert_eq!(
        sim.task_exit(&format!("{CT}/status/start"), &[]).await,
        "CT is locked (backup)"
    );
    set_lock(&sim, 200, Some("mounted"));
    assert_eq!(
        sim.task_exit(&format!("{CT}/status/start"), &[]).await,
        "OK"
    );
}

#[tokio::test]
async fn suspend_to_disk_saves_the_state_and_resume_starts_from_it() {
    let sim = Sim::start().await;
    running_vm(&sim, &[("scsi0", "local-lvm:4"), ("memory", "1024")]).await;
    let upid = sim
        .post(&format!("{VM}/status/suspend"), &[("todisk", "1")])
        .await
        .ok();
    assert_eq!(task_type(&upid), "qmsuspend");
    sim.wait_ok(&upid).await;
    assert!(
        sim.log(&upid)
            .await
            .contains(&"State saved, quitting".to_owned())
    );
    let config = sim.get(&format!("{VM}/config")).await.ok();
    assert_eq!(config["lock"], "suspended");
    let vmstate = config["vmstate"].as_str().unwrap().to_owned();
    assert!(
        vmstate.starts_with("local-lvm:vm-100-state-suspend-20"),
        "{vmstate}"
    );
    assert!(config["runningmachine"].is_string());
    assert_eq!(current(&sim, VM).await["status"], "stopped");
    let on_storage = |sim: &Sim| {
        let st = sim.h.state();
        st.volumes.iter().any(|v| v.volid == vmstate)
    };
    assert!(on_storage(&sim));
    // Stopped but resumable: `qmresume` starts it and frees the state.
    let upid = sim.post(&format!("{VM}/status/resume"), &[]).await.ok();
    assert_eq!(task_type(&upid), "qmresume");
    sim.wait_ok(&upid).await;
    assert_eq!(current(&sim, VM).await["status"], "running");
    let config = sim.get(&format!("{VM}/config")).await.ok();
    for key in ["lock", "vmstate", "runningmachine"] {
        assert!(config.get(key).is_none(), "{key} left: {config}");
    }
    assert!(!on_storage(&sim));
}

#[tokio::test]
async fn suspend_to_disk_checks_pci_devices_and_permissions() {
    let mut cfg = config();
    let token = |id: &str, privs: &[&str]| {
        let t = ApiToken::new(id, "s");
        let acl = AclEntry {
            principal: id.into(),
            path: "/vms".into(),
            privs: privs.iter().map(|p| (*p).to_owned()).collect(),
            propagate: true,
        };
        (t, acl)
    };
    let (power, power_acl) = token("ops@pve!power", &["VM.PowerMgmt"]);
    let (disk, disk_acl) = token("ops@pve!disk", &["VM.PowerMgmt", "VM.Config.Disk"]);
    cfg.extra_tokens.extend([power.clone(), disk.clone()]);
    cfg.acl = proxops_pve_sim::acl_with_token_users(vec![power_acl, disk_acl]);
    let sim = Sim::with(cfg).await;
    running_vm(&sim, &[("scsi0", "local-lvm:4")]).await;
    let suspend = |auth: Auth| {
        let sim = &sim;
        async move {
            sim.send(
                "POST",
                &format!("{VM}/status/suspend"),
                &[("todisk", "1")],
                &auth,
            )
            .await
        }
    };
    assert_eq!(
        suspend(Auth::Header(power.header())).await.fail(403),
        "Permission check failed (/vms/100, VM.Config.Disk)"
    );
    assert_eq!(
        suspend(Auth::Header(disk.header())).await.fail(403),
        "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)"
    );
    // Without a save/restore of their state, passed-through PCI devices refuse it.
    sim.h.with_state(|st| {
        let g = st.guests.get_mut(&100).unwrap();
        g.config.insert("hostpci0".into(), "0000:01:00.0".into());
    });
    let err = sim
        .post(&format!("{VM}/status/suspend"), &[("todisk", "1")])
        .await
        .fail(500);
    assert!(
        err.starts_with("cannot suspend VM to disk due to passed-through PCI device(s)"),
        "{err}"
    );
    // A state storage named by the caller is first allocated on in the worker.
    sim.h.with_state(|st| {
        st.guests.get_mut(&100).unwrap().config.remove("hostpci0");
    });
    assert_eq!(
        sim.task_exit(
            &format!("{VM}/status/suspend"),
            &[("todisk", "1"), ("statestorage", "nope")],
        )
        .await,
        "storage 'nope' does not exist"
    );
    assert_eq!(current(&sim, VM).await["status"], "running");
}

#[tokio::test]
async fn a_container_suspend_checkpoints_and_resume_restores_it() {
    let sim = Sim::start().await;
    add_ct(&sim, "running", None);
    let upid = sim.post(&format!("{CT}/status/suspend"), &[]).await.ok();
    assert_eq!(task_type(&upid), "vzsuspend");
    sim.wait_ok(&upid).await;
    // `lxc-checkpoint -s` leaves the container stopped.
    assert_eq!(current(&sim, CT).await["status"], "stopped");
    let upid = sim.post(&format!("{CT}/status/resume"), &[]).await.ok();
    assert_eq!(task_type(&upid), "vzresume");
    sim.wait_ok(&upid).await;
    assert_eq!(current(&sim, CT).await["status"], "running");
    let err = sim
        .post(&format!("{CT}/status/resume"), &[])
        .await
        .fail(500);
    assert_eq!(err, "CT 200 already running");
    // No checkpoint to restore: lxc-checkpoint fails.
    sim.wait_ok(&sim.post(&format!("{CT}/status/stop"), &[]).await.ok())
        .await;
    assert_eq!(
        sim.task_exit(&format!("{CT}/status/resume"), &[]).await,
        "command 'lxc-checkpoint -n 200 -r --foreground -D /var/lib/vz/dump' failed: exit code 1"
    );
}
