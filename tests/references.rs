//! Reference expressions end to end: the homelab example in a temporary git repository, a VM
//! reading what an LXC became, against a persistent simulator.
//!
//! These tests read the `mac-addresses` artifact every guest receipt carries (any artifact name
//! works); `stacks.rs` runs the `ip-addresses` loop of `examples/stacks` into PVE's `nameserver`.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::Lab;
use serde_json::Value;

const DESIRED: &str = "proxops/desired/lab";

impl Lab {
    /// `proxops <command> --planes` on cluster lab's simulator; its standard output.
    fn run(&self, command: &str) -> String {
        self.run_to(command, true)
    }

    /// [`Lab::run`] while a consumer waits: the command exits 1, saying so.
    fn run_waiting(&self, command: &str) -> String {
        let stdout = self.run_to(command, false);
        assert!(
            stdout.contains("NOT converged") && stdout.contains("waiting"),
            "{stdout}"
        );
        stdout
    }

    fn run_to(&self, command: &str, converged: bool) -> String {
        let state = self.state.path().join("lab.json");
        let mut args = vec![command, "--planes", "--cluster", "lab", "--backend", "sim"];
        if command == "apply" {
            args.push("--yes");
        }
        args.extend(["--sim-state", state.to_str().unwrap()]);
        let out = self.proxops(&args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(if converged { 0 } else { 1 }),
            "{command}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn row(&self, selector: &str) -> Value {
        let out = self.proxops(&["get", selector, "--cluster", "lab", "-o", "json"]);
        assert!(out.status.success(), "{out:?}");
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        list["items"][0].clone()
    }

    fn sim(&self) -> Value {
        let text = std::fs::read_to_string(self.state.path().join("lab.lab.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// Sets the `pve-description` of VM sandbox-01 to `value` (one flow-style line).
    fn describe_sandbox(&self, value: &str) {
        let path = self.path().join("vm/lab/sandbox-01.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let old = "  pve-description: \"Lab sandbox VM\"";
        assert!(text.contains(old), "{text}");
        std::fs::write(
            &path,
            text.replace(old, &format!("  pve-description: {value}")),
        )
        .unwrap();
    }
}

const MAC_OF_RUNNER: &str =
    "{fromArtifact: {resource: LXC/ci-runner-01, name: mac-addresses, pointer: /net0}}";

#[test]
fn a_waiting_consumer_is_never_deleted_duplicated_or_created_with_a_placeholder() {
    let lab = Lab::new();
    lab.run("apply");
    let before = lab.row("VM/sandbox-01");
    assert_eq!(before["state"], "CLEAN", "{before}");
    // An existing VM now reads an artifact the producer never lists: it waits.
    lab.describe_sandbox(
        "{fromArtifact: {resource: LXC/ci-runner-01, name: not-there, pointer: /x}}",
    );
    // And a new VM reads one too: it is not created.
    let new_vm = std::fs::read_to_string(lab.path().join("vm/lab/sandbox-01.yaml"))
        .unwrap()
        .replace("name: sandbox-01", "name: sandbox-02")
        .replace("vmid: 100", "vmid: 101")
        .replace("10.10.50.100/24", "10.10.50.101/24");
    lab.repo.write("vm/lab/sandbox-02.yaml", &new_vm);
    let composition = lab.path().join("clusters/lab/resources.yaml");
    let text = std::fs::read_to_string(&composition).unwrap();
    std::fs::write(
        &composition,
        format!("{text}  - ../../vm/lab/sandbox-02.yaml\n"),
    )
    .unwrap();
    lab.commit("two consumers of a missing artifact");

    for _ in 0..2 {
        let stdout = lab.run_waiting("apply");
        assert!(!stdout.contains("delete"), "{stdout}");
        assert!(!stdout.contains("VM/sandbox-02 (101)"), "{stdout}");
        assert!(!stdout.contains("update    VM/sandbox-01"), "{stdout}");
        // Kept its previous desired document: no deletion intent, the same blob.
        assert!(lab.files(DESIRED, "deletions").is_empty());
        let now = lab.row("VM/sandbox-01");
        assert_eq!(now["state"], "WAIT", "{now}");
        assert!(
            now["reason"]
                .as_str()
                .unwrap()
                .contains("lists no artifact `not-there`"),
            "{now}"
        );
        assert_eq!(now["desired"]["blob"], before["desired"]["blob"]);
        assert_eq!(now["uid"], before["uid"]);
        let new = lab.row("VM/sandbox-02");
        assert_eq!(new["state"], "WAIT", "{new}");
        assert!(
            !lab.files(DESIRED, "resources/VM")
                .contains(&"resources/VM/sandbox-02.yaml".to_owned())
        );
    }
    let sim = lab.sim();
    let guests: Vec<&str> = sim["guests"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        guests,
        ["100", "200"],
        "the waiting VM stays, the new one is not created"
    );
    assert_eq!(
        sim["guests"]["100"]["config"]["description"],
        "Lab sandbox VM"
    );
    let waits = lab.git(&["show", &format!("{DESIRED}:waits.yaml")]);
    assert!(waits.contains("VM/sandbox-02"), "{waits}");

    // Without planes, a resource using a reference is never applied with a placeholder.
    let out = lab.apply_on("lab", &["--no-planes"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("proxops::reference::needs_planes"), "{text}");
    assert!(
        !text.contains("VM/sandbox-02 (101)") || !text.contains("create"),
        "{text}"
    );
    assert_eq!(lab.sim()["guests"].as_object().unwrap().len(), 2);
}

#[test]
fn get_shows_wait_before_the_producer_receipt_and_converge_takes_it_to_clean() {
    let lab = Lab::new();
    lab.describe_sandbox(MAC_OF_RUNNER);
    lab.commit("the sandbox describes itself with the runner's MAC");
    // One cycle: the producer is created; the consumer read nothing yet and waits.
    lab.run_waiting("apply");
    let row = lab.row("VM/sandbox-01");
    assert_eq!(row["state"], "WAIT", "{row}");
    assert!(
        row["reason"].as_str().unwrap().contains("LXC/ci-runner-01"),
        "{row}"
    );
    assert!(
        lab.sim()["guests"].get("100").is_none(),
        "not created with a placeholder"
    );
    let table = lab.proxops(&["get", "VM", "--cluster", "lab"]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.contains("WAIT"), "{table}");
    let status = lab.proxops(&["status", "--cluster", "lab"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("wait=1"),
        "{status:?}"
    );

    // Converge: the consumer resolves against the producer's receipt and is created.
    let stdout = lab.run("converge");
    assert!(stdout.contains("VM/sandbox-01 (100)"), "{stdout}");
    for selector in ["VM/sandbox-01", "LXC/ci-runner-01"] {
        assert_eq!(lab.row(selector)["state"], "CLEAN", "{selector}: {stdout}");
    }
    let sim = lab.sim();
    let lxc_net0 = sim["guests"]["200"]["config"]["net0"].as_str().unwrap();
    let mac = lxc_net0
        .split(',')
        .find_map(|p| p.strip_prefix("hwaddr="))
        .unwrap()
        .to_uppercase();
    assert_eq!(sim["guests"]["100"]["config"]["description"], mac.as_str());
    // The desired document records where the value came from.
    let doc = lab.git(&["show", &format!("{DESIRED}:resources/VM/sandbox-01.yaml")]);
    let doc = proxops_store::canonical::parse_yaml(&doc).unwrap();
    assert_eq!(doc["spec"]["pve-description"], mac.as_str());
    let input = &doc["resolvedInputs"]["artifacts"]["LXC/ci-runner-01/mac-addresses"];
    let artifact_blob = lab.git(&[
        "rev-parse",
        "proxops/observed/lab:artifacts/LXC/ci-runner-01/mac-addresses.yaml",
    ]);
    assert_eq!(input["artifact"], artifact_blob.trim(), "{doc}");
    assert!(
        lab.git(&["ls-tree", "--name-only", DESIRED])
            .lines()
            .all(|l| l != "waits.yaml")
    );
    // Converged: nothing more to do.
    let again = lab.run("converge");
    assert!(
        !again.contains("create") && !again.contains("update "),
        "{again}"
    );

    // The producer changes: until its new receipt exists the consumer waits on its previous
    // document; then the new input makes the consumer's document, and its receipt, new.
    let vm_before = lab.row("VM/sandbox-01");
    let path = lab.path().join("lxc/lab/ci-runner-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("memory: 4GiB", "memory: 6GiB")).unwrap();
    lab.commit("more memory for the runner");
    // `apply` runs one cycle: the runner is updated, its new receipt comes after.
    lab.run_waiting("apply");
    let waiting = lab.row("VM/sandbox-01");
    assert_eq!(waiting["state"], "WAIT", "{waiting}");
    assert!(
        waiting["reason"].as_str().unwrap().contains("stale"),
        "{waiting}"
    );
    assert_eq!(waiting["desired"]["blob"], vm_before["desired"]["blob"]);
    lab.run("converge");
    let after = lab.row("VM/sandbox-01");
    assert_eq!(after["state"], "CLEAN", "{after}");
    assert_ne!(
        after["desired"]["blob"], vm_before["desired"]["blob"],
        "new inputs"
    );
    assert_eq!(after["uid"], vm_before["uid"]);
}

#[test]
fn promote_carries_a_disk_image_url_and_checksum_from_the_pinned_source() {
    let lab = Lab::new();
    let config = lab.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{}\n      promotion:\n        allowed-sources: [lab]\n",
            text.trim_end()
        ),
    )
    .unwrap();
    // lab downloads a pinned build; home takes whatever lab's pinned desired state says.
    let sum = "c".repeat(64);
    let base = "diskimage/base/debian-13-genericcloud.yaml";
    let image = std::fs::read_to_string(lab.path().join(base)).unwrap();
    let url = "https://cloud.debian.org/images/cloud/trixie/20261201-1/debian-13-genericcloud-amd64.qcow2";
    let pinned = image
        .replace(
            "https://cloud.debian.org/images/cloud/trixie/latest/debian-13-genericcloud-amd64.qcow2",
            url,
        )
        .replace("\n  url:", &format!("\n  checksum:\n    algorithm: sha256\n    value: \"{sum}\"\n  url:"));
    lab.repo.write(base, &pinned);
    let home_image = image
        .lines()
        .map(|l| {
            if l.starts_with("  url:") {
                "  url: {fromPromotion: {}}\n  checksum: {fromPromotion: {}}".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    lab.repo.write(
        "diskimage/home/debian-13-genericcloud.yaml",
        &format!("{home_image}\n"),
    );
    let composition = lab.path().join("clusters/home/resources.yaml");
    let text = std::fs::read_to_string(&composition).unwrap();
    std::fs::write(
        &composition,
        text.replace(
            "../../diskimage/base/debian-13-genericcloud.yaml",
            "../../diskimage/home/debian-13-genericcloud.yaml",
        ),
    )
    .unwrap();
    lab.commit("home promotes its cloud image from lab");

    // `validate` says so first, at each expression, with the code publishing uses; the rest of
    // home stays valid.
    let v = lab.proxops(&["validate"]);
    let said = String::from_utf8_lossy(&v.stderr).into_owned();
    assert_eq!(v.status.code(), Some(1), "{said}");
    assert_eq!(
        said.matches("proxops::reference::unresolvable").count(),
        2,
        "{said}"
    );
    assert!(said.contains("debian-13-genericcloud.yaml"), "{said}");
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("cluster home: valid"),
        "{v:?}"
    );

    // Outside a promotion, `fromPromotion` is an error, not a wait.
    let out = lab.apply_on("home", &["--planes"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("fromPromotion"), "{text}");
    let home = crate::support::git_output(
        lab.path(),
        &["rev-parse", "--verify", "-q", "proxops/desired/home"],
    );
    assert!(!home.status.success(), "nothing published: {text}");

    lab.run("apply");
    let out = lab.proxops(&["promote", "--from", "lab", "--to", "home"]);
    assert!(out.status.success(), "{out:?}");
    // Promoted: the expressions resolve against the pinned source from now on.
    let v = lab.proxops(&["validate"]);
    assert!(v.status.success(), "{v:?}");
    let doc = lab.git(&[
        "show",
        "proxops/desired/home:resources/DiskImage/debian-13-genericcloud.yaml",
    ]);
    let doc = proxops_store::canonical::parse_yaml(&doc).unwrap();
    assert_eq!(doc["spec"]["url"], url, "{doc}");
    assert_eq!(doc["spec"]["checksum"]["value"], sum.as_str(), "{doc}");
    assert_eq!(doc["spec"]["checksum"]["algorithm"], "sha256", "{doc}");
    let source_blob = lab.git(&[
        "rev-parse",
        &format!("{DESIRED}:resources/DiskImage/debian-13-genericcloud.yaml"),
    ]);
    let inputs = &doc["resolvedInputs"]["promotion"];
    assert_eq!(
        inputs["DiskImage/debian-13-genericcloud#/url"],
        source_blob.trim(),
        "{doc}"
    );
    assert_eq!(
        inputs["DiskImage/debian-13-genericcloud#/checksum"],
        source_blob.trim(),
        "{doc}"
    );
}

#[test]
fn graph_shows_a_reference_as_an_edge_and_diff_uses_the_dry_fallback() {
    let lab = Lab::new();
    lab.run("apply");
    lab.describe_sandbox(
        "{fromArtifact: {resource: LXC/ci-runner-01, name: not-there, pointer: /net0, dryFallback: \"not observed yet\"}}",
    );
    lab.commit("a reference with a fallback");
    let out = lab.proxops(&["graph", "--cluster", "lab", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let graph: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sandbox = graph["clusters"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "sandbox-01")
        .unwrap()
        .clone();
    let edge = sandbox["dependsOn"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["source"] == "expression")
        .unwrap_or_else(|| panic!("{sandbox}"))
        .clone();
    assert_eq!(
        (edge["kind"].as_str(), edge["name"].as_str()),
        (Some("LXC"), Some("ci-runner-01"))
    );
    assert_eq!(edge["field"], "fromArtifact");

    // A dry run plans the fallback while the reference is unavailable; nothing is written.
    let state = lab.state.path().join("lab.json");
    let out = lab.proxops(&[
        "diff",
        "--cluster",
        "lab",
        "--backend",
        "sim",
        "--sim-state",
        state.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("update    VM/sandbox-01 (100)"),
        "{stdout}\n{out:?}"
    );
    assert!(stdout.contains("not observed yet"), "{stdout}");
    assert!(!stdout.contains("needs_planes"), "{stdout}");
}
