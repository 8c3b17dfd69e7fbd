//! `memrel exec` and scenarios with a `command`: real programs (python3,
//! without torch) measured end to end, their phase markers through the
//! `memrel` module memrel puts on their PYTHONPATH, their strategies.

use super::common::*;

/// `memrel exec --out <temp> [ARGS…] -- python3 -c SCRIPT`; returns the temp
/// dir, the results directory and the output (whatever memrel's exit).
fn exec_python(
    args: &[&str],
    script: &str,
) -> (tempfile::TempDir, std::path::PathBuf, std::process::Output) {
    let out = tempfile::tempdir().expect("tempdir");
    let mut command = memrel();
    command.arg("exec").arg("--out").arg(out.path()).args(args);
    command.args(["--", "python3", "-c", script]);
    let output = command.output().expect("memrel starts");
    let dir = only_results_dir(out.path(), "exec");
    (out, dir, output)
}

/// Allocates 200 MiB with bytearray, marks its phases and releases.
const BYTEARRAY_200_MIB: &str = r#"
import time, memrel
memrel.baseline(0.3)
with memrel.phase("load", model="blob"):
    blob = bytearray(200 << 20)
    for i in range(0, len(blob), 4096):
        blob[i] = 1
with memrel.phase("forward", model="blob"):
    total = sum(blob[::4096])
with memrel.phase("unload", model="blob"):
    del blob
memrel.release()
memrel.settle(0.3)
"#;

#[test]
fn exec_of_a_python_script_shows_its_phases_and_the_release() {
    let (_tmp, dir, output) = exec_python(
        &["--strategy", "malloc-trim", "--interval-ms", "5"],
        BYTEARRAY_200_MIB,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let runs = runs_json(&dir);
    assert_eq!(runs["runs"][0]["status"], "completed", "{runs}");
    let events = csv_rows(&dir.join("events.csv"));
    let phases: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["phase"].clone(), e["cycle"].clone()))
        .collect();
    for (phase, cycle) in [
        ("baseline", "0"),
        ("load", "1"),
        ("forward", "1"),
        ("unload", "1"),
        ("release", "1"),
        ("settle", "1"),
    ] {
        assert!(
            phases.contains(&(phase.to_string(), cycle.to_string())),
            "{phase} of cycle {cycle} missing: {phases:?}"
        );
    }
    let release_note = events
        .iter()
        .find(|e| e["phase"] == "release" && e["edge"] == "end")
        .map(|e| e["note"].clone())
        .unwrap_or_default();
    assert!(release_note.contains("malloc_trim"), "{release_note}");
    // The module takes the handshake: it waited at each edge's reading.
    assert_waited_at_every_edge_but_the_first(&dir.join("events.csv"));
    // The samples see the 200 MiB come and go.
    let samples = csv_rows(&dir.join("samples.csv"));
    let rss: Vec<f64> = samples
        .iter()
        .map(|s| s["rss_bytes"].parse::<f64>().expect("rss") / MIB)
        .collect();
    let first = rss[0];
    let peak = rss.iter().cloned().fold(0.0, f64::max);
    let last = *rss.last().expect("samples");
    assert!(peak - first >= 195.0, "peak {peak} first {first}");
    assert!(peak - last >= 190.0, "peak {peak} last {last}");
    let summary = summary(&dir);
    let host = &summary["runs"][0]["resources"][0];
    assert_eq!(host["resource"], "host");
    let cycle = &host["cycles"][0];
    let loaded = cycle["loaded_bytes"].as_f64().expect("loaded") / MIB;
    let baseline = host["baseline_bytes"].as_f64().expect("baseline") / MIB;
    assert!(
        loaded - baseline >= 199.0,
        "loaded {loaded} baseline {baseline}"
    );
    let retained = cycle["retained_bytes"].as_f64().expect("retained") / MIB;
    assert!(retained.abs() < 8.0, "retained {retained} MiB");
    assert!(dir.join("timeline.png").is_file());
}

#[test]
fn a_programs_environment_strategy_reaches_it() {
    let script = r#"
import os, time
print("seen", os.environ.get("MALLOC_TRIM_THRESHOLD_"))
time.sleep(0.3)
"#;
    let (_tmp, dir, output) = exec_python(&["--strategy", "trim-threshold-env"], script);
    assert!(output.status.success(), "{}", stderr(&output));
    let runs = runs_json(&dir);
    let run = &runs["runs"][0];
    assert!(
        run["stdout_tail"]
            .as_str()
            .expect("stdout")
            .contains("seen -1"),
        "{run}"
    );
    let checks = run["checks"].as_array().expect("checks");
    let env = checks
        .iter()
        .find(|c| c["name"] == "env MALLOC_TRIM_THRESHOLD_")
        .expect("the environment check");
    assert_eq!(env["ok"], true, "{env}");

    crate::run::allocators::needs_allocators();
    let (_tmp, dir, output) = exec_python(&["--strategy", "jemalloc"], script);
    assert!(output.status.success(), "{}", stderr(&output));
    let runs = runs_json(&dir);
    let checks = runs["runs"][0]["checks"]
        .as_array()
        .expect("checks")
        .clone();
    let mapped = checks
        .iter()
        .find(|c| c["name"] == "allocator jemalloc")
        .expect("the allocator check");
    assert_eq!(mapped["ok"], true, "{mapped}");
    assert!(
        mapped["detail"]
            .as_str()
            .expect("detail")
            .contains("libjemalloc.so.2"),
        "{mapped}"
    );
}

#[test]
fn a_program_that_exits_non_zero_is_a_failed_run() {
    let (_tmp, dir, output) = exec_python(&[], "import sys; sys.exit(7)");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let runs = runs_json(&dir);
    assert_eq!(runs["runs"][0]["status"], "failed");
    let error = runs["runs"][0]["error"].as_str().expect("an error");
    assert!(error.contains("code 7"), "{error}");
}

#[test]
fn a_release_strategy_fails_a_program_that_never_releases() {
    let (_tmp, dir, output) = exec_python(
        &["--strategy", "malloc-trim"],
        "import time; time.sleep(0.1)",
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let runs = runs_json(&dir);
    let error = runs["runs"][0]["error"].as_str().expect("an error");
    assert!(error.contains("memrel.release()"), "{error}");
}

#[test]
fn a_program_without_markers_gets_a_timeline_and_is_told_what_it_lacks() {
    let script = "import time\nb = bytearray(64 << 20)\ntime.sleep(0.3)\ndel b\ntime.sleep(0.2)";
    let (_tmp, dir, output) = exec_python(&[], script);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("the program marked no phases"), "{stdout}");
    let summary = summary(&dir);
    let host = &summary["runs"][0]["resources"][0];
    assert!(
        host["peak_bytes"].as_f64().expect("peak") / MIB > 64.0,
        "{host}"
    );
    // One phase: the first sample is the baseline, the last the end of run.
    assert!(
        host["baseline_bytes"].as_f64().expect("baseline") > 0.0,
        "{host}"
    );
    assert!(
        host["end_bytes"].as_f64().expect("end of run") > 0.0,
        "{host}"
    );
    assert!(csv_rows(&dir.join("samples.csv")).len() > 10);
    assert!(dir.join("timeline.png").is_file());
}

#[test]
fn strategies_a_program_cannot_carry_out_are_refused_before_it_starts() {
    for (strategy, says) in [
        ("respawn", "cannot restart a program"),
        ("device-drop", "no PyTorch counterpart"),
        ("empty-cache", "is for cuda devices"),
    ] {
        let out = tempfile::tempdir().expect("tempdir");
        let output = memrel()
            .args(["exec", "--strategy", strategy, "--out"])
            .arg(out.path())
            .args(["--", "true"])
            .output()
            .expect("memrel starts");
        assert_eq!(output.status.code(), Some(2));
        let err = stderr(&output);
        assert!(err.contains(says), "{strategy}: {err}");
        assert!(!out.path().join("exec").exists(), "nothing ran");
    }
    let output = run("ci-smoke").strategy("gc-collect").output();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is for programs"),
        "{}",
        stderr(&output)
    );
}

/// A program that is not there is said once, naming it and PATH, before
/// anything runs: exit 127, as a shell's, and no results directory
/// (issue 47, item 9; it was a failed run, exit 2).
#[test]
fn a_missing_program_is_said_by_name_before_anything_runs() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["exec", "--out"])
        .arg(out.path())
        .args(["--", "no-such-program-memrel"])
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(127), "{}", streams(&output));
    let error = stderr(&output);
    assert!(
        error.contains("no-such-program-memrel") && error.contains("PATH"),
        "{error}"
    );
    assert!(
        std::fs::read_dir(out.path()).expect("out").next().is_none(),
        "a results directory was made"
    );
}

#[test]
fn a_scenario_runs_its_command_from_its_own_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(tmp.path().join("scripts")).expect("mkdir");
    std::fs::write(
        tmp.path().join("scripts/job.py"),
        "import memrel, os\nmemrel.baseline(0.1)\nwith memrel.phase('load', model='m'):\n    b = bytearray(8 << 20)\n\
         with memrel.phase('unload', model='m'):\n    del b\nmemrel.release()\nprint('models', os.environ['MEMREL_MODELS'])\n",
    )
    .expect("script");
    let scenario = write_scenario(
        tmp.path(),
        "job",
        "description = \"a program\"\ncycles = 1\nstrategies = [\"gc-collect\"]\n\
         command = [\"python3\", \"scripts/job.py\"]\n[models.tiny]\npreset = \"bert-tiny\"\n",
    );
    let out = tmp.path().join("out");
    let output = run(&scenario).out(&out).current_dir("/").ok();
    let dir = only_results_dir(&out, "job");
    let runs = runs_json(&dir);
    let tail = runs["runs"][0]["stdout_tail"].as_str().expect("stdout");
    assert!(
        tail.contains("\"tiny\": \"/") || tail.contains("\"tiny\":\"/"),
        "{tail}"
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("gc-collect"));
}

#[test]
fn tree_sampling_adds_children_and_counts_shared_pages_once() {
    // The parent touches 32 MiB and forks; the child shares them (not
    // written) and touches 64 MiB of its own.
    let script = r#"
import os, time
shared = bytearray(32 << 20)
for i in range(0, len(shared), 4096): shared[i] = 1
pid = os.fork()
if pid == 0:
    own = bytearray(64 << 20)
    for i in range(0, len(own), 4096): own[i] = 1
    time.sleep(1.5)  # long enough to be sampled on a loaded 2-core machine
    os._exit(0)
time.sleep(0.8)
os.waitpid(pid, 0)
"#;
    let peak = |args: &[&str]| {
        let (_tmp, dir, output) = exec_python(args, script);
        assert!(output.status.success(), "{}", stderr(&output));
        summary(&dir)["runs"][0]["resources"][0]["peak_bytes"]
            .as_f64()
            .expect("peak")
            / MIB
    };
    let alone = peak(&["--interval-ms", "20"]);
    let tree = peak(&["--tree", "--interval-ms", "20"]);
    assert!(alone < 32.0 + 40.0, "the program alone: {alone} MiB");
    assert!(tree > 32.0 + 64.0, "the tree holds both: {tree} MiB");
    assert!(
        tree < 32.0 + 64.0 + 45.0,
        "shared pages counted once: {tree} MiB"
    );
}

#[test]
fn a_c_program_speaks_the_protocol_in_a_few_lines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = tmp.path().join("phase_markers");
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/examples/phase_markers.c");
    let cc = std::process::Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("cc runs (gcc is on every machine memrel builds on)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = tmp.path().join("out");
    run_ok(
        memrel()
            .args(["exec", "--cycles", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let dir = only_results_dir(&out, "exec");
    // It never reads an acknowledgement: no edge says it waited for one.
    let held = held_by_edge(&dir.join("events.csv"));
    assert!(
        held.len() >= 8 && held.iter().all(|(_, h)| h.is_none()),
        "{held:?}"
    );
    let host = &summary(&dir)["runs"][0]["resources"][0];
    let baseline = host["baseline_bytes"].as_f64().expect("baseline");
    let cycles = host["cycles"].as_array().expect("cycles");
    assert_eq!(cycles.len(), 2, "memrel numbered two cycles: {host}");
    for c in cycles {
        let loaded = (c["loaded_bytes"].as_f64().expect("loaded") - baseline) / MIB;
        assert!((127.0..130.0).contains(&loaded), "loaded {loaded} MiB: {c}");
        let retained = c["retained_bytes"].as_f64().expect("retained") / MIB;
        assert!(
            retained.abs() < 1.0,
            "glibc unmaps a 128 MiB block at free: {retained}"
        );
    }
}

#[test]
#[ignore = "needs torch and transformers: MEMREL_TEST_PYTHON=<python> cargo test --release --test it torch -- --ignored (CI runs it)"]
fn torch_cpu_article_copy_runs_on_pytorch() {
    let python = torch_python();
    let (_out, dir, _) = run("torch-cpu-article-copy")
        .cycles(1)
        .strategy("gc-collect")
        .strategy("malloc-trim")
        .args(["--python", &python])
        .in_temp_dir("torch-cpu-article-copy");
    let runs = runs(&dir);
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
    let events = csv_rows(&dir.join("events.csv"));
    let notes = |phase: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["phase"] == phase && e["edge"] == "end")
            .map(|e| e["note"].clone())
            .collect()
    };
    let loads = notes("load");
    assert_eq!(loads.len(), 2 * 3, "three models per run: {loads:?}");
    assert!(
        loads
            .iter()
            .any(|n| n.contains("torch") && n.contains("transformers") && n.contains("load=copy")),
        "the versions are recorded: {loads:?}"
    );
    assert!(
        notes("release")
            .iter()
            .any(|n| n.contains("malloc_trim(0) ->")),
        "{:?}",
        notes("release")
    );
    // The copied weights are anonymous memory: three models, over 900 MiB.
    let summary = summary(&dir);
    for run in summary["runs"].as_array().expect("runs") {
        let host = &run["resources"][0];
        let baseline = host["baseline_bytes"].as_f64().expect("baseline");
        let loaded = host["cycles"][0]["loaded_bytes"].as_f64().expect("loaded");
        assert!((loaded - baseline) / MIB > 900.0, "{host}");
    }
}

#[test]
fn a_programs_vram_is_sampled_by_nvml_or_the_run_says_why_not() {
    let (_tmp, dir, output) = exec_python(&["--device", "cuda"], "import time; time.sleep(0.2)");
    assert!(output.status.success() || output.status.code() == Some(2));
    let runs = runs_json(&dir);
    let checks = runs["runs"][0]["checks"]
        .as_array()
        .expect("checks")
        .clone();
    let nvml = checks.iter().find(|c| c["name"] == "vram sampler (nvml)");
    let driver = std::path::Path::new("/proc/driver/nvidia").exists();
    match (driver, nvml) {
        // A GPU machine: NVML is opened in the default build and reports its readings.
        (true, Some(check)) => assert_eq!(check["ok"], true, "{check}"),
        // No NVIDIA driver here (CI, the development VM): the run says why VRAM is empty.
        (false, Some(check)) => {
            assert_eq!(check["ok"], false, "{check}");
            let detail = check["detail"].as_str().expect("detail");
            assert!(detail.contains("libnvidia-ml.so.1"), "{detail}");
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(text.contains("VRAM not measured"), "{text}");
        }
        (_, None) => panic!("no vram sampler check: {checks:?}"),
    }
}
