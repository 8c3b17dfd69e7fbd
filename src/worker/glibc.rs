//! The glibc allocator calls the CPU strategies need: `malloc_trim`,
//! `mallopt` and `mallinfo2`. On other C libraries these report "unavailable"
//! instead of pretending; the parent refuses glibc strategies there.

use crate::protocol::AllocatorState;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use super::AllocatorState;

    pub fn mallinfo() -> Option<AllocatorState> {
        // SAFETY: mallinfo2 only reads allocator statistics.
        let info = unsafe { libc::mallinfo2() };
        Some(AllocatorState {
            arena_bytes: info.arena as u64,
            mmapped_bytes: info.hblkhd as u64,
            in_use_bytes: info.uordblks as u64,
            free_bytes: info.fordblks as u64,
            top_releasable_bytes: info.keepcost as u64,
        })
    }

    pub fn malloc_trim() -> Option<bool> {
        // SAFETY: malloc_trim is thread-safe and takes no pointers.
        Some(unsafe { libc::malloc_trim(0) } == 1)
    }

    pub fn mallopt_mmap_threshold(bytes: i32) -> Option<bool> {
        // SAFETY: mallopt with a documented parameter and an in-range value.
        Some(unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) } == 1)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    use super::AllocatorState;

    pub fn mallinfo() -> Option<AllocatorState> {
        None
    }
    pub fn malloc_trim() -> Option<bool> {
        None
    }
    pub fn mallopt_mmap_threshold(_bytes: i32) -> Option<bool> {
        None
    }
}

/// `mallinfo2()`, or `None` without glibc.
pub fn allocator_state() -> Option<AllocatorState> {
    imp::mallinfo()
}

/// `malloc_trim(0)`: `Some(true)` if memory was returned to the system.
pub fn malloc_trim() -> Option<bool> {
    imp::malloc_trim()
}

/// `mallopt(M_MMAP_THRESHOLD, bytes)`: `Some(true)` if glibc accepted it.
pub fn mallopt_mmap_threshold(bytes: i32) -> Option<bool> {
    imp::mallopt_mmap_threshold(bytes)
}
