//! Page-locked (pinned) host buffers for the `offload-pinned` sleep, and the
//! bus's ceiling measured on them (`cuda` feature only).
//!
//! candle copies between device and host through pageable memory only
//! (`Tensor::to_device`), which the driver stages through a buffer of its own;
//! page-locked memory is what the device reaches by DMA at the bus's speed.
//! This is cudarc's `cuMemHostAlloc` (flags 0, as `cudaHostAlloc` and
//! PyTorch's `pin_memory()`), `cuMemcpyDtoHAsync`/`HtoDAsync` on candle's own
//! stream, and candle's public `CudaStorage::wrap_cuda_slice` to hand the
//! device copies back to candle as tensors.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::op::BackpropOp;
use candle_core::cuda_backend::{CudaDType, CudaStorage};
use candle_core::{DType, Device, Shape, Storage, Tensor};
use cudarc::driver::{CudaStream, DeviceRepr, PinnedHostSlice};

use super::super::sleep::{tensor_bytes, Copied};

/// A weight in a pinned buffer, with what is needed to make it a tensor again.
enum PinnedBuffer {
    F32(PinnedHostSlice<f32>),
    F16(PinnedHostSlice<half::f16>),
    Bf16(PinnedHostSlice<half::bf16>),
}

/// A sleeping model's weights in pinned host memory, by name.
pub struct PinnedWeights {
    weights: Vec<(String, Shape, PinnedBuffer)>,
}

fn stream_of(device: &Device) -> Result<Arc<CudaStream>> {
    match device {
        Device::Cuda(d) => Ok(d.cuda_stream()),
        _ => bail!("offload-pinned needs a CUDA device"),
    }
}

/// Copies each weight into a pinned buffer of its own (per-parameter, as
/// torch_memory_saver does), then waits for the copies.
pub fn to_pinned(weights: &[(&str, &Tensor)]) -> Result<(PinnedWeights, Copied)> {
    let Some((_, first)) = weights.first() else {
        bail!("offload-pinned: the model has no weights to copy");
    };
    let stream = stream_of(first.device())?;
    stream.context().bind_to_thread()?;
    let start = Instant::now();
    let mut out = Vec::with_capacity(weights.len());
    let mut bytes = 0;
    for (name, t) in weights {
        let buffer = match t.dtype() {
            DType::F32 => PinnedBuffer::F32(copy_out::<f32>(&stream, t)?),
            DType::F16 => PinnedBuffer::F16(copy_out::<half::f16>(&stream, t)?),
            DType::BF16 => PinnedBuffer::Bf16(copy_out::<half::bf16>(&stream, t)?),
            other => bail!(
                "offload-pinned: weight {name} is {other:?}; only f32, f16 and bf16 are copied"
            ),
        };
        bytes += tensor_bytes(t);
        out.push((name.to_string(), t.shape().clone(), buffer));
    }
    stream.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    Ok((PinnedWeights { weights: out }, Copied { bytes, secs }))
}

fn copy_out<T: CudaDType + DeviceRepr>(
    stream: &Arc<CudaStream>,
    t: &Tensor,
) -> Result<PinnedHostSlice<T>> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        bail!("offload-pinned: a weight is not on the CUDA device");
    };
    if !layout.is_contiguous() {
        bail!("offload-pinned: a weight is not contiguous in device memory");
    }
    let slice = cuda.as_cuda_slice::<T>()?;
    let begin = layout.start_offset();
    let view = slice.slice(begin..begin + t.elem_count());
    // SAFETY: the buffer is written in full by the copy below before anything reads it.
    let mut pinned = unsafe {
        stream
            .context()
            .alloc_pinned_with_flags::<T>(t.elem_count(), 0)
    }
    .context("cuMemHostAlloc failed (page-locked memory is limited by RLIMIT_MEMLOCK and RAM)")?;
    stream.memcpy_dtoh(&view, &mut pinned)?;
    Ok(pinned)
}

/// Copies the weights back into new device memory, waits, frees the pinned
/// buffers, and returns them as candle tensors by name.
pub fn from_pinned(
    pinned: PinnedWeights,
    device: &Device,
) -> Result<(HashMap<String, Tensor>, Copied)> {
    let Device::Cuda(cuda) = device else {
        bail!("offload-pinned needs a CUDA device");
    };
    let stream = cuda.cuda_stream();
    stream.context().bind_to_thread()?;
    let start = Instant::now();
    let mut out = HashMap::new();
    let mut bytes = 0;
    for (name, shape, buffer) in &pinned.weights {
        let storage = match buffer {
            PinnedBuffer::F32(b) => copy_in(&stream, b, cuda)?,
            PinnedBuffer::F16(b) => copy_in(&stream, b, cuda)?,
            PinnedBuffer::Bf16(b) => copy_in(&stream, b, cuda)?,
        };
        let t = Tensor::from_storage(
            Storage::Cuda(storage),
            shape.clone(),
            BackpropOp::none(),
            false,
        );
        bytes += tensor_bytes(&t);
        out.insert(name.clone(), t);
    }
    stream.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    drop(pinned);
    Ok((out, Copied { bytes, secs }))
}

fn copy_in<T: CudaDType + DeviceRepr>(
    stream: &Arc<CudaStream>,
    pinned: &PinnedHostSlice<T>,
    device: &candle_core::CudaDevice,
) -> Result<CudaStorage> {
    // SAFETY: written in full by the copy below before candle reads it.
    let mut slice = unsafe { stream.alloc::<T>(pinned.len()) }?;
    stream.memcpy_htod(pinned, &mut slice)?;
    Ok(CudaStorage::wrap_cuda_slice(slice, device.clone()))
}

/// The bus's ceiling, measured here: one pinned buffer of `bytes` copied
/// device → host and host → device three times each; the best of each
/// direction in GiB/s.
pub fn ceiling_gib_s(device: &Device, bytes: usize) -> Result<(f64, f64)> {
    let stream = stream_of(device)?;
    stream.context().bind_to_thread()?;
    let on_device = stream.alloc_zeros::<u8>(bytes.max(1))?;
    let mut on_device = on_device;
    // SAFETY: written by the first copy before it is read.
    let mut pinned = unsafe {
        stream
            .context()
            .alloc_pinned_with_flags::<u8>(bytes.max(1), 0)
    }
    .context("cuMemHostAlloc failed for the ceiling's buffer")?;
    let gib = bytes.max(1) as f64 / (1024.0 * 1024.0 * 1024.0);
    let (mut d2h, mut h2d) = (0.0f64, 0.0f64);
    for _ in 0..3 {
        let start = Instant::now();
        stream.memcpy_dtoh(&on_device, &mut pinned)?;
        stream.synchronize()?;
        d2h = d2h.max(gib / start.elapsed().as_secs_f64());
        let start = Instant::now();
        stream.memcpy_htod(&pinned, &mut on_device)?;
        stream.synchronize()?;
        h2d = h2d.max(gib / start.elapsed().as_secs_f64());
    }
    Ok((d2h, h2d))
}
