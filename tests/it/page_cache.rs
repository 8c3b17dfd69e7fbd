//! The model files' page cache as a resource (issue 26, line 1): real runs of
//! the candle worker on a real checkpoint on the disk (not tmpfs, where
//! fadvise cannot evict), read back from summary.json, samples.csv and
//! events.csv.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

/// A bert-tiny checkpoint of its own in a temp dir on the disk (the target
/// directory), so a test may delete it.
fn checkpoint() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let dir = tmp.path().join("bert-tiny");
    run_ok(memrel().args(["model", "gen", "bert-tiny"]).arg(&dir));
    (tmp, dir)
}

fn page_cache_scenario(dir: &Path, model: &Path, strategies: &str, steps: &str) -> PathBuf {
    let toml = format!(
        r#"description = "page cache test"
device = "cpu"
cycles = 1
strategies = [{strategies}]
interval_ms = 5

[models.tiny]
path = {model:?}

[workload]
steps = [{steps}]
batch_size = 1
seq_len = 8
settle_ms = 200
baseline_ms = 60
evict_page_cache = true
"#
    );
    write_scenario(dir, "pc", &toml)
}

const CYCLE: &str = r#""load tiny", "forward tiny", "unload tiny", "release", "settle""#;

/// The page cache's `metric` (a Spread's median) of `strategy` in summary.json.
fn cached(summary: &serde_json::Value, strategy: &str, metric: &str) -> f64 {
    let s = summary["strategies"]
        .as_array()
        .expect("strategies")
        .iter()
        .find(|s| s["strategy"] == strategy)
        .unwrap_or_else(|| panic!("no strategy {strategy} in {summary}"));
    let r = s["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "page_cache")
        .unwrap_or_else(|| panic!("no page_cache resource for {strategy}: {s}"));
    r[metric]["median"]
        .as_f64()
        .unwrap_or_else(|| panic!("{strategy}: no {metric}: {r}"))
}

/// drop keeps the weights cached after the unload; fadvise-dontneed brings
/// them near zero, which here means below 1/20 of the file (a clean file no
/// process maps is dropped whole: what is left is pages read again since);
/// read-load reads through the page cache, so it stays cached like drop.
#[test]
fn drop_keeps_the_weights_cached_and_fadvise_dontneed_drops_them() {
    let (tmp, model) = checkpoint();
    let file = model.join("model.safetensors");
    let file_bytes = std::fs::metadata(&file).expect("weights").len() as f64;
    let scenario = page_cache_scenario(
        tmp.path(),
        &model,
        r#""drop", "fadvise-dontneed", "read-load""#,
        CYCLE,
    );
    let (_out, dir, output) = run(&scenario).in_temp_dir("pc");
    assert!(
        !text(&output.stdout).contains("measured as one phase"),
        "{}",
        streams(&output)
    );
    let summary = summary(&dir);
    let near_zero = file_bytes / 20.0;
    for strategy in ["drop", "read-load"] {
        let loaded = cached(&summary, strategy, "loaded_bytes");
        let after = cached(&summary, strategy, "after_unload_bytes");
        assert!(
            loaded >= 0.9 * file_bytes && after >= 0.9 * file_bytes,
            "{strategy}: {loaded} bytes cached when loaded, {after} after unload, of {file_bytes}"
        );
    }
    for metric in ["loaded_bytes", "after_unload_bytes", "after_release_bytes"] {
        let v = cached(&summary, "fadvise-dontneed", metric);
        assert!(
            v < near_zero,
            "fadvise-dontneed {metric} {v} of {file_bytes}"
        );
    }
    // Every run started cold: the parent evicted the file first.
    for strategy in ["drop", "fadvise-dontneed", "read-load"] {
        let base = cached(&summary, strategy, "baseline_bytes");
        assert!(base < near_zero, "{strategy} baseline {base}");
    }
    // The columns: page_cache_bytes in both CSVs, read at every edge and at a
    // low rate in the samples; the header says how.
    let edges = csv_rows(&dir.join("events.csv"));
    assert!(
        edges.iter().all(|e| !e["page_cache_bytes"].is_empty()),
        "every edge has a reading"
    );
    let samples = csv_rows(&dir.join("samples.csv"));
    let read = samples
        .iter()
        .filter(|s| !s["page_cache_bytes"].is_empty())
        .count();
    assert!(
        read >= 3 && read * 5 < samples.len(),
        "a low rate: {read} readings in {} samples",
        samples.len()
    );
    let header = &runs_json(&dir)["header"]["page_cache"];
    let method = header["method"].as_str().expect("method");
    assert!(
        method.starts_with("cachestat") || method.starts_with("mincore"),
        "{header}"
    );
    assert_eq!(header["evicted_before_runs"], true);
    assert!(header["files"][0]["path"]
        .as_str()
        .is_some_and(|p| p.ends_with("model.safetensors")));
    // The table says what stays cached after the unload.
    let console = text(&output.stdout);
    assert!(console.contains("page cache"), "{console}");
    assert_rerenders(&dir);
}

/// A kernel without cachestat(2) (simulated: `MEMREL_NO_CACHESTAT`): the
/// page cache is read by mincore instead, the header says so and why, and
/// the numbers are the same.
#[test]
fn without_cachestat_mincore_reads_the_same_and_the_header_says_why() {
    let (tmp, model) = checkpoint();
    let file_bytes = std::fs::metadata(model.join("model.safetensors"))
        .expect("weights")
        .len() as f64;
    let scenario = page_cache_scenario(tmp.path(), &model, r#""drop""#, CYCLE);
    let (_out, dir, _) = run(&scenario)
        .env("MEMREL_NO_CACHESTAT", "1")
        .in_temp_dir("pc");
    let method = runs_json(&dir)["header"]["page_cache"]["method"]
        .as_str()
        .expect("method")
        .to_string();
    assert!(
        method.starts_with("mincore (this kernel has no cachestat(2)"),
        "{method}"
    );
    let after = cached(&summary(&dir), "drop", "after_unload_bytes");
    assert!(
        after >= 0.9 * file_bytes,
        "mincore read {after} bytes of a {file_bytes}-byte file cached"
    );
}

/// A weights file deleted while cached: the page cache is "not available"
/// with the reason, the run completes, and the readings before are kept.
#[test]
fn a_weights_file_deleted_during_the_run_is_not_available_and_the_run_goes_on() {
    let (tmp, model) = checkpoint();
    let file = model.join("model.safetensors");
    let steps = r#""load tiny", "forward tiny", "unload tiny", "idle 3000", "release", "settle""#;
    let scenario = page_cache_scenario(tmp.path(), &model, r#""drop""#, steps);
    let out = tempfile::tempdir().expect("out");
    let mut child = run(&scenario).out(out.path()).spawn(true);
    // Delete the file once the unload ended (the worker idles 3 s after it).
    wait_for("the unload's end edge", || {
        results_dirs(out.path(), "pc").iter().any(|d| {
            std::fs::read_to_string(d.join("events.csv"))
                .is_ok_and(|t| t.lines().any(|l| l.contains(",unload,end,")))
        })
    });
    std::fs::remove_file(&file).expect("weights deleted");
    let status = wait_with_limit(&mut child, Duration::from_secs(120));
    let stderr = stderr_of(&mut child);
    assert!(status.success(), "{status}: {stderr}");
    let dir = only_results_dir(out.path(), "pc");
    let run = &runs(&dir)[0];
    assert_eq!(run["status"], "completed", "{run}");
    let note = run["page_cache_note"].as_str().expect("a page cache note");
    assert!(note.contains("was deleted during the run"), "{note}");
    let summary = summary(&dir);
    let resource = summary["runs"][0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource"] == "page_cache")
        .expect("page_cache")
        .clone();
    let why = resource["not_measured"].as_str().expect("not measured");
    assert!(
        why.starts_with("page cache not available:") && why.contains("deleted"),
        "{why}"
    );
    // Nothing recorded is lost: the readings before the deletion are there,
    // none after it, and the host memory went on being sampled.
    let edges = csv_rows(&dir.join("events.csv"));
    let at = |phase: &str, edge: &str| {
        edges
            .iter()
            .find(|e| e["phase"] == phase && e["edge"] == edge)
            .unwrap_or_else(|| panic!("no {phase} {edge}"))["page_cache_bytes"]
            .clone()
    };
    assert!(!at("load", "end").is_empty());
    assert!(!at("unload", "end").is_empty());
    assert!(at("settle", "end").is_empty());
    let samples = csv_rows(&dir.join("samples.csv"));
    assert!(
        samples.iter().any(|s| s["phase"] == "settle"),
        "sampled to the end"
    );
    assert!(samples.iter().any(|s| !s["page_cache_bytes"].is_empty()));
    // The tables say it, and the run's cycles are still cycles.
    let shown = text(&run_ok(memrel().arg("report").arg(&dir)).stdout);
    assert!(
        shown.contains("page cache not available: ") && shown.contains("was deleted"),
        "{shown}"
    );
    assert!(!shown.contains("measured as one phase"), "{shown}");
    assert_rerenders(&dir);
}

/// Issue 47: without `evict_page_cache` a run started from whatever the run
/// before left, so the page cache was blamed on whichever strategy read the
/// file first (here `drop`, after `fadvise-dontneed` dropped it: its run
/// "retained" the whole file). Every run of memrel's worker now starts with
/// the files read into the cache, and the header says so.
#[test]
fn without_eviction_every_run_starts_with_the_weights_cached() {
    let (tmp, model) = checkpoint();
    let file_bytes = std::fs::metadata(model.join("model.safetensors"))
        .expect("weights")
        .len() as f64;
    let scenario = page_cache_scenario(tmp.path(), &model, r#""fadvise-dontneed", "drop""#, CYCLE);
    let toml = std::fs::read_to_string(&scenario).expect("scenario");
    std::fs::write(
        &scenario,
        toml.replace("evict_page_cache = true", "evict_page_cache = false"),
    )
    .expect("scenario");
    let (_out, dir, output) = run(&scenario).in_temp_dir("pc");
    let summary = summary(&dir);
    for strategy in ["fadvise-dontneed", "drop"] {
        let base = cached(&summary, strategy, "baseline_bytes");
        assert!(
            base >= 0.9 * file_bytes,
            "{strategy} started with {base} of {file_bytes} bytes cached: {}",
            streams(&output)
        );
    }
    // drop leaves the file cached as it found it: nothing retained.
    let retained = cached(&summary, "drop", "after_release_bytes")
        - cached(&summary, "drop", "baseline_bytes");
    assert!(
        retained.abs() < file_bytes / 20.0,
        "drop retained {retained}"
    );
    let header = &runs_json(&dir)["header"]["page_cache"];
    assert_eq!(header["warmed_before_runs"], true, "{header}");
    assert_eq!(header["evicted_before_runs"], false, "{header}");
}
