//! `proxops delete` end to end: the homelab committed in a temporary git repository, applied to
//! a persistent simulator. The tests try to make ProxOps delete what it must not (a template
//! whose clones are still declared, a newer incarnation than the one looked at) and re-create
//! what was deleted on purpose (by a later cycle, by an apply without planes).

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::Lab;
use serde_json::Value;
use std::process::Output;

const DESIRED: &str = "proxops/desired/home";

impl Lab {
    fn sim_state(&self) -> std::path::PathBuf {
        self.state.path().join("sim.json")
    }

    /// `proxops <args> --cluster home` on cluster home's persistent simulator.
    fn home(&self, args: &[&str]) -> Output {
        let state = self.sim_state();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--cluster", "home"]);
        if matches!(args.first(), Some(&("apply" | "diff"))) {
            all.extend(["--backend", "sim", "--sim-state", state.to_str().unwrap()]);
        }
        self.proxops(&all)
    }

    /// The vmids of the guests the simulator holds.
    fn guests(&self) -> Vec<u64> {
        let path = self.state.path().join("sim.home.json");
        let state: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut ids: Vec<u64> = state["guests"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    }

    fn head(&self, branch: &str) -> String {
        self.git(&["rev-parse", branch]).trim().to_owned()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn applied(lab: &Lab) -> Output {
    let out = lab.home(&["apply", "--yes", "--prune-budget", "0"]);
    assert!(out.status.code().is_some(), "{}", text(&out));
    out
}

#[test]
fn dependants_go_first_and_nothing_deleted_on_purpose_comes_back() {
    let lab = Lab::new();
    let first = applied(&lab);
    assert!(first.status.success(), "{}", text(&first));
    let before = lab.guests();
    for vmid in [110, 111, 9000] {
        assert!(before.contains(&vmid), "{before:?}");
    }

    // The template alone: its clones are still declared, so nothing is deleted.
    let marked = lab.home(&[
        "delete",
        "TemplateVM/debian-13-cloud-tpl",
        "--reason",
        "rebuild",
    ]);
    assert!(marked.status.success(), "{}", text(&marked));
    assert!(
        text(&marked).contains("marked for deletion"),
        "{}",
        text(&marked)
    );
    let held = applied(&lab);
    assert!(
        text(&held).contains("VM/k3s-agent-01, VM/k3s-server-01 still declared"),
        "{}",
        text(&held)
    );
    assert_eq!(lab.guests(), before, "nothing was deleted");

    // With its clones: clones first, then the template, each teardown recorded.
    let more = lab.home(&["delete", "VM/k3s-server-01", "VM/k3s-agent-01"]);
    assert!(more.status.success(), "{}", text(&more));
    let gone = applied(&lab);
    assert!(gone.status.success(), "{}", text(&gone));
    let out = text(&gone);
    // The progress lines, in the order the deletions finished.
    let progress = String::from_utf8_lossy(&gone.stderr).into_owned();
    let done = |what: &str| {
        progress
            .find(&format!("delete {what}"))
            .unwrap_or_else(|| panic!("no {what} in {progress}"))
    };
    let template = done("TemplateVM/debian-13-cloud-tpl");
    for clone in ["VM/k3s-server-01", "VM/k3s-agent-01"] {
        assert!(
            done(clone) < template,
            "clones before their template:\n{progress}"
        );
    }
    assert!(
        out.contains("marked for deletion with `proxops delete` (rebuild)"),
        "{out}"
    );
    let after = lab.guests();
    for vmid in [110, 111, 9000] {
        assert!(!after.contains(&vmid), "{vmid} still in {after:?}");
    }
    let kept: Vec<u64> = before
        .iter()
        .copied()
        .filter(|v| ![110, 111, 9000].contains(v))
        .collect();
    assert_eq!(after, kept, "nothing else was touched");
    let teardowns = lab.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        "proxops/observed/home",
        "--",
        "teardowns",
    ]);
    assert_eq!(teardowns.lines().count(), 3, "{teardowns}");

    // The manifests are still composed: no cycle creates them again, and validate says so.
    let again = applied(&lab);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(lab.guests(), kept);
    let diff = lab.home(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
    let validate = lab.proxops(&["validate"]);
    assert!(validate.status.success(), "{}", text(&validate));
    assert!(
        text(&validate).contains("proxops::delete::still_composed"),
        "{}",
        text(&validate)
    );
    // Nor does an apply that records no planes.
    let plain = lab.home(&["apply", "--yes", "--no-planes"]);
    assert!(plain.status.success(), "{}", text(&plain));
    assert_eq!(
        lab.guests(),
        kept,
        "an apply without planes re-created a deleted guest"
    );

    // Out of the composition: the intents go, and nothing else happens.
    let composition = lab.repo.read("clusters/home/resources.yaml");
    let trimmed: String = composition
        .lines()
        .filter(|l| !l.contains("k3s-") && !l.contains("debian-13-cloud-tpl"))
        .map(|l| format!("{l}\n"))
        .collect();
    lab.repo.write("clusters/home/resources.yaml", &trimmed);
    lab.commit("take the deleted ones out");
    let last = applied(&lab);
    assert!(last.status.success(), "{}", text(&last));
    assert_eq!(lab.guests(), kept);
    let intents = lab.git(&["ls-tree", "-r", "--name-only", DESIRED, "--", "deletions"]);
    assert_eq!(intents.trim(), "", "the intents were cleaned up");
    let validate = lab.proxops(&["validate"]);
    assert!(
        !text(&validate).contains("still_composed"),
        "{}",
        text(&validate)
    );
}

#[test]
fn a_stale_uid_or_an_unknown_resource_is_refused_and_nothing_is_published() {
    let lab = Lab::new();
    assert!(applied(&lab).status.success());
    let head = lab.head(DESIRED);
    let stale = lab.home(&[
        "delete",
        "VM/jumpbox",
        "--uid",
        "u1-00000000000000000000000000000000",
    ]);
    assert_eq!(stale.status.code(), Some(1), "{}", text(&stale));
    assert!(
        text(&stale).contains("proxops::delete::stale_uid"),
        "{}",
        text(&stale)
    );
    let unknown = lab.home(&["delete", "VM/nope"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", text(&unknown));
    let dry = lab.home(&["delete", "VM/jumpbox", "--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(text(&dry).contains("would be marked"), "{}", text(&dry));
    assert_eq!(
        lab.head(DESIRED),
        head,
        "no refusal and no dry run publishes"
    );

    // The UID `get` shows is the one that deletes.
    let get = lab.proxops(&["get", "VM/jumpbox", "--cluster", "home", "-o", "json"]);
    let doc: Value = serde_json::from_slice(&get.stdout).unwrap();
    let uid = doc
        .pointer("/items/0/uid")
        .or_else(|| doc.pointer("/0/uid"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no uid in {doc:#}"))
        .to_owned();
    let fenced = lab.home(&["delete", "VM/jumpbox", "--uid", &uid]);
    assert!(fenced.status.success(), "{}", text(&fenced));
    assert_ne!(lab.head(DESIRED), head);
    // Twice is a no-op.
    let head = lab.head(DESIRED);
    let twice = lab.home(&["delete", "VM/jumpbox"]);
    assert!(text(&twice).contains("already marked"), "{}", text(&twice));
    assert_eq!(lab.head(DESIRED), head);
}
