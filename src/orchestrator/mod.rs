//! Runs one worker process and turns what happened into a [`RunRecord`]:
//! spawns the child in its own process group with the strategy's environment
//! and a private event channel, samples it, reads its phase events and drains
//! its stdout and stderr on their own threads, and joins samples and events on
//! one monotonic clock.
//!
//! Every wait on the child is bounded: the scenario's timeout covers the whole
//! run (a worker that closes its channel and hangs included), and after the
//! worker ends or is killed, collecting what is left waits a few seconds at
//! most. A timeout or a SIGINT/SIGTERM to memrel kills the worker's whole
//! process group. Whatever happens to the child (error, crash, OOM kill,
//! timeout, interruption), the samples and events taken so far are returned:
//! a run is never lost.
//!
//! Which process it runs (memrel's worker or a program) is the [`Plug`]'s
//! business; the orchestrator only takes on the duties the plug names
//! (`Plug::duties`): completing a program's phase lines, checking that the
//! strategy reached it, whether `done` is required, sampling its tree.
//!
//! Parts, by job: this file runs the processes (spawn, sample, wait);
//! `edges` reads every resource at a phase edge (the one edge reader, also
//! attach's); `channel` (the event pipe and its acknowledgements); `intake`
//! (what arrives on it, taken in); `outcome` (how the run ended); `child`
//! (process group, bounded waits); `drain` (output tails, shown live for
//! `exec`); `stdin` (memrel's stdin passed to a program); `signals` (Ctrl-C
//! and SIGTERM to memrel).

mod channel;
mod child;
mod drain;
pub mod edges;
mod intake;
mod outcome;
pub mod signals;
mod stdin;

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use crate::record::live::SampleTarget;
use crate::record::{Event, RunMeta, RunRecord, RunStatus};
use crate::sampler::hwm::KernelPeak;
use crate::sampler::page_cache::{Method, PageCacheProbe};
use crate::sampler::procfs::StatmProbe;
use crate::sampler::{Probe, Sampler, VramProbe};
use crate::strategy::{self, Strategy};
use crate::worker::command::{environment_checks, CycleNumbering};
use crate::worker::Plug;
use channel::Channel;
use intake::{Collected, ProgramState};
use outcome::{allocation_failed, name_out_of_memory, outcome};

/// Everything needed to execute one run.
pub struct RunPlan<'a> {
    pub run: u32,
    pub repetition: u32,
    pub strategy: &'static Strategy,
    /// What each process of the run is (memrel's worker or a program).
    pub plug: &'a Plug,
    pub interval: Duration,
    pub timeout: Duration,
    /// The container's view: which cgroup, and `--memory-limit`.
    pub cgroup: &'a crate::cgroup::setup::Setup,
}

/// Keeps this much of a worker's stdout and of its stderr (their tails) in the record.
const TAIL_BYTES: usize = 8 * 1024;

/// How often the run loop looks at the child, the clock and the signal flag.
const TICK: Duration = Duration::from_millis(20);

/// After the worker closed its channel: how often, and for how long, the run
/// loop looks for its exit before going back to [`TICK`].
const EXIT_POLL: Duration = Duration::from_millis(1);
const EXIT_WATCH: Duration = Duration::from_secs(1);

/// After the worker ended or was killed: how long it may take to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(5);

/// After the worker was reaped: how long the channel and output pipes may take
/// to end (only a process that left the worker's group can hold them open).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The same, where a descendant is known to outlive the program (it holds
/// them open for as long as it lives): a moment for what is in flight.
const OUTLIVED_PIPE_GRACE: Duration = Duration::from_millis(200);

/// When the parent looks at a program's environment and mappings.
const PROGRAM_LOOK_AFTER: Duration = Duration::from_millis(50);

/// Until when it looks again while a check fails: on a busy machine the
/// process may not have reached its `exec` (or its loader its preloads) by
/// the first look.
const PROGRAM_LOOK_UNTIL: Duration = Duration::from_secs(2);

/// How many of a run's latest phase edges the orchestrator keeps (to time
/// an end edge from its begin); all of them are on disk.
const EVENTS_KEPT: usize = 1024;

/// How many bad channel lines are quoted in the run's error (all are counted).
const PROTOCOL_ERRORS_QUOTED: usize = 3;

/// Why memrel itself stopped the worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stop {
    Timeout,
    Signal(i32),
}

/// Executes `plan` with `exe` as the worker binary, writing its samples to
/// `samples` as they are taken; `on_event` sees each phase edge as it
/// arrives (to log it and show progress). The record it returns has the
/// run's latest events; its samples and events are on disk, where
/// `record::live` reads them back. A `respawn` strategy's
/// run is several worker processes in turn, on one clock: each hands over at
/// a release step and the next one resumes there.
pub fn execute(
    exe: &Path,
    plan: &RunPlan,
    vram: Option<Box<dyn VramProbe>>,
    samples: &SampleTarget,
    on_event: &mut dyn FnMut(&Event),
) -> (RunRecord, &'static str) {
    let mut meta = RunMeta::planned(plan.run, plan.strategy.name, plan.repetition);
    let preload = match strategy::find_library(plan.strategy) {
        Ok(preload) => preload,
        Err(e) => {
            meta.error = Some(e.to_string());
            return (empty_record(meta), "none");
        }
    };
    let clock_zero = Instant::now();
    let deadline = clock_zero + plan.timeout;
    let mut got = Collected {
        zero_mono_s: crate::protocol::monotonic_s(),
        ..Collected::default()
    };
    let mut vram = vram;
    let mut sample_error = None;
    let mut probe_name = "none";
    let mut plug = plan.plug.clone();
    let duties = plug.duties();
    got.needs_done = duties.require_done;
    got.tree = duties.sample_tree;
    let (stop, status) = loop {
        let process = Process {
            exe,
            strategy: plan.strategy,
            preload: preload.as_deref(),
            plug: &plug,
            interval: plan.interval,
            clock_zero,
            deadline,
            samples,
            cgroup: plan.cgroup,
            cgroup_name: format!(
                "memrel-{}-run{}-{}",
                std::process::id(),
                plan.run,
                got.processes + 1
            ),
        };
        let ended = match process.run(vram.take(), &mut got, &mut meta, on_event) {
            Ok(ended) => ended,
            Err(error) => {
                // Nothing ran in this process; what earlier ones measured is kept.
                meta.error = Some(error);
                meta.duration_s = clock_zero.elapsed().as_secs_f64();
                let record = RunRecord {
                    meta,
                    samples: Vec::new(),
                    events: got.events,
                    decimation: None,
                };
                return (record, probe_name);
            }
        };
        sample_error = sample_error.or(ended.sample_error);
        vram = ended.vram;
        probe_name = ended.probe_name;
        let clean = ended.stop.is_none() && ended.status.is_some_and(|s| s.success());
        match got.handover.take() {
            Some(resume) if clean => {
                plug.resume_at(resume);
                got.processes += 1;
            }
            _ => break (ended.stop, ended.status),
        }
    };
    meta.checks
        .extend(vram.map(|v| v.checks()).unwrap_or_default());
    meta.duration_s = clock_zero.elapsed().as_secs_f64();
    if duties.check_strategy {
        got.judge_program(plan.strategy, &meta.checks);
    }
    let (run_status, error) = outcome(stop, status, &got, plan.timeout);
    meta.status = run_status;
    meta.error = match stop {
        None => error.map(|e| name_out_of_memory(e, &meta.stderr_tail)),
        Some(_) => error,
    };
    meta.status = allocation_failed(meta.status, meta.error.as_deref());
    if let (Some(e), RunStatus::Completed) = (sample_error, meta.status) {
        // A run whose samples did not all reach the disk is not a measurement.
        meta.status = RunStatus::Failed;
        meta.error = Some(e);
    }
    (
        RunRecord {
            meta,
            samples: Vec::new(),
            events: got.events,
            decimation: None,
        },
        probe_name,
    )
}

/// One worker process of a run.
struct Process<'a> {
    exe: &'a Path,
    strategy: &'static Strategy,
    preload: Option<&'a Path>,
    plug: &'a Plug,
    interval: Duration,
    clock_zero: Instant,
    deadline: Instant,
    samples: &'a SampleTarget,
    cgroup: &'a crate::cgroup::setup::Setup,
    /// The name of the process's own cgroup under `--cgroup-parent`.
    cgroup_name: String,
}

/// How one worker process ended.
struct Ended {
    stop: Option<Stop>,
    status: Option<ExitStatus>,
    /// Why its samples did not all reach samples.csv.
    sample_error: Option<String>,
    vram: Option<Box<dyn VramProbe>>,
    probe_name: &'static str,
}

impl Process<'_> {
    /// Spawns the worker, samples it and reads its channel until it ends, is
    /// killed at the deadline, or memrel is interrupted. `Err`: it could not
    /// be started (the run's error).
    fn run(
        &self,
        vram: Option<Box<dyn VramProbe>>,
        got: &mut Collected,
        meta: &mut RunMeta,
        on_event: &mut dyn FnMut(&Event),
    ) -> Result<Ended, String> {
        let channel = Channel::open()
            .map_err(|e| format!("cannot open the worker's event channel (a pipe): {e}"))?;
        let writer = self
            .samples
            .writer()
            .map_err(|e| format!("cannot write the run's samples: {e:#}"))?;
        let mut command = self.plug.command(self.exe, self.strategy)?;
        let io = self.plug.io();
        command
            .stdin(if io.stdin {
                stdin::for_program()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        meta.ignored_env = strategy::clean_environment(&mut command, self.strategy, self.preload);
        channel.attach(&mut command);
        child::configure(&mut command);
        let mut cgroup = self.cgroup.prepare(&self.cgroup_name)?;
        cgroup.apply(&mut command);
        let spawned_child = command.spawn();
        let mut child = match spawned_child {
            Ok(child) => child,
            Err(e) => {
                record_cgroup(meta, cgroup.finish());
                return Err(self.plug.start_error(self.exe, &e));
            }
        };
        // What the program reads of a terminal goes through memrel (`stdin`).
        let _feeding = stdin::feed(&mut child);
        let pid = child.id();
        let spawned = Instant::now();
        cgroup.count_others();
        let duties = self.plug.duties();
        got.program = duties.complete_edges.then(|| ProgramState {
            numbering: CycleNumbering::default(),
            environment_checked: !duties.check_strategy,
            failed_checks: Vec::new(),
        });
        if meta.pid == 0 {
            meta.pid = pid;
        } else {
            meta.respawned_pids.push(pid);
        }
        // Under --tree a phase edge is read like the samples: the tree's sum
        // (host memory and VRAM per GPU).
        let host = if duties.complete_edges && duties.sample_tree {
            Some(Probe::open_tree(pid))
        } else {
            duties
                .complete_edges
                .then(|| StatmProbe::open(pid).ok().map(Probe::Procfs))
                .flatten()
        };
        // The kernel's peak between edges is one process's VmHWM: not the
        // tree's PSS sum the samples are under --tree.
        let kernel_peak =
            if duties.sample_tree {
                Err("the samples are the process tree's PSS (--tree); the kernel's peak (VmHWM) is \
                 one process's, so it is not put beside them"
                .to_string())
            } else {
                KernelPeak::open(pid)
            };
        // The model files' page cache: read by the sampler at a low rate and
        // at every phase edge (probes sharing one failure note).
        let files = self.plug.weight_files();
        got.page_cache = (!files.is_empty()).then(|| {
            PageCacheProbe::new(&files, Method::choose(files.first().map(|f| f.as_path())).0)
        });
        let edges = edges::EdgeReader::new(pid)
            .host(host)
            .vram(
                duties
                    .vram_at_edges
                    .then(crate::sampler::vram::open_nvml)
                    .flatten(),
            )
            .container(cgroup.probe())
            .page_cache(got.page_cache.clone());
        let (messages, _edges) = channel.start_reader(self.clock_zero, edges, kernel_peak);
        let (echo_out, echo_err) = if io.show_output {
            (Some(drain::Echo::Stdout), Some(drain::Echo::Stderr))
        } else {
            (None, None)
        };
        let stdout = drain::spawn(child.stdout.take(), TAIL_BYTES, echo_out);
        let stderr = drain::spawn(child.stderr.take(), TAIL_BYTES, echo_err);
        let sampler = match Sampler::start_with(
            pid,
            self.interval,
            self.clock_zero,
            vram,
            duties.sample_tree,
            writer,
            crate::sampler::Extras {
                container: cgroup.probe(),
                page_cache: got.page_cache.clone(),
                resources: crate::sampler::resources::open_all(pid),
            },
        ) {
            Ok(sampler) => sampler,
            Err(e) => {
                child::kill_group(pid);
                let _ = child::wait_bounded(&mut child, REAP_GRACE);
                return Err(format!("cannot start the sampler thread: {e}"));
            }
        };
        let probe_name = sampler.probe_name;
        let tree_pids = std::sync::Arc::clone(&sampler.tree_pids);

        // A program's own peak, read (never reset) at every tick while it
        // runs: wait4's ru_maxrss would also hold a child's it waited for,
        // which is not the scope of the samples (the process alone).
        let mut own_peak = (duties.complete_edges && !duties.sample_tree)
            .then(|| KernelPeak::open(pid).ok())
            .flatten();
        let mut own_peak_bytes = None;
        let mut channel_open = true;
        let mut channel_closed_at: Option<Instant> = None;
        let stop = loop {
            if let Some(peak) = own_peak.as_mut() {
                own_peak_bytes = peak.vm_hwm_bytes().or(own_peak_bytes);
            }
            if channel_open {
                match messages.recv_timeout(TICK) {
                    Ok(arrival) => got.take(arrival, meta, on_event),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => channel_open = false,
                }
            } else {
                // A worker that closed its channel is about to exit: notice
                // it within a millisecond (for a second; then at the tick).
                let closed_for = channel_closed_at.get_or_insert_with(Instant::now).elapsed();
                std::thread::sleep(if closed_for < EXIT_WATCH {
                    EXIT_POLL
                } else {
                    TICK
                });
            }
            if child::has_exited(pid) {
                break None;
            }
            // A program's environment is checked once it has run a moment
            // (the dynamic loader has mapped what was preloaded).
            if let Some(program) = got.program.as_mut().filter(|p| !p.environment_checked) {
                if spawned.elapsed() >= PROGRAM_LOOK_AFTER || got.events_taken > 0 {
                    let checks = environment_checks(pid, self.strategy, self.preload);
                    if checks.iter().all(|c| c.ok) || spawned.elapsed() >= PROGRAM_LOOK_UNTIL {
                        program.environment_checked = true;
                        meta.checks.extend(checks);
                    } else {
                        // Kept for a program that ends before the next look.
                        program.failed_checks = checks;
                    }
                }
            }
            if let Some(sig) = signals::received() {
                break Some(Stop::Signal(sig));
            }
            if Instant::now() >= self.deadline {
                break Some(Stop::Timeout);
            }
        };
        // A program that ended while a check still failed: its last look.
        if let Some(program) = got.program.as_mut().filter(|p| !p.environment_checked) {
            program.environment_checked = true;
            meta.checks.append(&mut program.failed_checks);
        }
        // The worker is a zombie or about to be killed: its group id is still
        // reserved, so this reaches everything it started and nothing else.
        child::kill_group(pid);
        let (status, waited_peak_bytes) = child::wait_bounded_peak(&mut child, REAP_GRACE);
        // A descendant that left the group outlives the program: named, with
        // what it holds; its pipes are given a moment, not the full grace.
        let outlived = tree_pids
            .lock()
            .map(|tree| child::outlived(&tree, pid))
            .unwrap_or_default();
        for o in &outlived {
            eprintln!(
                "memrel: warning: run {}: process {} ({}) that the program started outlived it, \
                 holding {:.1} MiB; memrel does not wait for it: end it in the program, or kill it",
                meta.run,
                o.pid,
                o.command,
                o.rss_bytes as f64 / (1024.0 * 1024.0)
            );
        }
        let pipe_grace = if outlived.is_empty() {
            PIPE_GRACE
        } else {
            OUTLIVED_PIPE_GRACE
        };
        meta.outlived.extend(outlived);
        // The process's own peak, in the scope of the samples: memrel's
        // worker holds no child, so wait4's is its own; a program's is read
        // while it ran; a tree has no VmHWM (its samples are PSS sums).
        let peak_bytes = if duties.sample_tree {
            None
        } else if duties.complete_edges {
            own_peak_bytes
        } else {
            waited_peak_bytes
        };
        let (sample_error, vram, last) = match sampler.stop_keep_probe() {
            Ok((writer, vram)) => {
                let last = writer.last();
                (writer.finish(), vram, last)
            }
            Err(e) => (Some(e.to_string()), None, None),
        };
        // SIGKILL that memrel did not send, while an OOM kill counter rose.
        got.oom_killed = match (
            stop,
            status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        ) {
            (None, Some(libc::SIGKILL)) => cgroup.oom_kill(&last_reading(last.as_ref())),
            _ => None,
        };
        record_cgroup(meta, cgroup.finish());
        let sample_error =
            sample_error.map(|e| format!("cannot write the run's samples to samples.csv: {e}"));
        if channel_open {
            got.drain(&messages, pipe_grace, meta, on_event);
        }
        if let Some(why) = got.page_cache.take().and_then(|p| p.failure()) {
            // The readings before it are kept; the note says why the rest is missing.
            meta.page_cache_note.get_or_insert(why);
        }
        // A program that sent no `done` (no memrel module, or one that
        // failed) still has the kernel's peak; after the last edge's reset,
        // it is the peak since that edge, one part of the run's.
        meta.vm_hwm_bytes = meta.vm_hwm_bytes.max(peak_bytes);
        got.fill_trailing_peak(peak_bytes, meta);
        append_tail(
            &mut meta.stdout_tail,
            stdout.finish(pipe_grace),
            got.processes,
        );
        append_tail(
            &mut meta.stderr_tail,
            stderr.finish(pipe_grace),
            got.processes,
        );
        Ok(Ended {
            stop,
            status,
            sample_error,
            vram,
            probe_name,
        })
    }
}

/// Keeps a process's cgroup in the run's metadata: the first process's
/// start, the latest one's end (respawn runs several in turn).
fn record_cgroup(meta: &mut RunMeta, process: crate::cgroup::view::CgroupRun) {
    match &mut meta.cgroup {
        Some(run) => {
            run.at_end = process.at_end;
            run.error = run.error.take().or(process.error);
        }
        None => meta.cgroup = Some(process),
    }
}

/// The last sample, for an OOM kill's error.
fn last_reading(last: Option<&crate::record::Sample>) -> String {
    use crate::cgroup::setup::mib;
    let Some(s) = last else {
        return "none (no sample was taken)".to_string();
    };
    let container = s
        .container
        .map(|c| {
            format!(
                ", cgroup usage {}, working set {}",
                mib(c.usage_bytes),
                mib(c.working_set_bytes)
            )
        })
        .unwrap_or_default();
    format!("RSS {} at {:.3} s{container}", mib(s.rss_bytes), s.t_s)
}

/// Adds one process's output tail to the run's, keeping the last [`TAIL_BYTES`];
/// a later process's tail is headed by its number.
fn append_tail(tail: &mut String, more: String, process: u32) {
    if more.is_empty() {
        return;
    }
    if process > 0 {
        tail.push_str(&format!("--- worker process {} ---\n", process + 1));
    }
    tail.push_str(&more);
    if tail.len() > TAIL_BYTES {
        let mut cut = tail.len() - TAIL_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail.drain(..cut);
    }
}

fn empty_record(meta: RunMeta) -> RunRecord {
    RunRecord {
        meta,
        samples: Vec::new(),
        events: Vec::new(),
        decimation: None,
    }
}

#[cfg(test)]
mod tests {
    use super::channel::Arrival;
    use super::outcome::*;
    use super::*;
    use crate::protocol::{Edge, Message, Phase, PhaseEdge};
    use std::os::unix::process::ExitStatusExt;

    const TIMEOUT: Duration = Duration::from_secs(7);

    fn finished(protocol_errors: usize) -> Collected {
        Collected {
            done: true,
            needs_done: true,
            protocol_errors: vec![
                "at 0.1 s: not a protocol message".into();
                protocol_errors.min(3)
            ],
            protocol_error_count: protocol_errors,
            ..Collected::default()
        }
    }

    fn edge_arrival(edge: Edge, kernel_peak: Option<Result<u64, String>>) -> Arrival {
        Arrival {
            t_s: 0.1,
            parsed: Ok(crate::protocol::Envelope::new(Message::Phase(PhaseEdge {
                phase: Phase::Load,
                edge,
                cycle: 1,
                model: Some("a".into()),
                elapsed_s: None,
                memory: crate::protocol::MemoryAtEdge::default(),
                allocator: None,
                heap: None,
                note: None,
                mono_s: None,
            }))),
            kernel_peak,
            extras: Default::default(),
        }
    }

    fn done_arrival(vm_hwm_bytes: u64) -> Arrival {
        Arrival {
            t_s: 0.2,
            parsed: Ok(crate::protocol::Envelope::new(Message::Done(
                crate::protocol::Done {
                    vm_hwm_bytes,
                    checks: Vec::new(),
                },
            ))),
            kernel_peak: None,
            extras: Default::default(),
        }
    }

    /// An edge whose line arrived after the worker exited gets the peak
    /// the worker's `done` (or wait4) gives, when it is the only one since
    /// the last reset; two such edges get none.
    #[test]
    fn the_last_edge_read_after_the_exit_gets_the_processs_last_peak() {
        let mut meta = RunMeta::planned(1, "drop", 1);
        let mut got = Collected::default();
        got.take(
            edge_arrival(Edge::Begin, Some(Ok(100))),
            &mut meta,
            &mut |_| {},
        );
        got.take(edge_arrival(Edge::End, None), &mut meta, &mut |_| {});
        got.take(done_arrival(300), &mut meta, &mut |_| {});
        let peaks: Vec<_> = got.events.iter().map(|e| e.kernel_peak_bytes).collect();
        assert_eq!(peaks, [Some(100), Some(300)]);
        // wait4's peak after that changes nothing.
        got.fill_trailing_peak(Some(999), &meta);
        assert_eq!(got.events[1].kernel_peak_bytes, Some(300));

        let mut got = Collected::default();
        got.take(edge_arrival(Edge::Begin, None), &mut meta, &mut |_| {});
        got.take(edge_arrival(Edge::End, None), &mut meta, &mut |_| {});
        got.take(done_arrival(300), &mut meta, &mut |_| {});
        assert!(got.events.iter().all(|e| e.kernel_peak_bytes.is_none()));

        // Where the peaks are not available at all, none is made up.
        let mut meta = RunMeta::planned(1, "drop", 1);
        let mut got = Collected::default();
        got.take(
            edge_arrival(Edge::Begin, Some(Err("refused".into()))),
            &mut meta,
            &mut |_| {},
        );
        got.take(edge_arrival(Edge::End, None), &mut meta, &mut |_| {});
        got.fill_trailing_peak(Some(300), &meta);
        assert!(got.events.iter().all(|e| e.kernel_peak_bytes.is_none()));
    }

    #[test]
    fn a_clean_exit_after_done_completes() {
        let got = finished(0);
        let exit = Some(ExitStatus::from_raw(0));
        assert_eq!(
            outcome(None, exit, &got, TIMEOUT),
            (RunStatus::Completed, None)
        );
    }

    #[test]
    fn a_protocol_error_fails_a_run_that_otherwise_completed() {
        let got = finished(5);
        let exit = Some(ExitStatus::from_raw(0));
        let (status, error) = outcome(None, exit, &got, TIMEOUT);
        assert_eq!(status, RunStatus::Failed);
        let error = error.expect("an error");
        assert!(
            error.contains("5 bad line(s)") && error.contains("2 more"),
            "{error}"
        );
    }

    #[test]
    fn a_signal_memrel_did_not_send_is_named() {
        let got = Collected::default();
        let exit = Some(ExitStatus::from_raw(libc::SIGKILL));
        let (status, error) = outcome(None, exit, &got, TIMEOUT);
        assert_eq!(status, killed_status());
        let error = error.expect("an error");
        assert!(
            error.contains("SIGKILL") && error.contains("did not send"),
            "{error}"
        );
    }

    #[test]
    fn memrel_stopping_the_worker_says_why() {
        let got = finished(0);
        let killed = Some(ExitStatus::from_raw(libc::SIGKILL));
        let (status, error) = outcome(Some(Stop::Timeout), killed, &got, TIMEOUT);
        assert_eq!(status, RunStatus::TimedOut);
        assert!(error.is_some_and(|e| e.contains("timeout_s (7 s)")));
        let (status, error) = outcome(Some(Stop::Signal(libc::SIGINT)), killed, &got, TIMEOUT);
        assert_eq!(status, interrupted_status());
        assert!(error.is_some_and(|e| e.contains("interrupted") && e.contains("SIGINT")));
    }

    #[test]
    fn an_allocation_that_failed_is_reported_as_out_of_memory() {
        let died = "the worker was killed by signal 6 (SIGABRT), which memrel did not send";
        let tail = "memrel: preparing model\nmemory allocation of 17825792 bytes failed\n";
        let error = name_out_of_memory(died.into(), tail);
        assert_eq!(
            error,
            format!("out of memory: memory allocation of 17825792 bytes failed ({died})")
        );
        let refused = "path: \"model.safetensors\" Cannot allocate memory (os error 12)";
        assert_eq!(
            name_out_of_memory(refused.into(), ""),
            format!("out of memory: {refused}")
        );
        let python =
            "Traceback (most recent call last):\n  File \"<string>\", line 1\nMemoryError\n";
        assert_eq!(
            name_out_of_memory("the program exited with code 1".into(), python),
            "out of memory: MemoryError (the program exited with code 1)"
        );
        let cxx = "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n";
        assert!(name_out_of_memory("x".into(), cxx)
            .starts_with("out of memory: what():  std::bad_alloc"));
        let other = "model.safetensors is truncated";
        assert_eq!(name_out_of_memory(other.into(), "allocation of x"), other);
    }

    #[test]
    fn a_sigkill_while_an_oom_kill_counter_rose_is_an_oom_kill() {
        let kill = Some(ExitStatus::from_raw(libc::SIGKILL));
        // The counters did not move: a SIGKILL like any other.
        let (status, _) = outcome(None, kill, &Collected::default(), TIMEOUT);
        assert_eq!(status, RunStatus::Killed);
        // They rose (the orchestrator read them after the worker died).
        let watch = crate::cgroup::oom::OomWatch::with(None, Some(3));
        let rose = watch
            .rose_to(None, Some(4))
            .expect("the machine's counter rose");
        let got = Collected {
            oom_killed: Some(format!(
                "out of memory: {rose}; limit 512.0 MiB; last reading: RSS 511.0 MiB"
            )),
            ..Collected::default()
        };
        let (status, error) = outcome(None, kill, &got, TIMEOUT);
        assert_eq!(status, RunStatus::OomKilled);
        let error = error.expect("an error");
        assert!(
            error.contains("/proc/vmstat rose from 3 to 4") && error.contains("limit"),
            "{error}"
        );
        // memrel's own kill (a timeout) stays a timeout.
        let (status, _) = outcome(Some(Stop::Timeout), kill, &got, TIMEOUT);
        assert_eq!(status, RunStatus::TimedOut);
        assert_eq!(
            serde_json::to_value(RunStatus::OomKilled).unwrap(),
            "oom_killed"
        );
    }

    #[test]
    fn a_refused_allocation_has_its_own_status() {
        let oom = Some("out of memory: memory allocation of 1 bytes failed (…)");
        assert_eq!(
            allocation_failed(RunStatus::Failed, oom),
            RunStatus::AllocFailed
        );
        assert_eq!(
            allocation_failed(RunStatus::Killed, oom),
            RunStatus::AllocFailed
        );
        assert_eq!(
            allocation_failed(RunStatus::OomKilled, oom),
            RunStatus::OomKilled
        );
        assert_eq!(
            allocation_failed(RunStatus::Failed, Some("truncated")),
            RunStatus::Failed
        );
        assert_eq!(
            allocation_failed(RunStatus::Completed, None),
            RunStatus::Completed
        );
        assert_eq!(
            serde_json::to_value(RunStatus::AllocFailed).unwrap(),
            "alloc_failed"
        );
    }

    #[test]
    fn a_worker_error_message_is_kept() {
        let got = Collected {
            worker_error: Some("model.safetensors is truncated".into()),
            ..Collected::default()
        };
        let exit = Some(ExitStatus::from_raw(3 << 8));
        let (status, error) = outcome(None, exit, &got, TIMEOUT);
        assert_eq!(status, RunStatus::Failed);
        assert_eq!(error.as_deref(), Some("model.safetensors is truncated"));
    }
}
