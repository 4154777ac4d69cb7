//! Where the loader reads a repository from: a directory on disk ([`FsSource`]) or anything else
//! that implements [`RepoSource`] (the store reads files straight out of a git commit).

use std::io;
use std::path::{Path, PathBuf};

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// There is no such file.
    #[error("no such file")]
    NotFound,
    /// The path is a directory.
    #[error("is a directory")]
    IsDirectory,
    /// The path leads outside the repository (through a symbolic link).
    #[error("resolves outside the repository")]
    Escapes,
    /// Any other I/O failure.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// Whether it is a directory.
    pub is_dir: bool,
}

/// Read access to a repository's files by repository-relative path (`/`-separated, no `..`).
pub trait RepoSource: Send + Sync {
    /// A human-readable description (a directory path, or `commit abc123`).
    fn describe(&self) -> String;
    /// The contents of a file.
    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError>;
    /// The entries of a directory, sorted by name; empty if it does not exist.
    fn list(&self, dir: &str) -> io::Result<Vec<DirEntry>>;
    /// Whether a file exists.
    fn is_file(&self, path: &str) -> bool {
        self.read(path).is_ok()
    }
}

/// A repository in a directory of the file system.
#[derive(Debug, Clone)]
pub struct FsSource {
    root: PathBuf,
    canonical_root: PathBuf,
}

impl FsSource {
    /// A source rooted at `root`, which must be a readable directory.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<FsSource> {
        let root = root.into();
        let canonical_root = root.canonicalize()?;
        if !canonical_root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(FsSource {
            root,
            canonical_root,
        })
    }

    /// The root directory as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let mut p = self.canonical_root.clone();
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            p.push(seg);
        }
        p
    }
}

impl RepoSource for FsSource {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        let full = self.resolve(path);
        let real = match full.canonicalize() {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::NotFound),
            Err(e) => return Err(ReadError::Io(e)),
        };
        // A symbolic link may point anywhere; only files inside the repository count.
        if !real.starts_with(&self.canonical_root) {
            return Err(ReadError::Escapes);
        }
        if real.is_dir() {
            return Err(ReadError::IsDirectory);
        }
        Ok(std::fs::read(real)?)
    }

    fn list(&self, dir: &str) -> io::Result<Vec<DirEntry>> {
        let full = self.resolve(dir);
        let entries = match std::fs::read_dir(&full) {
            Ok(e) => e,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // The type from the directory listing itself; follow symbolic links, as reading does.
            let is_dir = match entry.file_type() {
                Ok(t) if t.is_symlink() => {
                    std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir())
                }
                Ok(t) => t.is_dir(),
                Err(_) => false,
            };
            out.push(DirEntry { name, is_dir });
        }
        out.sort();
        Ok(out)
    }
}

/// Joins `rel` onto the directory `base` lexically (both repository-relative), resolving `.` and
/// `..`; `None` if the result would leave the repository or `rel` is absolute.
pub fn join_relative(base: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/')
        || rel.starts_with('\\')
        || rel.contains('\\')
        || rel.get(1..2) == Some(":")
    {
        return None;
    }
    let mut parts: Vec<&str> = base.split('/').filter(|s| !s.is_empty()).collect();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins() {
        assert_eq!(
            join_relative("clusters/a", "../../vm/a/x.yaml").as_deref(),
            Some("vm/a/x.yaml")
        );
        assert_eq!(
            join_relative("clusters/a", "./../../vm//x.yaml").as_deref(),
            Some("vm/x.yaml")
        );
        assert_eq!(join_relative("clusters/a", "../../../etc/passwd"), None);
        assert_eq!(join_relative("clusters/a", "/etc/passwd"), None);
        assert_eq!(join_relative("clusters/a", "C:/x.yaml"), None);
    }
}
