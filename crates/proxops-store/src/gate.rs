//! Change gates: how a new desired tree is published.
//!
//! - `none`: a commit on the live desired head, moved there by compare-and-swap.
//! - `pullRequest`: a candidate branch `proxops/candidates/<cluster>/<id>` holding exactly one
//!   commit whose only parent is the live desired head; the live ref does not move (a forge
//!   merge fast-forwards it) and only the live ref is ever reconciled. `<id>` is the first 12
//!   hex digits of a SHA-256 over the cluster, the live head and the candidate tree, so
//!   publishing the same content on the same head again finds its candidate and writes nothing;
//!   a candidate ref holding anything else is refused, never overwritten.
//!
//! A gated publication needs a live head to propose against: the very first publication of a
//! cluster (no desired ref yet) initialises the live ref directly, gate or not.
//!
//! Every publication flushes its new objects before any ref moves.

use crate::desired::plane::Publication;
use crate::documents::hex;
use crate::error::{Result, StoreError};
use crate::git;
use crate::id::ObjectId;
use crate::refs::{ChangeGate, PlaneRefs};
use crate::store::Store;
use sha2::{Digest, Sha256};

/// A candidate branch proposing a desired change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its full ref name.
    pub refname: String,
    /// Its one commit.
    pub commit: ObjectId,
    /// Whether this publication created it (`false`: it existed with the same content).
    pub created: bool,
}

/// The candidate id of `tree` proposed on `head` for `cluster`.
pub fn candidate_id(cluster: &str, head: ObjectId, tree: ObjectId) -> String {
    let mut h = Sha256::new();
    for part in ["proxops/candidate/v1", cluster, &hex(head), &hex(tree)] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..6])
}

/// Publishes `tree` on the live desired head `head` (whose tree is `head_tree`) through the
/// gate of `refs`: nothing when the trees are equal, else a commit on the live ref or a
/// candidate (see the module docs).
pub(crate) fn publish(
    store: &Store,
    repo: &mut gix::Repository,
    refs: &PlaneRefs,
    head: Option<ObjectId>,
    head_tree: Option<ObjectId>,
    tree: ObjectId,
    message: &str,
) -> Result<(Publication, Option<Candidate>)> {
    let unchanged = Publication {
        refname: refs.desired.clone(),
        previous: head,
        head: head.unwrap_or(ObjectId::NULL),
        published: false,
    };
    if let Some(h) = head
        && head_tree == Some(tree)
    {
        return Ok((
            Publication {
                head: h,
                ..unchanged
            },
            None,
        ));
    }
    match (refs.gate, head) {
        (ChangeGate::PullRequest, Some(live)) => {
            let refname = refs.candidate(&candidate_id(&refs.cluster, live, tree));
            if let Some(existing) = store.current_head(repo, &refname)? {
                let info = git::commit_info(repo, existing)?;
                if info.parents == [live] && info.tree == tree {
                    let candidate = Candidate {
                        refname,
                        commit: existing,
                        created: false,
                    };
                    return Ok((unchanged, Some(candidate)));
                }
                return Err(StoreError::Invalid(format!(
                    "candidate ref {refname} is occupied by a different proposal"
                )));
            }
            let commit = git::write_commit(repo, tree, Some(live), message)?;
            crate::pack::flush(repo)?;
            let commit = store.move_ref(repo, &refname, None, (commit, tree), message)?;
            let candidate = Candidate {
                refname,
                commit,
                created: true,
            };
            Ok((unchanged, Some(candidate)))
        }
        _ => {
            let commit = git::write_commit(repo, tree, head, message)?;
            crate::pack::flush(repo)?;
            let new = store.move_ref(repo, &refs.desired, head, (commit, tree), message)?;
            Ok((
                Publication {
                    refname: refs.desired.clone(),
                    previous: head,
                    head: new,
                    published: true,
                },
                None,
            ))
        }
    }
}
