//! The sampler: a thread in the parent that reads the worker's memory at a
//! fixed interval and timestamps every reading on the run's clock.
//!
//! It must stay cheap (it shares the machine with the workload) and must not
//! allocate per sample: each reading is written as one row of samples.csv
//! (buffered, flushed every 100 ms: `record::live`), so memrel's memory does
//! not grow with the length of a run. It never parses events: a row's phase
//! is the one the orchestrator last heard of, made exact when the run ends.

pub mod hwm;
mod nudge;
pub mod nvml;
mod nvml_list;
pub mod page_cache;
mod portable;
pub mod procfs;
pub mod resources;
mod tick;
pub mod tree;
pub mod vram;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cgroup::probe::CgroupProbe;
use crate::record::gpu::{GpuVram, ProcessVram};
use crate::record::live::SampleWriter;
use crate::record::Sample;
pub use nudge::Nudge;
pub use vram::VramProbe;

/// One memory reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
}

/// How long [`Probe::open_tree`] tries a process whose tree cannot be read yet.
const TREE_OPEN_RETRY: Duration = Duration::from_millis(200);

/// The record's `sampler` when the samples are a process tree's (`--tree`).
pub const TREE_SAMPLER: &str = "procfs-tree-pss";

/// Whether samples recorded with `sampler` are a process tree's.
pub fn is_tree(sampler: &str) -> bool {
    sampler == TREE_SAMPLER
}

/// What a GPU's line shows: a process tree's sum, or one process's VRAM.
pub fn vram_scope(tree: bool) -> &'static str {
    if tree {
        "process tree"
    } else {
        "this process"
    }
}

/// Where readings come from.
pub enum Probe {
    Procfs(procfs::StatmProbe),
    Sysinfo(portable::SysinfoProbe),
    /// A program's whole process tree, PSS summed (see `tree`).
    Tree(tree::TreeProbe),
    /// Neither works: the run still goes on, with phase-edge readings only.
    Unavailable,
}

impl Probe {
    /// procfs where it exists, sysinfo elsewhere.
    pub fn open(pid: u32) -> Probe {
        match procfs::StatmProbe::open(pid) {
            Ok(p) => Probe::Procfs(p),
            Err(_) => match portable::SysinfoProbe::open(pid) {
                Ok(p) => Probe::Sysinfo(p),
                Err(_) => Probe::Unavailable,
            },
        }
    }

    /// The process tree of `pid` (PSS, see `tree`); procfs only. A reading
    /// costs ~17 µs per resident MiB (the kernel walks the page tables): the
    /// loop skips the ticks it cannot keep. A process opened just after its
    /// spawn may still be in its `exec` (whose `smaps_rollup` can refuse
    /// a reader for that moment): tried again for up to
    /// [`TREE_OPEN_RETRY`] before falling back to the process alone.
    pub fn open_tree(pid: u32) -> Probe {
        let until = Instant::now() + TREE_OPEN_RETRY;
        loop {
            match tree::TreeProbe::open(pid) {
                Ok(p) => return Probe::Tree(p),
                Err(_) if Instant::now() < until && procfs::StatmProbe::open(pid).is_ok() => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return Probe::open(pid),
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Probe::Procfs(_) => "procfs-statm",
            Probe::Sysinfo(_) => "sysinfo",
            Probe::Tree(_) => TREE_SAMPLER,
            Probe::Unavailable => "none",
        }
    }

    pub fn read(&mut self) -> io::Result<Reading> {
        match self {
            Probe::Procfs(p) => p.read(),
            Probe::Sysinfo(p) => p.read(),
            Probe::Tree(p) => p.read(),
            Probe::Unavailable => Err(io::Error::other("no memory probe on this system")),
        }
    }
}

/// What the sampler thread hands back: the writer of its samples and the VRAM probe.
pub type Finished = (SampleWriter, Option<Box<dyn VramProbe>>);

/// What a sampler reads besides the process's memory and VRAM, where a run has it.
#[derive(Default)]
pub struct Extras {
    pub container: Option<CgroupProbe>,
    pub page_cache: Option<page_cache::PageCacheProbe>,
    /// The catalogued resources' probes (`resources::open_all`), every tick.
    pub resources: Vec<(&'static resources::ResourceDef, Box<dyn resources::Probe>)>,
}

/// A running sampler thread; `stop` hands its writer back.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    waker: tick::Waker,
    handle: JoinHandle<Finished>,
    pub probe_name: &'static str,
    /// The process tree at the latest reading, root first (a tree's
    /// sampler only; empty otherwise): who may outlive the root.
    pub tree_pids: Arc<Mutex<Vec<u32>>>,
    nudge: Nudge,
}

impl Sampler {
    /// Starts sampling `pid` (with `tree`: its whole process tree) every
    /// `interval`, times relative to `clock_zero`, into `writer`; with
    /// `page_cache`, the model files' page cache every `page_cache::PERIOD`.
    /// `Err`: the thread could not be started.
    pub fn start(
        pid: u32,
        interval: Duration,
        clock_zero: Instant,
        vram: Option<Box<dyn VramProbe>>,
        tree: bool,
        writer: SampleWriter,
    ) -> io::Result<Sampler> {
        Sampler::start_with(
            pid,
            interval,
            clock_zero,
            vram,
            tree,
            writer,
            Extras::default(),
        )
    }

    /// [`Sampler::start`], also reading what `extras` names: the worker's
    /// cgroup (`container`), the model files' page cache.
    pub fn start_with(
        pid: u32,
        interval: Duration,
        clock_zero: Instant,
        vram: Option<Box<dyn VramProbe>>,
        tree: bool,
        writer: SampleWriter,
        extras: Extras,
    ) -> io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let probe = if tree {
            Probe::open_tree(pid)
        } else {
            Probe::open(pid)
        };
        let probe_name = probe.name();
        let tree_pids = Arc::new(Mutex::new(Vec::new()));
        let flag = Arc::clone(&stop);
        let (mut ticker, waker) = tick::Ticker::start(interval);
        // A reading thread that cannot start leaves the samples without it
        // (the edges still have it).
        let page_cache = extras.page_cache.and_then(|p| p.spawn().ok());
        let nudge = Nudge::default();
        let mut reader = Reader {
            probe,
            side: Side {
                vram,
                container: extras.container,
                page_cache,
                resources: extras.resources,
            },
            writer,
            pid,
            clock_zero,
            processes: Vec::new(),
            tree_pids: Arc::clone(&tree_pids),
            nudge: nudge.clone(),
        };
        // The first reading is taken here, before the thread exists: every
        // run has one at its start however busy the machine is (a thread
        // not yet scheduled when a short program ends would have none).
        let alive = reader.once();
        let handle = std::thread::Builder::new()
            .name("memrel-sampler".into())
            .spawn(move || {
                if alive {
                    sample_loop(&mut reader, &mut ticker, &flag);
                }
                reader.nudge.close();
                if let Some(page_cache) = reader.side.page_cache {
                    page_cache.stop();
                }
                (reader.writer, reader.side.vram)
            })?;
        nudge.attach(waker.clone(), handle.thread().clone(), interval);
        Ok(Sampler {
            stop,
            waker,
            handle,
            probe_name,
            tree_pids,
            nudge,
        })
    }

    /// Asks this sampler for a reading now, from another thread.
    pub fn nudge(&self) -> Nudge {
        self.nudge.clone()
    }

    /// Stops and returns the writer (flushed by its `finish`).
    pub fn stop(self) -> io::Result<SampleWriter> {
        self.stop_keep_probe().map(|(writer, _)| writer)
    }

    /// Stops and returns the writer and the VRAM probe, for the next process
    /// of the same run (respawn) or for its checks. `Err`: the thread panicked.
    pub fn stop_keep_probe(self) -> io::Result<Finished> {
        self.stop.store(true, Ordering::Release);
        self.waker.wake(self.handle.thread());
        self.handle
            .join()
            .map_err(|_| io::Error::other("the sampler thread panicked"))
    }
}

/// What the loop reads besides the process's memory: its VRAM (every tick),
/// the worker's cgroup (at most every 10 ms), the model files' page cache
/// (the latest reading of its own thread) and the catalogued resources
/// (every tick).
struct Side {
    vram: Option<Box<dyn VramProbe>>,
    container: Option<CgroupProbe>,
    page_cache: Option<page_cache::PageCacheReader>,
    resources: Vec<(&'static resources::ResourceDef, Box<dyn resources::Probe>)>,
}

/// What the readings need: the probes, where they go, and a tree's pids
/// (copied into `tree_pids` at each reading, no allocation once grown).
/// The first reading is taken by the caller, the rest by the thread it
/// moves into.
struct Reader {
    probe: Probe,
    side: Side,
    writer: SampleWriter,
    pid: u32,
    clock_zero: Instant,
    processes: Vec<ProcessVram>,
    tree_pids: Arc<Mutex<Vec<u32>>>,
    nudge: Nudge,
}

impl Reader {
    /// One reading into one row: one `pread` of the probe, one clock read
    /// and a row into the writer's buffer (a `write` every 100 ms). `false`:
    /// the process is gone.
    fn once(&mut self) -> bool {
        let answering = self.nudge.begin();
        let Ok(reading) = self.probe.read() else {
            if answering {
                self.nudge.answer();
            }
            return false;
        };
        let t_s = self.clock_zero.elapsed().as_secs_f64();
        if let (Probe::Tree(tree), Ok(mut seen)) = (&self.probe, self.tree_pids.lock()) {
            if reading.rss_bytes > 0 {
                seen.clear();
                seen.extend_from_slice(tree.pids());
            }
        }
        // A zombie (exited, not yet reaped) reads as 0: not a real value.
        if reading.rss_bytes > 0 {
            let (vram_bytes, gpu_vram) = read_vram(
                &mut self.side.vram,
                &self.probe,
                self.pid,
                &mut self.processes,
            );
            let mut readings = crate::record::Readings::default();
            if !self.side.resources.is_empty() {
                let pids = match &self.probe {
                    Probe::Tree(tree) => tree.pids(),
                    _ => std::slice::from_ref(&self.pid),
                };
                resources::read_all(&mut self.side.resources, pids, &mut readings);
            }
            use crate::record::{Part, Resource};
            readings.set(Resource::Host, reading.rss_bytes);
            readings.set_part(Resource::Host, Part::Anon, reading.anon_bytes);
            readings.set_part(Resource::Host, Part::File, reading.file_bytes);
            readings.set_gpu_vram(&gpu_vram);
            readings.set_vram_column(0, vram_bytes);
            readings.set_container(self.side.container.as_mut().and_then(|c| c.read(false)));
            // Read on its own thread every `page_cache::PERIOD`: one atomic here.
            let page_cache = self.side.page_cache.as_ref().and_then(|p| p.take());
            readings.set_opt(Resource::PageCache, Part::Whole, page_cache);
            self.writer.write(&Sample::from_readings(t_s, readings));
            self.writer.write_processes(t_s, &self.processes);
        }
        // Answered whatever it read (a zombie's 0 is no row, and no reason
        // to keep the asker waiting).
        if answering {
            self.nudge.answer();
        }
        true
    }
}

/// After the first reading (taken by `Sampler::start_with`), one at every
/// tick of `ticker` (absolute deadlines: `tick`), until `stop` or the
/// process is gone; per tick also one `read` of the timer.
fn sample_loop(reading: &mut Reader, ticker: &mut tick::Ticker, stop: &AtomicBool) {
    let stopped = || stop.load(Ordering::Acquire);
    // A parked ticker also returns for a reading asked for now (`Nudge`).
    let nudge = reading.nudge.clone();
    let woken = || stopped() || nudge.wanted();
    // Fell behind (machine busy): the missed ticks are skipped, not burst.
    ticker.wait(&woken);
    while !stopped() {
        if !reading.once() {
            break;
        }
        ticker.wait(&woken);
    }
}

/// The sampled process's VRAM on the GPU NVML lists it on (on a machine of
/// one GPU, a process tree's sum; on several, the root's own) and, where NVML
/// sees several GPUs, every sampled process's on each (into `processes`)
/// with their sums.
fn read_vram(
    vram: &mut Option<Box<dyn VramProbe>>,
    probe: &Probe,
    pid: u32,
    processes: &mut Vec<ProcessVram>,
) -> (Option<u64>, GpuVram) {
    processes.clear();
    let Some(vram) = vram.as_mut() else {
        return (None, GpuVram::default());
    };
    let pids = match probe {
        Probe::Tree(tree) => tree.pids(),
        _ => std::slice::from_ref(&pid),
    };
    // Several GPUs: one pass over their process lists gives both. One GPU:
    // the tree's sum (a launcher or server often holds no context itself).
    match vram.per_gpu(pids, processes) {
        Some((root, touched)) => (root, GpuVram::of(touched, processes)),
        None => (vram.tree_bytes(pids), GpuVram::default()),
    }
}
