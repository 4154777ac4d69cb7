//! What the resource page reads from the git planes on request: the desired document, the
//! receipt and artifacts, and the desired commits that touched the resource. The states, plan
//! and actions come from the status; only these documents are read here.

use super::View;
use proxops_engine::planes::Planes;
use proxops_model::ResourceKey;
use proxops_store::StoreError;
use proxops_store::canonical::to_yaml_of;
use proxops_store::documents::hex;

/// Desired commits looked at for a resource's history (each is a tree walk).
const HISTORY_WALK: usize = 100;
/// Commits that touched it shown at most.
const HISTORY_SHOWN: usize = 20;

/// One resource's documents in the planes.
#[derive(Debug, Default)]
pub(crate) struct Detail {
    /// Its desired document, as YAML; none when the desired plane does not hold it.
    pub desired: Option<String>,
    /// Its receipt, as YAML.
    pub receipt: Option<String>,
    /// Its artifacts: name and document as YAML.
    pub artifacts: Vec<(String, String)>,
    /// Desired commits that changed its document, newest first.
    pub history: Vec<Commit>,
    /// Whether older commits were not looked at.
    pub history_cut: bool,
}

/// A desired commit.
#[derive(Debug)]
pub(crate) struct Commit {
    /// Its id.
    pub id: String,
    /// Committer time (RFC 3339, UTC).
    pub time: String,
    /// The first line of its message.
    pub subject: String,
    /// Whether it removed the document (a deletion intent or a finalised prune).
    pub removed: bool,
}

/// Reads `key`'s documents of `cluster` (blocking: git reads).
pub(crate) fn read(view: &View, cluster: &str, key: &ResourceKey) -> Result<Detail, StoreError> {
    let planes = Planes::from_config(view.store.clone(), view.workspace.repo(), cluster)?;
    let (store, refs) = (&planes.store, &planes.refs);
    let mut detail = Detail::default();
    let desired = store.read_desired(refs, None)?;
    let path = desired
        .as_ref()
        .and_then(|d| d.resources.get(key))
        .map(|entry| {
            detail.desired = to_yaml_of(&entry.doc);
            entry.path.clone()
        });
    if let Some(observed) = store.read_observed(refs, None)? {
        if let Some(r) = observed.receipts.get(key) {
            detail.receipt = to_yaml_of(&r.doc);
        }
        detail.artifacts = observed
            .artifacts
            .iter()
            .filter(|((producer, _), _)| producer == key)
            .filter_map(|((_, name), stored)| Some((name.clone(), to_yaml_of(&stored.doc)?)))
            .collect();
    }
    if let Some(path) = path {
        history(&planes, &path, &mut detail)?;
    }
    Ok(detail)
}

/// The desired commits whose document at `path` differs from their first parent's.
fn history(planes: &Planes, path: &str, detail: &mut Detail) -> Result<(), StoreError> {
    let (store, refs) = (&planes.store, &planes.refs);
    let commits = store.history(&refs.desired)?;
    detail.history_cut = commits.len() > HISTORY_WALK;
    let mut newer: Option<(proxops_store::Plane, Option<proxops_store::ObjectId>)> = None;
    for id in commits.into_iter().take(HISTORY_WALK) {
        let Some(plane) = store.read_plane(&refs.desired, Some(id))? else {
            break;
        };
        let blob = plane.files.get(path).copied();
        if let Some((n, n_blob)) = newer.take()
            && n_blob != blob
        {
            detail.history.push(commit(&n, n_blob.is_none()));
        }
        newer = Some((plane, blob));
        if detail.history.len() >= HISTORY_SHOWN {
            return Ok(());
        }
    }
    // The oldest commit looked at: it introduced the document if the walk reached the root.
    if let Some((n, Some(_))) = newer
        && !detail.history_cut
    {
        detail.history.push(commit(&n, false));
    }
    Ok(())
}

fn commit(plane: &proxops_store::Plane, removed: bool) -> Commit {
    let c = &plane.commit;
    let time = u64::try_from(c.time).unwrap_or(0);
    Commit {
        id: hex(c.id),
        time: proxops_store::documents::utc_timestamp(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(time),
        ),
        subject: c.message.lines().next().unwrap_or_default().to_owned(),
        removed,
    }
}
