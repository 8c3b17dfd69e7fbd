//! ONNX Runtime strategies (issue 38): the `ort-cpu` scenario under each ort-
//! strategy, each run completed with its setting read back from onnxruntime
//! (the `ort settings` check) and the request latencies in the forward note.
//!
//! Needs a python with onnxruntime and onnx: `MEMREL_TEST_PYTHON=<python>
//! cargo test --release --test it ort_ -- --ignored` (.ci/run installs them
//! into its torch venv and runs these).

use crate::common::*;

/// The interpreter with onnxruntime and onnx (`MEMREL_TEST_PYTHON`).
fn ort_python() -> String {
    std::env::var("MEMREL_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "this test needs a python3 with onnxruntime and onnx: \
             MEMREL_TEST_PYTHON=/path/to/venv/bin/python cargo test --release --test it ort_ -- --ignored"
        )
    })
}

#[test]
#[ignore = "needs onnxruntime and onnx: MEMREL_TEST_PYTHON=<python> cargo test --release --test it ort_ -- --ignored (CI runs it)"]
fn ort_cpu_runs_every_ort_strategy_with_its_setting_read_back() {
    let python = ort_python();
    let (_out, dir, output) = run("ort-cpu")
        .cycles(1)
        .strategy("ort-arena")
        .strategy("ort-no-arena")
        .strategy("ort-shrink")
        .strategy("ort-same-as-requested")
        .args(["--python", &python])
        .in_temp_dir("ort-cpu");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 4, "{}", streams(&output));
    let want = [
        ("ort-arena", "enable_cpu_mem_arena=True; 8 request(s)"),
        ("ort-no-arena", "enable_cpu_mem_arena=False; 8 request(s)"),
        (
            "ort-shrink",
            "8 of 8 request(s) with memory.enable_memory_arena_shrinkage=cpu:0",
        ),
        (
            "ort-same-as-requested",
            "session.use_env_allocators=1; create_and_register_allocator(Cpu arena, arena_extend_strategy=1)",
        ),
    ];
    for (run, (strategy, detail)) in runs.iter().zip(want) {
        assert_eq!(run["strategy"], strategy);
        assert_eq!(run["status"], "completed", "{run}");
        let checks = run["checks"].as_array().expect("checks");
        let ort = checks
            .iter()
            .find(|c| c["name"] == "ort settings")
            .unwrap_or_else(|| panic!("{strategy}: no ort settings check in {checks:?}"));
        assert_eq!(ort["ok"], true, "{strategy}: {ort}");
        assert!(
            ort["detail"].as_str().unwrap().contains(detail),
            "{strategy}: {ort}"
        );
    }
    let events = csv_rows(&dir.join("events.csv"));
    let forwards: Vec<&String> = events
        .iter()
        .filter(|e| e["phase"] == "forward" && e["edge"] == "end")
        .map(|e| &e["note"])
        .collect();
    assert_eq!(forwards.len(), 4, "{forwards:?}");
    for note in forwards {
        assert!(
            note.contains("batch 1: ") && note.contains("batch 64: ") && note.contains(" ms"),
            "{note}"
        );
    }
}

#[test]
fn ort_strategies_are_for_programs_and_name_their_setting() {
    for name in [
        "ort-arena",
        "ort-no-arena",
        "ort-shrink",
        "ort-same-as-requested",
    ] {
        let s = memrel::strategy::lookup(name).unwrap();
        assert!(!s.for_candle(), "{name}");
        let actions = s.for_programs().unwrap();
        assert_eq!(actions.start, vec![name.replace('-', "_")], "{name}");
        assert!(
            s.setting().contains("onnxruntime."),
            "{name}: {}",
            s.setting()
        );
    }
    let shrink = memrel::strategy::lookup("ort-shrink").unwrap().setting();
    assert!(
        shrink.contains("memory.enable_memory_arena_shrinkage\", \"cpu:0\""),
        "{shrink}"
    );
    let no_arena = memrel::strategy::lookup("ort-no-arena").unwrap().setting();
    assert!(
        no_arena.contains("enable_cpu_mem_arena = False"),
        "{no_arena}"
    );
}
