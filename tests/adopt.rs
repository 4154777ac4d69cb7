//! `examples/adopt` as its README walks through it, through the `proxops` binary: adopt writes
//! manifests (two VMs and a container) that validate, the next apply only tags the guests, the
//! diff after it is clean, and adopting again is refused.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{copy_tree, example, proxops_bin};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn proxops(args: &[&str]) -> Output {
    Command::new(proxops_bin())
        .args(args)
        .env_remove("PROXOPS_PVE_TOKEN")
        .output()
        .expect("run proxops")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Seeds the simulator's state file from `etc` the way the walk-through does: start
/// `proxops sim`, wait (bounded) for it to write the state, stop it.
pub(crate) fn seed(repo: &Path, etc: &Path, state: &Path) {
    let mut child = Command::new(proxops_bin())
        .args(["sim", "--listen", "127.0.0.1:0", "--state"])
        .arg(state)
        .arg("--seed-repo")
        .arg(repo)
        .arg("--seed-guest-configs")
        .arg(etc)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start proxops sim");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !state.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the write finish before stopping it.
    std::thread::sleep(Duration::from_millis(200));
    child.kill().expect("stop proxops sim");
    child.wait().expect("reap proxops sim");
    assert!(state.exists(), "proxops sim wrote no state");
}

#[test]
fn the_adopt_walk_through_works_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    copy_tree(&example("adopt/repo"), &repo);
    seed(
        &repo,
        &example("adopt/etc-pve"),
        &tmp.path().join("sim.lab.json"),
    );
    let state = tmp.path().join("sim.json");
    let (repo_s, state_s) = (repo.to_str().unwrap(), state.to_str().unwrap());
    let sim = ["--backend", "sim", "--sim-state", state_s];
    let with = |head: &[&str]| -> Output {
        let mut a: Vec<&str> = head.to_vec();
        a.extend(["--repo", repo_s]);
        a.extend(sim);
        proxops(&a)
    };

    let dry = with(&[
        "adopt",
        "--cluster",
        "lab",
        "--all",
        "--dry-run",
        "-o",
        "json",
    ]);
    assert!(dry.status.success(), "{dry:?}");
    let reports: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(reports.as_array().map(Vec::len), Some(3), "{reports:#}");
    assert!(
        !repo.join("vm/lab/proxy.yaml").exists(),
        "--dry-run wrote a manifest"
    );
    // Every key of 102.conf is in its report, `args` reported.
    let db = &reports[1];
    let keys: Vec<&str> = db["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    let conf =
        std::fs::read_to_string(example("adopt/etc-pve/nodes/pve1/qemu-server/102.conf")).unwrap();
    for line in conf.lines() {
        let key = line.split_once(':').unwrap().0;
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
    assert!(
        db["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["key"] == "args" && k["to"] == "reported")
    );
    // The container: every key of its main section, its raw `lxc.*` line and its snapshot
    // (read with `GET .../snapshot`) reported; no `template`.
    let dns = &reports[2];
    assert_eq!(dns["kind"], "LXC", "{dns:#}");
    let placed: Vec<(&str, &str)> = dns["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["key"].as_str().unwrap(), k["to"].as_str().unwrap()))
        .collect();
    let conf = std::fs::read_to_string(example("adopt/etc-pve/nodes/pve1/lxc/103.conf")).unwrap();
    for line in conf.lines().skip(1).take_while(|l| !l.is_empty()) {
        let key = line.split_once(':').unwrap().0;
        assert!(
            placed.iter().any(|(k, _)| *k == key),
            "{key} missing from {placed:?}"
        );
    }
    for key in ["lxc.cgroup2.devices.allow", "snapshot:before-upgrade"] {
        assert!(placed.contains(&(key, "reported")), "{key}: {placed:?}");
    }

    let out = with(&["adopt", "--cluster", "lab", "--all"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "vmid 101 -> vm/lab/proxy.yaml (13 keys typed, 2 via pve-config, 0 reported)\nvmid 102 -> vm/lab/db.yaml (9 keys typed, 1 via pve-config, 1 reported)\nvmid 103 -> lxc/lab/dns.yaml (14 keys typed, 0 via pve-config, 3 reported)\n"
    );
    let dns = std::fs::read_to_string(repo.join("lxc/lab/dns.yaml")).unwrap();
    assert!(!dns.contains("template:"), "{dns}");
    assert!(
        dns.contains("# not declared: lxc.cgroup2.devices.allow: "),
        "{dns}"
    );
    let v = proxops(&["validate", "--repo", repo_s]);
    assert!(v.status.success(), "{v:?}");

    let diff = with(&["diff"]);
    let text = stdout(&diff);
    assert_eq!(text.matches("    adopt ").count(), 3, "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("tags:"))
            .count(),
        3,
        "{text}"
    );
    let apply = with(&["apply", "--yes"]);
    assert!(apply.status.success(), "{apply:?}");
    let after = with(&["diff", "--detailed-exitcode"]);
    assert_eq!(after.status.code(), Some(0), "{after:?}");

    let again = with(&["adopt", "--cluster", "lab", "101", "--dry-run"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already carries the ProxOps identity")
    );
}

/// `simulation.guest-configs` seeds a fresh `--backend sim` state from an `/etc/pve` copy, with
/// no `proxops sim` step; once the state file exists it wins (the guests stay as apply left
/// them, not re-seeded untagged).
#[test]
fn a_cluster_config_seeds_the_sim_backend_from_guest_configs() {
    let (tmp, repo) = seeded_from_guest_configs();
    let confs = walk_confs(&tmp.path().join("etc-pve"));
    let state = tmp.path().join("sim.json");
    let (repo_s, state_s) = (repo.to_str().unwrap(), state.to_str().unwrap());
    let with = |head: &[&str]| -> Output {
        let mut a: Vec<&str> = head.to_vec();
        a.extend(["--repo", repo_s, "--backend", "sim", "--sim-state", state_s]);
        proxops(&a)
    };
    let v = proxops(&["validate", "--repo", repo_s]);
    assert!(v.status.success(), "{v:?}");
    let dry = with(&[
        "adopt",
        "--cluster",
        "lab",
        "--all",
        "--dry-run",
        "-o",
        "json",
    ]);
    assert!(dry.status.success(), "{dry:?}");
    let reports: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(reports.as_array().map(Vec::len), Some(confs), "{reports:#}");
    let out = with(&["adopt", "--cluster", "lab", "--all"]);
    assert!(out.status.success(), "{out:?}");
    let apply = with(&["apply", "--yes"]);
    assert!(apply.status.success(), "{apply:?}");
    let after = with(&["diff", "--detailed-exitcode"]);
    assert_eq!(after.status.code(), Some(0), "{after:?}");
}

/// examples/adopt in a temporary directory, its lab cluster seeding the simulator from the
/// example's `etc-pve` copy (`simulation.guest-configs`): (the directory, the repository).
pub(crate) fn seeded_from_guest_configs() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    copy_tree(&example("adopt/repo"), &repo);
    copy_tree(&example("adopt/etc-pve"), &tmp.path().join("etc-pve"));
    let config = repo.join("clusters/lab/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}      simulation:\n        guest-configs: ../../../etc-pve\n"),
    )
    .unwrap();
    (tmp, repo)
}

fn walk_confs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| match p.is_dir() {
            true => walk_confs(&p),
            false => usize::from(p.extension().is_some_and(|e| e == "conf")),
        })
        .sum()
}

/// PVE allows a VM without disks (network or ISO boot) and a template without any: adopt writes
/// `disks: []` for them, which validates, and the apply after it only tags them.
#[test]
fn disk_less_guests_adopt_into_manifests_that_validate_and_converge() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    copy_tree(&example("adopt/repo"), &repo);
    let etc = tmp.path().join("etc-pve");
    copy_tree(&example("adopt/etc-pve"), &etc);
    let qemu = etc.join("nodes/pve1/qemu-server");
    std::fs::write(
        qemu.join("104.conf"),
        "boot: order=net0\nmemory: 1024\nname: pxe\nnet0: virtio=bc:24:11:0a:01:04,bridge=vmbr0\n",
    )
    .unwrap();
    std::fs::write(
        qemu.join("105.conf"),
        "memory: 512\nname: shell\ntemplate: 1\n",
    )
    .unwrap();
    seed(&repo, &etc, &tmp.path().join("sim.lab.json"));
    let state = tmp.path().join("sim.json");
    let (repo_s, state_s) = (repo.to_str().unwrap(), state.to_str().unwrap());
    let with = |head: &[&str]| -> Output {
        let mut a: Vec<&str> = head.to_vec();
        a.extend(["--repo", repo_s, "--backend", "sim", "--sim-state", state_s]);
        proxops(&a)
    };
    let out = with(&["adopt", "--cluster", "lab", "104", "105"]);
    assert!(out.status.success(), "{out:?}");
    let pxe = std::fs::read_to_string(repo.join("vm/lab/pxe.yaml")).unwrap();
    assert!(pxe.contains("disks: []"), "{pxe}");
    let v = proxops(&["validate", "--repo", repo_s]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    let apply = with(&["apply", "--yes"]);
    assert!(apply.status.success(), "{apply:?}");
    let after = with(&["diff", "--detailed-exitcode"]);
    assert_eq!(after.status.code(), Some(0), "{}", stdout(&after));
}
