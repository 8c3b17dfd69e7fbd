//! Per-process VRAM probes. NVML is loaded at run time in every build (see
//! `nvml.rs`), so the default CPU build measures the VRAM of any program on
//! a GPU machine; without a driver, VRAM columns stay empty (never a silent 0).

use crate::protocol::Check;
use crate::record::gpu::ProcessVram;

/// Reads one process's device memory.
pub trait VramProbe: Send {
    /// Bytes of device memory `pid` holds: 0 when the device answers and does
    /// not list it (no CUDA context there yet), `None` only when unknown.
    fn process_bytes(&mut self, pid: u32) -> Option<u64>;

    /// Bytes of device memory `pids` (a process tree, root first) hold
    /// together on the GPU that lists them, as [`VramProbe::process_bytes`]
    /// reads one process.
    fn tree_bytes(&mut self, pids: &[u32]) -> Option<u64> {
        self.process_bytes(*pids.first()?)
    }

    /// Where NVML sees several GPUs: each of `pids`' bytes on each GPU into
    /// `out` (cleared first); returns the first pid's own reading (as
    /// [`VramProbe::process_bytes`] would give it, from the same lists) and
    /// the GPUs that listed one of them so far in this run (bit N: GPU N).
    /// `None` on a machine of one GPU, or with no reading: then the sample
    /// has no per-GPU VRAM (`record::gpu`) and `process_bytes` reads it.
    fn per_gpu(&mut self, _pids: &[u32], _out: &mut Vec<ProcessVram>) -> Option<(Option<u64>, u8)> {
        None
    }

    /// What the probe saw, for the run's metadata (source, cost, fallbacks).
    fn checks(&self) -> Vec<Check> {
        Vec::new()
    }
}

/// NVML's per-process used memory. Without NVML (no driver library) it warns
/// once and returns `None`: the VRAM columns stay empty.
pub fn open_nvml() -> Option<Box<dyn VramProbe>> {
    try_open_nvml().ok()
}

/// NVML's per-process used memory, or why there is none (no driver, no GPU),
/// warned once per memrel process.
pub fn try_open_nvml() -> Result<Box<dyn VramProbe>, String> {
    super::nvml::NvmlProbe::open()
        .map(|probe| Box::new(probe) as Box<dyn VramProbe>)
        .inspect_err(|e| {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| eprintln!("memrel: warning: {e}: sampled VRAM columns stay empty"));
        })
}
