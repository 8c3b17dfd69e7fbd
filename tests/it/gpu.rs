//! On a machine with an NVIDIA GPU and driver (any build: the fake worker
//! reaches the GPU through the driver API, NVML through dlopen): a worker
//! that makes its CUDA context late, as PyTorch and JAX do at their first
//! GPU operation, still gets a VRAM baseline (0: NVML answers and does not
//! list it) and a retained value per cycle (issue 22, line 5).
//!
//! Ignored elsewhere, and say so: `cargo test --release --test it gpu --
//! --ignored` on the GPU machine (results/reference/lazy-cuda/ says how it
//! was run there).

use crate::common::*;

#[test]
#[ignore = "needs an NVIDIA GPU and driver: cargo test --release --test it gpu -- --ignored"]
fn a_late_cuda_context_has_a_zero_baseline_and_a_retained_value() {
    let work = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        work.path(),
        "late-context",
        "description = \"fake worker, context at the first load\"\ndevice = \"cuda\"\ncycles = 2\n\
         strategies = [\"drop\"]\ninterval_ms = 10\n\
         [models.a]\nfake_anon_mib = 16\nfake_vram_mib = 256\n\
         [workload]\nsteps = [\"load a\", \"forward a\", \"unload a\", \"release\", \"settle\"]\n\
         settle_ms = 500\nbaseline_ms = 2000\n",
    );
    let out = work.path().join("out");
    let output = run(&scenario).env(LAZY_CONTEXT_ENV, "1").out(&out).output();
    assert!(output.status.success(), "{}", streams(&output));
    let dir = only_results_dir(&out, "late-context");
    let summary = summary(&dir);
    let vram = summary["strategies"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "cuda:0")
        .unwrap_or_else(|| panic!("no cuda:0 resource: {summary}"))
        .clone();
    assert_eq!(vram["baseline_bytes"]["median"], 0.0, "{vram}");
    let peak = vram["peak_bytes"]["median"].as_f64().unwrap();
    assert!(
        peak >= 256.0 * MIB,
        "peak {peak} below the 256 MiB allocation: {vram}"
    );
    let retained = vram["retained_bytes"]["median"].as_f64();
    assert!(retained.is_some(), "retained is filled: {vram}");
    assert_eq!(vram["cycles_total"], 2, "{vram}");
    // The samples before the context read 0, not empty.
    let rows = csv_rows(&dir.join("samples.csv"));
    let first = &rows[0];
    let column = first
        .keys()
        .find(|k| k.starts_with("vram") || k.starts_with("cuda0"))
        .unwrap_or_else(|| panic!("no VRAM column in samples.csv: {first:?}"))
        .clone();
    assert_eq!(
        rows[0][&column], "0",
        "first sample's {column}: {:?}",
        rows[0]
    );
    eprintln!(
        "late context: baseline 0, peak {:.0} MiB, retained {:?} bytes",
        peak / MIB,
        retained
    );
}
