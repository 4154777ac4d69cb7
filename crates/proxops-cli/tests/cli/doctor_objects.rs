//! `proxops doctor` on the cluster's own objects (issue 32): every declared kind's requests
//! are checked against what the token holds, and each privilege it lacks is named with the
//! objects that need it, before anything is applied.

use crate::common::sim_of;
use crate::proxops;
use proxops_test_support::{copy_tree, homelab};

/// What a token needs for the example's guests, and reading what it manages: no privilege
/// that creates a cluster object.
const GUESTS: &str = "Datastore.Allocate,Datastore.AllocateSpace,Datastore.AllocateTemplate,Datastore.Audit,Pool.Audit,SDN.Audit,SDN.Use,Sys.Audit,Sys.Console,VM.Allocate,VM.Audit,VM.Backup,VM.Clone,VM.Config.CDROM,VM.Config.CPU,VM.Config.Cloudinit,VM.Config.Disk,VM.Config.HWType,VM.Config.Memory,VM.Config.Network,VM.Config.Options,VM.Console,VM.Migrate,VM.PowerMgmt,VM.Snapshot,Mapping.Audit,Mapping.Use";

/// The example copied, cluster `home` pointed at `url` with its certificate pinned.
fn home_repo(url: &str, fingerprint: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&homelab(), dir.path());
    let config = dir.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let pinned = text.replace(
        "base-url: https://pve-home.lan:8006",
        &format!("base-url: {url}\n      fingerprint: \"{fingerprint}\""),
    );
    assert_ne!(text, pinned);
    std::fs::write(config, pinned).unwrap();
    dir
}

/// `proxops doctor --cluster home` with `token`: its exit code and the FAIL lines.
fn doctor(repo: &std::path::Path, token: &str) -> (Option<i32>, Vec<String>) {
    let out = proxops()
        .env_remove("PROXOPS_PVE_TOKEN")
        .env("PROXOPS_PVE_TOKEN_HOME", token)
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", "/nonexistent/key.txt")
        .args(["doctor", "--cluster", "home", "--repo"])
        .arg(repo)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let fails = stdout
        .lines()
        .filter(|l| l.contains("FAIL"))
        .map(str::to_owned)
        .collect();
    (out.status.code(), fails)
}

/// The FAIL line naming `requirement`, which must name every one of `needed_by`.
fn named(fails: &[String], requirement: &str, needed_by: &[&str]) {
    let line = fails
        .iter()
        .find(|l| l.contains(&format!("missing {requirement}:")))
        .unwrap_or_else(|| panic!("no FAIL for {requirement}: {fails:#?}"));
    for what in needed_by {
        assert!(line.contains(what), "{requirement}: {what} not in {line}");
    }
}

#[test]
fn doctor_names_the_privileges_each_declared_object_needs_and_the_token_lacks() {
    let admin = "root@pam!ci=objects-admin";
    let guests = "ops@pve!guests=objects-guests";
    let users = "ops@pve!users=objects-users";
    let grant = |principal: &str, privs: &str| format!("{principal}:/:{privs}");
    let with_users = format!("{GUESTS},User.Modify");
    let (_server, url, fingerprint) = sim_of(
        "home",
        &[
            "--token",
            admin,
            "--extra-token",
            guests,
            "--extra-token",
            users,
            // A privilege-separated token holds what both it and its user are granted.
            "--acl",
            &grant("ops@pve", &with_users),
            "--acl",
            &grant("ops@pve!guests", GUESTS),
            "--acl",
            &grant("ops@pve!users", &with_users),
            "--offline-downloads",
        ],
    );
    let repo = home_repo(&url, &fingerprint);

    // Every privilege: nothing fails.
    let (code, fails) = doctor(repo.path(), admin);
    assert_eq!((code, fails.len()), (Some(0), 0), "{fails:#?}");

    // A token for guests only: each object's create names what it lacks.
    let (code, fails) = doctor(repo.path(), users);
    assert_eq!(code, Some(1));
    named(
        &fails,
        "Mapping.Modify on /mapping/pci",
        &["create ResourceMapping/hba"],
    );
    named(
        &fails,
        "Sys.Modify on /",
        &[
            "Firewall/home",
            "create BackupJob/nightly (POST /cluster/backup)",
        ],
    );
    named(
        &fails,
        "SDN.Allocate on /sdn/zones",
        &["create SdnZone/home"],
    );
    named(
        &fails,
        "SDN.Allocate on /sdn/zones/home",
        &["create SdnVnet/iot"],
    );
    named(
        &fails,
        "Sys.Modify on /access",
        &["create Role/metrics-reader"],
    );
    named(
        &fails,
        "Group.Allocate on /access/groups",
        &["create Group/monitoring"],
    );
    named(
        &fails,
        "Pool.Allocate on /pool/services",
        &[
            "create Pool/services",
            "create VM/truenas (vmid 140) (join its pool)",
        ],
    );
    named(
        &fails,
        "Permissions.Modify on /",
        &["create Acl/monitoring (PUT /access/acl)"],
    );
    named(
        &fails,
        "SDN.Allocate on /sdn",
        &["apply the SDN configuration"],
    );
    assert!(
        fails
            .iter()
            .any(|l| l.contains("Realm.AllocateUser on /access/realm/pve")
                && l.contains("create User/prometheus")),
        "{fails:#?}"
    );
    // It may make the token (User.Modify): not named; the Storage it may make too.
    assert!(
        fails
            .iter()
            .all(|l| !l.contains("ApiToken/") && !l.contains("Storage/nas")),
        "{fails:#?}"
    );

    // Without User.Modify it cannot even read the user's tokens: said, with the token's name.
    let (code, fails) = doctor(repo.path(), guests);
    assert_eq!(code, Some(1));
    named(
        &fails,
        "User.Modify on /access/groups",
        &["read /access/users/prometheus@pve/token (for ApiToken/prometheus-exporter)"],
    );
}
