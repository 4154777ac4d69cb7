//! The example repositories validate, with the inventory the compatibility corpus records, and
//! the report is byte-for-byte the same however the compositions are ordered.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{copy_tree, example, shared};
use proxops_model::report::ValidationReport;
use proxops_model::{FsSource, LoadOptions, Registry, Repository, load_repository};
use std::collections::BTreeMap;
use std::path::Path;

fn load(dir: &Path) -> Repository {
    let source = FsSource::new(dir).expect("source");
    load_repository(&source, &Registry::builtin(), &LoadOptions::default()).expect("load")
}

fn report_bytes(repo: &Repository) -> String {
    serde_json::to_string_pretty(&ValidationReport::new(repo)).expect("json")
}

#[test]
fn compat_example_cluster_has_its_twelve_resources() {
    let Some(dir) = shared("compat/examples") else {
        return;
    };
    let repo = load(&dir);
    // The one error is cloudinit-vm's placeholder SSH key, which PVE refuses; it refuses only
    // that VM, and every manifest still loads.
    let errors: Vec<&str> = repo
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(errors, ["proxops::ssh_key"], "{:#?}", repo.diagnostics);
    let cluster = repo.cluster("example").expect("cluster example");
    assert!(cluster.valid);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &cluster.resources {
        *counts.entry(r.kind).or_default() += 1;
    }
    let expected: BTreeMap<&str, usize> = [
        ("CTTemplate", 1),
        ("DiskImage", 1),
        ("ISO", 1),
        ("LXC", 1),
        ("TemplateCT", 1),
        ("TemplateVM", 1),
        ("VM", 6),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expected);
    // Index order is the lexicographic order of the composed paths.
    let files: Vec<&str> = cluster
        .resources
        .iter()
        .map(|r| r.file.path.as_str())
        .collect();
    let mut sorted = files.clone();
    sorted.sort_unstable();
    assert_eq!(files, sorted);
    assert_eq!(files.first(), Some(&"ctt/base/golden-base.yaml"));
}

#[test]
fn homelab_validates_clean_with_both_clusters() {
    let repo = load(&example("homelab"));
    assert!(repo.diagnostics.is_empty(), "{:#?}", repo.diagnostics);
    let names: Vec<&str> = repo.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["home", "lab"]);
    for cluster in &repo.clusters {
        assert!(cluster.valid);
        // The shared base artifacts are listed by both clusters.
        for base in ["ISO", "CTTemplate", "DiskImage"] {
            assert!(
                cluster
                    .resources
                    .iter()
                    .any(|r| r.kind == base && r.file.path.contains("/base/")),
                "{} lacks a base {base}",
                cluster.name
            );
        }
    }
}

#[test]
fn stacks_validates_clean_with_its_projected_resources_and_reference() {
    let repo = load(&example("stacks"));
    assert!(repo.diagnostics.is_empty(), "{:#?}", repo.diagnostics);
    let home = repo.cluster("home").expect("cluster home");
    let names: Vec<String> = home.resources.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(
        names,
        [
            "CTTemplate/debian-13-standard",
            "LXC/pihole",
            "VM/jumpbox",
            "VM/k3s-server",
            "VM/k3s-agent-a1",
            "VM/k3s-agent-a2"
        ]
    );
    // The jumpbox's nameserver is a reference to the Pi-hole's addresses.
    let jumpbox = home
        .resources
        .iter()
        .find(|r| r.metadata.name == "jumpbox")
        .expect("jumpbox");
    assert_eq!(jumpbox.exprs.len(), 1);
    assert_eq!(home.stacks.len(), 1);
    assert_eq!(home.stacks[0].template.name(), "k3s");
}

#[test]
fn report_does_not_depend_on_composition_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&example("homelab"), dir.path());
    // Break something so the report has content, then compare against a reversed composition.
    let broken = dir.path().join("vm/home/jumpbox.yaml");
    let text = std::fs::read_to_string(&broken).expect("read");
    std::fs::write(&broken, text.replace("memory:", "memroy:")).expect("write");
    let before = report_bytes(&load(dir.path()));
    let composition = dir.path().join("clusters/home/resources.yaml");
    let text = std::fs::read_to_string(&composition).expect("read");
    let mut lines: Vec<&str> = text.lines().collect();
    let first_entry = lines
        .iter()
        .position(|l| l.trim_start().starts_with("- "))
        .expect("entries");
    lines[first_entry..].reverse();
    std::fs::write(&composition, lines.join("\n") + "\n").expect("write");
    let after = report_bytes(&load(dir.path()));
    assert!(before.contains("memroy"));
    // Same findings, same order; only composition line numbers could differ, and none is reported.
    assert_eq!(before, after);
}

/// The homelab ships the secrets files its cluster configs name, encrypted to the throw-away
/// key beside them: each decrypts with that key and holds every key the config maps.
#[test]
fn homelab_secrets_files_decrypt_with_the_example_key_and_hold_the_mapped_credentials() {
    use proxops_secrets::{IdentitySource, SecretKeys, decrypt_file};
    let dir = example("homelab");
    let repo = load(&dir);
    let key = IdentitySource::key_file(dir.join("example-age-key.txt"));
    for cluster in &repo.clusters {
        let entry = cluster.entry.as_ref().unwrap();
        let file = entry.secrets_file.as_deref().unwrap();
        let path = dir.join("clusters").join(&cluster.name).join(file);
        let document = decrypt_file(&path, &key).unwrap();
        document.check_layout().unwrap();
        let pve = entry.secrets.as_ref().and_then(|s| s.pve.as_ref()).unwrap();
        let found = document
            .credentials(&SecretKeys {
                pve_user: pve.user.clone(),
                pve_token_id: pve.token_id.clone(),
                pve_token: pve.token.clone(),
                ..SecretKeys::default()
            })
            .unwrap();
        assert_eq!(found.pve_user.unwrap().expose(), "proxops@pve");
        assert_eq!(found.pve_token_id.unwrap().expose(), cluster.name);
        assert!(found.pve_token.is_some(), "{}", cluster.name);
        // Without the key the file is refused, naming what to do.
        let none = IdentitySource::keys("");
        let e = decrypt_file(&path, &none).unwrap_err().to_string();
        assert!(e.contains("age"), "{e}");
    }
}

/// The README's "Embedding" section shows `examples/embed/src/main.rs` as it is.
#[test]
fn readme_embedding_section_shows_the_embed_example_whole() {
    let readme = std::fs::read_to_string(example("../README.md")).unwrap();
    let section = readme
        .split_once("\n## Embedding\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .expect("README has an \"Embedding\" section");
    let shown = section
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(code, _)| code)
        .expect("the section has a rust block");
    let source = std::fs::read_to_string(example("embed/src/main.rs")).unwrap();
    assert_eq!(
        shown, source,
        "README's Embedding snippet differs from examples/embed/src/main.rs"
    );
}

/// README "Installing on a PVE host" creates the API token's role with every privilege the
/// engine's privilege table (`proxops doctor`) can ask for: the common ones in `pveum role add`,
/// the release-specific guest-agent read in `pveum role modify`. Sys.Modify stays out (Sys.Audit
/// with Sys.AccessNetwork covers downloads; PVE 9's privileged containers are named apart).
#[test]
fn readme_install_role_grants_what_doctor_checks() {
    let readme = std::fs::read_to_string(example("../README.md")).unwrap();
    let section = readme
        .split_once("\n## Installing on a PVE host\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .expect("README has an \"Installing on a PVE host\" section");
    let privileges_after = |prefix: &str| -> Vec<String> {
        let line = section
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line"));
        let list = line.split('#').next().unwrap_or_default();
        list.split(|c: char| c.is_whitespace() || c == '"')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let role = privileges_after("# pveum role add ProxOps --privs ");
    let per_release = privileges_after("# pveum role modify ProxOps --append 1 --privs ");
    assert_eq!(per_release, ["VM.GuestAgent.Audit"]);
    assert!(section.contains("on PVE 8: VM.Monitor"), "{section}");

    // Every privilege literal of the table (its tests excluded): any text between two
    // consecutive quotes that reads `"<Family>.<Name>"`.
    let families = [
        "VM",
        "Datastore",
        "Sys",
        "SDN",
        "Mapping",
        "Pool",
        "Permissions",
    ];
    let dir = example("../crates/proxops-engine/src/privileges");
    let mut table = std::collections::BTreeSet::new();
    for file in ["mod.rs", "keys.rs"] {
        let source = std::fs::read_to_string(dir.join(file)).unwrap();
        let pieces: Vec<&str> = source.split('"').collect();
        for quoted in pieces.iter().skip(1).take(pieces.len().saturating_sub(2)) {
            let (family, rest) = quoted.split_once('.').unwrap_or_default();
            if families.contains(&family)
                && !rest.is_empty()
                && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
            {
                table.insert((*quoted).to_owned());
            }
        }
    }
    assert!(table.contains("VM.Allocate"), "{table:?}");
    let apart = [
        "Sys.Modify",
        "VM.Monitor",
        "VM.GuestAgent.Audit",
        "VM.GuestAgent.Unrestricted",
        // Either privilege lets a snapshot be rolled back; the role has VM.Snapshot.
        "VM.Snapshot.Rollback",
    ];
    let wanted: Vec<&String> = table
        .iter()
        .filter(|p| !apart.contains(&p.as_str()))
        .collect();
    let missing: Vec<&&String> = wanted.iter().filter(|p| !role.contains(p)).collect();
    assert!(
        missing.is_empty(),
        "README's ProxOps role lacks {missing:?}, which proxops doctor checks"
    );
    let extra: Vec<&String> = role.iter().filter(|p| !table.contains(*p)).collect();
    assert!(
        extra.is_empty(),
        "README's ProxOps role grants {extra:?}, which nothing needs"
    );
}
