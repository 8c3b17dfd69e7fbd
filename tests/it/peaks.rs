//! Exact peaks: the kernel's VmHWM, read and reset by the parent at every
//! phase edge, catches a spike between two samples; where it cannot be had
//! the run says why and goes on; `exec` and `attach` report the program's
//! VmHWM.

use std::process::{Command, Stdio};

use super::common::*;

/// How far the kernel's RSS counters and the fake worker's own pages may
/// move a reading besides what it maps: the counters are per CPU and read
/// approximately (since Linux 6.2, up to 32 pages per CPU each way), the
/// worker's stack and strings take a few pages.
const SLACK: f64 = 1.0 * MIB;

/// A 64 MiB block held 5 ms inside each load, sampled every 10 ms: the
/// kernel's peak of the load holds it whether or not a sample fell in it.
/// The worker exits right after its last edge; on a busy machine that
/// edge's line is read after the exit, and it still carries a peak (the
/// worker's last VmHWM). The settle is long enough that only that one edge
/// can be that late.
#[test]
fn a_spike_between_samples_is_in_the_kernels_peak_of_its_phase() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = write_scenario(
        tmp.path(),
        "spiky",
        "description = \"fake spike\"\ncycles = 3\nstrategies = [\"drop\"]\ninterval_ms = 10\n\
         [models.a]\nfake_anon_mib = 16\nfake_spike_mib = 64\nfake_spike_ms = 5\n\
         [workload]\nsteps = [\"load a\", \"unload a\", \"release\", \"settle\"]\n\
         settle_ms = 150\nbaseline_ms = 30\n",
    );
    let out = tmp.path().join("out");
    let output = run(&scenario).out(&out).output();
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(&out, "spiky");
    let summary = summary(&dir);
    let run = &summary["runs"][0];
    assert!(run.get("kernel_peak").is_none(), "{}", run["kernel_peak"]);
    let cycles = run["resources"][0]["cycles"].as_array().expect("cycles");
    let loads: Vec<&serde_json::Value> = run["phase_peaks"]
        .as_array()
        .expect("phase_peaks in summary.json")
        .iter()
        .filter(|p| p["phase"] == "load")
        .collect();
    assert_eq!(loads.len(), 3, "{}", run["phase_peaks"]);
    for (load, cycle) in loads.iter().zip(cycles) {
        // Loaded: at the load's end, the spike already gone.
        let loaded = cycle["loaded_bytes"].as_f64().expect("loaded");
        let kernel = load["kernel_peak_bytes"].as_f64().expect("a kernel peak");
        let sampled = load["sampled_peak_bytes"].as_f64().unwrap_or(0.0);
        assert!(
            kernel >= loaded + 64.0 * MIB - SLACK,
            "cycle {}: kernel peak {:.1} MiB, loaded {:.1} MiB, sampled peak {:.1} MiB",
            cycle["cycle"],
            kernel / MIB,
            loaded / MIB,
            sampled / MIB
        );
        assert!(
            kernel + SLACK >= sampled,
            "the kernel's peak is never below a sample: {kernel} vs {sampled}"
        );
    }
    // The column is in events.csv, and the record re-renders from disk.
    let events = csv_rows(&dir.join("events.csv"));
    assert!(
        events
            .iter()
            .filter(|e| e["edge"] == "end")
            .all(|e| !e["kernel_peak_bytes"].is_empty()),
        "every edge carries its span's peak"
    );
    // The resets do not shrink the run's VmHWM: it holds the spike too.
    let vm_hwm = runs(&dir)[0]["vm_hwm_bytes"]
        .as_f64()
        .expect("vm_hwm_bytes");
    let loaded = cycles[0]["loaded_bytes"].as_f64().expect("loaded");
    assert!(
        vm_hwm >= loaded + 64.0 * MIB - SLACK,
        "VmHWM {:.1} MiB",
        vm_hwm / MIB
    );
    let peaks = csv_rows(&dir.join("peaks.csv"));
    let load_rows = peaks.iter().filter(|r| r["phase"] == "load").count();
    assert_eq!(load_rows, 3, "peaks.csv has a row per load");
    assert_rerenders(&dir);
}

/// Under --tree the samples are a tree's PSS; the kernel's peak is one
/// process's, so it is not put beside them: the summary says why, and the
/// run and every sample and edge are kept; the run has no VmHWM either (the
/// root's own is not the scope of the samples).
#[test]
fn where_the_kernels_peak_is_not_available_the_run_says_why_and_goes_on() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["exec", "--tree", "--interval-ms", "10", "--out"])
        .arg(out.path())
        .args(["--", "python3", "-c"])
        .arg(
            "import memrel\nwith memrel.phase('load', model='m'):\n    b = bytearray(16 << 20)\n\
             with memrel.phase('unload', model='m'):\n    del b\nmemrel.release()\n",
        )
        .output()
        .expect("memrel starts");
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(out.path(), "exec");
    let run = &summary(&dir)["runs"][0];
    assert_eq!(run["status"], "completed");
    let why = run["kernel_peak"].as_str().expect("why it is not there");
    assert!(
        why.starts_with("not available: ") && why.contains("--tree"),
        "{why}"
    );
    assert!(run.get("phase_peaks").is_none());
    let peaks = csv_rows(&dir.join("peaks.csv"));
    assert_eq!(peaks.len(), 1, "one row saying why");
    assert!(peaks[0]["kernel_peak_bytes"].starts_with("not available: "));
    assert!(run["samples"].as_u64().expect("samples") > 0);
    assert_eq!(
        csv_rows(&dir.join("events.csv")).len(),
        6,
        "every edge kept"
    );
    // Neither wait4's peak nor the program's `done` (the root's own VmHWM).
    assert!(
        runs(&dir)[0]["vm_hwm_bytes"].is_null(),
        "{:?}",
        runs(&dir)[0]
    );
}

/// memrel attach reports the kernel's peak of the program's whole life,
/// though what it held at its peak was freed before memrel attached.
#[test]
fn attach_reports_the_vm_hwm_of_a_peak_before_it_attached() {
    let mut program = Command::new("python3")
        .args([
            "-c",
            "import sys\nb = bytearray(96 << 20)\nb[::4096] = b'x' * len(b[::4096])\ndel b\n\
             print('freed', flush=True)\nsys.stdin.read()",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts (these tests need python3 on PATH)");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(program.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the program says it freed its block");
    let results = tempfile::tempdir().expect("tempdir");
    let dir = results.path().join("attached");
    let output = memrel()
        .arg("attach")
        .arg("--dir")
        .arg(&dir)
        .args(["--duration", "0.3", "--no-tree"])
        .arg(program.id().to_string())
        .output()
        .expect("memrel starts");
    drop(program.stdin.take());
    let _ = program.wait();
    assert!(output.status.success(), "{}", streams(&output));
    let run = &runs(&dir)[0];
    let vm_hwm = run["vm_hwm_bytes"].as_f64().expect("vm_hwm_bytes");
    assert!(vm_hwm >= 96.0 * MIB, "VmHWM {:.1} MiB", vm_hwm / MIB);
    let peak = summary(&dir)["runs"][0]["resources"][0]["peak_bytes"]
        .as_f64()
        .expect("a sampled peak");
    assert!(
        peak + 64.0 * MIB < vm_hwm,
        "the samples came after the block was freed: {peak} vs {vm_hwm}"
    );
}
