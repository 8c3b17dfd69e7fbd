//! The release gap end to end (issue 25): a fake model whose host memory
//! comes back 300 ms after the release call returns (`fake_late_free_ms`, a
//! delayed free) shows `settle_s` ≈ 0.3 s and `late_bytes` ≈ its size; the
//! same model freed at its unload settles at once with nothing late.
//! compare.csv carries the `*_settle_s_*` / `*_late_bytes_*` columns, and
//! `memrel check` with a `max_settle_ms` budget fails the late run and
//! passes the prompt one.

use std::path::{Path, PathBuf};

use super::common::*;

/// The fake model's host memory: 48 MiB anonymous + 16 MiB of a file.
const BLOCK_MIB: f64 = 64.0;

/// What may move besides the block (the worker's own pages, page rounding).
const SLACK_MIB: f64 = 2.0;

/// Two cycles of load → unload → release → settle (700 ms), sampled every
/// 5 ms; `late_ms` = 0 frees at the unload.
fn gap_scenario(dir: &Path, name: &str, late_ms: u64, thresholds: &str) -> PathBuf {
    let late = if late_ms > 0 {
        format!("fake_late_free_ms = {late_ms}\n")
    } else {
        String::new()
    };
    write_scenario(
        dir,
        name,
        &format!(
            "description = \"release gap\"\ncycles = 2\nstrategies = [\"drop\"]\ninterval_ms = 5\n\
             [models.a]\nfake_anon_mib = 48\nfake_file_mib = 16\n{late}\
             [workload]\nsteps = [\"load a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 700\nbaseline_ms = 50\n{thresholds}"
        ),
    )
}

/// (settle_s, late MiB) of every host cycle of the only run in `dir`.
fn gaps(dir: &Path) -> Vec<(f64, f64)> {
    let summary = summary(dir);
    summary["runs"][0]["resources"][0]["cycles"]
        .as_array()
        .expect("cycles")
        .iter()
        .map(|c| {
            (
                c["settle_s"].as_f64().expect("settle_s"),
                c["late_bytes"].as_f64().expect("late_bytes") / MIB,
            )
        })
        .collect()
}

/// Runs `scenario` through `memrel compare` into `out`; its results directory.
fn measured(scenario: &Path, out: &Path, name: &str) -> PathBuf {
    let output = compare_scenario(scenario).out(out).output();
    assert!(output.status.success(), "{}", streams(&output));
    only_results_dir(out, name)
}

#[test]
fn memory_back_300_ms_after_the_release_returns_settles_in_about_0_3_s() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let dir = measured(&gap_scenario(tmp.path(), "late", 300, ""), &out, "late");
    let gaps = gaps(&dir);
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    for (settle_s, late_mib) in &gaps {
        assert!(
            (0.25..=0.45).contains(settle_s),
            "settle_s {settle_s}: {gaps:?}"
        );
        assert!(
            (late_mib - BLOCK_MIB).abs() <= SLACK_MIB,
            "late {late_mib} MiB: {gaps:?}"
        );
    }
    let rows = csv_rows(&dir.join("compare.csv"));
    let row = &rows[0];
    let settle: f64 = row["host_settle_s_median"].parse().expect("a number");
    assert!((0.25..=0.45).contains(&settle), "{row:?}");
    let late: f64 = row["host_late_bytes_median"].parse().expect("a number");
    assert!((late / MIB - BLOCK_MIB).abs() <= SLACK_MIB, "{row:?}");
    for column in [
        "host_settle_s_min",
        "host_settle_s_max",
        "host_late_bytes_max",
    ] {
        assert!(row.contains_key(column), "{column} missing: {row:?}");
    }
}

#[test]
fn memory_back_when_the_release_returns_settles_at_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let dir = measured(&gap_scenario(tmp.path(), "prompt", 0, ""), &out, "prompt");
    let gaps = gaps(&dir);
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    for (settle_s, late_mib) in &gaps {
        assert!(*settle_s < 0.05, "settle_s {settle_s}: {gaps:?}");
        assert!(*late_mib <= SLACK_MIB, "late {late_mib} MiB: {gaps:?}");
    }
}

#[test]
fn a_settle_budget_fails_the_late_run_and_passes_the_prompt_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("results");
    // Every metric the gate judges budgeted (the others far off): one run
    // makes a baseline.
    let budget =
        "[thresholds]\nmax_settle_ms = 150\nmax_retained_mib = 1000\nmax_peak_mib = 100000\n\
                  max_retained_slope_mib_per_cycle = 1000\nmax_late_mib = 1000\n";
    let mut exits = Vec::new();
    for (name, late_ms) in [("gate-late", 300), ("gate-prompt", 0)] {
        let scenario = gap_scenario(tmp.path(), name, late_ms, budget);
        let made = run(&scenario)
            .args(["--save-baseline", name])
            .out(&root)
            .output();
        assert!(made.status.success(), "{}", streams(&made));
        let dir = results_dirs(&root, name).pop().expect("a results dir");
        let check = memrel()
            .args(["check", "--baseline", name, "--out"])
            .arg(&root)
            .arg(&dir)
            .output()
            .expect("memrel check");
        let verdict = read_json(&dir.join("verdict.json"));
        let settle = verdict["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .find(|v| v["budget"]["key"] == "max_settle_ms")
            .cloned()
            .unwrap_or_else(|| panic!("no max_settle_ms row: {verdict}"));
        assert_eq!(settle["metric"], "settle_s", "{settle}");
        exits.push((name, check.status.code(), settle["verdict"].clone()));
    }
    assert_eq!(
        exits,
        [
            ("gate-late", Some(1), "over-budget".into()),
            ("gate-prompt", Some(0), "no-change".into()),
        ]
    );
}
