//! The `sops` metadata block: recipients with their encrypted data keys, the encrypted MAC, the
//! time it was computed at, and the rule that decides which values are encrypted.

use crate::Error;
use crate::yaml::Node;
use regex::Regex;

/// One age recipient of a file and the data key encrypted to it (an armored age file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgeRecipient {
    /// The recipient's public key, `age1...`.
    pub recipient: String,
    /// The data key, age-encrypted to `recipient` and ASCII-armored.
    pub encrypted_key: String,
}

/// Which values of the tree sops encrypted. A file carries at most one rule; without one, sops
/// applies `unencrypted_suffix: _unencrypted`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncryptionRule {
    /// Values under a key ending in the suffix are plain text.
    UnencryptedSuffix(String),
    /// Only values under a key ending in the suffix are encrypted.
    EncryptedSuffix(String),
    /// Values under a key matching the regex are plain text.
    UnencryptedRegex(String),
    /// Only values under a key matching the regex are encrypted.
    EncryptedRegex(String),
}

/// The parsed `sops` block of a file.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// The age recipients, in file order.
    pub age: Vec<AgeRecipient>,
    /// Other key types present (`pgp`, `kms`, `gcp_kms`, ...), which ProxOps cannot use.
    pub other_key_types: Vec<String>,
    /// `lastmodified`, as written (RFC 3339).
    pub last_modified: String,
    /// The MAC, encrypted with the data key (`ENC[...]`).
    pub mac: String,
    /// Which values are encrypted.
    pub rule: EncryptionRule,
    /// Whether the MAC covers only the encrypted values.
    pub mac_only_encrypted: bool,
    /// The sops version that wrote the file.
    pub version: Option<String>,
    /// The rule's regex, compiled.
    pub(crate) regex: Option<Regex>,
}

const KEY_TYPES: [&str; 7] = [
    "age", "pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms",
];

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidMetadata {
        reason: reason.into(),
    }
}

fn text(node: &Node) -> Option<String> {
    match node {
        Node::Str(s) => Some(s.clone()),
        Node::Int(i) => Some(i.to_string()),
        Node::Float(f) => Some(crate::cipher::format_float(*f)),
        Node::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn field<'a>(map: &'a [(String, Node)], key: &str) -> Option<&'a Node> {
    map.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn string_field(map: &[(String, Node)], key: &str) -> Result<Option<String>, Error> {
    match field(map, key) {
        None | Some(Node::Null) => Ok(None),
        Some(node) => text(node)
            .map(Some)
            .ok_or_else(|| invalid(format!("`{key}` is not a scalar"))),
    }
}

/// Reads the recipients of one key group (the top level, or one `key_groups` entry).
fn read_group(
    group: &[(String, Node)],
    age: &mut Vec<AgeRecipient>,
    other: &mut Vec<String>,
) -> Result<(), Error> {
    for key_type in KEY_TYPES {
        let Some(node) = field(group, key_type) else {
            continue;
        };
        let entries = match node {
            Node::Seq(items) => items.as_slice(),
            Node::Null => &[],
            _ => return Err(invalid(format!("`{key_type}` is not a list"))),
        };
        if key_type != "age" {
            if !entries.is_empty() && !other.iter().any(|t| t == key_type) {
                other.push(key_type.to_owned());
            }
            continue;
        }
        for entry in entries {
            let Node::Map(entry) = entry else {
                return Err(invalid("an `age` entry is not a mapping"));
            };
            let recipient = string_field(entry, "recipient")?
                .ok_or_else(|| invalid("an `age` entry has no `recipient`"))?;
            let encrypted_key = string_field(entry, "enc")?
                .ok_or_else(|| invalid(format!("the `age` entry of {recipient} has no `enc`")))?;
            age.push(AgeRecipient {
                recipient: recipient.trim().to_owned(),
                encrypted_key,
            });
        }
    }
    Ok(())
}

impl Metadata {
    /// Reads the `sops` block.
    pub(crate) fn from_node(node: &Node) -> Result<Metadata, Error> {
        let Node::Map(map) = node else {
            return Err(invalid("`sops` is not a mapping"));
        };
        let mut age = Vec::new();
        let mut other = Vec::new();
        read_group(map, &mut age, &mut other)?;
        if let Some(groups) = field(map, "key_groups") {
            let Node::Seq(groups) = groups else {
                return Err(invalid("`key_groups` is not a list"));
            };
            // More than one group splits the data key with Shamir's scheme.
            if groups.len() > 1 {
                return Err(Error::Unsupported {
                    feature: format!(
                        "{} key groups (Shamir secret sharing); use one group",
                        groups.len()
                    ),
                });
            }
            for group in groups {
                let Node::Map(group) = group else {
                    return Err(invalid("a key group is not a mapping"));
                };
                read_group(group, &mut age, &mut other)?;
            }
        }
        if age.is_empty() && other.is_empty() {
            return Err(invalid("no recipients (no `age` keys)"));
        }
        let last_modified =
            string_field(map, "lastmodified")?.ok_or_else(|| invalid("no `lastmodified`"))?;
        let mac = string_field(map, "mac")?.ok_or_else(|| invalid("no `mac`"))?;
        let mac_only_encrypted = match field(map, "mac_only_encrypted") {
            None | Some(Node::Null) => false,
            Some(Node::Bool(b)) => *b,
            Some(_) => return Err(invalid("`mac_only_encrypted` is not a boolean")),
        };
        for comments in ["unencrypted_comment_regex", "encrypted_comment_regex"] {
            if string_field(map, comments)?.is_some_and(|s| !s.is_empty()) {
                return Err(Error::Unsupported {
                    feature: format!("`{comments}` (encryption decided by comments)"),
                });
            }
        }
        let mut rules = Vec::new();
        for (key, make) in [
            (
                "unencrypted_suffix",
                EncryptionRule::UnencryptedSuffix as fn(String) -> EncryptionRule,
            ),
            ("encrypted_suffix", EncryptionRule::EncryptedSuffix),
            ("unencrypted_regex", EncryptionRule::UnencryptedRegex),
            ("encrypted_regex", EncryptionRule::EncryptedRegex),
        ] {
            if let Some(value) = string_field(map, key)?.filter(|s| !s.is_empty()) {
                rules.push(make(value));
            }
        }
        if rules.len() > 1 {
            return Err(invalid(
                "more than one of unencrypted_suffix, encrypted_suffix, unencrypted_regex and \
                 encrypted_regex",
            ));
        }
        let rule = rules
            .pop()
            .unwrap_or_else(|| EncryptionRule::UnencryptedSuffix("_unencrypted".to_owned()));
        let regex = match &rule {
            EncryptionRule::UnencryptedRegex(r) | EncryptionRule::EncryptedRegex(r) => {
                Some(Regex::new(r).map_err(|e| invalid(format!("bad regex `{r}`: {e}")))?)
            }
            _ => None,
        };
        Ok(Metadata {
            age,
            other_key_types: other,
            last_modified,
            mac,
            rule,
            mac_only_encrypted,
            version: string_field(map, "version")?,
            regex,
        })
    }

    /// Whether the value at `path` (its mapping keys, outermost first) is encrypted: sops's
    /// `shouldBeEncrypted`, where one key of the path matching decides.
    pub(crate) fn is_encrypted(&self, path: &[&str]) -> bool {
        match (&self.rule, &self.regex) {
            (EncryptionRule::UnencryptedSuffix(s), _) => !path.iter().any(|k| k.ends_with(s)),
            (EncryptionRule::EncryptedSuffix(s), _) => path.iter().any(|k| k.ends_with(s)),
            (EncryptionRule::UnencryptedRegex(_), Some(re)) => !path.iter().any(|k| re.is_match(k)),
            (EncryptionRule::EncryptedRegex(_), Some(re)) => path.iter().any(|k| re.is_match(k)),
            // A regex rule always has its compiled regex (built together in `from_node`).
            (_, None) => true,
        }
    }

    /// The MAC's additional data: `lastmodified` as Go's `time.Format(time.RFC3339)` re-renders
    /// it after parsing (no fractional seconds; a zero offset as `Z`).
    pub(crate) fn mac_aad(&self) -> String {
        let t = self.last_modified.trim();
        let (main, zone) = match t.rfind(['Z', 'z', '+']).or_else(|| {
            // A negative offset: the last '-' after the time part.
            t.rfind('-').filter(|&i| i > 10)
        }) {
            Some(i) => t.split_at(i),
            None => (t, ""),
        };
        let main = main.split_once('.').map_or(main, |(m, _)| m);
        let zone = match zone {
            "z" | "Z" | "+00:00" | "-00:00" => "Z",
            z => z,
        };
        format!("{}{zone}", main.replacen('t', "T", 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(yaml: &str) -> Result<Metadata, Error> {
        let Node::Map(root) = crate::yaml::parse(yaml).unwrap() else {
            panic!()
        };
        Metadata::from_node(&root[0].1)
    }

    const BASE: &str = "sops:\n  age:\n    - recipient: age1abc\n      enc: x\n  lastmodified: \"2024-01-02T03:04:05Z\"\n  mac: ENC[x]\n";

    #[test]
    fn defaults_and_rules() {
        let m = meta(BASE).unwrap();
        assert_eq!(
            m.rule,
            EncryptionRule::UnencryptedSuffix("_unencrypted".into())
        );
        assert!(m.is_encrypted(&["a", "b"]));
        assert!(!m.is_encrypted(&["a_unencrypted", "b"]));
        let m = meta(&format!("{BASE}  encrypted_regex: ^(token|pass)$\n")).unwrap();
        assert!(m.is_encrypted(&["secrets", "token"]));
        assert!(!m.is_encrypted(&["secrets", "user"]));
        let m = meta(&format!("{BASE}  encrypted_suffix: _enc\n")).unwrap();
        assert!(m.is_encrypted(&["a_enc", "b"]));
        assert!(!m.is_encrypted(&["a", "b"]));
        assert!(matches!(
            meta(&format!(
                "{BASE}  encrypted_suffix: _enc\n  unencrypted_regex: x\n"
            )),
            Err(Error::InvalidMetadata { .. })
        ));
        assert!(matches!(
            meta(&format!("{BASE}  encrypted_comment_regex: x\n")),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn recipients_and_groups() {
        let m = meta(
            "sops:\n  key_groups:\n    - age:\n        - recipient: age1a\n          enc: e\n      pgp:\n        - fp: F\n  lastmodified: x\n  mac: y\n",
        )
        .unwrap();
        assert_eq!(m.age.len(), 1);
        assert_eq!(m.other_key_types, ["pgp"]);
        let pgp_only =
            meta("sops:\n  pgp:\n    - fp: F\n      enc: e\n  lastmodified: x\n  mac: y\n")
                .unwrap();
        assert!(pgp_only.age.is_empty());
        assert!(matches!(
            meta("sops:\n  lastmodified: x\n  mac: y\n"),
            Err(Error::InvalidMetadata { .. })
        ));
    }

    #[test]
    fn mac_aad_like_go() {
        let mut m = meta(BASE).unwrap();
        assert_eq!(m.mac_aad(), "2024-01-02T03:04:05Z");
        m.last_modified = "2024-01-02T03:04:05.123456Z".into();
        assert_eq!(m.mac_aad(), "2024-01-02T03:04:05Z");
        m.last_modified = "2024-01-02T03:04:05+00:00".into();
        assert_eq!(m.mac_aad(), "2024-01-02T03:04:05Z");
        m.last_modified = "2024-01-02T03:04:05.5-07:00".into();
        assert_eq!(m.mac_aad(), "2024-01-02T03:04:05-07:00");
    }
}
