//! [`Workspace`]: a repository loaded once, with what every command, the agent and an embedder
//! need of it: where its files are (SOPS secrets and CA files are read relative to it), the
//! kinds it was read with, the loaded clusters and their graphs, the commit it was read at, each
//! cluster's effective settings and its reconcile [`Source`].

use crate::backend::settings_for;
use crate::reconcile::Source;
use proxops_graph::{Graph, check_repository};
use proxops_model::config::LogLevel;
use proxops_model::settings::{ClusterSettings, FlagSettings};
use proxops_model::{
    Cluster, FsSource, LoadError, LoadOptions, Registry, RepoSource, Repository, load_repository,
};
use proxops_store::{GitSource, ObjectId, Store, StoreError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a repository could not be loaded at all (a cluster with errors still loads: see
/// [`Cluster::valid`] and [`Repository::diagnostics`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The directory cannot be read.
    #[error("cannot open repository {dir}")]
    Open {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The loader refused (an unknown cluster was asked for, a file unreadable).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The git repository has no such revision, or it cannot be read.
    // Transparent: the store's message already names the revision.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A loaded repository.
#[derive(Debug)]
pub struct Workspace {
    dir: PathBuf,
    registry: Arc<Registry>,
    repo: Repository,
    graphs: Vec<(String, Graph)>,
    revision: Option<ObjectId>,
}

impl Workspace {
    /// The work tree at `dir` as it is, uncommitted changes included; `clusters` narrows the
    /// clusters loaded (empty: all).
    pub fn open(
        dir: &Path,
        registry: Arc<Registry>,
        clusters: &[String],
    ) -> Result<Workspace, WorkspaceError> {
        let source = FsSource::new(dir).map_err(|source| WorkspaceError::Open {
            dir: dir.to_path_buf(),
            source,
        })?;
        Workspace::from_source(&source, dir, registry, clusters, None)
    }

    /// The repository at the commit `source` reads; `dir` is where its files are on disk.
    pub fn at_commit(
        source: &GitSource,
        dir: &Path,
        registry: Arc<Registry>,
        clusters: &[String],
    ) -> Result<Workspace, WorkspaceError> {
        Workspace::from_source(source, dir, registry, clusters, Some(source.commit()))
    }

    /// The repository at `revision` of `store` (`None`: `HEAD`), its files on disk under `dir`
    /// (the store's work tree, or a checkout of it). For a caller that holds a git repository
    /// and a revision rather than a [`GitSource`]: the agent at each fetched commit, the
    /// reconciler at a gated cluster's live desired commit.
    pub fn at_revision(
        store: &Store,
        revision: Option<&str>,
        dir: &Path,
        registry: Arc<Registry>,
        clusters: &[String],
    ) -> Result<Workspace, WorkspaceError> {
        let source = store.source(revision)?;
        Workspace::at_commit(&source, dir, registry, clusters)
    }

    /// The repository as any `source` reads it (`revision`: the commit it is, if one).
    pub fn from_source(
        source: &dyn RepoSource,
        dir: &Path,
        registry: Arc<Registry>,
        clusters: &[String],
        revision: Option<ObjectId>,
    ) -> Result<Workspace, WorkspaceError> {
        let options = LoadOptions::default().with_clusters(clusters.iter().cloned());
        let mut repo = load_repository(source, &registry, &options)?;
        let graphs = check_repository(&registry, &mut repo)
            .into_iter()
            .filter_map(|c| c.graph.map(|g| (c.name, g)))
            .collect();
        Ok(Workspace {
            dir: dir.to_path_buf(),
            registry,
            repo,
            graphs,
            revision,
        })
    }

    /// Where the repository's files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kinds it was read with.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The loaded repository: clusters, configuration, diagnostics.
    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    /// The loaded repository, owned (for a caller that reports on it its own way).
    pub fn into_repo(self) -> Repository {
        self.repo
    }

    /// The valid clusters' graphs, by cluster name.
    pub fn graphs(&self) -> &[(String, Graph)] {
        &self.graphs
    }

    /// The graph of `cluster` (`None`: not loaded, or invalid).
    pub fn graph(&self, cluster: &str) -> Option<&Graph> {
        self.graphs
            .iter()
            .find(|(name, _)| name == cluster)
            .map(|(_, g)| g)
    }

    /// The valid clusters, in name order, with their graphs.
    pub fn clusters(&self) -> impl Iterator<Item = (&Cluster, &Graph)> {
        self.graphs
            .iter()
            .filter_map(|(name, g)| self.repo.cluster(name).map(|c| (c, g)))
    }

    /// Whether any loaded cluster is invalid.
    pub fn any_invalid(&self) -> bool {
        self.repo.clusters.iter().any(|c| !c.valid)
    }

    /// The commit it was read at (`None`: a work tree).
    pub fn revision(&self) -> Option<ObjectId> {
        self.revision
    }

    /// A cluster's effective settings: defaults, `proxops.yaml`, its config, `flags` and the
    /// environment.
    pub fn settings(&self, cluster: &Cluster, flags: &FlagSettings) -> ClusterSettings {
        settings_for(self.repo.config.as_ref(), cluster, flags, LogLevel::Warn)
    }

    /// What the reconciler reads of `cluster` (`None`: not loaded).
    pub fn source(&self, cluster: &str) -> Option<Source<'_>> {
        self.repo.cluster(cluster)?;
        let mut source = Source::new(&self.repo, self.graph(cluster), &self.dir);
        source.revision = self.revision;
        Some(source)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use proxops_test_support::TestRepo;

    #[test]
    fn a_work_tree_and_its_commit_load_alike_and_only_the_commit_has_a_revision() {
        let repo = TestRepo::homelab();
        let registry = Arc::new(Registry::builtin());
        let tree = Workspace::open(repo.path(), Arc::clone(&registry), &[]).unwrap();
        assert!(!tree.any_invalid());
        assert_eq!(tree.revision(), None);
        let names: Vec<&str> = tree.clusters().map(|(c, _)| c.name.as_str()).collect();
        assert_eq!(names, ["home", "lab"]);

        let store = proxops_store::Store::open(repo.path()).unwrap();
        let source = store.source(None).unwrap();
        let lab = ["lab".to_owned()];
        let commit = Workspace::at_commit(&source, repo.path(), registry, &lab).unwrap();
        assert_eq!(commit.revision(), Some(source.commit()));
        assert_eq!(commit.graphs().len(), 1);
        let src = commit.source("lab").unwrap();
        assert_eq!(src.revision, Some(source.commit()));
        assert_eq!(src.dir, repo.path());
        assert!(src.graph.is_some());
        assert!(commit.source("home").is_none());
        let graph = commit.graph("lab").unwrap();
        assert_eq!(
            graph.resources().len(),
            tree.graph("lab").unwrap().resources().len()
        );
    }

    #[test]
    fn a_revision_of_the_store_loads_as_its_commit_and_an_unknown_one_is_refused() {
        let repo = TestRepo::homelab();
        let registry = Arc::new(Registry::builtin());
        let store = proxops_store::Store::open(repo.path()).unwrap();
        let head = store.source(None).unwrap().commit();
        let ws =
            Workspace::at_revision(&store, None, repo.path(), Arc::clone(&registry), &[]).unwrap();
        assert_eq!(ws.revision(), Some(head));
        assert_eq!(ws.dir(), repo.path());
        let named = proxops_store::documents::hex(head);
        let again = Workspace::at_revision(
            &store,
            Some(&named),
            repo.path(),
            Arc::clone(&registry),
            &[],
        )
        .unwrap();
        assert_eq!(again.revision(), Some(head));
        assert_eq!(again.graphs().len(), ws.graphs().len());
        let missing =
            Workspace::at_revision(&store, Some("no-such-ref"), repo.path(), registry, &[]);
        assert!(
            matches!(missing, Err(WorkspaceError::Store(_))),
            "{missing:?}"
        );
    }
}
