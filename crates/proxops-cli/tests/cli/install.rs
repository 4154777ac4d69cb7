//! What an installation ships beside the binary, as the Debian package's build makes it:
//! `--version` naming the commit, shell completions and one man page per subcommand.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use assert_cmd::Command;
use std::collections::BTreeSet;
use std::path::Path;

fn proxops() -> Command {
    let mut cmd = Command::cargo_bin("proxops").unwrap();
    cmd.env("NO_COLOR", "1");
    cmd
}

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// The subcommands `proxops --help` lists, but `help`.
fn subcommands() -> BTreeSet<String> {
    let help = stdout(proxops().arg("--help"));
    let list = help
        .split_once("Commands:\n")
        .expect("a Commands: section")
        .1;
    let names: BTreeSet<String> = list
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains("apply") && names.contains("man"),
        "{names:?}"
    );
    names
}

#[test]
fn version_names_the_release_and_the_commit_it_was_built_from() {
    let line = stdout(proxops().arg("--version"));
    let prefix = format!("proxops {} (", env!("CARGO_PKG_VERSION"));
    let inner = line
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{line:?}"));
    // The test runs in the checkout, so the build found its commit: 12 hex digits and the
    // commit date. (Outside a checkout, without PROXOPS_BUILD_COMMIT, it says `unknown`.)
    if git_commit_exists("HEAD").is_none() {
        assert_eq!(inner, "unknown", "{line:?}");
        return;
    }
    let (commit, date) = inner.split_once(' ').unwrap_or_else(|| panic!("{line:?}"));
    assert_eq!(commit.len(), 12, "{line:?}");
    assert!(commit.bytes().all(|b| b.is_ascii_hexdigit()), "{line:?}");
    let date: Vec<&str> = date.split('-').collect();
    assert!(
        date.len() == 3
            && [4, 2, 2].iter().zip(&date).all(|(n, d)| d.len() == *n)
            && date.iter().all(|d| d.bytes().all(|b| b.is_ascii_digit())),
        "{line:?}"
    );
    // A commit of this repository (not necessarily HEAD: a commit may land while tests run).
    assert_eq!(git_commit_exists(commit), Some(true), "{line:?}");
    // Subcommands say the same (`propagate_version`).
    let sub = stdout(proxops().args(["apply", "--version"]));
    assert_eq!(sub, line.replacen("proxops", "proxops-apply", 1));
}

/// Whether `rev` names a commit of the checkout; `None` without git or a checkout.
fn git_commit_exists(rev: &str) -> Option<bool> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .args(["cat-file", "-e", &format!("{rev}^{{commit}}")])
        .output()
        .ok()?;
    Some(out.status.success())
}

#[test]
fn completions_cover_every_subcommand_and_bash_parses_them() {
    let names = subcommands();
    let bash = stdout(proxops().args(["completions", "bash"]));
    assert!(bash.contains("_proxops()"), "{bash}");
    assert!(bash.contains("complete -F _proxops"), "{bash}");
    for name in &names {
        // clap_complete's bash script has a case per subcommand: `proxops,<name>)`.
        let case = format!("proxops,{name})");
        assert!(bash.contains(&case), "bash completion has no {case}");
    }
    // A subcommand's own flags are completed too.
    assert!(bash.contains("--detailed-exitcode"), "{bash}");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("proxops.bash");
    std::fs::write(&script, &bash).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output();
    if let Ok(check) = check {
        assert!(
            check.status.success(),
            "bash -n: {}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = stdout(proxops().args(["completions", shell]));
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell}: no {name}");
        }
    }
    proxops().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn man_writes_a_page_per_subcommand_and_prints_the_main_one() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = stdout(proxops().arg("man").arg("--dir").arg(&pages));
    let mut expected: BTreeSet<String> = subcommands()
        .iter()
        .map(|n| format!("proxops-{n}.1"))
        .collect();
    expected.insert("proxops.1".to_owned());
    let written: BTreeSet<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written, expected);
    assert_eq!(out.lines().count(), expected.len(), "{out}");
    for name in &written {
        let page = std::fs::read_to_string(pages.join(name)).unwrap();
        let title = name.trim_end_matches(".1");
        let th = page
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{name}: no .TH"));
        assert!(th.starts_with(&format!(".TH {title} 1 ")), "{name}: {th}");
        assert!(
            th.contains(&format!("{} (", env!("CARGO_PKG_VERSION"))),
            "{name}: {th}"
        );
        assert!(page.contains(".SH NAME"), "{name}");
        assert!(page.contains(".SH SYNOPSIS"), "{name}");
    }
    let apply = std::fs::read_to_string(pages.join("proxops-apply.1")).unwrap();
    assert!(apply.contains("\\fB\\-\\-yes\\fR"), "{apply}");
    // Without --dir: the main page, the same as the file.
    let main = stdout(proxops().arg("man"));
    assert_eq!(
        main,
        std::fs::read_to_string(pages.join("proxops.1")).unwrap()
    );
    for name in subcommands() {
        assert!(main.contains(&name), "the main page does not list {name}");
    }
    assert!(!Path::new(&pages).join(".proxops.1.tmp").exists());
}
