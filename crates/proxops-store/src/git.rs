//! Plumbing over gix: refs, flat file maps to and from trees, commits, compare-and-swap updates.
//!
//! Planes are handled as flat maps `path -> blob id`: documents are written as blobs first, then
//! the map becomes nested trees in one pass, so building a commit never needs a work tree or an
//! index, and unchanged documents keep their blob ids.

use crate::error::{Result, StoreError, git};
use crate::id::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::objs::tree::{EntryKind, EntryMode};
use gix::refs::Target;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use std::collections::BTreeMap;

/// A plane's files: repository path -> blob id.
pub type FileMap = BTreeMap<String, ObjectId>;

/// The name and email of commits the store writes.
pub const COMMITTER_NAME: &str = "proxops";
/// See [`COMMITTER_NAME`].
pub const COMMITTER_EMAIL: &str = "proxops@localhost";

/// The commit a full ref name points at, if the ref exists.
pub fn read_ref(repo: &gix::Repository, full_name: &str) -> Result<Option<ObjectId>> {
    let Some(reference) = repo.try_find_reference(full_name).map_err(git)? else {
        return Ok(None);
    };
    match reference.target().try_id() {
        Some(id) => Ok(Some(ObjectId::from_gix(id.to_owned()))),
        None => Err(StoreError::RefName {
            name: full_name.to_owned(),
            reason: "is a symbolic ref".to_owned(),
        }),
    }
}

/// What the store needs of a commit.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    /// The commit id.
    pub id: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Its parents.
    pub parents: Vec<ObjectId>,
    /// Its message.
    pub message: String,
    /// Committer time, seconds since the epoch.
    pub time: i64,
}

/// Reads a commit.
pub fn commit_info(repo: &gix::Repository, id: ObjectId) -> Result<CommitInfo> {
    let commit = repo.find_commit(id.to_gix()).map_err(git)?;
    let decoded = commit.decode().map_err(git)?;
    Ok(CommitInfo {
        id,
        tree: ObjectId::from_gix(decoded.tree()),
        parents: decoded.parents().map(ObjectId::from_gix).collect(),
        message: decoded.message.to_str_lossy().into_owned(),
        time: decoded.committer().map_err(git)?.seconds(),
    })
}

/// Every entry of a tree, recursively, as (path, mode, id); directories are not listed.
pub fn walk_tree(
    repo: &gix::Repository,
    tree: ObjectId,
) -> Result<Vec<(String, EntryMode, ObjectId)>> {
    let tree = repo.find_tree(tree.to_gix()).map_err(git)?;
    let records = tree.traverse().breadthfirst.files().map_err(git)?;
    Ok(records
        .into_iter()
        .filter(|e| !e.mode.is_tree())
        .map(|e| {
            let path = e.filepath.to_str_lossy().into_owned();
            (path, e.mode, ObjectId::from_gix(e.oid))
        })
        .collect())
}

/// The files of a plane tree. Planes hold only regular files; anything else is corruption.
pub fn plane_files(repo: &gix::Repository, tree: ObjectId, plane: &str) -> Result<FileMap> {
    let mut files = FileMap::new();
    for (path, mode, id) in walk_tree(repo, tree)? {
        if !mode.is_blob() {
            return Err(StoreError::Corrupt {
                plane: plane.to_owned(),
                path,
                reason: "is not a regular file".to_owned(),
            });
        }
        files.insert(path, id);
    }
    Ok(files)
}

/// The bytes of a blob.
pub fn read_blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    Ok(repo.find_blob(id.to_gix()).map_err(git)?.take_data())
}

/// Writes bytes as a blob (a no-op for the object database if it exists) and returns its id.
pub fn write_blob(repo: &gix::Repository, bytes: &[u8]) -> Result<ObjectId> {
    Ok(ObjectId::from_gix(
        repo.write_blob(bytes).map_err(git)?.detach(),
    ))
}

enum Node {
    Blob(ObjectId),
    Dir(BTreeMap<String, Node>),
}

/// Writes `files` as nested trees and returns the root tree id. Paths are `/`-separated and
/// relative; a path that is also a directory of another path is an error.
pub fn write_tree(repo: &gix::Repository, files: &FileMap) -> Result<ObjectId> {
    let mut root = BTreeMap::new();
    for (path, id) in files {
        let mut dir = &mut root;
        let mut segments = path.split('/').peekable();
        while let Some(seg) = segments.next() {
            if seg.is_empty() || seg == "." || seg == ".." || seg == ".git" {
                return Err(StoreError::Invalid(format!(
                    "invalid path `{path}` in a plane"
                )));
            }
            if segments.peek().is_none() {
                if dir.insert(seg.to_owned(), Node::Blob(*id)).is_some() {
                    return Err(StoreError::Invalid(format!(
                        "`{path}` is a file and a directory"
                    )));
                }
            } else {
                let entry = dir
                    .entry(seg.to_owned())
                    .or_insert_with(|| Node::Dir(BTreeMap::new()));
                dir = match entry {
                    Node::Dir(d) => d,
                    Node::Blob(_) => {
                        return Err(StoreError::Invalid(format!(
                            "`{path}` is a file and a directory"
                        )));
                    }
                };
            }
        }
    }
    write_dir(repo, &root)
}

fn write_dir(repo: &gix::Repository, dir: &BTreeMap<String, Node>) -> Result<ObjectId> {
    let mut entries = Vec::with_capacity(dir.len());
    for (name, node) in dir {
        let (mode, oid) = match node {
            Node::Blob(id) => (EntryKind::Blob.into(), id.to_gix()),
            Node::Dir(d) => (EntryKind::Tree.into(), write_dir(repo, d)?.to_gix()),
        };
        entries.push(gix::objs::tree::Entry {
            mode,
            filename: BString::from(name.as_str()),
            oid,
        });
    }
    // Git orders a directory as if its name ended in `/`; the entries' `Ord` does exactly that.
    entries.sort();
    let id = repo
        .write_object(&gix::objs::Tree { entries })
        .map_err(git)?;
    Ok(ObjectId::from_gix(id.detach()))
}

/// Writes a commit (without moving any ref) by the store's committer, now, in UTC.
pub fn write_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId> {
    let signature = gix::actor::Signature {
        name: COMMITTER_NAME.into(),
        email: COMMITTER_EMAIL.into(),
        time: gix::date::Time::now_utc(),
    };
    let commit = gix::objs::Commit {
        tree: tree.to_gix(),
        parents: parent.into_iter().map(ObjectId::to_gix).collect(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(ObjectId::from_gix(
        repo.write_object(&commit).map_err(git)?.detach(),
    ))
}

/// Moves `full_name` to `new` if and only if it is still at `expected` (`None`: must not exist),
/// under git's ref lock. A lost race is [`StoreError::Conflict`].
pub fn compare_and_swap(
    repo: &gix::Repository,
    full_name: &str,
    expected: Option<ObjectId>,
    new: ObjectId,
    log_message: &str,
) -> Result<()> {
    let name = ref_name(full_name)?;
    let expected_value = match expected {
        Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id.to_gix())),
        None => PreviousValue::MustNotExist,
    };
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: log_message.lines().next().unwrap_or_default().into(),
            },
            expected: expected_value,
            new: Target::Object(new.to_gix()),
        },
        name,
        deref: false,
    };
    let signature = gix::actor::Signature {
        name: COMMITTER_NAME.into(),
        email: COMMITTER_EMAIL.into(),
        time: gix::date::Time::now_utc(),
    };
    let mut time_buf = gix::date::parse::TimeBuf::default();
    match repo.edit_references_as(Some(edit), Some(signature.to_ref(&mut time_buf))) {
        Ok(_) => Ok(()),
        Err(e) => {
            // The transaction's error does not say which precondition failed: look again.
            let actual = read_ref(repo, full_name)?;
            if actual == expected {
                Err(StoreError::RefUpdate {
                    name: full_name.to_owned(),
                    source: Box::new(e),
                })
            } else {
                Err(StoreError::Conflict {
                    name: full_name.to_owned(),
                    expected,
                    actual,
                })
            }
        }
    }
}

/// Moves `full_name` to `new` whatever it pointed at (the local mirror of a remote branch).
pub fn force_ref(
    repo: &gix::Repository,
    full_name: &str,
    new: ObjectId,
    log_message: &str,
) -> Result<()> {
    repo.reference(full_name, new.to_gix(), PreviousValue::Any, log_message)
        .map_err(|e| StoreError::RefUpdate {
            name: full_name.to_owned(),
            source: Box::new(e),
        })?;
    Ok(())
}

/// Whether `ancestor` is `descendant` or one of its ancestors.
pub fn is_ancestor(
    repo: &gix::Repository,
    ancestor: ObjectId,
    descendant: ObjectId,
) -> Result<bool> {
    if ancestor == descendant {
        return Ok(true);
    }
    let base = repo
        .merge_base(ancestor.to_gix(), descendant.to_gix())
        .map_err(git)?;
    Ok(base.is_some_and(|b| ObjectId::from_gix(b.detach()) == ancestor))
}

/// Commits reachable from `head`, newest first (first parents and merges alike).
pub fn history(repo: &gix::Repository, head: ObjectId) -> Result<Vec<ObjectId>> {
    let walk = repo.rev_walk([head.to_gix()]).all().map_err(git)?;
    let mut out = Vec::new();
    for info in walk {
        out.push(ObjectId::from_gix(info.map_err(git)?.id));
    }
    Ok(out)
}

/// `full_name` as a ref name git accepts.
pub fn ref_name(full_name: &str) -> Result<gix::refs::FullName> {
    full_name.try_into().map_err(
        |e: gix::validate::reference::name::Error| StoreError::RefName {
            name: full_name.to_owned(),
            reason: e.to_string(),
        },
    )
}

/// Deletes `full_name` if it still points at `expected`, or whatever it points at (`None`: a
/// local mirror of a remote ref; a missing ref is then no error). A ref that moved is
/// [`StoreError::Conflict`].
pub fn delete_ref(
    repo: &gix::Repository,
    full_name: &str,
    expected: Option<ObjectId>,
) -> Result<()> {
    if expected.is_none() && read_ref(repo, full_name)?.is_none() {
        return Ok(());
    }
    let edit = RefEdit {
        change: Change::Delete {
            expected: match expected {
                Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id.to_gix())),
                None => PreviousValue::Any,
            },
            log: RefLog::AndReference,
        },
        name: ref_name(full_name)?,
        deref: false,
    };
    match repo.edit_references(Some(edit)) {
        Ok(_) => Ok(()),
        Err(e) => {
            let actual = read_ref(repo, full_name)?;
            if expected.is_none() || actual == expected {
                Err(StoreError::RefUpdate {
                    name: full_name.to_owned(),
                    source: Box::new(e),
                })
            } else {
                Err(StoreError::Conflict {
                    name: full_name.to_owned(),
                    expected,
                    actual,
                })
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh bare repository (git CLI) and a gix handle on it.
    pub(crate) fn bare_repo() -> (tempfile::TempDir, gix::Repository) {
        let dir = tempfile::tempdir().unwrap();
        let ran = std::process::Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(ran.success());
        let repo = gix::open(dir.path()).unwrap();
        (dir, repo)
    }

    /// A commit of one file `name` holding `text`, on `parent`; (commit, tree).
    pub(crate) fn commit_file(
        repo: &gix::Repository,
        parent: Option<ObjectId>,
        name: &str,
        text: &str,
    ) -> (ObjectId, ObjectId) {
        let blob = write_blob(repo, text.as_bytes()).unwrap();
        let tree = write_tree(repo, &FileMap::from([(name.to_owned(), blob)])).unwrap();
        (write_commit(repo, tree, parent, text).unwrap(), tree)
    }

    #[test]
    fn compare_and_swap_refuses_a_moved_ref_and_leaves_it_alone() {
        let (_dir, repo) = bare_repo();
        let name = "refs/heads/proxops/desired/home";
        let (head, tree) = commit_file(&repo, None, "a.yaml", "a: 1\n");
        compare_and_swap(&repo, name, None, head, "first").unwrap();
        let sibling = write_commit(&repo, tree, Some(head), "sibling\n").unwrap();
        let other = commit_file(&repo, None, "b.yaml", "b: 1\n").0;
        // Expected absent, but it exists.
        let err = compare_and_swap(&repo, name, None, sibling, "x").unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { actual: Some(a), .. } if a == head),
            "{err}"
        );
        // Expected another value.
        let err = compare_and_swap(&repo, name, Some(other), sibling, "x").unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert_eq!(read_ref(&repo, name).unwrap(), Some(head));
        // The right expectation moves it.
        compare_and_swap(&repo, name, Some(head), sibling, "x").unwrap();
        assert_eq!(read_ref(&repo, name).unwrap(), Some(sibling));
        assert_eq!(commit_info(&repo, sibling).unwrap().parents, vec![head]);
        assert_eq!(history(&repo, sibling).unwrap(), vec![sibling, head]);
        assert!(is_ancestor(&repo, head, sibling).unwrap());
        assert!(!is_ancestor(&repo, sibling, head).unwrap());
    }
}
