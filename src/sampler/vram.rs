//! Per-process VRAM probes. NVML is loaded at run time in every build (see
//! `nvml.rs`), so the default CPU build measures the VRAM of any program on
//! a GPU machine; without a driver, VRAM columns stay empty (never a silent 0).
//!
//! [`Vram`] is the one probe of VRAM for the sampler and the edge reader
//! (`probe::ResourceProbe`): on a machine of one GPU, the measured
//! processes' sum on the GPU that lists them (`Resource::Device(0)`); where
//! NVML sees several, every GPU's sum and the root's own reading, from one
//! pass over the GPUs' process lists, whose rows it keeps for
//! gpu_processes.csv and an edge's per-process readings.

use super::probe::{Got, Measured, ResourceProbe};
use crate::protocol::Check;
use crate::record::gpu::{GpuVram, ProcessVram};
use crate::record::{Readings, Resource};

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

/// A [`VramProbe`] as a [`ResourceProbe`] (see the module's doc).
pub struct Vram {
    probe: Box<dyn VramProbe>,
    /// Each measured process on each GPU at the latest reading (a machine
    /// of several GPUs; empty otherwise): a buffer kept between readings.
    processes: Vec<ProcessVram>,
}

impl Vram {
    pub fn new(probe: Box<dyn VramProbe>) -> Vram {
        Vram {
            probe,
            processes: Vec::new(),
        }
    }

    /// Each measured process's bytes on each GPU at the latest reading
    /// (empty on a machine of one GPU).
    pub fn processes(&self) -> &[ProcessVram] {
        &self.processes
    }

    /// The probe itself (a process's own reading on a machine of one GPU).
    pub fn probe_mut(&mut self) -> &mut dyn VramProbe {
        self.probe.as_mut()
    }

    /// The probe back (its checks go into the run's metadata).
    pub fn into_inner(self) -> Box<dyn VramProbe> {
        self.probe
    }
}

impl ResourceProbe for Vram {
    /// Several GPUs: every GPU's sum, always; the root's own where the map
    /// has no VRAM reading. One GPU: the processes' sum where the map has
    /// none, or a tree's in place of one process's.
    fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
        self.processes.clear();
        let held = into.vram_column();
        match self.probe.per_gpu(at.pids, &mut self.processes) {
            Some((root, touched)) => {
                into.set_gpu_vram(&GpuVram::of(touched, &self.processes));
                into.set_vram_column(0, held.or(root));
                Got::Read
            }
            None if held.is_some() && !at.tree => Got::Kept,
            None => {
                into.remove(Resource::Device(0));
                match self.probe.tree_bytes(at.pids) {
                    Some(bytes) => {
                        into.set(Resource::Device(0), bytes);
                        Got::Read
                    }
                    None => Got::Nothing,
                }
            }
        }
    }

    fn how(&self) -> String {
        "VRAM per process (NVML)".into()
    }
}
