//! [`Store`]: one repository holding the source plane and the planes of every cluster.

use crate::canonical::parse_yaml;
use crate::error::{Result, StoreError};
use crate::git::{self, CommitInfo, FileMap};
use crate::id::ObjectId;
use crate::remote::Remote;
use crate::source::{GitSource, resolve_commit};
use serde_json::Value;
use std::path::Path;

/// A repository with planes. Cheap to share between threads (`Sync`); every operation works on
/// its own thread-local handle.
#[derive(Clone)]
pub struct Store {
    repo: gix::ThreadSafeRepository,
    remote: Option<Remote>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("git_dir", &self.repo.git_dir())
            .field("remote", &self.remote)
            .finish()
    }
}

impl Store {
    /// The repository at or above `path` (a work tree or a bare repository).
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let repo = gix::discover(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            source: Box::new(e),
        })?;
        Ok(Store {
            repo: repo.into_sync(),
            remote: None,
        })
    }

    /// The same repository publishing to the git remote `name` (e.g. `origin`): heads are read
    /// from the remote and publications pushed to it (see [`crate::remote`]).
    pub fn with_remote(mut self, name: &str) -> Store {
        self.remote = Some(Remote::new(name));
        self
    }

    /// The same repository with a remote whose git calls may each take at most `timeout`.
    pub fn with_remote_timeout(mut self, name: &str, timeout: std::time::Duration) -> Store {
        let token = self.remote.take().and_then(|r| r.token);
        let mut remote = Remote::new(name);
        remote.timeout = timeout;
        remote.token = token;
        self.remote = Some(remote);
        self
    }

    /// The same repository presenting `token` to its remote (set one first with
    /// [`Store::with_remote`]) when it asks for HTTPS authentication.
    pub fn with_remote_token(mut self, token: Option<crate::remote::GitToken>) -> Store {
        if let Some(remote) = &mut self.remote {
            remote.token = token;
        }
        self
    }

    /// The remote publications go to, if any.
    pub fn remote(&self) -> Option<&Remote> {
        self.remote.as_ref()
    }

    /// Where `full_ref` points now: the local ref, or with a remote the remote's (mirrored
    /// locally first).
    pub(crate) fn current_head(
        &self,
        repo: &gix::Repository,
        full_ref: &str,
    ) -> Result<Option<ObjectId>> {
        match &self.remote {
            Some(remote) => crate::remote::sync(repo, remote, full_ref),
            None => git::read_ref(repo, full_ref),
        }
    }

    /// Moves `full_ref` from `expected` (`None`: must not exist) to the commit `new` of tree
    /// `tree` by compare-and-swap, locally or on the remote; returns the new head.
    pub(crate) fn move_ref(
        &self,
        repo: &gix::Repository,
        full_ref: &str,
        expected: Option<ObjectId>,
        (new, tree): (ObjectId, ObjectId),
        message: &str,
    ) -> Result<ObjectId> {
        match &self.remote {
            Some(remote) => crate::remote::push(repo, remote, full_ref, expected, new, tree),
            None => git::compare_and_swap(repo, full_ref, expected, new, message).map(|()| new),
        }
    }

    /// A thread-local handle on the repository.
    pub(crate) fn repo(&self) -> gix::Repository {
        self.repo.to_thread_local()
    }

    /// The git directory.
    pub fn git_dir(&self) -> &Path {
        self.repo.git_dir()
    }

    /// The source plane at `revision` (`None`: `HEAD`).
    pub fn source(&self, revision: Option<&str>) -> Result<GitSource> {
        GitSource::from_repository(&self.repo(), revision)
    }

    /// The commit `revision` names.
    pub fn resolve(&self, revision: &str) -> Result<ObjectId> {
        resolve_commit(&self.repo(), revision)
    }

    /// Where a full ref name points, if it exists.
    pub fn head(&self, full_ref: &str) -> Result<Option<ObjectId>> {
        self.current_head(&self.repo(), full_ref)
    }

    /// The plane on `full_ref` at its head (`at: None`) or at a commit of its history; `None`
    /// when the ref does not exist and no commit is given.
    pub fn read_plane(&self, full_ref: &str, at: Option<ObjectId>) -> Result<Option<Plane>> {
        let repo = self.repo();
        let commit = match at {
            Some(id) => id,
            None => match self.current_head(&repo, full_ref)? {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        Plane::read(&repo, full_ref, commit).map(Some)
    }

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    pub fn is_ancestor(&self, ancestor: ObjectId, descendant: ObjectId) -> Result<bool> {
        git::is_ancestor(&self.repo(), ancestor, descendant)
    }

    /// The resource document stored as blob `blob` (a desired document a receipt pins).
    pub fn read_resource_doc(&self, blob: ObjectId) -> Result<crate::documents::ResourceDoc> {
        read_resource_doc_in(&self.repo(), blob)
    }

    /// The local branches whose names start with `prefix` (`proxops/desired/`), as short names
    /// in name order.
    pub fn branches_under(&self, prefix: &str) -> Result<Vec<String>> {
        let repo = self.repo();
        let full = format!("refs/heads/{prefix}");
        let failed = |e: String| StoreError::Invalid(format!("cannot list {full}*: {e}"));
        let platform = repo.references().map_err(|e| failed(e.to_string()))?;
        let iter = platform
            .prefixed(full.as_str())
            .map_err(|e| failed(e.to_string()))?;
        let mut names: Vec<String> = iter
            .filter_map(Result::ok)
            .filter_map(|r| {
                r.name()
                    .as_bstr()
                    .to_string()
                    .strip_prefix("refs/heads/")
                    .map(str::to_owned)
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// The commits of `full_ref`, newest first (empty if the ref does not exist).
    pub fn history(&self, full_ref: &str) -> Result<Vec<ObjectId>> {
        let repo = self.repo();
        match self.current_head(&repo, full_ref)? {
            Some(head) => git::history(&repo, head),
            None => Ok(Vec::new()),
        }
    }
}

/// One commit of a plane: its files by path, read lazily.
#[derive(Debug, Clone)]
pub struct Plane {
    /// The ref it was read from.
    pub refname: String,
    /// The commit.
    pub commit: CommitInfo,
    /// Its files.
    pub files: FileMap,
}

impl Plane {
    /// Reads the plane at `commit`.
    pub(crate) fn read(repo: &gix::Repository, refname: &str, commit: ObjectId) -> Result<Plane> {
        let commit = git::commit_info(repo, commit)?;
        let files = git::plane_files(repo, commit.tree, refname)?;
        Ok(Plane {
            refname: refname.to_owned(),
            commit,
            files,
        })
    }

    /// The document at `path`, parsed; `None` if there is no such file.
    pub(crate) fn document(&self, repo: &gix::Repository, path: &str) -> Result<Option<Value>> {
        let Some(id) = self.files.get(path) else {
            return Ok(None);
        };
        self.parse(repo, path, *id).map(Some)
    }

    /// Parses the blob `id` stored at `path`.
    pub(crate) fn parse(&self, repo: &gix::Repository, path: &str, id: ObjectId) -> Result<Value> {
        let bytes = git::read_blob(repo, id)?;
        let corrupt = |reason: String| StoreError::Corrupt {
            plane: self.refname.clone(),
            path: path.to_owned(),
            reason,
        };
        let text = String::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".to_owned()))?;
        parse_yaml(&text).map_err(corrupt)
    }

    /// The files under `dir/` (a prefix ending without `/`).
    pub fn under<'a>(&'a self, dir: &str) -> impl Iterator<Item = (&'a String, &'a ObjectId)> {
        let prefix = format!("{dir}/");
        self.files
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
    }
}

/// A desired resource document by blob id, read from `repo`.
pub(crate) fn read_resource_doc_in(
    repo: &gix::Repository,
    blob: ObjectId,
) -> Result<crate::documents::ResourceDoc> {
    let corrupt = |reason: String| StoreError::Corrupt {
        plane: "desired".to_owned(),
        path: format!("blob {blob}"),
        reason,
    };
    let bytes = git::read_blob(repo, blob)?;
    let text = String::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".to_owned()))?;
    let value = parse_yaml(&text).map_err(corrupt)?;
    crate::documents::from_value(value, "desired", &format!("blob {blob}"))
}
