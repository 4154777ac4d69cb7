//! The external oracles: the real `sops` binary and Debian's `age-keygen`. Tests skip with a
//! message when either is missing, except under `CI=true`, where a missing tool fails.

use proxops_secrets::{Document, IdentitySource, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tools {
    pub sops: PathBuf,
    pub age_keygen: PathBuf,
}

/// The tools, or `None` (after saying why) when a test should skip; under `CI=true` a
/// missing tool fails the test.
pub fn tools() -> Option<Tools> {
    Some(Tools {
        sops: proxops_test_support::sops()?,
        age_keygen: proxops_test_support::age_keygen()?,
    })
}

/// A temporary directory with an age key made by `age-keygen`.
pub struct Keyed {
    pub dir: tempfile::TempDir,
    pub key_file: PathBuf,
    pub recipient: String,
}

impl Tools {
    pub fn keygen(&self) -> Keyed {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key.txt");
        let recipient = self.keygen_into(&key_file);
        Keyed {
            dir,
            key_file,
            recipient,
        }
    }

    /// Writes a new key to `file`, returning its recipient.
    pub fn keygen_into(&self, file: &Path) -> String {
        let out = Command::new(&self.age_keygen)
            .arg("-o")
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "age-keygen failed: {out:?}");
        let text = std::fs::read_to_string(file).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("# public key: "))
            .unwrap()
            .trim()
            .to_owned()
    }

    fn sops(&self, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.sops);
        // No identity or recipient from the developer's environment leaks in; no version check.
        for var in [
            "SOPS_AGE_KEY",
            "SOPS_AGE_KEY_FILE",
            "SOPS_AGE_KEY_CMD",
            "SOPS_AGE_RECIPIENTS",
            "SOPS_AGE_SSH_PRIVATE_KEY_FILE",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("XDG_CONFIG_HOME", dir.join("no-config"))
            .env("HOME", dir)
            .current_dir(dir);
        cmd
    }

    /// `sops encrypt` of `plain` (written to `<name>.yaml` in `dir`) with `args`; returns the
    /// encrypted file's path.
    pub fn encrypt(&self, dir: &Path, name: &str, plain: &str, args: &[&str]) -> PathBuf {
        let plain_path = dir.join(format!("{name}.yaml"));
        std::fs::write(&plain_path, plain).unwrap();
        let out = self
            .sops(dir)
            .args(["encrypt", "--input-type", "yaml", "--output-type", "yaml"])
            .args(args)
            .arg(&plain_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sops encrypt failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let enc = dir.join(format!("{name}.sops.yaml"));
        std::fs::write(&enc, &out.stdout).unwrap();
        enc
    }

    /// `sops decrypt --output-type json` of `file` with the key in `key_file`: the oracle.
    pub fn decrypt_json(&self, dir: &Path, file: &Path, key_file: &Path) -> serde_json::Value {
        let out = self
            .sops(dir)
            .env("SOPS_AGE_KEY_FILE", key_file)
            .args(["decrypt", "--input-type", "yaml", "--output-type", "json"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sops decrypt failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Keyed {
    pub fn source(&self) -> IdentitySource {
        IdentitySource::key_file(&self.key_file)
    }

    pub fn decrypt(&self, file: &Path) -> Result<Document, proxops_secrets::Error> {
        proxops_secrets::decrypt_file(file, &self.source())
    }
}

/// The decrypted tree as JSON, exposing every secret (tests only).
pub fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Float(f) => J::from(*f),
        Value::Str(s) => J::String(s.expose().to_owned()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        Value::Seq(items) => J::Array(items.iter().map(to_json).collect()),
    }
}

/// JSON equality with numbers compared by value (`1000` equals `1000.0`).
pub fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Keys of a mapping, in order.
pub fn keys(v: &Value) -> Vec<&str> {
    match v {
        Value::Map(entries) => entries.iter().map(|(k, _)| k.as_str()).collect(),
        _ => Vec::new(),
    }
}
