//! The one edge reader: a phase edge is a reading of every resource the run
//! samples, taken the moment the edge is known (its line read from the
//! channel, a mark taken, a log line seen), never the next periodic sample.
//!
//! `run`, `exec`, `exec --tree`, several GPUs, `attach` and `drive` all
//! read their edges here (their probes opened by `ProbeSet::open`), so the
//! same program gives the same edge values whichever way it is measured. It reads with the sampler's kinds of probe and its
//! loop (`sampler::probe`): the host probe, then every other probe into
//! one map of readings, which starts as what the line carried (the
//! sender's own reading) and fills the line's memory in. Per resource:
//! - host memory: memrel's worker reads itself at the edge (exact, sent on
//!   the line); a program's process is read here (statm), a tree's PSS sum
//!   replaces whatever the line says (one process is not the tree);
//! - VRAM: the process's (or the tree's) on the GPU that lists it, and on a
//!   machine of several GPUs every GPU's sum over the same processes, as
//!   the samples read them (`sampler::vram::Vram`);
//! - the container's working set (always read here, memory.stat included)
//!   and the model files' page cache (where the line has none);
//! - every catalogued resource (`sampler::resources`).
//!
//! It must not parse events or write anything: it fills a reading in.

use crate::protocol::MemoryAtEdge;
use crate::record::Readings;
use crate::sampler::probe::{self, Got, Measured, ResourceProbe};
use crate::sampler::vram::Vram;
use crate::sampler::{Probe, Reading, VramProbe};

/// Reads every resource at a phase edge (see the module's doc).
pub struct EdgeReader {
    pid: u32,
    /// A program's process or tree; `None` where the sender reads its own
    /// host memory (memrel's worker) or nothing can read it.
    host: Option<Probe>,
    /// Every other probe (`ProbeSet::open`'s: the sampler has its own).
    probes: Vec<Box<dyn ResourceProbe>>,
    /// The last host reading of a live process: what an edge taken after the
    /// process exited closes on (never 0).
    last_host: Option<Reading>,
    /// Each process's own reading too (`EdgeExtras::processes`).
    per_process: bool,
}

/// What one edge reading gives besides the line's own [`MemoryAtEdge`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgeExtras {
    /// Every resource of this reading (the line's own and the reader's):
    /// VRAM per GPU where NVML sees several, the catalogued resources
    /// (`sampler::resources`) included.
    pub readings: Readings,
    /// The process was gone: the host reading is its last one while alive.
    pub after_exit: bool,
    /// Each measured process at this reading (a tree's, root first; else
    /// the process alone): its own host memory (a tree's PSS share, else
    /// its RSS) and VRAM summed over the GPUs, where read. Which process
    /// holds what (`memrel drive`'s processes.csv); empty after the exit.
    pub processes: Vec<ProcessReading>,
    /// How long the sender waited for this reading, from the edge's
    /// arrival (`record::Event::held_s`); `None` where it did not wait.
    pub held_s: Option<f64>,
}

/// One process of an edge's reading (see [`EdgeExtras::processes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessReading {
    pub pid: u32,
    pub host_bytes: u64,
    pub vram_bytes: Option<u64>,
}

impl EdgeReader {
    /// A reader for `pid`: host memory with `host` (a program's process or
    /// tree; `None` where the sender reads itself), then every probe of
    /// `probes` (as `ProbeSet::open` hands them: the catalogued resources,
    /// VRAM with its own NVML handle, the container, the page cache).
    pub fn new(pid: u32, host: Option<Probe>, probes: Vec<Box<dyn ResourceProbe>>) -> EdgeReader {
        EdgeReader {
            pid,
            host,
            probes,
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

    /// The probe's name for host memory, `None` where the sender reads itself.
    pub fn host_probe_name(&self) -> Option<&'static str> {
        self.host.as_ref().map(Probe::name)
    }

    /// Fills `memory` in: what the sender did not read, and under a tree
    /// what one process cannot read. Returns the readings that do not fit
    /// [`MemoryAtEdge`].
    pub fn read(&mut self, memory: &mut MemoryAtEdge) -> EdgeExtras {
        let mut extras = EdgeExtras::default();
        let mut readings = Readings::of_memory(memory);
        let root = [self.pid];
        if let Some(host) = self.host.as_mut() {
            let at = Measured {
                pids: &root,
                tree: host.is_tree(),
            };
            match ResourceProbe::read(host, &at, &mut readings) {
                Got::Read => {
                    let r = Reading::of(&readings);
                    self.last_host = r;
                    if let (true, Some(r)) = (self.per_process, r) {
                        extras.processes = match &*host {
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
                // The sender's own reading stands.
                Got::Kept => {}
                // Gone, or a zombie (exited, not yet reaped) read as 0.
                Got::Nothing | Got::Gone => {
                    if let Some(r) = self.last_host {
                        r.put(&mut readings);
                        extras.after_exit = true;
                    }
                }
            }
        }
        let at = match &self.host {
            Some(host) => host.measured(&root),
            None => Measured::process(&root),
        };
        probe::read_each(&mut self.probes, &at, &mut readings);
        if let Some(vram) = probe::find_mut::<Vram>(&mut self.probes) {
            // Each process's VRAM: its rows of the per-GPU lists, or (one
            // GPU) its own reading.
            let several = readings.per_gpu();
            for p in extras.processes.iter_mut() {
                p.vram_bytes = if several {
                    Some(
                        vram.processes()
                            .iter()
                            .filter(|v| v.pid == p.pid)
                            .map(|v| v.bytes)
                            .sum(),
                    )
                } else {
                    vram.probe_mut().process_bytes(p.pid)
                };
            }
        }
        readings.fill_memory(memory);
        extras.readings = readings;
        extras
    }

    /// The VRAM probe back (its checks go into the run's metadata).
    pub fn into_vram(mut self) -> Option<Box<dyn VramProbe>> {
        probe::take::<Vram>(&mut self.probes).map(|v| v.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::gpu::ProcessVram;
    use crate::record::Resource;
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

    fn two_gpus() -> Vec<Box<dyn ResourceProbe>> {
        vec![Box::new(Vram::new(Box::new(TwoGpus { bytes: [7, 11] })))]
    }

    #[test]
    fn a_programs_edge_reads_its_host_memory_and_every_gpu_at_once() {
        let pid = std::process::id();
        let mut reader = EdgeReader::new(
            pid,
            StatmProbe::open(pid).ok().map(Probe::Procfs),
            two_gpus(),
        );
        let mut memory = MemoryAtEdge::default();
        let extras = reader.read(&mut memory);
        assert!(memory.rss_bytes > 0, "{memory:?}");
        assert_eq!(memory.vram_bytes, Some(7));
        assert_eq!(extras.readings.get(Resource::Device(0)), Some(7));
        assert_eq!(extras.readings.get(Resource::Device(1)), Some(11));
        assert!(!extras.after_exit);
    }

    #[test]
    fn each_process_of_a_tree_is_read_with_its_share_of_the_sum() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = std::process::id();
        let mut reader =
            EdgeReader::new(pid, Some(Probe::open_tree(pid)), two_gpus()).per_process(true);
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
        let mut plain = EdgeReader::new(pid, Some(Probe::open_tree(pid)), Vec::new());
        assert!(plain
            .read(&mut MemoryAtEdge::default())
            .processes
            .is_empty());
    }

    #[test]
    fn the_senders_own_reading_stands_where_it_read_itself() {
        let pid = std::process::id();
        let mut reader = EdgeReader::new(
            pid,
            StatmProbe::open(pid).ok().map(Probe::Procfs),
            two_gpus(),
        );
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
        let mut reader = EdgeReader::new(
            pid,
            StatmProbe::open(pid).ok().map(Probe::Procfs),
            Vec::new(),
        );
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
