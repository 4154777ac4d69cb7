//! ProxOps secrets: SOPS files decrypted in-process, and a secret type that never shows itself.
//!
//! - [`SopsFile`] parses a SOPS-encrypted YAML document and its [`Metadata`] (age recipients,
//!   MAC, `lastmodified`, the [`EncryptionRule`]); [`SopsFile::decrypt`] recovers the data key
//!   with age X25519 [`Identities`], decrypts every `ENC[AES256_GCM,...]` value (its key path as
//!   additional data), verifies sops's MAC and returns a [`Document`] of [`Value`]s.
//! - [`IdentitySource`] finds identities where sops does (`SOPS_AGE_KEY`, `SOPS_AGE_KEY_FILE`,
//!   the default `sops/age/keys.txt`); only [`IdentitySource::from_env`] reads the environment.
//! - [`Secret`] holds a decrypted string: `Debug`, `Display` and serde print `[redacted]`, the
//!   value is reached through [`Secret::expose`], and it is zeroized on drop.
//! - [`Document::credentials`] maps a cluster's `secrets` block ([`SecretKeys`]) to
//!   [`Credentials`]; [`Document::resolve`] resolves `cloud-init.ssh-keys.<name>` and
//!   `cloud-init.passwords.<name>` references.
//! - [`encrypt_document`] writes a SOPS file as `sops encrypt` does (age recipients, every
//!   value sealed, the MAC), and [`generate_identity`] makes a new age key pair: what
//!   `proxops init` needs to start a repository with its credentials encrypted.
//! - [`Error`] names each failure (no identity, wrong identity, MAC mismatch, not encrypted,
//!   missing key, ...) without ever carrying a secret value.
//!
//! Only what ProxOps needs of sops is supported, to read and to write: YAML files, age X25519 recipients, one key group.
//!
//! Everything but [`Secret`] needs the `sops` feature (on by default): a crate that only passes
//! secrets around (the PVE client) depends on this one without it, and so without age.

#[cfg(feature = "sops")]
mod cipher;
#[cfg(feature = "sops")]
mod decrypt;
#[cfg(feature = "sops")]
mod encrypt;
#[cfg(feature = "sops")]
mod error;
#[cfg(feature = "sops")]
mod identity;
#[cfg(feature = "sops")]
mod mapping;
#[cfg(feature = "sops")]
mod metadata;
mod secret;
#[cfg(feature = "sops")]
mod value;
#[cfg(feature = "sops")]
mod yaml;

#[cfg(feature = "sops")]
pub use decrypt::{SopsFile, decrypt_file};
#[cfg(feature = "sops")]
pub use encrypt::{NewIdentity, check_recipient, encrypt_document, generate_identity};
#[cfg(feature = "sops")]
pub use error::Error;
#[cfg(feature = "sops")]
pub use identity::{Identities, IdentitySource};
#[cfg(feature = "sops")]
pub use mapping::{Credentials, SecretKeys};
#[cfg(feature = "sops")]
pub use metadata::{AgeRecipient, EncryptionRule, Metadata};
pub use secret::{REDACTED, Secret};
#[cfg(feature = "sops")]
pub use value::{Document, Value};
