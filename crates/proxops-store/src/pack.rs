//! Writing the objects of one publication as one pack instead of one loose file each.
//!
//! A publication of many documents (10,000 receipts) used to write 10,000+ loose objects: a
//! zlib stream, a temporary file and a rename each, which is where most of its time went. Now
//! a publication writes into gix's in-memory object store ([`gix::Repository::with_object_memory`]),
//! reading its own objects back from there, and [`flush`] moves what is new to the object
//! database before any ref points at it: as loose objects when they are few (a pack per small
//! publication would pile up packs), as one pack with its index otherwise.

use crate::error::{Result, StoreError};
use gix::ObjectId;
use gix::objs::Write as _;
use std::io::Write as _;

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
    // With the memory taken, lookups see only the object database.
    let mut new: Vec<(&ObjectId, &(gix::objs::Kind, Vec<u8>))> = memory
        .iter()
        .filter(|(id, _)| !batch.has_object(*id))
        .collect();
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

fn type_code(kind: gix::objs::Kind) -> u8 {
    match kind {
        gix::objs::Kind::Commit => 1,
        gix::objs::Kind::Tree => 2,
        gix::objs::Kind::Blob => 3,
        gix::objs::Kind::Tag => 4,
    }
}

/// A version 2 pack of whole (undeltified) objects and its version 2 index, written into
/// `objects/pack/` (pack first, index last: git and gix find packs by their index).
fn write_pack(
    repo: &gix::Repository,
    objects: &[(&ObjectId, &(gix::objs::Kind, Vec<u8>))],
) -> Result<()> {
    let io = StoreError::Io;
    let count = u32::try_from(objects.len())
        .map_err(|_| StoreError::Invalid("too many objects for one pack".to_owned()))?;
    let mut pack = Vec::with_capacity(objects.iter().map(|(_, (_, d))| d.len() / 2 + 8).sum());
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    // (id, crc32 of the entry, offset), in id order as the index wants them.
    let mut entries = Vec::with_capacity(objects.len());
    for (id, (kind, data)) in objects {
        let offset = pack.len();
        // Entry header: the type in bits 4-6 of the first byte, the size in 4 + 7n bits.
        let mut size = data.len();
        let mut byte = (type_code(*kind) << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            pack.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        pack.push(byte);
        let mut z =
            gix::zlib::stream::deflate::Write::new(&mut pack, gix::zlib::Compression::BEST_SPEED);
        z.write_all(data).map_err(io)?;
        z.flush().map_err(io)?;
        entries.push((**id, crc32(&pack[offset..]), offset));
    }
    let pack_id = sha1(&pack)?;
    pack.extend_from_slice(pack_id.as_slice());

    let mut idx = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    idx.extend_from_slice(b"\xfftOc");
    idx.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _, _) in &entries {
        fanout[usize::from(id.as_slice()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        idx.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _, _) in &entries {
        idx.extend_from_slice(id.as_slice());
    }
    for (_, crc, _) in &entries {
        idx.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, _, offset) in &entries {
        let small = match u32::try_from(*offset) {
            Ok(o) if o < 0x8000_0000 => o,
            _ => {
                let index = u32::try_from(large.len()).unwrap_or(u32::MAX) | 0x8000_0000;
                large.push(*offset as u64);
                index
            }
        };
        idx.extend_from_slice(&small.to_be_bytes());
    }
    for offset in large {
        idx.extend_from_slice(&offset.to_be_bytes());
    }
    idx.extend_from_slice(pack_id.as_slice());
    let idx_id = sha1(&idx)?;
    idx.extend_from_slice(idx_id.as_slice());

    let directory = repo.objects.store_ref().path().join("pack");
    std::fs::create_dir_all(&directory).map_err(io)?;
    let name = format!("pack-{pack_id}");
    for (ext, bytes) in [("pack", &pack), ("idx", &idx)] {
        let tmp = directory.join(format!("tmp_{name}.{ext}.{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, directory.join(format!("{name}.{ext}"))).map_err(io)?;
    }
    Ok(())
}

fn sha1(bytes: &[u8]) -> Result<ObjectId> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(bytes);
    hasher
        .try_finalize()
        .map_err(|e| StoreError::Invalid(format!("hashing a pack: {e}")))
}

/// CRC-32 (IEEE), as pack indexes record per entry.
fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc32_of_the_check_string() {
        assert_eq!(super::crc32(b"123456789"), 0xcbf4_3926);
    }
}
