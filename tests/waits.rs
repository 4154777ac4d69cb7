//! A consumer that waits is never "converged": waits are their own plan state, and a wait that
//! can never end is a `validate` error (issue 29, point 1). The homelab example in a temporary
//! git repository against a persistent simulator, and the agent following it.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{Lab, proxops_bin};
use std::process::Output;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Lab {
    /// `proxops <command> ARGS` on lab's simulator, with the planes.
    fn on_sim(&self, command: &str, args: &[&str]) -> Output {
        let state = self.state.path().join("lab.json");
        let mut all = vec![command, "--cluster", "lab", "--backend", "sim"];
        // `diff` reads the planes of a git work tree by default; `apply` asks unless told.
        match command {
            "diff" => {}
            "apply" => all.extend(["--planes", "--yes"]),
            _ => all.push("--planes"),
        }
        all.extend(args);
        all.extend(["--sim-state", state.to_str().unwrap()]);
        self.proxops(&all)
    }

    /// Adds VM `name` (vmid `vmid`), a copy of sandbox-01 whose description is `description`.
    fn add_consumer(&self, name: &str, vmid: u32, description: &str) {
        let vm = std::fs::read_to_string(self.path().join("vm/lab/sandbox-01.yaml"))
            .unwrap()
            .replace("name: sandbox-01", &format!("name: {name}"))
            .replace("vmid: 100", &format!("vmid: {vmid}"))
            .replace("10.10.50.100/24", &format!("10.10.50.{vmid}/24"))
            .replace(
                "pve-description: \"Lab sandbox VM\"",
                &format!("pve-description: {description}"),
            );
        self.repo.write(&format!("vm/lab/{name}.yaml"), &vm);
        let composition = self.path().join("clusters/lab/resources.yaml");
        let list = std::fs::read_to_string(&composition).unwrap();
        std::fs::write(
            &composition,
            format!("{list}  - ../../vm/lab/{name}.yaml\n"),
        )
        .unwrap();
    }
}

#[test]
fn a_consumer_that_waits_is_never_reported_converged() {
    let lab = Lab::new();
    let first = lab.on_sim("apply", &[]);
    assert!(first.status.success(), "{}", text(&first));
    lab.add_consumer(
        "sandbox-02",
        101,
        "{fromArtifact: {resource: LXC/ci-runner-01, name: ip-adresses, pointer: /net0/ipv4/0}}",
    );
    lab.commit("a consumer of an artifact name with a typo");

    // validate: the wait can never end, with the names the producer's receipts carry.
    let validate = lab.proxops(&["validate"]);
    let said = text(&validate);
    assert_eq!(validate.status.code(), Some(1), "{said}");
    assert!(said.contains("proxops::reference::unresolvable"), "{said}");
    assert!(said.contains("ip-adresses"), "{said}");
    assert!(said.contains("did you mean `ip-addresses`"), "{said}");
    assert!(said.contains("mac-addresses"), "{said}");

    // apply and converge exit 1, name the consumer, and create nothing.
    for command in ["apply", "converge"] {
        let out = lab.on_sim(command, &[]);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {said}");
        assert!(said.contains("NOT converged"), "{command}: {said}");
        assert!(said.contains("1 resource waiting"), "{command}: {said}");
        assert!(said.contains("VM/sandbox-02"), "{command}: {said}");
        assert!(!said.contains("create"), "{command}: {said}");
    }
    // diff: not in sync, not changes: waiting (exit 3), naming the consumer and why.
    let diff = lab.on_sim("diff", &["--detailed-exitcode"]);
    let said = text(&diff);
    assert_eq!(diff.status.code(), Some(3), "{said}");
    assert!(!said.contains("converged"), "{said}");
    assert!(said.contains("VM/sandbox-02"), "{said}");
    assert!(said.contains("lists no artifact `ip-adresses`"), "{said}");
    let json = lab.on_sim("diff", &["--output", "json"]);
    let plan: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let waiting = &plan["clusters"][0]["waiting"];
    assert_eq!(waiting[0]["subject"], "VM/sandbox-02", "{plan}");

    let sim = std::fs::read_to_string(lab.state.path().join("lab.lab.json")).unwrap();
    let sim: serde_json::Value = serde_json::from_str(&sim).unwrap();
    assert!(sim["guests"].get("101").is_none(), "never created");

    // The agent: one pass is not a success, and its status says why.
    let data = tempfile::tempdir().unwrap();
    let once = std::process::Command::new(proxops_bin())
        .args([
            "run",
            "--cluster",
            "lab",
            "--once",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--url")
        .arg(lab.path())
        .args(["--backend", "sim", "--sim-state"])
        .arg(data.path().join("sim.json"))
        .arg("--data-dir")
        .arg(data.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let said = text(&once);
    assert_eq!(once.status.code(), Some(1), "{said}");

    // Fixed: the consumer resolves and converge ends in sync.
    let path = lab.path().join("vm/lab/sandbox-02.yaml");
    let fixed = std::fs::read_to_string(&path).unwrap().replace(
        "ip-adresses, pointer: /net0/ipv4/0",
        "mac-addresses, pointer: /net0",
    );
    std::fs::write(&path, fixed).unwrap();
    lab.commit("the artifact every guest receipt carries");
    let validate = lab.proxops(&["validate"]);
    assert!(validate.status.success(), "{}", text(&validate));
    let converge = lab.on_sim("converge", &[]);
    assert!(converge.status.success(), "{}", text(&converge));
    let diff = lab.on_sim("diff", &["--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
}

#[test]
fn a_wait_that_can_never_end_is_a_validate_error_naming_what_is_accepted() {
    let lab = Lab::new();
    // A NIC the producer does not declare.
    lab.add_consumer(
        "sandbox-02",
        101,
        "{fromArtifact: {resource: LXC/ci-runner-01, name: ip-addresses, pointer: /net5/ipv4/0}}",
    );
    // Addresses of a VM whose guest agent is off.
    lab.add_consumer(
        "sandbox-03",
        102,
        "{fromArtifact: {resource: VM/sandbox-04, name: ip-addresses, pointer: /net0/ipv4/0}}",
    );
    let agentless = std::fs::read_to_string(lab.path().join("vm/lab/sandbox-01.yaml"))
        .unwrap()
        .replace("name: sandbox-01", "name: sandbox-04")
        .replace("vmid: 100", "vmid: 103")
        .replace("state: stopped ", "state: started ")
        .replace("10.10.50.100/24", "10.10.50.103/24")
        .replace("agent: true", "agent: false");
    lab.repo.write("vm/lab/sandbox-04.yaml", &agentless);
    // Addresses of a VM that is declared stopped.
    lab.add_consumer(
        "sandbox-05",
        104,
        "{fromArtifact: {resource: VM/sandbox-01, name: ip-addresses, pointer: /net0/ipv4/0}}",
    );
    // A receipt field that does not exist.
    lab.add_consumer(
        "sandbox-06",
        105,
        "{fromReceipt: {resource: LXC/ci-runner-01, pointer: /pveIdentty/vmid}}",
    );
    let composition = lab.path().join("clusters/lab/resources.yaml");
    let list = std::fs::read_to_string(&composition).unwrap();
    std::fs::write(
        &composition,
        format!("{list}  - ../../vm/lab/sandbox-04.yaml\n"),
    )
    .unwrap();
    lab.commit("four consumers that would wait forever");

    let out = lab.proxops(&["validate", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors: Vec<&serde_json::Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "proxops::reference::unresolvable")
        .collect();
    let said = serde_json::to_string_pretty(&errors).unwrap();
    assert_eq!(errors.len(), 4, "{said}");
    let of = |file: &str| {
        errors
            .iter()
            .find(|d| d.to_string().contains(file))
            .unwrap_or_else(|| panic!("no error in {file}: {said}"))
            .to_string()
    };
    let nic = of("sandbox-02.yaml");
    assert!(nic.contains("net5") && nic.contains("net0"), "{nic}");
    let agent = of("sandbox-03.yaml");
    assert!(agent.contains("agent"), "{agent}");
    let stopped = of("sandbox-05.yaml");
    assert!(stopped.contains("stopped"), "{stopped}");
    let receipt = of("sandbox-06.yaml");
    assert!(
        receipt.contains("pveIdentty") && receipt.contains("pveIdentity"),
        "{receipt}"
    );
    // Each refuses only its resource: the cluster is still planned.
    assert_eq!(report["clusters"][0]["valid"], true, "{report}");
}
