//! Ansible's `community.proxmox` collection (bundled in the `ansible` package that
//! `scripts/pyenv` pins) against `proxops sim`: `tests/ansible/playbook.yml` runs ordinary tasks
//! (VM and container create, update, power with restarts, full and linked clones, template,
//! disks, NICs, snapshots, appliance download, ISO upload and fetch, storages, pools and their
//! members, users, ACLs, backups, info modules) and
//! every one succeeds; the dynamic inventory plugin then lists every guest that is not a
//! template. Ansible runs offline (no Galaxy, its own ANSIBLE_HOME), every run bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{ChildGuard, free_port, proxops_bin, python, wait_for_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "root@pam!ansible=ansible-token-secret";
const PASSWORD: &str = "ansible-secret";

fn ansible_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ansible")
}

/// The environment an Ansible tool runs in: nothing of the caller's PROXMOX_* or Ansible
/// settings, the test's own config and home, and no CA bundle override (requests lets
/// REQUESTS_CA_BUNDLE override a session's `verify = False`, which the inventory plugin uses).
fn ansible(tool: &Path, tmp: &Path, port: u16) -> Command {
    let mut cmd = Command::new(tool);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("PROXMOX_") || k.starts_with("ANSIBLE_") {
            cmd.env_remove(&k);
        }
    }
    let bin = tool.parent().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.current_dir(tmp)
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .env("PATH", format!("{}:{path}", bin.display()))
        .env("ANSIBLE_CONFIG", ansible_dir().join("ansible.cfg"))
        .env("ANSIBLE_HOME", tmp.join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", tmp.join("ansible-tmp"))
        .env("ANSIBLE_COLLECTIONS_PATH", tmp.join("no-collections"))
        .env("ANSIBLE_PYTHON_INTERPRETER", bin.join("python"))
        .env("PROXMOX_HOST", "127.0.0.1")
        .env("PROXMOX_PORT", port.to_string())
        .env("PROXMOX_USER", "root@pam")
        .env("PROXMOX_VALIDATE_CERTS", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs a command for at most `limit`, killing it after that.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done2 = done.clone();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done2.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Past the limit: end the child we started, by its pid.
        let _ = Command::new("kill").arg(pid.to_string()).status();
        true
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!watchdog.join().unwrap(), "{cmd:?} ran over {limit:?}");
    out
}

/// `ok=N changed=N unreachable=N failed=N skipped=N ...` of the play recap's localhost line.
fn recap(stdout: &str) -> std::collections::BTreeMap<String, u64> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("localhost") && l.contains("ok="))
        .unwrap_or_else(|| panic!("no play recap in\n{stdout}"));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
        .collect()
}

#[test]
fn community_proxmox_playbook_and_inventory_work_against_proxops_sim() {
    let Some(python) = python() else { return };
    let playbook_tool = python.with_file_name("ansible-playbook");
    if !playbook_tool.exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} is missing (run ./scripts/pyenv)",
            playbook_tool.display()
        );
        eprintln!(
            "skipping: {} is missing (run ./scripts/pyenv)",
            playbook_tool.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("sim.json");
    let port = free_port();
    let sim = Command::new(proxops_bin())
        .args([
            "sim",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token",
            TOKEN,
        ])
        .args([
            "--password",
            PASSWORD,
            "--offline-downloads",
            "--task-time",
            "50ms",
        ])
        // Names and template flags in /cluster/resources current at once (PVE's pvestatd
        // refreshes them every 10 s; the modules look guests up there right after creating).
        .args(["--stats-interval", "0s", "--state"])
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start proxops sim");
    let _sim = ChildGuard(sim);
    assert!(
        wait_for_port(port, Duration::from_secs(30)),
        "proxops sim did not listen on {port}"
    );
    let iso = tmp.path().join("upload.iso");
    let data: Vec<u8> = (0..(3 << 20)).map(|i: u32| (i % 253) as u8).collect();
    std::fs::write(&iso, &data).unwrap();

    let mut play = ansible(&playbook_tool, tmp.path(), port);
    play.args(["-i", "localhost,", "-c", "local"])
        .arg(ansible_dir().join("playbook.yml"))
        .env("PROXMOX_PASSWORD", PASSWORD)
        .env("PROXOPS_TEST_TOKEN", TOKEN)
        .env("UPLOAD_SRC", &iso);
    let out = run_bounded(play, Duration::from_secs(420));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stats = recap(&stdout);
    let tasks = std::fs::read_to_string(ansible_dir().join("playbook.yml"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("    - name:"))
        .count() as u64;
    eprintln!("ansible-playbook: {stats:?} of {tasks} tasks");
    assert!(
        out.status.success() && stats["failed"] == 0 && stats["unreachable"] == 0,
        "the playbook failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stats["ok"], tasks,
        "every task ran and succeeded:\n{stdout}"
    );

    // What the tasks did is in the simulator's state.
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let guests = st["guests"].as_object().unwrap();
    let ids: Vec<&str> = guests.keys().map(String::as_str).collect();
    assert_eq!(ids, ["100", "101", "200", "9000"], "102 was removed");
    let web = &guests["100"]["config"];
    assert_eq!(web["memory"], "2048");
    assert_eq!(guests["100"]["pool"], "lab");
    assert!(web["net1"].as_str().unwrap().contains("tag=20"), "{web}");
    assert!(
        web["unused0"].as_str().is_some(),
        "the detached disk: {web}"
    );
    assert_eq!(guests["9000"]["config"]["template"], "1");
    let ct = &guests["200"]["config"];
    assert_eq!(ct["tags"], "lab;web");
    assert!(
        ct["rootfs"].as_str().unwrap().starts_with("local-lvm:"),
        "{ct}"
    );
    let volids: Vec<&str> = st["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["volid"].as_str())
        .collect();
    for want in [
        "local:iso/upload.iso",
        "local:iso/netinst.iso",
        "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst",
    ] {
        assert!(volids.contains(&want), "no {want} in {volids:?}");
    }
    let uploaded = st["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["volid"] == "local:iso/upload.iso")
        .unwrap();
    assert_eq!(uploaded["size"], data.len() as u64);

    // Storages, users, ACLs and backups as the access, storage and backup modules left them.
    let storages: Vec<&str> = st["nodes"][0]["storages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["storage"].as_str())
        .collect();
    assert!(storages.contains(&"nas"), "{storages:?}");
    assert!(!storages.contains(&"scratch"), "removed: {storages:?}");
    assert!(
        st["users"].get("ops@pve").is_none(),
        "the user was removed: {}",
        st["users"]
    );
    let acl = st["acl"].as_array().cloned().unwrap_or_default();
    assert!(
        acl.iter().all(|e| e["principal"] != "ops@pve"
            && !(e["principal"] == "root@pam!ansible" && e["path"] == "/storage/local")),
        "grants of a deleted user and revoked grants are gone: {acl:?}"
    );
    assert!(st["pools"].get("staging").is_none(), "{}", st["pools"]);
    assert_eq!(
        st["backup_jobs"]["nightly"]["vmid"], "100",
        "the clone was added to the job and taken out again: {}",
        st["backup_jobs"]
    );
    assert!(
        volids
            .iter()
            .any(|v| v.starts_with("local:backup/vzdump-qemu-100-")),
        "no backup of VM 100 in {volids:?}"
    );

    // The dynamic inventory lists every guest that is not a template, in its pool's group.
    let (id, secret) = TOKEN.split_once('=').unwrap();
    let token_id = id.split_once('!').unwrap().1;
    let config = std::fs::read_to_string(ansible_dir().join("proxmox.yml.in"))
        .unwrap()
        .replace("@PORT@", &port.to_string())
        .replace("@TOKEN_ID@", token_id)
        .replace("@TOKEN_SECRET@", secret);
    let inventory = tmp.path().join("sim.proxmox.yml");
    std::fs::write(&inventory, config).unwrap();
    let mut list = ansible(
        &python.with_file_name("ansible-inventory"),
        tmp.path(),
        port,
    );
    list.arg("-i").arg(&inventory).arg("--list");
    let out = run_bounded(list, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ansible-inventory failed:\n{stderr}");
    assert!(!stderr.contains("Failed to parse"), "{stderr}");
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut hosts: Vec<&str> = inv["_meta"]["hostvars"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|h| *h != "pve1")
        .collect();
    hosts.sort_unstable();
    let mut want: Vec<&str> = guests
        .values()
        .filter(|g| g["config"]["template"] != "1")
        .map(|g| {
            let c = &g["config"];
            c["name"].as_str().or(c["hostname"].as_str()).unwrap()
        })
        .collect();
    want.sort_unstable();
    assert_eq!(hosts, want, "{inv}");
    let mut pool: Vec<&str> = inv["proxmox_pool_lab"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    pool.sort_unstable();
    assert_eq!(pool, ["ct1", "full-clone", "web"]);
    // ansible-inventory marks strings from the API as unsafe (`{"__ansible_unsafe": ...}`).
    let unsafe_str = |v: &Value| v.get("__ansible_unsafe").unwrap_or(v).clone();
    assert_eq!(
        unsafe_str(&inv["_meta"]["hostvars"]["pve1"]["ansible_host"]),
        "127.0.0.1"
    );
    assert_eq!(inv["_meta"]["hostvars"]["web"]["proxmox_vmid"], 100);
}
