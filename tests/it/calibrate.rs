//! `memrel calibrate` on this machine: exact allocations from the fake
//! worker (1 MiB to 1 GiB, anonymous and file-backed), measured by memrel,
//! must meet every target (size within 1 % + 64 pages, sampled peak within
//! 1 % of VmHWM, markers within one interval + 1 ms), and a 20 ms spike of
//! 100 MiB must be seen at the default 10 ms.
//!
//! `--device cuda` depends on the machine, and is tested on every machine:
//! without the NVIDIA driver it must fail at once with a clear message; with
//! it, the VRAM rows must meet their target.

use super::common::*;

#[test]
fn calibrate_meets_its_targets_on_this_machine() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["calibrate", "--out"])
        .arg(out.path())
        .output()
        .expect("memrel starts");
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", stderr(&output));
    let dir = only_results_dir(out.path(), "calibrate");
    let json = read_json(&dir.join("calibrate.json"));
    assert_eq!(json["passed"], true, "{stdout}");
    let cases = json["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 8, "4 sizes × anon and file: {json}");
    for case in cases {
        let expected = case["expected_bytes"].as_f64().expect("expected");
        for key in ["edge_bytes", "sampled_bytes"] {
            let got = case[key].as_f64().expect(key);
            assert!(
                (got - expected).abs() <= 0.01 * expected + 64.0 * 4096.0,
                "{key}: {case}"
            );
        }
    }
    for spike in json["spikes"].as_array().expect("spikes") {
        assert_eq!(spike["caught"], true, "{spike}");
    }
    assert!(dir.join("calibrate.md").is_file());
}

/// Whether this machine has the NVIDIA driver's CUDA library, as memrel loads it.
fn cuda_driver_present() -> bool {
    // SAFETY: loading the driver library runs only its own initialisers.
    unsafe { libloading::Library::new("libcuda.so.1") }.is_ok()
}

#[test]
fn calibrate_on_cuda_measures_vram_or_says_the_driver_is_missing() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = memrel()
        .args(["calibrate", "--device", "cuda", "--out"])
        .arg(out.path())
        .output()
        .expect("memrel starts");
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
    if !cuda_driver_present() {
        assert_eq!(output.status.code(), Some(2), "{err}");
        for needle in [
            "memrel: error: --device cuda:0: cannot load",
            "libcuda.so.1",
            "a cuda device needs the NVIDIA driver",
        ] {
            assert!(err.contains(needle), "missing {needle:?} in {err}");
        }
        // Refused before anything ran: no results at all.
        let made: Vec<_> = std::fs::read_dir(out.path()).expect("out").collect();
        assert!(made.is_empty(), "{made:?}");
        return;
    }
    // A GPU machine: the VRAM rows are measured and meet their target.
    assert!(output.status.success(), "{}\n{err}", text(&output.stdout));
    let json = read_json(&only_results_dir(out.path(), "calibrate").join("calibrate.json"));
    let vram = &json["vram"];
    assert_eq!(vram["passed"], true, "{vram}");
    assert_eq!(vram["cases"].as_array().map(Vec::len), Some(4), "{vram}");
}
