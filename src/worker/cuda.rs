//! The worker on a CUDA device (`cuda` feature only): opens candle's CUDA
//! device, calibrates what a bare device costs in VRAM, reads this process's
//! VRAM at phase edges, and carries out the GPU release strategies.
//!
//! Facts it is built on (measured on the lent H100/H200, see
//! results/reference/cuda/README.md): cudarc frees
//! with `cuMemFreeAsync`, so VRAM goes back only at the next synchronize;
//! dropping candle's `Device` leaves the primary context alive (the CUDA
//! runtime behind cuBLAS and cuRAND retains it); releasing it by hand is
//! unsupported and opt-in. All of
//! this runs on the worker's main thread, where the context is current, so a
//! free never fails silently on a thread without a context.
//!
//! Its VRAM numbers come from `cuda_vram.rs` (NVML, with a documented fallback).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use cudarc::driver::{result as cu, sys, CudaContext};

use super::cuda_vram::{self, process_vram_bytes};
use crate::model::LoadedModel;
use crate::protocol::Check;
use crate::sampler::nvml;
use crate::strategy::ReleaseAction;
use crate::textutil::MIB;

/// What opening the device cost, measured once per worker.
#[derive(Debug, Clone, Default)]
struct Calibration {
    /// The primary context alone (`cuDevicePrimaryCtxRetain`).
    context_only_bytes: Option<u64>,
    /// A bare candle device: context + cuBLAS + cuRAND, no tensors.
    bare_device_bytes: Option<u64>,
    open_s: f64,
}

pub struct CudaState {
    ordinal: usize,
    cu_device: sys::CUdevice,
    name: String,
    total_bytes: u64,
    calibration: Calibration,
    source_detail: String,
    source_ok: bool,
    /// The primary context was released; the next device must prove it works.
    verify_next_device: bool,
    /// Devices opened after a context release so far.
    reopened_after_release: u32,
    /// Checks made during the run, returned by `finish`.
    pending: Vec<Check>,
}

impl CudaState {
    /// Opens candle's CUDA device `ordinal`, calibrating its VRAM on the way.
    pub fn open(ordinal: usize) -> Result<(Device, CudaState)> {
        let no_cuda = || {
            format!("cannot use cuda:{ordinal}: is an NVIDIA driver installed and the GPU visible?")
        };
        cu::init().with_context(no_cuda)?;
        let count = cu::device::get_count().with_context(no_cuda)?;
        if ordinal as i32 >= count {
            bail!(
                "--device cuda:{ordinal} does not exist: this machine has {count} CUDA device(s)"
            );
        }
        let cu_device = cu::device::get(ordinal as i32).with_context(no_cuda)?;
        let name = cu::device::get_name(cu_device).unwrap_or_else(|_| "?".into());
        // SAFETY: cu_device came from cuDeviceGet.
        let total_bytes = unsafe { cu::device::total_mem(cu_device) }.unwrap_or(0) as u64;
        let uuid = cu::device::get_uuid(cu_device).with_context(no_cuda)?;
        let uuid_bytes: [u8; 16] = uuid.bytes.map(|b| b as u8);
        let nvml_device = nvml::device_by_uuid(&uuid_bytes);
        let before_context_bytes = nvml_device
            .as_ref()
            .ok()
            .and_then(|d| nvml::device_memory(d).ok())
            .map(|(used, _)| used);
        let pid = std::process::id();

        let start = Instant::now();
        let context = CudaContext::new(ordinal).with_context(no_cuda)?;
        // (per-process, device used) with the primary context alone, then with a full candle device.
        let read = |d: &nvml_wrapper::Device<'static>| {
            (
                cuda_vram::wait_listed(d, pid),
                nvml::device_memory(d).ok().map(|(u, _)| u),
            )
        };
        let at_context = nvml_device.as_ref().ok().map(read);
        let device = Device::new_cuda(ordinal).with_context(no_cuda)?;
        device.synchronize()?;
        let open_s = start.elapsed().as_secs_f64();
        drop(context);
        let at_device = nvml_device.as_ref().ok().map(read);

        let mut calibration = Calibration {
            open_s,
            ..Calibration::default()
        };
        let source = cuda_vram::choose_source(
            nvml_device,
            before_context_bytes,
            at_context,
            at_device,
            pid,
        );
        calibration.context_only_bytes = source.context_only_bytes;
        calibration.bare_device_bytes = source.bare_device_bytes;
        let (source_detail, source_ok) = (source.detail, source.ok);
        let state = CudaState {
            ordinal,
            cu_device,
            name,
            total_bytes,
            calibration,
            source_detail,
            source_ok,
            verify_next_device: false,
            reopened_after_release: 0,
            pending: Vec::new(),
        };
        Ok((device, state))
    }

    /// Facts for the hello message: device, calibration, VRAM source.
    pub fn checks(&self) -> Vec<Check> {
        let c = &self.calibration;
        let mib = |b: Option<u64>| {
            b.map(|b| format!("{:.0} MiB", b as f64 / MIB))
                .unwrap_or_else(|| "unknown".into())
        };
        let raw = |b: Option<u64>| b.map(|b| b.to_string()).unwrap_or_else(|| "unknown".into());
        vec![
            Check {
                name: "cuda device".into(),
                ok: true,
                detail: format!(
                    "cuda:{} {} ({:.0} MiB); device opened in {:.3} s",
                    self.ordinal,
                    self.name,
                    self.total_bytes as f64 / MIB,
                    c.open_s
                ),
            },
            Check {
                name: "cuda context (calibration)".into(),
                ok: c.bare_device_bytes.is_some(),
                detail: format!(
                    "bare candle device (context + cuBLAS + cuRAND, no tensors): {}; the primary context alone: {}; \
                     context_only_bytes={} bare_device_bytes={}",
                    mib(c.bare_device_bytes),
                    mib(c.context_only_bytes),
                    raw(c.context_only_bytes),
                    raw(c.bare_device_bytes),
                ),
            },
            Check {
                name: "vram source (worker)".into(),
                ok: self.source_ok,
                detail: self.source_detail.clone(),
            },
        ]
    }

    /// With the model still alive: `to-cpu` copies every weight to the CPU.
    pub fn before_drop(
        &mut self,
        action: ReleaseAction,
        model: &LoadedModel,
        device: Option<&Device>,
    ) -> Result<Option<String>> {
        if let Some(Device::Cuda(d)) = device {
            // The model's frees below must run where the context is current.
            d.cuda_stream().context().bind_to_thread()?;
        }
        if action != ReleaseAction::CudaToCpu {
            return Ok(None);
        }
        let weights: Vec<&Tensor> = model.weights().collect();
        if weights.is_empty() {
            bail!("to-cpu: the model was loaded without recording its weights (a memrel bug)");
        }
        let start = Instant::now();
        let mut bytes = 0u64;
        let mut copies = Vec::with_capacity(weights.len());
        for w in &weights {
            bytes += (w.elem_count() * w.dtype().size_in_bytes()) as u64;
            copies.push(w.to_device(&Device::Cpu)?);
        }
        let ms = start.elapsed().as_secs_f64() * 1e3;
        // As after `model.to("cpu"); del model`: the CPU copies die with the model.
        drop(copies);
        Ok(Some(format!(
            "copied {} weights ({:.0} MiB) to the CPU in {ms:.1} ms",
            weights.len(),
            bytes as f64 / MIB
        )))
    }

    /// The strategy's release action. `device` is set to `None` where the
    /// strategy drops it; [`CudaState::reopen`] makes the next one.
    pub fn release(
        &mut self,
        action: ReleaseAction,
        device: &mut Option<Device>,
        models_alive: usize,
    ) -> Result<Option<String>> {
        let Some(open) = device.as_ref() else {
            return Ok(Some("no device open: nothing to release".into()));
        };
        let start = Instant::now();
        open.synchronize()?;
        if let Device::Cuda(d) = open {
            d.cuda_stream()
                .context()
                .check_err()
                .context("a CUDA call failed earlier (an asynchronous free?)")?;
        }
        let sync_ms = start.elapsed().as_secs_f64() * 1e3;
        let keeps_device = format!(
            "{models_alive} model(s) still loaded: device kept, synchronized in {sync_ms:.2} ms"
        );
        let note = match action {
            ReleaseAction::CudaSync | ReleaseAction::CudaToCpu => {
                format!("synchronized in {sync_ms:.2} ms")
            }
            ReleaseAction::CudaPoolTrim => self.trim_pool(sync_ms)?,
            ReleaseAction::CudaDeviceDrop | ReleaseAction::CudaContextRelease
                if models_alive > 0 =>
            {
                keeps_device
            }
            ReleaseAction::CudaDeviceDrop => {
                *device = None;
                format!(
                    "synchronized in {sync_ms:.2} ms, dropped the device in {:.2} ms; then {}",
                    start.elapsed().as_secs_f64() * 1e3 - sync_ms,
                    context_state(self.cu_device)
                )
            }
            ReleaseAction::CudaContextRelease => {
                *device = None;
                self.release_primary_context(sync_ms)?
            }
            ReleaseAction::None
            | ReleaseAction::MallocTrim
            | ReleaseAction::AllocatorRelease
            | ReleaseAction::Respawn
            | ReleaseAction::ProgramOnly(_) => return Ok(None),
        };
        Ok(Some(note))
    }

    /// The calibrated VRAM of a bare candle device.
    pub fn floor_bytes(&self) -> Option<u64> {
        self.calibration.bare_device_bytes
    }

    /// The bus's pinned copy ceiling on a buffer of `bytes`, as
    /// (device → host, host → device) GiB/s (`cuda_pinned.rs`).
    pub fn pinned_ceiling_gib_s(&self, device: &Device, bytes: usize) -> Result<(f64, f64)> {
        super::cuda_pinned::ceiling_gib_s(device, bytes)
    }

    /// Synchronize and trim the default pool: nothing freed stays reserved.
    pub fn flush(&self, device: &Device) -> Result<String> {
        let start = Instant::now();
        device.synchronize()?;
        self.trim_pool(start.elapsed().as_secs_f64() * 1e3)
    }

    /// `cuMemPoolTrimTo(default pool, 0)`, with the pool's reserved bytes around it.
    fn trim_pool(&self, sync_ms: f64) -> Result<String> {
        // SAFETY: cu_device came from cuDeviceGet; the pool is the device's own.
        let pool = unsafe { cu::device::get_default_mem_pool(self.cu_device) }?;
        let before = pool_reserved_bytes(pool);
        let start = Instant::now();
        // SAFETY: a valid pool; trimming only releases unused memory.
        unsafe { cu::mem_pool::trim_to(pool, 0) }?;
        let trim_ms = start.elapsed().as_secs_f64() * 1e3;
        let after = pool_reserved_bytes(pool);
        let mib = |b: Option<u64>| {
            b.map(|b| format!("{:.1}", b as f64 / MIB))
                .unwrap_or_else(|| "?".into())
        };
        Ok(format!(
            "synchronized in {sync_ms:.2} ms; cuMemPoolTrimTo(default pool, 0) in {trim_ms:.2} ms: pool reserved {} → {} MiB",
            mib(before),
            mib(after)
        ))
    }

    /// UNSUPPORTED: releases the primary context until the driver says it is
    /// inactive, taking references cuBLAS and cuRAND own.
    fn release_primary_context(&mut self, sync_ms: f64) -> Result<String> {
        let after_drop = context_state(self.cu_device);
        let start = Instant::now();
        let mut releases = 0u32;
        while primary_context_active(self.cu_device)? {
            if releases >= 32 {
                bail!("context-release: the primary context is still active after {releases} releases");
            }
            // SAFETY: cu_device came from cuDeviceGet. This is the unsupported
            // part: it drops references the CUDA runtime holds for cuBLAS/cuRAND.
            unsafe { cu::primary_ctx::release(self.cu_device) }?;
            releases += 1;
        }
        let release_ms = start.elapsed().as_secs_f64() * 1e3;
        let after_release = context_state(self.cu_device);
        // The thread may still name the released context as current.
        // SAFETY: setting no context current is always allowed.
        unsafe { cu::ctx::set_current(std::ptr::null_mut()) }?;
        self.verify_next_device = true;
        Ok(format!(
            "synchronized in {sync_ms:.2} ms; dropped the device: {after_drop}; cuDevicePrimaryCtxRelease_v2 ×{releases} \
             in {release_ms:.2} ms: {after_release}; cleared this thread's current context: {}",
            context_state(self.cu_device)
        ))
    }

    /// A new device after a strategy dropped the last one; after a context
    /// release it must also compute correctly (recorded as a check).
    pub fn reopen(&mut self) -> Result<(Device, String)> {
        let start = Instant::now();
        let device = Device::new_cuda(self.ordinal).with_context(|| {
            format!(
                "cannot open a new device on cuda:{} after the release",
                self.ordinal
            )
        })?;
        device.synchronize()?;
        let mut note = format!(
            "new device in {:.1} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        if self.verify_next_device {
            self.verify_next_device = false;
            self.reopened_after_release += 1;
            let name = format!(
                "new device after context release #{}",
                self.reopened_after_release
            );
            let check = matmul_check(&device, &name)?;
            note.push_str(&format!("; {}", check.detail));
            self.pending.push(check);
        }
        Ok((device, note))
    }

    /// End of the run: a released context must be followed by a working device.
    pub fn finish(&mut self, device: &mut Option<Device>) -> Result<Vec<Check>> {
        if device.is_none() && self.verify_next_device {
            let (new, _) = self.reopen()?;
            *device = Some(new);
        }
        if let Some(Device::Cuda(d)) = device.as_ref() {
            let parked = d.cuda_stream().context().check_err();
            self.pending.push(Check {
                name: "no parked cuda errors".into(),
                ok: parked.is_ok(),
                detail: match parked {
                    Ok(()) => "cudarc recorded no failed asynchronous call".into(),
                    Err(e) => format!("cudarc recorded a failed asynchronous call: {e}"),
                },
            });
        }
        Ok(std::mem::take(&mut self.pending))
    }
}

/// The primary context's state and this process's VRAM, for the events file.
fn context_state(device: sys::CUdevice) -> String {
    let active = match primary_context_active(device) {
        Ok(true) => "active",
        Ok(false) => "inactive",
        Err(_) => "unknown",
    };
    let current = match cu::ctx::get_current() {
        Ok(Some(_)) => "a context is current on this thread",
        Ok(None) => "no context current on this thread",
        Err(_) => "current context unknown",
    };
    let vram = process_vram_bytes()
        .map(|b| format!("{:.0} MiB", b as f64 / MIB))
        .unwrap_or_else(|| "unknown".into());
    format!("primary context {active}, {current}, process VRAM {vram}")
}

fn primary_context_active(device: sys::CUdevice) -> Result<bool> {
    let mut flags: std::ffi::c_uint = 0;
    let mut active: std::ffi::c_int = 0;
    // SAFETY: valid device and out-pointers to locals.
    unsafe { sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) }.result()?;
    Ok(active != 0)
}

fn pool_reserved_bytes(pool: sys::CUmemoryPool) -> Option<u64> {
    let mut value: u64 = 0;
    // SAFETY: RESERVED_MEM_CURRENT is a cuuint64_t, written into a local u64.
    unsafe {
        cu::mem_pool::get_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
            (&mut value as *mut u64).cast(),
        )
    }
    .ok()
    .map(|()| value)
}

/// A 64×64 f32 matmul on `device` (cuBLAS) against the same on the CPU.
fn matmul_check(device: &Device, name: &str) -> Result<Check> {
    let n = 64usize;
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 37 % 101) as f32) / 101.0)
        .collect();
    let b: Vec<f32> = (0..n * n)
        .map(|i| ((i * 53 % 89) as f32) / 89.0 - 0.5)
        .collect();
    let cpu = Tensor::from_vec(a.clone(), (n, n), &Device::Cpu)?.matmul(&Tensor::from_vec(
        b.clone(),
        (n, n),
        &Device::Cpu,
    )?)?;
    let gpu = Tensor::from_vec(a, (n, n), device)?
        .matmul(&Tensor::from_vec(b, (n, n), device)?)?
        .to_device(&Device::Cpu)?;
    let max_diff = (&cpu - &gpu)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?;
    let scale = cpu
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?
        .max(1e-6);
    let ok = max_diff / scale < 1e-3;
    Ok(Check {
        name: name.into(),
        ok,
        detail: format!("64×64 matmul on the new device vs cpu: max |diff| {max_diff:.2e} (largest value {scale:.2})"),
    })
}
