//! Runs spread over several GPUs (issue 29), tested without any: the fake
//! worker on device indices 0 and 1 with the `MEMREL_WORKER_NO_DEVICE` hook
//! (host memory only) exercises the parallel plan (one lane per GPU, one
//! queue), each run's device in runs.json, a lane per GPU in every output,
//! and the joined record `report` re-renders. Real VRAM per GPU is measured
//! on the GPU machine (results/reference/multi-gpu/).

use std::path::Path;
use std::time::Instant;

use super::common::*;

const NO_DEVICE_ENV: &str = "MEMREL_WORKER_NO_DEVICE";

/// Four runs of about a second each (a fake model, a long settle).
fn spread_scenario(dir: &Path, extra: &str) -> std::path::PathBuf {
    write_scenario(
        dir,
        "spread",
        &format!(
            "description = \"runs spread over GPUs\"\ndevice = \"cuda\"\n{extra}cycles = 1\nrepeat = 4\n\
             strategies = [\"drop\"]\ninterval_ms = 10\n\
             [models.a]\nfake_anon_mib = 16\n\
             [workload]\nsteps = [\"load a\", \"unload a\", \"settle\"]\n\
             settle_ms = 900\nbaseline_ms = 50\n"
        ),
    )
}

#[test]
fn runs_spread_over_two_gpus_run_in_parallel_and_join_into_one_record() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = spread_scenario(tmp.path(), "devices = [0, 1]\n");
    let out = tmp.path().join("out");
    let started = Instant::now();
    let output = run(&scenario).out(&out).env(NO_DEVICE_ENV, "1").output();
    let wall_s = started.elapsed().as_secs_f64();
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(&out, "spread");
    assert!(
        !dir.join("lanes").exists(),
        "the lanes were joined and removed"
    );

    let runs_file = runs_json(&dir);
    assert_eq!(runs_file["header"]["device"], "cuda:0,1");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 4);
    let numbers: Vec<u64> = runs.iter().map(|r| r["run"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3, 4]);
    for r in &runs {
        assert_eq!(r["status"], "completed", "{r}");
    }
    let on = |gpu: &str| runs.iter().filter(|r| r["device"] == gpu).count();
    assert_eq!(on("cuda:0") + on("cuda:1"), 4, "every run names its GPU");
    assert!(
        on("cuda:0") >= 1 && on("cuda:1") >= 1,
        "both lanes made runs"
    );

    // Two lanes at once: the invocation took well under the runs' sum.
    let busy_s: f64 = runs.iter().map(|r| r["duration_s"].as_f64().unwrap()).sum();
    assert!(
        wall_s < 0.8 * busy_s + 1.0,
        "the runs did not overlap: {wall_s:.2} s for {busy_s:.2} s of runs"
    );

    // A lane per GPU: each resource in the summary, each run measured on
    // the GPU it ran on only (here: not at all, the hook opens none).
    let summary = summary(&dir);
    let resources: Vec<&str> = resources_but_container(&summary);
    assert_eq!(resources, ["host", "cuda:0", "cuda:1"]);
    for (run, meta) in summary["runs"].as_array().unwrap().iter().zip(&runs) {
        let own = meta["device"].as_str().unwrap();
        let other = if own == "cuda:0" { "cuda:1" } else { "cuda:0" };
        let on_other = run["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == other)
            .unwrap();
        assert_eq!(
            on_other["not_measured"],
            format!("VRAM not measured: the run ran on {own}").as_str()
        );
    }
    let rows = csv_rows(&dir.join("samples.csv"));
    let per_run = |n: &str| rows.iter().filter(|r| r["run"] == n).count();
    for n in ["1", "2", "3", "4"] {
        assert!(per_run(n) > 20, "run {n} has its samples");
    }
    assert_rerenders(&dir);
}

#[test]
fn spreading_runs_needs_distinct_gpus_on_a_cuda_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = spread_scenario(tmp.path(), "");
    let output = run(&scenario).arg("--devices").arg("0,0").output();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("--devices") && err.contains("GPU 0 twice"),
        "{err}"
    );

    let output = run(&scenario)
        .args(["--device", "cpu", "--devices", "0,1"])
        .output();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("--devices") && err.contains("--device cuda"),
        "{err}"
    );

    let bad = spread_scenario(tmp.path(), "devices = [1, 1]\n");
    let output = run(&bad).output();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("spread.toml:3") && err.contains("GPU 1 twice"),
        "{err}"
    );
}
