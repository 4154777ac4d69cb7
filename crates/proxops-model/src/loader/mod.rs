//! The repository loader: discovers clusters, reads their configs and compositions, loads the
//! listed manifests (each file once, however many clusters list it) and validates every cluster.
//! Every problem is collected; one cluster's errors never hide another's results.

use crate::config::ConfigFile;
use crate::diagnostic::{Code, Diagnostic};
use crate::kind::Registry;
use crate::manifest::Resource;
use crate::source::RepoSource;
use crate::stack::{self, StackDocument};
use crate::validate::validate_cluster;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::num::NonZeroUsize;
use std::sync::Arc;

mod cluster;
mod composition;
mod config;
mod parallel;
mod shared;

pub use cluster::Cluster;
pub use config::read_config_file;
use parallel::in_parallel;
use shared::{Loader, Pending};

/// Which clusters to report on.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Cluster names; empty means every cluster.
    pub clusters: Vec<String>,
}

impl LoadOptions {
    /// Sets [`LoadOptions::clusters`].
    pub fn with_clusters<S: Into<String>>(mut self, clusters: impl IntoIterator<Item = S>) -> Self {
        self.clusters = clusters.into_iter().map(Into::into).collect();
        self
    }
}

/// Why a repository could not be loaded at all (as opposed to being loaded with findings).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum LoadError {
    /// `--cluster` named a cluster the repository does not have.
    #[error("no cluster named `{name}` in this repository")]
    #[diagnostic(code(proxops::unknown_cluster), help("clusters here: {known}"))]
    UnknownCluster {
        /// The name asked for.
        name: String,
        /// The clusters that exist, comma-separated.
        known: String,
    },
    /// The repository could not be listed.
    #[error("cannot read the repository at {path}: {source}")]
    #[diagnostic(code(proxops::io))]
    Unreadable {
        /// The repository.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A loaded repository: process-wide config, clusters and every finding.
#[derive(Debug, Clone)]
pub struct Repository {
    /// `proxops.yaml`, if present and usable.
    pub config: Option<ConfigFile>,
    /// The selected clusters, by name.
    pub clusters: Vec<Cluster>,
    /// Findings, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
}

impl Repository {
    /// Whether there is no error at all.
    pub fn is_valid(&self) -> bool {
        !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The cluster called `name`.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// Loads and validates the repository behind `source`.
///
/// The listed manifests are read and decoded, and the clusters validated, on as many threads as
/// the machine has cores ([`std::thread::available_parallelism`]); see
/// [`load_repository_with_threads`].
pub fn load_repository(
    source: &dyn RepoSource,
    registry: &Registry,
    options: &LoadOptions,
) -> Result<Repository, LoadError> {
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    load_repository_with_threads(source, registry, options, threads)
}

/// [`load_repository`] on at most `threads` threads (`1`: on the calling thread only). The result
/// is the same for any number of threads: findings are recorded in the order of the clusters and
/// their compositions, never in the order the threads finish.
pub fn load_repository_with_threads(
    source: &dyn RepoSource,
    registry: &Registry,
    options: &LoadOptions,
    threads: usize,
) -> Result<Repository, LoadError> {
    source.start_load();
    let cluster_dirs = source.list("clusters").map_err(|e| LoadError::Unreadable {
        path: source.describe(),
        source: e,
    })?;
    let names: Vec<String> = cluster_dirs
        .iter()
        .filter(|e| e.is_dir && !e.name.starts_with('.'))
        .map(|e| e.name.clone())
        .collect();
    for wanted in &options.clusters {
        if !names.contains(wanted) {
            return Err(LoadError::UnknownCluster {
                name: wanted.clone(),
                known: if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                },
            });
        }
    }
    let mut loader = Loader {
        source,
        registry,
        diagnostics: Vec::new(),
        files: BTreeMap::new(),
        threads: threads.max(1),
    };
    let config = loader.load_repository_config(&names);
    if names.is_empty() {
        loader.diagnostics.push(
            Diagnostic::warning(Code::ClusterConfig, "this repository has no clusters")
                .in_file("clusters")
                .with_help("add clusters/<name>/config.yaml and clusters/<name>/resources.yaml for each PVE cluster"),
        );
    }
    // Every cluster's config and composition first, with the manifests to read; then every
    // manifest is read and decoded (in parallel); then each cluster's findings are recorded in
    // the order a cluster-by-cluster load would record them, whatever the threads did.
    let mut clusters = Vec::new();
    let mut plans = Vec::new();
    let mut scheduled = HashSet::new();
    for (index, name) in names.iter().enumerate() {
        let earlier = std::mem::take(&mut loader.diagnostics);
        let (cluster, plan) = loader.plan_cluster(index, name, &mut scheduled);
        let findings = std::mem::replace(&mut loader.diagnostics, earlier);
        clusters.push(cluster);
        plans.push((findings, plan));
    }
    drop(scheduled);
    let reads: Vec<&Pending> = plans
        .iter()
        .flat_map(|(_, plan)| plan.iter().flat_map(|p| &p.reads))
        .collect();
    let mut fetched = loader.fetch_all(&reads);
    drop(reads);
    let mut compositions = Vec::new();
    let mut offset = 0;
    for (findings, plan) in plans {
        loader.diagnostics.extend(findings);
        let paths = match plan {
            Some(plan) => {
                let end = offset + plan.reads.len();
                let results = fetched.get_mut(offset..end).unwrap_or_default();
                offset = end;
                loader.record_composition(plan, results)
            }
            None => Vec::new(),
        };
        compositions.push(paths);
    }
    loader.check_shared_endpoints(&clusters);
    loader.scan_kind_roots();
    // Index of which clusters list each (kind, name), for hints about cross-cluster references.
    let mut owners: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (cluster, paths) in clusters.iter_mut().zip(&compositions) {
        let stack_docs: Vec<Arc<StackDocument>> = paths
            .iter()
            .filter_map(|p| loader.files.get(p).and_then(|f| f.stack.clone()))
            .collect();
        // A Stack's resources join the listed ones: validated, indexed and ordered alike.
        let incomplete = paths.iter().any(|p| {
            let is_stack = p.split('/').next().and_then(stack::kind_of_root).is_some();
            is_stack && loader.files.get(p).is_some_and(|f| f.stack.is_none())
        });
        let projected = stack::project_cluster(registry, &cluster.name, &stack_docs, incomplete);
        loader.diagnostics.extend(projected.diagnostics);
        cluster.stacks = projected.stacks;
        let listed: Vec<Arc<Resource>> = paths
            .iter()
            .filter_map(|path| {
                let m = loader.files.get(path).and_then(|f| f.manifest.as_ref())?;
                m.resource.clone()
            })
            .collect();
        for r in listed.into_iter().chain(projected.resources) {
            owners
                .entry((r.kind.to_owned(), r.name().to_owned()))
                .or_default()
                .insert(cluster.name.clone());
            cluster.resources.push(r);
        }
    }
    // Clusters are validated independently; their findings are recorded in cluster order.
    let found = in_parallel(&clusters, loader.threads, |cluster| {
        validate_cluster(
            registry,
            &cluster.name,
            cluster.entry.as_ref(),
            &cluster.resources,
            &owners,
        )
    });
    loader
        .diagnostics
        .extend(found.into_iter().flatten().flatten());
    // File diagnostics belong to the cluster listing the file, or to none if several do.
    for listed in loader.files.values() {
        let Some(m) = listed
            .manifest
            .as_ref()
            .filter(|m| !m.diagnostics.is_empty())
        else {
            continue;
        };
        let cluster = listed.listers.single().and_then(|i| names.get(i));
        for d in &m.diagnostics {
            loader
                .diagnostics
                .push(d.clone().in_cluster(cluster.map(String::as_str)));
        }
    }
    let mut diagnostics = loader.diagnostics;
    // Clusters are in the order of `names`, so a cluster's index is its position.
    for (index, cluster) in clusters.iter_mut().enumerate() {
        cluster.valid = !diagnostics.iter().any(|d| {
            d.invalidates()
                && (d.cluster.as_deref() == Some(cluster.name.as_str())
                    || (d.cluster.is_none() && d.primary_file() == Some("proxops.yaml"))
                    || (d.cluster.is_none()
                        && d.primary_file().is_some_and(|f| {
                            loader
                                .files
                                .get(f)
                                .is_some_and(|l| l.listers.contains(index))
                        })))
        });
    }
    if !options.clusters.is_empty() {
        clusters.retain(|c| options.clusters.contains(&c.name));
        diagnostics.retain(|d| {
            d.cluster
                .as_ref()
                .is_none_or(|c| options.clusters.contains(c))
        });
    }
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    diagnostics.dedup();
    Ok(Repository {
        config,
        clusters,
        diagnostics,
    })
}

#[cfg(test)]
mod tests {
    use super::composition::is_yaml_name;
    use super::*;
    use crate::source::FsSource;
    use std::path::Path;

    fn write(root: &Path, path: &str, text: &str) {
        let full = root.join(path);
        if let Some(dir) = full.parent() {
            assert!(std::fs::create_dir_all(dir).is_ok());
        }
        assert!(std::fs::write(full, text).is_ok());
    }

    fn vm(name: &str, vmid: usize, extra: &str) -> String {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: n1\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n{extra}"
        )
    }

    #[test]
    fn yaml_names() {
        for name in ["a.yaml", "a.yml", "A.YAML", "x/b.Yml", ".yaml"] {
            assert!(is_yaml_name(name), "{name}");
        }
        for name in ["a.json", "yaml", "a.yaml.bak", "", "é", "ayml"] {
            assert!(!is_yaml_name(name), "{name}");
        }
    }

    /// Two clusters of many manifests with every kind of finding, spread so that every thread
    /// gets some: the report must not depend on the number of threads.
    #[test]
    fn the_report_does_not_depend_on_the_threads() {
        let Ok(dir) = tempfile::tempdir() else {
            return;
        };
        let root = dir.path();
        for cluster in ["a", "b"] {
            write(
                root,
                &format!("clusters/{cluster}/config.yaml"),
                &format!(
                    "pve:\n  clusters:\n    {cluster}:\n      base-url: https://{cluster}.invalid:8006\n      nodes: [n1]\n"
                ),
            );
            let mut listing = String::from("resources:\n");
            for i in 0..120 {
                let name = format!("vm-{i:03}");
                let path = format!("vm/{cluster}/{name}.yaml");
                let text = match i % 12 {
                    0 => vm(&name, 100 + i, "  bogus: 1\n"),
                    1 => "a: [unclosed\n".to_owned(),
                    2 => vm(&name, 100, ""),
                    3 => vm("Not_Valid", 100 + i, ""),
                    4 => vm(&name, 100 + i, "---\nkind: VM\n"),
                    5 => vm(&name, 100 + i, "  cdrom: missing-iso\n"),
                    6 => String::new(),
                    _ => vm(&name, 100 + i, ""),
                };
                if i % 12 != 7 {
                    write(root, &path, &text);
                }
                listing.push_str(&format!("  - ../../{path}\n"));
                if i % 40 == 9 {
                    listing.push_str(&format!("  - ../../{path}\n"));
                }
            }
            // Shared with the other cluster, and a flat file.
            listing.push_str("  - ../../vm/a/vm-010.yaml\n  - ../../vm/flat.yaml\n");
            write(
                root,
                &format!("clusters/{cluster}/resources.yaml"),
                &listing,
            );
        }
        write(root, "vm/flat.yaml", &vm("flat", 999, ""));
        write(root, "vm/a/unlisted.yaml", &vm("unlisted", 998, ""));
        let Ok(source) = FsSource::new(root) else {
            return;
        };
        let registry = Registry::builtin();
        let options = LoadOptions::default();
        let load = |threads| load_repository_with_threads(&source, &registry, &options, threads);
        let Ok(one) = load(1) else {
            panic!("the repository loads");
        };
        assert!(one.diagnostics.len() > 50, "{}", one.diagnostics.len());
        let keys = |r: &Repository| -> Vec<Vec<String>> {
            r.clusters
                .iter()
                .map(|c| c.resources.iter().map(|x| x.key().to_string()).collect())
                .collect()
        };
        for threads in [2, 3, 8] {
            let Ok(many) = load(threads) else {
                panic!("the repository loads");
            };
            assert_eq!(many.diagnostics, one.diagnostics, "{threads} threads");
            assert_eq!(keys(&many), keys(&one), "{threads} threads");
            let valid = |r: &Repository| r.clusters.iter().map(|c| c.valid).collect::<Vec<_>>();
            assert_eq!(valid(&many), valid(&one));
        }
    }
}
