//! `proxops init` through the binary: a new repository that validates and applies on the
//! simulator, its credentials encrypted everywhere (files and every git object), `--force` that
//! never overwrites, `--from-cluster` that adopts the live guests into the first commit without
//! ever planning to delete or duplicate one, and a failure that leaves nothing behind.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{copy_tree, example, git, proxops_bin};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SECRET: &str = "5f1c0b7e-2a4d-4c1e-9d3b-7e8f9a0b1c2d";

fn token() -> String {
    format!("proxops@pve!agent={SECRET}\n")
}

/// `proxops ARGS` with `stdin` piped in, nothing of the caller's credentials or age keys.
fn proxops(args: &[&str], stdin: &str, cwd: &Path) -> Output {
    let mut child = Command::new(proxops_bin())
        .args(args)
        .current_dir(cwd)
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .env("GIT_AUTHOR_NAME", "Init Test")
        .env("GIT_AUTHOR_EMAIL", "init@test.invalid")
        .env("GIT_COMMITTER_NAME", "Init Test")
        .env("GIT_COMMITTER_EMAIL", "init@test.invalid")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run proxops");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file under `dir` (the `.git` directory included) and every git object, decompressed.
fn everything(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    let objects = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .output()
        .unwrap();
    assert!(objects.status.success());
    out.push(("git objects".into(), objects.stdout));
    out
}

#[test]
fn a_new_repository_validates_applies_on_the_simulator_and_keeps_no_clear_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("keys/age.txt");
    let out = proxops(
        &[
            "init",
            "repo",
            "--cluster",
            "lab",
            "--url",
            "https://pve1.lan:8006",
            "--node",
            "pve1",
            "--new-age-key",
            key.to_str().unwrap(),
        ],
        &token(),
        tmp.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let repo = tmp.path().join("repo");
    assert!(text(&out).contains("committed "), "{}", text(&out));
    // One commit, by the user's identity, holding every file; nothing left uncommitted.
    assert_eq!(git(&repo, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(git(&repo, &["status", "--porcelain"]).trim(), "");
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%an"]).trim(),
        "Init Test"
    );
    for path in [
        "proxops.yaml",
        "clusters/lab/config.yaml",
        "clusters/lab/resources.yaml",
        "clusters/lab/secrets.sops.yaml",
        ".sops.yaml",
        ".gitignore",
        ".vscode/settings.json",
        "schema/vm.schema.json",
        "vm/base/.gitkeep",
        "vm/lab/.gitkeep",
    ] {
        assert!(repo.join(path).is_file(), "{path} missing");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the age key is private");
    }
    // The token is nowhere in clear: not in a file, not in git's objects.
    for (name, bytes) in everything(&repo) {
        let found = bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
        assert!(!found, "the token's secret is in clear in {name}");
    }
    // It validates, and the simulator applies it (an empty composition: nothing to do).
    let validate = proxops(&["validate", "--repo", "repo"], "", tmp.path());
    assert!(validate.status.success(), "{}", text(&validate));
    let sim = tmp.path().join("sim.json");
    let apply = proxops(
        &[
            "apply",
            "--repo",
            "repo",
            "--backend",
            "sim",
            "--sim-state",
            sim.to_str().unwrap(),
            "--yes",
        ],
        "",
        tmp.path(),
    );
    assert!(apply.status.success(), "{}", text(&apply));
    // The token decrypts with the key it made, and only with it: doctor authenticates with it.
    let mut doctor = Command::new(proxops_bin());
    doctor
        .args([
            "doctor",
            "--repo",
            "repo",
            "--backend",
            "sim",
            "--sim-state",
        ])
        .arg(&sim)
        .current_dir(tmp.path())
        .env_remove("PROXOPS_PVE_TOKEN")
        .env("SOPS_AGE_KEY_FILE", &key);
    let doctor = doctor.output().unwrap();
    assert!(
        text(&doctor).contains("API token proxops@pve!agent from SOPS key proxops-token"),
        "{}",
        text(&doctor)
    );
}

#[test]
fn a_directory_that_is_not_empty_is_refused_and_force_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("proxops.yaml"), "# mine\nlog:\n  level: debug\n").unwrap();
    let args = |force: bool| {
        let mut a = vec![
            "init",
            "repo",
            "--cluster",
            "lab",
            "--url",
            "https://pve1.lan:8006",
            "--no-credentials",
        ];
        if force {
            a.push("--force");
        }
        a
    };
    let refused = proxops(&args(false), "", tmp.path());
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("is not empty"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        std::fs::read_dir(&repo).unwrap().count(),
        1,
        "nothing written"
    );
    let forced = proxops(&args(true), "", tmp.path());
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(
        text(&forced).contains("kept proxops.yaml"),
        "{}",
        text(&forced)
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("proxops.yaml")).unwrap(),
        "# mine\nlog:\n  level: debug\n"
    );
    assert!(repo.join("clusters/lab/config.yaml").is_file());
    assert!(!repo.join("clusters/lab/secrets.sops.yaml").exists());
    // A second run has nothing to add and commits nothing.
    let again = proxops(&args(true), "", tmp.path());
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("nothing new to commit"),
        "{}",
        text(&again)
    );
    assert_eq!(git(&repo, &["rev-list", "--count", "HEAD"]).trim(), "1");
}

#[test]
fn credentials_without_a_key_or_stdin_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let base = [
        "init",
        "repo",
        "--cluster",
        "lab",
        "--url",
        "https://pve1.lan:8006",
    ];
    let no_key = proxops(&base, &token(), tmp.path());
    assert_eq!(no_key.status.code(), Some(2), "{}", text(&no_key));
    assert!(text(&no_key).contains("age key"), "{}", text(&no_key));
    let mut empty_stdin = base.to_vec();
    empty_stdin.extend([
        "--age-recipient",
        "age1wf30pqcjptpe2qlcepnxd80ju4cdzezumymha3rht5am4qzp5qqqm2y43s",
    ]);
    let empty = proxops(&empty_stdin, "", tmp.path());
    assert_eq!(empty.status.code(), Some(2), "{}", text(&empty));
    let mut bad_token = base.to_vec();
    bad_token.extend([
        "--age-recipient",
        "age1wf30pqcjptpe2qlcepnxd80ju4cdzezumymha3rht5am4qzp5qqqm2y43s",
    ]);
    let bad = proxops(&bad_token, "not-a-token\n", tmp.path());
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(
        text(&bad).contains("user@realm!id=secret"),
        "{}",
        text(&bad)
    );
    let inside = proxops(
        &[&base[..], &["--new-age-key", "repo/age.key"]].concat(),
        &token(),
        tmp.path(),
    );
    assert_eq!(inside.status.code(), Some(2), "{}", text(&inside));
    assert!(
        text(&inside).contains("would be committed"),
        "{}",
        text(&inside)
    );
    assert!(!tmp.path().join("repo").exists(), "nothing was written");
}

#[test]
fn a_failed_adoption_leaves_no_file_no_git_and_no_key_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("age.key");
    // Nothing listens on port 9 of loopback: the connection is refused.
    let out = proxops(
        &[
            "init",
            "repo",
            "--cluster",
            "lab",
            "--url",
            "https://127.0.0.1:9",
            "--new-age-key",
            key.to_str().unwrap(),
            "--from-cluster",
        ],
        &token(),
        tmp.path(),
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!tmp.path().join("repo").exists(), "{}", text(&out));
    assert!(
        !key.exists(),
        "the key of a repository that was not made is removed"
    );
}

/// The safety test of `--from-cluster`: the guests it adopts are in the first commit, and the
/// plan after it only tags them (no create, no delete), then is empty.
#[test]
fn from_cluster_adopts_the_live_guests_and_never_plans_to_delete_or_duplicate_them() {
    let tmp = tempfile::tempdir().unwrap();
    let seed_repo = tmp.path().join("seed");
    copy_tree(&example("adopt/repo"), &seed_repo);
    let state = tmp.path().join("sim.json");
    crate::adopt::seed(
        &seed_repo,
        &example("adopt/etc-pve"),
        &tmp.path().join("sim.lab.json"),
    );
    let state_s = state.to_str().unwrap();
    let sim = ["--backend", "sim", "--sim-state", state_s];
    let out = proxops(
        &[
            &[
                "init",
                "repo",
                "--cluster",
                "lab",
                "--url",
                "https://pve-lab.lan:8006",
                "--node",
                "pve1",
                "--age-recipient",
                "age1wf30pqcjptpe2qlcepnxd80ju4cdzezumymha3rht5am4qzp5qqqm2y43s",
                "--from-cluster",
            ][..],
            &sim[..],
        ]
        .concat(),
        &token(),
        tmp.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let repo = tmp.path().join("repo");
    let committed = git(&repo, &["ls-tree", "-r", "--name-only", "HEAD"]);
    for manifest in ["vm/lab/proxy.yaml", "vm/lab/db.yaml", "lxc/lab/dns.yaml"] {
        assert!(
            committed.lines().any(|l| l == manifest),
            "{manifest} not in {committed}"
        );
    }
    assert_eq!(git(&repo, &["status", "--porcelain"]).trim(), "");
    let diff = proxops(
        &[
            &["diff", "--repo", "repo", "--output", "json"][..],
            &sim[..],
        ]
        .concat(),
        "",
        tmp.path(),
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&diff.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&diff)));
    let verbs: Vec<String> = plan
        .pointer("/clusters/0/actions")
        .and_then(|a| a.as_array())
        .unwrap_or_else(|| panic!("no actions in {plan:#}"))
        .iter()
        .map(|a| a["verb"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(verbs, ["adopt", "adopt", "adopt"], "{plan:#}");
    let apply = proxops(
        &[&["apply", "--repo", "repo", "--yes"][..], &sim[..]].concat(),
        "",
        tmp.path(),
    );
    assert!(apply.status.success(), "{}", text(&apply));
    let after = proxops(
        &[
            &["diff", "--repo", "repo", "--detailed-exitcode"][..],
            &sim[..],
        ]
        .concat(),
        "",
        tmp.path(),
    );
    assert_eq!(after.status.code(), Some(0), "{}", text(&after));
}
