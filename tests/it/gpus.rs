//! Runs spread over several GPUs (issue 29), tested without any: the fake
//! worker on device indices 0 and 1 with the `MEMREL_WORKER_NO_DEVICE` hook
//! (host memory only) exercises the parallel plan (one lane per GPU, one
//! queue), each run's device in runs.json, a lane per GPU in every output,
//! and the joined record `report` re-renders. Real VRAM per GPU is measured
//! on the GPU machine (results/reference/multi-gpu/).

use std::path::Path;

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
    let mut child = run(&scenario).out(&out).env(NO_DEVICE_ENV, "1").spawn(true);
    // Two lanes at once: memrel has two children alive together at some
    // point (each run's settle keeps its worker up for 0.9 s, four runs).
    let mut most_at_once = 0;
    while child.try_wait().expect("memrel runs").is_none() {
        most_at_once = most_at_once.max(children_of(child.id()).len());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("memrel's output");
    assert!(output.status.success(), "{}", streams(&output));
    assert!(
        most_at_once >= 2,
        "the runs did not overlap: at most {most_at_once} child at once"
    );
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
