//! Helpers shared by the model tests: throw-away repositories and access to `../shared`.

#![allow(dead_code)]

use proxops_model::{
    Code, Diagnostic, FsSource, LoadOptions, Registry, Repository, load_repository,
};
pub use proxops_test_support::{example, shared};
use std::path::Path;

/// A repository in a temporary directory, built file by file.
pub struct TempRepo {
    pub dir: tempfile::TempDir,
}

impl TempRepo {
    /// An empty repository.
    pub fn new() -> TempRepo {
        TempRepo {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A repository with clusters `names`, each with nodes `pve01` and `pve02`, and an empty
    /// composition.
    pub fn with_clusters(names: &[&str]) -> TempRepo {
        let repo = TempRepo::new();
        for name in names {
            repo.cluster(name, &["pve01", "pve02"]);
            repo.compose(name, &[]);
        }
        repo
    }

    /// Writes `clusters/<name>/config.yaml` with the given node allowlist.
    pub fn cluster(&self, name: &str, nodes: &[&str]) -> &Self {
        let nodes = nodes
            .iter()
            .map(|n| format!("        - {n}\n"))
            .collect::<String>();
        self.write(
            &format!("clusters/{name}/config.yaml"),
            &format!("pve:\n  clusters:\n    {name}:\n      base-url: https://{name}.example.invalid:8006\n      nodes:\n{nodes}"),
        )
    }

    /// Writes `clusters/<name>/resources.yaml` listing `files` (repository-relative paths).
    pub fn compose(&self, name: &str, files: &[&str]) -> &Self {
        let mut text = String::from("resources:\n");
        if files.is_empty() {
            text = "resources: []\n".into();
        }
        for f in files {
            text.push_str(&format!("  - ../../{f}\n"));
        }
        self.write(&format!("clusters/{name}/resources.yaml"), &text)
    }

    /// Writes a file (creating directories).
    pub fn write(&self, rel: &str, text: &str) -> &Self {
        proxops_test_support::write(self.dir.path(), rel, text);
        self
    }

    /// Loads and validates every cluster.
    pub fn load(&self) -> Repository {
        let source = FsSource::new(self.dir.path()).expect("source");
        load_repository(&source, &Registry::builtin(), &LoadOptions::default()).expect("load")
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The codes of every error, in report order.
pub fn error_codes(repo: &Repository) -> Vec<Code> {
    repo.diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect()
}

/// The first error with `code`, or a panic listing what was found.
pub fn find(repo: &Repository, code: Code) -> &Diagnostic {
    repo.diagnostics
        .iter()
        .find(|d| d.code == code)
        .unwrap_or_else(|| {
            panic!(
                "no {code} among: {:#?}",
                repo.diagnostics
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
            )
        })
}

/// A minimal valid VM manifest.
pub fn vm(name: &str, node: &str, vmid: u32) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n"
    )
}

/// A minimal valid LXC manifest from CTTemplate `template`.
pub fn lxc(name: &str, node: &str, vmid: u32, template: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: {vmid}\n  template: {template}\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n"
    )
}

/// A minimal valid artifact manifest (`ISO`, `CTTemplate` or `DiskImage`) on `nodes`.
pub fn artifact(kind: &str, name: &str, nodes: &[&str]) -> String {
    let ext = match kind {
        "ISO" => "iso",
        "CTTemplate" => "tar.zst",
        _ => "qcow2",
    };
    let nodes = nodes
        .iter()
        .map(|n| format!("    - {n}\n"))
        .collect::<String>();
    format!(
        "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: {name}.{ext}\n  url: https://example.invalid/{name}.{ext}\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Helpers added for the expectations, codes and snapshots modules.

/// Every diagnostic as one line (`path:line:col: code: message`, then `help: ...`), for assertion
/// messages.
pub fn dump(repo: &Repository) -> String {
    repo.diagnostics
        .iter()
        .map(|d| match &d.help {
            Some(h) => format!(
                "{d} [{:?}, cluster {:?}]\n    help: {h}",
                d.severity, d.cluster
            ),
            None => format!("{d} [{:?}, cluster {:?}]", d.severity, d.cluster),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every error (not warning) of the repository.
pub fn errors(repo: &Repository) -> Vec<&Diagnostic> {
    repo.diagnostics.iter().filter(|d| d.is_error()).collect()
}

/// Every diagnostic with `code`.
pub fn all_with(repo: &Repository, code: Code) -> Vec<&Diagnostic> {
    repo.diagnostics.iter().filter(|d| d.code == code).collect()
}

/// Asserts that the repository has no error at all (warnings allowed).
pub fn assert_valid(repo: &Repository) {
    assert!(repo.is_valid(), "expected no error, found:\n{}", dump(repo));
    for c in &repo.clusters {
        assert!(c.valid, "cluster `{}` is invalid:\n{}", c.name, dump(repo));
    }
}

/// Asserts that there is exactly one error, with `code`, whose message contains every fragment;
/// returns it.
#[track_caller]
pub fn only_error<'r>(repo: &'r Repository, code: Code, fragments: &[&str]) -> &'r Diagnostic {
    let errs = errors(repo);
    assert_eq!(
        errs.len(),
        1,
        "expected exactly one error ({code}), found:\n{}",
        dump(repo)
    );
    let d = errs[0];
    assert_eq!(d.code, code, "wrong code:\n{}", dump(repo));
    assert_contains(&d.message, fragments);
    d
}

/// Asserts that `text` contains every fragment.
#[track_caller]
pub fn assert_contains(text: &str, fragments: &[&str]) {
    for f in fragments {
        assert!(text.contains(f), "{text:?} does not contain {f:?}");
    }
}

/// Loads any directory as a repository with every cluster.
pub fn load_dir(path: &Path) -> Repository {
    let source = FsSource::new(path).expect("source");
    load_repository(&source, &Registry::builtin(), &LoadOptions::default()).expect("load")
}

impl TempRepo {
    /// Loads and validates only the clusters named.
    pub fn load_only(&self, clusters: &[&str]) -> Result<Repository, proxops_model::LoadError> {
        let source = FsSource::new(self.dir.path()).expect("source");
        let options = LoadOptions::default().with_clusters(clusters.iter().copied());
        load_repository(&source, &Registry::builtin(), &options)
    }

    /// Writes each (path, text) file and a composition of cluster `cluster` listing them all.
    pub fn listing(&self, cluster: &str, files: &[(&str, String)]) -> &Self {
        for (path, text) in files {
            self.write(path, text);
        }
        let paths: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
        self.compose(cluster, &paths)
    }
}

/// Adds `metadata.annotations` (quoted values) to a manifest made by [`vm`], [`lxc`] or
/// [`artifact`].
pub fn annotate(manifest: &str, annotations: &[(&str, &str)]) -> String {
    let at = manifest.find("spec:\n").expect("a spec");
    let block = annotations
        .iter()
        .map(|(k, v)| format!("    {k}: \"{v}\"\n"))
        .collect::<String>();
    format!(
        "{}  annotations:\n{block}{}",
        &manifest[..at],
        &manifest[at..]
    )
}

/// Appends lines to the `spec` of a manifest made by [`vm`], [`lxc`] or [`artifact`] (each
/// line is indented by two spaces).
pub fn with_spec(manifest: &str, lines: &[&str]) -> String {
    let mut out = manifest.to_owned();
    for l in lines {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The resource (kind, name) of a cluster, or a panic.
pub fn resource<'c>(
    cluster: &'c proxops_model::Cluster,
    kind: &str,
    name: &str,
) -> &'c proxops_model::Resource {
    cluster
        .resources
        .iter()
        .find(|r| r.kind == kind && r.name() == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in cluster `{}`", cluster.name))
}

/// How many resources of `kind` a cluster holds.
pub fn count_kind(cluster: &proxops_model::Cluster, kind: &str) -> usize {
    cluster.resources.iter().filter(|r| r.kind == kind).count()
}

/// The dependency edges of a resource as `Kind/name` strings, structured first, then annotation.
/// Inferred references (a disk's `Storage`) are left out: they are edges only when the
/// repository declares their target, which these examples do not.
pub fn edges(resource: &proxops_model::Resource) -> Vec<String> {
    proxops_model::validate::references(&Registry::builtin(), resource)
        .into_iter()
        .filter(|r| r.source != proxops_model::kind::ReferenceSource::Inferred)
        .map(|r| format!("{}/{}", r.target_kind, r.target_name))
        .collect()
}
