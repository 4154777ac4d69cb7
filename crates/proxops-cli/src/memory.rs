//! Handing the memory a pass freed back to the operating system.
//!
//! glibc's allocator keeps freed pages in its arenas for reuse. The agent's passes peak at
//! several times what it keeps between them (a cycle reads every guest's pending config and
//! both planes of its cluster), and with glibc the process stayed resident at 2.4-3 times its
//! peak heap (BENCHMARKS.md "Agent soak"). `malloc_trim(0)` after each pass returns the free
//! pages of every arena, so the agent idles near what it actually holds.

/// Returns the allocator's free pages to the OS; whether any were returned. Nothing on
/// platforms without glibc, whose allocators give memory back by themselves or have no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_freed_memory() -> bool {
    // SAFETY: malloc_trim takes no pointer and touches only glibc's own free lists, under the
    // arenas' locks; it is safe to call from any thread at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Returns the allocator's free pages to the OS; whether any were returned. Nothing on
/// platforms without glibc, whose allocators give memory back by themselves or have no such call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn freed_memory_is_returned_without_harm() {
        // A large block freed below a live one stays in the arena until trimmed.
        let big: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 64 * 1024]).collect();
        let keep = vec![2u8; 16];
        drop(big);
        let _ = super::release_freed_memory();
        // The allocator still works and live memory is intact.
        let again = vec![3u8; 1 << 20];
        assert_eq!(keep, vec![2u8; 16]);
        assert_eq!(again.len(), 1 << 20);
    }
}
