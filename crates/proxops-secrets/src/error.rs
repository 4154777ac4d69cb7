//! [`Error`]: everything that can go wrong reading a SOPS file, named so that the user knows what
//! to do. No message ever carries a decrypted value, a plaintext value of the file or key
//! material: only key paths, file paths, recipients' public keys and line numbers.

use std::path::PathBuf;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// The file is not YAML, or not a YAML mapping.
    #[error("not a SOPS YAML file: {reason}")]
    Syntax {
        /// What is wrong, with a line and column where known.
        reason: String,
    },

    /// The document has no `sops` metadata: it was never encrypted.
    #[error(
        "the file is not encrypted (it has no `sops` metadata); encrypt it with \
         `sops encrypt --age <recipient> --in-place <file>` and never commit secrets in plain text"
    )]
    NotEncrypted,

    /// The `sops` metadata is incomplete or contradictory.
    #[error("invalid `sops` metadata: {reason}")]
    InvalidMetadata {
        /// What is wrong.
        reason: String,
    },

    /// The file uses a SOPS feature this implementation does not support.
    #[error("unsupported SOPS file: {feature}")]
    Unsupported {
        /// The feature.
        feature: String,
    },

    /// No age recipient: the data key is only encrypted to key types ProxOps cannot use.
    #[error(
        "the file's data key is encrypted only to {}, which ProxOps cannot use; \
         add an age recipient with `sops updatekeys` (or `sops rotate --add-age <recipient>`)",
        found.join(", ")
    )]
    UnsupportedKeyType {
        /// The key types found (`pgp`, `kms`, ...).
        found: Vec<String>,
    },

    /// No age identity was found anywhere.
    #[error(
        "no age identity found; looked in: {}. Set SOPS_AGE_KEY_FILE to your age key file \
         (created by `age-keygen -o <file>`) or put the key in the default path",
        looked.join("; ")
    )]
    NoIdentity {
        /// Each place looked at, with what was found there.
        looked: Vec<String>,
    },

    /// A source of identities holds something that is not an age X25519 identity.
    #[error(
        "{location}, line {line}: not an age X25519 identity (`AGE-SECRET-KEY-1...`); \
         only X25519 identities are supported"
    )]
    BadIdentity {
        /// `SOPS_AGE_KEY`, or a key file's path.
        location: String,
        /// The 1-based line.
        line: usize,
    },

    /// None of the identities is a recipient of the file.
    #[error(
        "none of the {} age identities ({}) can decrypt this file; its recipients are: {}. \
         Use the key of one of them, or have the file re-encrypted with `sops updatekeys`",
        identities.len(),
        identities.join(", "),
        recipients.join(", ")
    )]
    WrongIdentity {
        /// The recipients' public keys (`age1...`).
        recipients: Vec<String>,
        /// The public keys of the identities that were tried.
        identities: Vec<String>,
    },

    /// A recipient to encrypt to is not an age X25519 public key.
    #[error("`{recipient}` is not an age X25519 recipient (`age1...`): {reason}")]
    BadRecipient {
        /// The text given.
        recipient: String,
        /// Why age refused it.
        reason: String,
    },

    /// The age-encrypted data key is damaged or not 32 bytes.
    #[error("the encrypted data key for recipient {recipient} is damaged: {reason}")]
    BadDataKey {
        /// The recipient whose stanza failed.
        recipient: String,
        /// What went wrong.
        reason: String,
    },

    /// The file was changed without sops: a value or the MAC does not authenticate.
    #[error(
        "MAC mismatch: {detail}; the file was tampered with or edited without sops. \
         Restore it from git, or re-create it with `sops edit`"
    )]
    MacMismatch {
        /// Which check failed (a key path, never a value).
        detail: String,
    },

    /// A value that should be encrypted is not a well-formed `ENC[AES256_GCM,...]` value.
    #[error("malformed encrypted value at `{path}`: {reason}")]
    MalformedValue {
        /// The value's key path, `a:b:c`.
        path: String,
        /// What is wrong (never the value itself).
        reason: String,
    },

    /// A key the configuration names is not in the decrypted document.
    #[error("the SOPS document has no `{key}` (needed for {field}); add it with `sops edit`")]
    MissingKey {
        /// The key path, e.g. `secrets.proxops-token`.
        key: String,
        /// What it was needed for, e.g. `secrets.pve.token`.
        field: String,
    },

    /// A key is present but empty, or not a scalar.
    #[error("the SOPS document's `{key}` (needed for {field}) {problem}")]
    BadKey {
        /// The key path.
        key: String,
        /// What it was needed for.
        field: String,
        /// `is blank`, `is not a scalar`, ...
        problem: String,
    },

    /// A reference is not of a known form.
    #[error("`{reference}` is not a secret reference (expected {expected})")]
    BadReference {
        /// The reference.
        reference: String,
        /// The accepted forms.
        expected: String,
    },

    /// The decrypted document has neither `secrets` nor `cloud-init` material.
    #[error(
        "the SOPS document has neither a `secrets` map nor a non-empty `cloud-init` block; \
         is the configuration pointing at the wrong file?"
    )]
    NotASecretsDocument,
}
