//! The worker's device: the candle `Device` and the release actions that act
//! on it. CPU actions are glibc calls; CUDA actions live in `cuda.rs` behind
//! the `cuda` feature, so the CPU path never depends on CUDA (without the
//! feature `cuda_off.rs` stands in: a CUDA state that cannot exist).
//!
//! A CUDA strategy may drop the device (`device-drop`, `context-release`);
//! the next load then opens a new one through [`Session::ensure_open`], never
//! a CPU device in its place.
//!
//! The worker's own VRAM reading at phase edges (`cuda_vram.rs`: NVML, no
//! CUDA needed) is in every build: the fake worker holds device memory
//! through the driver API without the `cuda` feature (`fake_device.rs`).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use super::{allocator, glibc};
use crate::model::LoadedModel;
use crate::protocol::Check;
use crate::scenario::DeviceSpec;
use crate::strategy::{ReleaseAction, SleepMode, Strategy};

// The CUDA state: `cuda.rs` in a `cuda` build, else `cuda_off.rs`, a type
// with no value and the same methods, so `Session` is written once.
#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda_off.rs"]
mod cuda;
#[cfg(feature = "cuda")]
#[path = "cuda_pinned.rs"]
pub(super) mod cuda_pinned;
#[path = "cuda_vram.rs"]
pub(super) mod cuda_vram;

pub struct Session {
    /// `None` only between a strategy dropping the device and the next load.
    device: Option<Device>,
    /// `None` on the CPU (and always, in a build without the `cuda` feature).
    cuda: Option<cuda::CudaState>,
}

/// This process's VRAM where the worker can tell (once a CUDA device is
/// open: candle's in a `cuda` build, the fake worker's in any build).
pub fn vram_bytes_now() -> Option<u64> {
    cuda_vram::process_vram_bytes()
}

/// `nvidia-smi`'s view of this process, for the opt-in cross-check
/// (`MEMREL_CROSSCHECK_NVIDIA_SMI=1`); `None` when off or not on CUDA.
pub fn crosscheck_note() -> Option<String> {
    cuda_vram::nvidia_smi_note()
}

impl Session {
    pub fn open(spec: DeviceSpec) -> Result<Session> {
        match spec {
            DeviceSpec::Cpu => Ok(Session {
                device: Some(Device::Cpu),
                cuda: None,
            }),
            DeviceSpec::Cuda(ordinal) => {
                let (device, state) = cuda::CudaState::open(ordinal)?;
                Ok(Session {
                    device: Some(device),
                    cuda: Some(state),
                })
            }
        }
    }

    /// The open device; an error if a strategy dropped it and nothing reopened it.
    pub fn candle(&self) -> Result<&Device> {
        self.device.as_ref().context(
            "the device was dropped by the release strategy and not reopened (a memrel bug)",
        )
    }

    /// Opens a new device where a strategy dropped the last one; returns a note
    /// for the events file. Never falls back to another device.
    pub fn ensure_open(&mut self) -> Result<Option<String>> {
        if self.device.is_some() {
            return Ok(None);
        }
        if let Some(state) = &mut self.cuda {
            let (device, note) = state.reopen()?;
            self.device = Some(device);
            return Ok(Some(note));
        }
        bail!("the device was dropped and only CUDA devices can be reopened (a memrel bug)")
    }

    /// Whether loads must keep a handle to every weight (the `to-cpu`
    /// strategy; a sleep, which takes them off the device).
    pub fn needs_weights(strategy: &Strategy) -> bool {
        strategy.release == ReleaseAction::CudaToCpu || strategy.sleep != SleepMode::None
    }

    /// The bus's pinned copy ceiling on a buffer of `bytes`, as
    /// (device → host, host → device) GiB/s; `None` on the CPU.
    pub fn pinned_ceiling_gib_s(&self, bytes: u64) -> Result<Option<(f64, f64)>> {
        if let (Some(state), Some(device)) = (&self.cuda, &self.device) {
            return state.pinned_ceiling_gib_s(device, bytes as usize).map(Some);
        }
        Ok(None)
    }

    /// Device facts worth recording at start (CUDA: the context's VRAM).
    pub fn checks(&self) -> Vec<Check> {
        if let Some(state) = &self.cuda {
            return state.checks();
        }
        Vec::new()
    }

    /// The calibrated VRAM of a bare device (CUDA only).
    pub fn vram_floor_bytes(&self) -> Option<u64> {
        if let Some(state) = &self.cuda {
            return state.floor_bytes();
        }
        None
    }

    /// Completes queued frees and trims the memory pool, so nothing freed
    /// stays reserved (CUDA; `None` on CPU). Used after the warm-up: no
    /// strategy's baseline then holds pooled memory that another's does not.
    pub fn flush(&self) -> Result<Option<String>> {
        if let (Some(state), Some(device)) = (&self.cuda, &self.device) {
            return state.flush(device).map(Some);
        }
        Ok(None)
    }

    /// Waits for queued device work after a load (no-op on CPU).
    pub fn synchronize(&self) -> Result<()> {
        if let Some(device @ Device::Cuda(_)) = &self.device {
            device.synchronize()?;
        }
        Ok(())
    }

    /// Waits for a forward pass to finish so its time is real (no-op on CPU).
    pub fn synchronize_forward(&self) -> Result<()> {
        self.synchronize()
    }

    /// Work done with the model still alive, just before it is dropped.
    pub fn before_drop(
        &mut self,
        action: ReleaseAction,
        model: &LoadedModel,
    ) -> Result<Option<String>> {
        if let Some(state) = &mut self.cuda {
            return state.before_drop(action, model, self.device.as_ref());
        }
        Ok(None)
    }

    /// The strategy's release action, the one place the candle worker
    /// dispatches it: the preloaded allocator's own call (`served`), glibc's
    /// trim, or the CUDA device's (`cuda.rs`). Returns a note for the events
    /// file. `models_alive` counts the models still loaded: a device is never
    /// dropped from under them. A respawn is the step interpreter's to carry
    /// out; here (models still loaded, or the warm-up) it does nothing and
    /// says so.
    pub fn release(
        &mut self,
        served: &allocator::Served,
        action: ReleaseAction,
        models_alive: usize,
    ) -> Result<Option<String>> {
        match action {
            ReleaseAction::None => Ok(None),
            ReleaseAction::AllocatorRelease => served.force_release().map(Some),
            ReleaseAction::Respawn if models_alive > 0 => Ok(Some(format!(
                "respawn waits: {models_alive} model(s) still loaded"
            ))),
            ReleaseAction::Respawn => Ok(Some("no respawn in the warm-up".into())),
            ReleaseAction::MallocTrim => {
                let start = Instant::now();
                let released = glibc::malloc_trim();
                let ms = start.elapsed().as_secs_f64() * 1e3;
                Ok(Some(match released {
                    Some(true) => format!("malloc_trim(0) returned memory in {ms:.2} ms"),
                    Some(false) => format!("malloc_trim(0) had nothing to return ({ms:.2} ms)"),
                    None => bail!("malloc_trim needs glibc"),
                }))
            }
            _ => {
                if let Some(state) = &mut self.cuda {
                    return state.release(action, &mut self.device, models_alive);
                }
                bail!("release action {action:?} needs a CUDA device")
            }
        }
    }

    /// Checks that can only be made at the end (CUDA: a new device still works).
    pub fn finish(&mut self) -> Result<Vec<Check>> {
        if let Some(state) = &mut self.cuda {
            return state.finish(&mut self.device);
        }
        Ok(Vec::new())
    }
}
