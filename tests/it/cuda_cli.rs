//! CUDA from the command line of a build without the `cuda` feature (CI's
//! build): every CUDA scenario fails at once, before any model is prepared,
//! with a message that says how to build with CUDA; CPU scenarios are
//! unaffected and leave the VRAM columns empty, never 0.
//!
//! In a `cuda` build these tests are ignored (and say so): that build runs the
//! CUDA scenarios for real, on a GPU.

use std::time::{Duration, Instant};

use crate::common::{memrel_with_cache, stderr, Run};

const CUDA_SCENARIOS: [&str; 4] = ["cuda-drop", "cuda-flush", "cuda-context", "article-gpu"];

#[test]
#[cfg_attr(
    feature = "cuda",
    ignore = "a cuda build runs the cuda scenarios for real"
)]
fn cuda_scenarios_without_the_feature_fail_fast_and_say_how_to_build() {
    let tmp = tempfile::tempdir().unwrap();
    for scenario in CUDA_SCENARIOS {
        let start = Instant::now();
        let out = tmp.path().join("out");
        let output = Run::with(
            memrel_with_cache(&tmp.path().join("cache")),
            "run",
            scenario,
        )
        .out(&out)
        .output();
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{scenario}: {err}");
        for needle in [
            "cuda:0",
            "`cuda` feature",
            "scripts/build-cuda.sh",
            "--features cuda",
        ] {
            assert!(
                err.contains(needle),
                "{scenario}: missing {needle:?} in {err}"
            );
        }
        // Refused before anything was prepared: no model generated, no results directory.
        assert!(
            !tmp.path().join("cache").exists(),
            "{scenario} generated a model first"
        );
        assert!(!out.exists(), "{scenario} created results before refusing");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{scenario} took {:?}",
            start.elapsed()
        );
    }
}

#[test]
#[cfg_attr(
    feature = "cuda",
    ignore = "a cuda build runs the cuda scenarios for real"
)]
fn cuda_ordinal_on_the_command_line_is_refused_the_same_way() {
    let tmp = tempfile::tempdir().unwrap();
    let output = Run::with(memrel_with_cache(tmp.path()), "run", "ci-smoke")
        .args(["--device", "cuda:1"])
        .out(tmp.path().join("out"))
        .output();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cuda:1") && err.contains("build-cuda.sh"),
        "{err}"
    );
}

#[test]
fn gpu_strategies_on_cpu_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let output = Run::with(memrel_with_cache(tmp.path()), "run", "cuda-flush")
        .args(["--device", "cpu"])
        .out(tmp.path().join("out"))
        .output();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("\"sync\"") && err.contains("for cuda devices"),
        "{err}"
    );
}

#[test]
fn the_cuda_scenarios_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let output = memrel_with_cache(tmp.path())
        .args(["list"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for scenario in CUDA_SCENARIOS {
        assert!(
            text.contains(scenario),
            "memrel list lacks {scenario}:\n{text}"
        );
    }
}

#[test]
fn cpu_scenarios_are_unaffected_and_leave_vram_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let output = Run::with(
        memrel_with_cache(&tmp.path().join("cache")),
        "run",
        "ci-smoke",
    )
    .cycles(1)
    .strategy("drop")
    .out(&out)
    .output();
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = std::fs::read_dir(out.join("ci-smoke"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut reader = csv::Reader::from_path(dir.join("samples.csv")).unwrap();
    let column = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "vram_bytes")
        .unwrap();
    let mut rows = 0;
    for row in reader.records() {
        assert_eq!(&row.unwrap()[column], "", "a CPU run reported VRAM");
        rows += 1;
    }
    assert!(rows > 0, "no samples");
}
