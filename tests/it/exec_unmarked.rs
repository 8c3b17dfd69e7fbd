//! `memrel exec` with programs as people first bring them: no markers, some
//! markers, a traceback, children that hold memory, a first load that costs
//! more than the ones after it, a device without a driver. Real python3
//! programs written by each test (no torch).

use super::common::*;

/// `memrel exec --out <temp> [ARGS…] -- python3 PROGRAM` with PROGRAM written
/// to a file in the temp dir; returns the temp dir, the results directory
/// and the output (whatever memrel's exit).
fn exec_program(
    args: &[&str],
    program: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::process::Output) {
    let out = tempfile::tempdir().expect("tempdir");
    let path = out.path().join("prog.py");
    std::fs::write(&path, program).expect("write prog.py");
    let mut command = memrel();
    command.arg("exec").arg("--out").arg(out.path()).args(args);
    command.arg("--").arg("python3").arg(&path);
    let output = command.output().expect("memrel starts");
    let dir = only_results_dir(out.path(), "exec");
    (out, dir, output)
}

fn mib(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number, not {v}")) / MIB
}

/// Holds 96 MiB (touched) to the end, after a quiet start; exits without
/// the interpreter's teardown (which would free it first).
const HOLDS_96_MIB: &str = r#"
import os, time
time.sleep(0.3)
blob = bytearray(96 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
time.sleep(0.5)
os._exit(0)
"#;

#[test]
fn a_program_without_markers_is_one_phase_with_baseline_peak_end_and_held() {
    let (_tmp, dir, output) = exec_program(&[], HOLDS_96_MIB);
    assert!(output.status.success(), "{}", streams(&output));
    let summary = summary(&dir);
    let run = &summary["runs"][0];
    let host = &run["resources"][0];
    assert_eq!(host["resource"], "host");
    let baseline = mib(&host["baseline_bytes"]);
    let (peak, end, held) = (
        mib(&host["peak_bytes"]),
        mib(&host["end_bytes"]),
        mib(&host["held_bytes"]),
    );
    // The first sample: the program just started.
    assert!(baseline < 60.0, "{host}");
    assert!(peak >= end && end > 96.0, "{host}");
    assert!((held - (end - baseline)).abs() < 0.01, "{host}");
    assert!(held > 90.0 && held < 110.0, "{host}");
    // The kernel's peak, though the program sent no `done`.
    let vm_hwm = mib(&run["vm_hwm_bytes"]);
    assert!(vm_hwm >= peak - 1.0, "VmHWM {vm_hwm} vs peak {peak}");
    assert!(run["unmarked"]
        .as_str()
        .expect("a note")
        .contains("one phase"));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("measured as one phase") && stdout.contains("end of run MiB"),
        "{stdout}"
    );
    // What markers would add, once: the run's note.
    assert_eq!(stdout.matches("import memrel;").count(), 1, "{stdout}");
    assert!(
        stdout.contains("note: the program marked no phases"),
        "{stdout}"
    );
    // Nothing was loaded and released, so no strategy is said to give back.
    assert!(!stdout.contains("gives back"), "{stdout}");
    assert!(dir.join("timeline.png").is_file());
}

#[test]
fn without_memrel_baseline_the_time_before_the_first_phase_is_the_baseline() {
    let program = r#"
import time, memrel
keep = bytearray(32 << 20)
for i in range(0, len(keep), 4096):
    keep[i] = 1
time.sleep(0.2)
with memrel.phase("load", model="blob"):
    blob = bytearray(100 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
with memrel.phase("unload", model="blob"):
    del blob
memrel.release()
memrel.settle(0.2)
"#;
    let (_tmp, dir, output) = exec_program(&[], program);
    assert!(output.status.success(), "{}", streams(&output));
    let summary = summary(&dir);
    let run = &summary["runs"][0];
    let note = run["baseline_note"].as_str().expect("a baseline note");
    assert!(
        note.contains("no memrel.baseline()") && note.contains("load"),
        "{note}"
    );
    assert!(run["unmarked"].is_null(), "{run}");
    let row = &summary["strategies"][0]["resources"][0]["row"];
    // The 32 MiB held before the load are in the baseline, not retained.
    assert!(mib(&row["baseline_bytes"]) > 32.0, "{row}");
    assert!(
        mib(&row["loaded_bytes"]) - mib(&row["baseline_bytes"]) > 90.0,
        "{row}"
    );
    assert!(mib(&row["retained_bytes"]).abs() < 20.0, "{row}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("no memrel.baseline()"), "{stdout}");
}

#[test]
fn a_load_without_unload_or_release_says_what_is_missing() {
    let program = r#"
import memrel
with memrel.phase("load", model="blob"):
    blob = bytearray(64 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
import os, time
time.sleep(0.3)  # the samples see the whole blob, however loaded the machine
os._exit(0)  # no teardown: the blob is still held at the end
"#;
    let (_tmp, dir, output) = exec_program(&[], program);
    assert!(output.status.success(), "{}", streams(&output));
    let summary = summary(&dir);
    let run = &summary["runs"][0];
    let why = run["unmarked"].as_str().expect("why there is no cycle");
    assert!(why.contains("no unload or release"), "{why}");
    let host = &run["resources"][0];
    assert!(mib(&host["held_bytes"]) > 50.0, "{host}");
    assert!(
        text(&output.stdout).contains(why),
        "{}",
        text(&output.stdout)
    );
}

/// Under --quiet (its stderr not shown as it came), a failing program's
/// last lines are shown at the end.
#[test]
fn a_failing_program_shows_the_last_20_lines_of_its_stderr() {
    let program = r#"
import sys
for i in range(1, 31):
    print("line %d of the log" % i, file=sys.stderr)
1 / 0
"#;
    let (_tmp, _dir, output) = exec_program(&["--quiet"], program);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(err.contains("ZeroDivisionError"), "{err}");
    assert!(err.contains("line 30 of the log"), "{err}");
    let shown: Vec<&str> = err
        .split("the last lines the program wrote to stderr:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no stderr tail:\n{err}"))
        .lines()
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(shown.len(), 20, "{shown:?}");
    assert!(!err.contains("line 10 of the log"), "{err}");
}

#[test]
fn under_tree_a_child_holding_memory_through_the_settle_is_retained() {
    let program = r#"
import subprocess, sys, memrel
CHILD = "b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('ready', flush=True)\nimport time; time.sleep(30)"
memrel.baseline(0.2)
with memrel.phase("load", model="child"):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    child.stdout.readline()
with memrel.phase("unload", model="child"):
    pass
memrel.release()
memrel.settle(0.3)
"#;
    let (_tmp, dir, output) = exec_program(&["--tree"], program);
    assert!(output.status.success(), "{}", streams(&output));
    let summary = summary(&dir);
    let host = &summary["strategies"][0]["resources"][0];
    let row = &host["row"];
    // Every value is the tree's: loaded and retained include the child's 200 MiB.
    assert!(
        mib(&row["loaded_bytes"]) - mib(&row["baseline_bytes"]) > 180.0,
        "{row}"
    );
    assert!(mib(&row["retained_bytes"]) > 180.0, "{row}");
    assert!(
        mib(&row["peak_bytes"]) >= mib(&row["loaded_bytes"]) - 5.0,
        "{row}"
    );
    assert_eq!(host["cycles_retaining"], 1, "{host}");
}

#[test]
fn a_first_load_cost_is_told_from_retention_that_repeats() {
    let program = r#"
import memrel
memrel.baseline(0.2)
cache = []
for cycle in range(memrel.cycles()):
    with memrel.phase("load", model="blob"):
        if not cache:
            # What an import or a first-use cache costs once.
            cache.append(bytearray(120 << 20))
            for i in range(0, len(cache[0]), 4096):
                cache[0][i] = 1
        blob = bytearray(40 << 20)
        for i in range(0, len(blob), 4096):
            blob[i] = 1
    with memrel.phase("unload", model="blob"):
        del blob
    memrel.release()
    memrel.settle(0.1)
"#;
    let (_tmp, _dir, output) = exec_program(&["--cycles", "3", "--verbose"], program);
    assert!(output.status.success(), "{}", streams(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("retained mostly at the first load"),
        "no first-load note:\n{stdout}"
    );
    assert!(
        stdout.contains("cycle 1 retained 1") && stdout.contains("cycles 2–3 +"),
        "{stdout}"
    );
}

#[test]
fn failed_checks_make_exec_exit_2() {
    let driver = std::path::Path::new("/proc/driver/nvidia").exists();
    let (_tmp, dir, output) = exec_program(&["--device", "cuda"], "print('hi')\n");
    let runs = runs_json(&dir);
    let failed: Vec<&serde_json::Value> = runs["runs"][0]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] == false)
        .collect();
    if driver {
        // With a driver, a program that never touches CUDA holds 0 bytes there.
        assert!(failed.is_empty(), "{failed:?}");
        assert!(output.status.success(), "{}", streams(&output));
    } else {
        assert!(
            !failed.is_empty(),
            "no driver here, yet no failed check: {runs}"
        );
        assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
        let err = stderr(&output);
        assert!(err.contains("check 'vram sampler (nvml)' failed"), "{err}");
    }
}

/// A grandchild that leaves the program's process group (`setsid`) and
/// holds 80 MiB after the program ends is named in the run's record with
/// what it held, and said on stderr; memrel does not wait for it.
#[test]
fn under_tree_a_descendant_that_outlives_the_program_is_named() {
    let program = r#"
import os, subprocess, sys, time
HOLD = "b = bytearray(80 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('ready', flush=True)\nimport time; time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, start_new_session=True)
child.stdout.readline()
time.sleep(0.5)
os._exit(0)
"#;
    let (_tmp, dir, output) = exec_program(&["--tree", "--interval-ms", "20"], program);
    let runs = runs(&dir);
    let outlived = kill_outlived(&runs[0]);
    assert!(output.status.success(), "{}", streams(&output));
    assert_eq!(outlived.len(), 1, "{:?}", runs[0]);
    let held = mib(&outlived[0]["rss_bytes"]);
    assert!(held > 75.0, "{held} MiB: {:?}", outlived[0]);
    assert!(
        outlived[0]["command"]
            .as_str()
            .is_some_and(|c| c.contains("bytearray")),
        "{:?}",
        outlived[0]
    );
    let err = stderr(&output);
    assert!(err.contains("outlived it, holding"), "{err}");
}

/// Issue 47, item 5: a grandchild left to memrel by a `setsid` and a double
/// fork (its parent gone at once) stays in the tree: memrel adopts it as a
/// child subreaper. It holds 80 MiB while the program waits for it, so the
/// reading at the program's exit (held there: `exit_stop`) has it; then it
/// outlives the program, and is named in the record and on stderr.
#[test]
fn under_tree_an_orphaned_grandchild_stays_in_the_tree_and_is_named_outliving() {
    let program = r#"
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    parent = os.getpid()
    if os.fork() == 0:
        os.close(r)
        # Orphaned: wait until the parent has gone and this is re-parented.
        while os.getppid() == parent:
            time.sleep(0.01)
        b = bytearray(80 << 20)
        for i in range(0, len(b), 4096):
            b[i] = 1
        os.write(w, b"ready\n")
        os.close(w)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(4)
        os._exit(0)
    os._exit(0)
os.close(w)
os.read(r, 6)
os._exit(0)
"#;
    let (_tmp, dir, output) = exec_program(&["--tree"], program);
    let runs = runs(&dir);
    let outlived = kill_outlived(&runs[0]);
    assert!(output.status.success(), "{}", streams(&output));
    let host = &summary(&dir)["runs"][0]["resources"][0];
    assert_eq!(host["resource"], "host");
    let peak = mib(&host["peak_bytes"]);
    assert!(
        peak > 80.0,
        "the orphan's 80 MiB is not in the peak: {host}"
    );
    assert_eq!(outlived.len(), 1, "{:?}", runs[0]);
    assert!(mib(&outlived[0]["rss_bytes"]) > 75.0, "{:?}", outlived[0]);
    let err = stderr(&output);
    assert!(err.contains("outlived it, holding"), "{err}");
}

/// A 0.2 s program under `--tree` has a reading at its start however busy
/// the machine is: the first one is taken before the sampler's thread
/// exists (a loaded 2-core machine once gave such a program none).
#[test]
fn a_short_program_under_tree_has_a_reading_at_its_start() {
    let (_tmp, dir, output) = exec_program(&["--tree"], "import time\ntime.sleep(0.2)\n");
    assert!(output.status.success(), "{}", streams(&output));
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(!samples.is_empty(), "no reading of a 0.2 s program");
}

/// Takes 160 MiB (touched) and exits at once, without the interpreter's
/// teardown: no periodic sample can land in its life.
const TAKES_160_MIB_AND_EXITS: &str = r#"
import os
blob = bytearray(160 << 20)
for i in range(0, len(blob), 4096):
    blob[i] = 1
os._exit(0)
"#;

/// A program held at its exit (`orchestrator::exit_stop`): its last sample
/// is read while what it took is still there, however busy the machine, with
/// and without --tree. Samples come every 10 s here, so no tick reads it:
/// only the reading at its start and the one at its exit.
#[test]
fn a_short_program_is_read_at_its_start_and_at_its_exit() {
    for tree in [false, true] {
        let mut args = vec!["--interval-ms", "10000"];
        if tree {
            args.push("--tree");
        }
        let (_tmp, dir, output) = exec_program(&args, TAKES_160_MIB_AND_EXITS);
        assert!(output.status.success(), "{}", streams(&output));
        let samples = csv_rows(&dir.join("samples.csv"));
        assert!(samples.len() >= 2, "tree {tree}: {samples:?}");
        let rss = |row: &std::collections::HashMap<String, String>| {
            row["rss_bytes"].parse::<f64>().expect("rss_bytes") / MIB
        };
        let (first, last) = (rss(&samples[0]), rss(&samples[samples.len() - 1]));
        assert!(first < 100.0, "tree {tree}: the start, {first} MiB");
        assert!(last > 160.0, "tree {tree}: the exit, {last} MiB");
        let run = &runs(&dir)[0];
        assert!(run.get("exit_reading_note").is_none(), "{run}");
    }
}

/// Prints the variables the strategies below set, as the program sees them;
/// it never imports memrel (and has no jax: the variable is what is tested).
const PRINTS_ITS_ENVIRONMENT: &str = r#"
import os
for name in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "MALLOC_TRIM_THRESHOLD_"):
    print(name, os.environ.get(name))
"#;

/// Issue 47, item 6: a strategy that is only an environment setting applies
/// and completes on a program that never imports memrel (the parent reads
/// the variable back from the process); one whose steps run inside the
/// program still says what the program must call.
#[test]
fn a_strategy_that_is_an_environment_setting_needs_no_import() {
    for (strategy, seen) in [
        ("xla-no-prealloc", "XLA_PYTHON_CLIENT_PREALLOCATE false"),
        (
            "xla-mem-fraction=0.30",
            "XLA_PYTHON_CLIENT_MEM_FRACTION 0.30",
        ),
        ("trim-threshold-env", "MALLOC_TRIM_THRESHOLD_ -1"),
    ] {
        let (_tmp, dir, output) = exec_program(&["--strategy", strategy], PRINTS_ITS_ENVIRONMENT);
        assert!(output.status.success(), "{strategy}: {}", streams(&output));
        let run = &runs(&dir)[0];
        assert_eq!(run["status"], "completed", "{strategy}: {run}");
        assert!(run["error"].is_null(), "{strategy}: {run}");
        let stdout = run["stdout_tail"].as_str().expect("stdout");
        assert!(stdout.contains(seen), "{strategy}: {stdout}");
        let checks = run["checks"].as_array().expect("checks");
        let env = checks
            .iter()
            .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with("env ")))
            .unwrap_or_else(|| panic!("{strategy}: no env check in {checks:?}"));
        assert_eq!(env["ok"], true, "{strategy}: {env}");
    }
    // malloc-trim's release is a call inside the program: without
    // memrel.release() it never happened, and the run says so.
    let (_tmp, _dir, output) = exec_program(&["--strategy", "malloc-trim"], PRINTS_ITS_ENVIRONMENT);
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        streams(&output).contains("never called memrel.release()"),
        "{}",
        streams(&output)
    );
}

/// A run's `outlived` processes, each sent SIGTERM first, whatever the
/// assertions after it say (a test leaves nothing behind).
fn kill_outlived(run: &serde_json::Value) -> Vec<serde_json::Value> {
    let outlived = run["outlived"].as_array().cloned().unwrap_or_default();
    for o in &outlived {
        if let Some(pid) = o["pid"].as_i64() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
    outlived
}
