//! Per-process VRAM probes. The NVML probe exists in `cuda` builds; without
//! it, VRAM columns stay empty (never a silent 0).

/// Reads one process's device memory.
pub trait VramProbe: Send {
    /// Bytes of device memory `pid` holds, `None` when unknown.
    fn process_bytes(&mut self, pid: u32) -> Option<u64>;
}

/// NVML's per-process used memory (cuda builds only).
#[cfg(feature = "cuda")]
pub fn open_nvml() -> Option<Box<dyn VramProbe>> {
    None
}

/// Without the `cuda` feature there is no VRAM probe.
#[cfg(not(feature = "cuda"))]
pub fn open_nvml() -> Option<Box<dyn VramProbe>> {
    None
}
