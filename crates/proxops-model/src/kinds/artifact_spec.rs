//! The spec types of the artifact kinds (SPEC.md section 8.5): below [`Spec`](crate::Spec),
//! which holds them, and the kind definitions in `artifact`, which decode them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The specification of a storage artifact: a file PVE downloads onto each listed node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ArtifactSpec {
    /// The nodes that must hold the file; each must be in the cluster's node allowlist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// A single node (older form of `nodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The PVE storage id, which must allow this kind's content type.
    pub storage: String,
    /// The file name on the storage, with the kind's extension.
    pub filename: String,
    /// Where PVE downloads the file from (`https://` or `http://`).
    pub url: String,
    /// A checksum PVE verifies after the download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
}

impl ArtifactSpec {
    /// The nodes the file is placed on: `nodes`, or `node` when `nodes` is empty, without repeats.
    pub fn placed_nodes(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let from = if self.nodes.is_empty() {
            self.node.iter().cloned().collect()
        } else {
            self.nodes.clone()
        };
        from.into_iter()
            .filter(|n| seen.insert(n.clone()))
            .collect()
    }
}

/// A checksum of a downloaded file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Checksum {
    /// The digest algorithm.
    pub algorithm: ChecksumAlgorithm,
    /// The hexadecimal digest.
    pub value: String,
}

/// Digest algorithms PVE's download-url accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChecksumAlgorithm {
    /// MD5.
    Md5,
    /// SHA-1.
    Sha1,
    /// SHA-224.
    Sha224,
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl ChecksumAlgorithm {
    pub(super) fn hex_len(self) -> usize {
        match self {
            ChecksumAlgorithm::Md5 => 32,
            ChecksumAlgorithm::Sha1 => 40,
            ChecksumAlgorithm::Sha224 => 56,
            ChecksumAlgorithm::Sha256 => 64,
            ChecksumAlgorithm::Sha384 => 96,
            ChecksumAlgorithm::Sha512 => 128,
        }
    }
}

/// Which of the three artifact kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactClass {
    /// An installer or live ISO (`iso` content).
    Iso,
    /// A container template (`vztmpl` content).
    CtTemplate,
    /// A disk image to import (`import` content).
    DiskImage,
}

impl ArtifactClass {
    /// PVE's content type for the file.
    pub fn content(self) -> &'static str {
        match self {
            ArtifactClass::Iso => "iso",
            ArtifactClass::CtTemplate => "vztmpl",
            ArtifactClass::DiskImage => "import",
        }
    }

    /// File extensions PVE accepts for this content type.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            ArtifactClass::Iso => &[".iso", ".img"],
            ArtifactClass::CtTemplate => &[".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tar"],
            // `.ova` is import content too, but a disk cannot import a whole appliance (only
            // `x.ova/disk.vmdk`), and DiskImages exist to be imported by disks.
            ArtifactClass::DiskImage => &[".qcow2", ".raw", ".vmdk"],
        }
    }
}
