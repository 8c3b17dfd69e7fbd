//! `memrel watch`'s live state: the OpenMetrics state
//! (`export::openmetrics`) kept current while a measurement goes on, for a
//! scrape at any moment, and each cycle written to cycles.csv as it closes
//! (`attach::segments`).
//!
//! Bounded whatever the watch's length: it keeps the sampler's latest
//! samples (the [`SampleTap`], [`SAMPLES_KEPT`] of them), the first
//! [`FIRST_EVENTS_KEPT`] edges (where the baseline is) and the edges of
//! each model's last two cycles (at most [`CYCLE_EVENTS_KEPT`], of
//! [`MODELS_KEPT`] models), and counts sleeps and wakes as their edges
//! come. At a new edge it summarises that window as any record is
//! summarised (`metrics::summarize`): each model's last closed cycle (one
//! whose phases all ended) is what `memrel report` would say of it;
//! between edges only the current bytes move. A settle longer than the
//! samples kept is timed from the edges alone. Its working copies are
//! made on a thread of their own (an allocator arena apart from the loop's
//! long-lived allocations) and given back to the system after each summary
//! (`malloc_trim`), so its resident memory stays flat.
//!
//! A watch that goes on from an earlier segment (a restart under the same
//! `--out`) starts from that segment's state: its counters and cycle
//! numbers continue, and a model's last cycle is served until it closes
//! another.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::segments::{append_closed, CyclesFile};
use crate::export::openmetrics::{memory_of_sample, MetricsState};
use crate::metrics::summarize;
use crate::protocol::{Edge, Phase};
use crate::record::live::{SampleTap, TapState};
use crate::record::{Event, Header, Record, RunMeta, RunRecord};
use crate::session::Collected;

/// The latest samples kept for the cycles' times (release latency, settle).
pub const SAMPLES_KEPT: usize = 20_000;

/// The first edges kept for good: the baseline is among them.
pub const FIRST_EVENTS_KEPT: usize = 16;

/// At most this many edges of the models' last cycles are kept (the oldest
/// dropped): a cycle is a handful of edges.
pub const CYCLE_EVENTS_KEPT: usize = 2_048;

/// The models whose last cycles are kept (the least recently seen dropped).
pub const MODELS_KEPT: usize = 64;

/// How often the current bytes are taken from the latest sample.
const MEMORY_EVERY: Duration = Duration::from_millis(200);

/// The state a scrape renders, shared with the `/metrics` server.
pub type SharedState = Arc<Mutex<MetricsState>>;

/// Keeps a [`SharedState`] current from the loop of a measurement.
pub struct LiveMetrics {
    state: SharedState,
    tap: SampleTap,
    header: Header,
    meta: RunMeta,
    first_events: Vec<Event>,
    /// Edges after the first: those of each model's last two cycles.
    cycle_events: VecDeque<Event>,
    /// Per model, its last two cycle numbers, the most recently seen model last.
    models: Vec<(Option<String>, [u32; 2])>,
    /// Edges the collector had taken at the last refresh.
    seen_events: usize,
    /// Where the watch left off before this segment (counters, each
    /// model's last cycle), and the cycle numbers it had used.
    carried: MetricsState,
    cycle_offset: u32,
    sleeps_total: u64,
    wakes_total: u64,
    cycles_total: u64,
    memory_at: Option<Instant>,
    cycles_file: CyclesFile,
    /// The highest cycle number written to cycles.csv.
    cycles_written: u32,
    /// The first failure to write cycles.csv (said once on stderr).
    cycles_error: bool,
}

impl LiveMetrics {
    /// A state for the run of `meta` under `header`, writing cycles.csv in
    /// `dir`, going on from what `state` holds (an earlier segment's state,
    /// or nothing); and the tap its sampler's writer must fill.
    pub fn new(state: SharedState, header: Header, meta: RunMeta, dir: &Path) -> LiveMetrics {
        let tap = Arc::new(Mutex::new(TapState {
            capacity: SAMPLES_KEPT,
            ..TapState::default()
        }));
        let carried = match state.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let cycle_offset = u32::try_from(carried.cycles_total).unwrap_or(u32::MAX);
        LiveMetrics {
            state,
            tap,
            header,
            meta,
            first_events: Vec::new(),
            cycle_events: VecDeque::new(),
            models: Vec::new(),
            seen_events: 0,
            sleeps_total: carried.sleeps_total,
            wakes_total: carried.wakes_total,
            cycles_total: carried.cycles_total,
            carried,
            cycle_offset,
            memory_at: None,
            cycles_file: CyclesFile::in_dir(dir),
            cycles_written: cycle_offset,
            cycles_error: false,
        }
    }

    /// The tap for the sampler's writer (`SampleWriter::with_tap`).
    pub fn tap(&self) -> SampleTap {
        self.tap.clone()
    }

    /// Called at every tick of the loop: new edges are summarised, the
    /// current bytes taken every [`MEMORY_EVERY`].
    pub fn refresh(&mut self, collected: &Collected) {
        let new = collected.events_taken.saturating_sub(self.seen_events);
        let window = &collected.events;
        let fresh = &window[window.len().saturating_sub(new)..];
        let first_index = collected.events_taken - fresh.len();
        for (i, e) in fresh.iter().enumerate() {
            if first_index + i < FIRST_EVENTS_KEPT {
                self.first_events.push(e.clone());
            } else {
                self.keep(e);
            }
            if e.edge.edge == Edge::End {
                match e.edge.phase {
                    Phase::Sleep => self.sleeps_total += 1,
                    Phase::Wake => self.wakes_total += 1,
                    _ => {}
                }
            }
        }
        self.seen_events = collected.events_taken;
        if new > 0 {
            self.summarise(collected.max_cycle());
            trim_freed_memory();
        } else if self.memory_at.is_none_or(|at| at.elapsed() >= MEMORY_EVERY) {
            self.memory_only();
        }
    }

    /// Keeps `e` among the cycle edges and drops those of no model's last
    /// two cycles.
    fn keep(&mut self, e: &Event) {
        let (model, cycle) = (&e.edge.model, e.edge.cycle);
        let at = self.models.iter().position(|(m, _)| m == model);
        let mut cycles = at.map_or([cycle, cycle], |i| self.models.remove(i).1);
        if cycles[1] != cycle {
            cycles = [cycles[1], cycle];
        }
        self.models.push((model.clone(), cycles));
        if self.models.len() > MODELS_KEPT {
            self.models.remove(0);
        }
        self.cycle_events.push_back(e.clone());
        let wanted: BTreeSet<u32> = self.models.iter().flat_map(|(_, c)| *c).collect();
        self.cycle_events.retain(|e| wanted.contains(&e.edge.cycle));
        while self.cycle_events.len() > CYCLE_EVENTS_KEPT {
            self.cycle_events.pop_front();
        }
    }

    /// Every series again from the window (at a new edge); cycles that
    /// closed since the last summary go to cycles.csv.
    fn summarise(&mut self, max_cycle: u32) {
        // The summary's working copies (the kept samples, some 20,000 small
        // allocations) are made and freed on a thread of its own, so in an
        // allocator arena of their own: on the loop's thread they fell
        // between its long-lived allocations, and the pages they scattered
        // over stayed resident (the main heap grew some 200 B an edge).
        // A thread that cannot start: here, as before; one that panicked
        // (said on stderr by the hook): this edge's summary is skipped.
        let this = &*self;
        let made = std::thread::scope(|scope| {
            let summary = std::thread::Builder::new()
                .name("memrel-summary".into())
                .spawn_scoped(scope, || this.state_of_window(max_cycle));
            match summary {
                Ok(summary) => summary.join().ok().flatten(),
                Err(_) => this.state_of_window(max_cycle),
            }
        });
        let Some((mut state, samples_total)) = made else {
            return;
        };
        for c in state.cycles.iter_mut() {
            c.cycle = c.cycle.saturating_add(self.cycle_offset);
        }
        // Cycles are numbered 1, 2, …: the highest closed is how many closed.
        let closed = state.cycles.iter().map(|c| u64::from(c.cycle)).max();
        self.cycles_total = self.cycles_total.max(closed.unwrap_or(0));
        state.cycles_total = self.cycles_total;
        state.sleeps_total = self.sleeps_total;
        state.wakes_total = self.wakes_total;
        state.samples_total = samples_total;
        self.write_closed(&state);
        state.cycles = with_carried(&self.carried.cycles, state.cycles);
        self.memory_at = Some(Instant::now());
        if let Ok(mut shared) = self.state.lock() {
            *shared = state;
        }
    }

    /// What `memrel report` would serve of the window kept now, and the
    /// samples taken so far; `None` where the tap's lock is poisoned.
    fn state_of_window(&self, max_cycle: u32) -> Option<(MetricsState, u64)> {
        let (samples, samples_total) = match self.tap.lock() {
            Ok(tap) => (tap.recent.iter().cloned().collect(), tap.samples_total),
            Err(_) => return None,
        };
        let events = self
            .first_events
            .iter()
            .chain(self.cycle_events.iter())
            .cloned()
            .collect();
        let mut header = self.header.clone();
        header.cycles = max_cycle.max(1);
        let record = Record {
            header,
            runs: vec![RunRecord {
                meta: self.meta.clone(),
                samples,
                events,
                decimation: None,
            }],
        };
        let summary = summarize(&record);
        let state = MetricsState::of_record(&record, &summary, Default::default());
        Some((state, samples_total))
    }

    /// Appends the cycles of `state` that closed since the last ones written.
    fn write_closed(&mut self, state: &MetricsState) {
        let appended = append_closed(
            &mut self.cycles_file,
            state,
            self.cycle_offset,
            self.cycles_written,
        );
        match appended {
            Ok(highest) => self.cycles_written = highest,
            Err(e) if !self.cycles_error => {
                self.cycles_error = true;
                eprintln!("memrel: warning: closed cycles are not kept: {e:#}");
            }
            Err(_) => {}
        }
    }

    /// The current bytes and the samples' count only.
    fn memory_only(&mut self) {
        let Some((memory, samples_total)) = self.tap.lock().ok().map(|tap| {
            let pid = (self.meta.pid != 0).then_some(self.meta.pid);
            let memory = tap.recent.back().map(|s| memory_of_sample(s, pid));
            (memory, tap.samples_total)
        }) else {
            return;
        };
        self.memory_at = Some(Instant::now());
        if let Ok(mut shared) = self.state.lock() {
            if let Some(memory) = memory {
                shared.memory = memory;
            }
            shared.samples_total = samples_total;
        }
    }
}

/// `own` cycles, and the carried ones of a model and resource that has
/// none of its own yet, in (model, resource) order.
fn with_carried(
    carried: &[crate::export::openmetrics::CycleValues],
    own: Vec<crate::export::openmetrics::CycleValues>,
) -> Vec<crate::export::openmetrics::CycleValues> {
    let mut all: BTreeMap<_, _> = carried
        .iter()
        .map(|c| ((c.model.clone(), c.resource.clone()), c.clone()))
        .collect();
    for c in own {
        all.insert((c.model.clone(), c.resource.clone()), c);
    }
    all.into_values().collect()
}

/// Gives the memory a summary freed back to the system: its copies of the
/// samples are megabytes, which glibc would otherwise keep for the next.
fn trim_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
