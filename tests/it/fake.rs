//! The fake worker drives the stages after the worker with exact numbers:
//! it maps exactly N bytes and leaks exactly L per cycle, so the metrics, the
//! exported files and the gate must show exactly those (up to a page).

use super::common::*;

/// How far the worker's own bytes (its stack, the emitter's strings) may
/// move RSS besides what it maps (glibc grows its heap by 132 KiB at a
/// time), and the pages of memrel's own code the first load runs (file
/// pages of the binary, resident from then on: how many moves with the
/// binary's layout, 320 KiB in every cycle once the drive's budgets and
/// repeats were added): 128 pages.
const SLACK: f64 = 128.0 * 4096.0;

/// A fake scenario: 64 MiB anon + 16 MiB file per load, `leak_mib` leaked per cycle.
fn fake_scenario(
    dir: &std::path::Path,
    name: &str,
    leak_mib: u32,
    extra: &str,
) -> std::path::PathBuf {
    write_scenario(
        dir,
        name,
        &format!(
            "description = \"fake\"\ncycles = 3\nstrategies = [\"drop\"]\ninterval_ms = 5\n{extra}\n\
             [models.a]\nfake_anon_mib = 64\nfake_file_mib = 16\nfake_leak_mib = {leak_mib}\n\
             [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 50\nbaseline_ms = 50\n"
        ),
    )
}

fn run_fake(
    scenario: &std::path::Path,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    run(scenario).out(out).args(extra).output()
}

#[test]
fn metrics_of_the_fake_worker_are_the_bytes_it_mapped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = fake_scenario(tmp.path(), "leaky", 4, "");
    let out = tmp.path().join("out");
    let output = run_fake(&scenario, &out, &["--verbose"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = only_results_dir(&out, "leaky");
    let summary = summary(&dir);
    let host = &summary["runs"][0]["resources"][0];
    let baseline = host["baseline_bytes"].as_f64().expect("baseline");
    for (i, cycle) in host["cycles"]
        .as_array()
        .expect("cycles")
        .iter()
        .enumerate()
    {
        let n = (i + 1) as f64;
        let loaded = cycle["loaded_bytes"].as_f64().expect("loaded") - baseline;
        let retained = cycle["retained_bytes"].as_f64().expect("retained");
        let anon = cycle["retained_anon_bytes"]
            .as_f64()
            .expect("retained anon");
        // Loaded: 64 + 16 MiB of this cycle plus every leak so far.
        let want_loaded = (80.0 + 4.0 * n) * MIB;
        assert!(
            (loaded - want_loaded).abs() <= SLACK,
            "cycle {n}: loaded {loaded} want {want_loaded}"
        );
        assert!(
            (retained - 4.0 * n * MIB).abs() <= SLACK,
            "cycle {n}: retained {retained}"
        );
        assert!(
            (anon - 4.0 * n * MIB).abs() <= SLACK,
            "cycle {n}: anon {anon}"
        );
    }
    let slope = host["retained_slope_bytes_per_cycle"]
        .as_f64()
        .expect("slope");
    assert!((slope - 4.0 * MIB).abs() <= SLACK, "slope {slope}");
    // The exported table says the same, in MiB (`--verbose`: each cycle).
    let stdout = String::from_utf8_lossy(&output.stdout);
    let by_cycle: Vec<f64> = stdout
        .lines()
        .skip_while(|l| !l.contains("retained MiB after each cycle"))
        .find(|l| l.trim_start().starts_with("drop"))
        .expect("the retained-by-cycle line")
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().expect("MiB"))
        .collect();
    assert_eq!(by_cycle.len(), 3, "{stdout}");
    for (i, mib) in by_cycle.iter().enumerate() {
        assert!(
            (mib - 4.0 * (i + 1) as f64).abs() <= SLACK / MIB,
            "{stdout}"
        );
    }
    // The file part is file-backed: RssFile rises by 16 MiB at the load.
    let events = csv_rows(&dir.join("events.csv"));
    let load_end = events
        .iter()
        .find(|e| e["phase"] == "load" && e["edge"] == "end" && e["cycle"] == "1")
        .expect("load end");
    let base_end = events
        .iter()
        .find(|e| e["phase"] == "baseline" && e["edge"] == "end")
        .expect("baseline end");
    let file = |e: &std::collections::HashMap<String, String>| {
        e["file_bytes"].parse::<f64>().expect("file")
    };
    let file_rise = file(load_end) - file(base_end);
    assert!((file_rise - 16.0 * MIB).abs() <= SLACK, "file {file_rise}");
}

#[test]
fn the_gate_calls_a_new_leak_of_exact_size_a_regression() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let clean = fake_scenario(tmp.path(), "swap", 0, "");
    let output = run_fake(&clean, &out, &["--repeat", "3", "--save-baseline", "main"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Same name, now leaking 32 MiB per cycle: the gate must call it a regression.
    let leaky = fake_scenario(tmp.path(), "swap", 32, "");
    std::fs::remove_dir_all(out.join("swap")).expect("clean results");
    let output = run_fake(&leaky, &out, &["--repeat", "3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = only_results_dir(&out, "swap");
    let check = memrel()
        .args(["check", "--baseline", "main", "--out"])
        .arg(&out)
        .arg(&dir)
        .output()
        .expect("memrel starts");
    assert_eq!(
        check.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).expect("verdict"))
            .expect("json");
    assert_eq!(verdict["regressed"], true, "{verdict}");
    // The retained row is the leak: 3 cycles × 32 MiB, within what the
    // kernel's per-CPU RSS counters may be off by when read (statm: up to
    // 32 pages per CPU each way since Linux 6.2, at each end of the cycle).
    let md = std::fs::read_to_string(dir.join("verdict.md")).expect("verdict.md");
    let retained = md
        .lines()
        .find(|l| l.contains("| retained |") && l.contains(" … "))
        .expect("retained row");
    let cells: Vec<&str> = retained.split('|').map(str::trim).collect();
    let now_mib: f64 = cells[6]
        .strip_suffix(" MiB")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a MiB value in {retained}"));
    assert!(
        (now_mib - 96.0).abs() <= 1.0 && retained.contains("regressed"),
        "{retained}"
    );
}

#[test]
fn a_budget_is_judged_on_the_exact_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    // 3 cycles × 8 MiB: 24 MiB retained at the end. A 20 MiB budget fails, 28 passes.
    for (budget, regressed) in [(20, true), (28, false)] {
        let name = format!("budget{budget}");
        let scenario = fake_scenario(
            tmp.path(),
            &name,
            8,
            // Every other metric budgeted far off: one run makes a baseline.
            &format!(
                "[thresholds]\nmax_retained_mib = {budget}\nretention_mib = 1\nmax_peak_mib = 100000\n\
                 max_retained_slope_mib_per_cycle = 1000\nmax_settle_ms = 100000\nmax_late_mib = 1000"
            ),
        );
        let output = run_fake(&scenario, &out, &["--save-baseline", &name]);
        assert!(output.status.success(), "{}", stderr(&output));
        let dir = only_results_dir(&out, &name);
        let check = check_against(&name, &out, &dir);
        let code = check.status.code();
        assert_eq!(
            code,
            Some(if regressed { 1 } else { 0 }),
            "budget {budget}: {}",
            String::from_utf8_lossy(&check.stdout)
        );
    }
}

#[test]
fn fake_vram_on_a_cpu_scenario_fails_the_run_and_says_how_to_fix_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scenario = write_scenario(
        tmp.path(),
        "vram-on-cpu",
        "description = \"fake vram\"\ncycles = 1\nstrategies = [\"drop\"]\n\
         [models.a]\nfake_vram_mib = 16\n[workload]\nsteps = [\"load a\", \"unload a\"]\n",
    );
    let out = tmp.path().join("out");
    let output = run_fake(&scenario, &out, &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("model \"a\": fake_vram_mib needs a cuda device")
            && err.contains("--device cuda"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// More phase edges than the orchestrator keeps in memory (1024): every one
/// reaches events.csv and the metrics, read back from disk at the run's end,
/// and each end edge still has its elapsed time.
#[test]
fn a_run_of_more_edges_than_memory_keeps_has_them_all() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cycles = 140;
    let scenario = write_scenario(
        tmp.path(),
        "many-edges",
        &format!(
            "description = \"fake\"\ncycles = {cycles}\nstrategies = [\"drop\"]\ninterval_ms = 5\n\
             [models.a]\nfake_anon_mib = 1\n\
             [workload]\nsteps = [\"load a\", \"unload a\", \"release\", \"settle\"]\n\
             settle_ms = 0\nbaseline_ms = 0\n"
        ),
    );
    let out = tmp.path().join("out");
    let output = run_fake(&scenario, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = only_results_dir(&out, "many-edges");
    let events = csv_rows(&dir.join("events.csv"));
    // baseline begin/end, then 4 phases × 2 edges per cycle.
    assert_eq!(events.len(), 2 + 8 * cycles, "every edge on disk");
    assert!(
        events
            .iter()
            .filter(|e| e["edge"] == "end")
            .all(|e| !e["elapsed_s"].is_empty()),
        "every end edge timed"
    );
    let summary = summary(&dir);
    let host_cycles = summary["runs"][0]["resources"][0]["cycles"]
        .as_array()
        .expect("cycles");
    assert_eq!(host_cycles.len(), cycles, "every cycle measured");
    let record = memrel::record::Record::load(&dir).expect("reads back");
    assert_eq!(record.runs[0].events.len(), 2 + 8 * cycles);
}
