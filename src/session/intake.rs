//! What arrives on a run's event channel (an [`Arrival`]), or a mark of an
//! attached process, taken in: phase edges stamped on the run's clock
//! (their readings were taken by `edges` as each line was read), a
//! program's phase lines numbered, hello/done/handover/error messages,
//! protocol errors counted, and the kernel's peak given to the edge it
//! belongs to. It reads no memory itself and decides no outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::edges::EdgeExtras;
use crate::protocol::{Check, Edge, Envelope, Message, Phase, PhaseEdge, Resume};
use crate::record::{Event, Part, Readings, Resource, RunMeta, ViewKind};
use crate::strategy::{ProgramActions, Strategy};
use crate::worker::command::CycleNumbering;

/// How many of a run's latest phase edges the orchestrator keeps (to time
/// an end edge from its begin); all of them are on disk.
const EVENTS_KEPT: usize = 1024;

/// As many for marks (`memrel attach`, `watch`, `drive`): a mark's end is
/// timed from its begin, among the latest few edges (a mark ends the phase
/// the one before began), so a watch of days keeps its memory flat
/// (`attach::live_metrics` keeps the cycles /metrics serves itself).
const MARK_EVENTS_KEPT: usize = 128;

/// How many bad channel lines are quoted in the run's error (all are counted).
const PROTOCOL_ERRORS_QUOTED: usize = 3;

/// How many bad view keys of a run are warned about (each once).
const BAD_VIEW_KEYS_WARNED: usize = 16;

/// One line of a run's event channel (`orchestrator`'s), as its reading
/// thread hands it on.
#[derive(Debug)]
pub struct Arrival {
    /// When it arrived (seconds on the run's clock).
    pub t_s: f64,
    /// The message, or what was wrong with it.
    pub parsed: Result<Envelope, String>,
    /// For a phase edge: the kernel's peak of the worker's RSS since its
    /// previous edge (read, then reset, as the line arrived: `sampler::hwm`),
    /// or why there is none; `None` for other lines and for an edge read
    /// after the worker ended.
    pub kernel_peak: Option<Result<u64, String>>,
    /// For a phase edge: what its reading gives beyond the line's memory
    /// (VRAM per GPU), read as the line arrived.
    pub extras: EdgeExtras,
}

/// What the parent completes for a program's phase lines.
pub(crate) struct ProgramState {
    pub(crate) numbering: CycleNumbering,
    pub(crate) environment_checked: bool,
    /// The latest look's checks while one fails (`PROGRAM_LOOK_UNTIL`).
    pub(crate) failed_checks: Vec<Check>,
}

impl ProgramState {
    /// Gives a program's phase line its cycle where it left it out (its
    /// host memory was read as the line arrived: `channel`).
    pub(crate) fn complete(&mut self, edge: &mut PhaseEdge) {
        self.numbering.assign(edge);
    }
}

/// What arrived on the channel (of every process of the run), or the
/// marks of an attached process (`for_marks`).
#[derive(Default)]
pub struct Collected {
    /// The latest edges (at most [`EVENTS_KEPT`]): each is also handed to
    /// `on_event`, which writes it to events.csv, where the record's full
    /// list is read back from; a run of any length keeps memory flat.
    pub(crate) events: Vec<Event>,
    pub(crate) events_taken: usize,
    /// The highest cycle of the edges taken.
    pub(crate) max_cycle: u32,
    /// A release phase ended (a program's release steps ran).
    pub(crate) released: bool,
    pub(crate) done: bool,
    /// memrel's workers must end with `done`; a program need not.
    pub(crate) needs_done: bool,
    /// The samples are a process tree's (`--tree`): a process's own VmHWM
    /// (in `done`) is not their scope, so the run keeps none.
    pub(crate) tree: bool,
    /// Set while the run's process is a program (see [`ProgramState`]).
    pub(crate) program: Option<ProgramState>,
    /// The worker was killed by the OOM killer: the run's error (see `cgroup::oom`).
    pub(crate) oom_killed: Option<String>,
    pub(crate) hello: bool,
    /// Why a program's run measured something other than its strategy.
    pub(crate) not_in_effect: Option<String>,
    /// The run's clock zero on `CLOCK_MONOTONIC`, for edges that carry `mono_s`.
    pub(crate) zero_mono_s: f64,
    /// The process ended at a release step; the next one resumes here.
    pub(crate) handover: Option<Resume>,
    /// Processes started after the first (respawn).
    pub(crate) processes: u32,
    pub(crate) worker_error: Option<String>,
    pub(crate) protocol_errors: Vec<String>,
    pub(crate) protocol_error_count: usize,
    /// The view keys a program sent that are no view (warned about once).
    pub(crate) bad_view_keys: BTreeSet<String>,
    /// At most this many of the latest edges are kept (0: [`EVENTS_KEPT`]).
    pub(crate) events_kept: usize,
}

impl Collected {
    /// A collector of marks (`memrel attach`, `memrel drive`): phase edges
    /// that leave their cycle out, numbered as a program's are.
    pub fn for_marks() -> Collected {
        Collected {
            program: Some(ProgramState {
                numbering: CycleNumbering::default(),
                environment_checked: true,
                failed_checks: Vec::new(),
            }),
            events_kept: MARK_EVENTS_KEPT,
            ..Collected::default()
        }
    }

    /// Takes one phase edge read at `t_s` on the run's clock (its memory
    /// and `extras` read by the edge reader): gives it its cycle where it
    /// has none, keeps edges in time order (an edge never precedes the one
    /// before it), times an end from its begin, and hands the event to
    /// `on_event` (which writes it). A run's channel lines and attach's
    /// marks all come through here.
    pub fn take_edge(
        &mut self,
        mut edge: PhaseEdge,
        t_s: f64,
        kernel_peak_bytes: Option<u64>,
        extras: EdgeExtras,
        on_event: &mut dyn FnMut(&Event),
    ) {
        if let Some(program) = self.program.as_mut() {
            program.complete(&mut edge);
        }
        // The wait ends where it ended, whichever time the edge keeps.
        let held_until_s = extras.held_s.map(|held_s| t_s + held_s);
        let t_s = self.events.last().map_or(t_s, |last| t_s.max(last.t_s));
        if edge.elapsed_s.is_none() && edge.edge == Edge::End {
            edge.elapsed_s = self.began(&edge).map(|begin| t_s - begin);
        }
        self.max_cycle = self.max_cycle.max(edge.cycle);
        // The edge reader's map (the line's own reading with what the
        // parent read, `memory` its mirror); a line no reader saw: its memory.
        let mut readings = if extras.readings.is_empty() {
            Readings::of_line(&edge.memory)
        } else {
            extras.readings
        };
        readings.or_unread_host();
        readings.set_opt(Resource::Host, Part::Peak, kernel_peak_bytes);
        let views = std::mem::take(&mut edge.views);
        self.take_views(views, &mut readings);
        let event = Event {
            t_s,
            edge,
            readings,
            held_s: held_until_s.map(|until_s| (until_s - t_s).max(0.0)),
        };
        on_event(&event);
        self.events_taken += 1;
        self.released |= event.edge.phase == Phase::Release && event.edge.edge == Edge::End;
        let kept = match self.events_kept {
            0 => EVENTS_KEPT,
            n => n,
        };
        if self.events.len() >= kept {
            self.events.drain(..kept / 2);
        }
        self.events.push(event);
    }

    /// A program's views of its frameworks (`PhaseEdge::views`) into its
    /// edge's readings, as parts of host memory or a GPU (`Part::View`);
    /// any other key is dropped, with one warning per key: a program never
    /// overrides what memrel reads itself, and a bad key fails nothing.
    fn take_views(&mut self, views: BTreeMap<String, u64>, readings: &mut Readings) {
        for (key, bytes) in views {
            match view_part(&key) {
                Some((resource, part)) => readings.set_part(resource, part, bytes),
                None if self.bad_view_keys.len() < BAD_VIEW_KEYS_WARNED
                    && self.bad_view_keys.insert(key.clone()) =>
                {
                    eprintln!("memrel: warning: {}", bad_view_key(&key));
                }
                None => {}
            }
        }
    }

    /// The highest cycle of the edges taken (0 before any).
    pub fn max_cycle(&self) -> u32 {
        self.max_cycle
    }

    pub(crate) fn take(
        &mut self,
        arrival: Arrival,
        meta: &mut RunMeta,
        on_event: &mut dyn FnMut(&Event),
    ) {
        let Arrival {
            t_s: arrived_s,
            parsed,
            kernel_peak,
            extras,
        } = arrival;
        let mut t_s = arrived_s;
        let kernel_peak_bytes = match kernel_peak {
            Some(Ok(bytes)) => {
                // Each reset leaves VmHWM (and wait4's ru_maxrss) the peak
                // since the last edge only: the run's peak is the largest.
                meta.vm_hwm_bytes = meta.vm_hwm_bytes.max(Some(bytes));
                Some(bytes)
            }
            Some(Err(why)) => {
                meta.kernel_peak_unavailable.get_or_insert(why);
                None
            }
            None => None,
        };
        let envelope = match parsed {
            Ok(envelope) => envelope,
            Err(e) => {
                self.protocol_error_count += 1;
                if self.protocol_errors.len() < PROTOCOL_ERRORS_QUOTED {
                    self.protocol_errors.push(format!("at {t_s:.3} s: {e}"));
                }
                return;
            }
        };
        match envelope.message {
            Message::Hello(hello) => {
                self.hello = true;
                if self.processes == 0 {
                    meta.vram_floor_bytes = hello.vram_floor_bytes;
                    meta.allocator = hello.allocator;
                    meta.checks.extend(hello.checks);
                } else {
                    // A respawned process repeats the checks: keep what failed.
                    meta.checks
                        .extend(hello.checks.into_iter().filter(|c| !c.ok));
                }
            }
            Message::Phase(edge) => {
                // The sender's own stamp, on the samples' clock: an edge
                // happened before its line arrived, never after.
                let mut extras = extras;
                if let Some(sent_s) = edge.mono_s.map(|m| m - self.zero_mono_s) {
                    if (0.0..=arrived_s).contains(&sent_s) {
                        t_s = sent_s;
                        // A waiting sender waited from its send.
                        extras.held_s = extras.held_s.map(|h| h + arrived_s - sent_s);
                    }
                }
                self.take_edge(edge, t_s, kernel_peak_bytes, extras, on_event);
            }
            Message::Done(d) if self.tree => {
                meta.checks.extend(d.checks);
                self.done = true;
            }
            Message::Done(d) => {
                meta.vm_hwm_bytes = meta.vm_hwm_bytes.max(Some(d.vm_hwm_bytes));
                self.fill_trailing_peak(Some(d.vm_hwm_bytes), meta);
                meta.checks.extend(d.checks);
                self.done = true;
            }
            Message::Handover(h) => {
                meta.vm_hwm_bytes = meta.vm_hwm_bytes.max(Some(h.vm_hwm_bytes));
                self.fill_trailing_peak(Some(h.vm_hwm_bytes), meta);
                self.handover = Some(h.resume);
            }
            Message::Error(e) => self.worker_error = Some(e.message),
        }
    }

    /// Gives the last edge the peak its line came too late for. An edge
    /// read after its process exited has no VmHWM to read (it went with
    /// the process's memory): a worker that sends its last edge and exits
    /// at once, on a busy machine, outruns the parent's reader. When that
    /// edge is the only one since the last reset, `peak_bytes` (the
    /// process's own VmHWM in its last message, `done` or `handover`, else
    /// `wait4`'s `ru_maxrss`) is the peak from that reset to the end: the
    /// edge's span and the moment after it, in which the process only
    /// exits. (`ru_maxrss` also holds the peak of any child the process
    /// waited for.) Two or more such edges share one number: none is given.
    pub(crate) fn fill_trailing_peak(&mut self, peak_bytes: Option<u64>, meta: &RunMeta) {
        let Some(peak_bytes) = peak_bytes else {
            return;
        };
        if meta.kernel_peak_unavailable.is_some() {
            return;
        }
        let n = self.events.len();
        let before_has_peak = n < 2 || self.events[n - 2].kernel_peak_bytes().is_some();
        if let Some(last) = self.events.last_mut() {
            if last.kernel_peak_bytes().is_none() && before_has_peak {
                last.readings.set_part(
                    crate::record::Resource::Host,
                    crate::record::Part::Peak,
                    peak_bytes,
                );
            }
        }
    }

    /// When the phase `end` closes began, on the run's clock: for an end edge
    /// sent by another process than its begin (a respawn's release), whose
    /// duration only the parent's clock can give.
    pub(crate) fn began(&self, end: &PhaseEdge) -> Option<f64> {
        self.events
            .iter()
            .rev()
            .find(|e| e.edge.phase == end.phase && e.edge.cycle == end.cycle)
            .filter(|e| e.edge.edge == Edge::Begin)
            .map(|e| e.t_s)
    }

    /// Takes what is still in the channel until it ends or `grace` passes.
    pub(crate) fn drain(
        &mut self,
        messages: &Receiver<Arrival>,
        grace: Duration,
        meta: &mut RunMeta,
        on_event: &mut dyn FnMut(&Event),
    ) {
        let deadline = Instant::now() + grace;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match messages.recv_timeout(left) {
                Ok(arrival) => self.take(arrival, meta, on_event),
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    self.worker_error.get_or_insert_with(|| {
                        format!(
                            "the event channel stayed open {:.0} s after the worker ended \
                             (a process outside its group holds it)",
                            grace.as_secs_f64()
                        )
                    });
                    return;
                }
            }
        }
    }

    /// A program's run measures its strategy only if the strategy reached it:
    /// its environment and allocator (the parent's checks), its start steps
    /// (`import memrel`: a hello) and its release steps (a release phase).
    /// A strategy that works from outside (an environment setting whose
    /// steps only read it back or collect garbage) needs neither.
    pub(crate) fn judge_program(&mut self, strategy: &Strategy, checks: &[Check]) {
        let actions = if strategy.works_from_outside() {
            ProgramActions::default()
        } else {
            strategy.for_programs().unwrap_or_default()
        };
        let released = self.released;
        self.not_in_effect = if let Some(c) = checks.iter().find(|c| !c.ok) {
            Some(format!(
                "strategy {:?} did not take effect in the program: {} ({})",
                strategy.name, c.name, c.detail
            ))
        } else if !actions.start.is_empty() && !self.hello {
            Some(format!(
                "strategy {:?} has steps the program must take at start ({}), but it never imported \
                 memrel (no hello on the channel): add `import memrel` at its top",
                strategy.name,
                actions.start.join(", ")
            ))
        } else if !actions.release.is_empty() && !released {
            Some(format!(
                "strategy {:?} releases inside the program ({}), but the program never called \
                 memrel.release() (no release phase arrived): call it where the program frees its models",
                strategy.name,
                actions.release.join(", ")
            ))
        } else {
            None
        };
    }

    /// The protocol errors as one sentence, if there were any.
    pub(crate) fn protocol_error(&self) -> Option<String> {
        if self.protocol_error_count == 0 {
            return None;
        }
        let more = self.protocol_error_count - self.protocol_errors.len();
        let more = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        Some(format!(
            "{} bad line(s) on the worker's event channel{more}: {}",
            self.protocol_error_count,
            self.protocol_errors.join("; ")
        ))
    }
}

/// The resource and part a program's view key names (`cuda:0.torch_reserved`,
/// `host.torch_pinned_held`), `None` for any other key.
fn view_part(key: &str) -> Option<(Resource, Part)> {
    let (resource, word) = key.split_once('.')?;
    let kind = ViewKind::parse(word)?;
    match Resource::parse(resource)? {
        Resource::Host if kind.on_host() => Some((Resource::Host, Part::View(kind))),
        Resource::Device(n) if !kind.on_host() => Some((Resource::Device(n), Part::View(kind))),
        _ => None,
    }
}

/// The warning for a view key that names no view: the key and the words
/// accepted.
fn bad_view_key(key: &str) -> String {
    let words = |on_host: bool| -> String {
        let words: Vec<&str> = ViewKind::ALL
            .into_iter()
            .filter(|k| k.on_host() == on_host)
            .map(ViewKind::key)
            .collect();
        words.join(", ")
    };
    format!(
        "the program's view {key:?} is not one memrel takes (dropped): host.WORD with WORD one of \
         {}, or cuda:N.WORD with WORD one of {}",
        words(true),
        words(false)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_frameworks_part_of_the_host_or_a_gpu_is_a_view() {
        let view = |k| Part::View(k);
        assert_eq!(
            view_part("cuda:1.torch_reserved"),
            Some((Resource::Device(1), view(ViewKind::TorchReserved)))
        );
        assert_eq!(
            view_part("host.torch_pinned_held"),
            Some((Resource::Host, view(ViewKind::TorchPinnedHeld)))
        );
        for bad in [
            "cuda:0",
            "host",
            "host.anon",
            "host.heap",
            "cuda:0.own",
            "host.torch_reserved",
            "cuda:0.torch_pinned_held",
            "shm.jax_pool",
            "cuda:x.jax_pool",
            "CUDA:0.jax_pool",
            "cuda:0.jax_pool.x",
        ] {
            assert_eq!(view_part(bad), None, "{bad}");
        }
        let warning = bad_view_key("gpu0.reserved");
        assert!(warning.contains("\"gpu0.reserved\""), "{warning}");
        assert!(warning.contains("torch_pinned_held") && warning.contains("jax_pool"));
    }

    #[test]
    fn a_programs_views_join_its_edges_readings_and_bad_keys_are_dropped() {
        let mut got = Collected::default();
        let edge: PhaseEdge = serde_json::from_str(
            r#"{"phase":"load","edge":"end","cycle":1,"memory":{"rss_bytes":9,"anon_bytes":9,"file_bytes":0},
                "views":{"cuda:0.torch_reserved":5,"host.torch_pinned_held":4,"host":1,"host.peak":2}}"#,
        )
        .expect("a phase line");
        let mut events = Vec::new();
        got.take_edge(edge, 1.0, None, EdgeExtras::default(), &mut |e| {
            events.push(e.clone())
        });
        let r = &events[0].readings;
        assert_eq!(r.cell(), "host.torch_pinned_held=4 cuda:0.torch_reserved=5");
        // The program's own reading stands; its other keys are not readings.
        assert_eq!(r.get(Resource::Host), Some(9));
        assert_eq!(r.part(Resource::Host, Part::Peak), None);
        assert!(events[0].edge.views.is_empty());
        assert_eq!(got.bad_view_keys.len(), 2);
    }
}
