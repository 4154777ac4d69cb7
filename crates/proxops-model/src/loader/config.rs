//! Reading the repository's and the clusters' configuration files.

use super::cluster::Cluster;
use super::shared::Loader;
use crate::config::ConfigFile;
use crate::de::{Sink, decode};
use crate::diagnostic::did_you_mean;
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::kind::Registry;
use crate::source::{ReadError, RepoSource};
use crate::yaml::{Node, NodeValue, PathSeg, Span, parse_documents};
use std::collections::BTreeMap;
use std::sync::Arc;

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
pub(super) fn read_yaml(
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

impl Loader<'_> {
    pub(super) fn load_repository_config(
        &mut self,
        cluster_names: &[String],
    ) -> Option<ConfigFile> {
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

    pub(super) fn load_cluster_config(&mut self, cluster: &mut Cluster, dir: &str) {
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

    pub(super) fn check_shared_endpoints(&mut self, clusters: &[Cluster]) {
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
}

pub(super) fn config_problem(
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
pub(super) fn key_span(doc: &Node, path: &[PathSeg]) -> Span {
    if let Some((PathSeg::Key(last), parent)) = path.split_last()
        && let Some((k, _)) = doc.at(parent).and_then(|p| p.entry(last))
    {
        return k.span;
    }
    doc.span_at(path)
}
