//! The numbers themselves: RSS rises by the model's bytes, plain drop retains
//! from the second load on, malloc_trim gives it back, outputs are complete.

use crate::common::*;

#[test]
fn anon_rise_of_a_load_matches_the_models_tensor_bytes() {
    let (_out, dir, _) = run("ci-smoke")
        .strategy("drop")
        .cycles(1)
        .in_temp_dir("ci-smoke");
    let runs = runs_json(&dir);
    let tensor_bytes = runs["header"]["models"][0]["tensor_bytes"]
        .as_f64()
        .unwrap();
    let events = csv_rows(&dir.join("events.csv"));
    let anon_at = |phase: &str, edge: &str| -> f64 {
        events
            .iter()
            .find(|e| e["phase"] == phase && e["edge"] == edge && e["cycle"] == "1")
            .map(|e| e["anon_bytes"].parse().unwrap())
            .unwrap_or_else(|| panic!("no {phase} {edge} event"))
    };
    // memrel's worker waits for each edge's reading: the times that span
    // edges leave those waits out (`RunRecord::own_span_s`).
    assert_waited_at_every_edge_but_the_first(&dir.join("events.csv"));
    // The load ran a real candle loader; a forward pass followed it.
    assert!(events
        .iter()
        .any(|e| e["phase"] == "forward" && e["edge"] == "end"));
    let rise = anon_at("load", "end") - anon_at("load", "begin");
    let ratio = rise / tensor_bytes;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "RssAnon rose {:.2} MiB for {:.2} MiB of tensors (ratio {ratio:.3})",
        rise / MIB,
        tensor_bytes / MIB
    );
}

#[test]
fn plain_drop_retains_from_the_second_load_and_malloc_trim_returns_it() {
    // bert-base, load → drop, no inference: the deterministic reproducer.
    let (_out, dir, _) = run("cpu-load-only")
        .strategy("drop")
        .strategy("malloc-trim")
        .cycles(3)
        .in_temp_dir("cpu-load-only");
    let summary = summary(&dir);
    let runs = summary["runs"].as_array().unwrap();
    let retained = |strategy: &str| -> Vec<f64> {
        let run = runs.iter().find(|r| r["strategy"] == strategy).unwrap();
        assert_eq!(run["resources"][0]["resource"], "host");
        run["resources"][0]["cycles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["retained_bytes"].as_f64().unwrap() / MIB)
            .collect()
    };
    let drop = retained("drop");
    let trim = retained("malloc-trim");
    assert_eq!(drop.len(), 3);
    assert!(
        drop[0] < 16.0,
        "the first cycle returns its memory: {drop:?}"
    );
    assert!(
        drop[1] > 200.0 && drop[2] > 200.0,
        "plain drop keeps the model from cycle 2 on: {drop:?}"
    );
    assert!(
        trim.iter().all(|r| *r < 10.0),
        "malloc_trim returns to within 10 MiB of baseline: {trim:?}"
    );
    let drop_summary = summary["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == "drop")
        .unwrap();
    let host = &drop_summary["resources"][0];
    assert_eq!(host["resource"], "host");
    assert_eq!(host["cycles_retaining"], 2);
    assert_eq!(host["processes_retaining"], 1);
    // Host memory and the model files' page cache, and the container's view
    // where the cgroup can be read.
    let resources: Vec<&str> = resources_but_container(&summary);
    assert_eq!(
        resources,
        ["host", "page_cache"],
        "a cpu run measures host memory and the model files' page cache"
    );
}

#[test]
fn every_output_is_written_and_samples_carry_phases() {
    let (_out, dir, _) = run("ci-smoke").cycles(2).in_temp_dir("ci-smoke");
    for file in [
        "samples.csv",
        "events.csv",
        "runs.json",
        "summary.json",
        "timeline.png",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }
    let png = std::fs::read(dir.join("timeline.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(samples.len() > 50, "only {} samples", samples.len());
    let phases: std::collections::BTreeSet<&str> =
        samples.iter().map(|s| s["phase"].as_str()).collect();
    for phase in ["baseline", "load", "settle"] {
        assert!(
            phases.contains(phase),
            "no sample in phase {phase}: {phases:?}"
        );
    }
    assert!(
        samples.iter().all(|s| s["vram_bytes"].is_empty()),
        "no VRAM on cpu"
    );
    // Times increase within a run; rss = anon + file.
    for s in &samples {
        let rss: u64 = s["rss_bytes"].parse().unwrap();
        let anon: u64 = s["anon_bytes"].parse().unwrap();
        let file: u64 = s["file_bytes"].parse().unwrap();
        assert_eq!(rss, anon + file);
    }
    let summary = summary(&dir);
    assert_eq!(summary["schema_version"], 2);
    assert_eq!(summary["lead"], "host");
    for s in summary["strategies"].as_array().unwrap() {
        assert_eq!(s["runs_completed"], 1);
        assert!(s["resources"][0]["peak_bytes"]["median"].as_f64().unwrap() > 10.0 * MIB);
    }
}

#[test]
fn a_killed_worker_keeps_the_samples_taken_so_far() {
    let work = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        work.path(),
        "stuck",
        r#"
description = "settles far longer than its timeout"
strategies = ["drop"]
cycles = 1
timeout_s = 1.5
interval_ms = 5
[models.tiny]
preset = "bert-tiny"
[workload]
steps = ["load tiny", "unload tiny", "idle 60000"]
"#,
    );
    let out = work.path().join("out");
    let output = run(&scenario).out(&out).output();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("timeout"), "{}", stderr(&output));
    let dir = only_results_dir(&out, "stuck");
    let runs = runs_json(&dir);
    assert_eq!(runs["runs"][0]["status"], "timed_out");
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(
        samples.len() > 100,
        "samples before the kill are kept: {}",
        samples.len()
    );
    // Samples of the cycle the kill cut short are kept (the idle step it
    // came in; bert-tiny's load can be shorter than one 5 ms interval, and
    // edges are stamped when they happened, so no sample need fall in it).
    assert!(samples
        .iter()
        .any(|s| s["phase"] == "idle" && s["cycle"] == "1"));
    assert!(dir.join("timeline.png").is_file());
}

#[test]
fn strategies_that_freeze_the_mmap_threshold_prove_it() {
    let (_out, dir, _) = run("ci-smoke")
        .strategy("trim-threshold-env")
        .strategy("mallopt")
        .cycles(2)
        .in_temp_dir("ci-smoke");
    let runs = runs_json(&dir);
    for run in runs["runs"].as_array().unwrap() {
        let checks = run["checks"].as_array().unwrap();
        assert!(
            checks.iter().any(|c| c["name"]
                .as_str()
                .unwrap()
                .starts_with("mmap threshold frozen")),
            "{checks:?}"
        );
        assert!(checks.iter().all(|c| c["ok"] == true), "{checks:?}");
    }
    let env_check = runs["runs"][0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "env MALLOC_TRIM_THRESHOLD_")
        .cloned();
    assert_eq!(
        env_check.unwrap()["detail"],
        "worker sees MALLOC_TRIM_THRESHOLD_=-1"
    );
}
