//! The run's end as the orchestrator sees it: what `intake` takes in (a
//! late edge's peak, `done`) and how `outcome` names the run's status and
//! error (exits, signals, timeouts, protocol errors, OOM kills, refused
//! allocations).

use super::outcome::*;
use super::*;
use crate::protocol::{Edge, Message, Phase, PhaseEdge};
use crate::session::Arrival;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

const TIMEOUT: Duration = Duration::from_secs(7);

fn finished(protocol_errors: usize) -> Collected {
    Collected {
        done: true,
        needs_done: true,
        protocol_errors: vec!["at 0.1 s: not a protocol message".into(); protocol_errors.min(3)],
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
            views: Default::default(),
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
    let peaks: Vec<_> = got.events.iter().map(|e| e.kernel_peak_bytes()).collect();
    assert_eq!(peaks, [Some(100), Some(300)]);
    // wait4's peak after that changes nothing.
    got.fill_trailing_peak(Some(999), &meta);
    assert_eq!(got.events[1].kernel_peak_bytes(), Some(300));

    let mut got = Collected::default();
    got.take(edge_arrival(Edge::Begin, None), &mut meta, &mut |_| {});
    got.take(edge_arrival(Edge::End, None), &mut meta, &mut |_| {});
    got.take(done_arrival(300), &mut meta, &mut |_| {});
    assert!(got.events.iter().all(|e| e.kernel_peak_bytes().is_none()));

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
    assert!(got.events.iter().all(|e| e.kernel_peak_bytes().is_none()));
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
    let python = "Traceback (most recent call last):\n  File \"<string>\", line 1\nMemoryError\n";
    assert_eq!(
        name_out_of_memory("the program exited with code 1".into(), python),
        "out of memory: MemoryError (the program exited with code 1)"
    );
    let cxx = "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n";
    assert!(
        name_out_of_memory("x".into(), cxx).starts_with("out of memory: what():  std::bad_alloc")
    );
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
        serde_json::to_value(RunStatus::OomKilled).expect("a status serializes"),
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
        serde_json::to_value(RunStatus::AllocFailed).expect("a status serializes"),
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
