//! Faults around the worker channel and memrel's own signals, end to end through the real binary: a worker
//! whose stdout is full of noise that looks like events, a worker that closes
//! its channel and hangs with a grandchild, a worker killed by a signal memrel
//! did not send, and memrel itself stopped by SIGINT or SIGTERM mid-run.
//! Every case also checks that the results directory is complete enough for
//! `memrel report` to re-render it.
//!
//! The faults come from the real worker's test hooks (src/worker/hooks.rs),
//! set through the environment; the scenarios use the tiny bert-tiny preset
//! and finish in seconds.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use memrel::record::Record;

/// The (run, cycle, phase, edge) rows of events.csv.
fn event_rows(dir: &Path) -> Vec<(String, String, String, String)> {
    let mut reader = csv::Reader::from_path(dir.join("events.csv")).expect("events.csv");
    let headers = reader.headers().expect("header").clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("events.csv has {name}"))
    };
    let (run, cycle, phase, edge) = (col("run"), col("cycle"), col("phase"), col("edge"));
    reader
        .records()
        .map(|r| {
            let r = r.expect("row");
            (
                r[run].to_string(),
                r[cycle].to_string(),
                r[phase].to_string(),
                r[edge].to_string(),
            )
        })
        .collect()
}

#[test]
fn stdout_noise_that_looks_like_events_neither_loses_nor_fakes_an_event() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = run("ci-smoke").out(tmp.path()).env(NOISE_ENV, "1").output();
    assert!(
        output.status.success(),
        "memrel run failed: {}",
        text(&output.stderr)
    );
    let dir = only_results_dir(tmp.path(), "ci-smoke");

    // ci-smoke: 2 strategies, baseline, then 3 cycles of load, forward, unload, release, settle.
    let mut expected = Vec::new();
    for run in ["1", "2"] {
        for edge in ["begin", "end"] {
            expected.push((run.into(), "0".into(), "baseline".into(), edge.into()));
        }
        for cycle in ["1", "2", "3"] {
            for phase in ["load", "forward", "unload", "release", "settle"] {
                for edge in ["begin", "end"] {
                    expected.push((run.into(), cycle.into(), phase.into(), edge.into()));
                }
            }
        }
    }
    assert_eq!(event_rows(&dir), expected);

    for run in runs(&dir) {
        assert_eq!(run["status"], "completed", "{run}");
        let tail = run["stdout_tail"].as_str().unwrap_or_default();
        // The noise really was printed (the hook is not inert) and is kept.
        assert!(
            tail.contains("\"cycle\":9999") && tail.contains("library progress 42%"),
            "the worker's stdout noise is kept in the record: {tail}"
        );
    }
    assert_rerenders(&dir);
}

#[test]
fn a_worker_that_closes_its_channel_and_hangs_is_killed_at_the_timeout_with_its_grandchild() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = scenario(tmp.path(), "hang", 2, 2.0, 20, "");
    let start = Instant::now();
    let mut child = run(&path)
        .out(tmp.path())
        .env(HANG_ENV, "baseline")
        .spawn(false);
    // Model preparation included; without the bound memrel would wait forever.
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let elapsed = start.elapsed();
    assert_eq!(status.code(), Some(2));
    assert!(
        elapsed < Duration::from_secs(20),
        "memrel waited {elapsed:?} on a 2 s timeout"
    );
    let dir = only_results_dir(tmp.path(), "hang");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "timed_out", "{}", runs[0]);
    let error = runs[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("timeout_s (2 s)"), "{error}");
    assert!(
        runs[0]["duration_s"].as_f64().unwrap_or(0.0) < 10.0,
        "{}",
        runs[0]
    );

    let tail = runs[0]["stderr_tail"].as_str().unwrap_or_default();
    let grandchild: i64 = tail
        .split("grandchild pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("the hook names its grandchild: {tail}"));
    assert_gone(grandchild, "the hung worker's grandchild");
    assert_gone(runs[0]["pid"].as_i64().expect("pid"), "the hung worker");
    assert_rerenders(&dir);
}

#[test]
fn a_worker_killed_by_a_signal_memrel_did_not_send_is_reported_with_the_signal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = scenario(tmp.path(), "foreign-kill", 1, 60.0, 20, "");
    let mut child = run(&path)
        .out(tmp.path())
        .env(HANG_ENV, "baseline")
        .spawn(false);
    let mut workers = Vec::new();
    wait_for("the worker", || {
        workers = children_of(child.id());
        !workers.is_empty()
    });
    // SAFETY: a plain kill(2) of the worker this test found.
    unsafe { libc::kill(workers[0] as libc::pid_t, libc::SIGKILL) };
    let status = wait_with_limit(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(2));
    let dir = only_results_dir(tmp.path(), "foreign-kill");
    let runs = runs(&dir);
    assert_eq!(
        runs[0]["status"], "killed",
        "not the 60 s timeout: {}",
        runs[0]
    );
    let error = runs[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("signal 9 (SIGKILL), which memrel did not send"),
        "{error}"
    );
    assert_rerenders(&dir);
}

/// Runs two long runs, sends `sig` to memrel while the second runs, and
/// checks the exit code, the saved record and the re-rendering.
fn interrupt_the_second_run(sig: i32, name: &str, want_code: i32) {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Each run: 2 cycles with an idle of 1 s: long enough to be caught in the middle.
    let path = scenario(tmp.path(), name, 2, 60.0, 20, ", \"idle 1000\"");
    let mut child = run(&path).repeat(2).out(tmp.path()).spawn(true);
    // The first run is saved; the second one's worker is running.
    wait_for("the first run's record", || {
        first_run_saved(tmp.path(), name)
    });
    let mut workers = Vec::new();
    wait_for("the second worker", || {
        workers = children_of(child.id());
        !workers.is_empty()
    });
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    // SAFETY: a plain kill(2) of the memrel process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    let status = wait_with_limit(&mut child, Duration::from_secs(20));
    let reaction = start.elapsed();
    let stderr = child
        .stderr
        .take()
        .map(|mut e| {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
        .unwrap_or_default();
    assert_eq!(status.code(), Some(want_code), "{stderr}");
    assert!(
        reaction < Duration::from_secs(5),
        "memrel took {reaction:?} to stop"
    );
    assert!(stderr.contains("interrupted by"), "{stderr}");
    for worker in workers {
        assert_gone(worker, "the interrupted worker");
    }

    let dir = only_results_dir(tmp.path(), name);
    let runs = runs(&dir);
    assert_eq!(runs.len(), 2, "the interrupted run is saved too");
    assert_eq!(runs[0]["status"], "completed", "{}", runs[0]);
    assert_eq!(runs[1]["status"], "killed", "{}", runs[1]);
    let error = runs[1]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("interrupted"), "{error}");
    let samples = std::fs::read_to_string(dir.join("samples.csv")).expect("samples.csv");
    assert!(
        samples.lines().any(|l| l.split(',').nth(1) == Some("2")),
        "the second run's samples are kept"
    );
    assert_rerenders(&dir);
}

#[test]
fn sigint_mid_run_saves_everything_and_exits_130() {
    interrupt_the_second_run(libc::SIGINT, "sigint", 130);
}

#[test]
fn sigterm_mid_run_saves_everything_and_exits_143() {
    interrupt_the_second_run(libc::SIGTERM, "sigterm", 143);
}

/// memrel itself killed in the middle of a run (no handler can run): the
/// samples and edges it had streamed to disk make a record `report` renders,
/// and the worker dies with it (PR_SET_PDEATHSIG).
#[test]
fn memrel_sigkilled_mid_run_leaves_a_record_that_report_renders() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = scenario(tmp.path(), "memrel-killed", 3, 60.0, 20, ", \"idle 1000\"");
    let mut child = run(&path).out(tmp.path()).spawn(false);
    let mut workers = Vec::new();
    wait_for("the worker", || {
        workers = children_of(child.id());
        !workers.is_empty()
    });
    // Into the second cycle's idle: edges and samples are on disk by now.
    wait_for("the second cycle", || {
        results_dirs(tmp.path(), "memrel-killed").iter().any(|d| {
            std::fs::read_to_string(d.join("events.csv"))
                .is_ok_and(|e| e.lines().any(|l| l.contains(",2,load,end,")))
        })
    });
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: a plain kill(2) of the memrel process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let _ = wait_with_limit(&mut child, Duration::from_secs(10));
    for worker in workers {
        assert_gone(worker, "the worker of a killed memrel");
    }

    let dir = only_results_dir(tmp.path(), "memrel-killed");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "killed", "{}", runs[0]);
    let error = runs[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("memrel stopped while this run was going on"),
        "{error}"
    );
    assert!(
        !dir.join("summary.json").exists(),
        "no summary before report"
    );
    // The kill may have cut samples.csv's last row: what was streamed is
    // read on purpose into a new directory (report re-renders in place only
    // from a complete record, and says what is cut: exit 2).
    let repaired = tmp.path().join("repaired");
    run_ok(memrel().arg("report").arg(&dir).arg("--out").arg(&repaired));
    let summary = summary(&repaired);
    let run = &summary["runs"][0];
    // At 5 ms for more than 1.3 s: a few hundred samples, all kept.
    assert!(run["samples"].as_u64().unwrap_or(0) > 100, "{run}");
    let cycles = run["resources"][0]["cycles"].as_array().expect("cycles");
    assert!(!cycles.is_empty(), "cycle 1 is measured: {run}");
    let png = std::fs::read(repaired.join("timeline.png")).expect("timeline.png");
    assert!(png.starts_with(b"\x89PNG"));
    let (_, damage) = Record::load_partial(&dir).expect("the record reads back");
    let in_place = memrel().arg("report").arg(&dir).output().expect("report");
    let want = if damage.is_empty() { 0 } else { 2 };
    assert_eq!(in_place.status.code(), Some(want), "{}", streams(&in_place));
}
