//! The fake worker on a CUDA device, in any build: retains the device's
//! primary context through the driver API (`cuda_driver`), measures what the
//! context alone holds (the VRAM floor of this worker: no cuBLAS, no pool),
//! installs the worker's VRAM reading for phase edges (`cuda_vram`: NVML's
//! per-process memory, or its documented fallback), and hands out exact
//! device allocations for fake models. It never samples: the parent does.

use std::time::Instant;

use anyhow::Result;

use super::cuda_driver::{self, Context, DeviceMemory};
use super::device::cuda_vram;
use crate::protocol::Check;
use crate::sampler::nvml;
use crate::textutil::MIB;

/// The fake worker's open device.
pub struct FakeDevice {
    context: Context,
    /// The primary context alone, as NVML saw it right after it was made.
    pub floor_bytes: Option<u64>,
    /// Device, context and VRAM-source facts for the hello message.
    pub checks: Vec<Check>,
}

impl FakeDevice {
    /// Opens CUDA device `ordinal`: a clear error without the NVIDIA driver.
    pub fn open(ordinal: usize) -> Result<FakeDevice> {
        let driver = cuda_driver::driver().map_err(anyhow::Error::msg)?;
        let gpu = driver.device(ordinal)?;
        let name = gpu.name()?;
        let total_bytes = gpu.total_bytes()?;
        let nvml_device = nvml::device_by_uuid(&gpu.uuid()?);
        let used_now = |d: &nvml_wrapper::Device<'static>| nvml::device_memory(d).ok().map(|x| x.0);
        let before_context_bytes = nvml_device.as_ref().ok().and_then(used_now);
        let pid = std::process::id();

        let start = Instant::now();
        let context = gpu.retain_context()?;
        context.synchronize()?;
        let open_s = start.elapsed().as_secs_f64();
        let at_context = nvml_device
            .as_ref()
            .ok()
            .map(|d| (cuda_vram::wait_listed(d, pid), used_now(d)));
        // The fake worker's bare device is the context alone.
        let source = cuda_vram::choose_source(
            nvml_device,
            before_context_bytes,
            at_context,
            at_context,
            pid,
        );
        let (free_bytes, _) = context.memory_info()?;
        let floor_bytes = source.bare_device_bytes;
        let mib = |b: Option<u64>| {
            b.map(|b| format!("{:.0} MiB", b as f64 / MIB))
                .unwrap_or_else(|| "unknown".into())
        };
        let checks = vec![
            Check {
                name: "cuda device".into(),
                ok: true,
                detail: format!(
                    "cuda:{ordinal} {name} ({:.0} MiB) through the driver API ({}, CUDA {}), no candle; \
                     primary context retained in {open_s:.3} s; {:.0} MiB free after it",
                    total_bytes as f64 / MIB,
                    cuda_driver::LIBRARY,
                    driver.version()?,
                    free_bytes as f64 / MIB,
                ),
            },
            Check {
                name: "cuda context (calibration)".into(),
                ok: floor_bytes.is_some(),
                detail: format!(
                    "the primary context alone (the fake worker: no cuBLAS, no tensors): {}; context_only_bytes={}",
                    mib(floor_bytes),
                    source
                        .context_only_bytes
                        .map(|b| b.to_string())
                        .unwrap_or_else(|| "unknown".into()),
                ),
            },
            Check {
                name: "vram source (worker)".into(),
                ok: source.ok,
                detail: source.detail,
            },
        ];
        Ok(FakeDevice {
            context,
            floor_bytes,
            checks,
        })
    }

    /// `bytes` of device memory with every byte set, or `None` for 0 bytes.
    pub fn alloc(&self, bytes: u64) -> Result<Option<DeviceMemory>> {
        if bytes == 0 {
            return Ok(None);
        }
        let bytes = usize::try_from(bytes)?;
        self.context.alloc(bytes, 0xA5).map(Some)
    }
}
