//! One measuring session, whatever started the measured process: memrel's
//! worker or a program it spawned (`run`, `exec`: `orchestrator`) or a
//! process it attached to (`attach`, `drive`: `attach`). Each names what it
//! measures (a [`Scope`]); the session opens every probe once
//! ([`ProbeSet::open`]), starts the sampler on its probes and hands the
//! edge reader its own, and when the measured process is done stops the
//! sampler and says what it left ([`Stopped`]). What arrives at the edges
//! is taken in by one collector (`intake`), read by one edge reader
//! (`edges`).
//!
//! It must not spawn, signal or wait on a process, nor know where phase
//! edges come from (a channel, marks, a log, requests): that is the
//! caller's loop, which this session only measures.

pub mod edges;
pub mod intake;
mod probes;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::record::live::SampleWriter;
use crate::record::Sample;
use crate::sampler::page_cache::PageCacheProbe;
use crate::sampler::{Nudge, Sampler, VramProbe};
pub use edges::EdgeReader;
pub(crate) use intake::ProgramState;
pub use intake::{Arrival, Collected};
pub use probes::{ProbeSet, Scope};

/// A measurement under way: the sampler on its probes.
pub struct Session {
    sampler: Sampler,
    page_cache: Option<PageCacheProbe>,
}

/// What a session left once its sampler stopped.
pub struct Stopped {
    /// Why its samples did not all reach samples.csv, worded for the run's error.
    pub sample_error: Option<String>,
    /// The VRAM probe, for the next process of the same run (respawn) or
    /// for its checks.
    pub vram: Option<Box<dyn VramProbe>>,
    /// The last sample taken.
    pub last: Option<Sample>,
    /// The model files' page cache (the edge reader may still hold a
    /// clone): see [`Stopped::page_cache_note`].
    page_cache: Option<PageCacheProbe>,
}

impl Stopped {
    /// Why the page cache's readings stopped, if they did (the readings
    /// before it are kept): asked once the edges are read too.
    pub fn page_cache_note(&self) -> Option<String> {
        self.page_cache.as_ref().and_then(|p| p.failure())
    }
}

impl Session {
    /// Opens every probe of `scope` and starts sampling every `interval`
    /// on the clock of `clock_zero` into `writer`; the edge reader comes
    /// back beside it, for the caller's loop. `Err`: the sampler's thread
    /// could not be started.
    pub fn start(
        scope: Scope,
        interval: Duration,
        clock_zero: Instant,
        writer: SampleWriter,
    ) -> io::Result<(Session, EdgeReader)> {
        let pid = scope.pid;
        let probes = ProbeSet::open(scope);
        let sampler = Sampler::start(pid, interval, clock_zero, writer, probes.sampler)?;
        let session = Session {
            sampler,
            page_cache: probes.page_cache,
        };
        Ok((session, probes.edges))
    }

    /// The host probe's name (the record's `sampler`: what was sampled).
    pub fn probe_name(&self) -> &'static str {
        self.sampler.probe_name
    }

    /// Asks the sampler for a reading now, from another thread.
    pub fn nudge(&self) -> Nudge {
        self.sampler.nudge()
    }

    /// The process tree at the latest reading, root first (a tree's only).
    pub fn tree_pids(&self) -> Arc<Mutex<Vec<u32>>> {
        Arc::clone(&self.sampler.tree_pids)
    }

    /// Stops the sampler (its last rows written) and says what it left.
    pub fn stop(self) -> Stopped {
        let (sample_error, vram, last) = match self.sampler.stop_keep_probe() {
            Ok((writer, vram)) => {
                let last = writer.last();
                (writer.finish(), vram, last)
            }
            Err(e) => (Some(e.to_string()), None, None),
        };
        Stopped {
            sample_error: sample_error
                .map(|e| format!("cannot write the run's samples to samples.csv: {e}")),
            vram,
            last,
            page_cache: self.page_cache,
        }
    }
}
