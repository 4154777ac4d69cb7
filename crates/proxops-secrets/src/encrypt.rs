//! Writing a SOPS file: [`encrypt_document`] seals every value of a [`Document`] as sops's
//! `encrypt` does (a fresh data key; each value AES-256-GCM with a 32-byte nonce and its key path
//! as additional data; the MAC, SHA-512 over the values in document order, sealed with
//! `lastmodified` as additional data; the data key sealed to each age recipient, armored), so
//! that `sops decrypt` and [`crate::SopsFile::decrypt`] read it back. [`generate_identity`]
//! makes a new age X25519 key pair for a new repository.

use crate::cipher::format_float;
use crate::value::{Document, Value};
use crate::{Error, Secret};
use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Key};
use age::secrecy::ExposeSecret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha512};
use std::io::Write;
use std::str::FromStr;
use zeroize::Zeroizing;

/// The sops release whose file format this writes.
const SOPS_FORMAT_VERSION: &str = "3.11.0";

/// A new age X25519 key pair: the identity (secret) and its recipient (public).
pub struct NewIdentity {
    /// `AGE-SECRET-KEY-1...`.
    pub identity: Secret,
    /// `age1...`.
    pub recipient: String,
}

impl std::fmt::Debug for NewIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewIdentity")
            .field("recipient", &self.recipient)
            .finish_non_exhaustive()
    }
}

impl NewIdentity {
    /// The key file text `age-keygen` writes: when it was made, the public key, the identity.
    pub fn key_file_text(&self, created: &str) -> Secret {
        Secret::new(format!(
            "# created: {created}\n# public key: {}\n{}\n",
            self.recipient,
            self.identity.expose()
        ))
    }
}

/// Makes a new age X25519 key pair from the operating system's randomness.
pub fn generate_identity() -> NewIdentity {
    let identity = age::x25519::Identity::generate();
    NewIdentity {
        recipient: identity.to_public().to_string(),
        identity: Secret::new(identity.to_string().expose_secret()),
    }
}

/// Checks that `text` is an age X25519 recipient (`age1...`).
pub fn check_recipient(text: &str) -> Result<(), Error> {
    age::x25519::Recipient::from_str(text.trim())
        .map(|_| ())
        .map_err(|e| Error::BadRecipient {
            recipient: text.trim().to_owned(),
            reason: e.to_string(),
        })
}

/// Encrypts `doc` to the age `recipients` (at least one), stamped `last_modified` (RFC 3339 in
/// UTC, seconds precision, as sops writes it). Every value is encrypted (sops's default rule,
/// `unencrypted_suffix: _unencrypted`, with no key carrying the suffix). The text returned is the
/// whole file, YAML with sops's layout and 4-space indentation.
pub fn encrypt_document(
    doc: &Document,
    recipients: &[&str],
    last_modified: &str,
) -> Result<String, Error> {
    let Value::Map(entries) = doc.root() else {
        return Err(unsupported("a document that is not a mapping"));
    };
    if recipients.is_empty() {
        return Err(unsupported("encrypting to no recipient"));
    }
    let mut parsed = Vec::with_capacity(recipients.len());
    for r in recipients {
        check_recipient(r)?;
        parsed.push(age::x25519::Recipient::from_str(r.trim()).map_err(|e| {
            Error::BadRecipient {
                recipient: r.trim().to_owned(),
                reason: e.to_string(),
            }
        })?);
    }
    let mut key = Zeroizing::new([0u8; 32]);
    getrandom::fill(key.as_mut_slice()).map_err(|e| unsupported(&format!("no randomness: {e}")))?;
    let mut writer = Writer {
        key: &key,
        hash: Sha512::new(),
        path: Vec::new(),
        out: String::new(),
    };
    for (k, v) in entries {
        if k == "sops" {
            return Err(unsupported("a top-level key named `sops`"));
        }
        writer.entry(k, v, 0)?;
    }
    let mac: String = writer
        .hash
        .clone()
        .finalize()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let mac = seal(&key, mac.as_bytes(), last_modified, "str")?;
    let mut out = writer.out;
    out.push_str("sops:\n    age:\n");
    for (text, recipient) in recipients.iter().zip(parsed) {
        let armored = seal_data_key(&key, recipient)?;
        out.push_str(&format!(
            "        - recipient: {}\n          enc: |\n",
            text.trim()
        ));
        for line in armored.lines() {
            out.push_str(&format!("            {line}\n"));
        }
    }
    out.push_str(&format!(
        "    lastmodified: \"{last_modified}\"\n    mac: {mac}\n    unencrypted_suffix: \
         _unencrypted\n    version: {SOPS_FORMAT_VERSION}\n"
    ));
    Ok(out)
}

fn unsupported(feature: &str) -> Error {
    Error::Unsupported {
        feature: feature.to_owned(),
    }
}

/// The data key encrypted to one recipient, ASCII-armored as sops stores it.
fn seal_data_key(key: &[u8; 32], recipient: age::x25519::Recipient) -> Result<String, Error> {
    let failed = |e: String| unsupported(&format!("age encryption failed: {e}"));
    let encryptor =
        age::Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient))
            .map_err(|e| failed(e.to_string()))?;
    let mut armored = Vec::new();
    let armor =
        age::armor::ArmoredWriter::wrap_output(&mut armored, age::armor::Format::AsciiArmor)
            .map_err(|e| failed(e.to_string()))?;
    let mut stream = encryptor
        .wrap_output(armor)
        .map_err(|e| failed(e.to_string()))?;
    stream.write_all(key).map_err(|e| failed(e.to_string()))?;
    stream
        .finish()
        .and_then(|armor| armor.finish())
        .map_err(|e| failed(e.to_string()))?;
    String::from_utf8(armored).map_err(|e| failed(e.to_string()))
}

/// `ENC[AES256_GCM,...]` of `plain` under `key`, authenticating `aad`.
fn seal(key: &[u8; 32], plain: &[u8], aad: &str, kind: &str) -> Result<String, Error> {
    let cipher = AesGcm::<Aes256, U32>::new(Key::<AesGcm<Aes256, U32>>::from_slice(key));
    let nonce = AesGcm::<Aes256, U32>::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plain,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| unsupported("AES-GCM encryption failed"))?;
    let (data, tag) = sealed.split_at(sealed.len() - 16);
    Ok(format!(
        "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{kind}]",
        STANDARD.encode(data),
        STANDARD.encode(nonce),
        STANDARD.encode(tag)
    ))
}

struct Writer<'a> {
    key: &'a [u8; 32],
    hash: Sha512,
    /// Mapping keys from the root (sequence items add none, as in sops).
    path: Vec<String>,
    out: String,
}

impl Writer<'_> {
    fn entry(&mut self, key: &str, value: &Value, depth: usize) -> Result<(), Error> {
        check_key(key)?;
        let pad = "    ".repeat(depth);
        self.path.push(key.to_owned());
        match value {
            Value::Map(entries) if !entries.is_empty() => {
                self.out.push_str(&format!("{pad}{key}:\n"));
                for (k, v) in entries {
                    self.entry(k, v, depth + 1)?;
                }
            }
            Value::Seq(items) if !items.is_empty() => {
                self.out.push_str(&format!("{pad}{key}:\n"));
                for item in items {
                    let scalar = self.scalar(item)?;
                    self.out.push_str(&format!("{pad}    - {scalar}\n"));
                }
            }
            Value::Map(_) => self.out.push_str(&format!("{pad}{key}: {{}}\n")),
            Value::Seq(_) => self.out.push_str(&format!("{pad}{key}: []\n")),
            scalar => {
                let text = self.scalar(scalar)?;
                self.out.push_str(&format!("{pad}{key}: {text}\n"));
            }
        }
        self.path.pop();
        Ok(())
    }

    /// One encrypted scalar, hashed into the MAC as sops's `ToBytes` formats it.
    fn scalar(&mut self, value: &Value) -> Result<String, Error> {
        let (plain, kind): (Zeroizing<String>, &str) = match value {
            Value::Str(s) => (Zeroizing::new(s.expose().to_owned()), "str"),
            Value::Int(i) => (Zeroizing::new(i.to_string()), "int"),
            Value::Float(f) => (Zeroizing::new(format_float(*f)), "float"),
            Value::Bool(b) => (
                Zeroizing::new(if *b { "True" } else { "False" }.to_owned()),
                "bool",
            ),
            Value::Null => return Err(unsupported("a null value")),
            Value::Map(_) | Value::Seq(_) => {
                return Err(unsupported("a mapping or sequence inside a sequence"));
            }
        };
        self.hash.update(plain.as_bytes());
        // sops keeps an empty string as is.
        if plain.is_empty() {
            return Ok("\"\"".to_owned());
        }
        let aad = format!("{}:", self.path.join(":"));
        seal(self.key, plain.as_bytes(), &aad, kind)
    }
}

/// A mapping key written plain: only keys that need no YAML quoting.
fn check_key(key: &str) -> Result<(), Error> {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !key.starts_with(['-', '.']);
    if plain {
        Ok(())
    } else {
        Err(unsupported(&format!(
            "the key `{key}` (only letters, digits, `-`, `_` and `.` are written)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Identities, SopsFile};

    fn doc() -> Document {
        Document::new(Value::Map(vec![
            (
                "secrets".into(),
                Value::Map(vec![
                    ("pve-user".into(), Value::Str(Secret::new("proxops@pve"))),
                    ("pve-token".into(), Value::Str(Secret::new("0b5f-secret"))),
                    ("empty".into(), Value::Str(Secret::new(""))),
                    ("port".into(), Value::Int(8006)),
                ]),
            ),
            (
                "cloud-init".into(),
                Value::Map(vec![(
                    "ssh-keys".into(),
                    Value::Map(vec![(
                        "main".into(),
                        Value::Str(Secret::new("ssh-ed25519 AAAA")),
                    )]),
                )]),
            ),
        ]))
    }

    #[test]
    fn what_it_writes_decrypts_with_the_identity_and_verifies() {
        let id = generate_identity();
        let text = encrypt_document(&doc(), &[&id.recipient], "2026-12-06T01:30:00Z").unwrap();
        assert!(
            !text.contains("0b5f-secret") && !text.contains("proxops@pve"),
            "{text}"
        );
        let file = SopsFile::parse(&text).unwrap();
        let ids = Identities::parse(id.identity.expose()).unwrap();
        let back = file.decrypt(&ids).unwrap();
        assert_eq!(back, doc());
    }

    #[test]
    fn another_identity_cannot_read_it_and_a_changed_value_fails_the_mac() {
        let id = generate_identity();
        let text = encrypt_document(&doc(), &[&id.recipient], "2026-12-06T01:30:00Z").unwrap();
        let other = Identities::parse(generate_identity().identity.expose()).unwrap();
        assert!(matches!(
            SopsFile::parse(&text).unwrap().decrypt(&other),
            Err(Error::WrongIdentity { .. })
        ));
        // A changed `lastmodified` no longer authenticates the MAC.
        let ids = Identities::parse(id.identity.expose()).unwrap();
        let stamped = text.replace("2026-12-06T01:30:00Z", "2026-12-06T01:30:01Z");
        assert!(matches!(
            SopsFile::parse(&stamped).unwrap().decrypt(&ids),
            Err(Error::MacMismatch { .. })
        ));
    }

    #[test]
    fn refuses_what_it_cannot_write() {
        let id = generate_identity();
        let bad_key = Document::new(Value::Map(vec![(
            "a key".into(),
            Value::Str(Secret::new("x")),
        )]));
        assert!(encrypt_document(&bad_key, &[&id.recipient], "2026-12-06T01:30:00Z").is_err());
        assert!(encrypt_document(&doc(), &[], "2026-12-06T01:30:00Z").is_err());
        assert!(matches!(
            encrypt_document(&doc(), &["age1notakey"], "2026-12-06T01:30:00Z"),
            Err(Error::BadRecipient { .. })
        ));
    }
}
