//! From a decrypted document to what ProxOps uses: the credentials a cluster's `secrets` block
//! names (keys of the document's `secrets:` map), and the cloud-init material manifests refer to
//! as `cloud-init.ssh-keys.<name>` and `cloud-init.passwords.<name>` (SPEC.md sections 3 and 5).

use crate::value::{Document, Value};
use crate::{Error, Secret};

/// Which keys of the document's `secrets:` map carry which credential: the shape of a cluster's
/// `secrets:` block in `config.yaml` (`secrets.pve.user`, `secrets.pve.token-id`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretKeys {
    /// `secrets.pve.user`: the key holding the PVE user (`root@pam`).
    pub pve_user: Option<String>,
    /// `secrets.pve.token-id`: the key holding the token id (the part after `!`).
    pub pve_token_id: Option<String>,
    /// `secrets.pve.token`: the key holding the token secret.
    pub pve_token: Option<String>,
    /// `secrets.pve.password`: the key holding the password (ticket auth).
    pub pve_password: Option<String>,
    /// `secrets.git.token`: the key holding the git HTTPS token.
    pub git_token: Option<String>,
}

/// The credentials resolved from a document: a field is `Some` exactly when the mapping named a
/// key for it. Fields left `None` fall back to environment or bootstrap values (the caller's job).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The PVE user.
    pub pve_user: Option<Secret>,
    /// The PVE token id.
    pub pve_token_id: Option<Secret>,
    /// The PVE token secret.
    pub pve_token: Option<Secret>,
    /// The PVE password.
    pub pve_password: Option<Secret>,
    /// The git HTTPS token.
    pub git_token: Option<Secret>,
}

impl Credentials {
    /// Whether any PVE credential came from the document (then a global `token-value` is not
    /// used for this cluster, SPEC.md section 2).
    pub fn has_pve(&self) -> bool {
        self.pve_user.is_some()
            || self.pve_token_id.is_some()
            || self.pve_token.is_some()
            || self.pve_password.is_some()
    }
}

const SSH_KEYS: &str = "cloud-init.ssh-keys.";
const PASSWORDS: &str = "cloud-init.passwords.";

impl Document {
    /// Checks the layout of a ProxOps secrets document: a `secrets:` map of scalars and/or a
    /// non-empty `cloud-init:` block whose `ssh-keys` and `passwords` map names to scalars.
    pub fn check_layout(&self) -> Result<(), Error> {
        let secrets = self.get(&["secrets"]);
        let cloud_init = self.get(&["cloud-init"]);
        let has_cloud_init = matches!(cloud_init, Some(Value::Map(e)) if !e.is_empty());
        if !matches!(secrets, Some(Value::Map(_))) && !has_cloud_init {
            return Err(Error::NotASecretsDocument);
        }
        let flat = |path: &str, v: Option<&Value>| -> Result<(), Error> {
            match v {
                None | Some(Value::Null) => Ok(()),
                Some(Value::Map(entries)) => entries.iter().try_for_each(|(k, v)| {
                    if v.is_scalar() || *v == Value::Null {
                        Ok(())
                    } else {
                        Err(Error::BadKey {
                            key: format!("{path}.{k}"),
                            field: format!("the `{path}` map"),
                            problem: "is not a scalar".to_owned(),
                        })
                    }
                }),
                Some(_) => Err(Error::BadKey {
                    key: path.to_owned(),
                    field: "the secrets document".to_owned(),
                    problem: "is not a map".to_owned(),
                }),
            }
        };
        flat("secrets", secrets)?;
        flat("cloud-init.ssh-keys", self.get(&["cloud-init", "ssh-keys"]))?;
        flat(
            "cloud-init.passwords",
            self.get(&["cloud-init", "passwords"]),
        )
    }

    /// The non-blank scalar at `path`, for `field` (named in errors).
    fn required(&self, path: &[&str], field: &str) -> Result<Secret, Error> {
        let key = path.join(".");
        let value = self.get(path).ok_or_else(|| Error::MissingKey {
            key: key.clone(),
            field: field.to_owned(),
        })?;
        let bad = |problem: &str| Error::BadKey {
            key: key.clone(),
            field: field.to_owned(),
            problem: problem.to_owned(),
        };
        let secret = match value {
            Value::Map(_) | Value::Seq(_) => return Err(bad("is not a scalar")),
            other => other.as_secret().ok_or_else(|| bad("is blank"))?,
        };
        if secret.is_blank() {
            return Err(bad("is blank"));
        }
        Ok(secret)
    }

    /// Resolves every key `keys` names from the `secrets:` map. A named key that is missing or
    /// blank is an error (no fall-back for a referenced field, SPEC.md section 3).
    pub fn credentials(&self, keys: &SecretKeys) -> Result<Credentials, Error> {
        let one = |name: &Option<String>, field: &str| -> Result<Option<Secret>, Error> {
            name.as_deref()
                .filter(|n| !n.is_empty())
                .map(|n| self.required(&["secrets", n], field))
                .transpose()
        };
        Ok(Credentials {
            pve_user: one(&keys.pve_user, "secrets.pve.user")?,
            pve_token_id: one(&keys.pve_token_id, "secrets.pve.token-id")?,
            pve_token: one(&keys.pve_token, "secrets.pve.token")?,
            pve_password: one(&keys.pve_password, "secrets.pve.password")?,
            git_token: one(&keys.git_token, "secrets.git.token")?,
        })
    }

    /// Resolves a manifest's reference `cloud-init.ssh-keys.<name>` or
    /// `cloud-init.passwords.<name>` to its value, trimmed.
    pub fn resolve(&self, reference: &str) -> Result<Secret, Error> {
        let (group, name) = if let Some(name) = reference.strip_prefix(SSH_KEYS) {
            ("ssh-keys", name)
        } else if let Some(name) = reference.strip_prefix(PASSWORDS) {
            ("passwords", name)
        } else {
            return Err(Error::BadReference {
                reference: reference.to_owned(),
                expected: format!("`{SSH_KEYS}<name>` or `{PASSWORDS}<name>`"),
            });
        };
        let valid = (1..=64).contains(&name.len())
            && !name.starts_with('-')
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid {
            return Err(Error::BadReference {
                reference: reference.to_owned(),
                expected: "a name of lowercase letters, digits and hyphens, not starting with a \
                           hyphen, at most 64 characters"
                    .to_owned(),
            });
        }
        let field = format!("the reference `{reference}`");
        Ok(self
            .required(&["cloud-init", group, name], &field)?
            .trimmed())
    }

    /// Resolves `cloud-init.ssh-keys.<name>` references in order, dropping repeated values.
    pub fn resolve_ssh_keys<S: AsRef<str>>(&self, references: &[S]) -> Result<Vec<Secret>, Error> {
        let mut keys: Vec<Secret> = Vec::new();
        for reference in references {
            let reference = reference.as_ref();
            if !reference.starts_with(SSH_KEYS) {
                return Err(Error::BadReference {
                    reference: reference.to_owned(),
                    expected: format!("`{SSH_KEYS}<name>`"),
                });
            }
            let key = self.resolve(reference)?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(Secret::new(v))
    }

    fn doc() -> Document {
        Document {
            root: Value::Map(vec![
                (
                    "secrets".into(),
                    Value::Map(vec![
                        ("user".into(), s("root@pam")),
                        ("token".into(), s("0b7c-uuid")),
                        ("id".into(), Value::Int(42)),
                        ("blank".into(), s("  ")),
                    ]),
                ),
                (
                    "cloud-init".into(),
                    Value::Map(vec![
                        (
                            "ssh-keys".into(),
                            Value::Map(vec![
                                ("main".into(), s("ssh-ed25519 AAAA me@host\n")),
                                ("dup".into(), s("ssh-ed25519 AAAA me@host")),
                            ]),
                        ),
                        (
                            "passwords".into(),
                            Value::Map(vec![("default".into(), s("pw"))]),
                        ),
                    ]),
                ),
            ]),
        }
    }

    #[test]
    fn credentials_by_key() {
        let keys = SecretKeys {
            pve_user: Some("user".into()),
            pve_token_id: Some("id".into()),
            pve_token: Some("token".into()),
            ..SecretKeys::default()
        };
        let c = doc().credentials(&keys).unwrap();
        assert_eq!(c.pve_user.unwrap().expose(), "root@pam");
        assert_eq!(c.pve_token_id.unwrap().expose(), "42");
        assert_eq!(c.pve_token.unwrap().expose(), "0b7c-uuid");
        assert!(c.pve_password.is_none() && c.git_token.is_none());
        assert!(doc().check_layout().is_ok());
    }

    #[test]
    fn missing_and_blank_keys_are_named() {
        let missing = SecretKeys {
            pve_password: Some("nope".into()),
            ..SecretKeys::default()
        };
        let err = doc().credentials(&missing).unwrap_err();
        assert!(
            matches!(&err, Error::MissingKey { key, field } if key == "secrets.nope" && field == "secrets.pve.password")
        );
        let blank = SecretKeys {
            git_token: Some("blank".into()),
            ..SecretKeys::default()
        };
        assert!(matches!(
            doc().credentials(&blank),
            Err(Error::BadKey { .. })
        ));
    }

    #[test]
    fn cloud_init_references() {
        let d = doc();
        assert_eq!(
            d.resolve("cloud-init.ssh-keys.main").unwrap().expose(),
            "ssh-ed25519 AAAA me@host"
        );
        assert_eq!(
            d.resolve("cloud-init.passwords.default").unwrap().expose(),
            "pw"
        );
        let keys = d
            .resolve_ssh_keys(&["cloud-init.ssh-keys.main", "cloud-init.ssh-keys.dup"])
            .unwrap();
        assert_eq!(keys.len(), 1);
        assert!(matches!(
            d.resolve("cloud-init.ssh-keys.other"),
            Err(Error::MissingKey { .. })
        ));
        assert!(matches!(
            d.resolve("cloud-init.ssh-keys.-x"),
            Err(Error::BadReference { .. })
        ));
        assert!(matches!(
            d.resolve("secrets.user"),
            Err(Error::BadReference { .. })
        ));
        assert!(matches!(
            d.resolve_ssh_keys(&["cloud-init.passwords.default"]),
            Err(Error::BadReference { .. })
        ));
    }

    #[test]
    fn layout() {
        let empty = Document {
            root: Value::Map(vec![("other".into(), Value::Null)]),
        };
        assert!(matches!(
            empty.check_layout(),
            Err(Error::NotASecretsDocument)
        ));
        let nested = Document {
            root: Value::Map(vec![(
                "secrets".into(),
                Value::Map(vec![("x".into(), Value::Seq(vec![]))]),
            )]),
        };
        assert!(matches!(nested.check_layout(), Err(Error::BadKey { .. })));
    }
}
