//! The repository loader: discovers clusters, reads their configs and compositions, loads the
//! listed manifests (each file once, however many clusters list it) and validates every cluster.
//! Every problem is collected; one cluster's errors never hide another's results.

use crate::config::{ClusterEntry, ConfigFile};
use crate::de::{Sink, decode, did_you_mean};
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::kind::Registry;
use crate::kinds::common::is_valid_name;
use crate::manifest::{LoadedManifest, Resource, load_manifest, scalar_text};
use crate::source::{ReadError, RepoSource, join_relative};
use crate::stack::{self, StackDocument, StackInstance};
use crate::validate::validate_cluster;
use crate::yaml::{Node, NodeValue, PathSeg, Span, parse_documents};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// A cluster as loaded: its endpoint entry and the resources its composition lists.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The name (its directory under `clusters/`).
    pub name: String,
    /// The `pve.clusters.<name>` entry, if the config was usable.
    pub entry: Option<ClusterEntry>,
    /// The cluster's whole config file, if usable: its `pve` and `reconcile` settings are
    /// layered over `proxops.yaml` ([`crate::settings::effective`]).
    pub config: Option<ConfigFile>,
    /// The resources of the composition that decoded without error, in path order, then
    /// those its Stacks projected, Stack by Stack.
    pub resources: Vec<Arc<Resource>>,
    /// The Stacks of the composition that projected without error, in path order.
    pub stacks: Vec<StackInstance>,
    /// Whether the cluster has no error (warnings allowed).
    pub valid: bool,
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

struct Loader<'a> {
    source: &'a dyn RepoSource,
    registry: &'a Registry,
    diagnostics: Vec<Diagnostic>,
    /// Every file a composition lists (under a kind root): the clusters listing it, and the
    /// manifest if it was read.
    files: BTreeMap<String, Listed>,
    /// How many threads may read and decode manifests.
    threads: usize,
}

/// Reads one configuration file of the `proxops.yaml` shape on its own, such as an agent's
/// `--config FILE`: the configuration when it has no error, and every finding, pinned to its
/// YAML node like the repository's own files.
pub fn read_config_file(
    source: &dyn RepoSource,
    path: &str,
) -> (Option<ConfigFile>, Vec<Diagnostic>) {
    let registry = Registry::builtin();
    let mut loader = Loader {
        source,
        registry: &registry,
        diagnostics: Vec::new(),
        files: BTreeMap::new(),
        threads: 1,
    };
    let (file, doc) = match read_yaml(source, path) {
        Ok(Some(x)) => x,
        Ok(None) => {
            let d = Diagnostic::error(Code::Io, format!("{path} does not exist")).in_file(path);
            return (None, vec![d]);
        }
        Err(d) => return (None, vec![*d]),
    };
    let sink = Sink::default();
    let config = decode::<ConfigFile>(&doc, &sink, registry.required());
    if let Some(c) = &config {
        for p in c.check() {
            sink.push(config_problem(p.code, &doc, &p.path, p.message, p.help));
        }
    }
    loader.push_problems(&file, &sink, None);
    let diagnostics = loader.diagnostics;
    let config = config.filter(|_| !diagnostics.iter().any(Diagnostic::is_error));
    (config, diagnostics)
}

/// A file read and parsed as YAML, or the diagnostic saying why not.
fn read_yaml(
    source: &dyn RepoSource,
    path: &str,
) -> Result<Option<(Arc<SourceFile>, Node)>, Box<Diagnostic>> {
    let bytes = match source.read(path) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(None),
        Err(ReadError::NotRegular(kind)) => {
            return Err(Box::new(
                Diagnostic::error(
                    Code::NotRegularFile,
                    format!("{path} is a {kind}, not a regular file"),
                )
                .in_file(path),
            ));
        }
        Err(e) => {
            return Err(Box::new(
                Diagnostic::error(Code::Io, format!("cannot read {path}: {e}")).in_file(path),
            ));
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        Box::new(Diagnostic::error(Code::YamlSyntax, "the file is not UTF-8 text").in_file(path))
    })?;
    // Diagnostics show a copy with URL credentials and secrets written in place masked; the
    // values come from the original.
    let masked = crate::config::mask_url_credentials(&text);
    let docs = parse_documents(&text).map_err(|e| {
        let file = SourceFile::new(path, masked.as_ref());
        Box::new(
            Diagnostic::error(Code::YamlSyntax, format!("invalid YAML: {}", e.message))
                .with_label(&file, e.span, "here"),
        )
    })?;
    let doc = docs.into_iter().find(|d| !d.is_null()).unwrap_or(Node {
        span: Span::new(0, 0),
        value: NodeValue::Map(Vec::new()),
    });
    let secrets = crate::config::plain_secret_spans(&doc);
    let file = if secrets.is_empty() {
        SourceFile::new(path, masked.as_ref())
    } else {
        SourceFile::new(path, crate::config::mask_spans(&masked, &secrets))
    };
    Ok(Some((file, doc)))
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

impl Loader<'_> {
    /// The entry of a listed file, created if new.
    fn listed(&mut self, path: &str) -> &mut Listed {
        self.files.entry(path.to_owned()).or_default()
    }

    fn push_problems(&mut self, file: &Arc<SourceFile>, sink: &Sink, cluster: Option<&str>) {
        for p in sink.take() {
            let d = Diagnostic {
                severity: if p.code == Code::UnknownAnnotation {
                    crate::diagnostic::Severity::Warning
                } else {
                    crate::diagnostic::Severity::Error
                },
                ..Diagnostic::error(p.code, p.message)
            };
            self.diagnostics.push(
                d.with_label(file, p.span, p.label)
                    .with_help_opt(p.help)
                    .in_cluster(cluster),
            );
        }
    }

    fn load_repository_config(&mut self, cluster_names: &[String]) -> Option<ConfigFile> {
        let (file, doc) = match read_yaml(self.source, "proxops.yaml") {
            Ok(Some(x)) => x,
            Ok(None) => return None,
            Err(d) => {
                self.diagnostics.push(Diagnostic {
                    code: if d.code == Code::YamlSyntax {
                        Code::YamlSyntax
                    } else {
                        Code::RepositoryConfig
                    },
                    ..*d
                });
                return None;
            }
        };
        let sink = Sink::default();
        let config = decode::<ConfigFile>(&doc, &sink, self.registry.required());
        if let Some(c) = &config {
            for p in c.check() {
                sink.push(config_problem(p.code, &doc, &p.path, p.message, p.help));
            }
            if let Some(pve) = &c.pve {
                for name in pve.clusters.keys() {
                    let at = [
                        PathSeg::from("pve"),
                        PathSeg::from("clusters"),
                        PathSeg::Key(name.clone()),
                    ];
                    let message = if cluster_names.contains(name) {
                        format!(
                            "cluster `{name}` is declared here and in clusters/{name}/config.yaml"
                        )
                    } else {
                        format!(
                            "cluster `{name}` has no clusters/{name}/ directory with a composition"
                        )
                    };
                    sink.push(crate::de::Problem {
                        code: Code::ClusterConfig,
                        span: key_span(&doc, &at),
                        message,
                        label: "declared here".into(),
                        help: Some(format!("declare each cluster only in clusters/<name>/config.yaml; move `{name}` there")),
                    });
                }
            }
        }
        self.push_problems(&file, &sink, None);
        config
    }

    /// Loads one cluster's config and checks its composition; returns the cluster and the
    /// manifests to read. `index` is the cluster's position among the repository's clusters;
    /// `scheduled` holds the manifests other clusters already read and decode.
    fn plan_cluster(
        &mut self,
        index: usize,
        name: &str,
        scheduled: &mut HashSet<String>,
    ) -> (Cluster, Option<Plan>) {
        let mut cluster = Cluster {
            name: name.to_owned(),
            stacks: Vec::new(),
            entry: None,
            config: None,
            resources: Vec::new(),
            valid: true,
        };
        let dir = format!("clusters/{name}");
        if !is_valid_name(name) {
            self.diagnostics.push(
                Diagnostic::error(Code::InvalidName, format!("`{name}` is not a valid cluster name"))
                    .in_file(&dir)
                    .in_cluster(Some(name))
                    .with_help("cluster directories are lowercase letters and digits in words joined by single hyphens"),
            );
        }
        self.load_cluster_config(&mut cluster, &dir);
        let plan = self.plan_composition(index, name, &dir, scheduled);
        (cluster, plan)
    }

    fn load_cluster_config(&mut self, cluster: &mut Cluster, dir: &str) {
        let name = cluster.name.clone();
        let path = format!("{dir}/config.yaml");
        let (file, doc) = match read_yaml(self.source, &path) {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::ClusterConfig,
                        format!("{path} is missing"),
                    )
                    .in_file(&path)
                    .in_cluster(Some(&name))
                    .with_help(format!(
                        "create {path} declaring `pve.clusters.{name}` with its base-url and nodes"
                    )),
                );
                return;
            }
            Err(d) => {
                self.diagnostics.push((*d).in_cluster(Some(&name)));
                return;
            }
        };
        let sink = Sink::default();
        let Some(config) = decode::<ConfigFile>(&doc, &sink, self.registry.required()) else {
            self.push_problems(&file, &sink, Some(&name));
            return;
        };
        let entries = config.pve.as_ref().map(|p| &p.clusters);
        let clusters_path = [PathSeg::from("pve"), PathSeg::from("clusters")];
        match entries.and_then(|e| e.get(&name)) {
            Some(entry) => {
                let entry_path = [PathSeg::from("pve"), PathSeg::from("clusters"), PathSeg::Key(name.clone())];
                for p in entry.check() {
                    let full: Vec<PathSeg> = entry_path.iter().cloned().chain(p.path).collect();
                    sink.push(config_problem(p.code, &doc, &full, p.message, p.help));
                }
                cluster.entry = Some(entry.clone());
            }
            None => sink.push(crate::de::Problem {
                code: Code::ClusterConfig,
                span: doc.span_at(&clusters_path),
                message: format!("{path} does not declare `pve.clusters.{name}`"),
                label: "expected an entry named after the directory".into(),
                help: entries
                    .and_then(|e| did_you_mean(&name, e.keys().map(String::as_str)))
                    .map(|k| format!("rename `{k}` to `{name}`: the entry must be named after its directory"))
                    .or_else(|| Some(format!("add `pve: {{clusters: {{{name}: {{base-url: https://...:8006, nodes: [...]}}}}}}`"))),
            }),
        }
        let own_missing = entries.is_none_or(|e| !e.contains_key(&name));
        let near_miss = entries.and_then(|e| did_you_mean(&name, e.keys().map(String::as_str)));
        // A near-miss of the own name was already reported as misnamed.
        for other in entries
            .into_iter()
            .flat_map(|e| e.keys())
            .filter(|k| **k != name && !(own_missing && near_miss == Some(k.as_str())))
        {
            let at = [
                PathSeg::from("pve"),
                PathSeg::from("clusters"),
                PathSeg::Key(other.clone()),
            ];
            sink.push(crate::de::Problem {
                code: Code::ClusterConfig,
                span: key_span(&doc, &at),
                message: format!("{path} declares cluster `{other}`, but a cluster config declares only its own cluster `{name}`"),
                label: "extra cluster entry".into(),
                help: Some(format!("move `{other}` to clusters/{other}/config.yaml")),
            });
        }
        // `reconcile` may be set per cluster (budget, timeouts); these are the process's.
        for key in ["log", "git", "listen", "data-dir", "agent"] {
            if let Some((k, _)) = doc.entry(key) {
                self.diagnostics.push(
                    Diagnostic::warning(
                        Code::ClusterConfig,
                        format!("`{key}` is process-wide and ignored in a cluster config"),
                    )
                    .with_label(&file, k.span, "ignored here")
                    .with_help("move it to proxops.yaml at the repository root")
                    .in_cluster(Some(&name)),
                );
            }
        }
        if let Some((k, _)) = doc.entry("notifications") {
            self.diagnostics.push(
                Diagnostic::warning(
                    Code::ClusterConfig,
                    "top-level `notifications` is ignored in a cluster config",
                )
                .with_label(&file, k.span, "ignored here")
                .with_help(format!(
                    "a cluster's own sinks go in its entry, `pve.clusters.{name}.notifications`; \
                     the process-wide ones in proxops.yaml"
                ))
                .in_cluster(Some(&name)),
            );
        }
        cluster.config = Some(config);
        self.push_problems(&file, &sink, Some(&name));
    }

    /// Reads `resources.yaml` and checks each entry: what to record, and which files to read
    /// ([`Loader::record_composition`] records it once they are read). `None` if there is no
    /// usable list.
    fn plan_composition(
        &mut self,
        index: usize,
        cluster: &str,
        dir: &str,
        scheduled: &mut HashSet<String>,
    ) -> Option<Plan> {
        let path = format!("{dir}/resources.yaml");
        let (file, doc) = match read_yaml(self.source, &path) {
            Ok(Some(x)) => x,
            Ok(None) => {
                self.diagnostics.push(
                    Diagnostic::error(Code::Composition, format!("{path} is missing"))
                        .in_file(&path)
                        .in_cluster(Some(cluster))
                        .with_help(
                            "list the cluster's manifests in `resources:` (an empty list is fine)",
                        ),
                );
                return None;
            }
            Err(d) => {
                self.diagnostics.push((*d).in_cluster(Some(cluster)));
                return None;
            }
        };
        let bad = |span: Span, message: String, help: Option<&str>| {
            Diagnostic::error(Code::Composition, message)
                .with_label(&file, span, "here")
                .with_help_opt(help.map(str::to_owned))
                .in_cluster(Some(cluster))
        };
        let list: &[Node] = match (&doc.value, doc.get("resources")) {
            (NodeValue::Seq(items), _) => items,
            (NodeValue::Map(entries), Some(node)) => {
                for (k, _) in entries
                    .iter()
                    .filter(|(k, _)| k.as_str() != Some("resources"))
                {
                    let key = k.as_str().unwrap_or_default();
                    self.diagnostics.push(
                        Diagnostic::error(Code::UnknownField, format!("unknown field `{key}`"))
                            .with_label(&file, k.span, "unknown field")
                            .with_help("a composition has only `resources:`")
                            .in_cluster(Some(cluster)),
                    );
                }
                match &node.value {
                    NodeValue::Seq(items) => items,
                    _ if node.is_null() => &[],
                    _ => {
                        self.diagnostics.push(bad(
                            node.span,
                            "`resources` must be a list of file paths".into(),
                            None,
                        ));
                        return None;
                    }
                }
            }
            _ => {
                let d = bad(
                    doc.span,
                    "a composition is `resources:` followed by a list of file paths".into(),
                    Some("e.g. `resources: [../../vm/base/web.yaml]`"),
                );
                self.diagnostics.push(d);
                return None;
            }
        };
        // Findings are recorded in entry order, after the files are read (see `Step`).
        let mut seen: BTreeMap<String, Span> = BTreeMap::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut reads: Vec<Pending> = Vec::new();
        for item in list {
            let Some(entry) = scalar_text(item).map(str::trim) else {
                steps.push(Step::Report(bad(
                    item.span,
                    "expected a file path".into(),
                    None,
                )));
                continue;
            };
            if entry.is_empty() {
                continue;
            }
            let Some(target) = join_relative(dir, entry) else {
                let d = Diagnostic::error(Code::CompositionEscape, format!("`{entry}` points outside the repository"))
                    .with_label(&file, item.span, "outside the repository")
                    .with_help("paths are relative to the cluster directory and must stay inside the repository")
                    .in_cluster(Some(cluster));
                steps.push(Step::Report(d));
                continue;
            };
            if !is_yaml_name(&target) {
                steps.push(Step::Report(bad(
                    item.span,
                    format!("`{entry}` is not a .yaml or .yml file"),
                    None,
                )));
                continue;
            }
            if let Some(first) = seen.get(&target) {
                let d = bad(
                    item.span,
                    format!("`{target}` is listed twice"),
                    Some("remove one of the entries"),
                )
                .with_label(&file, *first, "first listed here");
                steps.push(Step::Report(d));
                continue;
            }
            seen.insert(target.clone(), item.span);
            let first = target.split('/').next().unwrap_or_default();
            let root_kind = self
                .registry
                .by_root(first)
                .map(|k| k.name())
                .or_else(|| stack::kind_of_root(first));
            if root_kind.is_none() {
                let roots: Vec<&str> = self.kind_roots();
                let d = Diagnostic::error(Code::NotUnderKindRoot, format!("`{target}` is not under a recognised kind root"))
                    .with_label(&file, item.span, "not under a kind root")
                    .with_help(format!("manifests live under <kind>/base/ or <kind>/<cluster>/, where <kind> is one of: {}", roots.join(", ")))
                    .in_cluster(Some(cluster));
                steps.push(Step::Report(d));
                continue;
            }
            if target.split('/').count() == 2 {
                // Counted as listed, so that the kind-root scan does not report it again.
                self.listed(&target).listers.insert(index);
                steps.push(Step::Report(
                    flat_layout(&target)
                        .with_label(&file, item.span, "listed here")
                        .in_cluster(Some(cluster)),
                ));
                continue;
            }
            // Each file is decoded once, by the first cluster listing it.
            let load = self.files.get(&target).is_none_or(|f| f.manifest.is_none())
                && scheduled.insert(target.clone());
            steps.push(Step::Read(reads.len()));
            reads.push(Pending {
                target,
                span: item.span,
                root_kind,
                load,
            });
        }
        Some(Plan {
            index,
            cluster: cluster.to_owned(),
            file,
            steps,
            reads,
        })
    }

    /// Records the findings of a composition in entry order, given what reading its files gave
    /// (`fetched`, in the order of `plan.reads`); returns the paths of the files read, sorted.
    fn record_composition(&mut self, plan: Plan, fetched: &mut [Option<Fetched>]) -> Vec<String> {
        let Plan {
            index,
            cluster,
            file,
            steps,
            mut reads,
        } = plan;
        let cluster = cluster.as_str();
        let mut paths = Vec::new();
        for step in steps {
            let i = match step {
                Step::Report(d) => {
                    self.diagnostics.push(d);
                    continue;
                }
                Step::Read(i) => i,
            };
            let (Some(pending), Some(result)) =
                (reads.get_mut(i), fetched.get_mut(i).and_then(Option::take))
            else {
                continue;
            };
            let target = &pending.target;
            let span = pending.span;
            match result {
                Ok(loaded) => {
                    let (source, registry) = (self.source, self.registry);
                    let listed = self.listed(target);
                    listed.listers.insert(index);
                    if let Some((manifest, stack)) = loaded {
                        listed.manifest = Some(manifest);
                        listed.stack = stack;
                    } else if listed.manifest.is_none() {
                        // The cluster that was to decode it could not read it, this one can.
                        let again = Pending {
                            load: true,
                            ..pending.clone()
                        };
                        if let Ok(Some((manifest, stack))) = fetch(source, registry, &again) {
                            listed.manifest = Some(manifest);
                            listed.stack = stack;
                        }
                    }
                    paths.push(std::mem::take(&mut pending.target));
                }
                Err(ReadError::NotFound) => {
                    let d = Diagnostic::error(Code::CompositionMissingFile, format!("`{target}` does not exist"))
                        .with_label(&file, span, "no such file")
                        .with_help("paths are relative to the cluster directory, e.g. `../../vm/<cluster>/web.yaml`")
                        .in_cluster(Some(cluster));
                    self.diagnostics.push(d);
                }
                Err(ReadError::Escapes) => {
                    let d = Diagnostic::error(
                        Code::CompositionEscape,
                        format!("`{target}` resolves outside the repository"),
                    )
                    .with_label(&file, span, "symbolic link leaves the repository")
                    .in_cluster(Some(cluster));
                    self.diagnostics.push(d);
                }
                Err(ReadError::NotRegular(kind)) => {
                    let d = Diagnostic::error(
                        Code::NotRegularFile,
                        format!("`{target}` is a {kind}, not a regular file"),
                    )
                    .with_label(&file, span, format!("a {kind}"))
                    .with_help("list only manifest files; ProxOps never opens anything else")
                    .in_cluster(Some(cluster));
                    self.diagnostics.push(d);
                }
                Err(e) => {
                    let d = Diagnostic::error(Code::Io, format!("cannot read `{target}`: {e}"))
                        .with_label(&file, span, "unreadable")
                        .in_cluster(Some(cluster));
                    self.diagnostics.push(d);
                }
            }
        }
        // Lexicographic order, so that the index order never depends on the listing order.
        paths.sort();
        paths
    }

    fn check_shared_endpoints(&mut self, clusters: &[Cluster]) {
        let mut by_url: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for c in clusters {
            if let Some(e) = &c.entry {
                by_url
                    .entry(crate::config::redact_url(e.base_url.trim_end_matches('/')))
                    .or_default()
                    .push(&c.name);
            }
        }
        for (url, names) in by_url.into_iter().filter(|(_, n)| n.len() > 1) {
            for name in &names {
                self.diagnostics.push(
                    Diagnostic::error(
                        Code::ClusterConfig,
                        format!("clusters {} share the endpoint {url}", names.join(", ")),
                    )
                    .in_file(format!("clusters/{name}/config.yaml"))
                    .in_cluster(Some(name))
                    .with_help(
                        "one PVE cluster is one ProxOps cluster: merge them, or fix the base-url",
                    ),
                );
            }
        }
    }

    /// Every kind's directory root, then the Stacks' two.
    fn kind_roots(&self) -> Vec<&'static str> {
        let kinds = self.registry.kinds().map(|k| k.root());
        kinds
            .chain([stack::TEMPLATE_ROOT, stack::STACK_ROOT])
            .collect()
    }

    /// Flat files directly under a kind root, and manifests no cluster lists.
    fn scan_kind_roots(&mut self) {
        let roots = self.kind_roots();
        for root in roots {
            let mut stack = vec![root.to_owned()];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = self.source.list(&dir) else {
                    continue;
                };
                for e in entries.into_iter().filter(|e| !e.name.starts_with('.')) {
                    let path = format!("{dir}/{}", e.name);
                    if e.is_dir {
                        stack.push(path);
                        continue;
                    }
                    if !is_yaml_name(&e.name) || self.files.contains_key(&path) {
                        continue;
                    }
                    if dir == root {
                        self.diagnostics.push(flat_layout(&path).in_file(&path));
                    } else {
                        self.diagnostics.push(
                            Diagnostic::warning(Code::UnlistedManifest, format!("`{path}` is not listed by any cluster"))
                                .in_file(&path)
                                .with_help("add it to a cluster's resources.yaml, or delete it: unlisted manifests are never reconciled"),
                        );
                    }
                }
            }
        }
    }
}

/// A file some composition lists.
#[derive(Debug, Default)]
struct Listed {
    listers: Listers,
    /// The manifest, once read.
    manifest: Option<LoadedManifest>,
    /// A Stack or StackTemplate, once read.
    stack: Option<Arc<StackDocument>>,
}

/// Whether a file name ends in `.yaml` or `.yml`, in any case.
fn is_yaml_name(name: &str) -> bool {
    let name = name.as_bytes();
    [&b".yaml"[..], &b".yml"[..]].iter().any(|ext| {
        name.len()
            .checked_sub(ext.len())
            .and_then(|start| name.get(start..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(ext))
    })
}

/// The clusters whose compositions list one file, as positions among the repository's clusters;
/// one cluster needs no allocation.
#[derive(Debug, Default)]
struct Listers {
    first: Option<usize>,
    more: Vec<usize>,
}

impl Listers {
    fn insert(&mut self, cluster: usize) {
        match self.first {
            None => self.first = Some(cluster),
            Some(first) if first == cluster || self.more.contains(&cluster) => {}
            Some(_) => self.more.push(cluster),
        }
    }

    fn contains(&self, cluster: usize) -> bool {
        self.first == Some(cluster) || self.more.contains(&cluster)
    }

    /// The cluster, if exactly one lists the file.
    fn single(&self) -> Option<usize> {
        self.first.filter(|_| self.more.is_empty())
    }
}

/// One composition entry, in order: a finding to record, or the index of a file to read.
enum Step {
    Report(Diagnostic),
    Read(usize),
}

/// A composition checked, with its files to read.
struct Plan {
    /// The cluster's position among the repository's clusters.
    index: usize,
    cluster: String,
    /// `resources.yaml`, where the findings are labelled.
    file: Arc<SourceFile>,
    steps: Vec<Step>,
    reads: Vec<Pending>,
}

/// A listed file to read.
#[derive(Clone)]
struct Pending {
    target: String,
    /// The composition entry listing it.
    span: Span,
    root_kind: Option<&'static str>,
    /// Whether to decode it (no other cluster's composition has loaded it yet).
    load: bool,
}

/// What reading one listed file gave: its decoded manifest (if it was to be loaded), or why it
/// could not be read.
/// A Stack or StackTemplate file has no resource of its own: its document comes beside.
type Fetched = Result<Option<(LoadedManifest, Option<Arc<StackDocument>>)>, ReadError>;

/// Fewer files than this per thread are not worth a thread.
const FILES_PER_THREAD: usize = 16;

/// Reads and, if asked, decodes one listed file.
fn fetch(source: &dyn RepoSource, registry: &Registry, pending: &Pending) -> Fetched {
    let bytes = source.read(&pending.target)?;
    if !pending.load {
        return Ok(None);
    }
    let loaded = match String::from_utf8(bytes) {
        Ok(text) => {
            let file = SourceFile::new(pending.target.clone(), text);
            match pending.root_kind {
                Some(kind @ (stack::STACK | stack::STACK_TEMPLATE)) => {
                    let loaded = stack::load_stack_file(&file, kind);
                    let manifest = LoadedManifest {
                        resource: None,
                        diagnostics: loaded.diagnostics,
                    };
                    return Ok(Some((manifest, loaded.document)));
                }
                root_kind => load_manifest(&file, registry, root_kind),
            }
        }
        Err(_) => LoadedManifest {
            resource: None,
            diagnostics: vec![
                Diagnostic::error(Code::YamlSyntax, "the file is not UTF-8 text")
                    .in_file(&pending.target),
            ],
        },
    };
    Ok(Some((loaded, None)))
}

impl Loader<'_> {
    /// [`fetch`]es every file, on up to `self.threads` threads; the results are in the order of
    /// `reads` whatever the threads did.
    fn fetch_all(&self, reads: &[&Pending]) -> Vec<Option<Fetched>> {
        let threads = self.threads.min(reads.len() / FILES_PER_THREAD);
        let (source, registry) = (self.source, self.registry);
        in_parallel(reads, threads, |p| fetch(source, registry, p))
    }
}

/// `f` of every item, on up to `threads` threads (the calling thread is one of them); the
/// results are in the order of `items` whatever the threads did. `None` only for an item whose
/// result went missing, which cannot happen: a panic in `f` is a panic of this call, as it would
/// be on one thread.
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(|item| Some(f(item))).collect();
    }
    // Each thread takes the next item not yet taken, so a slow item does not hold up a whole
    // share; results are put back in order below.
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.min(items.len()))
            .map(|_| scope.spawn(work))
            .collect();
        let mut all = work();
        for helper in helpers {
            match helper.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (i, result) in all {
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(result);
            }
        }
    });
    slots
}

fn flat_layout(path: &str) -> Diagnostic {
    let (root, name) = path.split_once('/').unwrap_or((path, ""));
    Diagnostic::error(Code::FlatLayout, format!("`{path}` sits directly under the `{root}/` kind root"))
        .with_help(format!("move it to `{root}/base/{name}` (shared) or `{root}/<cluster>/{name}`: ProxOps never invents a default cluster"))
}

fn config_problem(
    code: Code,
    doc: &Node,
    path: &[PathSeg],
    message: String,
    help: Option<String>,
) -> crate::de::Problem {
    crate::de::Problem {
        code,
        span: doc.span_at(path),
        message,
        label: if code == Code::CredentialsInUrl {
            "credentials (masked here)".into()
        } else {
            "invalid value".into()
        },
        help,
    }
}

/// The span of the key node at the end of `path` (falls back to the value's span).
fn key_span(doc: &Node, path: &[PathSeg]) -> Span {
    if let Some((PathSeg::Key(last), parent)) = path.split_last()
        && let Some((k, _)) = doc.at(parent).and_then(|p| p.entry(last))
    {
        return k.span;
    }
    doc.span_at(path)
}

#[cfg(test)]
mod tests {
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
