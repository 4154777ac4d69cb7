//! Files the real `sops` encrypts decrypt in-process to what `sops decrypt` itself yields.

use crate::support::{keys, same, to_json, tools};
use proxops_secrets::{EncryptionRule, IdentitySource, SecretKeys, SopsFile};
use serde_json::json;

/// Strings, integers, floats, booleans, nulls, nested maps and lists, in a deliberate key order.
pub const MIXED: &str = r#"# credentials
secrets:
  proxops-user: root@pam
  proxops-token: 5f1c0b7e-2a4d-4c1e-9d3b-7e8f9a0b1c2d # the token
  port: 8006
  negative: -12
  ratio: 1.5
  big: 1e3
  enabled: true
  disabled: false
  empty: ""
  nothing:
  quoted-number: "42"
  yes-string: yes
  unicode: "pässwörd ✓"
  multiline: |
    line one
    line two
  token_unencrypted: visible-in-git
zeta:
  nested:
    deeper:
      value: 7
alpha:
  - plain item
  - 3
  - 2.25
  - true
  - [x, y]
  - key: in-a-list
    other: 9
"#;

fn expected_mixed() -> serde_json::Value {
    json!({
        "secrets": {
            "proxops-user": "root@pam",
            "proxops-token": "5f1c0b7e-2a4d-4c1e-9d3b-7e8f9a0b1c2d",
            "port": 8006, "negative": -12, "ratio": 1.5, "big": 1000.0,
            "enabled": true, "disabled": false, "empty": "", "nothing": null,
            "quoted-number": "42", "yes-string": "yes", "unicode": "pässwörd ✓",
            "multiline": "line one\nline two\n", "token_unencrypted": "visible-in-git"
        },
        "zeta": {"nested": {"deeper": {"value": 7}}},
        "alpha": ["plain item", 3, 2.25, true, ["x", "y"], {"key": "in-a-list", "other": 9}]
    })
}

#[test]
fn mixed_types_decrypt_like_sops() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let file = t.encrypt(k.dir.path(), "mixed", MIXED, &["--age", &k.recipient]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("5f1c0b7e"),
        "sops left the token in clear text"
    );
    assert!(
        text.contains("visible-in-git"),
        "the _unencrypted value should stay clear"
    );

    let doc = k.decrypt(&file).unwrap();
    let ours = to_json(doc.root());
    assert!(same(&ours, &expected_mixed()), "ours: {ours:#}");
    let oracle = t.decrypt_json(k.dir.path(), &file, &k.key_file);
    assert!(same(&ours, &oracle), "ours: {ours:#}\nsops: {oracle:#}");
    // File order is kept (the MAC depends on it).
    assert_eq!(keys(doc.root()), ["secrets", "zeta", "alpha"]);
    let secrets = doc.get(&["secrets"]).unwrap();
    assert_eq!(
        keys(secrets)[..3],
        ["proxops-user", "proxops-token", "port"]
    );
}

#[test]
fn encrypted_regex_leaves_the_rest_clear() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let args = [
        "--age",
        &k.recipient,
        "--encrypted-regex",
        "^(proxops-token|value|key)$",
    ];
    let file = t.encrypt(k.dir.path(), "regex", MIXED, &args);
    let parsed = SopsFile::read(&file).unwrap();
    assert_eq!(
        parsed.metadata().rule,
        EncryptionRule::EncryptedRegex("^(proxops-token|value|key)$".into())
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("root@pam") && !text.contains("5f1c0b7e"));
    let doc = k.decrypt(&file).unwrap();
    assert!(same(&to_json(doc.root()), &expected_mixed()));
}

#[test]
fn unencrypted_suffix_is_honoured() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let plain = "config_plain:\n  host: pve.example\n  port: 8006\nsecrets:\n  token: s3cr3t-value\n  user_plain: root@pam\n";
    let args = ["--age", &k.recipient, "--unencrypted-suffix", "_plain"];
    let file = t.encrypt(k.dir.path(), "suffix", plain, &args);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("pve.example") && text.contains("root@pam"));
    assert!(!text.contains("s3cr3t-value"));
    let doc = k.decrypt(&file).unwrap();
    let expected = json!({
        "config_plain": {"host": "pve.example", "port": 8006},
        "secrets": {"token": "s3cr3t-value", "user_plain": "root@pam"}
    });
    assert!(same(&to_json(doc.root()), &expected));
}

#[test]
fn other_rules_and_mac_only_encrypted() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let dir = k.dir.path();
    let plain = "a_secret: hidden\nb: 2\nc:\n  d_secret: [1, true, 2.5]\n  e: clear\n";
    let expected =
        json!({"a_secret": "hidden", "b": 2, "c": {"d_secret": [1, true, 2.5], "e": "clear"}});
    for (name, args) in [
        ("encsuffix", vec!["--encrypted-suffix", "_secret"]),
        ("unencregex", vec!["--unencrypted-regex", "^(b|e)$"]),
    ] {
        let mut all = vec!["--age", k.recipient.as_str()];
        all.extend(args);
        let file = t.encrypt(dir, name, plain, &all);
        let doc = k.decrypt(&file).unwrap();
        assert!(same(&to_json(doc.root()), &expected), "{name}");
    }
    // mac_only_encrypted has no command-line flag: it comes from a creation rule.
    let rules = format!(
        "creation_rules:\n  - age: {}\n    encrypted_suffix: _secret\n    mac_only_encrypted: true\n",
        k.recipient
    );
    std::fs::write(dir.join(".sops.yaml"), rules).unwrap();
    let file = t.encrypt(dir, "maconly", plain, &[]);
    let parsed = SopsFile::read(&file).unwrap();
    assert!(parsed.metadata().mac_only_encrypted);
    let doc = k.decrypt(&file).unwrap();
    assert!(same(&to_json(doc.root()), &expected));
}

#[test]
fn any_recipient_and_any_key_source() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let second = k.dir.path().join("second.txt");
    let other = t.keygen_into(&second);
    let recipients = format!("{},{}", k.recipient, other);
    let file = t.encrypt(k.dir.path(), "two", MIXED, &["--age", &recipients]);
    // Only the second key, given as SOPS_AGE_KEY text with comments.
    let text = std::fs::read_to_string(&second).unwrap();
    let doc = proxops_secrets::decrypt_file(&file, &IdentitySource::keys(text)).unwrap();
    assert!(same(&to_json(doc.root()), &expected_mixed()));
    // The default key path under XDG_CONFIG_HOME.
    let config = k.dir.path().join("config");
    std::fs::create_dir_all(config.join("sops/age")).unwrap();
    std::fs::copy(&k.key_file, config.join("sops/age/keys.txt")).unwrap();
    let source = IdentitySource::from_vars(|v| {
        (v == "XDG_CONFIG_HOME").then(|| config.display().to_string())
    });
    assert!(proxops_secrets::decrypt_file(&file, &source).is_ok());
}

#[test]
fn a_proxops_secrets_file_maps_to_credentials() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let plain = "secrets:\n  proxops-user: automation@pve\n  proxops-token-id: proxops\n  proxops-token: 0b7c9d1e-uuid\n  proxops-git-token: ghp_example\ncloud-init:\n  ssh-keys:\n    main: ssh-ed25519 AAAAC3Nza ops@host\n  passwords:\n    default: ci-pass-123\n";
    let file = t.encrypt(k.dir.path(), "cluster", plain, &["--age", &k.recipient]);
    let doc = k.decrypt(&file).unwrap();
    doc.check_layout().unwrap();
    let mapping = SecretKeys {
        pve_user: Some("proxops-user".into()),
        pve_token_id: Some("proxops-token-id".into()),
        pve_token: Some("proxops-token".into()),
        git_token: Some("proxops-git-token".into()),
        ..SecretKeys::default()
    };
    let creds = doc.credentials(&mapping).unwrap();
    assert_eq!(creds.pve_user.as_ref().unwrap().expose(), "automation@pve");
    assert_eq!(creds.pve_token_id.as_ref().unwrap().expose(), "proxops");
    assert_eq!(creds.pve_token.as_ref().unwrap().expose(), "0b7c9d1e-uuid");
    assert_eq!(creds.git_token.as_ref().unwrap().expose(), "ghp_example");
    assert!(creds.pve_password.is_none() && creds.has_pve());
    assert_eq!(
        doc.resolve("cloud-init.ssh-keys.main").unwrap().expose(),
        "ssh-ed25519 AAAAC3Nza ops@host"
    );
    assert_eq!(
        doc.resolve("cloud-init.passwords.default")
            .unwrap()
            .expose(),
        "ci-pass-123"
    );
}

#[test]
fn yaml_forms_and_comments_survive_the_round_trip() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    // Clear values typed as sops's YAML library types them (the MAC hashes their Go rendering),
    // comments among entries and list items, an anchor, and keys that only quoting keeps strings.
    let plain = r#"clear_unencrypted:
  hex: 0x1F
  octal: 0o17
  date: 2024-01-02
  stamp: 2024-01-02T03:04:05Z
  word: yes
  float: 1.0
  exp: 2.5e-3
  "123": quoted key
  "true": another
secret:
  # a comment before
  list:
    - one # inline
    # between items
    - &anchor two
    - *anchor
  time: 2024-01-02T03:04:05Z
  "0": zero key
"#;
    let file = t.encrypt(k.dir.path(), "forms", plain, &["--age", &k.recipient]);
    let doc = k.decrypt(&file).unwrap();
    let ours = to_json(doc.root());
    let oracle = t.decrypt_json(k.dir.path(), &file, &k.key_file);
    assert!(same(&ours, &oracle), "ours: {ours:#}\nsops: {oracle:#}");
}

/// What ProxOps writes (`proxops init`), the real `sops` decrypts to the same values, with an
/// `age-keygen` key as with one ProxOps made, and its MAC checks.
#[test]
fn sops_decrypts_what_proxops_encrypts() {
    let Some(t) = tools() else { return };
    let k = t.keygen();
    let made = proxops_secrets::generate_identity();
    let made_key = k.dir.path().join("made.txt");
    std::fs::write(
        &made_key,
        made.key_file_text("2026-12-06T01:30:00Z").expose(),
    )
    .unwrap();
    let doc = proxops_secrets::Document::new(proxops_secrets::Value::Map(vec![
        (
            "secrets".into(),
            proxops_secrets::Value::Map(vec![
                ("proxops-user".into(), secret("proxops@pve")),
                ("proxops-token-id".into(), secret("agent")),
                (
                    "proxops-token".into(),
                    secret("5f1c0b7e-2a4d-4c1e-9d3b-7e8f9a0b1c2d"),
                ),
                ("unicode".into(), secret("pässwörd ✓")),
                ("port".into(), proxops_secrets::Value::Int(8006)),
                ("enabled".into(), proxops_secrets::Value::Bool(true)),
            ]),
        ),
        (
            "cloud-init".into(),
            proxops_secrets::Value::Map(vec![(
                "ssh-keys".into(),
                proxops_secrets::Value::Seq(vec![secret("ssh-ed25519 AAAA a@b")]),
            )]),
        ),
    ]));
    let text = proxops_secrets::encrypt_document(
        &doc,
        &[&k.recipient, &made.recipient],
        "2026-12-06T01:30:00Z",
    )
    .unwrap();
    let file = k.dir.path().join("written.sops.yaml");
    std::fs::write(&file, &text).unwrap();
    let want = json!({
        "secrets": {
            "proxops-user": "proxops@pve", "proxops-token-id": "agent",
            "proxops-token": "5f1c0b7e-2a4d-4c1e-9d3b-7e8f9a0b1c2d",
            "unicode": "pässwörd ✓", "port": 8006, "enabled": true
        },
        "cloud-init": {"ssh-keys": ["ssh-ed25519 AAAA a@b"]}
    });
    for key in [&k.key_file, &made_key] {
        let got = t.decrypt_json(k.dir.path(), &file, key);
        assert!(
            same(&got, &want),
            "sops decrypted {got} with {}",
            key.display()
        );
    }
    let ours = to_json(k.decrypt(&file).unwrap().root());
    assert!(same(&ours, &want), "{ours}");
}

fn secret(s: &str) -> proxops_secrets::Value {
    proxops_secrets::Value::Str(proxops_secrets::Secret::new(s))
}
