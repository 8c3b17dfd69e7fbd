//! Every probe of a measurement, opened in one place: what a session
//! measures (a [`Scope`]: the process or its tree, the GPU side, the cgroup,
//! the model files) becomes the sampler's probes and the edge reader's, so
//! a run, an exec, an attach and a drive read the same resources the same
//! way, and a new resource is opened here once, for both readers.
//!
//! It opens; it reads nothing and starts no thread but the page cache's
//! (the sampler's low-rate reading of it).

use std::path::PathBuf;

use super::edges::EdgeReader;
use crate::cgroup::probe::CgroupProbe;
use crate::cgroup::Located;
use crate::sampler::container::Container;
use crate::sampler::mappings::MappingsProbe;
use crate::sampler::page_cache::{Method, PageCacheProbe};
use crate::sampler::probe::ResourceProbe;
use crate::sampler::resources::{self, Catalogued};
use crate::sampler::vram::{self, Vram};
use crate::sampler::{Probe, Probes, VramProbe};

/// What one session measures.
pub struct Scope<'a> {
    /// The measured process (the root of its tree under `tree`).
    pub pid: u32,
    /// Its whole process tree, PSS summed (`--tree`), not the process alone.
    pub tree: bool,
    /// The parent reads host memory at an edge (a program, an attached
    /// process); `false` where the sender reads itself (memrel's worker).
    pub host_at_edges: bool,
    /// The device side: the sampler's VRAM probe (a run opens it once and
    /// keeps it across its processes; `None` on CPU or without NVML)...
    pub vram: Option<Box<dyn VramProbe>>,
    /// ...and whether the edges read VRAM too (with their own NVML handle).
    pub vram_at_edges: bool,
    /// The cgroup the process runs in, where it was found: its counters are
    /// sampled and read at every edge.
    pub cgroup: Option<&'a Located>,
    /// The model files whose page cache is read (none: not read).
    pub model_files: &'a [PathBuf],
    /// Each measured process's own reading at every edge (`memrel drive`'s
    /// processes.csv).
    pub per_process: bool,
}

/// The probes of one session: the sampler's and the edge reader's, each its
/// own (a probe keeps buffers and state of its reader's), and the page
/// cache's handle, which says why its readings stopped.
pub struct ProbeSet {
    pub sampler: Probes,
    pub edges: EdgeReader,
    pub page_cache: Option<PageCacheProbe>,
}

impl ProbeSet {
    /// Opens every probe of `scope`, for the sampler in the order it reads
    /// them: VRAM (every tick), the catalogued resources (every tick), the
    /// cgroup (at most every 10 ms: `sampler::container`), the model files'
    /// page cache (the latest reading of its own thread; a thread that
    /// cannot start leaves the samples without it, the edges still have it).
    pub fn open(scope: Scope) -> ProbeSet {
        let pid = scope.pid;
        let host = || {
            if scope.tree {
                Probe::open_tree(pid)
            } else {
                Probe::open(pid)
            }
        };
        let cgroup = || scope.cgroup.and_then(|at| CgroupProbe::open(at).ok());
        let files = scope.model_files;
        let page_cache = (!files.is_empty()).then(|| {
            PageCacheProbe::new(files, Method::choose(files.first().map(|f| f.as_path())).0)
        });

        let mut sampled: Vec<Box<dyn ResourceProbe>> = Vec::new();
        if let Some(vram) = scope.vram {
            sampled.push(Box::new(Vram::new(vram)));
        }
        sampled.extend(Catalogued::all(resources::open_all(pid)));
        if let Some(container) = cgroup() {
            sampled.push(Box::new(Container::sampled(container)));
        }
        if let Some(thread) = page_cache.clone().and_then(|p| p.spawn().ok()) {
            sampled.push(Box::new(thread));
        }

        let mut at_edges: Vec<Box<dyn ResourceProbe>> =
            Catalogued::all(resources::open_all(pid)).collect();
        if let Some(vram) = scope.vram_at_edges.then(vram::open_nvml).flatten() {
            at_edges.push(Box::new(Vram::new(vram)));
        }
        if let Some(container) = cgroup() {
            at_edges.push(Box::new(Container::at_edges(container)));
        }
        if let Some(page_cache) = page_cache.clone() {
            at_edges.push(Box::new(page_cache));
        }
        at_edges.push(Box::new(MappingsProbe::new(files)));
        let edges = EdgeReader::new(pid, scope.host_at_edges.then(host), at_edges)
            .per_process(scope.per_process);
        ProbeSet {
            sampler: Probes {
                host: host(),
                others: sampled,
            },
            edges,
            page_cache,
        }
    }
}
