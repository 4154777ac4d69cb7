//! Writing the objects of one publication as one pack instead of one loose file each.
//!
//! A publication of many documents (10,000 receipts) used to write 10,000+ loose objects: a
//! zlib stream, a temporary file and a rename each, which is where most of its time went. Now
//! a publication writes into gix's in-memory object store ([`gix::Repository::with_object_memory`]),
//! reading its own objects back from there, and [`flush`] moves what is new to the object
//! database before any ref points at it: as loose objects when they are few (a pack per small
//! publication would pile up packs), as one pack with its index otherwise, both written by
//! gix-pack's writers.

use crate::error::{Result, StoreError, git};
use gix::ObjectId;
use gix::objs::{Exists as _, Write as _};
use std::sync::atomic::AtomicBool;

/// At or above this many new objects, [`flush`] writes a pack.
pub const PACK_THRESHOLD: usize = 64;

/// A handle whose object writes stay in memory until [`flush`].
pub fn batch(repo: &gix::Repository) -> gix::Repository {
    repo.clone().with_object_memory()
}

/// Writes the objects `batch` holds in memory and the object database lacks, then leaves
/// `batch` writing to memory again (empty).
pub fn flush(batch: &mut gix::Repository) -> Result<usize> {
    let Some(memory) = batch.objects.take_object_memory() else {
        return Ok(0);
    };
    // With the memory taken, lookups see only the object database. Most of a publication's
    // objects are new, and each miss on a default handle rescans `objects/pack` (a directory
    // read and a stat per pack): a handle that never rescans costs a lookup instead. It can miss
    // only packs that another process wrote after this store last looked, and then the object
    // is written once more, which git and gix accept (an object in two packs).
    let mut odb = batch.objects.clone();
    odb.refresh_never();
    let mut new: Vec<(&ObjectId, &(gix::objs::Kind, Vec<u8>))> = memory
        .iter()
        .filter(|(id, _)| !(id.is_empty_tree() || odb.exists(id)))
        .collect();
    drop(odb);
    new.sort_by_key(|(id, _)| **id);
    let count = new.len();
    if count >= PACK_THRESHOLD {
        write_pack(batch, &new)?;
    } else {
        for (_, (kind, data)) in &new {
            batch
                .objects
                .write_buf(*kind, data)
                .map_err(|e| StoreError::Invalid(format!("writing an object: {e}")))?;
        }
    }
    batch.objects.enable_object_memory();
    Ok(count)
}

/// A version 2 pack of whole (undeltified) objects and its version 2 index, written into
/// `objects/pack/` by gix-pack: its pack writer encodes the entries, and its bundle writer (the
/// one gix uses for fetched packs) stores the pack and builds the index from it, moving the pack
/// into place before the index (git and gix find packs by their index).
fn write_pack(
    repo: &gix::Repository,
    objects: &[(&ObjectId, &(gix::objs::Kind, Vec<u8>))],
) -> Result<()> {
    use gix_pack::data::output;
    let count = u32::try_from(objects.len())
        .map_err(|_| StoreError::Invalid("too many objects for one pack".to_owned()))?;
    let entries = objects
        .iter()
        .map(|(id, (kind, data))| {
            output::Entry::from_data(
                &output::Count::from_data(**id, None),
                &gix::objs::Data::new(data, *kind, gix::hash::Kind::Sha1),
                gix::zlib::Compression::BEST_SPEED,
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(git)?;
    let capacity = entries
        .iter()
        .map(|e| e.compressed_data.len() + 8)
        .sum::<usize>()
        + 32;
    let mut writer = output::bytes::FromEntriesIter::new(
        std::iter::once(Ok(entries)),
        Vec::with_capacity(capacity),
        count,
        gix_pack::data::Version::V2,
        gix::hash::Kind::Sha1,
    );
    for written in writer.by_ref() {
        written.map_err(git)?;
    }
    let pack = writer.into_write();

    let directory = repo.objects.store_ref().path().join("pack");
    std::fs::create_dir_all(&directory).map_err(StoreError::Io)?;
    let outcome = gix_pack::Bundle::write_to_directory(
        &mut pack.as_slice(),
        Some(&directory),
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        None::<gix::objs::find::Never>,
        gix::hash::Kind::Sha1,
        gix_pack::bundle::write::Options::default(),
    )
    .map_err(git)?;
    // The writer leaves a `.keep` file so that a repack running meanwhile spares the new pack
    // until refs point at it; our callers update their refs right after [`flush`] and never
    // unpack or repack, and a lasting `.keep` would keep `git gc` from ever folding the pack in.
    if let Some(keep) = outcome.keep_path {
        std::fs::remove_file(keep).map_err(StoreError::Io)?;
    }
    Ok(())
}
