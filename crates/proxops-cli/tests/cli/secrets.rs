//! Secrets end to end: PVE credentials and cloud-init material from a SOPS file encrypted by the
//! real `sops`, applied at debug log level with the planes on, and never seen again anywhere
//! (stdout, stderr, JSON plans, git objects); ticket auth and insecure TLS against a `proxops sim`
//! server; unresolvable cloud-init references as plan errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::lab_sim;
use assert_cmd::Command;
use proxops_test_support::{copy_tree, git, git_output, homelab, write};
use std::path::{Path, PathBuf};

const TOKEN_SECRET: &str = "tok-5e1f0c2a-sops-only";
const CI_PASSWORD: &str = "ci-pw-Qz7!sops-only";
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUm ops@sops-only";
/// A fragment of the key that survives percent-encoding (PVE's `sshkeys` form).
const SSH_KEY_BLOB: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIAcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUm";

fn proxops() -> Command {
    let mut cmd = Command::cargo_bin("proxops").unwrap();
    cmd.env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_LAB")
        .env_remove("PROXOPS_PVE_USER")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_LOG")
        .env_remove("SOPS_AGE_KEY");
    cmd
}

/// Encrypts `plain` with the real sops for a fresh age key; returns the key file.
fn encrypt(dir: &Path, plain: &str, to: &Path) -> Option<PathBuf> {
    let sops = proxops_test_support::sops()?;
    let age_keygen = proxops_test_support::age_keygen()?;
    let key = dir.join("key.txt");
    let made = std::process::Command::new(age_keygen)
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
    let plain_file = dir.join("plain.yaml");
    std::fs::write(&plain_file, plain).unwrap();
    let encrypted = std::process::Command::new(sops)
        .args(["encrypt", "--age", &recipient, "--input-type", "yaml"])
        .args(["--output-type", "yaml"])
        .arg(&plain_file)
        .output()
        .unwrap();
    assert!(encrypted.status.success(), "{encrypted:?}");
    std::fs::write(to, &encrypted.stdout).unwrap();
    std::fs::remove_file(plain_file).unwrap();
    Some(key)
}

/// The example's lab VM with its SSH key and password taken from the cluster's SOPS file.
fn use_secret_refs(repo: &Path) {
    let path = repo.join("vm/lab/sandbox-01.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("    ssh-keys:\n").unwrap();
    let end = text[start..].find("    nameservers:").unwrap() + start;
    let refs = "    ssh-key-refs:\n      - cloud-init.ssh-keys.main\n    ci-password-ref: cloud-init.passwords.default\n";
    std::fs::write(&path, format!("{}{refs}{}", &text[..start], &text[end..])).unwrap();
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for secret in [TOKEN_SECRET, CI_PASSWORD, SSH_KEY_BLOB] {
        assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
    }
}

#[test]
fn secrets_from_sops_reach_pve_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    copy_tree(&homelab(), &repo);
    use_secret_refs(&repo);
    write(
        &repo,
        "clusters/lab/config.yaml",
        "pve:\n  clusters:\n    lab:\n      base-url: https://pve-lab.invalid:8006\n      nodes: [pve1]\n      secrets-file: secrets.sops.yaml\n      secrets:\n        pve:\n          user: pve-user\n          token-id: pve-token-id\n          token: pve-token\n",
    );
    let plain = format!(
        "secrets:\n  pve-user: root@pam\n  pve-token-id: ci\n  pve-token: {TOKEN_SECRET}\ncloud-init:\n  ssh-keys:\n    main: \"{SSH_KEY}\"\n  passwords:\n    default: \"{CI_PASSWORD}\"\n"
    );
    let Some(key) = encrypt(
        dir.path(),
        &plain,
        &repo.join("clusters/lab/secrets.sops.yaml"),
    ) else {
        return;
    };
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "homelab with SOPS secrets"]);
    let state = dir.path().join("lab-state.json");
    let run = |args: &[&str]| {
        let mut cmd = proxops();
        cmd.env("SOPS_AGE_KEY_FILE", &key)
            .args(args)
            .args(["--cluster", "lab", "--backend", "sim", "--sim-state"])
            .arg(&state)
            .arg("--repo")
            .arg(&repo);
        cmd
    };

    // The doctor says where the credentials come from, never what they are.
    let out = run(&["doctor"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains(
            "pve.token = set (from SOPS key pve-token of clusters/lab/secrets.sops.yaml)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("API token root@pam!ci from SOPS key pve-token"),
        "{stdout}"
    );
    assert_clean("doctor", &out.get_output().stdout);

    // Apply at debug level, text then JSON logs, with the planes.
    let out = run(&["apply", "--planes", "--yes", "--log-level", "debug"])
        .assert()
        .success();
    let (stdout, stderr) = (&out.get_output().stdout, &out.get_output().stderr);
    let text = String::from_utf8_lossy(stderr);
    assert!(
        String::from_utf8_lossy(stdout).contains("cluster lab: 5 succeeded"),
        "{text}"
    );
    assert!(
        text.contains("PVE request") && text.contains("UPID:"),
        "{text}"
    );
    assert!(text.contains("planned"), "{text}");
    assert_clean("apply stdout", stdout);
    assert_clean("apply stderr", stderr);

    // PVE got the password and the key.
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("lab-state.lab.json")).unwrap(),
    )
    .unwrap();
    let config = &saved["guests"]["100"]["config"];
    assert_eq!(config["cipassword"], CI_PASSWORD);
    let sshkeys = config["sshkeys"].as_str().unwrap();
    assert!(
        sshkeys.contains(SSH_KEY_BLOB) && sshkeys.contains("%20ops%40sops-only"),
        "{sshkeys}"
    );

    // Converged: neither the masked password nor the key makes a perpetual diff.
    let out = run(&["diff", "--detailed-exitcode", "--output", "json"])
        .args(["--log-level", "debug", "--log-format", "json"])
        .assert()
        .code(0);
    assert_clean("diff JSON", &out.get_output().stdout);
    assert_clean("diff JSON logs", &out.get_output().stderr);
    let logs = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        logs.lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{logs}"
    );
    assert!(logs.contains("PVE request"), "{logs}");

    // Drift in the key is planned redacted.
    let mut saved = saved;
    saved["guests"]["100"]["config"]["sshkeys"] = "ssh-ed25519%20AAAAother%20x".into();
    std::fs::write(dir.path().join("lab-state.lab.json"), saved.to_string()).unwrap();
    let out = run(&["diff", "--output", "json"]).assert().success();
    assert_clean("diff JSON with drift", &out.get_output().stdout);
    let plan: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        plan["clusters"][0]["actions"][0]["changes"],
        serde_json::json!([{"key": "sshkeys", "from": "[redacted]", "to": "[redacted]"}])
    );
    let out = run(&[
        "apply",
        "--planes",
        "--yes",
        "--log-level",
        "debug",
        "--log-format",
        "json",
    ])
    .assert()
    .success();
    assert_clean("apply JSON stdout", &out.get_output().stdout);
    assert_clean("apply JSON logs", &out.get_output().stderr);

    // Nothing in git, in either plane or anywhere else, holds a secret.
    let objects = git_output(&repo, &["cat-file", "--batch-all-objects", "--batch"]).stdout;
    assert!(!objects.is_empty());
    let refs = git(&repo, &["for-each-ref"]);
    assert!(
        refs.contains("proxops/desired/lab") && refs.contains("proxops/observed/lab"),
        "{refs}"
    );
    // The secrets file is committed, encrypted; its plaintext never is.
    assert_clean("git objects", &objects);
}

#[test]
fn an_unresolvable_reference_is_an_error_for_its_resource() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    use_secret_refs(dir.path());
    // The example's lab config names a secrets file that does not exist.
    let out = proxops()
        .args(["diff", "--cluster", "lab", "--backend", "sim", "--repo"])
        .arg(dir.path())
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = stdout
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or_default();
    assert!(line.contains("VM/sandbox-01"), "{stdout}");
    assert!(line.contains("cloud-init.ssh-keys.main"), "{stdout}");
    assert!(line.contains("clusters/lab/secrets.sops.yaml"), "{stdout}");
    assert!(line.contains("proxops::cloud_init_secret"), "{stdout}");
    // The rest of the cluster is still planned.
    assert!(stdout.contains("create    LXC/ci-runner-01"), "{stdout}");
}

#[test]
fn ticket_auth_from_the_environment_and_an_insecure_warning_per_run() {
    let password = "ticket-pw-env-only";
    let (_server, url, fingerprint) = lab_sim(&["--offline-downloads", "--password", password]);
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let config = |tls: &str| {
        write(
            dir.path(),
            "clusters/lab/config.yaml",
            &format!(
                "pve:\n  auth: ticket\n  clusters:\n    lab:\n      base-url: {url}\n      {tls}\n      nodes: [pve1]\n"
            ),
        );
    };
    config(&format!("fingerprint: {fingerprint}"));
    let diff = |pw: &str| {
        let mut cmd = proxops();
        cmd.env("PROXOPS_PVE_PASSWORD_LAB", pw)
            .args(["diff", "--cluster", "lab", "--log-level", "debug", "--repo"])
            .arg(dir.path());
        cmd
    };
    let out = diff(password).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("logged in at /access/ticket"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");
    // The doctor names the layers: auth from the cluster config, the password from the env.
    let out = proxops()
        .env("PROXOPS_PVE_PASSWORD_LAB", password)
        .args(["doctor", "--cluster", "lab", "--repo"])
        .arg(dir.path())
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("pve.auth = ticket (from clusters/lab/config.yaml)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("pve.password = set (from env PROXOPS_PVE_PASSWORD_LAB)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("authenticated as user root@pam (password login)"),
        "{stdout}"
    );
    assert!(!stdout.contains(password), "{stdout}");
    // A wrong password is refused.
    diff("wrong").assert().code(1);

    // Verification off: it works and says so on every run.
    config("insecure: true");
    for _ in 0..2 {
        let out = diff(password).assert().success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains("warning: cluster `lab`: TLS certificate verification is off"),
            "{stderr}"
        );
    }
}

#[test]
fn a_malformed_proxops_yaml_stops_every_command_with_a_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    write(
        dir.path(),
        "proxops.yaml",
        "reconcile:\n  prune-budget: many\n",
    );
    for command in ["validate", "diff"] {
        let out = proxops()
            .args([command, "--repo"])
            .arg(dir.path())
            .args(if command == "diff" {
                &["--backend", "sim"][..]
            } else {
                &[]
            })
            .assert()
            .code(1);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains("proxops.yaml"), "{command}: {stderr}");
        assert!(
            stderr.contains("many"),
            "{command}: the label quotes the node: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&out.get_output().stdout).contains("create"));
    }
}
