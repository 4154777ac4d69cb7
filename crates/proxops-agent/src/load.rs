//! The repository a pass reconciles: fetched every pass, loaded and checked only when the
//! commit changed.
//!
//! What [`Workspace::at_revision`] makes of a commit depends on nothing but that commit's tree,
//! the registry and the cluster filter, and the last two are fixed for the life of an agent. So
//! a pass on the commit the previous one loaded reuses its workspace (repository and graphs):
//! re-reading 10 x 1,000 manifests every pass allocated ~43 MiB that was freed right after, a
//! peak per pass that fragments the allocator's arenas. A new commit (a push, a webhook's fetch)
//! is loaded as before, after the old one is let go.

use super::source::{self, Fetched};
use super::{AgentError, AgentOptions};
use proxops_engine::workspace::Workspace;
use proxops_model::Registry;
use proxops_store::ObjectId;
use proxops_store::documents::hex;
use std::path::Path;
use std::sync::Arc;

/// The last load, kept between passes.
#[derive(Debug, Default)]
pub(crate) struct LoadCache {
    /// The workspace last loaded, by the commit it was read at ([`Workspace::revision`]).
    last: Option<Arc<Workspace>>,
    /// The git token the last loaded repository's SOPS files give ([`source::sops_git_token`]).
    sops_token: Option<proxops_store::GitToken>,
}

impl LoadCache {
    /// The workspace loaded at `commit`, if it is the one kept.
    fn at(&self, commit: ObjectId) -> Option<Arc<Workspace>> {
        self.last
            .as_ref()
            .filter(|w| w.revision() == Some(commit))
            .map(Arc::clone)
    }
}

/// What a pass works with, and whether it was loaded afresh.
pub(crate) struct Source {
    pub(crate) fetched: Fetched,
    /// The repository at the fetched commit, its files in the fetched work tree.
    pub(crate) workspace: Arc<Workspace>,
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
            cache.sops_token = tokio::task::spawn_blocking(move || token_in(&checkout, registry))
                .await
                .map_err(|e| AgentError::Source(format!("reading the clone failed: {e}")))??;
        }
    }
    let location = options.source.with_token(cache.sops_token.as_ref());
    let fetched = source::refresh(&location, &options.data_dir).await?;
    if let Some(workspace) = cache.at(fetched.commit) {
        return Ok(Source {
            fetched,
            workspace,
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
    let workspace = tokio::task::spawn_blocking(move || {
        let revision = hex(f.commit);
        Workspace::at_revision(&f.store, Some(&revision), &f.dir, registry, &clusters)
    })
    .await
    .map_err(|e| AgentError::Source(format!("loading failed: {e}")))?
    .map_err(|e| AgentError::Source(e.to_string()))?;
    let workspace = Arc::new(workspace);
    if let source::SourceLocation::Remote { .. } = &options.source {
        let ws = Arc::clone(&workspace);
        cache.sops_token =
            tokio::task::spawn_blocking(move || source::sops_git_token(ws.repo(), ws.dir()))
                .await
                .map_err(|e| AgentError::Source(format!("reading secrets failed: {e}")))??;
    }
    cache.last = Some(Arc::clone(&workspace));
    Ok(Source {
        fetched,
        workspace,
        loaded: true,
    })
}

/// The SOPS git token of the clone at `checkout`, at its checked-out commit (every cluster:
/// the token serves the fetch of the whole repository, whatever the agent reconciles).
fn token_in(
    checkout: &Path,
    registry: Arc<Registry>,
) -> Result<Option<proxops_store::GitToken>, AgentError> {
    let store =
        proxops_store::Store::open(checkout).map_err(|e| AgentError::Source(e.to_string()))?;
    let ws = Workspace::at_revision(&store, Some("HEAD"), checkout, registry, &[])
        .map_err(|e| AgentError::Source(e.to_string()))?;
    source::sops_git_token(ws.repo(), checkout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes([byte; 20])
    }

    /// An empty repository, read as if at `commit`.
    fn empty_at(commit: ObjectId) -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let source = proxops_model::FsSource::new(dir.path()).unwrap();
        let registry = Arc::new(Registry::builtin());
        Workspace::from_source(&source, dir.path(), registry, &[], Some(commit)).unwrap()
    }

    #[test]
    fn the_cache_answers_for_its_own_commit_only() {
        let mut cache = LoadCache::default();
        assert!(cache.at(id(1)).is_none());
        let workspace = Arc::new(empty_at(id(1)));
        cache.last = Some(Arc::clone(&workspace));
        let hit = cache.at(id(1)).expect("the kept commit");
        assert!(
            Arc::ptr_eq(&hit, &workspace),
            "the same load is shared, not a copy"
        );
        assert!(cache.at(id(2)).is_none(), "another commit is not served");
    }
}
