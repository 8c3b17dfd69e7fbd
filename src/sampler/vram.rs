//! Per-process VRAM probes. The NVML probe exists in `cuda` builds (see
//! `nvml.rs`); without it, VRAM columns stay empty (never a silent 0).

use crate::protocol::Check;

/// Reads one process's device memory.
pub trait VramProbe: Send {
    /// Bytes of device memory `pid` holds, `None` when unknown.
    fn process_bytes(&mut self, pid: u32) -> Option<u64>;

    /// What the probe saw, for the run's metadata (source, cost, fallbacks).
    fn checks(&self) -> Vec<Check> {
        Vec::new()
    }
}

/// NVML's per-process used memory (cuda builds only). Without NVML (no driver
/// library) it warns once and returns `None`: the VRAM columns stay empty.
#[cfg(feature = "cuda")]
pub fn open_nvml() -> Option<Box<dyn VramProbe>> {
    match super::nvml::NvmlProbe::open() {
        Ok(probe) => Some(Box::new(probe)),
        Err(e) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| eprintln!("memrel: warning: {e}: sampled VRAM columns stay empty"));
            None
        }
    }
}

/// Without the `cuda` feature there is no VRAM probe.
#[cfg(not(feature = "cuda"))]
pub fn open_nvml() -> Option<Box<dyn VramProbe>> {
    None
}
