//! The one edge reader: a phase edge is a reading of every resource the run
//! samples, taken the moment the edge is known (its line read from the
//! channel, a mark taken, a log line seen), never the next periodic sample.
//!
//! `run`, `exec`, `exec --tree`, several GPUs and `attach` all read their
//! edges here, so the same program gives the same edge values whichever
//! way it is measured. Per resource:
//! - host memory: memrel's worker reads itself at the edge (exact, sent on
//!   the line); a program's process is read here (statm), a tree's PSS sum
//!   replaces whatever the line says (one process is not the tree);
//! - VRAM: the process's (or the tree's) on the GPU that lists it, and on a
//!   machine of several GPUs every GPU's sum over the same processes, as
//!   the samples read them (`sampler::read_vram`);
//! - the container's working set and the model files' page cache;
//! - every catalogued resource (`sampler::resources`), into the edge's readings.
//!
//! It must not parse events or write anything: it fills a reading in.

use crate::cgroup::probe::CgroupProbe;
use crate::protocol::MemoryAtEdge;
use crate::record::gpu::{GpuVram, ProcessVram};
use crate::record::Readings;
use crate::sampler::page_cache::PageCacheProbe;
use crate::sampler::resources::{self, ResourceDef};
use crate::sampler::{Probe, Reading, VramProbe};

/// Reads every resource at a phase edge (see the module's doc).
pub struct EdgeReader {
    pid: u32,
    /// A program's process or tree; `None` where the sender reads its own
    /// host memory (memrel's worker) or nothing can read it.
    host: Option<Probe>,
    vram: Option<Box<dyn VramProbe>>,
    container: Option<CgroupProbe>,
    page_cache: Option<PageCacheProbe>,
    /// The catalogued resources' probes (its own: the sampler has others).
    resources: Vec<(&'static ResourceDef, Box<dyn resources::Probe>)>,
    /// Per-GPU readings (a buffer kept between edges).
    processes: Vec<ProcessVram>,
    /// The last host reading of a live process: what an edge taken after the
    /// process exited closes on (never 0).
    last_host: Option<Reading>,
    /// Each process's own reading too (`EdgeExtras::processes`).
    per_process: bool,
}

/// What one edge reading gives besides the line's own [`MemoryAtEdge`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgeExtras {
    /// VRAM per GPU where NVML sees several (empty otherwise).
    pub gpu_vram: GpuVram,
    /// The catalogued resources (`sampler::resources`).
    pub readings: Readings,
    /// The process was gone: the host reading is its last one while alive.
    pub after_exit: bool,
    /// Each measured process at this reading (a tree's, root first; else
    /// the process alone): its own host memory (a tree's PSS share, else
    /// its RSS) and VRAM summed over the GPUs, where read. Which process
    /// holds what (`memrel drive`'s processes.csv); empty after the exit.
    pub processes: Vec<ProcessReading>,
}

/// One process of an edge's reading (see [`EdgeExtras::processes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessReading {
    pub pid: u32,
    pub host_bytes: u64,
    pub vram_bytes: Option<u64>,
}

impl EdgeReader {
    /// A reader for `pid` that reads the catalogued resources; add what
    /// else the run samples.
    pub fn new(pid: u32) -> EdgeReader {
        EdgeReader {
            pid,
            host: None,
            vram: None,
            container: None,
            page_cache: None,
            resources: resources::open_all(pid),
            processes: Vec::new(),
            last_host: None,
            per_process: false,
        }
    }

    /// Also gives each measured process's own reading at every edge (see
    /// [`EdgeExtras::processes`]): one more NVML call per process on a
    /// machine of one GPU.
    pub fn per_process(mut self, on: bool) -> EdgeReader {
        self.per_process = on;
        self
    }

    /// Reads host memory with `probe` (a program's process, or its tree).
    pub fn host(mut self, probe: Option<Probe>) -> EdgeReader {
        self.host = probe;
        self
    }

    /// Reads VRAM with `probe` (its own NVML handle: the sampler has another).
    pub fn vram(mut self, probe: Option<Box<dyn VramProbe>>) -> EdgeReader {
        self.vram = probe;
        self
    }

    pub fn container(mut self, probe: Option<CgroupProbe>) -> EdgeReader {
        self.container = probe;
        self
    }

    pub fn page_cache(mut self, probe: Option<PageCacheProbe>) -> EdgeReader {
        self.page_cache = probe;
        self
    }

    /// Whether host memory is the tree's (the line's own reading is replaced).
    fn tree(&self) -> bool {
        matches!(self.host, Some(Probe::Tree(_)))
    }

    /// The probe's name for host memory, `None` where the sender reads itself.
    pub fn host_probe_name(&self) -> Option<&'static str> {
        self.host.as_ref().map(Probe::name)
    }

    /// Fills `memory` in: what the sender did not read, and under a tree
    /// what one process cannot read. Returns the readings that do not fit
    /// [`MemoryAtEdge`].
    pub fn read(&mut self, memory: &mut MemoryAtEdge) -> EdgeExtras {
        let mut extras = EdgeExtras::default();
        let tree = self.tree();
        if let Some(probe) = self.host.as_mut() {
            if memory.rss_bytes == 0 || tree {
                // A zombie (exited, not yet reaped) reads as 0: not a value.
                match probe.read().ok().filter(|r| r.rss_bytes > 0) {
                    Some(r) => {
                        self.last_host = Some(r);
                        set_host(memory, r);
                        if self.per_process {
                            extras.processes = match probe {
                                Probe::Tree(t) => t
                                    .processes()
                                    .map(|(pid, own)| ProcessReading {
                                        pid,
                                        host_bytes: own.rss_bytes,
                                        vram_bytes: None,
                                    })
                                    .collect(),
                                _ => vec![ProcessReading {
                                    pid: self.pid,
                                    host_bytes: r.rss_bytes,
                                    vram_bytes: None,
                                }],
                            };
                        }
                    }
                    None => {
                        if let Some(r) = self.last_host {
                            set_host(memory, r);
                            extras.after_exit = true;
                        }
                    }
                }
            }
        }
        let pids = match &self.host {
            Some(Probe::Tree(t)) if !t.pids().is_empty() => t.pids(),
            _ => std::slice::from_ref(&self.pid),
        };
        resources::read_all(&mut self.resources, pids, &mut extras.readings);
        if let Some(vram) = self.vram.as_mut() {
            let mut several = false;
            match vram.per_gpu(pids, &mut self.processes) {
                Some((root, touched)) => {
                    several = true;
                    extras.gpu_vram = GpuVram::of(touched, &self.processes);
                    if memory.vram_bytes.is_none() {
                        memory.vram_bytes = root;
                    }
                }
                None if tree => memory.vram_bytes = vram.tree_bytes(pids),
                None if memory.vram_bytes.is_none() => {
                    memory.vram_bytes = vram.process_bytes(self.pid);
                }
                None => {}
            }
            // Each process's VRAM: its rows of the per-GPU lists, or (one
            // GPU) its own reading.
            for p in extras.processes.iter_mut() {
                p.vram_bytes = if several {
                    Some(
                        self.processes
                            .iter()
                            .filter(|v| v.pid == p.pid)
                            .map(|v| v.bytes)
                            .sum(),
                    )
                } else {
                    vram.process_bytes(p.pid)
                };
            }
        }
        if let Some(probe) = self.container.as_mut() {
            let reading = probe.read(true);
            memory.container_bytes = reading.map(|c| c.working_set_bytes);
            memory.container_anon_bytes = reading.and_then(|c| c.anon_bytes);
        }
        if memory.page_cache_bytes.is_none() {
            if let Some(probe) = self.page_cache.as_mut() {
                memory.page_cache_bytes = probe.read().ok();
            }
        }
        extras
    }

    /// The VRAM probe back (its checks go into the run's metadata).
    pub fn into_vram(self) -> Option<Box<dyn VramProbe>> {
        self.vram
    }
}

fn set_host(memory: &mut MemoryAtEdge, r: Reading) {
    memory.rss_bytes = r.rss_bytes;
    memory.anon_bytes = r.anon_bytes;
    memory.file_bytes = r.file_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::procfs::StatmProbe;

    /// Two fake GPUs: the process holds `bytes[gpu]` on each.
    struct TwoGpus {
        bytes: [u64; 2],
    }

    impl VramProbe for TwoGpus {
        fn process_bytes(&mut self, _pid: u32) -> Option<u64> {
            Some(self.bytes[0])
        }
        fn per_gpu(
            &mut self,
            pids: &[u32],
            out: &mut Vec<ProcessVram>,
        ) -> Option<(Option<u64>, u8)> {
            out.clear();
            for (gpu, bytes) in self.bytes.iter().enumerate() {
                out.push(ProcessVram {
                    gpu: gpu as u32,
                    pid: pids[0],
                    bytes: *bytes,
                });
            }
            Some((Some(self.bytes[0]), 0b11))
        }
    }

    #[test]
    fn a_programs_edge_reads_its_host_memory_and_every_gpu_at_once() {
        let pid = std::process::id();
        let mut reader = EdgeReader::new(pid)
            .host(StatmProbe::open(pid).ok().map(Probe::Procfs))
            .vram(Some(Box::new(TwoGpus { bytes: [7, 11] })));
        let mut memory = MemoryAtEdge::default();
        let extras = reader.read(&mut memory);
        assert!(memory.rss_bytes > 0, "{memory:?}");
        assert_eq!(memory.vram_bytes, Some(7));
        assert_eq!(extras.gpu_vram.get(0), Some(7));
        assert_eq!(extras.gpu_vram.get(1), Some(11));
        assert!(!extras.after_exit);
    }

    #[test]
    fn each_process_of_a_tree_is_read_with_its_share_of_the_sum() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = std::process::id();
        let mut reader = EdgeReader::new(pid)
            .host(Some(Probe::open_tree(pid)))
            .vram(Some(Box::new(TwoGpus { bytes: [7, 11] })))
            .per_process(true);
        let mut memory = MemoryAtEdge::default();
        let extras = reader.read(&mut memory);
        let _ = child.kill();
        let _ = child.wait();
        let pids: Vec<u32> = extras.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids.first(), Some(&pid), "{pids:?}");
        assert!(pids.contains(&child.id()), "{pids:?}");
        let host: u64 = extras.processes.iter().map(|p| p.host_bytes).sum();
        assert_eq!(host, memory.rss_bytes);
        // The fake lists the first pid on both GPUs: 7 + 11.
        assert_eq!(extras.processes[0].vram_bytes, Some(18));
        assert_eq!(extras.processes[1].vram_bytes, Some(0));
        // Not asked for: none.
        let mut plain = EdgeReader::new(pid).host(Some(Probe::open_tree(pid)));
        assert!(plain
            .read(&mut MemoryAtEdge::default())
            .processes
            .is_empty());
    }

    #[test]
    fn the_senders_own_reading_stands_where_it_read_itself() {
        let pid = std::process::id();
        let mut reader = EdgeReader::new(pid)
            .host(StatmProbe::open(pid).ok().map(Probe::Procfs))
            .vram(Some(Box::new(TwoGpus { bytes: [7, 11] })));
        let mut memory = MemoryAtEdge {
            rss_bytes: 5,
            anon_bytes: 3,
            file_bytes: 2,
            vram_bytes: Some(1),
            ..MemoryAtEdge::default()
        };
        reader.read(&mut memory);
        assert_eq!((memory.rss_bytes, memory.vram_bytes), (5, Some(1)));
    }

    #[test]
    fn an_edge_after_the_exit_closes_on_the_last_reading_never_on_0() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        let mut reader = EdgeReader::new(pid).host(StatmProbe::open(pid).ok().map(Probe::Procfs));
        let mut alive = MemoryAtEdge::default();
        assert!(!reader.read(&mut alive).after_exit);
        assert!(alive.rss_bytes > 0);
        child.kill().expect("kill");
        child.wait().expect("reaped");
        let mut gone = MemoryAtEdge::default();
        assert!(reader.read(&mut gone).after_exit);
        assert_eq!(gone.rss_bytes, alive.rss_bytes);
    }
}
