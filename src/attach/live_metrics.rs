//! `memrel watch --metrics`: the OpenMetrics state (`export::openmetrics`)
//! kept current while a measurement goes on, for a scrape at any moment.
//!
//! Bounded whatever the watch's length: it keeps the sampler's latest
//! samples (the [`SampleTap`], [`SAMPLES_KEPT`] of them), the first
//! [`FIRST_EVENTS_KEPT`] edges (where the baseline is) and the collector's
//! latest ones, and counts sleeps and wakes as their edges come. At a new
//! edge it summarises that window as any record is summarised
//! (`metrics::summarize`): each model's last closed cycle (one whose
//! phases all ended) is what `memrel report` would say of it; between
//! edges only the current bytes move. A settle longer than the samples
//! kept is timed from the edges alone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::export::openmetrics::{memory_of_sample, MetricsState};
use crate::metrics::summarize;
use crate::protocol::{Edge, Phase};
use crate::record::live::{SampleTap, TapState};
use crate::record::{Event, Header, Record, RunMeta, RunRecord};
use crate::session::Collected;

/// The latest samples kept for the cycles' times (release latency, settle).
pub const SAMPLES_KEPT: usize = 20_000;

/// The first edges kept for good: the baseline is among them.
pub const FIRST_EVENTS_KEPT: usize = 64;

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
    /// Edges the collector had taken at the last refresh.
    seen_events: usize,
    sleeps_total: u64,
    wakes_total: u64,
    cycles_total: u64,
    memory_at: Option<Instant>,
}

impl LiveMetrics {
    /// A state for the run of `meta` under `header`, and the tap its
    /// sampler's writer must fill.
    pub fn new(state: SharedState, header: Header, meta: RunMeta) -> LiveMetrics {
        let tap = Arc::new(Mutex::new(TapState {
            capacity: SAMPLES_KEPT,
            ..TapState::default()
        }));
        LiveMetrics {
            state,
            tap,
            header,
            meta,
            first_events: Vec::new(),
            seen_events: 0,
            sleeps_total: 0,
            wakes_total: 0,
            cycles_total: 0,
            memory_at: None,
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
            self.summarise(collected);
        } else if self.memory_at.is_none_or(|at| at.elapsed() >= MEMORY_EVERY) {
            self.memory_only();
        }
    }

    /// Every series again from the window (at a new edge).
    fn summarise(&mut self, collected: &Collected) {
        let (samples, samples_total) = match self.tap.lock() {
            Ok(tap) => (tap.recent.iter().cloned().collect(), tap.samples_total),
            Err(_) => return,
        };
        // The collector's window, less the edges already kept as the first.
        let skip =
            FIRST_EVENTS_KEPT.saturating_sub(collected.events_taken - collected.events.len());
        let events = self
            .first_events
            .iter()
            .chain(collected.events.iter().skip(skip))
            .cloned()
            .collect();
        let mut header = self.header.clone();
        header.cycles = collected.max_cycle().max(1);
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
        let mut state = MetricsState::of_record(&record, &summary, Default::default());
        // Cycles are numbered 1, 2, …: the highest closed is how many closed.
        let closed = state.cycles.iter().map(|c| u64::from(c.cycle)).max();
        self.cycles_total = self.cycles_total.max(closed.unwrap_or(0));
        state.cycles_total = self.cycles_total;
        state.sleeps_total = self.sleeps_total;
        state.wakes_total = self.wakes_total;
        state.samples_total = samples_total;
        self.memory_at = Some(Instant::now());
        if let Ok(mut shared) = self.state.lock() {
            *shared = state;
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
