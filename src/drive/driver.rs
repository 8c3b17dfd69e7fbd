//! The driver: the attach session's marks taken by memrel itself, one step
//! per request. Each request's edges are read synchronously by the session's
//! one edge reader: right before the send (its phase begins) and right after
//! the answer (it ends); then memrel polls what the request asks (`until`),
//! reads every resource until `settle_s` has passed, and keeps the settled
//! reading, the settle time and the late bytes (what left after the answer).
//!
//! A signal to memrel (SIGINT, SIGTERM) stops it wherever it waits (a
//! request, an `until`, a settle): the request's row says so, the server
//! memrel started is stopped, and the session records the run as stopped
//! early. A server that dies (its leader gone) is a death, not a release:
//! the request's row keeps no settled reading and no late bytes, the rest
//! of a tree memrel started is stopped (its process group, and every
//! process of the tree it last saw), and the drive fails saying so.
//!
//! It writes its rows (`rows`: `requests.csv` / `requests.json`, one row per
//! request, and `processes.csv`, each process of the tree once settled, as
//! the edge reader read them) into the results directory after every
//! request, so a failure keeps what came before it.
//! It never reads samples and computes no run metric: those come from the
//! record as for any run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cycle::{Cycle, Request, Until};
use super::http::{excerpt, Answer, Client, STOPPED};
use super::rows::{self, minus, Layer, ProcessRow, RequestRow, REQUESTS_CSV, TOLERANCE_BYTES};
use super::server::Started;
use crate::attach::live::MarkPhase;
use crate::attach::session::{Driver as SessionDriver, EdgeReading, Marks, Step};
use crate::metrics::memory::settle_time_s;
use crate::protocol::{Check, Phase};
use crate::record::Readings;
use crate::signals;

/// How often memory is read while a request settles, and `until` polled.
const POLL: Duration = Duration::from_millis(50);

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Next {
    Ready,
    /// Request `i` of the `k`-th cycle driven (1-based, warm-up included).
    Request {
        k: u32,
        i: usize,
    },
    Finish,
    Over,
}

/// Options of one drive.
pub struct Options {
    pub url: String,
    pub cycle: Cycle,
    /// Cycles judged (numbered 1, 2, …), after the warm-up.
    pub cycles: u32,
    /// Cycles driven first as a warm-up (numbered 0: reported, never
    /// judged), so a server's one-time costs (imports, first allocations)
    /// are not counted as retention.
    pub warmup_cycles: u32,
    /// A request without `settle_s` settles this long.
    pub settle_s: f64,
    pub ready_timeout_s: f64,
    /// A request without `timeout_s` may take this long (`--request-timeout`).
    pub request_timeout_s: f64,
    pub grace: Duration,
    pub dir: PathBuf,
}

/// `memrel drive`'s driver of one server.
pub struct Driver {
    opts: Options,
    client: Client,
    pid: u32,
    started: Option<Started>,
    next: Next,
    index: usize,
    pub rows: Vec<RequestRow>,
    pub processes: Vec<ProcessRow>,
    /// The reading before the current cycle's first request.
    before_cycle: Option<Readings>,
    /// The reading before the first judged cycle's first request: the
    /// drive's baseline (the metrics' too: the first edge of cycle 1).
    before_first: Option<Readings>,
    /// The cycle loads or sleeps a model: the server's start is then a
    /// warm-up, not the cycle's load.
    start_is_warmup: bool,
    /// How the server that memrel started ended.
    pub server_exit: Option<String>,
    checks: Vec<Check>,
    /// Every process of the server's tree seen at a reading (pid, start
    /// time in clock ticks): what is left of it when its leader dies.
    seen: Vec<(u32, u64)>,
}

impl Driver {
    pub fn new(opts: Options, pid: u32, started: Option<Started>) -> Driver {
        let start_is_warmup = opts
            .cycle
            .requests
            .iter()
            .any(|r| matches!(r.phase().ok(), Some(Phase::Load | Phase::Sleep)));
        Driver {
            client: Client::new(&opts.url),
            opts,
            pid,
            started,
            next: Next::Ready,
            index: 0,
            rows: Vec::new(),
            processes: Vec::new(),
            before_cycle: None,
            before_first: None,
            start_is_warmup,
            server_exit: None,
            checks: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Keeps the processes of the tree `reading` read (for [`Driver::death`]).
    fn saw(&mut self, reading: &EdgeReading) {
        for p in &reading.extras.processes {
            if p.pid != self.pid && !self.seen.iter().any(|(pid, _)| *pid == p.pid) {
                if let Some(start) = super::server::start_ticks(p.pid) {
                    self.seen.push((p.pid, start));
                }
            }
        }
    }

    /// The server's leader is gone (`exit`): the rest of a tree memrel
    /// started is stopped (none of it left running); the error that says
    /// so, with which processes went (or, for a server memrel did not
    /// start, which still run).
    fn death(&mut self, name: &str, exit: &str, when: &str) -> String {
        let rest = match self.started.as_mut() {
            Some(started) => {
                let stopped = started.stop_rest(&self.seen, self.opts.grace);
                self.server_exit = started.exit.clone();
                if stopped.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; memrel stopped the rest of its tree (pid {})",
                        join_pids(&stopped)
                    )
                }
            }
            None => {
                let left: Vec<u32> = self
                    .seen
                    .iter()
                    .filter(|(pid, start)| super::server::start_ticks(*pid) == Some(*start))
                    .map(|(pid, _)| *pid)
                    .collect();
                if left.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; its processes {} still run (memrel did not start them: stop them)",
                        join_pids(&left)
                    )
                }
            }
        };
        format!(
            "{name}: the server {exit} {when}: its memory left with it (a death, not a release){rest}"
        )
    }

    /// Why to stop now: a signal to memrel.
    fn stopped(&self, name: &str) -> Result<(), String> {
        match signals::received() {
            Some(sig) => Err(format!("{name}: {STOPPED} {}", signals::name(sig))),
            None => Ok(()),
        }
    }

    /// Whether the server is gone, and how it ended where memrel started it.
    fn server_gone(&mut self) -> Option<String> {
        match self.started.as_mut() {
            Some(s) => s.exited().then(|| s.exit.clone().unwrap_or_default()),
            None => (!std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
                || crate::sampler::procfs::state(self.pid) == Some('Z'))
            .then(|| "exited".to_string()),
        }
    }

    /// Waits for the readiness GET (the start marked as a phase where memrel
    /// started the server).
    fn ready(&mut self, marks: &mut dyn Marks) -> Result<(), String> {
        let path = match self.opts.cycle.ready_path() {
            Some(Ok(path)) => Some(path.to_string()),
            Some(Err(e)) => return Err(e.to_string()),
            None => None,
        };
        let phase = if self.start_is_warmup {
            Phase::Warmup
        } else {
            Phase::Load
        };
        marks.set_cycle(Some(if self.start_is_warmup { 0 } else { 1 }));
        let line = format!("GET {}", path.as_deref().unwrap_or("(no ready)"));
        let sent = if self.started.is_some() {
            let r = marks.mark(
                MarkPhase::Begin(phase),
                None,
                format!("memrel drive: the server starting, until {line} answers"),
            );
            self.before_cycle = Some(readings_of(&r));
            Some(r)
        } else {
            None
        };
        let started = Instant::now();
        if let Some(path) = &path {
            let mut last;
            loop {
                if let Some(exit) = self.server_gone() {
                    return Err(format!(
                        "the server {exit} before it answered {line} ({} says why)",
                        super::server::SERVER_LOG
                    ));
                }
                match self.client.send("GET", path, None, 5.0) {
                    Ok(a) if (200..300).contains(&a.status) => break,
                    Ok(a) => last = format!("it answered {}", a.status),
                    Err(e) if e.starts_with(STOPPED) => {
                        return Err(format!("waiting for {line}: {e}"))
                    }
                    Err(e) => last = e,
                }
                if started.elapsed().as_secs_f64() > self.opts.ready_timeout_s {
                    return Err(format!(
                        "the server did not answer {line} at {} within --ready-timeout {} s (last: {last})",
                        self.client.url(path),
                        self.opts.ready_timeout_s
                    ));
                }
                std::thread::sleep(POLL);
            }
        }
        if let Some(sent) = sent {
            let answered = marks.mark(
                MarkPhase::End,
                None,
                format!("memrel drive: {line} answered"),
            );
            let cycle = if self.start_is_warmup { 0 } else { 1 };
            let request = format!("(server start) {line}");
            let mut row = RequestRow::new(0, cycle, phase.as_str().to_string(), request);
            row.status = Some(200);
            row.latency_s = Some(answered.t_s - sent.t_s);
            row.send_t_s = sent.t_s;
            row.response_t_s = Some(answered.t_s);
            row.at_send = readings_of(&sent);
            row.at_response = Some(readings_of(&answered));
            self.rows.push(row);
        }
        Ok(())
    }

    /// The cycle the `k`-th driven cycle (1-based) is recorded as: 0 for a
    /// warm-up, then 1, 2, ….
    fn recorded_cycle(&self, k: u32) -> u32 {
        k.saturating_sub(self.opts.warmup_cycles)
    }

    /// One request of the `k`-th driven cycle: its edges, its checks,
    /// `until` and the settling; its row kept, failed or not.
    fn request(&mut self, marks: &mut dyn Marks, k: u32, i: usize) -> Result<(), String> {
        let request: Request = self.opts.cycle.requests[i].clone();
        let phase = request.phase().map_err(|e| e.to_string())?;
        let cycle = self.recorded_cycle(k);
        marks.set_cycle(Some(cycle));
        self.index += 1;
        let name = format!(
            "request {} ({}: {}, cycle {cycle}{})",
            self.index,
            request.phase,
            request.line(),
            if cycle == 0 { ", warm-up" } else { "" }
        );
        if let Some(exit) = self.server_gone() {
            return Err(self.death(&name, &exit, "before it was sent"));
        }
        let mut row = RequestRow::new(self.index, cycle, request.phase.clone(), request.line());
        row.model = request.model.clone();
        let went = self.send(marks, &request, phase, i == 0, &name, &mut row);
        match &went {
            Err(why) => row.error = Some(why.clone()),
            Ok(()) => self.judge(&mut row, phase, &name),
        }
        self.rows.push(row);
        went
    }

    /// Sends `request` (the first of its cycle: `first`), reads its edges
    /// into `row`, checks its answer, then waits for its `until` and reads
    /// memory as it settles; `Err` says why it failed.
    fn send(
        &mut self,
        marks: &mut dyn Marks,
        request: &Request,
        phase: Phase,
        first: bool,
        name: &str,
        row: &mut RequestRow,
    ) -> Result<(), String> {
        marks.hold_next();
        let sent = marks.mark(
            MarkPhase::Begin(phase),
            request.model.clone(),
            format!("memrel drive: {} sent", request.line()),
        );
        if first {
            self.before_cycle = Some(readings_of(&sent));
            if row.cycle == 1 && self.before_first.is_none() {
                self.before_first = self.before_cycle.clone();
            }
        }
        row.send_t_s = sent.t_s;
        row.at_send = readings_of(&sent);
        row.before_load = self.before_cycle.clone();
        row.before_first = self.before_first.clone();
        self.saw(&sent);
        let answer = self.client.send(
            &request.method,
            &request.path,
            request.body.as_ref(),
            request.timeout_s(self.opts.request_timeout_s),
        );
        // The phase took the request's own time (send → answer), not the
        // edge readings around it.
        if let Ok(a) = &answer {
            marks.set_elapsed(a.latency_s);
        }
        let answered = marks.mark(
            MarkPhase::End,
            request.model.clone(),
            match &answer {
                Ok(a) => format!("memrel drive: {} answered {}", request.line(), a.status),
                Err(e) => format!("memrel drive: {} failed: {e}", request.line()),
            },
        );
        self.saw(&answered);
        row.response_t_s = Some(answered.t_s);
        row.at_response = Some(readings_of(&answered));
        let answer = self.answered(answer, name)?;
        row.status = Some(answer.status);
        row.latency_s = Some(answer.latency_s);
        check_answer(request, &answer, name)?;
        if let Some(after) = after_answer(phase) {
            marks.mark(
                MarkPhase::Begin(after),
                request.model.clone(),
                format!("memrel drive: after {}", request.line()),
            );
        }
        // Memory is read from the answer on, while `until` polls too: the
        // settle window starts at the answer.
        let mut read = vec![(answered.t_s, readings_of(&answered))];
        let answered_at = Instant::now();
        if let Some(until) = &request.until {
            self.until(marks, until, name, answered_at, &mut read)?;
            row.until_s = Some(answered_at.elapsed().as_secs_f64());
        }
        self.settled(marks, request, name, answered_at, read, row)
    }

    /// Reads memory into `read` for the request's settle window from the
    /// answer (`answered_at`; none where it is 0), a settling phase ending on
    /// its settled reading (an edge); keeps in `row` the settled reading, the
    /// settle time and the late bytes, and each process's into processes.csv.
    fn settled(
        &mut self,
        marks: &mut dyn Marks,
        request: &Request,
        name: &str,
        answered_at: Instant,
        mut read: Vec<(f64, Readings)>,
        row: &mut RequestRow,
    ) -> Result<(), String> {
        let settle_for = request.settle_s.unwrap_or(self.opts.settle_s);
        if settle_for <= 0.0 {
            return Ok(());
        }
        let settle_by = answered_at + Duration::from_secs_f64(settle_for);
        let last = self.settle(marks, name, settle_by, &mut read)?;
        let after = request.phase().ok().and_then(after_answer);
        let settled_at = match after {
            Some(Phase::Settle) => {
                let r = marks.mark(
                    MarkPhase::End,
                    request.model.clone(),
                    format!(
                        "memrel drive: settled {settle_for} s after {}",
                        request.line()
                    ),
                );
                read.push((r.t_s, readings_of(&r)));
                r
            }
            _ => last,
        };
        let settled = readings_of(&settled_at);
        row.settle_s = Some(settle_s(&read));
        row.settle_window_s = Some(settle_for);
        row.late = Some(minus(&read[0].1, &settled));
        row.settled = Some(settled);
        self.per_process(&settled_at, row.index, row.cycle, &request.phase);
        Ok(())
    }

    /// The answer, or why there is none: a signal to memrel, the server's
    /// death, or the request's own error.
    fn answered(&mut self, answer: Result<Answer, String>, name: &str) -> Result<Answer, String> {
        match answer {
            Ok(a) => Ok(a),
            Err(e) if e.starts_with(STOPPED) => Err(format!("{name}: {e}")),
            Err(e) => {
                // A server that died closes its sockets a moment before
                // it can be reaped: give its exit that moment.
                let waited = Instant::now();
                let mut gone = self.server_gone();
                while gone.is_none() && waited.elapsed() < Duration::from_secs(1) {
                    std::thread::sleep(Duration::from_millis(10));
                    gone = self.server_gone();
                }
                Err(match gone {
                    Some(exit) => self.death(name, &exit, &format!("during the request ({e})")),
                    None => format!("{name}: {e}"),
                })
            }
        }
    }

    /// Polls `until` from the answer (`answered_at`) until it is met,
    /// reading memory each time into `read`.
    fn until(
        &mut self,
        marks: &mut dyn Marks,
        until: &Until,
        name: &str,
        answered_at: Instant,
        read: &mut Vec<(f64, Readings)>,
    ) -> Result<(), String> {
        loop {
            let polled = self
                .client
                .send(&until.method, &until.path, until.body.as_ref(), 10.0);
            let r = marks.read();
            self.saw(&r);
            read.push((r.t_s, readings_of(&r)));
            if matches!(&polled, Ok(a) if until.met(a.status, &a.body)) {
                return Ok(());
            }
            self.stopped(name)?;
            if let Some(exit) = self.server_gone() {
                return Err(self.death(name, &exit, "while memrel waited for its until"));
            }
            if answered_at.elapsed().as_secs_f64() > until.timeout_s() {
                let last = match polled {
                    Ok(a) => format!("{} {}", a.status, excerpt(&a.body)),
                    Err(e) => e,
                };
                return Err(format!(
                    "{name}: {} {} did not say so within {} s (last: {last})",
                    until.method,
                    until.path,
                    until.timeout_s()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Reads memory into `read` until `settle_by` (at least once after the
    /// answer and `until`); the last reading.
    fn settle(
        &mut self,
        marks: &mut dyn Marks,
        name: &str,
        settle_by: Instant,
        read: &mut Vec<(f64, Readings)>,
    ) -> Result<EdgeReading, String> {
        let answered_t_s = read.first().map_or(0.0, |(t, _)| *t);
        loop {
            std::thread::sleep(POLL.min(settle_by.saturating_duration_since(Instant::now())));
            // A death is checked before the reading: memory that left
            // with the server is no late byte of the request.
            if let Some(exit) = self.server_gone() {
                let after_s = marks.now_s() - answered_t_s;
                return Err(self.death(
                    name,
                    &exit,
                    &format!("{after_s:.2} s after the answer, as memory settled"),
                ));
            }
            self.stopped(name)?;
            let r = marks.read();
            self.saw(&r);
            read.push((r.t_s, readings_of(&r)));
            if Instant::now() >= settle_by {
                return Ok(r);
            }
        }
    }

    /// What a request that went through says: for a sleep what it freed,
    /// for a cycle's end whether memory is back; the checks it adds (host
    /// memory a wake left behind, memory still leaving after the answer).
    fn judge(&mut self, row: &mut RequestRow, phase: Phase, name: &str) {
        let end = row.settled.as_ref().or(row.at_response.as_ref());
        match phase {
            // What the sleep gave back, against the reading just before it.
            Phase::Sleep => row.freed = end.map(|end| minus(&row.at_send, end)),
            // The end of a cycle: back where it began, and where the first
            // judged cycle began?
            Phase::Unload | Phase::Wake => {
                if let Some(end) = end {
                    row.held = row.before_load.as_ref().map(|b| minus(end, b));
                    row.held_first = row.before_first.as_ref().map(|b| minus(end, b));
                }
            }
            _ => {}
        }
        if phase == Phase::Wake {
            if let Some(line) = rows::left_after_wake(row) {
                self.checks.push(Check {
                    name: "host memory left behind by the sleep".into(),
                    ok: true,
                    detail: format!("{name}: {line}"),
                });
            }
        }
        if let Some(late) = &row.late {
            let vram = late.vram_bytes();
            if late.host_bytes() > TOLERANCE_BYTES as i64
                || vram.is_some_and(|v| v > TOLERANCE_BYTES as i64)
            {
                self.checks.push(Check {
                    name: "memory left after the answer".into(),
                    ok: true,
                    detail: format!(
                        "{name}: {} MiB host, {} MiB VRAM still left after the answer; {}",
                        late.host_bytes() >> 20,
                        vram.map_or("-".to_string(), |v| (v >> 20).to_string()),
                        settle_words(row)
                    ),
                });
            }
        }
    }

    /// Which process of the tree held what at `reading` (the edge reader's
    /// own readings of each, as it summed them).
    fn per_process(&mut self, reading: &EdgeReading, index: usize, cycle: u32, phase: &str) {
        for p in &reading.extras.processes {
            let comm = std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                .map(|c| c.trim().to_string())
                .unwrap_or_default();
            self.processes.push(ProcessRow {
                index,
                cycle,
                phase: phase.to_string(),
                pid: p.pid,
                comm,
                command: command_line(p.pid),
                pss_bytes: Some(p.host_bytes),
                vram_bytes: p.vram_bytes,
            });
        }
    }

    /// The phases closed, the server stopped where memrel started it (one
    /// that died before is a death).
    fn finish(&mut self, marks: &mut dyn Marks) -> Result<(), String> {
        if let Some(exit) = self.server_gone() {
            return Err(self.death("the drive", &exit, "before memrel stopped it"));
        }
        marks.mark(MarkPhase::End, None, "memrel drive: done".into());
        if let Some(started) = self.started.as_mut() {
            let exit = started.stop(self.opts.grace);
            self.checks.push(Check {
                name: "server stopped".into(),
                ok: true,
                detail: format!(
                    "SIGTERM to its process group, SIGKILL after {} s: {exit}",
                    self.opts.grace.as_secs_f64()
                ),
            });
            self.server_exit = Some(exit);
        }
        Ok(())
    }

    /// Stops a server memrel started after a failure (its exit kept), and
    /// what is left of its tree.
    fn stop_after_failure(&mut self) {
        if let Some(started) = self.started.as_mut() {
            started.stop(self.opts.grace);
            started.stop_rest(&self.seen, self.opts.grace);
            self.server_exit = started.exit.clone();
        }
    }
}

impl SessionDriver for Driver {
    fn step(&mut self, marks: &mut dyn Marks) -> Step {
        let result = match self.next {
            Next::Ready => self.ready(marks).map(|()| {
                self.next = Next::Request { k: 1, i: 0 };
            }),
            Next::Request { k, i } => self.request(marks, k, i).map(|()| {
                self.next = if i + 1 < self.opts.cycle.requests.len() {
                    Next::Request { k, i: i + 1 }
                } else if k < self.opts.warmup_cycles + self.opts.cycles {
                    Next::Request { k: k + 1, i: 0 }
                } else {
                    Next::Finish
                };
            }),
            Next::Finish => {
                self.next = Next::Over;
                self.finish(marks)
            }
            Next::Over => return Step::Done,
        };
        let written = rows::write(&self.opts.dir, &self.rows, &self.processes);
        match (result, written) {
            // Stopped by a signal: the session records it as stopped early.
            (Err(why), _) if signals::received().is_some() => {
                marks.mark(MarkPhase::End, None, format!("memrel drive: {why}"));
                self.stop_after_failure();
                let _ = rows::write(&self.opts.dir, &self.rows, &self.processes);
                self.checks.push(Check {
                    name: "stopped early".into(),
                    ok: false,
                    detail: why,
                });
                self.next = Next::Over;
                Step::More
            }
            (Err(why), written) => {
                marks.mark(MarkPhase::End, None, format!("memrel drive: failed: {why}"));
                self.stop_after_failure();
                let _ = rows::write(&self.opts.dir, &self.rows, &self.processes);
                let kept = match written {
                    Ok(()) => String::new(),
                    Err(e) => format!(" (and {REQUESTS_CSV} could not be written: {e})"),
                };
                Step::Failed(format!("{why}{kept}"))
            }
            (Ok(()), Err(e)) => Step::Failed(format!(
                "cannot write {REQUESTS_CSV} into {}: {e}",
                self.opts.dir.display()
            )),
            (Ok(()), Ok(())) if self.next == Next::Over => Step::Done,
            (Ok(()), Ok(())) => Step::More,
        }
    }

    fn checks(&mut self) -> Vec<Check> {
        std::mem::take(&mut self.checks)
    }
}

/// When a request's memory settled, in words: by the first reading after
/// the answer, S s after it, or still moving when the settle window ended
/// (it moved within the window's last two readings: the settled reading
/// need not be where it stops).
pub fn settle_words(row: &RequestRow) -> String {
    let settle_s = row.settle_s.unwrap_or(0.0);
    let poll_s = POLL.as_secs_f64();
    match row.settle_window_s {
        Some(window_s) if settle_s > window_s - 2.0 * poll_s => format!(
            "still moving when the {window_s} s settle window ended: raise --settle (or the \
             request's settle_s) to see where it stops"
        ),
        _ if settle_s == 0.0 => format!(
            "settled as it answered (within {} MiB of where it ended)",
            TOLERANCE_BYTES >> 20
        ),
        _ => format!("settled {settle_s:.2} s after it"),
    }
}

/// The settle time of a request: `readings` from the answer (the first) to
/// the settled one (the last), each layer of the server's own tree (not
/// the container: a shared cgroup moves with its other tenants) settled by
/// the run's one rule (`metrics::memory::settle_time_s`, with
/// [`TOLERANCE_BYTES`], the default retention threshold), the latest of
/// them; 0 when nothing moved.
fn settle_s(read: &[(f64, Readings)]) -> f64 {
    let (Some((first, start)), Some((last, settled))) = (read.first(), read.last()) else {
        return 0.0;
    };
    let between = &read[1..read.len().saturating_sub(1).max(1)];
    Layer::read(settled)
        .filter(|(layer, _)| layer.settles())
        .filter_map(|(layer, end)| {
            let begin = layer.bytes(start)?;
            let points = between
                .iter()
                .filter_map(|(t, r)| Some((*t, layer.bytes(r)?)));
            Some(settle_time_s(
                (*first, begin),
                points,
                (*last, end),
                TOLERANCE_BYTES,
            ))
        })
        .fold(0.0, f64::max)
}

/// The phase that follows the answer: asleep after a sleep, settling after
/// an unload or a wake (their edges read as the others).
pub fn after_answer(phase: Phase) -> Option<Phase> {
    match phase {
        Phase::Sleep => Some(Phase::Asleep),
        Phase::Unload | Phase::Wake => Some(Phase::Settle),
        _ => None,
    }
}

/// Every resource an edge reading read (the record's readings).
fn readings_of(reading: &EdgeReading) -> Readings {
    reading.extras.readings.clone()
}

/// Why an answer is not the one `request` expects (its status, json where
/// it asks for json).
fn check_answer(request: &Request, answer: &Answer, name: &str) -> Result<(), String> {
    if answer.status != request.status {
        return Err(format!(
            "{name}: the server answered {} where {} was expected: {}",
            answer.status,
            request.status,
            excerpt(&answer.body)
        ));
    }
    if request.json && serde_json::from_str::<serde_json::Value>(&answer.body).is_err() {
        return Err(format!(
            "{name}: the answer is not json where json was expected: {:?}",
            excerpt(&answer.body)
        ));
    }
    Ok(())
}

/// `pid`'s command line, its arguments joined by spaces (cut at 300
/// characters; empty once it is gone).
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    words.join(" ").chars().take(300).collect()
}

fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Part, Resource};

    #[test]
    fn settling_is_said_by_when_the_memory_last_moved_in_its_window() {
        let row = |settle_s: f64| {
            let mut row = RequestRow::new(1, 1, "sleep".into(), "POST /sleep?level=1".into());
            row.settle_s = Some(settle_s);
            row.settle_window_s = Some(2.0);
            row
        };
        assert_eq!(
            settle_words(&row(0.0)),
            "settled as it answered (within 16 MiB of where it ended)"
        );
        assert_eq!(settle_words(&row(0.52)), "settled 0.52 s after it");
        assert!(
            settle_words(&row(1.97)).starts_with("still moving when the 2 s settle window ended"),
            "{}",
            settle_words(&row(1.97))
        );
    }

    /// Host memory of `mib` MiB, VRAM `vram` bytes where read.
    fn host_vram(mib: u64, vram: Option<u64>) -> Readings {
        let mut r = Readings::default();
        r.set(Resource::Host, mib << 20);
        r.set_opt(Resource::Device(0), Part::Whole, vram);
        r
    }

    fn host_mib(mib: u64) -> Readings {
        host_vram(mib, Some(0))
    }

    #[test]
    fn memory_that_leaves_after_the_answer_is_late_and_sets_the_settle_time() {
        // Answered at 1.0 s holding 200 MiB, freed between 1.5 and 1.55 s.
        let readings = [
            (1.0, host_mib(200)),
            (1.25, host_mib(200)),
            (1.5, host_mib(199)),
            (1.55, host_mib(40)),
            (2.0, host_mib(41)),
        ];
        let settled = readings[4].1.clone();
        // Within the tolerance of where it ended from the reading at 1.55 s on.
        let s = settle_s(&readings);
        assert!((s - 0.55).abs() < 1e-9, "{s}");
        let late = minus(&readings[0].1, &settled);
        assert_eq!(late.host_bytes(), 159 << 20);
        assert_eq!(late.vram_bytes(), Some(0));
        // Nothing moved by more than the tolerance: settled at the answer.
        let quiet = [(1.0, host_mib(40)), (1.5, host_mib(45))];
        assert_eq!(settle_s(&quiet), 0.0);
        // A layer one reading lacks is not compared.
        let no_vram = host_vram(40, None);
        let gigabyte_vram = host_vram(40, Some(1 << 30));
        assert_eq!(
            settle_s(&[(1.0, gigabyte_vram), (1.5, no_vram.clone())]),
            0.0
        );
        assert_eq!(minus(&no_vram, &host_mib(40)).vram_bytes(), None);
    }

    /// Issue 48, item 5: one settle rule. A request's settle time and the
    /// metrics' settle time of a release edge, over the same readings,
    /// agree to the millisecond (they were two rules: the last reading that
    /// moved against the first after which none did).
    #[test]
    fn the_drives_settle_time_is_the_metrics_on_the_same_readings() {
        use crate::metrics::memory::settle_between;
        use crate::protocol::Edge;
        use crate::record::fixture;
        // (t_s, host MiB): the answer at 1.0 s, memory leaving late, wavering
        // just outside the 16 MiB band, then settled at 100 MiB.
        let points = [
            (1.0, 900),
            (1.05, 600),
            (1.10, 130),
            (1.15, 80),
            (1.20, 120),
            (1.25, 100),
            (1.30, 104),
            (1.35, 100),
        ];
        let readings: Vec<(f64, Readings)> =
            points.iter().map(|&(t, m)| (t, host_mib(m))).collect();
        let drive_s = settle_s(&readings);

        let bytes = |mib: u64| mib << 20;
        let (first, last) = (points[0], points[points.len() - 1]);
        let mut run = fixture::run(1, "drop", 1, &[]);
        run.samples = points[1..points.len() - 1]
            .iter()
            .map(|&(t, m)| fixture::sample(t, bytes(m), None))
            .collect();
        let memory = |m: u64| fixture::memory(bytes(m), None);
        let from = fixture::edge(first.0, Phase::Release, Edge::End, 1, memory(first.1));
        let to = fixture::edge(last.0, Phase::Settle, Edge::End, 1, memory(last.1));
        let gap = settle_between(&run, Resource::Host, &from, &to, TOLERANCE_BYTES)
            .expect("a window with readings at both ends");
        assert!(
            (gap.settle_s - 0.25).abs() < 1e-9,
            "metrics: {}",
            gap.settle_s
        );
        assert!(
            (drive_s - gap.settle_s).abs() < 1e-3,
            "drive {drive_s} s, metrics {} s",
            gap.settle_s
        );
    }
}
