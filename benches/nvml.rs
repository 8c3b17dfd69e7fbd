//! Cost of one VRAM reading, the NVML sampler's unit of work, next to the
//! article's method (an `nvidia-smi --query-compute-apps` subprocess).
//!
//! Needs the `cuda` feature and a GPU. The bench opens a candle CUDA device
//! itself so that its own PID is in NVML's process list, as a worker's is
//! during a run; the budget is ≤ 50 µs per per-process read (≥ 100 Hz).

use std::hint::black_box;
use std::process::Command;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use memrel::sampler::nvml::{self, NvmlProbe};
use memrel::sampler::VramProbe;

fn vram_sample(c: &mut Criterion) {
    let _device = candle_core::Device::new_cuda(0).expect("a CUDA device (this bench needs a GPU)");
    let pid = std::process::id();
    let devices = nvml::devices().expect("nvml");
    let device = devices
        .iter()
        .find(|d| matches!(nvml::process_bytes(d, pid), Ok(Some(_))))
        .expect("this process is in nvml's list");

    c.bench_function("vram_sample/nvml_process_list", |b| {
        b.iter(|| black_box(nvml::process_bytes(device, pid).expect("nvml")))
    });
    c.bench_function("vram_sample/nvml_device_memory", |b| {
        b.iter(|| black_box(nvml::device_memory(device).expect("nvml")))
    });
    let mut probe = NvmlProbe::open().expect("nvml probe");
    assert!(
        probe.process_bytes(pid).is_some(),
        "the probe finds this process"
    );
    c.bench_function("vram_sample/sampler_probe_read", |b| {
        b.iter(|| black_box(probe.process_bytes(pid)))
    });

    let mut group = c.benchmark_group("vram_sample_article");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    group.bench_function("nvidia_smi_subprocess", |b| {
        b.iter(|| {
            black_box(
                Command::new("nvidia-smi")
                    .args([
                        "--query-compute-apps=pid,used_memory",
                        "--format=csv,noheader,nounits",
                    ])
                    .output()
                    .expect("nvidia-smi runs"),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, vram_sample);
criterion_main!(benches);
