//! The sampler: a thread in the parent that reads the worker's memory at a
//! fixed interval and timestamps every reading on the run's clock.
//!
//! It must stay cheap (it shares the machine with the workload) and its
//! memory must not grow with the length of a run: each reading is written
//! as one row of samples.csv (buffered, flushed every 100 ms:
//! `record::live`) and kept nowhere else; the probes' buffers are grown once
//! and reused, and the one map a reading makes (a handful of entries) is
//! freed once its row is written. It never parses events: a row's phase
//! is the one the orchestrator last heard of, made exact when the run ends.
//!
//! A reading is the host probe's ([`Probe`]: whether the process is still
//! there, and which processes are measured), then every other probe of the
//! run in one loop (`probe::read_each`: VRAM, the catalogued resources,
//! the container, the page cache) into one map of readings, which is the
//! row (`Sample::from_readings`). The edge reader (`session::edges`) reads
//! the same kinds of probe the same way; `session::ProbeSet` opens both
//! readers' probes.

pub mod container;
pub mod hwm;
pub mod mappings;
mod nudge;
pub mod nvml;
mod nvml_list;
pub mod orphans;
pub mod page_cache;
mod portable;
pub mod probe;
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

use crate::record::live::SampleWriter;
use crate::record::{Part, Readings, Resource, Sample};
pub use nudge::Nudge;
use probe::{Got, Measured, ResourceProbe};
pub use vram::VramProbe;

/// One memory reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
}

impl Reading {
    /// Into `into` as host memory (replacing a host reading there); a
    /// zombie's 0 (exited, not yet reaped) is not a value: nothing.
    pub fn put(self, into: &mut Readings) -> Got {
        if self.rss_bytes == 0 {
            return Got::Nothing;
        }
        into.set(Resource::Host, self.rss_bytes);
        into.set_part(Resource::Host, Part::Anon, self.anon_bytes);
        into.set_part(Resource::Host, Part::File, self.file_bytes);
        Got::Read
    }

    /// The host reading of `readings`, if it has one.
    pub fn of(readings: &Readings) -> Option<Reading> {
        Some(Reading {
            rss_bytes: readings.get(Resource::Host)?,
            anon_bytes: readings.part(Resource::Host, Part::Anon).unwrap_or(0),
            file_bytes: readings.part(Resource::Host, Part::File).unwrap_or(0),
        })
    }
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

/// Where host memory readings come from: the host probe, which also
/// decides what every other probe measures ([`Probe::measured`]).
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

    /// Whether its readings are a process tree's.
    pub fn is_tree(&self) -> bool {
        matches!(self, Probe::Tree(_))
    }

    /// What a reading measures: a tree's processes at its latest reading
    /// (`root` before the first), else `root`, the process alone.
    pub fn measured<'a>(&'a self, root: &'a [u32]) -> Measured<'a> {
        match self {
            Probe::Tree(t) if !t.pids().is_empty() => Measured {
                pids: t.pids(),
                tree: true,
            },
            Probe::Tree(_) => Measured {
                pids: root,
                tree: true,
            },
            _ => Measured::process(root),
        }
    }
}

impl ResourceProbe for Probe {
    /// The host reading of its kind (statm, sysinfo, a tree's PSS);
    /// [`Got::Gone`] once the process is (or, with no probe, always).
    fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
        match self {
            Probe::Procfs(p) => ResourceProbe::read(p, at, into),
            Probe::Sysinfo(p) => ResourceProbe::read(p, at, into),
            Probe::Tree(p) => ResourceProbe::read(p, at, into),
            Probe::Unavailable if into.get(Resource::Host).is_some() => Got::Kept,
            Probe::Unavailable => Got::Gone,
        }
    }

    fn how(&self) -> String {
        match self {
            Probe::Procfs(p) => p.how(),
            Probe::Sysinfo(p) => p.how(),
            Probe::Tree(p) => p.how(),
            Probe::Unavailable => "nothing (no memory probe on this system)".into(),
        }
    }
}

/// What the sampler thread hands back: the writer of its samples and the VRAM probe.
pub type Finished = (SampleWriter, Option<Box<dyn VramProbe>>);

/// What a sampler reads: host memory (which also says whether the process
/// is there and which processes are measured), then every other probe in
/// the order given (`session::ProbeSet::open` opens them: VRAM, the
/// catalogued resources, the container, the page cache's sampling thread).
pub struct Probes {
    pub host: Probe,
    pub others: Vec<Box<dyn ResourceProbe>>,
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
    /// Starts sampling `pid` with `probes` every `interval`, times relative
    /// to `clock_zero`, into `writer`. `Err`: the thread could not be started.
    pub fn start(
        pid: u32,
        interval: Duration,
        clock_zero: Instant,
        writer: SampleWriter,
        probes: Probes,
    ) -> io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let probe_name = probes.host.name();
        let tree_pids = Arc::new(Mutex::new(Vec::new()));
        let flag = Arc::clone(&stop);
        let (mut ticker, waker) = tick::Ticker::start(interval);
        let nudge = Nudge::default();
        let mut reader = Reader {
            host: probes.host,
            probes: probes.others,
            writer,
            pid,
            clock_zero,
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
                let vram = probe::take::<vram::Vram>(&mut reader.probes).map(|v| v.into_inner());
                // Stops the page cache's thread.
                drop(reader.probes);
                (reader.writer, vram)
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

/// What the readings need: the probes, where they go, and a tree's pids
/// (copied into `tree_pids` at each reading, no allocation once grown).
/// The first reading is taken by the caller, the rest by the thread it
/// moves into.
struct Reader {
    /// Host memory: whether the process is there, and what is measured.
    host: Probe,
    /// Every other probe ([`Probes::others`]).
    probes: Vec<Box<dyn ResourceProbe>>,
    writer: SampleWriter,
    pid: u32,
    clock_zero: Instant,
    tree_pids: Arc<Mutex<Vec<u32>>>,
    nudge: Nudge,
}

impl Reader {
    /// One reading into one row: the host probe (one `pread` of statm),
    /// one clock read, every other probe into the same map of readings, and
    /// a row into the writer's buffer (a `write` every 100 ms). `false`: the
    /// process is gone.
    fn once(&mut self) -> bool {
        let answering = self.nudge.begin();
        let root = [self.pid];
        let mut readings = Readings::default();
        let at = Measured {
            pids: &root,
            tree: self.host.is_tree(),
        };
        let got = ResourceProbe::read(&mut self.host, &at, &mut readings);
        if got == Got::Gone {
            if answering {
                self.nudge.answer();
            }
            return false;
        }
        let t_s = self.clock_zero.elapsed().as_secs_f64();
        // A zombie (exited, not yet reaped) reads as 0: no row.
        if got == Got::Read {
            if let (Probe::Tree(tree), Ok(mut seen)) = (&self.host, self.tree_pids.lock()) {
                seen.clear();
                seen.extend_from_slice(tree.pids());
            }
            let at = self.host.measured(&root);
            probe::read_each(&mut self.probes, &at, &mut readings);
            self.writer.write(&Sample::from_readings(t_s, readings));
            // Each process's VRAM on each GPU (several GPUs only).
            if let Some(vram) = probe::find_mut::<vram::Vram>(&mut self.probes) {
                self.writer.write_processes(t_s, vram.processes());
            }
        }
        // Answered whatever it read (a zombie's 0 is no row, and no reason
        // to keep the asker waiting).
        if answering {
            self.nudge.answer();
        }
        true
    }
}

/// After the first reading (taken by `Sampler::start`), one at every
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::MemoryAtEdge;
    use crate::record::live::LivePhase;
    use crate::record::Key;
    use crate::session::edges::EdgeReader;
    use std::sync::atomic::AtomicUsize;

    /// A resource of its own kind: `bytes` under the key `fake`, its
    /// readings counted, the processes it was asked about kept.
    struct Fake {
        bytes: u64,
        reads: Arc<AtomicUsize>,
        pids: Arc<Mutex<Vec<u32>>>,
    }

    fn fake_key() -> Resource {
        Resource::Probed(Key::new("fake").unwrap())
    }

    impl ResourceProbe for Fake {
        fn read(&mut self, at: &Measured, into: &mut Readings) -> Got {
            self.reads.fetch_add(1, Ordering::Relaxed);
            *self.pids.lock().unwrap() = at.pids.to_vec();
            into.set(fake_key(), self.bytes);
            Got::Read
        }
        fn how(&self) -> String {
            "a fixed number".into()
        }
    }

    #[test]
    fn one_probe_is_read_by_the_samplers_tick_and_by_the_edge_reader() {
        let pid = std::process::id();
        let reads = Arc::new(AtomicUsize::new(0));
        let pids = Arc::new(Mutex::new(Vec::new()));
        let fake = || Fake {
            bytes: 7,
            reads: Arc::clone(&reads),
            pids: Arc::clone(&pids),
        };
        let run = crate::record::fixture::run(1, "drop", 1, &[0]);
        let mut reader = Reader {
            host: Probe::open(pid),
            probes: vec![Box::new(fake())],
            writer: SampleWriter::new(Box::new(io::sink()), &run.meta, LivePhase::default()),
            pid,
            clock_zero: Instant::now(),
            tree_pids: Arc::default(),
            nudge: Nudge::default(),
        };
        assert!(reader.once(), "this process is alive");
        let sample = reader.writer.last().expect("a row");
        assert!(sample.host_bytes() > 0, "{sample:?}");
        assert_eq!(sample.readings.get(fake_key()), Some(7));
        assert_eq!(reads.load(Ordering::Relaxed), 1);
        assert_eq!(*pids.lock().unwrap(), [pid]);

        let mut edges = EdgeReader::new(pid, Some(Probe::open(pid)), vec![Box::new(fake())]);
        let mut memory = MemoryAtEdge::default();
        let extras = edges.read(&mut memory);
        assert!(memory.rss_bytes > 0, "{memory:?}");
        assert_eq!(extras.readings.get(fake_key()), Some(7));
        assert_eq!(extras.readings.get(Resource::Host), Some(memory.rss_bytes));
        assert_eq!(reads.load(Ordering::Relaxed), 2);
        assert_eq!(*pids.lock().unwrap(), [pid]);
    }
}
