//! [`SopsFile`]: an encrypted document, and its decryption: the data key from an age recipient
//! stanza, every value decrypted with its key path as additional data, and sops's MAC (SHA-512
//! over the values in document order, stored encrypted with `lastmodified` as additional data)
//! recomputed and compared.

use crate::cipher::{self, CipherError, ValueType, format_float};
use crate::identity::{Identities, IdentitySource};
use crate::metadata::Metadata;
use crate::value::{Document, Value};
use crate::yaml::{self, Node};
use crate::{Error, Secret};
use sha2::{Digest, Sha512};
use std::io::Read;
use std::path::Path;
use zeroize::Zeroizing;

/// sops's MAC prefix when the MAC covers only encrypted values (SHA-256 of `sops`).
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// A parsed SOPS-encrypted YAML document, not yet decrypted.
pub struct SopsFile {
    /// The top-level entries except `sops`, in file order.
    tree: Vec<(String, Node)>,
    metadata: Metadata,
}

impl std::fmt::Debug for SopsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SopsFile")
            .field(
                "keys",
                &self.tree.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl SopsFile {
    /// Parses an encrypted document. A YAML mapping without `sops` metadata is
    /// [`Error::NotEncrypted`].
    pub fn parse(text: &str) -> Result<SopsFile, Error> {
        let Node::Map(mut entries) = yaml::parse(text)? else {
            return Err(Error::Syntax {
                reason: "the document is not a mapping".to_owned(),
            });
        };
        let at = entries
            .iter()
            .position(|(k, _)| k == "sops")
            .ok_or(Error::NotEncrypted)?;
        let (_, sops) = entries.remove(at);
        let metadata = Metadata::from_node(&sops)?;
        Ok(SopsFile {
            tree: entries,
            metadata,
        })
    }

    /// Reads and parses the file at `path`.
    pub fn read(path: &Path) -> Result<SopsFile, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        // The text of a file that turns out not to be encrypted is plain secrets: wipe it.
        let text = Zeroizing::new(text);
        SopsFile::parse(&text)
    }

    /// The `sops` metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Recovers the data key with one of `identities`.
    fn data_key(&self, identities: &Identities) -> Result<Zeroizing<[u8; 32]>, Error> {
        let meta = &self.metadata;
        if meta.age.is_empty() {
            return Err(Error::UnsupportedKeyType {
                found: meta.other_key_types.clone(),
            });
        }
        let mut damaged = None;
        for stanza in &meta.age {
            let armored = age::armor::ArmoredReader::new(stanza.encrypted_key.as_bytes());
            let result = age::Decryptor::new(armored).and_then(|d| d.decrypt(identities.as_age()));
            let mut reader = match result {
                Ok(reader) => reader,
                Err(age::DecryptError::NoMatchingKeys) => continue,
                Err(e) => {
                    damaged.get_or_insert((stanza.recipient.clone(), e.to_string()));
                    continue;
                }
            };
            let mut key = Zeroizing::new(Vec::new());
            if let Err(e) = reader.read_to_end(&mut key) {
                damaged.get_or_insert((stanza.recipient.clone(), e.to_string()));
                continue;
            }
            let Ok(key) = <[u8; 32]>::try_from(key.as_slice()) else {
                damaged.get_or_insert((
                    stanza.recipient.clone(),
                    format!("it is {} bytes, not 32", key.len()),
                ));
                continue;
            };
            return Ok(Zeroizing::new(key));
        }
        if let Some((recipient, reason)) = damaged {
            return Err(Error::BadDataKey { recipient, reason });
        }
        Err(Error::WrongIdentity {
            recipients: meta.age.iter().map(|r| r.recipient.clone()).collect(),
            identities: identities.public_keys(),
        })
    }

    /// Decrypts the document with `identities`, verifying every value and the MAC.
    pub fn decrypt(&self, identities: &Identities) -> Result<Document, Error> {
        let key = self.data_key(identities)?;
        let mut walk = Walk {
            key: &key,
            meta: &self.metadata,
            hash: Sha512::new(),
            path: Vec::new(),
        };
        if self.metadata.mac_only_encrypted {
            walk.hash.update(MAC_ONLY_ENCRYPTED_INIT);
        }
        let mut root = Vec::with_capacity(self.tree.len());
        for (k, v) in &self.tree {
            walk.path.push(k);
            let value = walk.value(v)?;
            walk.path.pop();
            root.push((k.clone(), value));
        }
        let computed: String = walk
            .hash
            .finalize()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        self.verify_mac(&key, &computed)?;
        Ok(Document {
            root: Value::Map(root),
        })
    }

    fn verify_mac(&self, key: &[u8; 32], computed: &str) -> Result<(), Error> {
        let enc = cipher::parse_enc(&self.metadata.mac).map_err(|e| Error::InvalidMetadata {
            reason: format!("`mac` is not an encrypted value: {}", reason(&e)),
        })?;
        let stored = cipher::decrypt(&enc, key, &self.metadata.mac_aad()).map_err(|_| {
            Error::MacMismatch {
                detail: "the stored MAC does not authenticate (`sops.mac` or \
                         `sops.lastmodified` was changed)"
                    .to_owned(),
            }
        })?;
        // Both sides are public-length hex digests; the stored one was just authenticated.
        if stored.as_slice() != computed.as_bytes() {
            return Err(Error::MacMismatch {
                detail: "the MAC over the document's values does not match (a value was \
                         changed, added, removed or reordered)"
                    .to_owned(),
            });
        }
        Ok(())
    }
}

/// Reads, parses and decrypts the file at `path` with identities from `source`.
pub fn decrypt_file(path: &Path, source: &IdentitySource) -> Result<Document, Error> {
    let file = SopsFile::read(path)?;
    let identities = source.load()?;
    file.decrypt(&identities)
}

fn reason(e: &CipherError) -> String {
    match e {
        CipherError::Malformed(what) => what.clone(),
        CipherError::Unauthentic => "it does not authenticate".to_owned(),
    }
}

struct Walk<'a> {
    key: &'a [u8; 32],
    meta: &'a Metadata,
    hash: Sha512,
    /// Mapping keys from the root; sequence items add none (as in sops).
    path: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn value(&mut self, node: &'a Node) -> Result<Value, Error> {
        match node {
            Node::Null => Ok(Value::Null),
            Node::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    self.path.push(k);
                    let value = self.value(v)?;
                    self.path.pop();
                    out.push((k.clone(), value));
                }
                Ok(Value::Map(out))
            }
            Node::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Node::Map(_) | Node::Seq(_) | Node::Null => out.push(self.value(item)?),
                        leaf => out.extend(self.leaf(leaf, true)?),
                    }
                }
                Ok(Value::Seq(out))
            }
            leaf => self
                .leaf(leaf, false)?
                .ok_or_else(|| Error::MalformedValue {
                    path: self.path.join(":"),
                    reason: "an encrypted comment in place of a value".to_owned(),
                }),
        }
    }

    /// A scalar; `None` for an encrypted comment, which sops writes as a sequence item.
    fn leaf(&mut self, node: &Node, in_sequence: bool) -> Result<Option<Value>, Error> {
        let encrypted = self.meta.is_encrypted(&self.path);
        let value = if encrypted {
            match self.decrypt_leaf(node, in_sequence)? {
                Some(value) => value,
                None => return Ok(None),
            }
        } else {
            match node {
                Node::Bool(b) => Value::Bool(*b),
                Node::Int(i) => Value::Int(*i),
                Node::Float(f) => Value::Float(*f),
                Node::Str(s) => Value::Str(Secret::new(s.as_str())),
                Node::Null | Node::Map(_) | Node::Seq(_) => Value::Null,
            }
        };
        if encrypted || !self.meta.mac_only_encrypted {
            // sops's ToBytes: the value as Go formats it.
            match &value {
                Value::Str(s) => self.hash.update(s.expose().as_bytes()),
                Value::Int(i) => self.hash.update(i.to_string()),
                Value::Float(f) => self.hash.update(format_float(*f)),
                Value::Bool(b) => self.hash.update(if *b { "True" } else { "False" }),
                Value::Null | Value::Map(_) | Value::Seq(_) => {}
            }
        }
        Ok(Some(value))
    }

    /// Decrypts one value; `None` for a comment in a sequence (sops encrypts YAML comments
    /// between list items into items of type `comment`; they are not data and not in the MAC).
    fn decrypt_leaf(&self, node: &Node, in_sequence: bool) -> Result<Option<Value>, Error> {
        let path = || self.path.join(":");
        let malformed = |reason: String| Error::MalformedValue {
            path: path(),
            reason,
        };
        let Node::Str(text) = node else {
            return Err(malformed(
                "it is not encrypted, though the file's rule says it should be (edited \
                 without sops?)"
                    .to_owned(),
            ));
        };
        // sops stores an empty string as is.
        if text.is_empty() {
            return Ok(Some(Value::Str(Secret::default())));
        }
        if !cipher::is_enc(text) {
            return Err(malformed(
                "it is plain text, though the file's rule says it should be encrypted (edited \
                 without sops?)"
                    .to_owned(),
            ));
        }
        let enc = cipher::parse_enc(text).map_err(|e| malformed(reason(&e)))?;
        let aad = format!("{}:", path());
        let plain = cipher::decrypt(&enc, self.key, &aad).map_err(|e| match e {
            CipherError::Unauthentic => Error::MacMismatch {
                detail: format!("the value at `{}` does not authenticate", path()),
            },
            CipherError::Malformed(what) => malformed(what),
        })?;
        let text = std::str::from_utf8(&plain)
            .map_err(|_| malformed("the decrypted value is not UTF-8".to_owned()))?;
        let bad_type = |t: &str| malformed(format!("the decrypted value is not a valid {t}"));
        Ok(Some(match enc.kind {
            ValueType::Str | ValueType::Time | ValueType::Bytes => Value::Str(Secret::new(text)),
            ValueType::Int => Value::Int(text.parse().map_err(|_| bad_type("int"))?),
            ValueType::Float => Value::Float(text.parse().map_err(|_| bad_type("float"))?),
            // Go's strconv.ParseBool.
            ValueType::Bool => match text {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => Value::Bool(true),
                "0" | "f" | "F" | "false" | "FALSE" | "False" => Value::Bool(false),
                _ => return Err(bad_type("bool")),
            },
            ValueType::Comment if in_sequence => return Ok(None),
            ValueType::Comment => {
                return Err(malformed("a comment in place of a value".to_owned()));
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    //! A file built here exactly as sops builds one, so decryption is covered without the sops
    //! binary (the integration tests check the same against files sops writes).
    use super::*;
    use crate::cipher::tests::seal;
    use age::secrecy::ExposeSecret;
    use std::io::Write;

    fn armored(data_key: &[u8; 32], recipient: &age::x25519::Recipient) -> String {
        let recipients = [recipient as &dyn age::Recipient];
        let encryptor = age::Encryptor::with_recipients(recipients.into_iter()).unwrap();
        let armor =
            age::armor::ArmoredWriter::wrap_output(Vec::new(), age::armor::Format::AsciiArmor)
                .unwrap();
        let mut writer = encryptor.wrap_output(armor).unwrap();
        writer.write_all(data_key).unwrap();
        String::from_utf8(writer.finish().unwrap().finish().unwrap()).unwrap()
    }

    fn indent(text: &str, by: &str) -> String {
        text.lines().map(|l| format!("{by}{l}\n")).collect()
    }

    /// A file with a string, an int, a bool, a list and a clear value, and its identity.
    fn sample() -> (String, Identities) {
        let id = age::x25519::Identity::generate();
        let key = [42u8; 32];
        let stamp = "2024-01-02T03:04:05Z";
        let mut mac = Sha512::new();
        for part in ["tok", "8006", "True", "a", "b", "clear"] {
            mac.update(part);
        }
        let mac: String = mac.finalize().iter().map(|b| format!("{b:02X}")).collect();
        let text = format!(
            "token: {}\nport: {}\nflag: {}\nlist:\n  - {}\n  - {}\n  - {}\nnote_unencrypted: clear\n\
             sops:\n  age:\n    - recipient: {}\n      enc: |\n{}  lastmodified: \"{stamp}\"\n  mac: {}\n  version: 3.11.0\n",
            seal("tok", &key, "token:", "str"),
            seal("8006", &key, "port:", "int"),
            seal("True", &key, "flag:", "bool"),
            seal("a", &key, "list:", "str"),
            seal(" a comment", &key, "list:", "comment"),
            seal("b", &key, "list:", "str"),
            id.to_public(),
            indent(&armored(&key, &id.to_public()), "        "),
            seal(&mac, &key, stamp, "str"),
        );
        let ids = Identities::parse(id.to_string().expose_secret()).unwrap();
        (text, ids)
    }

    #[test]
    fn decrypts_a_file_built_as_sops_builds_it() {
        let (text, ids) = sample();
        let doc = SopsFile::parse(&text).unwrap().decrypt(&ids).unwrap();
        assert_eq!(
            doc.get(&["token"]).unwrap().as_secret().unwrap().expose(),
            "tok"
        );
        assert!(doc.get(&["port"]) == Some(&Value::Int(8006)));
        assert!(doc.get(&["flag"]) == Some(&Value::Bool(true)));
        let Some(Value::Seq(list)) = doc.get(&["list"]) else {
            panic!()
        };
        assert_eq!(list.len(), 2, "the comment item is dropped");
        assert_eq!(
            doc.get(&["note_unencrypted"])
                .unwrap()
                .as_secret()
                .unwrap()
                .expose(),
            "clear"
        );
    }

    #[test]
    fn tampering_and_wrong_keys_are_refused() {
        let (text, ids) = sample();
        let clear = text.replace("note_unencrypted: clear", "note_unencrypted: clean");
        let err = SopsFile::parse(&clear).unwrap().decrypt(&ids).unwrap_err();
        assert!(matches!(err, Error::MacMismatch { .. }), "{err}");
        let renamed = text.replace("token: ENC", "tokens: ENC");
        let err = SopsFile::parse(&renamed)
            .unwrap()
            .decrypt(&ids)
            .unwrap_err();
        assert!(
            matches!(&err, Error::MacMismatch { detail } if detail.contains("tokens")),
            "{err}"
        );
        let other = Identities::parse(
            age::x25519::Identity::generate()
                .to_string()
                .expose_secret(),
        )
        .unwrap();
        let err = SopsFile::parse(&text).unwrap().decrypt(&other).unwrap_err();
        assert!(matches!(err, Error::WrongIdentity { .. }), "{err}");
        assert!(matches!(
            SopsFile::parse("a: 1\n"),
            Err(Error::NotEncrypted)
        ));
    }
}
