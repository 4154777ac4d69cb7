//! [`GitSource`]: the source plane read straight out of one exact commit, never the work tree.

use crate::error::{Result, StoreError};
use crate::git;
use crate::id::ObjectId;
use gix::objs::tree::EntryKind;
use proxops_model::source::{DirEntry, ReadError, RepoSource, join_relative};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Symbolic links followed in a row before giving up (a loop).
const MAX_LINK_HOPS: usize = 8;

#[derive(Debug, Clone, Copy)]
enum Entry {
    File(ObjectId),
    Link(ObjectId),
}

/// A [`RepoSource`] over the tree of one commit.
///
/// The tree is listed once when the source is made; files are read from the object database on
/// demand. A symbolic link is followed when it leads to a file inside the tree (as [`FsSource`]
/// does for a checkout) and refused with [`ReadError::Escapes`] otherwise; submodules are not
/// listed.
///
/// [`FsSource`]: proxops_model::FsSource
pub struct GitSource {
    repo: gix::ThreadSafeRepository,
    /// Thread-local handles to reuse: `gix::Repository` is `Send` but not `Sync`.
    pool: Mutex<Vec<gix::Repository>>,
    commit: ObjectId,
    revision: String,
    files: BTreeMap<String, Entry>,
    dirs: BTreeMap<String, Vec<DirEntry>>,
}

impl std::fmt::Debug for GitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitSource")
            .field("commit", &self.commit)
            .field("revision", &self.revision)
            .field("files", &self.files.len())
            .finish()
    }
}

impl GitSource {
    /// The source at `revision` (`None`: `HEAD`) of the repository at or above `path`.
    pub fn open(path: impl AsRef<Path>, revision: Option<&str>) -> Result<GitSource> {
        let path = path.as_ref();
        let repo = gix::discover(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            source: Box::new(e),
        })?;
        GitSource::from_repository(&repo, revision)
    }

    /// The source at `revision` (`None`: `HEAD`) of an open repository.
    pub(crate) fn from_repository(
        repo: &gix::Repository,
        revision: Option<&str>,
    ) -> Result<GitSource> {
        let revision = revision.unwrap_or("HEAD");
        let commit = resolve_commit(repo, revision)?;
        GitSource::at_commit(repo, commit, revision)
    }

    /// The source at an exact commit id.
    pub(crate) fn at_commit(
        repo: &gix::Repository,
        commit: ObjectId,
        revision: &str,
    ) -> Result<GitSource> {
        let info = git::commit_info(repo, commit)?;
        let mut files = BTreeMap::new();
        let mut dirs: BTreeMap<String, Vec<DirEntry>> = BTreeMap::new();
        dirs.insert(String::new(), Vec::new());
        for (path, mode, id) in git::walk_tree(repo, info.tree)? {
            let entry = match mode.kind() {
                EntryKind::Blob | EntryKind::BlobExecutable => Entry::File(id),
                EntryKind::Link => Entry::Link(id),
                // Submodules are not part of this repository's content.
                EntryKind::Commit | EntryKind::Tree => continue,
            };
            // Every ancestor directory gets listed in its parent.
            let mut parent = String::new();
            let segments: Vec<&str> = path.split('/').collect();
            for (i, seg) in segments.iter().enumerate() {
                let is_dir = i + 1 < segments.len();
                let listing = dirs.entry(parent.clone()).or_default();
                if !listing.iter().any(|e| e.name == *seg) {
                    listing.push(DirEntry {
                        name: (*seg).to_owned(),
                        is_dir,
                    });
                }
                if is_dir {
                    if !parent.is_empty() {
                        parent.push('/');
                    }
                    parent.push_str(seg);
                }
            }
            files.insert(path, entry);
        }
        for listing in dirs.values_mut() {
            listing.sort();
        }
        Ok(GitSource {
            repo: repo.clone().into_sync(),
            pool: Mutex::new(vec![repo.clone()]),
            commit,
            revision: revision.to_owned(),
            files,
            dirs,
        })
    }

    /// The exact commit this source reads.
    pub fn commit(&self) -> ObjectId {
        self.commit
    }

    /// The revision as the caller gave it (`HEAD` by default).
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// The blob id of a file (following symbolic links), if it exists.
    pub fn blob_id(&self, path: &str) -> Option<ObjectId> {
        self.resolve(path).ok()
    }

    fn resolve(&self, path: &str) -> Result<ObjectId, ReadError> {
        let mut path = normalise(path).ok_or(ReadError::Escapes)?;
        for _ in 0..MAX_LINK_HOPS {
            match self.files.get(&path) {
                Some(Entry::File(id)) => return Ok(*id),
                Some(Entry::Link(id)) => {
                    let target = self.read_object(*id)?;
                    let target = String::from_utf8(target).map_err(|_| ReadError::Escapes)?;
                    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                    path = join_relative(dir, &target).ok_or(ReadError::Escapes)?;
                }
                None if path.is_empty() || self.dirs.contains_key(&path) => {
                    return Err(ReadError::IsDirectory);
                }
                None => return Err(ReadError::NotFound),
            }
        }
        Err(ReadError::Io(io::Error::other(
            "too many levels of symbolic links",
        )))
    }

    fn read_object(&self, id: ObjectId) -> Result<Vec<u8>, ReadError> {
        let repo = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| self.repo.to_thread_local());
        let bytes = git::read_blob(&repo, id).map_err(|e| ReadError::Io(io::Error::other(e)));
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(repo);
        bytes
    }
}

/// `path` without empty and `.` segments; `None` if it has `..` or is absolute.
fn normalise(path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return None,
            s => out.push(s),
        }
    }
    Some(out.join("/"))
}

/// The commit `revision` names in `repo` (a branch, tag, `HEAD`, a full or short id, ...).
pub(crate) fn resolve_commit(repo: &gix::Repository, revision: &str) -> Result<ObjectId> {
    let err = |reason: String| StoreError::Revision {
        revision: revision.to_owned(),
        reason,
    };
    let id = repo
        .rev_parse_single(revision)
        .map_err(|e| err(e.to_string()))?;
    let object = id.object().map_err(|e| err(e.to_string()))?;
    let commit = object.peel_to_commit().map_err(|e| err(e.to_string()))?;
    Ok(ObjectId::from_gix(commit.id))
}

impl RepoSource for GitSource {
    fn describe(&self) -> String {
        format!("commit {}", self.commit)
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        let id = self.resolve(path)?;
        self.read_object(id)
    }

    fn list(&self, dir: &str) -> io::Result<Vec<DirEntry>> {
        let Some(dir) = normalise(dir) else {
            return Ok(Vec::new());
        };
        Ok(self.dirs.get(&dir).cloned().unwrap_or_default())
    }

    fn is_file(&self, path: &str) -> bool {
        self.resolve(path).is_ok()
    }
}
