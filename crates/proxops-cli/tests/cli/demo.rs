//! `proxops demo` end to end: every step's result from its JSON report, the user's repository
//! left as it was, and the text a newcomer reads.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use assert_cmd::Command;
use proxops_test_support::{copy_tree, homelab};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn proxops() -> Command {
    let mut cmd = Command::cargo_bin("proxops").expect("binary");
    cmd.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE");
    cmd
}

/// Every file under `dir` with its bytes, by relative path.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The plan's actions of one verb and kinds.
fn planned(plan: &Value, verb: &str, kinds: &[&str]) -> usize {
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["verb"] == verb && kinds.contains(&a["kind"].as_str().unwrap()))
        .count()
}

#[test]
fn the_demo_report_shows_every_step_and_the_users_repository_is_untouched() {
    let user = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), user.path());
    let before = snapshot(user.path());
    let scratch = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = proxops()
        .env("TMPDIR", scratch.path())
        .args(["demo", "-o", "json", "--repo"])
        .arg(user.path())
        .assert()
        .success();
    let elapsed = started.elapsed();
    eprintln!("the demo took {elapsed:?}");
    assert!(elapsed.as_secs() < 10, "the demo took {elapsed:?}");
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();

    // 1. Both clusters applied, every create, clone, start and conversion exactly once (the
    // simulator's task log, with PVE's stats lag on), and the next cycle did nothing.
    let clusters = report["clusters"].as_array().unwrap();
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["home", "lab"]);
    for c in clusters {
        let name = &c["cluster"];
        let plan = &c["plan"];
        let tasks = |t: &str| c["tasks"][t].as_u64().unwrap_or(0) as usize;
        assert_eq!(c["result"], "applied", "{name}");
        assert_eq!(c["failed"], 0, "{name}");
        assert_eq!(c["again"], "inSync", "{name}");
        assert_eq!(c["tasksAgain"], 0, "{name}");
        assert_eq!(c["repeated"], Value::Array(vec![]), "{name}");
        let actions = plan["actions"].as_array().unwrap().len();
        assert_eq!(c["succeeded"].as_u64().unwrap() as usize, actions, "{name}");
        // One receipt per resource: an HA guest's create and ha-add make one, a firewall's
        // parts one; the SDN apply is no resource's.
        let mut subjects: Vec<(&str, &str)> = plan["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["kind"].as_str().unwrap(), a["name"].as_str().unwrap()))
            .filter(|(kind, _)| *kind != "SDN")
            .collect();
        subjects.sort_unstable();
        subjects.dedup();
        assert_eq!(
            c["receipts"].as_u64().unwrap() as usize,
            subjects.len(),
            "{name}"
        );
        assert_eq!(
            tasks("qmcreate") + tasks("qmclone"),
            planned(plan, "create", &["VM", "TemplateVM"]),
            "{name}: {}",
            c["tasks"]
        );
        assert_eq!(
            tasks("vzcreate"),
            planned(plan, "create", &["LXC", "TemplateCT"])
        );
        assert_eq!(
            tasks("qmtemplate"),
            planned(plan, "create", &["TemplateVM"])
        );
        assert_eq!(
            tasks("vztemplate"),
            planned(plan, "create", &["TemplateCT"])
        );
        assert_eq!(
            tasks("download"),
            planned(plan, "download", &["ISO", "CTTemplate", "DiskImage"])
        );
    }
    // Clones cannot start with their create: home's two clones were started once each.
    assert_eq!(clusters[0]["tasks"]["qmstart"], 2);
    // The example's placed guest and HA guest (README "Placement, migration and HA").
    let home = clusters[0]["plan"]["actions"].as_array().unwrap();
    let of = |name: &str, verb: &str| {
        home.iter()
            .find(|a| a["kind"] == "VM" && a["name"] == name && a["verb"] == verb)
            .unwrap_or_else(|| panic!("{verb} VM/{name} planned"))
    };
    let placed = of("monitoring", "create");
    assert_eq!(placed["node"], "pve2");
    assert!(
        placed["reason"]
            .as_str()
            .unwrap()
            .contains("placed on `pve2`"),
        "{placed}"
    );
    let ha = of("home-assistant", "haAdd");
    assert!(ha["reason"].as_str().unwrap().contains("vm:160"), "{ha}");

    // 2. Every resource of lab is CLEAN, with its receipt.
    let get = &report["get"];
    assert_eq!(get["cluster"], "lab");
    let items = get["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert_eq!(get["clean"], 5);
    assert!(
        items
            .iter()
            .all(|i| i["state"] == "CLEAN" && i["receipt"].is_object()),
        "{items:?}"
    );

    // 3. The change by hand was found, exactly, and restored, with a new receipt.
    let drift = &report["drift"];
    assert_eq!(drift["subject"], "VM/sandbox-01");
    assert_eq!(drift["byHand"].as_array().unwrap().len(), 2);
    // `proxops verify` reported it before the cycle, with both values of each key.
    assert_eq!(drift["verified"], true);
    assert_eq!(drift["verify"]["state"], "drifted", "{drift:#}");
    let memory = &drift["verify"]["differences"][0];
    assert_eq!(
        (&memory["key"], &memory["desired"], &memory["live"]),
        (&"memory".into(), &"2048".into(), &"4096".into())
    );
    assert_eq!(drift["verify"]["differences"][1]["key"], "tags");
    assert_eq!(drift["found"], true);
    assert_eq!(drift["restored"], true);
    let update = &drift["plan"]["actions"][0];
    assert_eq!(update["verb"], "update");
    let keys: Vec<&str> = update["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["memory", "tags"]);
    assert!(drift["observed"].is_string());

    // 4. The removed manifest's guest was pruned, its guards named, intent and teardown
    // recorded, and the other guest left alone.
    let prune = &report["prune"];
    assert_eq!(prune["subject"], "LXC/ci-runner-01");
    assert_eq!(prune["intent"], "deletions/LXC/ci-runner-01.yaml");
    assert_eq!(prune["deleted"], true);
    assert_eq!(prune["teardownRecorded"], true);
    assert_eq!(prune["guestsLeft"], 1);
    let delete = &prune["plan"]["actions"][0];
    assert_eq!(delete["verb"], "delete");
    let reason = delete["reason"].as_str().unwrap();
    assert!(
        reason.contains("`proxops.lab.lxc.ci-runner-01`"),
        "{reason}"
    );
    assert!(reason.contains("prune 1 of"), "{reason}");

    // 5. The guarded update: snapshot, update, start, verify; rolled back, recorded, left alone.
    let guarded = &report["guarded"];
    assert_eq!(guarded["subject"], "VM/sandbox-01");
    assert_eq!(guarded["changed"], "cores: 2 -> 4, state: started");
    let verbs: Vec<&str> = guarded["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["verb"].as_str().unwrap())
        .collect();
    assert_eq!(verbs, ["snapshot", "update", "start", "verify"]);
    assert!(
        guarded["snapshot"]
            .as_str()
            .unwrap()
            .starts_with("proxops-"),
        "{guarded:#}"
    );
    assert!(
        guarded["failure"]
            .as_str()
            .unwrap()
            .contains("rolled back to snapshot"),
        "{guarded:#}"
    );
    for flag in ["guarded", "rolledBack", "recorded"] {
        assert_eq!(guarded[flag], true, "{flag}: {guarded:#}");
    }
    assert_eq!(guarded["retried"], false);

    // The user's repository is as it was, and the demo's copy is gone.
    assert_eq!(snapshot(user.path()), before);
    assert_eq!(report["kept"], false);
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

#[test]
fn the_demo_tells_its_story_in_text_and_keeps_its_repository_when_asked() {
    let scratch = tempfile::tempdir().unwrap();
    let out = proxops()
        .current_dir(proxops_test_support::workspace())
        .env("TMPDIR", scratch.path())
        .args(["demo", "--keep"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for step in [
        "== 1. plan and apply every cluster, then plan again",
        "== 2. proxops get --cluster lab",
        "== 3. a change by hand in PVE, found as drift and restored",
        "== 4. a firewall rule changed by hand: found as drift and restored, a rule added by hand kept",
        "== 5. a manifest removed from the composition: pruned, and recorded",
        "== 6. a disruptive update guarded by a snapshot: the guest does not come back, rolled back",
        "== 7. where to look next",
        "    snapshot  VM/sandbox-01 (100)  pve1  before a disruptive update (cores): snapshot `proxops-",
        "FAILED (check-failed): check failed: the guest agent did not answer within 1.0s",
        "guarded update: VM/sandbox-01 (cores: 2 -> 4, state: started) after snapshot proxops-",
        "; the check failed; rolled back as it was; receipt rolledBack; not tried again\n",
        "cluster lab: converged, nothing to do",
        "by hand in PVE: VM/sandbox-01 (vmid 100): memory: 2048 -> 4096, tags: lab removed",
        "proxops verify --cluster lab:\n",
        "sandbox-01  Drifted  memory: desired 2048, live 4096; tags: desired ",
        "RESULT DRIFT: lab VM/sandbox-01 drifted\n",
        "demo: every step showed what it should",
    ] {
        assert!(stdout.contains(step), "{step}\n{stdout}");
    }
    let repo = stdout
        .lines()
        .find_map(|l| l.strip_prefix("the demo's repository: "))
        .unwrap();
    assert!(repo.starts_with(scratch.path().to_str().unwrap()), "{repo}");
    let log = std::process::Command::new("git")
        .args(["-C", repo, "log", "--oneline", "proxops/observed/lab"])
        .output()
        .unwrap();
    assert!(log.status.success());
    // Apply, the container's addresses (the plan again: its static address is there at once),
    // drift restored, prune, the guarded update rolled back: five receipt commits on lab's
    // observed plane (verify wrote none, nor did the cycle that left the rollback alone).
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 5);
    let quiet = proxops()
        .current_dir(proxops_test_support::workspace())
        .env("TMPDIR", scratch.path())
        .args(["demo", "--quiet"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&quiet.get_output().stdout).into_owned();
    assert!(text.starts_with("\n== summary\n"), "{text}");
    // The homelab declares a Firewall: its line is there too.
    assert_eq!(text.lines().count(), 10, "{text}");
}

/// The tasks a simulator state file records, as `(node, type, id)`.
fn tasks(state: &Path) -> Vec<(String, String, String)> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap().to_owned();
            (s("node"), s("type"), s("id"))
        })
        .collect()
}

#[test]
fn converge_of_the_homelab_runs_every_task_once_and_the_next_cycle_plans_nothing() {
    // With PVE's stats lag on (the simulator's default: `/cluster/resources` 10 s behind),
    // `converge` and a second `converge` right after it: every create, start, download and
    // template conversion once (clones are counted by their template, so they are left out).
    let user = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), user.path());
    let state = user.path().join("sim.json");
    let run = |args: &[&str]| {
        proxops()
            .args(args)
            .arg("--repo")
            .arg(user.path())
            .args(["--backend", "sim", "--sim-state"])
            .arg(&state)
            .assert()
            .success()
    };
    run(&["converge"]);
    let counts = |c: &str| {
        let mut all: Vec<_> = tasks(&user.path().join(format!("sim.{c}.json")))
            .into_iter()
            .filter(|(_, kind, _)| !kind.ends_with("clone"))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "{c}: a task ran twice");
        n
    };
    let before = (counts("home"), counts("lab"));
    run(&["converge"]);
    let out = run(&["diff", "--detailed-exitcode"]);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("cluster home: converged, nothing to do"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cluster lab: converged, nothing to do"),
        "{stdout}"
    );
    assert_eq!((counts("home"), counts("lab")), before);
}
