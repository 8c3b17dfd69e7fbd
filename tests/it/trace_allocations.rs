//! `--trace-allocations` (issue 49 item 5): a real Python program
//! (tests/fixtures/trace_allocations.py) keeps 48 MiB of bytearrays and a
//! 32 MiB numpy array past its unload, made at known lines; allocations.csv
//! and the console name those lines with their bytes. Without the flag
//! nothing is traced; memrel's own worker refuses it; a program that never
//! imports the memrel module gets a note. No timing enters an assertion.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::common::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace_allocations.py")
}

/// The line of the fixture holding `marker` (a comment at the end of it).
fn line_of(marker: &str) -> String {
    let text = std::fs::read_to_string(fixture()).expect("the fixture");
    let at = text
        .lines()
        .position(|l| l.ends_with(marker))
        .unwrap_or_else(|| panic!("no line of the fixture ends with {marker:?}"));
    (at + 1).to_string()
}

/// `memrel exec --out TMP ARGS… -- PYTHON FIXTURE FIXTURE_ARGS…`: the
/// temp dir, the results directory and memrel's output.
fn exec_fixture(
    args: &[&str],
    python: &str,
    fixture_args: &[&str],
) -> (tempfile::TempDir, PathBuf, Output) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(tmp.path())
        .args(args)
        .arg("--")
        .arg(python)
        .arg(fixture())
        .args(fixture_args)
        .output()
        .expect("memrel starts");
    let dir = only_results_dir(tmp.path(), "exec");
    (tmp, dir, output)
}

/// allocations.csv's rows of the fixture's `line` at the run's last
/// snapshot (cycle 1, after the release).
fn held_at(dir: &Path, line: &str) -> Vec<std::collections::HashMap<String, String>> {
    let fixture = fixture().display().to_string();
    csv_rows(&dir.join("allocations.csv"))
        .into_iter()
        .filter(|r| r["file"] == fixture && r["line"] == line && r["edge"] == "release")
        .collect()
}

fn mib_of(row: &std::collections::HashMap<String, String>, column: &str) -> f64 {
    row[column].parse::<f64>().expect("a number") / MIB
}

#[test]
fn allocations_csv_and_the_console_name_the_lines_that_still_hold_memory() {
    let (_tmp, dir, output) = exec_fixture(&["--trace-allocations"], "python3", &[]);
    assert!(output.status.success(), "{}", streams(&output));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("tracing: True"), "{stdout}");
    let line = line_of("# held: bytearrays");
    let rows = held_at(&dir, &line);
    assert_eq!(rows.len(), 1, "{}", streams(&output));
    let row = &rows[0];
    let held = mib_of(row, "bytes");
    assert!((held - 48.0).abs() <= 48.0 * 0.05, "{row:?}");
    assert_eq!(
        (
            row["run"].as_str(),
            row["strategy"].as_str(),
            row["repetition"].as_str()
        ),
        ("1", "drop", "1")
    );
    assert_eq!(row["cycle"], "1");
    // Everything traced still held is about the bytearrays (the scratch
    // was freed at the unload): net growth within 5 % of 48 MiB.
    assert!(
        (mib_of(row, "traced_bytes") - 48.0).abs() <= 48.0 * 0.05,
        "{row:?}"
    );
    // The unload's snapshot too, and no row of the scratch's line.
    let every = csv_rows(&dir.join("allocations.csv"));
    assert!(every
        .iter()
        .any(|r| r["edge"] == "unload" && r["line"] == line));
    let scratch = (line.parse::<usize>().expect("a line") - 1).to_string();
    assert!(
        !every
            .iter()
            .any(|r| r["file"].ends_with("trace_allocations.py")
                && r["line"] == scratch
                && mib_of(r, "bytes") > 1.0),
        "the scratch freed at the unload is not held: {every:?}"
    );
    // The console: the site with its MiB.
    let site = format!("trace_allocations.py:{line}");
    let shown = stdout
        .lines()
        .find(|l| l.contains(&site))
        .unwrap_or_else(|| panic!("no console line names {site}: {stdout}"));
    assert!(shown.contains("48.0 MiB"), "{shown}");
    assert!(stdout.contains("cycle 1 after the release"), "{stdout}");
    // The program's own file is taken in and removed.
    let hidden: Vec<_> = std::fs::read_dir(&dir)
        .expect("the results directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".allocations"))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");

    // advise names the site where the live bytes it finds were allocated.
    let advise = memrel().arg("advise").arg(&dir).output().expect("advise");
    assert!(advise.status.success(), "{}", streams(&advise));
    let advice = text(&advise.stdout);
    let live = advice
        .lines()
        .find(|l| l.contains("malloc in use (live)"))
        .unwrap_or_else(|| panic!("no live heap in {advice}"));
    assert!(
        live.contains("where it was allocated (--trace-allocations): ") && live.contains(&site),
        "{live}"
    );

    // memrel report prints it again, and copies it into another directory.
    let report = memrel().arg("report").arg(&dir).output().expect("report");
    assert!(report.status.success(), "{}", streams(&report));
    assert!(text(&report.stdout).contains(&site), "{}", streams(&report));
    let copy = _tmp.path().join("copy");
    run_ok(memrel().arg("report").arg(&dir).arg("--out").arg(&copy));
    assert_eq!(
        std::fs::read(copy.join("allocations.csv")).expect("copied"),
        std::fs::read(dir.join("allocations.csv")).expect("written")
    );
}

/// A python3 with numpy: `MEMREL_TEST_PYTHON` (the torch tests' venv) or
/// python3; `None` when neither imports it.
fn python_with_numpy() -> Option<String> {
    let candidates = std::env::var("MEMREL_TEST_PYTHON")
        .ok()
        .into_iter()
        .chain(["python3".to_string()]);
    candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn a_numpy_array_is_named_at_the_line_that_made_it() {
    let Some(python) = python_with_numpy() else {
        eprintln!(
            "skipped: neither MEMREL_TEST_PYTHON nor python3 imports numpy (the CI venv of the \
             torch tests has it: MEMREL_TEST_PYTHON=.ci/torch-venv/bin/python)"
        );
        return;
    };
    let (_tmp, dir, output) = exec_fixture(&["--trace-allocations"], &python, &["--numpy"]);
    assert!(output.status.success(), "{}", streams(&output));
    for (marker, want) in [("# held: bytearrays", 48.0), ("# held: numpy", 32.0)] {
        let line = line_of(marker);
        let rows = held_at(&dir, &line);
        assert_eq!(rows.len(), 1, "{marker}: {}", streams(&output));
        let held = mib_of(&rows[0], "bytes");
        assert!(
            (held - want).abs() <= want * 0.05,
            "{marker}: {:?}",
            rows[0]
        );
        assert!(
            text(&output.stdout).contains(&format!("trace_allocations.py:{line}")),
            "{}",
            streams(&output)
        );
    }
    let total = mib_of(&held_at(&dir, &line_of("# held: numpy"))[0], "traced_bytes");
    assert!((total - 80.0).abs() <= 80.0 * 0.05, "{total}");
}

#[test]
fn without_the_flag_the_module_never_starts_tracemalloc() {
    let (_tmp, dir, output) = exec_fixture(&[], "python3", &[]);
    assert!(output.status.success(), "{}", streams(&output));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("tracing: False"), "{stdout}");
    assert!(stdout.contains("trace module imported: False"), "{stdout}");
    assert!(!dir.join("allocations.csv").exists());
    assert!(
        !stdout.contains("still held where it was allocated"),
        "{stdout}"
    );
}

#[test]
fn memrels_own_worker_refuses_the_flag_before_anything_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = run("cpu-trim")
        .out(tmp.path())
        .arg("--trace-allocations")
        .output();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--trace-allocations")
            && err.contains("candle worker")
            && err.contains("no tracemalloc"),
        "{err}"
    );
    assert!(results_dirs(tmp.path(), "cpu-trim").is_empty(), "{err}");
}

#[test]
fn a_program_that_never_imports_memrel_is_said_to_have_traced_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .arg("exec")
        .arg("--out")
        .arg(tmp.path())
        .arg("--trace-allocations")
        .args(["--", "python3", "-c", "import time; time.sleep(0.2)"])
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let err = stderr(&output);
    assert!(
        err.contains(
            "--trace-allocations: nothing was traced: the program never imported the memrel module"
        ),
        "{err}"
    );
    let dir = only_results_dir(tmp.path(), "exec");
    assert!(!dir.join("allocations.csv").exists());
}
