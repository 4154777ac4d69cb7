//! Where the loader reads a repository from: a directory on disk ([`FsSource`]) or anything else
//! that implements [`RepoSource`] (the store reads files straight out of a git commit).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The path is a FIFO, socket or device, which is never opened for reading (a FIFO would
    /// block the reader until someone writes to it).
    #[error("is a {0}, not a regular file")]
    NotRegular(&'static str),
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
    /// Called by the loader before it starts reading, once per load: a source that remembers
    /// anything about the files (such as resolved directories) forgets it here, so that every load
    /// sees the files as they are.
    fn start_load(&self) {}
    /// Whether a file exists.
    fn is_file(&self, path: &str) -> bool {
        self.read(path).is_ok()
    }
}

/// A repository in a directory of the file system.
///
/// Reads never leave the repository: a path whose directories or file resolve, through symbolic
/// links, to somewhere outside the (canonical) root is refused with [`ReadError::Escapes`].
/// Directories are resolved and listed once, then remembered (most manifests share a handful of
/// directories): a file the listing showed as a regular file is read straight away, anything else
/// (a symbolic link, a file created since) is checked with `lstat` first. [`RepoSource::start_load`]
/// (called by the loader at the start of every load) forgets the remembered directories, so a
/// source kept across loads of a changing checkout never trusts what it saw before the current
/// load.
#[derive(Debug)]
pub struct FsSource {
    root: PathBuf,
    canonical_root: PathBuf,
    /// Repository-relative directory -> what was found out about it.
    dirs: Mutex<HashMap<String, Arc<DirInfo>>>,
}

/// A directory of the repository as first seen during the current load.
#[derive(Debug)]
struct DirInfo {
    /// Its canonical path, checked to be inside the repository.
    real: PathBuf,
    /// The names its listing showed as regular files (not symbolic links).
    files: HashSet<Box<str>>,
}

impl DirInfo {
    fn new(real: PathBuf) -> DirInfo {
        let mut files = HashSet::new();
        // Without a listing every read is checked with `lstat`, which is only slower.
        if let Ok(entries) = std::fs::read_dir(&real) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_file())
                    && let Ok(name) = entry.file_name().into_string()
                {
                    files.insert(name.into_boxed_str());
                }
            }
        }
        DirInfo { real, files }
    }
}

impl Clone for FsSource {
    fn clone(&self) -> Self {
        FsSource {
            root: self.root.clone(),
            canonical_root: self.canonical_root.clone(),
            dirs: Mutex::new(HashMap::new()),
        }
    }
}

/// What a file that is neither regular nor a directory is, in words; `None` for those two (and
/// a symbolic link, which the caller resolves).
fn special_kind(t: &std::fs::FileType) -> Option<&'static str> {
    if t.is_file() || t.is_dir() || t.is_symlink() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("FIFO (named pipe)");
        }
        if t.is_socket() {
            return Some("socket");
        }
        if t.is_block_device() || t.is_char_device() {
            return Some("device file");
        }
    }
    Some("special file")
}

/// Reads a file that was a regular file when it was looked at. It may have been swapped for a
/// FIFO since: opening does not block (`O_NONBLOCK`), and the opened file's own type decides.
fn read_regular(path: &Path) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut file = match options.open(path) {
        Ok(f) => f,
        // Through a symbolic link to a directory.
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => return Err(ReadError::IsDirectory),
        Err(e) => return Err(read_error(e)),
    };
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ReadError::IsDirectory);
    }
    if let Some(kind) = special_kind(&meta.file_type()) {
        return Err(ReadError::NotRegular(kind));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    match file.read_to_end(&mut bytes) {
        Ok(_) => Ok(bytes),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => Err(ReadError::IsDirectory),
        Err(e) => Err(read_error(e)),
    }
}

/// A canonicalization failure as a read error.
fn read_error(e: io::Error) -> ReadError {
    if e.kind() == io::ErrorKind::NotFound {
        ReadError::NotFound
    } else {
        ReadError::Io(e)
    }
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
            dirs: Mutex::new(HashMap::new()),
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

    /// The repository directory `dir` (segments joined by `/`, no empty ones), which must lie
    /// inside the repository.
    fn dir_info(&self, dir: &str) -> Result<Arc<DirInfo>, ReadError> {
        // A poisoned lock only means another reader panicked; the map itself is still sound.
        let cached = self
            .dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(dir)
            .cloned();
        if let Some(info) = cached {
            return Ok(info);
        }
        let real = self.resolve(dir).canonicalize().map_err(read_error)?;
        // A symbolic link may point anywhere; only directories inside the repository count.
        if !real.starts_with(&self.canonical_root) {
            return Err(ReadError::Escapes);
        }
        let info = Arc::new(DirInfo::new(real));
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_owned(), Arc::clone(&info));
        Ok(info)
    }
}

impl RepoSource for FsSource {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn start_load(&self) {
        self.dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        // The directory part with empty segments dropped (`a//b/` is `a/b`), and the file name.
        let (dir, name) = if path.starts_with('/') || path.ends_with('/') || path.contains("//") {
            let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            let Some((name, dirs)) = segments.split_last() else {
                return Err(ReadError::IsDirectory);
            };
            (Cow::Owned(dirs.join("/")), *name)
        } else {
            match path.rsplit_once('/') {
                Some((dir, name)) => (Cow::Borrowed(dir), name),
                None if path.is_empty() => return Err(ReadError::IsDirectory),
                None => (Cow::Borrowed(""), path),
            }
        };
        let dir = self.dir_info(&dir)?;
        let mut full = dir.real.join(name);
        if !dir.files.contains(name) {
            let mut meta = std::fs::symlink_metadata(&full).map_err(read_error)?;
            if meta.file_type().is_symlink() {
                // The file itself is a link: resolve it and check where it leads.
                let real = full.canonicalize().map_err(read_error)?;
                if !real.starts_with(&self.canonical_root) {
                    return Err(ReadError::Escapes);
                }
                meta = std::fs::metadata(&real).map_err(read_error)?;
                full = real;
            }
            if meta.is_dir() {
                return Err(ReadError::IsDirectory);
            }
            if let Some(kind) = special_kind(&meta.file_type()) {
                return Err(ReadError::NotRegular(kind));
            }
        }
        read_regular(&full)
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

    #[cfg(unix)]
    #[test]
    fn reads_stay_inside_the_repository() {
        use std::os::unix::fs::symlink;
        let (Ok(repo), Ok(outside)) = (tempfile::tempdir(), tempfile::tempdir()) else {
            return;
        };
        let root = repo.path();
        let write = |p: &Path, text: &str| {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir).ok();
            }
            std::fs::write(p, text).ok();
        };
        write(&root.join("vm/a/x.yaml"), "inside");
        write(&outside.path().join("d/y.yaml"), "outside");
        write(&outside.path().join("z.yaml"), "outside");
        let links = [
            (outside.path().join("d"), root.join("vm/out")),
            (outside.path().join("z.yaml"), root.join("vm/a/z.yaml")),
            (root.join("vm/a"), root.join("vm/in")),
            (root.join("vm/a/x.yaml"), root.join("vm/a/link.yaml")),
        ];
        for (target, link) in &links {
            assert!(symlink(target, link).is_ok());
        }
        let Ok(source) = FsSource::new(root) else {
            panic!("source");
        };
        let text = |p: &str| {
            source
                .read(p)
                .map(|b: Vec<u8>| String::from_utf8_lossy(&b).into_owned())
        };
        for _ in 0..2 {
            // Twice: the second time, directories come from the cache.
            assert_eq!(text("vm/a/x.yaml").ok().as_deref(), Some("inside"));
            assert_eq!(text("vm/in/x.yaml").ok().as_deref(), Some("inside"));
            assert_eq!(text("vm/a/link.yaml").ok().as_deref(), Some("inside"));
            assert!(matches!(
                source.read("vm/out/y.yaml"),
                Err(ReadError::Escapes)
            ));
            assert!(matches!(
                source.read("vm/a/z.yaml"),
                Err(ReadError::Escapes)
            ));
            assert!(matches!(
                source.read("vm/a/none.yaml"),
                Err(ReadError::NotFound)
            ));
            assert!(matches!(
                source.read("vm/none/x.yaml"),
                Err(ReadError::NotFound)
            ));
            assert!(matches!(source.read("vm/a"), Err(ReadError::IsDirectory)));
            assert!(matches!(source.read("vm/in"), Err(ReadError::IsDirectory)));
            assert!(matches!(source.read(""), Err(ReadError::IsDirectory)));
            assert!(matches!(source.read("/"), Err(ReadError::IsDirectory)));
            assert_eq!(text("/vm//a/x.yaml").ok().as_deref(), Some("inside"));
            assert_eq!(text("vm/a/x.yaml/").ok().as_deref(), Some("inside"));
            assert!(matches!(
                source.read("vm/a/x.yaml/y"),
                Err(ReadError::Io(_))
            ));
        }
        // A file swapped for a link between loads is seen after `start_load`.
        assert!(std::fs::remove_file(root.join("vm/a/x.yaml")).is_ok());
        assert!(symlink(outside.path().join("z.yaml"), root.join("vm/a/x.yaml")).is_ok());
        source.start_load();
        assert!(matches!(
            source.read("vm/a/x.yaml"),
            Err(ReadError::Escapes)
        ));
        // A file created since the directory was listed is checked too.
        assert!(symlink(outside.path().join("z.yaml"), root.join("vm/a/new.yaml")).is_ok());
        assert!(matches!(
            source.read("vm/a/new.yaml"),
            Err(ReadError::Escapes)
        ));
        // A directory swapped for a link between loads is seen after `start_load`.
        assert!(std::fs::rename(root.join("vm/a"), root.join("vm/b")).is_ok());
        assert!(symlink(outside.path(), root.join("vm/a")).is_ok());
        write(&outside.path().join("x.yaml"), "outside");
        source.start_load();
        assert!(matches!(
            source.read("vm/a/x.yaml"),
            Err(ReadError::Escapes)
        ));
    }
}
