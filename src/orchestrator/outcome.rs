//! How a run ended, in its status and error: why memrel stopped it, how the
//! worker exited and what it said, an allocation refused named "out of
//! memory" first. It reads what `intake` collected; it measures nothing.

use std::process::ExitStatus;
use std::time::Duration;

use super::{child, Stop, REAP_GRACE};
use crate::record::RunStatus;
use crate::session::Collected;

/// The run's status and error from why it stopped, how the worker ended and
/// what it said. A protocol error fails a run that would otherwise complete:
/// its events cannot be trusted to be all there.
pub(super) fn outcome(
    stop: Option<Stop>,
    status: Option<ExitStatus>,
    got: &Collected,
    timeout: Duration,
) -> (RunStatus, Option<String>) {
    let (run_status, primary) = match stop {
        Some(Stop::Timeout) => (
            RunStatus::TimedOut,
            Some(format!(
                "worker ran past the scenario's timeout_s ({:.0} s) and was killed with its process group",
                timeout.as_secs_f64()
            )),
        ),
        Some(Stop::Signal(sig)) => (
            interrupted_status(),
            Some(format!(
                "interrupted: memrel received {} and killed the worker's process group",
                child::signal_name(sig)
            )),
        ),
        None => {
            use std::os::unix::process::ExitStatusExt;
            let clean = status.is_some_and(|s| s.success()) && (got.done || !got.needs_done);
            if clean && got.protocol_error_count == 0 && got.not_in_effect.is_none() {
                return (RunStatus::Completed, None);
            }
            let killed = status.is_some_and(|s| s.signal().is_some());
            if let (true, Some(oom)) = (killed, &got.oom_killed) {
                return (RunStatus::OomKilled, Some(oom.clone()));
            }
            let primary = if clean {
                got.not_in_effect.clone()
            } else if killed {
                Some(child::describe_exit(status, REAP_GRACE, got.program.is_some()))
            } else {
                got.worker_error
                    .clone()
                    .or_else(|| Some(child::describe_exit(status, REAP_GRACE, got.program.is_some())))
            };
            let run_status = if killed {
                killed_status()
            } else {
                RunStatus::Failed
            };
            (run_status, primary)
        }
    };
    let error = match (primary, got.protocol_error()) {
        (Some(p), Some(e)) => Some(format!("{p}; also {e}")),
        (p, e) => p.or(e),
    };
    (run_status, error)
}

/// How a program's last stderr line says an allocation was refused.
pub(super) const PROGRAM_OUT_OF_MEMORY: [&str; 4] = [
    "MemoryError",
    "std::bad_alloc",
    "torch.OutOfMemoryError",
    "torch.cuda.OutOfMemoryError",
];

/// What Rust's allocation-failure handler prints before it aborts the worker.
pub(super) const ALLOC_FAILED_PREFIX: &str = "memory allocation of ";

/// Says "out of memory" first in the error of a worker that ran out of it:
/// an allocation that failed (Rust's handler named it on stderr, then
/// aborted) or a mapping or device allocation refused with ENOMEM or
/// CUDA_ERROR_OUT_OF_MEMORY (the worker's own error names it). A limit on the
/// worker (RLIMIT_AS, a cgroup) shows up as one of these (`alloc_failed`);
/// the kernel's OOM killer sends SIGKILL, which the OOM kill counters tell
/// apart (`oom_killed`, see `cgroup::oom`).
pub(super) fn name_out_of_memory(error: String, stderr_tail: &str) -> String {
    if error.starts_with("out of memory") {
        return error;
    }
    let failed_allocation = stderr_tail.lines().rev().find(|line| {
        line.trim_start().starts_with(ALLOC_FAILED_PREFIX) && line.trim_end().ends_with("failed")
    });
    if let Some(line) = failed_allocation {
        return format!("out of memory: {} ({error})", line.trim());
    }
    // A program's last words: Python's MemoryError, C++'s std::bad_alloc,
    // PyTorch's OutOfMemoryError.
    let last_line = stderr_tail.lines().rev().find(|l| !l.trim().is_empty());
    if let Some(line) = last_line.filter(|l| {
        PROGRAM_OUT_OF_MEMORY
            .iter()
            .any(|p| l.trim_start().starts_with(p) || l.contains(&format!(" {p}")))
    }) {
        return format!("out of memory: {} ({error})", line.trim());
    }
    let lower = error.to_lowercase();
    if lower.contains("os error 12")
        || lower.contains("cannot allocate memory")
        || lower.contains("out_of_memory")
        || lower.contains("out of memory")
    {
        return format!("out of memory: {error}");
    }
    error
}

/// `alloc_failed` for a run that failed or aborted because an allocation was
/// refused (its error starts "out of memory", see [`name_out_of_memory`]);
/// an OOM kill keeps its own status.
pub(super) fn allocation_failed(status: RunStatus, error: Option<&str>) -> RunStatus {
    match (status, error) {
        (RunStatus::Failed | RunStatus::Killed, Some(e)) if e.starts_with("out of memory") => {
            RunStatus::AllocFailed
        }
        _ => status,
    }
}

/// The status of a worker killed by a signal memrel did not send (the error names it).
pub(super) fn killed_status() -> RunStatus {
    RunStatus::Killed
}

/// The status of a run cut short by SIGINT/SIGTERM to memrel (the error says so).
pub(super) fn interrupted_status() -> RunStatus {
    RunStatus::Killed
}
