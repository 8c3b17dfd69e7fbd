//! One attached measurement, start to end: the sampler on the target's
//! process (or tree), the marks of `memrel mark` and of `--mark-on` turned
//! into phase edges on the samples' clock, and the run written as a run of
//! `memrel exec` is (`record::live` while it goes on, the derived outputs
//! at the end), so `report`, `compare` and `check` take it unchanged.
//!
//! A mark begins its phase and ends the phase the previous mark began (a
//! phase opened by a mark is closed by the next one, by `end`, or when the
//! measurement ends). Cycles are numbered as for a program that leaves them
//! out (`CycleNumbering`: a load after an unload starts the next cycle).
//!
//! It ends when the process exits, when `--duration` has passed, on
//! SIGINT/SIGTERM to memrel, or when a [`Driver`] (`memrel drive`: marks
//! that come from inside memrel, each edge read as it is taken) says it is
//! done or failed; each writes the results the same way.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::follow::{Follower, Rule};
use super::header::Setup;
use super::live::{LiveDir, MarkLine, MarkPhase};
use super::live_metrics::{LiveMetrics, SharedState};
use crate::export;
use crate::metrics;
use crate::metrics::measured::Measured;
use crate::protocol::{monotonic_s, Check, Edge, MemoryAtEdge, Phase, PhaseEdge, CYCLE_UNSET};
use crate::record::live::{EventLog, LiveRun};
use crate::record::{Part, Readings, Sample};
use crate::record::{Record, RunMeta, RunRecord, RunStatus};
use crate::sampler::VramProbe;
use crate::session::edges::EdgeExtras;
use crate::session::{Collected, EdgeReader, Scope, Session};
use crate::signals;

/// How often the loop reads marks, the log, and looks at the process.
const TICK: Duration = Duration::from_millis(20);

/// A quoted log line is cut here in an edge's note.
const NOTE_LINE_CHARS: usize = 160;

/// What one attach measures and where it writes.
pub struct Job<'a> {
    pub setup: Setup<'a>,
    pub duration: Option<Duration>,
    pub rules: Vec<Rule>,
    pub log: Option<Follower>,
    /// The results directory (made, empty).
    pub dir: PathBuf,
    /// Marks taken by memrel itself (`memrel drive`), step by step in the loop.
    pub driver: Option<&'a mut dyn Driver>,
    /// The OpenMetrics state to keep current (`memrel watch`), and its
    /// closed cycles written to cycles.csv.
    pub metrics: Option<SharedState>,
    /// samples.csv is rotated at this size (`--max-disk`).
    pub sample_part_bytes: Option<u64>,
}

/// A source of marks inside memrel: the loop calls `step` once a tick
/// until it is done; each mark's edge is read the moment it is taken.
pub trait Driver {
    /// One step (a request, a wait): its marks through `marks`.
    fn step(&mut self, marks: &mut dyn Marks) -> Step;
    /// The run's checks, once the measurement ended.
    fn checks(&mut self) -> Vec<Check>;
}

/// What a driver's step says.
pub enum Step {
    More,
    Done,
    /// It cannot go on: the run is recorded as failed with this error.
    Failed(String),
}

/// Every resource read at one moment (an edge's, or a reading between).
#[derive(Debug, Clone, Default)]
pub struct EdgeReading {
    pub t_s: f64,
    pub memory: MemoryAtEdge,
    pub extras: EdgeExtras,
}

/// How a driver marks phases and reads memory on the session's clock.
pub trait Marks {
    /// Seconds since the measurement began.
    fn now_s(&self) -> f64;
    /// Marks `phase` now (ending the open phase); the reading of its edge.
    fn mark(&mut self, phase: MarkPhase, model: Option<String>, note: String) -> EdgeReading;
    /// Every resource read now, without an edge.
    fn read(&mut self) -> EdgeReading;
    /// The edges of the marks that follow are in `cycle` (a driver numbers
    /// its own cycles: a warm-up is cycle 0); `None`: the collector numbers
    /// them as it numbers a program's marks.
    fn set_cycle(&mut self, cycle: Option<u32>);
    /// The next end edge's phase took `elapsed_s` (a request's own time,
    /// from its send to its answer, without memrel's readings at the edges).
    fn set_elapsed(&mut self, elapsed_s: f64);
    /// The next begin edge holds what the driver does next until it is
    /// read (a request is sent once its begin edge is read): the time
    /// between is memrel's, not the server's (`record::Event::held_s`).
    fn hold_next(&mut self);
}

/// Why the measurement ended.
enum Ended {
    /// How it ended, where memrel started it (`Target::exit`).
    Exited(Option<String>),
    Duration,
    Signal(i32),
    Driven,
    DriveFailed(String),
}

/// Measures until the process exits, `--duration` passes or a signal comes;
/// returns the results directory, the record as written there and its
/// summary.
pub fn measure(mut job: Job) -> Result<Measured> {
    let dir = job.dir.clone();
    let cannot_write = || format!("cannot write results into {}", dir.display());
    let target = job.setup.target;
    let pid = target.pid;
    let device = job.setup.device;
    let interval = Duration::from_secs_f64(job.setup.interval_ms / 1e3);
    let mut record = Record {
        header: job.setup.header()?,
        runs: Vec::new(),
    };
    let mut meta = RunMeta::planned(1, job.setup.strategy, 1);
    meta.pid = pid;
    let mut live = LiveRun::begin(&dir, &record, &meta).with_context(cannot_write)?;
    if let Some(part_bytes) = job.sample_part_bytes {
        live.rotate_samples_at(part_bytes)?;
    }
    let mut marks = LiveDir::open(&dir, pid)?;
    let (vram, vram_missing) = vram_probe(device.is_cuda());
    if let Some(why) = vram_missing {
        meta.checks.push(Check {
            name: "vram sampler (nvml)".into(),
            ok: false,
            detail: why,
        });
    }
    let clock_zero = Instant::now();
    let zero_mono_s = monotonic_s();
    let mut live_metrics = job
        .metrics
        .clone()
        .map(|state| LiveMetrics::new(state, record.header.clone(), meta.clone(), &dir));
    let writer = live
        .samples
        .writer()
        .with_context(cannot_write)?
        .with_tap(live_metrics.as_ref().map(LiveMetrics::tap));
    let cgroup = CgroupAtStart::read(pid);
    // The one session (as a run's): every probe opened once, the model
    // files' page cache where the user named them (a program's files are
    // not memrel's to guess), every resource at each mark (the tree's sum
    // under --tree, VRAM per GPU), which process holds what at a driver's
    // every reading.
    let scope = Scope {
        pid,
        tree: job.setup.tree,
        host_at_edges: true,
        vram,
        vram_at_edges: device.is_cuda(),
        cgroup: cgroup.located.as_ref().ok(),
        model_files: &job.setup.model_files,
        per_process: job.driver.is_some(),
    };
    let (session, edges) = Session::start(scope, interval, clock_zero, writer)
        .context("cannot start the sampler thread")?;
    record.header.sampler = session.probe_name().to_string();
    let mut marker = Marker {
        events: &mut live.events,
        collected: Collected::for_marks(),
        open: None,
        edges,
        woke: None,
        clock_zero,
        quiet: job.driver.is_some(),
        last_reading: None,
        cycle: None,
        elapsed_s: None,
        hold_next: false,
    };
    if job.driver.is_none() {
        announce(&job, &dir, session.probe_name());
    }
    let now_s = || clock_zero.elapsed().as_secs_f64();
    // Woken as a mark or a log line is written: its edge is read at once.
    let watch = watch_writes(&dir, job.log.as_ref());
    let ended = run_until_end(
        &mut job,
        &mut marker,
        &mut marks,
        &mut meta,
        (&watch, live_metrics.as_mut()),
        zero_mono_s,
    );
    let end_s = now_s();
    let stopped = session.stop();
    // Marks that came in as it ended are kept: after this, `mark` refuses.
    marker.take_marks(marks.close(), zero_mono_s, now_s());
    if let Some(log) = job.log.as_mut() {
        marker.take_log(log, &job.rules, &mut meta, now_s());
    }
    match (&ended, stopped.last.as_ref()) {
        // The process is gone: a phase still open closes on its last
        // reading while alive (the last sample), never on 0.
        (Ended::Exited(_), Some(last)) => marker.close_on_sample(last, "the process exited"),
        _ => marker.close_open(end_s, "the measurement ended"),
    }
    let cycles = marker.collected.max_cycle().max(1);
    drop(marker);
    let driver_checks = job.driver.as_deref_mut().map(|d| d.checks());
    finish_meta(&mut meta, stopped, driver_checks, end_s, &cgroup);
    let why = ended_why(ended, pid, end_s, job.driver.is_some(), &mut meta);
    record.header.cycles = cycles;
    record.header.scenario_toml = job.setup.scenario(cycles)?.toml_text;
    if let Some(attached) = record.header.attached.as_mut() {
        attached.ended = why.clone();
    }
    eprintln!("memrel: measured pid {pid} for {end_s:.1} s; ended: {why}");
    write_results(dir, record, meta, live)
}

/// The whole cgroup the process runs in, read only: sampled, at every
/// edge, and its counters at the start and the end (runs.json).
struct CgroupAtStart {
    located: Result<crate::cgroup::Located, String>,
    counters: Option<crate::cgroup::Counters>,
    /// Anything in it besides memrel and the attached tree makes its lane context.
    other_processes: Option<u32>,
}

impl CgroupAtStart {
    fn read(pid: u32) -> CgroupAtStart {
        let located = crate::cgroup::locate(pid);
        let counters = located
            .as_ref()
            .ok()
            .and_then(|at| crate::cgroup::read(at).ok());
        let other_processes = located
            .as_ref()
            .ok()
            .and_then(|at| crate::cgroup::others::count(&at.dir, &[std::process::id(), pid]));
        CgroupAtStart {
            located,
            counters,
            other_processes,
        }
    }
}

/// The loop: marks and log lines taken as they are written, the driver
/// stepped, until the process exits, `--duration` passes, a signal comes
/// or the driver is done.
fn run_until_end(
    job: &mut Job,
    marker: &mut Marker,
    marks: &mut LiveDir,
    meta: &mut RunMeta,
    (watch, mut metrics): (&super::watch::Watch, Option<&mut LiveMetrics>),
    zero_mono_s: f64,
) -> Ended {
    let target = job.setup.target;
    let clock_zero = marker.clock_zero;
    let now_s = || clock_zero.elapsed().as_secs_f64();
    loop {
        marker.take_marks(marks.take(), zero_mono_s, now_s());
        marks.acknowledge();
        if let Some(log) = job.log.as_mut() {
            marker.take_log(log, &job.rules, meta, now_s());
        }
        if let Some(hwm) = target.vm_hwm_bytes() {
            meta.vm_hwm_bytes = Some(hwm);
        }
        if let Some(metrics) = metrics.as_deref_mut() {
            metrics.refresh(&marker.collected);
        }
        if let Some(driver) = job.driver.as_deref_mut() {
            match driver.step(marker) {
                Step::More => {}
                Step::Done => return Ended::Driven,
                Step::Failed(why) => return Ended::DriveFailed(why),
            }
            if let Some(sig) = signals::received() {
                return Ended::Signal(sig);
            }
            continue;
        }
        if !target.alive() {
            return Ended::Exited(target.exit());
        }
        if let Some(sig) = signals::received() {
            return Ended::Signal(sig);
        }
        if job.duration.is_some_and(|d| clock_zero.elapsed() >= d) {
            return Ended::Duration;
        }
        marker.woke = watch.wait(TICK);
    }
}

/// What the run's meta says once the session stopped: the page-cache
/// note, the checks (the VRAM probe's, the driver's), the duration, the
/// cgroup, and whether the sampler failed.
fn finish_meta(
    meta: &mut RunMeta,
    stopped: crate::session::Stopped,
    driver_checks: Option<Vec<Check>>,
    end_s: f64,
    cgroup: &CgroupAtStart,
) {
    if let Some(why) = stopped.page_cache_note() {
        meta.page_cache_note.get_or_insert(why);
    }
    meta.checks
        .extend(stopped.vram.map(|v| v.checks()).unwrap_or_default());
    meta.checks.extend(driver_checks.unwrap_or_default());
    meta.duration_s = end_s;
    meta.cgroup = Some(cgroup_run(
        &cgroup.located,
        cgroup.counters,
        cgroup.other_processes,
    ));
    meta.status = RunStatus::Completed;
    if let Some(e) = stopped.sample_error {
        meta.status = RunStatus::Failed;
        meta.error = Some(e);
    }
}

/// Writes the run: its live files finished, events and runs.json, then
/// the derived outputs; returns them as measured.
fn write_results(
    dir: PathBuf,
    mut record: Record,
    meta: RunMeta,
    live: LiveRun,
) -> Result<Measured> {
    let cannot_write = || format!("cannot write results into {}", dir.display());
    let mut run = RunRecord {
        meta,
        samples: Vec::new(),
        events: Vec::new(),
        decimation: None,
    };
    live.finish(&mut run).with_context(cannot_write)?;
    record.runs.push(run);
    record
        .save_events_and_runs(&dir)
        .with_context(cannot_write)?;
    let summary = metrics::summarize(&record);
    export::write_derived_run_outputs(&dir, &record, &summary).with_context(cannot_write)?;
    Ok(Measured {
        dir,
        record: record.at_file_precision().into_owned(),
        summary,
    })
}

/// Why the measurement ended, in words (the header's `ended`); a drive cut
/// short by a signal or that failed marks the run so in `meta`.
fn ended_why(ended: Ended, pid: u32, end_s: f64, driven: bool, meta: &mut RunMeta) -> String {
    match ended {
        Ended::Exited(exit) => format!("process {pid} {}", exit.as_deref().unwrap_or("exited")),
        Ended::Duration => format!("--duration {:.3} s passed", end_s),
        // A drive a signal cut short is stopped early (an attach ends so).
        Ended::Signal(sig) if driven => {
            let why = format!(
                "stopped early: memrel received {} before every request was driven",
                signals::name(sig)
            );
            meta.status = RunStatus::Killed;
            meta.error = Some(why.clone());
            why
        }
        Ended::Signal(sig) => format!("memrel received {}", signals::name(sig)),
        Ended::Driven => "every request was driven".to_string(),
        Ended::DriveFailed(why) => {
            meta.status = RunStatus::Failed;
            meta.error = Some(why.clone());
            format!("driving failed: {why}")
        }
    }
}

/// Watches the results directory (marks) and the followed log's directory
/// with inotify, so the loop wakes as either is written; said on stderr
/// where it cannot (then they are read at every tick).
fn watch_writes(dir: &Path, log: Option<&Follower>) -> super::watch::Watch {
    let log_dir = log
        .and_then(|log| log.path().parent().map(Path::to_path_buf))
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p
            }
        });
    let mut watched: Vec<&Path> = vec![dir];
    watched.extend(log_dir.as_deref());
    let watch = super::watch::Watch::new(&watched);
    if !watch.active() {
        eprintln!(
            "memrel: warning: cannot watch {} with inotify: marks and log lines are read \
             every {} ms (each edge's note says how late)",
            watched
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and "),
            TICK.as_millis()
        );
    }
    watch
}

/// The attached process's cgroup in the run's metadata: where it is, its
/// counters at the start and now (the end), who else is in it.
fn cgroup_run(
    cgroup: &Result<crate::cgroup::Located, String>,
    at_start: Option<crate::cgroup::Counters>,
    other_processes: Option<u32>,
) -> crate::cgroup::view::CgroupRun {
    match &cgroup {
        Ok(at) => {
            let at_end = crate::cgroup::read(at);
            crate::cgroup::view::CgroupRun {
                dir: at.dir.display().to_string(),
                version: Some(at.version),
                at_start,
                at_end: at_end.as_ref().ok().copied(),
                error: at_end.err(),
                other_processes,
            }
        }
        Err(why) => crate::cgroup::view::CgroupRun {
            dir: String::new(),
            version: None,
            at_start: None,
            at_end: None,
            error: Some(why.clone()),
            other_processes: None,
        },
    }
}

/// What memrel tells on stderr once the measurement runs: another program
/// waits for the `live` file instead. `probe` is the sampler's probe, so
/// the scope said is the one sampled (a tree that could not be read is
/// sampled as the process alone).
fn announce(job: &Job, dir: &Path, probe: &str) {
    let target = job.setup.target;
    let what = match probe {
        crate::sampler::TREE_SAMPLER => "its process tree (PSS)".to_string(),
        "procfs-statm" if job.setup.tree => {
            "the process alone (statm): its smaps_rollup is not readable".to_string()
        }
        "procfs-statm" => "the process alone (statm)".to_string(),
        other => format!("the process alone ({other})"),
    };
    eprintln!(
        "memrel: attached to pid {} ({}), sampling {what} every {} ms\n\
         memrel: results in {}; mark phases with `{}`\n\
         memrel: ends when the process exits, on Ctrl-C or SIGTERM{}",
        target.pid,
        target.argv.join(" "),
        job.setup.interval_ms,
        dir.display(),
        crate::hint::Hint::Mark {
            dir,
            phase: "PHASE",
        },
        job.duration
            .map(|d| format!(", or after --duration {} s", d.as_secs_f64()))
            .unwrap_or_default()
    );
}

/// The VRAM probe of a CUDA device, or why there is none.
fn vram_probe(cuda: bool) -> (Option<Box<dyn VramProbe>>, Option<String>) {
    if !cuda {
        return (None, None);
    }
    match crate::sampler::vram::try_open_nvml() {
        Ok(probe) => (Some(probe), None),
        Err(why) => (None, Some(why)),
    }
}

/// Turns marks into phase edges, appended to events.csv as they come.
struct Marker<'a> {
    events: &'a mut EventLog,
    /// The run's collector, as a run's channel lines go through: numbers
    /// the cycles, keeps edges in time order (the marks file and the log
    /// are two sources), times each end from its begin.
    collected: Collected,
    /// The phase the last mark began, and its model.
    open: Option<(Phase, Option<String>)>,
    /// Reads every resource at each edge (as the channel does for a run).
    edges: EdgeReader,
    /// When a write in a watched directory last woke the loop (`watch`).
    woke: Option<Instant>,
    clock_zero: Instant,
    /// Marks are not said on stderr one by one (a driver says what it did).
    quiet: bool,
    /// The reading of the last edge taken (what a driver's mark returns).
    last_reading: Option<EdgeReading>,
    /// The cycle a driver gave the marks that follow (`Marks::set_cycle`).
    cycle: Option<u32>,
    /// The next end edge's own duration (`Marks::set_elapsed`).
    elapsed_s: Option<f64>,
    /// The next begin edge holds the driver's request (`Marks::hold_next`).
    hold_next: bool,
}

impl Marks for Marker<'_> {
    fn now_s(&self) -> f64 {
        self.clock_zero.elapsed().as_secs_f64()
    }

    fn mark(&mut self, phase: MarkPhase, model: Option<String>, note: String) -> EdgeReading {
        self.last_reading = None;
        let now_s = self.now_s();
        Marker::mark(self, phase, now_s, model, note);
        self.hold_next = false;
        // `end` with no phase open takes no edge: a reading all the same.
        match self.last_reading.take() {
            Some(reading) => reading,
            None => self.read(),
        }
    }

    fn read(&mut self) -> EdgeReading {
        let mut memory = MemoryAtEdge::default();
        let extras = self.edges.read(&mut memory);
        EdgeReading {
            t_s: self.now_s(),
            memory,
            extras,
        }
    }

    fn set_cycle(&mut self, cycle: Option<u32>) {
        self.cycle = cycle;
    }

    fn set_elapsed(&mut self, elapsed_s: f64) {
        self.elapsed_s = Some(elapsed_s);
    }

    fn hold_next(&mut self) {
        self.hold_next = true;
    }
}

impl Marker<'_> {
    fn take_marks(&mut self, lines: Vec<MarkLine>, zero_mono_s: f64, now_s: f64) {
        for line in lines {
            match line {
                Ok(mark) => {
                    let t_s = (mark.mono_s - zero_mono_s).clamp(0.0, now_s);
                    // The mark's own time: its reading's lag is exact.
                    let lag_ms = (now_s - t_s) * 1e3;
                    let by = mark.note.as_deref().unwrap_or("memrel mark");
                    let note = format!("{by}; read {lag_ms:.1} ms after it was written");
                    self.hold_next = mark.holds;
                    self.mark(mark.phase, t_s, mark.model, note);
                    self.hold_next = false;
                }
                Err(e) => eprintln!("memrel: warning: {e} (skipped)"),
            }
        }
    }

    /// The log's new lines, marked where a rule matches; rotations noted in
    /// the run's checks (passed: nothing was lost).
    ///
    /// A log line has no handshake: the program may act on what it logs at
    /// once (log "Unloading model" and free), before memrel reads the line.
    /// So where the log has news, every resource is read before the line is:
    /// a begin edge takes that reading, an end edge the larger (per
    /// resource) of it and the reading after ([`Marker::edge`]).
    fn take_log(&mut self, log: &mut Follower, rules: &[Rule], meta: &mut RunMeta, now_s: f64) {
        let before = (!rules.is_empty() && log.has_news()).then(|| Marks::read(self));
        let polled = log.poll();
        for note in polled.notes {
            eprintln!("memrel: {note}");
            meta.checks.push(Check {
                name: "log followed".into(),
                ok: true,
                detail: format!("at {now_s:.3} s: {note}"),
            });
        }
        for line in polled.lines {
            if let Some((phase, i)) = Rule::first_match(rules, &line) {
                let quoted: String = line.chars().take(NOTE_LINE_CHARS).collect();
                let lag = match self.woke {
                    Some(woke) => format!(
                        "read {:.1} ms after the write woke memrel",
                        woke.elapsed().as_secs_f64() * 1e3
                    ),
                    None => format!("read at a {} ms tick", TICK.as_millis()),
                };
                let note = format!(
                    "--mark-on #{} /{}/ matched log line {quoted:?}; {lag}; {LINE_READINGS}",
                    i + 1,
                    rules[i].regex.as_str()
                );
                self.mark_read(phase, now_s, None, note, before.as_ref());
            }
        }
    }

    /// Ends the open phase and begins `phase` (unless it is `end`) at `t_s`.
    fn mark(&mut self, phase: MarkPhase, t_s: f64, model: Option<String>, note: String) {
        self.mark_read(phase, t_s, model, note, None);
    }

    /// [`Marker::mark`], with the reading taken before its cause was read
    /// (a log line's), if any (see [`Marker::edge`]).
    fn mark_read(
        &mut self,
        phase: MarkPhase,
        t_s: f64,
        model: Option<String>,
        note: String,
        before: Option<&EdgeReading>,
    ) {
        if !self.quiet {
            eprintln!("memrel: {t_s:.3} s: {} ({note})", phase.as_str());
        }
        if self.open.is_none() && phase == MarkPhase::End && !self.quiet {
            eprintln!("memrel: warning: `end` at {t_s:.3} s: no phase was open");
        }
        if let Some((p, open_model)) = self.open.take() {
            self.edge(p, Edge::End, t_s, open_model, note.clone(), before);
        }
        if let MarkPhase::Begin(p) = phase {
            self.edge(p, Edge::Begin, t_s, model.clone(), note, before);
            self.open = Some((p, model));
        }
    }

    /// Ends the phase a mark opened, if any.
    fn close_open(&mut self, t_s: f64, note: &str) {
        if let Some((p, model)) = self.open.take() {
            self.edge(p, Edge::End, t_s, model, note.to_string(), None);
        }
    }

    /// Ends the phase a mark opened, if any, on `last`: the last sample of a
    /// process that exited (its reading and its time).
    fn close_on_sample(&mut self, last: &Sample, note: &str) {
        if let Some((p, model)) = self.open.take() {
            let mut memory = MemoryAtEdge::default();
            last.readings.fill_memory(&mut memory);
            let extras = EdgeExtras {
                readings: last.readings.clone(),
                after_exit: true,
                ..EdgeExtras::default()
            };
            let edge = marked(
                p,
                Edge::End,
                model,
                memory,
                format!("{note}: closed on its last sample"),
            );
            self.take(edge, last.t_s, extras);
        }
    }

    /// One edge of a mark, every resource read now by the edge reader; or,
    /// for a mark whose cause was read after it happened (a log line:
    /// `before`, the reading taken just before the line was read), a begin
    /// edge takes `before` (what the line found, not what the program did
    /// next) and an end edge the larger per resource of `before` and the
    /// reading now (memory the program freed as it logged is still the
    /// phase's).
    fn edge(
        &mut self,
        phase: Phase,
        edge: Edge,
        t_s: f64,
        model: Option<String>,
        note: String,
        before: Option<&EdgeReading>,
    ) {
        let (memory, mut extras) = match (edge, before) {
            (Edge::Begin, Some(before)) => (before.memory, before.extras.clone()),
            (Edge::End, Some(before)) => {
                let mut memory = MemoryAtEdge::default();
                let mut extras = self.edges.read(&mut memory);
                extras.readings = larger_per_resource(&extras.readings, &before.extras.readings);
                extras.readings.fill_memory(&mut memory);
                (memory, extras)
            }
            _ => {
                let mut memory = MemoryAtEdge::default();
                let extras = self.edges.read(&mut memory);
                (memory, extras)
            }
        };
        // A driver sends its request once the begin edge is read.
        let holds = edge == Edge::Begin && std::mem::take(&mut self.hold_next);
        extras.held_s = holds.then(|| self.now_s() - t_s);
        self.last_reading = Some(EdgeReading {
            t_s,
            memory,
            extras: extras.clone(),
        });
        let mut marked = marked(phase, edge, model, memory, note);
        if let Some(cycle) = self.cycle {
            marked.cycle = cycle;
        }
        if edge == Edge::End {
            marked.elapsed_s = self.elapsed_s.take();
        }
        self.take(marked, t_s, extras);
    }

    /// Into the run's collector, and from there into events.csv.
    fn take(&mut self, edge: PhaseEdge, t_s: f64, extras: EdgeExtras) {
        let events = &mut *self.events;
        self.collected
            .take_edge(edge, t_s, None, extras, &mut |event| events.append(event));
    }
}

/// What a log line's edge note says of its readings.
const LINE_READINGS: &str =
    "a begin edge is the reading before the line was read, an end edge the larger of it and the one after";

/// Per resource, the larger of `after` and `before` (a resource's parts come
/// with its whole, from the one reading); a resource only one has, as it is.
fn larger_per_resource(after: &Readings, before: &Readings) -> Readings {
    let mut out = after.clone();
    for resource in before.resources() {
        if before.get(resource) > after.get(resource) {
            out.remove(resource);
            for part in [
                Part::Whole,
                Part::Anon,
                Part::File,
                Part::Usage,
                Part::Peak,
                Part::Own,
            ] {
                out.set_opt(resource, part, before.part(resource, part));
            }
        }
    }
    out
}

/// A mark's phase edge: its cycle and duration are the collector's to give.
fn marked(
    phase: Phase,
    edge: Edge,
    model: Option<String>,
    memory: MemoryAtEdge,
    note: String,
) -> PhaseEdge {
    PhaseEdge {
        phase,
        edge,
        cycle: CYCLE_UNSET,
        model,
        elapsed_s: None,
        memory,
        allocator: None,
        heap: None,
        views: Default::default(),
        note: Some(note),
        mono_s: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Resource;

    /// Issue 47, item 4: an end edge read after a log line takes, per
    /// resource, the larger of the readings before and after the line was
    /// read, with that reading's parts.
    #[test]
    fn an_end_edge_takes_the_larger_reading_per_resource() {
        let mib = 1u64 << 20;
        let mut before = Readings::default();
        before.set(Resource::Host, 165 * mib);
        before.set_part(Resource::Host, Part::Anon, 160 * mib);
        before.set_part(Resource::Host, Part::File, 5 * mib);
        before.set(Resource::PageCache, 10 * mib);
        let mut after = Readings::default();
        after.set(Resource::Host, 8 * mib);
        after.set_part(Resource::Host, Part::Anon, 3 * mib);
        after.set_part(Resource::Host, Part::File, 5 * mib);
        after.set(Resource::PageCache, 40 * mib);
        after.set(Resource::Container, 70 * mib);
        let larger = larger_per_resource(&after, &before);
        assert_eq!(larger.get(Resource::Host), Some(165 * mib));
        assert_eq!(larger.part(Resource::Host, Part::Anon), Some(160 * mib));
        assert_eq!(larger.get(Resource::PageCache), Some(40 * mib));
        assert_eq!(larger.get(Resource::Container), Some(70 * mib));
    }
}
