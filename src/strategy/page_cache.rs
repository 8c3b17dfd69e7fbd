//! The page-cache family: what happens to the weight files' pages in the
//! kernel's page cache after a model is loaded and dropped. A plain `drop`
//! leaves them cached (and charged to the cgroup that read them);
//! `fadvise-dontneed` asks the kernel to drop them once the tensors are
//! copied and again after the unload; `read-load` reads the files instead of
//! mapping them. The worker carries the mode out (`worker::candle`); the
//! parent measures the files' cached bytes (`sampler::page_cache`).

use super::{DeviceKind, Strategy};
use crate::model::spec::LoadMethod;

/// What the candle worker does with the weight files besides loading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFiles {
    /// Load as the scenario says (`load_method`) and leave the cache alone.
    AsScenario,
    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on every weight file after the
    /// tensors are copied (end of each load, once the mapping is dropped)
    /// and after each unload.
    DropCached,
    /// Read each file into memory (`std::fs::read`) instead of mapping it.
    Read,
}

impl WeightFiles {
    /// The load method under this mode, given the scenario's.
    pub fn load_method(self, scenario: LoadMethod) -> LoadMethod {
        match self {
            WeightFiles::Read => LoadMethod::Read,
            WeightFiles::AsScenario | WeightFiles::DropCached => scenario,
        }
    }
}

pub const PAGE_CACHE: &[Strategy] = &[
    Strategy {
        name: "fadvise-dontneed",
        device: DeviceKind::Any,
        summary: "posix_fadvise(DONTNEED) on the weight files after each load and each unload",
        explanation: "Loading through a mapping (or read()) leaves every page of the weight files \
            in the kernel's page cache; after the drop RSS falls, but the pages stay cached and a \
            cgroup keeps charging them (memory.current; Kubernetes' working set counts the active \
            ones). POSIX_FADV_DONTNEED drops a file's clean pages that no process maps, so the \
            worker calls it once the tensors are copied and the mapping is gone (end of the \
            load) and again after the unload. Costs a cold read at the next load (from the disk, \
            not the cache), and it drops the pages for every process on the machine, not only \
            this one.",
        weights: WeightFiles::DropCached,
        ..Strategy::PLAIN
    },
    Strategy {
        name: "read-load",
        device: DeviceKind::Any,
        summary: "read the weight files into memory instead of mapping them",
        explanation: "The worker reads each safetensors file with read() into a buffer and builds \
            the tensors from it, so no file pages are ever mapped (RssFile stays flat). It does \
            not keep the files out of the page cache: read() goes through the cache too, so the \
            files stay cached after the unload just as with a mapping; the buffer also costs a \
            second copy of the file in anonymous memory during the load.",
        weights: WeightFiles::Read,
        ..Strategy::PLAIN
    },
];
