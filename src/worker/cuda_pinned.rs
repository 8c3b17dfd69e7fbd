//! Page-locked (pinned) host memory for the `offload-pinned` sleep, and the
//! bus's ceiling measured on it (`cuda` feature only).
//!
//! candle copies between device and host through pageable memory only
//! (`Tensor::to_device`), which the driver stages through a buffer of its own;
//! page-locked memory is what the device reaches by DMA at the bus's speed.
//! A sleep pins one buffer for the whole model (cudarc's `cuMemHostAlloc`,
//! flags 0, as `cudaHostAlloc` and PyTorch's `pin_memory()`), then copies each
//! weight into its slice with `cuMemcpyDtoHAsync` on candle's own stream; a
//! wake copies each slice into new device memory, hands it to candle with its
//! public `CudaStorage::wrap_cuda_slice`, and frees the buffer. Pinning pages
//! costs time of its own, so the notes give it (`pin_s`) apart from the copy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::cuda_backend::{CudaDType, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::{DType, Device, Shape, Storage, Tensor};
use cudarc::driver::{result as cu, CudaStream, DevicePtr, DeviceRepr, PinnedHostSlice};

use super::super::sleep::{tensor_bytes, Copied};

/// A sleeping model's weights in one pinned buffer: each weight's name,
/// shape, dtype and byte range in it.
pub struct PinnedWeights {
    buffer: PinnedHostSlice<u8>,
    weights: Vec<(String, Shape, DType, std::ops::Range<usize>)>,
}

fn stream_of(device: &Device) -> Result<Arc<CudaStream>> {
    match device {
        Device::Cuda(d) => Ok(d.cuda_stream()),
        _ => bail!("offload-pinned needs a CUDA device"),
    }
}

/// Pins one buffer the size of every weight, copies each weight into it and
/// waits for the copies. The copy's time excludes the pinning.
pub fn to_pinned(weights: &[(&str, &Tensor)]) -> Result<(PinnedWeights, Copied)> {
    let Some((_, first)) = weights.first() else {
        bail!("offload-pinned: the model has no weights to copy");
    };
    let stream = stream_of(first.device())?;
    stream.context().bind_to_thread()?;
    let total: usize = weights.iter().map(|(_, t)| tensor_bytes(t) as usize).sum();
    let pin_start = Instant::now();
    // SAFETY: every byte is written by the copies below before anything reads it.
    let mut buffer = unsafe {
        stream
            .context()
            .alloc_pinned_with_flags::<u8>(total.max(1), 0)
    }
    .context("cuMemHostAlloc failed (page-locked memory is limited by RLIMIT_MEMLOCK and RAM)")?;
    let pin_s = pin_start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut layout = Vec::with_capacity(weights.len());
    let mut offset = 0;
    {
        let host = buffer.as_mut_slice()?;
        for (name, t) in weights {
            let bytes = tensor_bytes(t) as usize;
            let range = offset..offset + bytes;
            match t.dtype() {
                DType::F32 => copy_out::<f32>(&stream, t, &mut host[range.clone()])?,
                DType::F16 => copy_out::<half::f16>(&stream, t, &mut host[range.clone()])?,
                DType::BF16 => copy_out::<half::bf16>(&stream, t, &mut host[range.clone()])?,
                other => bail!(
                    "offload-pinned: weight {name} is {other:?}; only f32, f16 and bf16 are copied"
                ),
            }
            layout.push((name.to_string(), t.shape().clone(), t.dtype(), range));
            offset += bytes;
        }
    }
    stream.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    Ok((
        PinnedWeights {
            buffer,
            weights: layout,
        },
        Copied {
            bytes: offset as u64,
            secs,
            pin_s: Some(pin_s),
        },
    ))
}

fn copy_out<T: CudaDType + DeviceRepr>(
    stream: &Arc<CudaStream>,
    t: &Tensor,
    host: &mut [u8],
) -> Result<()> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cuda(cuda) = &*storage else {
        bail!("offload-pinned: a weight is not on the CUDA device");
    };
    if !layout.is_contiguous() {
        bail!("offload-pinned: a weight is not contiguous in device memory");
    }
    let begin = layout.start_offset();
    let view = cuda
        .as_cuda_slice::<T>()?
        .slice(begin..begin + t.elem_count());
    let (src, _sync) = view.device_ptr(stream);
    // SAFETY: `host` is page-locked and exactly the weight's size; the copy
    // is queued on candle's stream, which is synchronized before the buffer
    // is read or freed.
    unsafe { cu::memcpy_dtoh_async(host, src, stream.cu_stream()) }?;
    Ok(())
}

/// Copies the weights back into new device memory, waits, frees the pinned
/// buffer, and returns them as candle tensors by name.
pub fn from_pinned(
    mut pinned: PinnedWeights,
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
    {
        let host = pinned.buffer.as_mut_slice()?;
        for (name, shape, dtype, range) in &pinned.weights {
            let src = &host[range.clone()];
            let storage = match dtype {
                DType::F32 => copy_in::<f32>(&stream, src, cuda)?,
                DType::F16 => copy_in::<half::f16>(&stream, src, cuda)?,
                DType::BF16 => copy_in::<half::bf16>(&stream, src, cuda)?,
                other => bail!("offload-pinned: weight {name} is {other:?}"),
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
    }
    stream.synchronize()?;
    let secs = start.elapsed().as_secs_f64();
    drop(pinned);
    Ok((
        out,
        Copied {
            bytes,
            secs,
            pin_s: None,
        },
    ))
}

fn copy_in<T: CudaDType + DeviceRepr>(
    stream: &Arc<CudaStream>,
    host: &[u8],
    device: &candle_core::CudaDevice,
) -> Result<CudaStorage> {
    let len = host.len() / std::mem::size_of::<T>();
    // SAFETY: written in full by the copy below before candle reads it.
    let slice = unsafe { stream.alloc::<T>(len) }?;
    {
        let (dst, _sync) = slice.device_ptr(stream);
        // SAFETY: `host` is page-locked, as long as the new slice, and not
        // freed before the stream is synchronized.
        unsafe { cu::memcpy_htod_async(dst, host, stream.cu_stream()) }?;
    }
    Ok(CudaStorage::wrap_cuda_slice(slice, device.clone()))
}

/// The bus's ceiling, measured here: one pinned buffer of `bytes` copied
/// device → host and host → device three times each; the best of each
/// direction in GiB/s. Both buffers are freed and the stream synchronized
/// before it returns.
pub fn ceiling_gib_s(device: &Device, bytes: usize) -> Result<(f64, f64)> {
    let stream = stream_of(device)?;
    stream.context().bind_to_thread()?;
    let mut on_device = stream.alloc_zeros::<u8>(bytes.max(1))?;
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
        stream.synchronize()?;
        let start = Instant::now();
        stream.memcpy_dtoh(&on_device, &mut pinned)?;
        stream.synchronize()?;
        d2h = d2h.max(gib / start.elapsed().as_secs_f64());
        let start = Instant::now();
        stream.memcpy_htod(&pinned, &mut on_device)?;
        stream.synchronize()?;
        h2d = h2d.max(gib / start.elapsed().as_secs_f64());
    }
    drop(on_device);
    drop(pinned);
    stream.synchronize()?;
    Ok((d2h, h2d))
}
