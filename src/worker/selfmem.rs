//! The worker reading its own memory at phase edges: `/proc/self/statm` (the
//! same counters the parent's sampler reads, so edge values and samples agree)
//! and `VmHWM` from `/proc/self/status`.

use crate::protocol::MemoryAtEdge;
use crate::sampler::procfs::parse_statm;

/// Own RSS split into anon and file; zeros where /proc is missing.
pub fn memory_now() -> MemoryAtEdge {
    let reading = std::fs::read("/proc/self/statm")
        .ok()
        .and_then(|bytes| parse_statm(&bytes, crate::sampler::procfs::page_size()));
    match reading {
        Some(r) => MemoryAtEdge {
            rss_bytes: r.rss_bytes,
            anon_bytes: r.anon_bytes,
            file_bytes: r.file_bytes,
            vram_bytes: None,
            page_cache_bytes: None,
        },
        None => MemoryAtEdge::default(),
    }
}

/// The kernel's peak RSS for this process (`VmHWM`), 0 where unknown.
pub fn vm_hwm_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}
