//! Gives the pages of freed heap memory back to the system after the daemon's bursts of
//! short-lived allocation (start-up, a registry reload), so an idle daemon's RSS is what it
//! still holds rather than what its start-up once needed.

/// Returns the whole free pages of every malloc arena to the system (glibc's
/// `malloc_trim(0)`: it releases free pages inside the heap too, not only at its top).
/// Start-up parses the registry's YAML into trees that are freed once the registry is built;
/// without this their pages stay resident for the daemon's life (about 0.6 MB at idle,
/// docs/benchmarks.md, "Idle RSS and the order of the code"). A no-op on other C libraries.
#[allow(unsafe_code)]
pub fn return_freed_heap_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes no
    // pointer from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_anonymous_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
        status
            .lines()
            .find_map(|line| line.strip_prefix("RssAnon:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon in /proc/self/status")
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_memory_below_a_live_allocation_goes_back_to_the_system() {
        // 200 MB in small blocks (what a parse tree is), then one block kept above them so
        // the heap cannot simply shrink from its top, then the blocks freed. Large enough
        // that what the tests running beside this one allocate meanwhile cannot hide it.
        let blocks: Vec<Box<[u8; 96]>> = (0..2_000_000).map(|i| Box::new([i as u8; 96])).collect();
        let kept_above = Box::new([7u8; 96]);
        drop(blocks);
        let before = resident_anonymous_kb();
        return_freed_heap_pages();
        let after = resident_anonymous_kb();
        assert_eq!(kept_above[0], 7);
        assert!(
            before.saturating_sub(after) >= 100_000,
            "RssAnon went from {before} kB to {after} kB: the freed 200 MB stayed resident"
        );
    }
}
