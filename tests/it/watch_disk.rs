//! `memrel watch` for days (issue 50 item 2): each start under `--out` is
//! a segment that goes on from the earlier one's closed cycles (cycles.csv),
//! and `--max-disk` keeps the samples under a cap (rotated, older
//! segments' removed) while edges, cycles and summaries stay.

use std::path::{Path, PathBuf};

use super::common::*;
use super::drive::{start_server, stop, VLLM_LIKE};
use super::watch::{end_watch, mark, post, scrape, start_watch_in, Watch};
use super::watch_servers::Killed;

/// `memrel watch --out OUT ARGS…` started: the child, its /metrics
/// address and the segment's directory, once it says it measures.
fn start_watch_out(out: &Path, args: &[&str]) -> (Watch, String, PathBuf) {
    let started = start_watch_in(&["--out".as_ref(), out.as_os_str()], args);
    (started.child, started.metrics, started.dir)
}

/// One sleep/wake cycle of the vLLM-shaped server, marked from outside.
fn sleep_and_wake(dir: &Path, port: u16) {
    mark(dir, "sleep");
    post(port, "/sleep?level=1");
    mark(dir, "asleep");
    mark(dir, "wake");
    post(port, "/wake_up");
    mark(dir, "settle");
}

fn cycle_rows(dir: &Path) -> Vec<csv::StringRecord> {
    let mut reader = csv::Reader::from_path(dir.join("cycles.csv")).expect("cycles.csv");
    let header = reader.headers().expect("header").clone();
    let want = [
        "closed_unix_s",
        "cycle",
        "segment_cycle",
        "model",
        "resource",
        "retained_bytes",
        "released_fraction",
        "settle_s",
        "late_bytes",
        "cycles_total",
        "sleeps_total",
        "wakes_total",
    ];
    assert_eq!(header.iter().collect::<Vec<_>>(), want);
    reader.records().map(|r| r.expect("a row")).collect()
}

/// The host rows' (cycle, segment_cycle, retained, cycles_total, sleeps_total).
fn host_rows(dir: &Path) -> Vec<(u32, u32, i64, u64, u64)> {
    cycle_rows(dir)
        .iter()
        .filter(|r| &r[4] == "host")
        .map(|r| {
            let n = |i: usize| r[i].parse::<i64>().expect("a number");
            (n(1) as u32, n(2) as u32, n(5), n(9) as u64, n(10) as u64)
        })
        .collect()
}

#[test]
fn a_restarted_watch_goes_on_from_its_closed_cycles_in_a_new_segment() {
    let work = tempfile::tempdir().expect("tempdir");
    let (server, port) = start_server(VLLM_LIKE, &["--weights-mib", "48", "--kv-mib", "32"]);
    let url = format!("http://127.0.0.1:{port}");
    let out = work.path().join("out");
    let args = ["--url", url.as_str()];

    let (watch, addr, first) = start_watch_out(&out, &args);
    for _ in 0..2 {
        sleep_and_wake(&first, port);
    }
    mark(&first, "end");
    wait_for("the first segment's two closed cycles", || {
        scrape(&addr).get("memrel_cycles_total") == Some(&2.0)
    });
    let served = scrape(&addr)["memrel_cycle_retained_bytes{resource=\"host\"}"];
    end_watch(watch);
    // Written as each closed: the record's own numbers, counters with them.
    let rows = host_rows(&first);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].0, rows[0].1, rows[0].3), (1, 1, 1), "{rows:?}");
    assert_eq!((rows[1].0, rows[1].1, rows[1].3, rows[1].4), (2, 2, 2, 2));
    assert_eq!(rows[1].2 as f64, served, "the row is what was served");

    // Started again: a segment of its own, the closed cycles served at once.
    let (watch, addr, second) = start_watch_out(&out, &args);
    assert_ne!(first, second);
    assert_eq!(first.parent(), second.parent(), "segments side by side");
    let at_start = scrape(&addr);
    assert_eq!(at_start["memrel_cycles_total"], 2.0, "{at_start:?}");
    assert_eq!(at_start["memrel_sleeps_total"], 2.0, "{at_start:?}");
    assert_eq!(at_start["memrel_wakes_total"], 2.0, "{at_start:?}");
    assert_eq!(at_start["memrel_cycle_number{resource=\"host\"}"], 2.0);
    assert_eq!(
        at_start["memrel_cycle_retained_bytes{resource=\"host\"}"],
        served
    );
    sleep_and_wake(&second, port);
    mark(&second, "end");
    let mut now = at_start;
    wait_for("the second segment's cycle closes as the third", || {
        now = scrape(&addr);
        now.get("memrel_cycles_total") == Some(&3.0)
    });
    assert_eq!(
        now["memrel_cycle_number{resource=\"host\"}"], 3.0,
        "{now:?}"
    );
    assert_eq!(now["memrel_sleeps_total"], 3.0, "{now:?}");
    end_watch(watch);
    stop(server);
    let rows = host_rows(&second);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0, rows[0].1, rows[0].3, rows[0].4), (3, 1, 3, 3));
    // Each segment is a record of its own cycles, as `report` reads it.
    for (dir, cycles) in [(&first, 2), (&second, 1)] {
        let summary = summary(dir);
        let host = &summary["runs"][0]["resources"][0];
        assert_eq!(host["cycles"].as_array().expect("cycles").len(), cycles);
    }
}

#[test]
fn max_disk_rotates_the_samples_and_removes_older_segments_samples() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("out");
    // An older segment of the same watch, 3 MiB of samples.
    let older = out.join("watch").join("20200101T000000Z");
    std::fs::create_dir_all(&older).expect("older segment");
    std::fs::write(older.join("runs.json"), "{}").expect("runs.json");
    std::fs::write(older.join("events.csv"), "t_s\n").expect("events.csv");
    std::fs::write(older.join("samples.csv"), vec![b'x'; 3 << 20]).expect("samples");
    let target = Killed(vec![std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .expect("sleep starts")
        .id()
        .into()]);
    let pid = target.0[0].to_string();
    // 4 MiB: the older segments keep at most 2, each part of this one 1.
    let (watch, _, dir) = start_watch_out(
        &out,
        &[
            "--pid",
            &pid,
            "--no-tree",
            "--interval-ms",
            "1",
            "--max-disk",
            "4MiB",
        ],
    );
    assert!(!older.join("samples.csv").exists(), "cut to half the cap");
    assert!(older.join("runs.json").exists() && older.join("events.csv").exists());
    let rotated = dir.join("samples.rotated.csv");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while !rotated.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "samples.csv never rotated"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    mark(&dir, "load");
    end_watch(watch);
    drop(target);
    let size = |name: &str| std::fs::metadata(dir.join(name)).expect(name).len();
    // A part reaches 1 MiB and is rotated at the next flush (0.1 s of rows).
    for name in ["samples.csv", "samples.rotated.csv"] {
        assert!(
            size(name) <= (1 << 20) + (256 << 10),
            "{name}: {}",
            size(name)
        );
    }
    assert!(size("samples.rotated.csv") >= 1 << 20);
    // The record is whole without the rotated samples: its edges, a summary.
    assert!(
        summary(&dir)["runs"][0]["samples"]
            .as_u64()
            .expect("samples")
            > 0
    );
    let report = memrel().arg("report").arg(&dir).output().expect("report");
    assert!(report.status.success(), "{}", streams(&report));
}
