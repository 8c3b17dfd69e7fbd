//! `memrel run --model DIR|org/name`: any checkpoint with the default
//! scenario's workload and strategies, no scenario file. A local directory
//! here, the hub in `hub` (against `fake_hub`, a hub the tests start).

mod fake_hub;
mod hub;

use crate::common::*;

#[test]
fn a_model_directory_runs_the_default_workload_and_strategies() {
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("tiny-ckpt");
    run_ok(memrel().args(["model", "gen", "bert-tiny"]).arg(&model));
    let out = work.path().join("out");
    let output = run_ok(
        memrel()
            .args(["run", "--model"])
            .arg(&model)
            .arg("--out")
            .arg(&out),
    );
    let dir = only_results_dir(&out, "tiny-ckpt");
    let runs = runs_json(&dir);
    let default = memrel::scenario::load(memrel::scenario::DEFAULT).unwrap();
    let full = std::fs::canonicalize(&model).unwrap();
    let models = &runs["header"]["models"];
    assert_eq!(models.as_array().unwrap().len(), 1, "{models}");
    assert_eq!(models[0]["source"], format!("path:{}", full.display()));
    assert_eq!(models[0]["dir"], full.display().to_string());
    assert_eq!(runs["header"]["scenario_origin"], "--model");
    assert_eq!(runs["header"]["cycles"], default.cycles);
    let strategies: Vec<String> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["strategy"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = (0..default.repeat)
        .flat_map(|_| default.strategies.clone())
        .collect();
    assert_eq!(strategies, want);
    for run in runs["runs"].as_array().unwrap() {
        assert_eq!(run["status"], "completed", "{run}");
    }
    assert!(
        text(&output.stdout).contains("malloc-trim"),
        "{}",
        streams(&output)
    );
    // The saved scenario reads back: the results re-render like any run's.
    assert_rerenders(&dir);
}

#[test]
fn model_and_scenario_together_are_refused() {
    let output = memrel()
        .args(["run", "--scenario", "cpu-trim", "--model", "org/name"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("'--scenario <SCENARIO>' cannot be used with '--model <DIR|ORG/NAME>'"),
        "{err}"
    );
}

#[test]
fn a_model_that_is_neither_a_directory_nor_a_hub_id_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let output = memrel()
        .args(["run", "--model", "./no-such-checkpoint", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.starts_with("memrel: error: --model ./no-such-checkpoint: no such directory, and not a hub repository id"),
        "{err}"
    );
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none());
}

/// Issue 36: a relative `org/name`-shaped path that is a symlink loop (or
/// leads nowhere) is local: refused at once, with the path and the fix,
/// never looked up on the hub (which, offline, failed on DNS).
#[test]
fn a_local_path_that_is_broken_never_goes_to_the_hub() {
    let work = tempfile::tempdir().unwrap();
    let org = work.path().join("models");
    std::fs::create_dir(&org).unwrap();
    std::os::unix::fs::symlink("loop-b", org.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", org.join("loop-b")).unwrap();
    std::os::unix::fs::symlink("gone", org.join("dangling")).unwrap();
    for (arg, words) in [
        (
            "models/loop-a",
            "symbolic link on the path points back at itself: fix or remove the link",
        ),
        (
            "models/dangling",
            "what the link points to does not exist: fix the link",
        ),
    ] {
        let output = memrel()
            .current_dir(work.path())
            // A hub that cannot answer: going there would fail differently.
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .args(["run", "--model", arg, "--out", "out"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{arg}: {}", streams(&output));
        let err = stderr(&output);
        assert!(
            err.starts_with(&format!("memrel: error: --model {arg}")),
            "{arg}: {err}"
        );
        assert!(err.contains(words), "{arg}: {err}");
        for hub in ["hub", "127.0.0.1", "download", "fetch"] {
            assert!(!err.contains(hub), "{arg} went to the hub: {err}");
        }
        assert!(!work.path().join("out").exists(), "{arg}");
    }
}

#[test]
fn a_model_run_saved_as_a_baseline_is_re_run_by_check() {
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("tiny-ckpt");
    run_ok(memrel().args(["model", "gen", "bert-tiny"]).arg(&model));
    let out = work.path().join("out");
    run_ok(
        memrel()
            .args(["run", "--model"])
            .arg(&model)
            .args([
                "--strategy",
                "drop",
                "--cycles",
                "1",
                "--repeat",
                "3",
                "--save-baseline",
                "mine",
                "--out",
            ])
            .arg(&out),
    );
    // No results directory given: check re-runs the baseline's scenario from
    // the text runs.json saved, the model's path in it.
    let output = memrel()
        .args(["check", "--baseline", "mine", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        output.status.code() == Some(0) || output.status.code() == Some(1),
        "{}",
        streams(&output)
    );
    assert!(
        stderr(&output).contains("running scenario tiny-ckpt for the check"),
        "{}",
        streams(&output)
    );
    assert_eq!(results_dirs(&out, "tiny-ckpt").len(), 2);
}
