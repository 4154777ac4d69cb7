//! `ISO`, `CTTemplate` and `DiskImage`: a file per node, fetched with download-url, identified by
//! (node, storage, filename); never updated, and deleted only to be replaced when its url or
//! checksum changed under the same file name and no guest uses it (the planner's `replace`).

use proxops_model::Resource;
use proxops_model::kinds::{ArtifactSpec, ChecksumAlgorithm};

/// PVE's content type for an artifact kind.
pub fn content_of(kind: &str) -> &'static str {
    match kind {
        "ISO" => "iso",
        "CTTemplate" => "vztmpl",
        _ => "import",
    }
}

/// The volume id of an artifact on its storage: `<storage>:<content>/<filename>`.
pub fn volid(kind: &str, spec: &ArtifactSpec) -> String {
    format!("{}:{}/{}", spec.storage, content_of(kind), spec.filename)
}

/// An artifact as its manifest wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DesiredArtifact {
    /// The nodes that must have the file, in manifest order without repeats.
    pub nodes: Vec<String>,
    /// The storage.
    pub storage: String,
    /// `iso`, `vztmpl` or `import`.
    pub content: &'static str,
    /// The file name.
    pub filename: String,
    /// `<storage>:<content>/<filename>`.
    pub volid: String,
    /// The download-url parameters (`url`, `filename`, `content`, and `checksum` with
    /// `checksum-algorithm` when the manifest gives one), in a fixed order.
    pub download: Vec<(String, String)>,
}

/// The desired artifact of an ISO, CTTemplate or DiskImage resource; `None` for other kinds.
pub fn artifact(resource: &Resource) -> Option<DesiredArtifact> {
    let proxops_model::Spec::Artifact(spec) = &resource.spec else {
        return None;
    };
    let declared = if spec.nodes.is_empty() {
        spec.node.iter().cloned().collect()
    } else {
        spec.nodes.clone()
    };
    let desired = DesiredArtifact::new(
        declared,
        spec.storage.clone(),
        content_of(resource.kind),
        spec.filename.clone(),
        spec.url.clone(),
    );
    let Some(sum) = &spec.checksum else {
        return Some(desired);
    };
    let algorithm = match sum.algorithm {
        ChecksumAlgorithm::Md5 => "md5",
        ChecksumAlgorithm::Sha1 => "sha1",
        ChecksumAlgorithm::Sha224 => "sha224",
        ChecksumAlgorithm::Sha256 => "sha256",
        ChecksumAlgorithm::Sha384 => "sha384",
        ChecksumAlgorithm::Sha512 => "sha512",
    };
    Some(desired.with_checksum(algorithm, &sum.value))
}
