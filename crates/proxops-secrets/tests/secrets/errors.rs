//! Files ProxOps must refuse, each with its named error, and no error that shows a secret.

use crate::interop::MIXED;
use crate::support::{Keyed, Tools, tools};
use proxops_secrets::{Error, IdentitySource, SecretKeys, SopsFile};
use std::path::{Path, PathBuf};

/// Plain-text fragments of [`MIXED`]'s encrypted values: no error may contain any of them.
const SECRETS: [&str; 5] = ["5f1c0b7e", "root@pam", "pässwörd", "line one", "in-a-list"];

struct Fixture {
    t: Tools,
    k: Keyed,
    file: PathBuf,
    text: String,
}

fn fixture() -> Option<Fixture> {
    let t = tools()?;
    let k = t.keygen();
    let file = t.encrypt(k.dir.path(), "mixed", MIXED, &["--age", &k.recipient]);
    let text = std::fs::read_to_string(&file).unwrap();
    Some(Fixture { t, k, file, text })
}

impl Fixture {
    /// Decrypts `text` written next to the original.
    fn decrypt_text(&self, name: &str, text: &str) -> Result<proxops_secrets::Document, Error> {
        let path = self.k.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        self.k.decrypt(&path)
    }

    /// The line of `key`'s value.
    fn line_of(&self, key: &str) -> &str {
        let prefix = format!("{key}: ");
        self.text
            .lines()
            .find(|l| l.trim_start().starts_with(&prefix))
            .unwrap()
    }
}

/// Flips the first character of the `data:` part of `key`'s ENC value (stays valid base64).
fn flip_data(text: &str, key: &str) -> String {
    let marker = format!("{key}: ENC[AES256_GCM,data:");
    let at = text.find(&marker).unwrap() + marker.len();
    let old = text.as_bytes()[at];
    let new = if old == b'A' { 'B' } else { 'A' };
    format!("{}{}{}", &text[..at], new, &text[at + 1..])
}

fn assert_clean(name: &str, e: &Error) {
    for shown in [e.to_string(), format!("{e:?}")] {
        for secret in SECRETS {
            assert!(
                !shown.contains(secret),
                "{name}: error shows `{secret}`: {shown}"
            );
        }
    }
}

fn mac_mismatch(name: &str, result: Result<proxops_secrets::Document, Error>) {
    let err = result
        .err()
        .unwrap_or_else(|| panic!("{name}: accepted a tampered file"));
    assert!(matches!(err, Error::MacMismatch { .. }), "{name}: {err}");
    assert!(err.to_string().contains("MAC mismatch"), "{name}: {err}");
    assert_clean(name, &err);
}

#[test]
fn a_changed_value_fails_the_mac_check() {
    let Some(f) = fixture() else { return };
    assert!(f.k.decrypt(&f.file).is_ok());
    // One encrypted value's data changed.
    let err = f.decrypt_text("flip.yaml", &flip_data(&f.text, "proxops-token"));
    mac_mismatch("flipped data", err);
    // A clear (unencrypted-suffix) value changed: only the MAC notices.
    let edited = f.text.replace("visible-in-git", "visible-in-gix");
    mac_mismatch("edited clear value", f.decrypt_text("clear.yaml", &edited));
    // Two entries swapped: each value still authenticates, the order does not.
    let (user, token) = (f.line_of("proxops-user"), f.line_of("proxops-token"));
    let swapped = f
        .text
        .replace(user, "\u{0}")
        .replace(token, user)
        .replace('\u{0}', token);
    mac_mismatch("swapped entries", f.decrypt_text("swap.yaml", &swapped));
    // An entry removed.
    let removed = f.text.replace(&format!("{}\n", f.line_of("port")), "");
    mac_mismatch("removed entry", f.decrypt_text("removed.yaml", &removed));
    // A value moved under another key: its key path no longer authenticates it.
    let moved_value = user.split_once(": ").unwrap().1;
    let moved = f
        .text
        .replace(token, &format!("    proxops-token: {moved_value}"));
    mac_mismatch("moved value", f.decrypt_text("moved.yaml", &moved));
    // lastmodified changed: the stored MAC no longer authenticates.
    let stamp = f.line_of("lastmodified");
    let restamped = f
        .text
        .replace(stamp, "    lastmodified: \"2001-01-01T00:00:00Z\"");
    mac_mismatch("lastmodified", f.decrypt_text("stamp.yaml", &restamped));
}

#[test]
fn a_wrong_identity_names_the_recipients() {
    let Some(f) = fixture() else { return };
    let other_file = f.k.dir.path().join("other.txt");
    let other = f.t.keygen_into(&other_file);
    let err =
        proxops_secrets::decrypt_file(&f.file, &IdentitySource::key_file(&other_file)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::WrongIdentity { .. }), "{msg}");
    assert!(
        msg.contains(&f.k.recipient) && msg.contains(&other),
        "{msg}"
    );
    assert_clean("wrong identity", &err);
}

#[test]
fn no_identity_says_where_it_looked() {
    let Some(f) = fixture() else { return };
    let default = f.k.dir.path().join("config/sops/age/keys.txt");
    let source = IdentitySource {
        default_key_file: Some(default.clone()),
        ..IdentitySource::default()
    };
    let err = proxops_secrets::decrypt_file(&f.file, &source).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::NoIdentity { .. }), "{msg}");
    for place in ["SOPS_AGE_KEY (not set)", "SOPS_AGE_KEY_FILE (not set)"] {
        assert!(msg.contains(place), "{msg}");
    }
    assert!(msg.contains(&default.display().to_string()), "{msg}");
}

#[test]
fn plain_yaml_is_refused_as_unencrypted() {
    let Some(f) = fixture() else { return };
    let err = f.decrypt_text("plain.yaml", MIXED).unwrap_err();
    assert!(matches!(err, Error::NotEncrypted), "{err}");
    assert_clean("plain", &err);
    let err = f
        .decrypt_text("garbage.yaml", "{{{ not: [yaml")
        .unwrap_err();
    assert!(matches!(err, Error::Syntax { .. }), "{err}");
    let missing = proxops_secrets::decrypt_file(Path::new("/nonexistent.sops.yaml"), &f.k.source());
    assert!(matches!(missing, Err(Error::Io { .. })));
}

#[test]
fn malformed_values_and_unusable_recipients() {
    let Some(f) = fixture() else { return };
    // A value's type changed to one sops never writes.
    let user = f.line_of("proxops-user");
    let bad = f
        .text
        .replace(user, &user.replace(",type:str]", ",type:map]"));
    let err = f.decrypt_text("badtype.yaml", &bad).unwrap_err();
    assert!(
        matches!(&err, Error::MalformedValue { path, .. } if path == "secrets:proxops-user"),
        "{err}"
    );
    assert_clean("bad type", &err);
    // A plaintext secret pasted into an encrypted file: refused, and not echoed.
    let pasted = f.text.replace(user, "    proxops-user: root@pam");
    let err = f.decrypt_text("pasted.yaml", &pasted).unwrap_err();
    assert!(matches!(err, Error::MalformedValue { .. }), "{err}");
    assert_clean("pasted", &err);
    // Only a PGP recipient.
    let start = f.text.find("    age:\n").unwrap();
    let end = f.text.find("    lastmodified:").unwrap();
    let pgp = "    pgp:\n        - created_at: \"2024-01-01T00:00:00Z\"\n          enc: x\n          fp: ABCDEF\n";
    let pgp_only = format!("{}{pgp}{}", &f.text[..start], &f.text[end..]);
    let err = f.decrypt_text("pgp.yaml", &pgp_only).unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedKeyType { found } if found == &["pgp"]),
        "{err}"
    );
    let parsed = SopsFile::parse(&pgp_only).unwrap();
    assert!(parsed.metadata().age.is_empty());
}

#[test]
fn a_missing_key_is_named() {
    let Some(f) = fixture() else { return };
    let doc = f.k.decrypt(&f.file).unwrap();
    let mapping = SecretKeys {
        pve_user: Some("proxops-user".into()),
        pve_password: Some("proxops-password".into()),
        ..SecretKeys::default()
    };
    let err = doc.credentials(&mapping).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::MissingKey { .. }), "{msg}");
    assert!(
        msg.contains("secrets.proxops-password") && msg.contains("secrets.pve.password"),
        "{msg}"
    );
    assert_clean("missing key", &err);
}

#[test]
fn decrypted_values_are_redacted() {
    let Some(f) = fixture() else { return };
    let doc = f.k.decrypt(&f.file).unwrap();
    let shown = format!("{doc:?} {doc:#?}");
    for secret in SECRETS {
        assert!(!shown.contains(secret), "Debug shows `{secret}`: {shown}");
    }
    assert!(
        shown.contains("proxops-token"),
        "keys stay visible: {shown}"
    );
    let token = doc
        .get(&["secrets", "proxops-token"])
        .unwrap()
        .as_secret()
        .unwrap();
    assert_eq!(format!("{token} {token:?}"), "[redacted] [redacted]");
    assert_eq!(serde_json::to_string(&token).unwrap(), "\"[redacted]\"");
    let creds = doc
        .credentials(&SecretKeys {
            pve_token: Some("proxops-token".into()),
            ..SecretKeys::default()
        })
        .unwrap();
    assert!(!format!("{creds:?}").contains("5f1c0b7e"));
}
