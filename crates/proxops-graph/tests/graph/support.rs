//! Manifests built in memory, small repositories on disk, and access to `../shared`.

#![allow(dead_code)]

use proxops_graph::{ClusterGraph, Graph, check_repository};
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_model::{FsSource, LoadOptions, Registry, Repository, Resource, load_repository};
pub use proxops_test_support::{example, shared};
use std::path::Path;
use std::sync::Arc;

/// Decodes one manifest; fails the test if the manifest alone has an error.
pub fn resource(path: &str, text: &str) -> Arc<Resource> {
    let file = SourceFile::new(path, text.to_owned());
    let loaded = load_manifest(&file, &Registry::builtin(), None);
    let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{path}: {errors:#?}");
    loaded.resource.expect("a resource")
}

/// A minimal VM.
pub fn vm(name: &str, node: &str, vmid: u32) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n"
    )
}

/// A minimal VM whose cdrom holds ISO `iso`.
pub fn vm_with_iso(name: &str, node: &str, vmid: u32, iso: &str) -> String {
    format!(
        "{}  hardware:\n    cdrom:\n      iso: {iso}\n",
        vm(name, node, vmid)
    )
}

/// A minimal TemplateVM.
pub fn template_vm(name: &str, node: &str, vmid: u32) -> String {
    vm(name, node, vmid).replace("kind: VM", "kind: TemplateVM")
}

/// A VM cloned from TemplateVM `template`.
pub fn clone_vm(name: &str, node: &str, vmid: u32, template: &str) -> String {
    let base =
        vm(name, node, vmid).replace("  disks:\n    - storage: local-lvm\n      size: 8GiB\n", "");
    format!("{base}  clone: {template}\n")
}

/// A minimal LXC from CTTemplate `template`.
pub fn lxc(name: &str, node: &str, vmid: u32, template: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: {vmid}\n  template: {template}\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n"
    )
}

/// A minimal artifact (`ISO`, `CTTemplate` or `DiskImage`) on `nodes`.
pub fn artifact(kind: &str, name: &str, nodes: &[&str]) -> String {
    let ext = match kind {
        "ISO" => "iso",
        "CTTemplate" => "tar.zst",
        _ => "qcow2",
    };
    let nodes: String = nodes.iter().map(|n| format!("    - {n}\n")).collect();
    format!(
        "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  nodes:\n{nodes}  storage: local\n  filename: {name}.{ext}\n  url: https://example.invalid/{name}.{ext}\n"
    )
}

/// `manifest` with a `proxops/depends-on` annotation.
pub fn depends_on(manifest: &str, targets: &str) -> String {
    let at = manifest.find("spec:\n").expect("a spec");
    format!(
        "{}  annotations:\n    proxops/depends-on: \"{targets}\"\n{}",
        &manifest[..at],
        &manifest[at..]
    )
}

/// Builds a graph, failing the test on problems.
pub fn build(resources: &[Arc<Resource>]) -> Graph {
    Graph::build(&Registry::builtin(), resources).unwrap_or_else(|e| panic!("{e}"))
}

/// Each step as `Kind/name@node`, in create order.
pub fn order(graph: &Graph) -> Vec<String> {
    graph
        .steps()
        .iter()
        .map(|s| step_name(graph, s.id))
        .collect()
}

/// One step as `Kind/name@node`.
pub fn step_name(graph: &Graph, id: proxops_graph::StepId) -> String {
    let s = graph.step(id);
    format!(
        "{}@{}",
        graph.key(s.resource),
        s.node.as_deref().unwrap_or("-")
    )
}

/// The level of resource `Kind/name`.
pub fn level(graph: &Graph, kind: &str, name: &str) -> u32 {
    graph.level_of(graph.find(kind, name).expect("resource in graph"))
}

/// A repository in a temporary directory with one cluster `dev` on nodes pve01 and pve02.
pub struct TempRepo {
    pub dir: tempfile::TempDir,
}

impl TempRepo {
    /// Writes `files` and a composition of cluster `dev` listing them all.
    pub fn dev(files: &[(&str, String)]) -> TempRepo {
        let repo = TempRepo {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        repo.write(
            "clusters/dev/config.yaml",
            "pve:\n  clusters:\n    dev:\n      base-url: https://dev.example.invalid:8006\n      nodes: [pve01, pve02]\n",
        );
        let mut composition = String::from("resources:\n");
        for (path, text) in files {
            repo.write(path, text);
            composition.push_str(&format!("  - ../../{path}\n"));
        }
        repo.write("clusters/dev/resources.yaml", &composition);
        repo
    }

    /// Writes a file, creating directories.
    pub fn write(&self, rel: &str, text: &str) {
        proxops_test_support::write(self.dir.path(), rel, text);
    }

    /// Loads, validates and builds every cluster's graph, as `proxops validate` does.
    pub fn check(&self) -> (Repository, Vec<ClusterGraph>) {
        check_dir(self.dir.path())
    }
}

/// Loads, validates and builds the graphs of the repository at `dir`.
pub fn check_dir(dir: &Path) -> (Repository, Vec<ClusterGraph>) {
    let registry = Registry::builtin();
    let source = FsSource::new(dir).expect("source");
    let mut repo = load_repository(&source, &registry, &LoadOptions::default()).expect("load");
    let graphs = check_repository(&registry, &mut repo);
    (repo, graphs)
}
