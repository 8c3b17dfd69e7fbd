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
//! Parts, by job: this file is a run's lifecycle (its processes in turn on
//! one clock, a `respawn` strategy's handovers, then how the run ended);
//! `process` runs one process (spawn, watch, reap; measured by a
//! `session::Session`, which opens the probes, samples, and reads every
//! resource at a phase edge, as it does for attach); `channel` (the event
//! pipe and its acknowledgements; what arrives on it is taken in by
//! `session::intake`); `outcome` (how the run ended); `child` (process
//! group, bounded waits); `drain` (output tails, shown live for `exec`);
//! `stdin` (memrel's stdin passed to a program). Ctrl-C and SIGTERM to
//! memrel are `crate::signals`'.

mod channel;
mod child;
mod drain;
mod exit_stop;
mod outcome;
mod process;
mod stdin;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::record::live::SampleTarget;
use crate::record::{Event, RunMeta, RunRecord, RunStatus};
use crate::sampler::VramProbe;
use crate::session::Collected;
use crate::strategy::{self, Strategy};
use crate::worker::Plug;
use outcome::{allocation_failed, name_out_of_memory, outcome};
use process::Process;

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

/// After the worker ended or was killed: how long it may take to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(5);

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
    judge_end(&mut meta, &got, plan.timeout, (stop, status), sample_error);
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

/// How the run ended, in `meta`'s status and error: from how its last
/// process stopped and exited, what it said, and whether every sample
/// reached the disk.
fn judge_end(
    meta: &mut RunMeta,
    got: &Collected,
    timeout: Duration,
    (stop, status): (Option<Stop>, Option<std::process::ExitStatus>),
    sample_error: Option<String>,
) {
    let (run_status, error) = outcome(stop, status, got, timeout);
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
}

fn empty_record(meta: RunMeta) -> RunRecord {
    RunRecord {
        meta,
        samples: Vec::new(),
        events: Vec::new(),
        decimation: None,
    }
}
