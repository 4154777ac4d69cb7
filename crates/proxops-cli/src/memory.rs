//! The agent's allocator, and handing the memory a pass freed back to the operating system.
//!
//! The agent's passes peak at several times what it keeps between them (a cycle reads every
//! guest's pending config and both planes of its cluster). With glibc's allocator the process
//! stayed resident at 2.4-3 times its live heap and crept from pass to pass even with
//! `malloc_trim(0)` after each (pages partly held by allocations that live across passes:
//! BENCHMARKS.md "Agent soak"). On Linux the binary uses jemalloc instead: its size-class slabs
//! fragment less, freed pages go back to the OS within a second (`dirty_decay_ms`, a background
//! thread), and after each pass every arena's unused pages are purged at once.

/// jemalloc as the binary's allocator (never a library's: embedding tools keep their own).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` (the `MALLOC_CONF` variable of jemalloc, here
/// `_RJEM_MALLOC_CONF`, still overrides them): one arena, as the agent's few threads mostly
/// wait on the network and each arena keeps its own partly used pages (the short soak idled
/// 2 MiB lower and flatter than with jemalloc's 4 per CPU); a background thread returns freed
/// pages after `dirty_decay_ms` instead of on a later allocation; `muzzy_decay_ms:0` returns
/// them with `MADV_DONTNEED`, which lowers RSS at once, not with `MADV_FREE`, which counts as
/// resident until the kernel is short of memory.
#[cfg(target_os = "linux")]
#[allow(unsafe_code, non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: Option<&'static std::ffi::c_char> =
    // SAFETY: a pointer to the first byte of a static, NUL-terminated string, as jemalloc reads it.
    Some(unsafe {
        &*c"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr()
    });

/// Returns the allocator's unused pages to the OS; whether it could.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn release_freed_memory() -> bool {
    // `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused dirty pages.
    const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: a NUL-terminated name; the command reads and writes no value (null pointers,
    // zero length), which is how jemalloc's manual says to call it.
    let r = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    r == 0
}

/// Returns the allocator's unused pages to the OS; whether it could. Nothing off Linux, where
/// the binary keeps the system allocator.
#[cfg(not(target_os = "linux"))]
pub fn release_freed_memory() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn freed_memory_is_returned_without_harm() {
        // Many blocks freed beside a live one leave dirty pages until purged.
        let big: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 64 * 1024]).collect();
        let keep = vec![2u8; 16];
        drop(big);
        let purged = super::release_freed_memory();
        assert_eq!(purged, cfg!(target_os = "linux"));
        // The allocator still works and live memory is intact.
        let again = vec![3u8; 1 << 20];
        assert_eq!(keep, vec![2u8; 16]);
        assert_eq!(again.len(), 1 << 20);
    }

    /// jemalloc took the options the binary links in (a misspelt symbol would leave its
    /// defaults: no background thread, 10 s decay).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_linked_options_are_in_force() {
        assert_eq!(read_option::<u32>(c"opt.narenas"), 1);
        assert!(read_option::<bool>(c"opt.background_thread"));
        assert_eq!(read_option::<isize>(c"opt.dirty_decay_ms"), 1000);
        assert_eq!(read_option::<isize>(c"opt.muzzy_decay_ms"), 0);
    }

    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn read_option<T: Default + Copy>(name: &std::ffi::CStr) -> T {
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>();
        // SAFETY: `value` is a `T` of `len` bytes, the type jemalloc's manual gives the option.
        let r = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::from_mut(&mut value).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(r, 0, "mallctl {name:?}");
        value
    }
}
