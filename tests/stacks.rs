//! Stacks end to end (`examples/stacks`, `proxops converge --planes --backend sim`): what a
//! change to a Stack deletes and creates, and that a broken template deletes nothing.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{example, proxops_bin};
use proxops_test_support::TestRepo;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const STACK: &str = "stack/home/k3s.yaml";
const TEMPLATE: &str = "stacktemplate/base/k3s.yaml";
const DESIRED: &str = "proxops/desired/home";

/// The example in a temporary git repository, with its simulator's state file.
struct Site {
    repo: TestRepo,
    state: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        Site {
            repo: TestRepo::copy_of(&example("stacks"), "stacks"),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn state_file(&self) -> PathBuf {
        self.state.path().join("sim.json")
    }

    /// `proxops converge --planes --backend sim`: exit code and everything it printed.
    fn converge(&self) -> (Option<i32>, String) {
        self.run(&["converge", "--planes"])
    }

    /// `proxops <args> --backend sim` (for the commands that take a backend) on the site.
    fn run(&self, args: &[&str]) -> (Option<i32>, String) {
        let mut command = Command::new(proxops_bin());
        command.args(args);
        if args[0] != "get" {
            command
                .args(["--backend", "sim", "--sim-state"])
                .arg(self.state_file());
        }
        let out = command
            .arg("--repo")
            .arg(self.repo.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }

    /// vmid -> (name, config) of every guest in the simulator.
    fn guests(&self) -> BTreeMap<u64, (String, Value)> {
        let path = self.state.path().join("sim.home.json");
        let state: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        state["guests"]
            .as_object()
            .unwrap()
            .values()
            .map(|g| {
                let config = g["config"].clone();
                // A VM's `name`, a container's `hostname`.
                let name = config["name"]
                    .as_str()
                    .or(config["hostname"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                (g["vmid"].as_u64().unwrap(), (name, config))
            })
            .collect()
    }

    /// The blob of every file of the desired plane.
    fn desired(&self) -> BTreeMap<String, String> {
        self.repo
            .git(&["ls-tree", "-r", DESIRED])
            .lines()
            .filter_map(|l| {
                let (meta, path) = l.split_once('\t')?;
                Some((path.to_owned(), meta.split_whitespace().nth(2)?.to_owned()))
            })
            .collect()
    }

    fn edit(&self, path: &str, from: &str, to: &str) {
        let text = self.repo.read(path);
        assert!(text.contains(from), "{path} lacks {from:?}");
        self.repo.write(path, &text.replacen(from, to, 1));
        self.repo.commit_all(&format!("edit {path}"));
    }
}

/// The plan lines (`create VM/x (vmid)`, `delete ...`) a converge run printed.
fn actions(log: &str) -> Vec<String> {
    let verbs = ["create", "delete", "update", "start", "stop", "restart"];
    let mut out: Vec<String> = log
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let verb = words.next()?;
            let key = words.next()?;
            (verbs.contains(&verb) && key.contains('/')).then(|| format!("{verb} {key}"))
        })
        .collect();
    out.sort();
    out
}

fn converged(site: &Site) -> BTreeMap<u64, (String, Value)> {
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    site.guests()
}

#[test]
fn the_example_converges_from_empty_to_clean_with_owned_projected_resources() {
    let site = Site::new();
    // One cycle: everything but the jumpbox, whose nameserver is the Pi-hole's address, which
    // no receipt holds yet: not converged while it waits.
    let (code, log) = site.run(&["apply", "--planes", "--yes"]);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("waiting  VM/jumpbox") && log.contains("NOT converged: 1 resource waiting"),
        "{log}"
    );
    assert_eq!(
        actions(&log),
        [
            "create LXC/pihole",
            "create VM/k3s-agent-a1",
            "create VM/k3s-agent-a2",
            "create VM/k3s-server"
        ],
        "{log}"
    );
    let (_, get) = site.run(&["get", "VM/jumpbox"]);
    let row = get
        .lines()
        .find(|l| l.contains("jumpbox"))
        .unwrap_or_default();
    assert!(row.contains("WAIT") && row.contains("LXC/pihole"), "{get}");
    // Converge closes the loop: the container's addresses reach its receipt, then the VM.
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(actions(&log), ["create VM/jumpbox"], "{log}");
    let guests = site.guests();
    let names: Vec<&str> = guests.values().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "jumpbox",
            "k3s-server",
            "k3s-agent-a1",
            "k3s-agent-a2",
            "pihole"
        ]
    );
    let net0 = guests[&200].1["net0"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let address = net0
        .split(',')
        .find_map(|p| p.strip_prefix("ip="))
        .and_then(|ip| ip.split('/').next())
        .unwrap_or_default();
    assert_eq!(address, "10.10.20.53", "{net0}");
    assert_eq!(guests[&100].1["nameserver"], address, "{:?}", guests[&100]);
    // Clean: a second run has nothing to do.
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(actions(&log), Vec::<String>::new(), "{log}");
    // The desired plane holds the Stack, its template and the projection, owned by the Stack.
    let files: Vec<String> = site.desired().into_keys().collect();
    for f in ["stacks/k3s.yaml", "stack-templates/k3s.yaml"] {
        assert!(files.contains(&f.to_owned()), "{files:?}");
    }
    let stack = site
        .repo
        .git(&["show", &format!("{DESIRED}:stacks/k3s.yaml")]);
    let uid = stack
        .lines()
        .find_map(|l| l.trim().strip_prefix("uid: "))
        .unwrap()
        .to_owned();
    for agent in ["k3s-agent-a1", "k3s-agent-a2", "k3s-server"] {
        let doc = site
            .repo
            .git(&["show", &format!("{DESIRED}:resources/VM/{agent}.yaml")]);
        assert!(
            doc.contains("ownerReferences:") && doc.contains(&uid),
            "{doc}"
        );
    }
    let jumpbox = site
        .repo
        .git(&["show", &format!("{DESIRED}:resources/VM/jumpbox.yaml")]);
    assert!(!jumpbox.contains("ownerReferences"), "{jumpbox}");
    // `get` names the owner.
    let out = Command::new(proxops_bin())
        .args(["get", "VM", "--cluster", "home", "-o", "json", "--repo"])
        .arg(site.repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let owners: Vec<(String, Value)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_owned(), i["owner"].clone()))
        .collect();
    assert_eq!(
        owners,
        [
            ("jumpbox".to_owned(), Value::Null),
            ("k3s-agent-a1".to_owned(), "Stack/k3s".into()),
            ("k3s-agent-a2".to_owned(), "Stack/k3s".into()),
            ("k3s-server".to_owned(), "Stack/k3s".into()),
        ]
    );
}

#[test]
fn removing_one_agent_deletes_exactly_that_vm_and_nothing_else_changes() {
    let site = Site::new();
    let before = converged(&site);
    let desired_before = site.desired();
    site.edit(STACK, "      - {name: a1, vmid: 111, node: pve1}\n", "");
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(actions(&log), ["delete VM/k3s-agent-a1"], "{log}");
    let mut expected = before.clone();
    expected.remove(&111);
    assert_eq!(
        site.guests(),
        expected,
        "only VM 111 is gone, the others untouched"
    );
    // In the desired plane only the Stack (its parameters and projection) changed beside the
    // removed resource; the other resources keep their documents byte for byte.
    let after = site.desired();
    for (path, blob) in &desired_before {
        if path.starts_with("resources/") && !path.contains("k3s-agent-a1") {
            assert_eq!(after.get(path), Some(blob), "{path} changed");
        }
    }
    assert!(!after.contains_key("resources/VM/k3s-agent-a1.yaml"));
    assert_eq!(
        after.get("stack-templates/k3s.yaml"),
        desired_before.get("stack-templates/k3s.yaml")
    );
}

#[test]
fn adding_one_agent_creates_exactly_one_vm() {
    let site = Site::new();
    let before = converged(&site);
    let desired_before = site.desired();
    site.edit(
        STACK,
        "      - {name: a2, vmid: 112, node: pve2}\n",
        "      - {name: a2, vmid: 112, node: pve2}\n      - {name: a3, vmid: 113, node: pve2}\n",
    );
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(actions(&log), ["create VM/k3s-agent-a3"], "{log}");
    let after = site.guests();
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(
        after.get(&113).map(|(n, _)| n.as_str()),
        Some("k3s-agent-a3")
    );
    for (vmid, guest) in &before {
        assert_eq!(after.get(vmid), Some(guest), "guest {vmid} changed");
    }
    let desired_after = site.desired();
    for (path, blob) in &desired_before {
        if path.starts_with("resources/") {
            assert_eq!(desired_after.get(path), Some(blob), "{path} changed");
        }
    }
}

#[test]
fn removing_the_stack_deletes_its_projection_only() {
    let site = Site::new();
    let before = converged(&site);
    let listing = site.repo.read("clusters/home/resources.yaml");
    site.repo.write(
        "clusters/home/resources.yaml",
        &listing.replace("  - ../../stack/home/k3s.yaml\n", ""),
    );
    site.repo.commit_all("drop the k3s stack");
    let (code, log) = site.converge();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(
        actions(&log),
        [
            "delete VM/k3s-agent-a1",
            "delete VM/k3s-agent-a2",
            "delete VM/k3s-server"
        ],
        "{log}"
    );
    let jumpbox = before.get(&100).cloned();
    let after = site.guests();
    // The jumpbox and the Pi-hole (not the Stack's) are untouched.
    assert_eq!(after.len(), 2);
    assert_eq!(after.get(&100).cloned(), jumpbox);
    assert_eq!(after.get(&200).cloned(), before.get(&200).cloned());
    assert!(!site.desired().contains_key("stacks/k3s.yaml"));
}

#[test]
fn a_stack_whose_template_fails_validation_deletes_nothing() {
    let site = Site::new();
    let before = converged(&site);
    let desired_before = site.desired();
    let head_before = site.repo.git(&["rev-parse", DESIRED]);
    // The agents' memory becomes a value PVE cannot take: the template no longer projects,
    // and none of its resources may be taken for removed.
    site.edit(TEMPLATE, "        memory: 2GiB\n", "        memory: lots\n");
    let (code, log) = site.converge();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("stacktemplate/base/k3s.yaml"), "{log}");
    assert_eq!(actions(&log), Vec::<String>::new(), "{log}");
    assert_eq!(site.guests(), before);
    assert_eq!(site.repo.git(&["rev-parse", DESIRED]), head_before);
    assert_eq!(site.desired(), desired_before);
}
