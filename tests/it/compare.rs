//! `memrel compare` and `memrel report` end to end, and the exporters pinned
//! by snapshots: the trace file's structure, byte-identical re-rendering of a
//! saved run, comparing saved runs without running anything, and bad input
//! (other scenarios, other schema versions, directories cut short by a crash).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::assert::OutputAssertExt;
use memrel::export::{compare_files, table};
use memrel::metrics::comparison::{compare, Comparison, Input, COMPARE_SCHEMA_VERSION};
use memrel::metrics::{
    summarize, CycleSpread, LastCycle, Resource, ResourceSummary, RunSummary, Spread,
    StrategySummary, Summary, SUMMARY_SCHEMA_VERSION,
};
use memrel::record::{Header, ModelInfo, Record, RunStatus};
use serde_json::Value;

use crate::common::{
    compare_scenario, edit_runs_json, memrel, only_results_dir, read_json, run, MIB,
};

/// One `memrel run --scenario ci-smoke`, made once per test binary and only
/// ever copied by tests (so they can run in parallel and damage their copy).
fn saved_run() -> &'static Path {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, dir) = RUN.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        run("ci-smoke")
            .out(root.path())
            .command()
            .assert()
            .success();
        let dir = only_results_dir(root.path(), "ci-smoke");
        (root, dir)
    });
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Cuts the file at `num/den` of its length, in the middle of the next line
/// (after its third comma, so a field is half there); returns what is left.
fn cut_mid_line(path: &Path, num: usize, den: usize) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let from = bytes.len() * num / den;
    let line_start = from + bytes[from..].iter().position(|b| *b == b'\n').unwrap() + 1;
    let third_comma = bytes[line_start..]
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b',')
        .nth(2)
        .unwrap()
        .0;
    let kept = bytes[..line_start + third_comma + 1].to_vec();
    std::fs::write(path, &kept).unwrap();
    kept
}

/// Runs `memrel compare DIR...` into `out` and returns (the comparison dir, stdout and stderr).
fn compare_saved(dirs: &[&Path], out: &Path) -> (PathBuf, String) {
    let output = memrel()
        .arg("compare")
        .args(dirs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "compare failed:\n{text}");
    (only_results_dir(out, "compare"), text)
}

#[test]
fn trace_file_follows_the_trace_event_format() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.json");
    compare_scenario("ci-smoke")
        .cycles(2)
        .out(tmp.path().join("results"))
        .arg("--export-trace")
        .arg(&trace)
        .command()
        .assert()
        .success();
    let value = read_json(&trace);
    let events = value["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    assert!(!events.is_empty());
    let mut process_names = Vec::new();
    let mut counters = std::collections::BTreeSet::new();
    let mut slices = 0;
    for e in events {
        for key in ["name", "ph", "ts", "pid", "tid"] {
            assert!(e.get(key).is_some(), "event without {key}: {e}");
        }
        assert!(
            e["name"].is_string() && e["ts"].is_number() && e["pid"].is_u64() && e["tid"].is_u64(),
            "{e}"
        );
        match e["ph"].as_str().unwrap() {
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
                counters.insert(e["name"].as_str().unwrap().to_string());
            }
            "X" => {
                assert!(e["dur"].as_i64().expect("X has dur") >= 0, "{e}");
                assert!(e["ts"].as_i64().unwrap() >= 0, "{e}");
                slices += 1;
            }
            "M" => {
                if e["name"] == "process_name" {
                    process_names.push(e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            other => panic!("unexpected phase type {other}: {e}"),
        }
    }
    // ci-smoke runs drop and malloc-trim: one process each, named after the strategy.
    assert_eq!(process_names.len(), 2, "{process_names:?}");
    assert!(process_names[0].starts_with("drop") && process_names[1].starts_with("malloc-trim"));
    for name in ["rss", "anon", "file"] {
        assert!(counters.contains(name), "no {name} counter: {counters:?}");
    }
    assert!(
        !counters.iter().any(|c| c.starts_with("vram")),
        "a cpu run has no vram counter: {counters:?}"
    );
    // Two cycles of load, forward, unload, release, settle plus the baseline, per run.
    assert!(slices >= 2 * (2 * 5 + 1), "only {slices} phase slices");
}

#[test]
fn report_regenerates_identical_csv_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    copy_dir(saved_run(), &dir);
    let files = ["samples.csv", "events.csv", "runs.json", "summary.json"];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    // In place, over the saved files.
    std::fs::remove_file(dir.join("timeline.png")).unwrap();
    memrel().arg("report").arg(&dir).assert().success();
    for (file, bytes) in files.iter().zip(&before) {
        assert!(
            std::fs::read(dir.join(file)).unwrap() == *bytes,
            "{file} changed when re-rendered in place"
        );
    }
    assert!(
        dir.join("timeline.png").is_file(),
        "timeline.png was not redrawn"
    );
    // Into another directory.
    let again = tmp.path().join("again");
    memrel()
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&again)
        .assert()
        .success();
    for (file, bytes) in files.iter().zip(&before) {
        assert!(
            std::fs::read(again.join(file)).unwrap() == *bytes,
            "{file} differs in the --out copy"
        );
    }
}

#[test]
fn report_regenerates_the_comparison_of_a_compare_run() {
    let tmp = tempfile::tempdir().unwrap();
    compare_scenario("ci-smoke")
        .cycles(2)
        .out(tmp.path())
        .command()
        .assert()
        .success();
    let dir = only_results_dir(tmp.path(), "ci-smoke");
    let files = [
        "compare.csv",
        "compare.json",
        "compare.md",
        "summary.json",
        "samples.csv",
    ];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    memrel().arg("report").arg(&dir).assert().success();
    for (file, bytes) in files.iter().zip(&before) {
        assert!(
            std::fs::read(dir.join(file)).unwrap() == *bytes,
            "{file} changed when re-rendered"
        );
    }
    for png in ["compare.png", "retained.png", "release.png", "timeline.png"] {
        assert!(dir.join(png).is_file(), "no {png}");
    }
}

#[test]
fn compare_of_two_saved_runs_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    copy_dir(saved_run(), &a);
    copy_dir(saved_run(), &b);
    // Mark b so its rows can be told apart from a's.
    edit_runs_json(&b, |v| v["header"]["created_unix_s"] = 1_795_000_000.into());
    let out = tmp.path().join("out");
    let (dir, console) = compare_saved(&[&a, &b], &out);
    assert!(
        !console.contains("preparing model"),
        "compare prepared a model, so it ran something:\n{console}"
    );
    let entries: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(
        entries.len(),
        1,
        "only the compare directory is created under --out"
    );
    for file in [
        "compare.csv",
        "compare.json",
        "compare.md",
        "compare.png",
        "retained.png",
        "release.png",
    ] {
        assert!(dir.join(file).is_file(), "no {file}");
    }
    assert!(
        !dir.join("samples.csv").exists(),
        "saved runs are compared, not copied"
    );
    let json = read_json(&dir.join("compare.json"));
    assert_eq!(json["schema_version"], COMPARE_SCHEMA_VERSION);
    let labels: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["drop (A)", "malloc-trim (A)", "drop (B)", "malloc-trim (B)"]
    );
    assert_eq!(
        json["warnings"].as_array().unwrap().len(),
        0,
        "same scenario, same host: {json}"
    );
    let csv = std::fs::read_to_string(dir.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
}

/// The console names each source's directory, and one directory named
/// twice (`a` and `a/./`, as `A` and `./A/` would be) is said to be the
/// same runs twice.
#[test]
fn compare_names_its_sources_and_warns_on_one_directory_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    copy_dir(saved_run(), &a);
    let again = tmp.path().join("a/./");
    let (dir, console) = compare_saved(&[&a, &again], &tmp.path().join("out"));
    assert!(
        console.contains(&format!("  A = {}\n", a.display()))
            && console.contains(&format!("  B = {}\n", again.display())),
        "{console}"
    );
    assert!(
        console.contains("warning: B (") && console.contains("is the same directory as A ("),
        "{console}"
    );
    let json = read_json(&dir.join("compare.json"));
    assert_eq!(json["warnings"].as_array().unwrap().len(), 1, "{json}");
}

#[test]
fn different_scenarios_are_compared_with_a_warning_saying_what_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    copy_dir(saved_run(), &a);
    copy_dir(saved_run(), &b);
    edit_runs_json(&b, |v| {
        v["header"]["scenario"] = "cpu-trim".into();
        v["header"]["cycles"] = 5.into();
    });
    let (dir, console) = compare_saved(&[&a, &b], &tmp.path().join("out"));
    assert!(
        console.contains("warning: A and B differ in scenario"),
        "the console says it too:\n{console}"
    );
    let md = std::fs::read_to_string(dir.join("compare.md")).unwrap();
    assert!(
        md.contains("> **warning:** A and B differ in scenario"),
        "{md}"
    );
    assert!(md.contains("ci-smoke vs cpu-trim"), "{md}");
    assert!(md.contains("differ in cycles per run: 3 vs 5"), "{md}");
    let json = read_json(&dir.join("compare.json"));
    assert_eq!(json["scenario"], "ci-smoke vs cpu-trim");
}

#[test]
fn another_schema_version_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    copy_dir(saved_run(), &b);
    edit_runs_json(&b, |v| v["header"]["schema_version"] = 2.into());
    let output = memrel()
        .arg("compare")
        .arg(saved_run())
        .arg(&b)
        .arg("--out")
        .arg(tmp.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("memrel: error: "), "{stderr}");
    assert!(
        stderr.contains("runs.json has schema version 2"),
        "{stderr}"
    );
    assert!(stderr.contains("this memrel reads version 1"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_directory_cut_short_by_a_crash_is_compared_and_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    copy_dir(saved_run(), &a);
    // Cut samples.csv in the middle of a line, as a full disk or a kill would.
    cut_mid_line(&a.join("samples.csv"), 2, 3);
    // And the second run failed.
    edit_runs_json(&a, |v| {
        v["runs"][1]["status"] = "failed".into();
        v["runs"][1]["error"] = "worker killed by signal 9 (SIGKILL): out of memory?".into();
    });
    let (dir, console) = compare_saved(&[&a], &tmp.path().join("out"));
    assert!(
        console.contains("note: run 2 (repetition 1) failed")
            && console.contains("out of memory? (malloc-trim)"),
        "{console}"
    );
    let md = std::fs::read_to_string(dir.join("compare.md")).unwrap();
    assert!(
        md.contains("samples.csv line"),
        "the damage is named:\n{md}"
    );
    assert!(md.contains("cut short"), "{md}");
    assert!(
        md.contains("| `malloc-trim ⚠` | 0/1 |"),
        "the failed strategy is marked:\n{md}"
    );
    assert!(
        md.contains("malloc-trim: run 2 (repetition 1) failed: worker killed by signal 9"),
        "{md}"
    );
    let json = read_json(&dir.join("compare.json"));
    assert_eq!(json["rows"][1]["summary"]["incomplete"], true);
    let csv = std::fs::read_to_string(dir.join("compare.csv")).unwrap();
    assert!(
        csv.lines()
            .nth(2)
            .unwrap()
            .contains(",malloc-trim,1,0,true,"),
        "{csv}"
    );
}

#[test]
fn a_missing_events_file_is_compared_and_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    copy_dir(saved_run(), &a);
    std::fs::remove_file(a.join("events.csv")).unwrap();
    let (dir, _) = compare_saved(&[&a], &tmp.path().join("out"));
    let md = std::fs::read_to_string(dir.join("compare.md")).unwrap();
    assert!(
        md.contains("cannot read") && md.contains("events.csv"),
        "{md}"
    );
    assert!(md.contains("drop: 0 of 3 cycles measured"), "{md}");
}

#[test]
fn report_on_a_damaged_directory_keeps_its_raw_files() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    copy_dir(saved_run(), &a);
    let cut = cut_mid_line(&a.join("samples.csv"), 1, 2);
    let summary = std::fs::read(a.join("summary.json")).unwrap();
    let output = memrel().arg("report").arg(&a).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("was not re-rendered") && stderr.contains("samples.csv line"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(a.join("samples.csv")).unwrap(),
        cut,
        "salvaged data must not overwrite the original"
    );
    assert_eq!(std::fs::read(a.join("summary.json")).unwrap(), summary);
}

#[test]
fn a_parent_of_results_directories_gets_a_helpful_error() {
    let output = memrel()
        .arg("compare")
        .arg(saved_run().parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is not a results directory but holds 1 of them: name one, e.g."),
        "{stderr}"
    );
}

// ---- snapshots of the exporters on a fixed, hand-built summary ----

fn spread(median: f64, min: f64, max: f64, n: usize) -> Option<Spread> {
    Some(Spread {
        median,
        min,
        max,
        n,
    })
}

/// Host memory of one strategy: 5 MiB baseline, 1134 MiB loaded, and
/// `retained_mib` after the last release of its median run.
fn host_memory(retained_mib: f64, failed: bool) -> ResourceSummary {
    let retained_bytes = (retained_mib * MIB) as i64;
    let baseline_bytes = (5.0 * MIB) as u64;
    let loaded_bytes = (1134.0 * MIB) as u64;
    let after_release_bytes = baseline_bytes + retained_bytes as u64;
    let retaining = retained_mib > 16.0;
    ResourceSummary {
        resource: Resource::Host,
        not_measured: None,
        row: Some(LastCycle {
            run: 1,
            cycle: 10,
            baseline_bytes,
            floor_bytes: None,
            peak_bytes: Some((1555.0 * MIB) as u64),
            loaded_bytes,
            after_unload_bytes: after_release_bytes + (3.0 * MIB) as u64,
            after_release_bytes,
            retained_bytes,
            released_fraction: Some(
                (loaded_bytes - after_release_bytes) as f64
                    / (loaded_bytes - baseline_bytes) as f64,
            ),
            release_t50_s: Some(0.0041),
            release_t90_s: Some(0.0049),
        }),
        baseline_bytes: spread(5.0 * MIB, 5.0 * MIB, 5.0 * MIB, 3),
        floor_bytes: None,
        peak_bytes: spread(1555.0 * MIB, 1554.0 * MIB, 1556.0 * MIB, 3),
        loaded_bytes: spread(1134.0 * MIB, 1133.0 * MIB, 1135.0 * MIB, 3),
        after_unload_bytes: spread(
            (8.0 + retained_mib) * MIB,
            12.0 * MIB,
            (8.0 + retained_mib) * MIB,
            3,
        ),
        after_release_bytes: spread(
            (5.0 + retained_mib) * MIB,
            9.0 * MIB,
            (5.0 + retained_mib) * MIB,
            3,
        ),
        retained_bytes: spread(retained_mib * MIB, 4.0 * MIB, retained_mib * MIB, 3),
        retained_anon_bytes: spread(retained_mib * MIB * 0.9, 1.0 * MIB, retained_mib * MIB, 3),
        released_fraction: spread(0.996, 0.25, 0.997, 3),
        retained_slope_bytes_per_cycle: spread(0.25 * MIB, 0.0, 0.5 * MIB, 3),
        release_latency_s: spread(0.0052, 0.0001, 0.033, 30),
        release_t50_s: spread(0.0041, 0.0001, 0.021, 30),
        release_t90_s: spread(0.0049, 0.0001, 0.03, 30),
        settle_s: spread(0.0, 0.0, 0.015, 30),
        late_bytes: spread(0.0, 0.0, 1.0 * MIB, 30),
        cycles_retaining: if retaining { 17 } else { 0 },
        cycles_total: if failed { 20 } else { 30 },
        processes_retaining: if retaining { 2 } else { 0 },
        retained_by_cycle: vec![
            CycleSpread {
                cycle: 1,
                spread: Spread {
                    median: 4.0 * MIB,
                    min: 4.0 * MIB,
                    max: 5.0 * MIB,
                    n: 3,
                },
            },
            CycleSpread {
                cycle: 2,
                spread: Spread {
                    median: retained_mib * MIB,
                    min: 4.0 * MIB,
                    max: retained_mib * MIB,
                    n: 3,
                },
            },
        ],
        context: None,
    }
}

fn strategy(name: &str, retained_mib: f64, forward_s: f64, failed: bool) -> StrategySummary {
    StrategySummary {
        strategy: name.to_string(),
        runs: 3,
        runs_completed: if failed { 2 } else { 3 },
        checks_passed: true,
        load_time_s: spread(1.135, 0.445, 4.89, 30),
        load_throughput_bytes_per_s: spread(1.0e9, 0.9e9, 1.1e9, 3),
        forward_time_s: spread(forward_s, forward_s * 0.9, forward_s * 1.5, 30),
        release_action_s: spread(0.02, 0.0001, 0.05, 30),
        ready_s: None,
        cycles_total: if failed { 20 } else { 30 },
        cycles_expected: 30,
        incomplete: failed,
        representative_run: Some(1),
        resources: vec![host_memory(retained_mib, failed)],
        why: Vec::new(),
    }
}

fn failed_run(strategy: &str) -> RunSummary {
    RunSummary {
        run: 6,
        strategy: strategy.to_string(),
        repetition: 3,
        status: RunStatus::Failed,
        error: Some("worker killed by signal 9 (SIGKILL)".to_string()),
        checks_passed: true,
        vm_hwm_bytes: None,
        cgroup_other_processes: None,
        samples: 0,
        envelope: None,
        unmarked: None,
        baseline_note: None,
        cycles: Vec::new(),
        resources: Vec::new(),
        load_throughput_bytes_per_s: None,
        sleeps: Vec::new(),
        phase_peaks: Vec::new(),
        kernel_peak: None,
        why: Vec::new(),
    }
}

fn fixed_header() -> Header {
    let mut header = memrel::record::fixture::header("article-cpu", 10);
    header.schema_version = 1;
    header.host.os = "Linux (Debian GNU/Linux 12)".to_string();
    header.host.kernel = "6.1.0".to_string();
    header.models = vec![ModelInfo {
        id: "bert".to_string(),
        source: "preset:bert-base".to_string(),
        dir: "/cache/bert".to_string(),
        architecture: "bert".to_string(),
        tensor_bytes: 438 << 20,
        parameters: 109_000_000,
        load: None,
    }];
    header
}

fn fixed_comparison() -> Comparison {
    let header = fixed_header();
    let summary = Summary {
        schema_version: SUMMARY_SCHEMA_VERSION,
        scenario: header.scenario.clone(),
        device: header.device.clone(),
        still: Vec::new(),
        memrel_version: header.memrel_version.clone(),
        created_unix_s: header.created_unix_s,
        retention_threshold_bytes: header.retention_threshold_bytes,
        resources: vec![Resource::Host],
        lead: Resource::Host,
        runs: vec![failed_run("mallopt")],
        strategies: vec![
            strategy("drop", 848.5, 0.300, false),
            strategy("malloc-trim", 4.2, 0.291, false),
            strategy("mallopt", 5.3, 0.372, true),
        ],
    };
    compare(&[Input {
        dir: "results/article-cpu/20261118-110640".to_string(),
        header: &header,
        summary: &summary,
        damage: Vec::new(),
    }])
}

#[test]
fn markdown_exporter_snapshot() {
    insta::assert_snapshot!("compare_md", table::markdown(&fixed_comparison()));
}

#[test]
fn csv_exporter_snapshot() {
    let csv = compare_files::comparison_csv(&fixed_comparison()).unwrap();
    insta::assert_snapshot!("compare_csv", String::from_utf8(csv).unwrap());
}

#[test]
fn console_table_snapshot() {
    insta::assert_snapshot!("compare_console", table::plain(&fixed_comparison()));
}

#[test]
fn forward_time_is_shown_relative_to_drop() {
    let c = fixed_comparison();
    let relative: Vec<Option<f64>> = c.rows.iter().map(|r| r.forward_time_relative).collect();
    assert_eq!(relative[0], Some(1.0));
    assert!((relative[2].unwrap() - 1.24).abs() < 1e-9, "{relative:?}");
    let md = table::markdown(&c);
    assert!(md.contains("| +24 % |"), "{md}");
}

/// Regression: on CUDA the comparison only showed RSS, which says nothing about
/// VRAM. Re-rendering the committed H100 run must show per-process VRAM first.
#[test]
fn cuda_comparison_shows_vram_columns() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("cuda-flush");
    copy_dir(&cuda_flush_dir(), &dir);
    memrel().arg("report").arg(&dir).assert().success();
    let md = std::fs::read_to_string(dir.join("compare.md")).unwrap();
    let header: Vec<&str> = md
        .lines()
        .find(|l| l.starts_with("| strategy |"))
        .unwrap_or_else(|| panic!("no table: {md}"))
        .trim_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name:?}: {header:?}"))
    };
    // The VRAM story leads, host RSS follows.
    assert_eq!(header[2], "VRAM baseline MiB", "{header:?}");
    assert!(column("VRAM after release MiB") < column("RSS retained MiB"));
    column("VRAM floor MiB");
    let cell = |strategy: &str, name: &str| -> String {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| `{strategy}` |")))
            .unwrap_or_else(|| panic!("no row for {strategy}: {md}"));
        row.trim_matches('|')
            .split(" | ")
            .nth(column(name))
            .unwrap()
            .trim()
            .to_string()
    };
    // Plain drop keeps the pool's blocks; a synchronize returns them; context release reaches 0.
    assert_eq!(cell("drop", "VRAM after release MiB"), "1094");
    assert_eq!(cell("sync", "VRAM after release MiB"), "678");
    assert_eq!(cell("context-release", "VRAM after release MiB"), "0.00");
}

fn cuda_flush_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results/reference/cuda/cuda-flush")
}

/// The comparison of the committed CUDA record, under a fixed directory label
/// (no machine-dependent path in the snapshots). When the record is re-made,
/// re-accept with `INSTA_UPDATE=always cargo test --release --test it compare::cuda_flush`.
fn cuda_flush_comparison() -> Comparison {
    let record = Record::load(&cuda_flush_dir()).unwrap();
    let summary = summarize(&record);
    compare(&[Input {
        dir: "results/reference/cuda/cuda-flush".to_string(),
        header: &record.header,
        summary: &summary,
        damage: Vec::new(),
    }])
}

#[test]
fn cuda_flush_compare_md_snapshot() {
    insta::assert_snapshot!(
        "cuda_flush_compare_md",
        table::markdown(&cuda_flush_comparison())
    );
}

#[test]
fn cuda_flush_compare_csv_snapshot() {
    let csv = compare_files::comparison_csv(&cuda_flush_comparison()).unwrap();
    insta::assert_snapshot!("cuda_flush_compare_csv", String::from_utf8(csv).unwrap());
}

#[test]
fn cuda_flush_console_tables_snapshot() {
    let c = cuda_flush_comparison();
    let compact = table::plain(&c);
    assert!(
        compact
            .lines()
            .all(|l| l.chars().count() <= table::COMPACT_MAX_CHARS),
        "{compact}"
    );
    insta::assert_snapshot!("cuda_flush_compare_console", compact);
    insta::assert_snapshot!(
        "cuda_flush_compare_console_wide",
        table::plain_as(&c, memrel::export::console::View::console(true, true))
    );
}

#[test]
fn run_and_compare_take_wide() {
    use clap::Parser;
    use memrel::cli::{Cli, Command};
    match Cli::try_parse_from(["memrel", "run", "--wide"])
        .unwrap()
        .command
    {
        Command::Run(args) => assert!(args.console.wide),
        other => panic!("{other:?}"),
    }
    match Cli::try_parse_from(["memrel", "compare", "some/dir", "--wide"])
        .unwrap()
        .command
    {
        Command::Compare(args) => assert!(args.console.wide),
        other => panic!("{other:?}"),
    }
    match Cli::try_parse_from(["memrel", "compare", "some/dir"])
        .unwrap()
        .command
    {
        Command::Compare(args) => assert!(!args.console.wide, "compact is the default"),
        other => panic!("{other:?}"),
    }
    for (argv, verbose) in [
        (&["memrel", "run", "--verbose"][..], true),
        (&["memrel", "run"][..], false),
        (&["memrel", "exec", "-v", "--", "true"][..], true),
        (&["memrel", "attach", "1", "--verbose"][..], true),
    ] {
        let console = match Cli::try_parse_from(argv).unwrap().command {
            Command::Run(args) => args.console,
            Command::Exec(args) => args.console,
            Command::Attach(args) => args.how.console,
            other => panic!("{other:?}"),
        };
        assert_eq!(console.verbose, verbose, "{argv:?}");
    }
}
