//! The repository a pass reconciles: fetched every pass, loaded and checked only when the
//! commit changed.
//!
//! What [`load_repository`] and [`check_repository`] make of a commit depends on nothing but
//! that commit's tree, the registry and the cluster filter, and the last two are fixed for the
//! life of an agent. So a pass on the commit the previous one loaded reuses its repository and
//! graphs: re-reading 10 x 1,000 manifests every pass allocated ~43 MiB that was freed right
//! after, a peak per pass that fragments the allocator's arenas. A new commit (a push, a
//! webhook's fetch) is loaded as before, after the old one is let go.

use super::source::{self, Fetched};
use super::{AgentError, AgentOptions};
use proxops_graph::{Graph, check_repository};
use proxops_model::{LoadOptions, Registry, Repository, load_repository};
use proxops_store::ObjectId;
use proxops_store::documents::hex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The graphs of a repository's valid clusters, by cluster.
pub(crate) type Graphs = Arc<BTreeMap<String, Graph>>;

/// A repository loaded and checked at one commit.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The commit it was read at.
    pub(crate) commit: ObjectId,
    /// The repository, diagnostics included.
    pub(crate) repo: Arc<Repository>,
    /// The graphs of its valid clusters.
    pub(crate) graphs: Graphs,
}

/// The last load, kept between passes.
#[derive(Debug, Default)]
pub(crate) struct LoadCache {
    last: Option<Loaded>,
    /// The git token the last loaded repository's SOPS files give ([`source::sops_git_token`]).
    sops_token: Option<proxops_store::GitToken>,
}

impl LoadCache {
    /// The loaded repository at `commit`, if it is the one kept.
    fn at(&self, commit: ObjectId) -> Option<(Arc<Repository>, Graphs)> {
        self.last
            .as_ref()
            .filter(|l| l.commit == commit)
            .map(|l| (Arc::clone(&l.repo), Arc::clone(&l.graphs)))
    }
}

/// What a pass works with, and whether it was loaded afresh.
pub(crate) struct Source {
    pub(crate) fetched: Fetched,
    pub(crate) repo: Arc<Repository>,
    pub(crate) graphs: Graphs,
    /// Whether the repository was loaded by this call (not taken from the cache).
    pub(crate) loaded: bool,
}

/// Fetches the source and loads it at the fetched commit, unless `cache` holds that commit.
pub(crate) async fn load(
    options: &Arc<AgentOptions>,
    registry: &Arc<Registry>,
    cache: &mut LoadCache,
) -> Result<Source, AgentError> {
    // The repository's own SOPS token wins once a clone holds it: read from the clone a
    // restarted agent finds, then from each commit loaded.
    if cache.sops_token.is_none()
        && let source::SourceLocation::Remote { .. } = &options.source
    {
        let checkout = options.data_dir.join("source");
        if checkout.join(".git").is_dir() {
            let registry = Arc::clone(registry);
            cache.sops_token = tokio::task::spawn_blocking(move || token_in(&checkout, &registry))
                .await
                .map_err(|e| AgentError::Source(format!("reading the clone failed: {e}")))??;
        }
    }
    let location = options.source.with_token(cache.sops_token.as_ref());
    let fetched = source::refresh(&location, &options.data_dir).await?;
    if let Some((repo, graphs)) = cache.at(fetched.commit) {
        return Ok(Source {
            fetched,
            repo,
            graphs,
            loaded: false,
        });
    }
    // The old commit's repository goes before the new one is read, so that the two are never
    // held at once.
    cache.last = None;
    let (registry, clusters, f) = (
        Arc::clone(registry),
        options.clusters.clone(),
        fetched.clone(),
    );
    let (repo, graphs) = tokio::task::spawn_blocking(move || load_at(&f, &registry, clusters))
        .await
        .map_err(|e| AgentError::Source(format!("loading failed: {e}")))??;
    let repo = Arc::new(repo);
    if let source::SourceLocation::Remote { .. } = &options.source {
        let (dir, r) = (fetched.dir.clone(), Arc::clone(&repo));
        cache.sops_token = tokio::task::spawn_blocking(move || source::sops_git_token(&r, &dir))
            .await
            .map_err(|e| AgentError::Source(format!("reading secrets failed: {e}")))??;
    }
    let graphs = Arc::new(graphs);
    cache.last = Some(Loaded {
        commit: fetched.commit,
        repo: Arc::clone(&repo),
        graphs: Arc::clone(&graphs),
    });
    Ok(Source {
        fetched,
        repo,
        graphs,
        loaded: true,
    })
}

/// The SOPS git token of the clone at `checkout`, at its checked-out commit.
fn token_in(
    checkout: &std::path::Path,
    registry: &Registry,
) -> Result<Option<proxops_store::GitToken>, AgentError> {
    let store =
        proxops_store::Store::open(checkout).map_err(|e| AgentError::Source(e.to_string()))?;
    let source = store
        .source(Some("HEAD"))
        .map_err(|e| AgentError::Source(e.to_string()))?;
    let repo = load_repository(&source, registry, &LoadOptions::default())
        .map_err(|e| AgentError::Source(e.to_string()))?;
    source::sops_git_token(&repo, checkout)
}

/// Loads and checks the repository at the fetched commit.
fn load_at(
    f: &Fetched,
    registry: &Registry,
    clusters: Vec<String>,
) -> Result<(Repository, BTreeMap<String, Graph>), AgentError> {
    let source = f
        .store
        .source(Some(&hex(f.commit)))
        .map_err(|e| AgentError::Source(e.to_string()))?;
    let mut repo = load_repository(
        &source,
        registry,
        &LoadOptions::default().with_clusters(clusters),
    )
    .map_err(|e| AgentError::Source(e.to_string()))?;
    let graphs = check_repository(registry, &mut repo)
        .into_iter()
        .filter_map(|c| c.graph.map(|g| (c.name, g)))
        .collect();
    Ok((repo, graphs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes([byte; 20])
    }

    fn empty() -> Repository {
        Repository {
            config: None,
            clusters: Vec::new(),
            diagnostics: Vec::new(),
        }
    }

    #[test]
    fn the_cache_answers_for_its_own_commit_only() {
        let mut cache = LoadCache::default();
        assert!(cache.at(id(1)).is_none());
        let repo = Arc::new(empty());
        cache.last = Some(Loaded {
            commit: id(1),
            repo: Arc::clone(&repo),
            graphs: Arc::new(BTreeMap::new()),
        });
        let (hit, _) = cache.at(id(1)).expect("the kept commit");
        assert!(
            Arc::ptr_eq(&hit, &repo),
            "the same load is shared, not a copy"
        );
        assert!(cache.at(id(2)).is_none(), "another commit is not served");
    }
}
