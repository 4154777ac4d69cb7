//! Reading the listed files on several threads, results in a fixed order.

use super::shared::{Loader, Pending};
use crate::diagnostic::{Code, Diagnostic, SourceFile};
use crate::kind::Registry;
use crate::manifest::{LoadedManifest, load_manifest};
use crate::source::{ReadError, RepoSource};
use crate::stack::{self, StackDocument};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What reading one listed file gave: its decoded manifest (if it was to be loaded), or why it
/// could not be read.
/// A Stack or StackTemplate file has no resource of its own: its document comes beside.
pub(super) type Fetched = Result<Option<(LoadedManifest, Option<Arc<StackDocument>>)>, ReadError>;

/// Fewer files than this per thread are not worth a thread.
pub(super) const FILES_PER_THREAD: usize = 16;

/// Reads and, if asked, decodes one listed file.
pub(super) fn fetch(source: &dyn RepoSource, registry: &Registry, pending: &Pending) -> Fetched {
    let bytes = source.read(&pending.target)?;
    if !pending.load {
        return Ok(None);
    }
    let loaded = match String::from_utf8(bytes) {
        Ok(text) => {
            let file = SourceFile::new(pending.target.clone(), text);
            match pending.root_kind {
                Some(kind @ (stack::STACK | stack::STACK_TEMPLATE)) => {
                    let loaded = stack::load_stack_file(&file, kind);
                    let manifest = LoadedManifest {
                        resource: None,
                        diagnostics: loaded.diagnostics,
                    };
                    return Ok(Some((manifest, loaded.document)));
                }
                root_kind => load_manifest(&file, registry, root_kind),
            }
        }
        Err(_) => LoadedManifest {
            resource: None,
            diagnostics: vec![
                Diagnostic::error(Code::YamlSyntax, "the file is not UTF-8 text")
                    .in_file(&pending.target),
            ],
        },
    };
    Ok(Some((loaded, None)))
}

impl Loader<'_> {
    /// [`fetch`]es every file, on up to `self.threads` threads; the results are in the order of
    /// `reads` whatever the threads did.
    pub(super) fn fetch_all(&self, reads: &[&Pending]) -> Vec<Option<Fetched>> {
        let threads = self.threads.min(reads.len() / FILES_PER_THREAD);
        let (source, registry) = (self.source, self.registry);
        in_parallel(reads, threads, |p| fetch(source, registry, p))
    }
}

/// `f` of every item, on up to `threads` threads (the calling thread is one of them); the
/// results are in the order of `items` whatever the threads did. `None` only for an item whose
/// result went missing, which cannot happen: a panic in `f` is a panic of this call, as it would
/// be on one thread.
pub(super) fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<Option<R>> {
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(|item| Some(f(item))).collect();
    }
    // Each thread takes the next item not yet taken, so a slow item does not hold up a whole
    // share; results are put back in order below.
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.min(items.len()))
            .map(|_| scope.spawn(work))
            .collect();
        let mut all = work();
        for helper in helpers {
            match helper.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (i, result) in all {
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(result);
            }
        }
    });
    slots
}
