//! Compositions: what each cluster lists, planned, fetched and recorded; the kind roots
//! scanned for files no cluster lists.

use super::cluster::Cluster;
use super::config::read_yaml;
use super::parallel::{Fetched, fetch};
use super::shared::{Loader, Pending};
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::manifest::scalar_text;
use crate::names::is_valid_name;
use crate::source::{ReadError, join_relative};
use crate::stack;
use crate::yaml::{Node, NodeValue, Span};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

impl Loader<'_> {
    /// Loads one cluster's config and checks its composition; returns the cluster and the
    /// manifests to read. `index` is the cluster's position among the repository's clusters;
    /// `scheduled` holds the manifests other clusters already read and decode.
    pub(super) fn plan_cluster(
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

    /// Reads `resources.yaml` and checks each entry: what to record, and which files to read
    /// ([`Loader::record_composition`] records it once they are read). `None` if there is no
    /// usable list.
    pub(super) fn plan_composition(
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
    pub(super) fn record_composition(
        &mut self,
        plan: Plan,
        fetched: &mut [Option<Fetched>],
    ) -> Vec<String> {
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

    /// Every kind's directory root, then the Stacks' two.
    pub(super) fn kind_roots(&self) -> Vec<&'static str> {
        let kinds = self.registry.kinds().map(|k| k.root());
        kinds
            .chain([stack::TEMPLATE_ROOT, stack::STACK_ROOT])
            .collect()
    }

    /// Flat files directly under a kind root, and manifests no cluster lists.
    pub(super) fn scan_kind_roots(&mut self) {
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

/// Whether a file name ends in `.yaml` or `.yml`, in any case.
pub(super) fn is_yaml_name(name: &str) -> bool {
    let name = name.as_bytes();
    [&b".yaml"[..], &b".yml"[..]].iter().any(|ext| {
        name.len()
            .checked_sub(ext.len())
            .and_then(|start| name.get(start..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(ext))
    })
}

/// One composition entry, in order: a finding to record, or the index of a file to read.
pub(super) enum Step {
    Report(Diagnostic),
    Read(usize),
}

/// A composition checked, with its files to read.
pub(super) struct Plan {
    /// The cluster's position among the repository's clusters.
    pub(super) index: usize,
    pub(super) cluster: String,
    /// `resources.yaml`, where the findings are labelled.
    pub(super) file: Arc<SourceFile>,
    pub(super) steps: Vec<Step>,
    pub(super) reads: Vec<Pending>,
}

pub(super) fn flat_layout(path: &str) -> Diagnostic {
    let (root, name) = path.split_once('/').unwrap_or((path, ""));
    Diagnostic::error(Code::FlatLayout, format!("`{path}` sits directly under the `{root}/` kind root"))
        .with_help(format!("move it to `{root}/base/{name}` (shared) or `{root}/<cluster>/{name}`: ProxOps never invents a default cluster"))
}
