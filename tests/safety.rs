//! The safety contract end to end: each story tries to make ProxOps delete, duplicate or
//! strand something it must not, through the `proxops` command on a real git repository and a
//! persistent simulator.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{git, proxops_bin};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A git repository with one cluster `lab` (node pve1) and a simulator state file.
pub(crate) struct Site {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
}

const CONFIG: &str =
    "pve:\n  clusters:\n    lab:\n      base-url: https://pve-lab.lan:8006\n      nodes: [pve1]\n";

/// A VM, TemplateVM or LXC manifest at `vmid`, with `extra` lines appended to its spec.
pub(crate) fn guest(kind: &str, name: &str, vmid: u32, extra: &str) -> String {
    let body = match kind {
        "LXC" | "TemplateCT" => format!(
            "  node: pve1\n  vmid: {vmid}\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n"
        ),
        _ => format!(
            "  node: pve1\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 4GiB\n  networks:\n    - model: virtio\n      bridge: vmbr0\n"
        ),
    };
    format!(
        "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{body}{extra}"
    )
}

impl Site {
    /// The repository with these manifests (path, text), all listed in lab's composition.
    pub(crate) fn new(manifests: &[(&str, String)]) -> Site {
        let site = Site {
            dir: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
        };
        site.write("clusters/lab/config.yaml", CONFIG);
        site.compose(manifests);
        git(site.path(), &["init", "-q", "-b", "main"]);
        site.commit("lab");
        site
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, rel: &str, text: &str) {
        proxops_test_support::write(self.path(), rel, text);
    }

    /// Writes the manifests and a composition listing exactly them (removing other files).
    pub(crate) fn compose(&self, manifests: &[(&str, String)]) {
        for kind in ["vm", "templatevm", "lxc", "templatect", "ctt", "iso"] {
            let _ = std::fs::remove_dir_all(self.path().join(kind));
        }
        let mut list = String::from("resources:\n");
        for (rel, text) in manifests {
            self.write(rel, text);
            list.push_str(&format!("  - ../../{rel}\n"));
        }
        self.write("clusters/lab/resources.yaml", &list);
    }

    pub(crate) fn commit(&self, message: &str) {
        git(self.path(), &["add", "-A"]);
        git(
            self.path(),
            &["commit", "-q", "--allow-empty", "-m", message],
        );
    }

    pub(crate) fn sim_file(&self) -> PathBuf {
        self.state.path().join("sim.json")
    }

    /// Where lab's simulated state is kept (one file per cluster, after `--sim-state`).
    pub(crate) fn lab_state(&self) -> PathBuf {
        self.state.path().join("sim.lab.json")
    }

    /// `proxops ARGS --repo <repo>` with lab's simulator.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(proxops_bin())
            .args(args)
            .args(["--cluster", "lab", "--backend", "sim", "--sim-state"])
            .arg(self.sim_file())
            .arg("--repo")
            .arg(self.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// One pass of the agent (`proxops run --once`) over every cluster, data under `data`.
    pub(crate) fn agent_once(&self, data: &Path) -> Output {
        Command::new(proxops_bin())
            .args(["run", "--once", "--listen", "127.0.0.1:0"])
            .args(["--backend", "sim", "--sim-state"])
            .arg(self.sim_file())
            .arg("--data-dir")
            .arg(data)
            .arg("--repo")
            .arg(self.path())
            .output()
            .unwrap()
    }

    /// Stamps an empty stats snapshot now: what PVE serves right after guests were made, before
    /// pvestatd saw them (`status: unknown`, no template flag for ten seconds). Returns the stamp.
    pub(crate) fn stale_stats(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        self.stage(|s| s["stats"] = serde_json::json!({ "taken_ms": now, "guests": {} }));
        now
    }

    /// Adds a cluster with no resources on node pve1.
    pub(crate) fn add_empty_cluster(&self, name: &str) {
        self.write(
            &format!("clusters/{name}/config.yaml"),
            &format!("pve:\n  clusters:\n    {name}:\n      base-url: https://{name}.lan:8006\n      nodes: [pve1]\n"),
        );
        self.write(
            &format!("clusters/{name}/resources.yaml"),
            "resources: []\n",
        );
    }

    pub(crate) fn apply(&self) -> (Option<i32>, String) {
        let out = self.run(&["apply", "--yes"]);
        (out.status.code(), text(&out))
    }

    pub(crate) fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.lab_state()).unwrap()).unwrap()
    }

    /// Changes the simulated state in place (what an operator or a crash did in PVE).
    pub(crate) fn stage(&self, change: impl FnOnce(&mut Value)) {
        let mut state = self.state();
        change(&mut state);
        std::fs::write(self.lab_state(), state.to_string()).unwrap();
    }

    /// vmid → (tags, template flag) of every guest.
    pub(crate) fn guests(&self) -> BTreeMap<u64, (String, bool)> {
        let state = self.state();
        state["guests"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, g)| {
                let config = &g["config"];
                (
                    g["vmid"].as_u64().unwrap(),
                    (
                        config["tags"].as_str().unwrap_or_default().to_owned(),
                        config["template"].as_str() == Some("1"),
                    ),
                )
            })
            .collect()
    }
}

/// stdout and stderr of a run, for messages.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const WEB: &str = "vm/lab/web.yaml";

#[test]
fn a_rename_at_the_same_vmid_retags_the_guest_and_recreates_nothing() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, "  tags: [frontend]\n"))]);
    assert_eq!(site.apply().0, Some(0));
    let before = site.state()["guests"]["120"]["config"].clone();
    site.compose(&[(
        "vm/lab/www.yaml",
        guest("VM", "www", 120, "  tags: [frontend]\n"),
    )]);
    site.commit("rename web to www");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("retag     VM/www (120)"), "{out}");
    assert!(!out.contains("delete") && !out.contains("create"), "{out}");
    let guests = site.guests();
    assert_eq!(guests.len(), 1, "{guests:?}");
    let tags = &guests[&120].0;
    assert!(
        tags.contains("proxops.lab.vm.www") && !tags.contains("proxops.lab.vm.web"),
        "{tags}"
    );
    assert!(tags.contains("frontend"), "{tags}");
    // The same disk, not a new guest.
    let after = &site.state()["guests"]["120"]["config"];
    assert_eq!(after["scsi0"], before["scsi0"]);
    // And then it is in sync.
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
}

#[test]
fn a_vm_declared_a_template_at_its_vmid_is_converted_when_stopped_and_reported_when_running() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, "  state: started\n"))]);
    assert_eq!(site.apply().0, Some(0));
    site.compose(&[(
        "templatevm/lab/web.yaml",
        guest("TemplateVM", "web", 120, ""),
    )]);
    site.commit("web becomes a template");
    // Running: PVE refuses to make it a template; ProxOps says what to do and deletes nothing.
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("anomaly") && out.contains("is running"),
        "{out}"
    );
    assert!(out.contains("qm shutdown 120"), "{out}");
    assert!(!out.contains("delete"), "{out}");
    assert_eq!(site.guests().len(), 1);
    // Stopped by the operator: retagged, then made a template, in one apply.
    site.stage(|s| s["guests"]["120"]["status"] = "stopped".into());
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("retag") && out.contains("template"), "{out}");
    let guests = site.guests();
    assert_eq!(guests.len(), 1);
    assert!(guests[&120].1, "not a template: {guests:?}");
    assert!(
        guests[&120].0.contains("proxops.lab.templatevm.web"),
        "{guests:?}"
    );
}

#[test]
fn a_template_declared_a_vm_again_is_an_anomaly_and_nothing_is_deleted() {
    let site = Site::new(&[(
        "templatevm/lab/tpl.yaml",
        guest("TemplateVM", "tpl", 9000, ""),
    )]);
    assert_eq!(site.apply().0, Some(0));
    site.compose(&[(WEB, guest("VM", "tpl", 9000, ""))]);
    site.commit("tpl declared a VM");
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PVE cannot turn a template back into a guest"),
        "{out}"
    );
    assert!(!out.contains("delete"), "{out}");
    assert!(site.guests()[&9000].1);
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(3), "stuck: {}", text(&diff));
}

#[test]
fn a_changed_vmid_while_the_old_guest_carries_the_identity_creates_no_second_guest() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, "  state: started\n"))]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    site.compose(&[(WEB, guest("VM", "web", 121, "  state: started\n"))]);
    site.commit("web moves to 121");
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("declared at vmid 121, but vmid 120 carries its identity"),
        "{out}"
    );
    assert_eq!(site.guests().keys().copied().collect::<Vec<_>>(), [120]);
}

#[test]
fn a_clone_left_with_its_templates_identity_is_repaired_and_never_pruned_when_the_template_retires()
{
    let tpl = (
        "templatevm/lab/tpl.yaml",
        guest(
            "TemplateVM",
            "tpl",
            9000,
            "  tags: [golden, do-not-start]\n  pve-description: golden image\n",
        ),
    );
    let clone = (
        WEB,
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  clone: tpl\n  memory: 2GiB\n  cpu:\n    cores: 1\n    type: host\n  state: stopped\n".to_owned(),
    );
    let site = Site::new(std::slice::from_ref(&tpl));
    assert_eq!(site.apply().0, Some(0));
    // A clone whose follow-up config write never happened (a 403, a crash, a task timeout):
    // PVE copied the template's config, tags and all, to vmid 120.
    site.stage(|s| {
        let mut copy = s["guests"]["9000"].clone();
        copy["vmid"] = 120.into();
        copy["config"].as_object_mut().unwrap().remove("template");
        copy["config"]["name"] = "web".into();
        s["guests"]["120"] = copy;
    });
    site.compose(&[tpl.clone(), clone.clone()]);
    site.commit("web, cloned from tpl");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("a clone of vmid 9000 left unconfigured"),
        "{out}"
    );
    let tags = site.guests()[&120].0.clone();
    assert!(
        tags.contains("proxops.lab.vm.web") && !tags.contains("templatevm"),
        "{tags}"
    );
    // Only its own tags and no template description: a clone is not a golden image.
    assert!(
        !tags.contains("golden") && !tags.contains("do-not-start"),
        "{tags}"
    );
    let config = &site.state()["guests"]["120"]["config"];
    assert!(config.get("description").is_none(), "{config}");
    // The template retires (the clone's manifest no longer names it): the template's guest
    // goes, the clone at a declared vmid never does.
    site.compose(&[(WEB, guest("VM", "web", 120, ""))]);
    site.commit("retire tpl");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("delete    TemplateVM/tpl (9000)"), "{out}");
    assert_eq!(site.guests().keys().copied().collect::<Vec<_>>(), [120]);
}

#[test]
fn a_guest_locked_by_a_crashed_create_is_reported_with_the_remedy_never_as_converged() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    assert_eq!(site.apply().0, Some(0));
    site.stage(|s| s["guests"]["120"]["config"]["lock"] = "create".into());
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("qm unlock 120"), "{out}");
    assert!(!out.contains("converged, nothing to do"), "{out}");
    assert!(out.contains("NOT converged"), "{out}");
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(3), "{}", text(&diff));
    // Unlocked, it is in sync again.
    site.stage(|s| {
        s["guests"]["120"]["config"]
            .as_object_mut()
            .unwrap()
            .remove("lock");
    });
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
}

#[test]
fn converge_keeps_to_the_prune_budget_over_all_its_cycles() {
    let many: Vec<(String, String)> = (0..5)
        .map(|i| {
            (
                format!("vm/lab/old-{i}.yaml"),
                guest("VM", &format!("old-{i}"), 130 + i, ""),
            )
        })
        .collect();
    let keep = (WEB, guest("VM", "web", 120, ""));
    let mut all: Vec<(&str, String)> = many.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    all.push(keep.clone());
    let site = Site::new(&all);
    assert_eq!(site.apply().0, Some(0));
    site.compose(&[keep]);
    site.commit("remove five guests");
    let out = site.run(&["converge", "--prune-budget", "2"]);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert_eq!(site.guests().len(), 4, "two deleted, three kept: {log}");
    assert!(log.contains("prune budget of 2 per run used"), "{log}");
    assert!(log.contains("NOT converged"), "{log}");
}

#[test]
fn apply_records_the_planes_by_default_and_no_planes_opts_out() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    let out = site.run(&["apply", "--yes", "--no-planes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(git(site.path(), &["branch", "--list", "proxops/*"]), "");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    let branches = git(site.path(), &["branch", "--list", "proxops/*"]);
    assert!(
        branches.contains("proxops/desired/lab") && branches.contains("proxops/observed/lab"),
        "{branches}"
    );
}

#[test]
fn a_second_writer_is_refused_while_the_lease_is_held() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    // Another process holds lab's lease (an agent, say).
    let lease = proxops_store::Store::open(site.path())
        .unwrap()
        .acquire_lease(
            "lab",
            &proxops_store::Holder {
                name: "agent-x".into(),
                host: "another-host".into(),
                pid: 1,
            },
            std::time::Duration::from_secs(600),
        )
        .unwrap();
    for args in [vec!["apply", "--yes", "--no-planes"], vec!["converge"]] {
        let out = site.run(&args);
        let log = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {log}");
        assert!(
            log.contains("being reconciled by agent-x (pid 1 on another-host)"),
            "{log}"
        );
    }
    assert!(!site.lab_state().exists() || site.guests().is_empty());
    drop(lease);
}

#[test]
fn a_gated_cluster_whose_live_head_names_no_source_is_refused() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    assert_eq!(site.apply().0, Some(0));
    // The live desired head loses its trailer (a rewritten message).
    let head = git(site.path(), &["rev-parse", "proxops/desired/lab"])
        .trim()
        .to_owned();
    let tree = git(site.path(), &["rev-parse", &format!("{head}^{{tree}}")])
        .trim()
        .to_owned();
    let rewritten = git(
        site.path(),
        &["commit-tree", &tree, "-p", &head, "-m", "hand-made"],
    )
    .trim()
    .to_owned();
    git(
        site.path(),
        &["update-ref", "refs/heads/proxops/desired/lab", &rewritten],
    );
    site.write(
        "clusters/lab/config.yaml",
        &format!("{CONFIG}      planes:\n        change-gate: pullRequest\n"),
    );
    site.compose(&[(WEB, guest("VM", "web", 120, "  tags: [changed]\n"))]);
    site.commit("gate, and a change");
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("proxops::gate::unknown_source"), "{out}");
    let tags = site.guests()[&120].0.clone();
    assert!(!tags.contains("changed"), "the gated change ran: {tags}");
}

#[test]
fn a_cluster_whose_directory_vanished_is_reported_and_its_guests_left_alone() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    assert_eq!(site.apply().0, Some(0));
    // A second cluster appears and lab's directory goes.
    std::fs::remove_dir_all(site.path().join("clusters/lab")).unwrap();
    site.add_empty_cluster("other");
    site.commit("lab is gone");
    let out = Command::new(proxops_bin())
        .args(["apply", "--yes", "--backend", "sim", "--sim-state"])
        .arg(site.sim_file())
        .arg("--repo")
        .arg(site.path())
        .output()
        .unwrap();
    let log = text(&out);
    assert!(
        log.contains("proxops::planes::vanished") && log.contains("cluster `lab` is gone"),
        "{log}"
    );
    assert_eq!(site.guests().len(), 1);
    let status = Command::new(proxops_bin())
        .args(["status", "--repo"])
        .arg(site.path())
        .output()
        .unwrap();
    assert!(
        text(&status).contains("cluster `lab` is gone"),
        "{}",
        text(&status)
    );
}

#[test]
fn a_nic_a_tag_and_protection_removed_from_the_manifest_are_removed_from_the_guest() {
    // Two NICs, a user tag, protection: guest()'s one NIC replaced by two.
    let two_nics = "  networks:\n    - model: virtio\n      bridge: vmbr0\n    - model: virtio\n      bridge: vmbr1\n";
    let full = guest(
        "VM",
        "web",
        120,
        "  tags: [web, blue]\n  options:\n    protection: true\n",
    )
    .replace(
        "  networks:\n    - model: virtio\n      bridge: vmbr0\n",
        two_nics,
    );
    let site = Site::new(&[(WEB, full)]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    // The operator adds a tag of their own by hand.
    site.stage(|s| {
        let tags = s["guests"]["120"]["config"]["tags"]
            .as_str()
            .unwrap()
            .to_owned();
        s["guests"]["120"]["config"]["tags"] = format!("{tags};mine").into();
    });
    let config = &site.state()["guests"]["120"]["config"];
    assert_eq!(config["protection"], "1");
    assert!(config.get("net1").is_some(), "{config}");
    site.compose(&[(WEB, guest("VM", "web", 120, "  tags: [web]\n"))]);
    site.commit("drop the second NIC, the blue tag and protection");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("removed:"), "{out}");
    let config = site.state()["guests"]["120"]["config"].clone();
    assert!(config.get("net1").is_none(), "net1 stayed: {config}");
    assert!(
        config.get("protection").is_none(),
        "protection stayed: {config}"
    );
    let tags = config["tags"].as_str().unwrap();
    assert!(
        !tags.contains("blue") && tags.contains("mine") && tags.contains("web"),
        "{tags}"
    );
    // Without the planes the same removal is only reported.
    site.compose(&[(WEB, guest("VM", "web", 120, ""))]);
    site.commit("drop the web tag too");
    let out = site.run(&["apply", "--yes", "--no-planes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        site.guests()[&120].0.contains("web"),
        "removed without planes"
    );
}

#[test]
fn an_iso_whose_checksum_changed_under_the_same_name_is_replaced() {
    let iso = |sum: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: installer\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: installer.iso\n  url: https://example.invalid/installer.iso\n  checksum:\n    algorithm: sha256\n    value: \"{sum}\"\n"
        )
    };
    let a = "a".repeat(64);
    let b = "b".repeat(64);
    let site = Site::new(&[("iso/lab/installer.yaml", iso(&a))]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    site.compose(&[("iso/lab/installer.yaml", iso(&b))]);
    site.commit("a new build of the installer");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("replace") && out.contains("checksum changed"),
        "{out}"
    );
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
}

/// `proxops sim` serving lab from the site's repository, with `args`, as a separate process:
/// its tasks go on while `apply` runs and ends. Returns the guard and the config pointing at it.
fn sim_server(site: &Site, args: &[&str]) -> (crate::support::ChildGuard, String) {
    let mut sim = Command::new(proxops_bin());
    sim.args([
        "sim",
        "--listen",
        "127.0.0.1:0",
        "--token",
        "root@pam!admin=admin-secret",
    ])
    .args(["--offline-downloads", "--cluster", "lab", "--seed-repo"])
    .arg(site.path())
    .args(args);
    let sim = proxops_test_support::SimProcess::spawn(sim);
    let config = sim.cluster_config("lab", "[pve1]");
    (sim.child, config)
}

/// `proxops apply --yes` against the PVE the site's config names, with `token`.
fn apply_pve(site: &Site, token: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(proxops_bin())
        .args(["apply", "--yes", "--cluster", "lab"])
        .args(extra)
        .arg("--repo")
        .arg(site.path())
        .env("PROXOPS_PVE_TOKEN", token)
        .output()
        .unwrap();
    (out.status.code(), text(&out))
}

fn clone_of_tpl() -> String {
    "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 120\n  clone: tpl\n  memory: 2GiB\n  cpu:\n    cores: 1\n    type: host\n  state: stopped\n  tags: [web]\n".to_owned()
}

#[test]
fn a_clone_whose_config_write_is_refused_is_repaired_by_the_next_cycle() {
    const ADMIN: &str = "root@pam!admin=admin-secret";
    const LIMITED: &str = "root@pam!limited=limited-secret";
    let tpl = (
        "templatevm/lab/tpl.yaml",
        guest("TemplateVM", "tpl", 9000, "  tags: [golden]\n"),
    );
    let site = Site::new(&[tpl.clone(), (WEB, clone_of_tpl())]);
    // A token that may clone but not configure: PVE answers the follow-up write with 403.
    let privs = "VM.Audit,VM.Clone,VM.Allocate,VM.PowerMgmt,Datastore.Audit,Datastore.AllocateSpace,Datastore.AllocateTemplate,Sys.Audit";
    let (_sim, config) = sim_server(
        &site,
        &[
            "--extra-token",
            LIMITED,
            "--acl",
            &format!("root@pam!limited:/:{privs}"),
            "--task-time",
            "20ms",
        ],
    );
    site.write("clusters/lab/config.yaml", &config);
    site.compose(std::slice::from_ref(&tpl));
    site.commit("lab on the simulator, the template only");
    let (code, out) = apply_pve(&site, ADMIN, &[]);
    assert_eq!(code, Some(0), "{out}");
    site.compose(&[tpl.clone(), (WEB, clone_of_tpl())]);
    site.commit("web, cloned from tpl");
    let (code, out) = apply_pve(&site, LIMITED, &[]);
    assert_eq!(code, Some(1), "the write was refused: {out}");
    assert!(out.contains("403") || out.contains("Permission"), "{out}");
    // The next cycle, with a token that may configure, repairs the half-made clone.
    let (code, out) = apply_pve(&site, ADMIN, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("retag") && out.contains("left unconfigured"),
        "{out}"
    );
    let (code, out) = apply_pve(&site, ADMIN, &["--dry-run"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("converged, nothing to do"), "{out}");
    // Retiring the template deletes the template only.
    site.compose(&[(
        WEB,
        guest("VM", "web", 120, "  memory: 2GiB\n  tags: [web]\n").replace("  memory: 1GiB\n", ""),
    )]);
    site.commit("retire tpl");
    let (code, out) = apply_pve(&site, ADMIN, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("TemplateVM/tpl (9000)") && !out.contains("VM/web (120)  pve1  no longer"),
        "{out}"
    );
}

#[test]
fn a_clone_that_outlasts_the_task_timeout_is_repaired_once_it_finished() {
    const ADMIN: &str = "root@pam!admin=admin-secret";
    let tpl = (
        "templatevm/lab/tpl.yaml",
        guest("TemplateVM", "tpl", 9000, ""),
    );
    let site = Site::new(&[tpl.clone(), (WEB, clone_of_tpl())]);
    let (_sim, config) = sim_server(&site, &["--task-time", "3s"]);
    site.write("clusters/lab/config.yaml", &config);
    site.compose(std::slice::from_ref(&tpl));
    site.commit("lab on the simulator, the template only");
    let (code, out) = apply_pve(&site, ADMIN, &[]);
    assert_eq!(code, Some(0), "{out}");
    site.compose(&[tpl.clone(), (WEB, clone_of_tpl())]);
    site.commit("web, cloned from tpl");
    let (code, out) = apply_pve(&site, ADMIN, &["--task-timeout", "1s"]);
    assert_eq!(code, Some(1), "the clone outlasted the timeout: {out}");
    // While PVE still clones, the lock says so, nothing is done to it and it is not in sync.
    let (code, out) = apply_pve(&site, ADMIN, &["--dry-run"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("locked (clone)") || out.contains("left unconfigured"),
        "{out}"
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (code, out) = apply_pve(&site, ADMIN, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("left unconfigured"), "{out}");
    assert!(!out.contains("create    VM/web"), "a second clone: {out}");
}

#[test]
fn the_sim_state_file_names_each_cluster_the_same_way_whichever_clusters_run() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    site.add_empty_cluster("other");
    site.commit("a second cluster");
    // lab alone first, then every cluster: lab's state is the same file both times.
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    let all = Command::new(proxops_bin())
        .args(["apply", "--yes", "--backend", "sim", "--sim-state"])
        .arg(site.sim_file())
        .arg("--repo")
        .arg(site.path())
        .output()
        .unwrap();
    let log = text(&all);
    assert!(all.status.success(), "{log}");
    assert!(
        log.contains("cluster lab: converged, nothing to do"),
        "{log}"
    );
    assert!(!log.contains("create"), "lab looked empty: {log}");
    assert!(site.state.path().join("sim.other.json").exists());
}

#[test]
fn the_agent_names_a_cluster_whose_directory_vanished() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, ""))]);
    assert_eq!(site.apply().0, Some(0));
    std::fs::remove_dir_all(site.path().join("clusters/lab")).unwrap();
    site.add_empty_cluster("other");
    site.commit("lab is gone");
    let data = tempfile::tempdir().unwrap();
    let out = site.agent_once(data.path());
    let log = text(&out);
    assert!(log.contains("cluster `lab` is gone"), "{log}");
    assert_eq!(site.guests().len(), 1, "{log}");
}

#[test]
fn a_container_template_declared_a_container_again_is_an_anomaly_and_nothing_is_deleted() {
    let ctt = (
        "ctt/lab/debian-ct.yaml",
        "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian-ct\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-ct.tar.zst\n  url: https://example.invalid/debian-ct.tar.zst\n".to_owned(),
    );
    let site = Site::new(&[
        ctt.clone(),
        (
            "templatect/lab/ct.yaml",
            guest("TemplateCT", "ct", 9001, ""),
        ),
    ]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(site.guests()[&9001].1, "{out}");
    site.compose(&[ctt, ("lxc/lab/ct.yaml", guest("LXC", "ct", 9001, ""))]);
    site.commit("ct declared a container");
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PVE cannot turn a template back into a guest"),
        "{out}"
    );
    assert!(!out.contains("delete"), "{out}");
    assert!(site.guests()[&9001].1);
}

/// Tasks of a type recorded in lab's simulator state file.
fn task_count(site: &Site, kind: &str) -> usize {
    site.state()["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == kind)
        .count()
}

#[test]
fn back_to_back_apply_and_converge_within_the_stats_interval_never_start_or_template_twice() {
    let ctt = (
        "ctt/lab/debian-ct.yaml",
        "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian-ct\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-ct.tar.zst\n  url: https://example.invalid/debian-ct.tar.zst\n".to_owned(),
    );
    let site = Site::new(&[
        (WEB, guest("VM", "web", 120, "  state: started\n")),
        (
            "templatevm/lab/tpl.yaml",
            guest("TemplateVM", "tpl", 130, ""),
        ),
        ctt,
        (
            "templatect/lab/ct.yaml",
            guest("TemplateCT", "ct", 9001, ""),
        ),
    ]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    let kinds = [
        "qmstart",
        "qmcreate",
        "qmtemplate",
        "vztemplate",
        "vzcreate",
    ];
    let counts = |site: &Site| kinds.map(|k| task_count(site, k));
    let before = counts(&site);
    assert_eq!(before[2..4], [1, 1], "one conversion each: {before:?}");
    // What PVE serves right after the guests were made: pvestatd has not seen them yet, so
    // /cluster/resources says `status: unknown` and no template flag for ten seconds. The
    // snapshot is stamped now, so the next commands (one process each) read it as it is.
    for args in [
        vec!["apply", "--yes"],
        vec!["converge"],
        vec!["apply", "--yes"],
    ] {
        let now = site.stale_stats();
        let out = site.run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert_eq!(counts(&site), before, "{args:?}: {}", text(&out));
        // The command read the stale snapshot: it was not refreshed under it (a command
        // takes well under a second here; pvestatd's interval is ten).
        assert_eq!(
            site.state()["stats"]["taken_ms"].as_u64(),
            Some(now),
            "{args:?}"
        );
    }
    let state = site.state();
    assert_eq!(state["guests"]["120"]["status"], "running");
    let failed: Vec<&Value> = state["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["exitstatus"] != "OK")
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn a_change_pve_keeps_pending_is_restarted_in_or_reported_with_no_restart() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, "  state: started\n"))]);
    assert_eq!(site.apply().0, Some(0));
    // Memory without NUMA is not hot-pluggable: on the running VM it waits for a restart.
    site.compose(&[(
        WEB,
        guest("VM", "web", 120, "  state: started\n").replace("memory: 1GiB", "memory: 2GiB"),
    )]);
    site.commit("more memory");
    let out = site.run(&["apply", "--yes", "--no-restart"]);
    let log = text(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("pending until restart"), "{log}");
    assert!(!log.contains("converged, nothing to do"), "{log}");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("(restart)"), "{out}");
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
    let state = site.state();
    let guest = &state["guests"]["120"];
    assert_eq!(guest["config"]["memory"], "2048", "{guest}");
    assert!(
        guest["pending"].as_object().is_none_or(|p| p.is_empty()),
        "{guest}"
    );
}

#[test]
fn a_clone_onto_another_node_from_local_storage_is_reported_at_plan_time() {
    let tpl = (
        "templatevm/lab/tpl.yaml",
        guest("TemplateVM", "tpl", 9000, ""),
    );
    let site = Site::new(std::slice::from_ref(&tpl));
    site.write(
        "clusters/lab/config.yaml",
        &CONFIG.replace("[pve1]", "[pve1, pve2]"),
    );
    site.commit("a second node");
    assert_eq!(site.apply().0, Some(0));
    let clone = clone_of_tpl().replace("  node: pve1\n", "  node: pve2\n");
    site.compose(&[tpl, (WEB, clone)]);
    site.commit("web cloned onto pve2");
    let (code, out) = site.apply();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PVE clones to another node only from shared storage"),
        "{out}"
    );
    assert!(out.contains("scsi0 on `local-lvm`"), "{out}");
    assert!(!out.contains("create    VM/web"), "{out}");
    assert_eq!(site.guests().len(), 1);
}

#[test]
fn the_agent_within_the_stats_interval_never_starts_or_templates_twice() {
    let site = Site::new(&[
        (WEB, guest("VM", "web", 120, "  state: started\n")),
        (
            "templatevm/lab/tpl.yaml",
            guest("TemplateVM", "tpl", 130, ""),
        ),
    ]);
    let data = tempfile::tempdir().unwrap();
    let kinds = ["qmstart", "qmcreate", "qmtemplate"];
    let first = site.agent_once(data.path());
    assert!(first.status.success(), "{}", text(&first));
    let before = kinds.map(|k| task_count(&site, k));
    // Two creates (the VM started by its create), one conversion.
    assert_eq!(before, [0, 2, 1], "{}", text(&first));
    for _ in 0..2 {
        // The guests are newer than pvestatd's last round: `/cluster/resources` knows nothing.
        site.stale_stats();
        let out = site.agent_once(data.path());
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(
            kinds.map(|k| task_count(&site, k)),
            before,
            "{}",
            text(&out)
        );
    }
}

/// An authorized_keys line with options (`command="..."` holding a blank and `;`, `from="a,b"`)
/// is a key PVE's `ssh-keygen -l` check accepts: the VM is created with it, and nothing is
/// planned afterwards. A key PVE refuses is an error in `validate` as in `diff`.
#[test]
fn a_vm_with_an_ssh_key_carrying_options_is_created_and_then_in_sync() {
    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGCVGKQpK+nImjuu+rzahjyW0WbUv35sPq644v4hkcVp ops@lab";
    let cloud_init = |key: &str| {
        format!(
            "  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n  cloud-init-data:\n    ci-user: ops\n    ssh-keys:\n      - '{key}'\n"
        )
    };
    let with_options =
        format!("command=\"echo hi;exit\",no-pty,from=\"10.0.0.0/8,192.168.1.1\" {KEY}");
    let validate_of = |site: &Site| {
        Command::new(proxops_bin())
            .args(["validate", "--repo"])
            .arg(site.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let site = Site::new(&[(WEB, guest("VM", "web", 120, &cloud_init(&with_options)))]);
    let validate = validate_of(&site);
    assert_eq!(validate.status.code(), Some(0), "{}", text(&validate));
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("create    VM/web (120)"), "{out}");
    let sshkeys = site.state()["guests"]["120"]["config"]["sshkeys"].clone();
    assert!(
        sshkeys
            .as_str()
            .is_some_and(|k| k.starts_with("command%3D%22echo%20hi%3Bexit%22")),
        "{sshkeys}"
    );
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));

    // Two blanks after the options: `ssh-keygen -l` (so PVE) refuses it, and so do both.
    let refused = format!("no-pty  {KEY}");
    site.compose(&[(WEB, guest("VM", "web", 120, &cloud_init(&refused)))]);
    site.commit("a key PVE refuses");
    let validate = validate_of(&site);
    assert_eq!(validate.status.code(), Some(1), "{}", text(&validate));
    assert!(
        text(&validate).contains("proxops::ssh_key"),
        "{}",
        text(&validate)
    );
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_ne!(diff.status.code(), Some(0), "{}", text(&diff));
    assert!(text(&diff).contains("SSH key 1"), "{}", text(&diff));
    // Nothing was sent: the guest keeps the accepted key.
    assert_eq!(site.state()["guests"]["120"]["config"]["sshkeys"], sshkeys);
}
