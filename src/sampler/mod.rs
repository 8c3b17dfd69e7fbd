//! The sampler: a thread in the parent that reads the worker's memory at a
//! fixed interval and timestamps every reading on the run's clock.
//!
//! It must stay cheap (it shares the machine with the workload) and must not
//! allocate per sample: each reading is written as one row of samples.csv
//! (buffered, flushed every 100 ms: `record::live`), so memrel's memory does
//! not grow with the length of a run. It never parses events: a row's phase
//! is the one the orchestrator last heard of, made exact when the run ends.

pub mod hwm;
pub mod nvml;
mod portable;
pub mod procfs;
mod tick;
pub mod tree;
pub mod vram;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::record::live::SampleWriter;
use crate::record::Sample;
pub use vram::VramProbe;

/// One memory reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
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
    /// loop skips the ticks it cannot keep.
    pub fn open_tree(pid: u32) -> Probe {
        match tree::TreeProbe::open(pid) {
            Ok(p) => Probe::Tree(p),
            Err(_) => Probe::open(pid),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Probe::Procfs(_) => "procfs-statm",
            Probe::Sysinfo(_) => "sysinfo",
            Probe::Tree(_) => "procfs-tree-pss",
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

/// A running sampler thread; `stop` hands its writer back.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    waker: tick::Waker,
    handle: JoinHandle<Finished>,
    pub probe_name: &'static str,
}

impl Sampler {
    /// Starts sampling `pid` (with `tree`: its whole process tree) every
    /// `interval`, times relative to `clock_zero`, into `writer`. `Err`: the
    /// thread could not be started.
    pub fn start(
        pid: u32,
        interval: Duration,
        clock_zero: Instant,
        vram: Option<Box<dyn VramProbe>>,
        tree: bool,
        mut writer: SampleWriter,
    ) -> io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut probe = if tree {
            Probe::open_tree(pid)
        } else {
            Probe::open(pid)
        };
        let probe_name = probe.name();
        let flag = Arc::clone(&stop);
        let (mut ticker, waker) = tick::Ticker::start(interval);
        let handle = std::thread::Builder::new()
            .name("memrel-sampler".into())
            .spawn(move || {
                let mut vram = vram;
                sample_loop(
                    &mut probe,
                    &mut vram,
                    &mut writer,
                    pid,
                    &mut ticker,
                    clock_zero,
                    &flag,
                );
                (writer, vram)
            })?;
        Ok(Sampler {
            stop,
            waker,
            handle,
            probe_name,
        })
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

/// Takes a reading at once and then at every tick of `ticker` (absolute
/// deadlines: `tick`), until `stop` or the process is gone. Per tick: one
/// `read` of the timer, one `pread` of the probe, one clock read and a row
/// into the writer's buffer (a `write` every 100 ms).
fn sample_loop(
    probe: &mut Probe,
    vram: &mut Option<Box<dyn VramProbe>>,
    writer: &mut SampleWriter,
    pid: u32,
    ticker: &mut tick::Ticker,
    clock_zero: Instant,
    stop: &AtomicBool,
) {
    let stopped = || stop.load(Ordering::Acquire);
    while !stopped() {
        let Ok(reading) = probe.read() else { break };
        let t_s = clock_zero.elapsed().as_secs_f64();
        // A zombie (exited, not yet reaped) reads as 0: not a real value.
        if reading.rss_bytes > 0 {
            writer.write(&Sample {
                t_s,
                rss_bytes: reading.rss_bytes,
                anon_bytes: reading.anon_bytes,
                file_bytes: reading.file_bytes,
                vram_bytes: vram.as_mut().and_then(|v| v.process_bytes(pid)),
            });
        }
        // Fell behind (machine busy): the missed ticks are skipped, not burst.
        ticker.wait(&stopped);
    }
}
