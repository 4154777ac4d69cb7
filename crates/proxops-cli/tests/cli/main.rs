//! The proxops-cli test binary: the `proxops` command end to end, on real directories (`demo`,
//! `install` and `secrets` in their own modules, one link for all).

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod demo;
mod doctor_objects;
mod install;
mod secrets;

use assert_cmd::Command;
use common::lab_sim;
use proxops_test_support::{ChildGuard, copy_tree, homelab, shared, write};
use std::path::Path;

pub(crate) fn proxops() -> Command {
    let mut cmd = Command::cargo_bin("proxops").expect("binary");
    cmd.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE");
    cmd
}

/// A small repository with one cluster and one broken manifest.
fn broken_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        root,
        "clusters/lab/config.yaml",
        "pve:\n  clusters:\n    lab:\n      base-url: https://lab.example.invalid:8006\n      nodes: [pve1]\n",
    );
    write(
        root,
        "clusters/lab/resources.yaml",
        "resources:\n  - ../../vm/lab/web.yaml\n",
    );
    write(
        root,
        "vm/lab/web.yaml",
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 101\n  memroy: 1GiB\n  cpu: {type: host, cores: 1}\n  disks: [{storage: local-lvm, size: 8GiB}]\n",
    );
    dir
}

#[test]
fn validates_the_compat_examples() {
    let Some(repo) = shared("compat/examples") else {
        return;
    };
    let out = proxops()
        .args(["validate", "--repo"])
        .arg(&repo)
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // Every manifest parses and the cluster stays plannable; the one error is the
    // example's placeholder SSH key, which PVE's own check refuses, and it refuses
    // only that VM.
    insta::assert_snapshot!(stdout, @r"
    cluster example: valid, 12 resources
    1 error, 0 warnings
    ");
}

#[test]
fn validates_the_homelab_example() {
    let repo = homelab();
    let out = proxops()
        .args(["validate", "--repo"])
        .arg(&repo)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("cluster home: valid"), "{stdout}");
    assert!(stdout.contains("cluster lab: valid"), "{stdout}");
    assert!(stdout.ends_with("0 errors, 0 warnings\n"), "{stdout}");
}

/// `--repo` is global: before the subcommand it means what it means after it, for a command
/// that reads a repository and for one that writes (`run`'s conflict with `--url` included).
#[test]
fn repo_goes_before_or_after_the_subcommand() {
    let repo = homelab();
    let after = proxops()
        .args(["validate", "--cluster", "lab", "--repo"])
        .arg(&repo)
        .assert()
        .success();
    let before = proxops()
        .arg("--repo")
        .arg(&repo)
        .args(["validate", "--cluster", "lab"])
        .assert()
        .success();
    assert_eq!(before.get_output().stdout, after.get_output().stdout);
    let graph = proxops()
        .arg("--repo")
        .arg(&repo)
        .args(["graph", "--cluster", "lab", "--format", "json"])
        .assert()
        .success();
    assert!(!graph.get_output().stdout.is_empty());
    for args in [
        [
            "--repo",
            "/nonexistent/proxops-repo",
            "run",
            "--url",
            "file:///x",
        ],
        [
            "run",
            "--url",
            "file:///x",
            "--repo",
            "/nonexistent/proxops-repo",
        ],
    ] {
        let out = proxops().args(args).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains("--repo and --url"), "{stderr}");
    }
}

#[test]
fn json_report_has_the_documented_shape() {
    let repo = broken_repo();
    let out = proxops()
        .args(["validate", "--output", "json", "--repo"])
        .arg(repo.path())
        .assert()
        .code(1);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    insta::assert_json_snapshot!(json, @r###"
    {
      "apiVersion": "proxops/v1alpha1",
      "clusters": [
        {
          "name": "lab",
          "resources": 0,
          "valid": false
        }
      ],
      "diagnostics": [
        {
          "cluster": "lab",
          "code": "proxops::missing_field",
          "column": 1,
          "file": "vm/lab/web.yaml",
          "help": null,
          "labels": [
            {
              "column": 1,
              "file": "vm/lab/web.yaml",
              "line": 5,
              "message": "required field missing here"
            }
          ],
          "line": 5,
          "message": "missing required field `memory`",
          "severity": "error"
        },
        {
          "cluster": "lab",
          "code": "proxops::unknown_field",
          "column": 3,
          "file": "vm/lab/web.yaml",
          "help": "did you mean `memory`?",
          "labels": [
            {
              "column": 3,
              "file": "vm/lab/web.yaml",
              "line": 8,
              "message": "unknown field"
            }
          ],
          "line": 8,
          "message": "unknown field `memroy`",
          "severity": "error"
        }
      ],
      "kind": "ValidationReport"
    }
    "###);
}

#[test]
fn human_report_goes_to_stderr_and_exits_1() {
    let repo = broken_repo();
    let out = proxops()
        .args(["validate", "--repo"])
        .arg(repo.path())
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("proxops::unknown_field"), "{stderr}");
    assert!(stderr.contains("vm/lab/web.yaml:8:3"), "{stderr}");
    assert!(stderr.contains("did you mean `memory`?"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    insta::assert_snapshot!(stdout, @r"
    cluster lab: INVALID, 0 resources
    2 errors, 0 warnings
    ");
}

#[test]
fn unknown_cluster_and_missing_repo_are_usage_errors() {
    let repo = broken_repo();
    let out = proxops()
        .args(["validate", "--cluster", "ghost", "--repo"])
        .arg(repo.path())
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("no cluster named `ghost`"), "{stderr}");
    assert!(stderr.contains("clusters here: lab"), "{stderr}");
    proxops()
        .args(["validate", "--repo", "/nonexistent/proxops-repo"])
        .assert()
        .code(2);
    proxops()
        .args(["validate", "--output", "yaml"])
        .assert()
        .code(2);
}

/// The exit-code table of README "Exit status": an agent that does not answer is 4 with a
/// hint, and under `diff --detailed-exitcode` even a usage error exits 1, never 2 ("changes").
#[test]
fn unreachable_is_4_and_detailed_exitcode_errors_are_1() {
    // Port 9 (discard) on loopback: nothing listens there in a test machine.
    let out = proxops()
        .args([
            "reconcile",
            "--cluster",
            "lab",
            "--agent",
            "http://127.0.0.1:9",
        ])
        .env_remove("PROXOPS_AGENT_TOKEN")
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.starts_with("error: no agent answers at"), "{stderr}");
    assert!(stderr.contains("\nhint: start the agent"), "{stderr}");
    let repo = broken_repo();
    proxops()
        .args(["diff", "--cluster", "ghost", "--backend", "sim", "--repo"])
        .arg(repo.path())
        .assert()
        .code(2);
    let out = proxops()
        .args([
            "diff",
            "--detailed-exitcode",
            "--cluster",
            "ghost",
            "--backend",
            "sim",
        ])
        .arg("--repo")
        .arg(repo.path())
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("no cluster named `ghost`"), "{stderr}");
}

#[test]
fn cluster_filter_narrows_the_report() {
    let dir = broken_repo();
    let root = dir.path();
    write(
        root,
        "clusters/prod/config.yaml",
        "pve:\n  clusters:\n    prod:\n      base-url: https://prod.example.invalid:8006\n",
    );
    write(root, "clusters/prod/resources.yaml", "resources: []\n");
    let out = proxops()
        .args(["validate", "--cluster", "prod", "--repo"])
        .arg(root)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(
        stdout,
        "cluster prod: valid, 0 resources\n0 errors, 0 warnings\n"
    );
}

#[test]
fn schema_writes_one_file_per_kind_and_a_combined_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    proxops()
        .args(["schema", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "acl.schema.json",
            "apitoken.schema.json",
            "backupjob.schema.json",
            "cttemplate.schema.json",
            "diskimage.schema.json",
            "firewall.schema.json",
            "group.schema.json",
            "iso.schema.json",
            "lxc.schema.json",
            "pool.schema.json",
            "proxops.schema.json",
            "resourcemapping.schema.json",
            "role.schema.json",
            "sdnsubnet.schema.json",
            "sdnvnet.schema.json",
            "sdnzone.schema.json",
            "stack.schema.json",
            "stacktemplate.schema.json",
            "storage.schema.json",
            "templatect.schema.json",
            "templatevm.schema.json",
            "user.schema.json",
            "vm.schema.json",
        ]
    );
    let combined: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("proxops.schema.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(
        combined["$schema"],
        "http://json-schema.org/draft-07/schema#"
    );
    let out = proxops().arg("schema").assert().success();
    let printed: serde_json::Value =
        serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(printed, combined);
}

/// A repository with cluster `lab` whose two VMs depend on each other.
fn cyclic_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        root,
        "clusters/lab/config.yaml",
        "pve:\n  clusters:\n    lab:\n      base-url: https://lab.example.invalid:8006\n      nodes: [pve1]\n",
    );
    write(
        root,
        "clusters/lab/resources.yaml",
        "resources:\n  - ../../vm/lab/a.yaml\n  - ../../vm/lab/b.yaml\n",
    );
    for (name, vmid, other) in [("a", 101, "b"), ("b", 102, "a")] {
        write(
            root,
            &format!("vm/lab/{name}.yaml"),
            &format!(
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\n  annotations:\n    proxops/depends-on: VM:{other}\nspec:\n  node: pve1\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks: [{{storage: local-lvm, size: 8GiB}}]\n"
            ),
        );
    }
    dir
}

#[test]
fn graph_text_shows_levels_and_prerequisites() {
    let out = proxops()
        .args(["graph", "--cluster", "home", "--repo"])
        .arg(homelab())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    insta::assert_snapshot!(stdout, @r"
    cluster home: 26 resources, 26 steps, 4 levels
      level 0
        ResourceMapping/hba                    -
        Firewall/home                          -
        SdnZone/home                           -
        Role/metrics-reader                    -
        Group/monitoring                       -
        Storage/nas                            -
        Pool/services                          -
        VM/monitoring (150)                    -
        DiskImage/debian-13-genericcloud       pve1
        ISO/debian-13-netinst                  pve1
        CTTemplate/debian-13-standard          pve1
      level 1
        SdnVnet/iot                            -     after SdnZone/home
        BackupJob/nightly                      -     after Storage/nas
        User/prometheus                        -     after Group/monitoring
        VM/jumpbox (130)                       pve1  after Firewall/home, ISO/debian-13-netinst
        LXC/pihole (200)                       pve1  after Pool/services, CTTemplate/debian-13-standard
        TemplateVM/debian-13-cloud-tpl (9000)  pve1  after DiskImage/debian-13-genericcloud
        TemplateCT/debian-13-ct-tpl (9001)     pve1  after CTTemplate/debian-13-standard
        VM/truenas (140)                       pve2  after ResourceMapping/hba, Pool/services
        VM/home-assistant (160)                pve2  after Pool/services
      level 2
        SdnSubnet/iot-v4                       -     after SdnVnet/iot
        ApiToken/prometheus-exporter           -     after User/prometheus
        VM/k3s-server-01 (110)                 pve1  after TemplateVM/debian-13-cloud-tpl
        VM/k3s-agent-01 (111)                  pve1  after TemplateVM/debian-13-cloud-tpl
        VM/docker-host (120)                   pve1  after Firewall/home, DiskImage/debian-13-genericcloud, LXC/pihole
      level 3
        Acl/monitoring                         -     after Role/metrics-reader, Group/monitoring, ApiToken/prometheus-exporter
    ");
}

#[test]
fn graph_json_has_the_documented_shape() {
    let out = proxops()
        .args(["graph", "--format", "json", "--repo"])
        .arg(homelab())
        .assert()
        .success();
    let doc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(doc["apiVersion"], "proxops/v1alpha1");
    assert_eq!(doc["kind"], "Graph");
    let clusters = doc["clusters"].as_array().expect("clusters");
    let summary: Vec<(String, usize, u64)> = clusters
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["steps"].as_array().unwrap().len(),
                c["levels"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [("home".to_owned(), 26, 4), ("lab".to_owned(), 5, 2)]
    );
    // Every step's prerequisites come before it.
    for c in clusters {
        for step in c["steps"].as_array().unwrap() {
            let index = step["index"].as_u64().unwrap();
            for before in step["after"].as_array().unwrap() {
                assert!(before.as_u64().unwrap() < index, "{step}");
            }
        }
    }
}

#[test]
fn graph_dot_renders_with_graphviz() {
    let out = proxops()
        .args(["graph", "--format", "dot", "--repo"])
        .arg(homelab())
        .assert()
        .success();
    let dot = out.get_output().stdout.clone();
    let text = String::from_utf8_lossy(&dot).into_owned();
    assert!(text.starts_with("digraph proxops {"), "{text}");
    assert!(text.contains("subgraph \"cluster_home\""), "{text}");
    assert!(text.contains("subgraph \"cluster_lab\""), "{text}");
    // Graphviz itself: CI installs it (`.ci/run`); elsewhere the check is skipped when absent.
    let mut child = match std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "Graphviz `dot` is required in CI: {e}"
            );
            eprintln!("skipping the Graphviz render: `dot` is not installed ({e})");
            return;
        }
    };
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&dot).unwrap();
    let rendered = child.wait_with_output().unwrap();
    assert!(
        rendered.status.success(),
        "{}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let svg = String::from_utf8_lossy(&rendered.stdout);
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("VM/docker&#45;host (120)"), "{svg}");
}

#[test]
fn graph_and_validate_report_a_cycle() {
    let repo = cyclic_repo();
    let out = proxops()
        .args(["graph", "--repo"])
        .arg(repo.path())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stdout, "cluster lab: INVALID (see the errors above)\n");
    assert!(stderr.contains("proxops::dependency_cycle"), "{stderr}");
    assert!(
        stderr.contains("dependency cycle between VM/a, VM/b"),
        "{stderr}"
    );

    let out = proxops()
        .args(["validate", "--output", "json", "--repo"])
        .arg(repo.path())
        .assert()
        .code(1);
    let doc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).expect("json");
    assert_eq!(doc["clusters"][0]["valid"], false);
    let codes: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["proxops::dependency_cycle"]);
}

#[test]
fn sim_prints_its_address_and_seeds_a_cluster_from_the_repository() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("proxops"))
        .args(["sim", "--listen", "127.0.0.1:0", "--cluster", "home"])
        .args(["--token", "root@pam!ci=s3cret", "--seed-repo"])
        .arg(homelab())
        .arg("--state")
        .arg(&state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut sim = ChildGuard(child);
    let stdout = sim.0.stdout.take().unwrap();
    let lines: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .take(3)
        .map(Result::unwrap)
        .collect();
    let url = lines[0].strip_prefix("url: https://").unwrap();
    let addr = url.strip_suffix("/api2/json").unwrap();
    let fingerprint = lines[1].strip_prefix("fingerprint: ").unwrap();
    assert_eq!(fingerprint.len(), 32 * 3 - 1, "{fingerprint}");
    assert!(fingerprint.split(':').all(|b| {
        b.len() == 2
            && b.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
    }));
    assert_eq!(lines[2], "token: root@pam!ci=s3cret");
    assert!(std::net::TcpStream::connect(addr).is_ok());
    // The seeded state is on disk from the start: home's nodes, with the default storages.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    assert_eq!(saved["cluster_name"], "home");
    let nodes: Vec<&str> = saved["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["pve1", "pve2"]);
    let storages: Vec<(&str, &str)> = saved["nodes"][0]["storages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["storage"].as_str().unwrap(), s["type"].as_str().unwrap()))
        .collect();
    assert_eq!(storages, [("local", "dir"), ("local-lvm", "lvmthin")]);
}

#[test]
fn sim_needs_a_cluster_when_the_repository_has_several() {
    let out = proxops()
        .args(["sim", "--listen", "127.0.0.1:0", "--seed-repo"])
        .arg(homelab())
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("the repository has 2 clusters"), "{stderr}");
    assert!(
        stderr.contains("add --cluster with one of: home, lab"),
        "{stderr}"
    );
}

/// Runs `proxops sim` with `args` until it printed its URL; returns it running.
fn sim_until_listening(args: &[&std::ffi::OsStr]) -> ChildGuard {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("proxops"))
        .args(["sim", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut sim = ChildGuard(child);
    let mut first = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(sim.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("url: https://127.0.0.1:"), "{first}");
    sim
}

/// `storage type [content]` of each storage of the first node of a state file.
fn seeded_storages(state: &Path) -> (Vec<String>, serde_json::Value) {
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    let storages = saved["nodes"][0]["storages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {} {}{}",
                s["storage"].as_str().unwrap(),
                s["type"].as_str().unwrap(),
                s["content"],
                if s["shared"] == true { " shared" } else { "" }
            )
        })
        .collect();
    (storages, saved["pve_version"].clone())
}

/// Storages as PVE has them: a fresh install's defaults of the simulated release (pve-installer
/// `Proxmox/Install/StorageConfig.pm` `get_lvm_thin_config`; `import` on `local` only from the
/// 9.0 installer), the cluster config's `simulation.storages` and `--storage`; a storage that
/// only a manifest names is not made up.
#[test]
fn sim_seeds_pve_default_storages_and_the_declared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "clusters/lab/config.yaml",
        "pve:\n  clusters:\n    lab:\n      base-url: https://lab.example.invalid:8006\n      nodes: [pve1]\n      simulation:\n        pve-version: \"8.4\"\n        storages:\n          - {name: fast-ssd, type: lvmthin, content: [images]}\n          - {name: isos, type: nfs, content: [iso], shared: true}\n",
    );
    write(
        root,
        "clusters/lab/resources.yaml",
        "resources:\n  - ../../vm/lab/web.yaml\n",
    );
    write(
        root,
        "vm/lab/web.yaml",
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 101\n  memory: 1GiB\n  cpu: {type: host, cores: 1}\n  disks: [{storage: ghost, size: 8GiB}]\n",
    );
    let state = root.join("state.json");
    let sim = sim_until_listening(&[
        "--seed-repo".as_ref(),
        root.as_os_str(),
        "--state".as_ref(),
        state.as_os_str(),
    ]);
    let (storages, version) = seeded_storages(&state);
    drop(sim);
    assert_eq!(version, "8.4", "the cluster config's release");
    assert_eq!(
        storages,
        [
            r#"local dir ["iso","vztmpl","backup"]"#,
            r#"local-lvm lvmthin ["images","rootdir"]"#,
            r#"fast-ssd lvmthin ["images"]"#,
            r#"isos nfs ["iso"] shared"#,
        ],
        "no `ghost`: only PVE's and the declared storages"
    );
    // --storage adds (or replaces) storages; --pve-version overrides the config's release.
    let state = root.join("flags.json");
    let sim = sim_until_listening(&[
        "--seed-repo".as_ref(),
        root.as_os_str(),
        "--state".as_ref(),
        state.as_os_str(),
        "--pve-version".as_ref(),
        "9.1".as_ref(),
        "--storage".as_ref(),
        "local:dir:iso,vztmpl,backup,import,rootdir".as_ref(),
        "--storage".as_ref(),
        "vm_disks:zfspool:images,rootdir".as_ref(),
    ]);
    let (storages, version) = seeded_storages(&state);
    drop(sim);
    assert_eq!(version, "9.1");
    assert_eq!(
        storages,
        [
            r#"local dir ["iso","vztmpl","backup","import","rootdir"]"#,
            r#"local-lvm lvmthin ["images","rootdir"]"#,
            r#"fast-ssd lvmthin ["images"]"#,
            r#"isos nfs ["iso"] shared"#,
            r#"vm_disks zfspool ["images","rootdir"]"#,
        ]
    );
    // A storage PVE could not have is refused, as in a cluster config.
    let out = proxops()
        .args([
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            "vm_disks:lvmthin:iso",
        ])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("a `lvmthin` storage cannot hold `iso` content"),
        "{stderr}"
    );
}

#[test]
fn apply_then_diff_on_a_persistent_simulator_shows_drift() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("lab.json");
    let sim_args = |cmd: &mut Command| {
        cmd.args(["--cluster", "lab", "--backend", "sim", "--sim-state"])
            .arg(&state)
            .arg("--repo")
            .arg(homelab());
    };
    let mut apply = proxops();
    apply.args(["apply", "--yes"]);
    sim_args(&mut apply);
    let out = apply.assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("cluster lab: 5 succeeded"), "{stdout}");
    let mut diff = proxops();
    diff.args(["diff", "--detailed-exitcode"]);
    sim_args(&mut diff);
    diff.assert()
        .code(0)
        .stdout("cluster lab: converged, nothing to do\n");
    // Someone changes the VM's memory in PVE.
    // One file per cluster, named after `--sim-state`'s: `lab.json` keeps lab in `lab.lab.json`.
    let lab_state = dir.path().join("lab.lab.json");
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lab_state).unwrap()).unwrap();
    saved["guests"]["100"]["config"]["memory"] = "8192".into();
    std::fs::write(&lab_state, saved.to_string()).unwrap();
    let mut diff = proxops();
    diff.args(["diff", "--detailed-exitcode", "--output", "json"]);
    sim_args(&mut diff);
    let out = diff.assert().code(2);
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(plan["kind"], "Plan");
    let action = &plan["clusters"][0]["actions"][0];
    assert_eq!(action["verb"], "update");
    assert_eq!(
        action["changes"],
        serde_json::json!([{"key": "memory", "from": "8192", "to": "2048"}])
    );
    // Without --yes and without a terminal, apply refuses.
    let mut apply = proxops();
    apply.arg("apply");
    sim_args(&mut apply);
    let out = apply.assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("pass --yes"), "{stderr}");
}

#[test]
fn the_prune_budget_flag_overrides_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let state = dir.path().join("home.json");
    let sim_args = |cmd: &mut Command| {
        cmd.args(["--cluster", "home", "--backend", "sim", "--sim-state"])
            .arg(&state)
            .arg("--repo")
            .arg(dir.path());
    };
    let mut apply = proxops();
    apply.args(["apply", "--yes"]);
    sim_args(&mut apply);
    apply.assert().success();
    // Three VMs leave the composition: three prunes.
    let composition = dir.path().join("clusters/home/resources.yaml");
    let text = std::fs::read_to_string(&composition).unwrap();
    let fewer = ["docker-host", "jumpbox", "k3s-agent-01"]
        .iter()
        .fold(text, |t, vm| {
            t.replace(&format!("  - ../../vm/home/{vm}.yaml\n"), "")
        });
    std::fs::write(&composition, fewer).unwrap();
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut diff = proxops();
        diff.args(["diff", "--output", "json"]).args(extra);
        sim_args(&mut diff);
        let out = diff.assert().success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let deletes = |plan: &serde_json::Value| {
        let cluster = &plan["clusters"][0];
        let n = cluster["actions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["verb"] == "delete")
            .count();
        (n, cluster["deferredPrunes"].as_array().unwrap().len())
    };
    // proxops.yaml says 2; the flag wins over it.
    assert_eq!(deletes(&plan(&[])), (2, 1));
    assert_eq!(deletes(&plan(&["--prune-budget", "1"])), (1, 2));
    assert_eq!(deletes(&plan(&["--prune-budget", "0"])), (3, 0));
}

#[test]
fn a_resource_annotated_reconcile_disabled_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let manifest = dir.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace(
            "  labels:\n",
            "  annotations:\n    proxops/reconcile: disabled\n  labels:\n",
        ),
    )
    .unwrap();
    let out = proxops()
        .args([
            "diff",
            "--cluster",
            "lab",
            "--backend",
            "sim",
            "--output",
            "json",
        ])
        .arg("--repo")
        .arg(dir.path())
        .assert()
        .success();
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let cluster = &plan["clusters"][0];
    let subjects: Vec<String> = cluster["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{}/{}",
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        !subjects.contains(&"VM/sandbox-01".to_owned()),
        "{subjects:?}"
    );
    assert!(
        subjects.contains(&"LXC/ci-runner-01".to_owned()),
        "{subjects:?}"
    );
    assert_eq!(
        cluster["skipped"],
        serde_json::json!([{
            "subject": "VM/sandbox-01",
            "reason": "suspended: annotated proxops/reconcile: disabled"
        }])
    );
}

#[test]
fn diff_against_pve_needs_credentials() {
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_LAB")
        .args(["diff", "--cluster", "lab", "--repo"])
        .arg(homelab())
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    // The example's lab cluster names a secrets file, which the example does not ship.
    assert!(
        stderr.contains("clusters/lab/secrets.sops.yaml"),
        "{stderr}"
    );
}

#[test]
fn apply_reaches_a_separate_simulator_server_like_a_real_pve() {
    let token = "root@pam!ci=separate-process";
    let (_server, url, fingerprint) = lab_sim(&["--token", token, "--offline-downloads"]);
    // The lab cluster of the example, pointed at the server and pinned to its certificate.
    let dir = lab_repo_at(&url, &fingerprint);
    let run = |args: &[&str]| {
        let mut cmd = proxops();
        cmd.env("PROXOPS_PVE_TOKEN_LAB", token)
            .args(args)
            .args(["--cluster", "lab", "--repo"])
            .arg(dir.path());
        cmd
    };
    let out = run(&["apply", "--yes"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("cluster lab: 5 succeeded, 0 failed"),
        "{stdout}"
    );
    run(&["diff", "--detailed-exitcode"]).assert().code(0);
    // A wrong pin is refused before anything is sent.
    write(
        dir.path(),
        "clusters/lab/config.yaml",
        &format!(
            "pve:\n  clusters:\n    lab:\n      base-url: {url}\n      fingerprint: {}\n      nodes: [pve1]\n",
            fingerprint.replace(|c: char| c.is_ascii_hexdigit(), "0")
        ),
    );
    let out = run(&["diff"]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("fingerprint") || stderr.contains("certificate"),
        "{stderr}"
    );
}

#[test]
fn apply_takes_credentials_from_the_clusters_sops_file() {
    let Some(sops) = proxops_test_support::sops() else {
        return;
    };
    let Some(age_keygen) = proxops_test_support::age_keygen() else {
        return;
    };
    let secret = "sops-held-token-4b1d";
    let token = format!("root@pam!ci={secret}");
    let (_server, url, fingerprint) = lab_sim(&["--token", &token, "--offline-downloads"]);

    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    copy_tree(&homelab(), &repo);
    write(
        &repo,
        "clusters/lab/config.yaml",
        &format!(
            "pve:\n  clusters:\n    lab:\n      base-url: {url}\n      fingerprint: {fingerprint}\n      nodes: [pve1]\n      secrets-file: secrets.sops.yaml\n      secrets:\n        pve:\n          user: pve-user\n          token-id: pve-token-id\n          token: pve-token\n"
        ),
    );
    // The real sops encrypts the secrets for a fresh age key.
    let key = dir.path().join("key.txt");
    let made = std::process::Command::new(&age_keygen)
        .arg("-o")
        .arg(&key)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let recipient = std::fs::read_to_string(&key)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# public key: ").map(str::to_owned))
        .unwrap();
    let plain = dir.path().join("plain.yaml");
    std::fs::write(
        &plain,
        format!("secrets:\n  pve-user: root@pam\n  pve-token-id: ci\n  pve-token: {secret}\n"),
    )
    .unwrap();
    let encrypted = std::process::Command::new(&sops)
        .args([
            "encrypt",
            "--age",
            &recipient,
            "--input-type",
            "yaml",
            "--output-type",
            "yaml",
        ])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(
        encrypted.status.success(),
        "{}",
        String::from_utf8_lossy(&encrypted.stderr)
    );
    std::fs::write(
        repo.join("clusters/lab/secrets.sops.yaml"),
        &encrypted.stdout,
    )
    .unwrap();

    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_LAB")
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", &key)
        .args(["apply", "--yes", "--cluster", "lab", "--repo"])
        .arg(&repo)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("cluster lab: 5 succeeded"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains(secret) && !stderr.contains(secret));
    // Without the key, the error says what is missing and never shows the secret.
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_LAB")
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", dir.path().join("absent.txt"))
        .env("XDG_CONFIG_HOME", dir.path())
        .args(["diff", "--cluster", "lab", "--repo"])
        .arg(&repo)
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("cluster `lab`"), "{stderr}");
    assert!(!stderr.contains(secret));
}

/// A copy of the example with its lab cluster pointed at `url`, pinned to `fingerprint`.
fn lab_repo_at(url: &str, fingerprint: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    write(
        dir.path(),
        "clusters/lab/config.yaml",
        &format!(
            "pve:\n  clusters:\n    lab:\n      base-url: {url}\n      fingerprint: {fingerprint}\n      nodes: [pve1]\n"
        ),
    );
    dir
}

fn doctor(repo: &Path, token: &str) -> Command {
    let mut cmd = proxops();
    cmd.env_remove("PROXOPS_PVE_TOKEN")
        .env("PROXOPS_PVE_TOKEN_LAB", token)
        .args(["doctor", "--cluster", "lab", "--repo"])
        .arg(repo);
    cmd
}

/// Every PVE privilege but `VM.Allocate`.
const ALL_BUT_VM_ALLOCATE: &str = "Datastore.Allocate,Datastore.AllocateSpace,Datastore.AllocateTemplate,Datastore.Audit,Pool.Audit,SDN.Audit,SDN.Use,Sys.AccessNetwork,Sys.Audit,Sys.Console,Sys.Modify,VM.Audit,VM.Backup,VM.Clone,VM.Config.CDROM,VM.Config.CPU,VM.Config.Cloudinit,VM.Config.Disk,VM.Config.HWType,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.Console,VM.Migrate,VM.PowerMgmt,VM.Snapshot";

#[test]
fn doctor_passes_with_a_privileged_token_and_names_what_a_limited_one_lacks() {
    let admin = "root@pam!ci=doctor-admin";
    let limited = "ops@pve!doctor=doctor-limited";
    let acl = format!("ops@pve!doctor:/:{ALL_BUT_VM_ALLOCATE}");
    // A privilege-separated token holds only what its user holds too.
    let user_acl = format!("ops@pve:/:{ALL_BUT_VM_ALLOCATE}");
    let (_server, url, fingerprint) = lab_sim(&[
        "--token",
        admin,
        "--extra-token",
        limited,
        "--acl",
        &acl,
        "--acl",
        &user_acl,
        "--offline-downloads",
    ]);
    let repo = lab_repo_at(&url, &fingerprint);

    // The principal token holds everything: every check passes.
    let out = doctor(repo.path(), admin).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for check in ["config", "credentials", "endpoint", "auth", "privileges"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with("ok") && l.contains(check)),
            "{check}: {stdout}"
        );
    }
    assert!(stdout.contains("pinned fingerprint"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    assert!(
        !stdout.contains("doctor-admin"),
        "the secret never shows: {stdout}"
    );

    // A token without VM.Allocate: the guests the plan creates name it, with their paths.
    let out = doctor(repo.path(), limited).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let failures: Vec<&str> = stdout.lines().filter(|l| l.contains("FAIL")).collect();
    assert!(
        failures.iter().any(|l| l.contains("privileges")
            && l.contains("VM.Allocate on /vms/100")
            && l.contains("create VM/sandbox-01")),
        "{stdout}"
    );
    assert!(
        failures
            .iter()
            .any(|l| l.contains("VM.Allocate on /vms/200") && l.contains("LXC/ci-runner-01")),
        "{stdout}"
    );
    // Only VM.Allocate is missing.
    assert_eq!(failures.len(), 2, "{stdout}");
    assert!(
        stdout.contains("authenticated as API token ops@pve!doctor"),
        "{stdout}"
    );

    // A wrong secret: the endpoint answers, authentication fails.
    let out = doctor(repo.path(), "ops@pve!doctor=wrong").assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("ok") && l.contains("endpoint")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("auth")),
        "{stdout}"
    );

    // A wrong pin: the endpoint check fails, and nothing after it runs.
    let wrong = fingerprint.replace(|c: char| c.is_ascii_hexdigit(), "0");
    let repo = lab_repo_at(&url, &wrong);
    let out = doctor(repo.path(), admin).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("FAIL") && l.contains("endpoint") && l.contains("certificate")),
        "{stdout}"
    );
    // No `auth` check ran (the `pve.auth` setting line is not a check).
    assert!(
        !stdout
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("auth")),
        "{stdout}"
    );
}

/// A failed action's line names its kind and PVE's status before the message: here a token
/// without `VM.Allocate` applies, the downloads succeed and both creates are refused with 403.
#[test]
fn apply_prints_a_failed_actions_kind_and_status() {
    let admin = "root@pam!ci=failed-admin";
    let limited = "ops@pve!apply=failed-limited";
    let acl = format!("ops@pve!apply:/:{ALL_BUT_VM_ALLOCATE}");
    // A privilege-separated token holds only what its user holds too.
    let user_acl = format!("ops@pve:/:{ALL_BUT_VM_ALLOCATE}");
    let (_server, url, fingerprint) = lab_sim(&[
        "--token",
        admin,
        "--extra-token",
        limited,
        "--acl",
        &acl,
        "--acl",
        &user_acl,
        "--offline-downloads",
    ]);
    let repo = lab_repo_at(&url, &fingerprint);
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env("PROXOPS_PVE_TOKEN_LAB", limited)
        .args(["apply", "--yes", "--cluster", "lab", "--repo"])
        .arg(repo.path())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("cluster lab: 3 succeeded, 2 failed"),
        "{stdout}"
    );
    // Actions end in parallel, in any order: the result lines sorted.
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let mut results: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("[lab] #"))
        .collect();
    results.sort_unstable();
    insta::assert_snapshot!(results.join("\n"));
}

#[test]
fn doctor_reports_credentials_that_do_not_resolve() {
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_LAB")
        .env("SOPS_AGE_KEY_FILE", "/nonexistent/key.txt")
        .env_remove("SOPS_AGE_KEY")
        .args(["doctor", "--cluster", "lab", "--repo"])
        .arg(homelab())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("cluster lab"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("ok") && l.contains("config")),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("FAIL"))
        .unwrap_or_default();
    assert!(
        line.contains("credentials") && line.contains("clusters/lab/secrets.sops.yaml"),
        "{stdout}"
    );
}

#[test]
fn doctor_on_the_embedded_simulator_passes() {
    let out = proxops()
        .args(["doctor", "--backend", "sim", "--repo"])
        .arg(homelab())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("cluster home") && stdout.contains("cluster lab"),
        "{stdout}"
    );
    assert!(!stdout.contains("FAIL"), "{stdout}");
}

/// `doctor` with a plain API token (the embedded simulator's `root@pam!proxops`: every
/// privilege, not root@pam) names every write that only root@pam may do, with its remedy,
/// before anything is applied: a raw PCI device, a raw USB device, an LXC bind mount
/// (qemu-server `check_hostpci_perm`, `check_usb_perm`; pve-container
/// `check_ct_modify_config_perm`).
#[test]
fn doctor_names_every_root_only_need_before_apply() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let edit = |file: &str, from: &str, to: &str| {
        let path = dir.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        std::fs::write(path, text.replace(from, to)).unwrap();
    };
    edit(
        "vm/home/truenas.yaml",
        "        mapping: hba ",
        "        device: \"0000:03:00.0\" ",
    );
    edit(
        "vm/home/truenas.yaml",
        "        pcie: true\n",
        "        pcie: true\n    usb-devices:\n      - slot: usb0\n        host: \"0951:1666\"\n",
    );
    edit(
        "lxc/home/pihole.yaml",
        "  networks:\n",
        "  bind-mounts:\n    - host-path: /srv/pihole\n      mount-point: /etc/pihole\n  networks:\n",
    );
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_HOME")
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", "/nonexistent/key.txt")
        .args(["doctor", "--backend", "sim", "--cluster", "home", "--repo"])
        .arg(dir.path())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let failures: Vec<&str> = stdout.lines().filter(|l| l.contains("FAIL")).collect();
    assert_eq!(
        failures,
        [
            "  FAIL  privileges   mp0 is a bind mount (/srv/pihole): only root@pam may set it; use a mount point on a storage (`mount-points`): needed to create LXC/pihole (vmid 200) (set mp0)",
            "  FAIL  privileges   hostpci0 uses a raw device: only root@pam may set it; use a PCI resource mapping: needed to create VM/truenas (vmid 140) (set hostpci0)",
            "  FAIL  privileges   usb0 uses a raw device: only root@pam may set it; use a USB resource mapping: needed to create VM/truenas (vmid 140) (set usb0)",
        ],
        "{stdout}"
    );
    // The example itself, with its PCI mapping, asks nothing of root@pam.
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_HOME")
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", "/nonexistent/key.txt")
        .args(["doctor", "--backend", "sim", "--cluster", "home", "--repo"])
        .arg(homelab())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("ok    privileges"), "{stdout}");
    assert!(!stdout.contains("root@pam may"), "{stdout}");
}

#[test]
fn sim_refuses_a_malformed_acl() {
    let out = proxops()
        .args(["sim", "--listen", "127.0.0.1:0", "--acl", "ops@pve!ci/vms"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("PRINCIPAL:PATH:PRIV"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// Planes: promote, rollback, get -o wide (planes set up with proxops-store, as apply --planes
// would leave them, so no simulator is needed).

/// Runs git in `dir` with a fixed identity and clock, so commit ids are the same every run.
fn git_fixed(dir: &Path, args: &[&str]) -> String {
    let out = proxops_test_support::git_command(dir)
        .args(args)
        .env("GIT_AUTHOR_DATE", "2026-11-30T12:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-11-30T12:00:00Z")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The homelab committed in a git repository, home allowing promotions from lab, lab's desired
/// plane published; with `observed`, current receipts for every lab resource.
fn planes_repo(observed: bool) -> tempfile::TempDir {
    use proxops_store::documents::Outcome;
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let config = dir.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{}\n      promotion:\n        allowed-sources: [lab]\n",
            text.trim_end()
        ),
    )
    .unwrap();
    git_fixed(dir.path(), &["init", "-q", "-b", "main"]);
    git_fixed(dir.path(), &["add", "-A"]);
    git_fixed(dir.path(), &["commit", "-q", "-m", "homelab"]);
    let store = proxops_store::Store::open(dir.path()).unwrap();
    let source = store.source(None).unwrap();
    let repo = proxops_model::load_repository(
        &source,
        &proxops_model::Registry::builtin(),
        &proxops_model::LoadOptions::default(),
    )
    .unwrap();
    let refs = proxops_store::PlaneRefs::for_cluster("lab").unwrap();
    store
        .publish_desired(&refs, &repo, source.commit(), &Default::default())
        .unwrap();
    if observed {
        let desired = store.read_desired(&refs, None).unwrap().unwrap();
        let observations = desired
            .resources
            .values()
            .map(|e| {
                let mut o = proxops_store::Observation::of(e, desired.revision(), Outcome::Created);
                o.finished_at = "2026-11-30T12:05:00Z".to_owned();
                o
            })
            .collect();
        let batch = proxops_store::ObservationBatch {
            observations,
            teardowns: Vec::new(),
        };
        store.publish_observations(&refs, &batch, 4).unwrap();
    }
    dir
}

#[test]
fn promote_refuses_an_unreconciled_source_and_names_what_is_not_clean() {
    let dir = planes_repo(false);
    let out = proxops()
        .args(["promote", "--from", "lab", "--to", "home", "--repo"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[proxops::promotion::not_reconciled]")
            && stderr.contains("VM/sandbox-01 (READY: no observation receipt)"),
        "{stderr}"
    );
    let refused = proxops()
        .args(["promote", "--from", "home", "--to", "lab", "--repo"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("proxops::promotion::not_allowed"));
}

#[test]
fn promote_dry_run_then_promote_then_again_is_a_no_op() {
    let dir = planes_repo(true);
    let run = || {
        let out = proxops()
            .args(["promote", "--from", "lab", "--to", "home", "--repo"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dry = proxops()
        .args([
            "promote",
            "--from",
            "lab",
            "--to",
            "home",
            "--dry-run",
            "--repo",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let dry_out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success() && dry_out.contains("dry run"),
        "{dry:?}"
    );
    assert!(dry_out.contains("  create   VM/jumpbox"), "{dry_out}");
    assert!(git_fixed(dir.path(), &["branch", "--list", "proxops/desired/home"]).is_empty());
    let first = run();
    assert!(
        first.contains("proxops/desired/home at ") && first.contains("(published)"),
        "{first}"
    );
    let record = git_fixed(dir.path(), &["show", "proxops/desired/home:promotion.yaml"]);
    assert!(
        record.contains("kind: Promotion") && record.contains("cluster: lab"),
        "{record}"
    );
    let second = run();
    assert!(
        second.contains("already contains this promotion"),
        "{second}"
    );
    assert_eq!(
        git_fixed(dir.path(), &["rev-list", "--count", "proxops/desired/home"]).trim(),
        "1"
    );
}

#[test]
fn rollback_dry_run_prints_provenance_and_a_non_ancestor_is_refused() {
    let dir = planes_repo(true);
    // A second desired version, observed too.
    let vm = dir.path().join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&vm).unwrap();
    std::fs::write(&vm, text.replace("memory: 2GiB", "memory: 4GiB")).unwrap();
    git_fixed(dir.path(), &["commit", "-q", "-am", "more memory"]);
    let v1 = git_fixed(dir.path(), &["rev-parse", "proxops/desired/lab"]);
    let store = proxops_store::Store::open(dir.path()).unwrap();
    let source = store.source(None).unwrap();
    let repo = proxops_model::load_repository(
        &source,
        &proxops_model::Registry::builtin(),
        &proxops_model::LoadOptions::default(),
    )
    .unwrap();
    let refs = proxops_store::PlaneRefs::for_cluster("lab").unwrap();
    store
        .publish_desired(&refs, &repo, source.commit(), &Default::default())
        .unwrap();
    let v2 = git_fixed(dir.path(), &["rev-parse", "proxops/desired/lab"]);

    let out = proxops()
        .args([
            "rollback",
            "--cluster",
            "lab",
            "--to",
            v1.trim(),
            "--reason",
            "bad memory",
            "--dry-run",
            "--repo",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let provenance: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(provenance["fromDesiredRevision"], v2.trim());
    assert_eq!(provenance["targetDesiredRevision"], v1.trim());
    assert_eq!(provenance["reason"], "bad memory");
    assert_eq!(
        git_fixed(dir.path(), &["rev-parse", "proxops/desired/lab"]),
        v2
    );

    let head = git_fixed(dir.path(), &["rev-parse", "HEAD"]);
    let out = proxops()
        .args([
            "rollback",
            "--cluster",
            "lab",
            "--to",
            head.trim(),
            "--reason",
            "x",
            "--repo",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("proxops::rollback::not_ancestor"));

    let out = proxops()
        .args([
            "rollback",
            "--cluster",
            "lab",
            "--to",
            v1.trim(),
            "--reason",
            "bad memory",
            "--repo",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let parent = git_fixed(dir.path(), &["rev-parse", "proxops/desired/lab~1"]);
    assert_eq!(parent, v2, "a forward commit on the old head");
}

#[test]
fn get_wide_adds_uid_pve_identity_receipt_revision_outcome_and_time() {
    let dir = planes_repo(true);
    let out = proxops()
        .args(["get", "--cluster", "lab", "-o", "wide", "--repo"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let desired = git_fixed(dir.path(), &["rev-parse", "proxops/desired/lab"]);
    let table = String::from_utf8_lossy(&out.stdout).replace(&desired[..12], "<desired12>");
    insta::assert_snapshot!(table);
}
