//! Sleep and wake, what model servers do instead of unloading: a `sleep` step
//! takes a loaded model's weights off the device and frees its device memory
//! as the strategy's [`SleepMode`] says; a `wake` step brings the model back,
//! ready to run. The notes carry what the sleep/wake metrics need as
//! `key=value` fields (bytes copied, copy time, VRAM before the pool flush).
//!
//! The copies go through candle (`Tensor::to_device`: pageable host memory,
//! what `model.to("cpu")` does) or, for `offload-pinned`, through cudarc into
//! page-locked buffers (`cuda_pinned.rs`, `cuda` feature only).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{bail, Result};
use candle_core::{Device, Tensor};

use super::device::{self, Session};
use crate::model::spec::{Dtype, LoadMethod};
use crate::model::{LoadedModel, ModelDir};
use crate::strategy::SleepMode;

/// A model while it sleeps: where its weights wait.
pub enum Asleep {
    /// In ordinary (pageable) host memory, by the names the loader used.
    Host(HashMap<String, Tensor>),
    /// In page-locked host buffers.
    #[cfg(feature = "cuda")]
    Pinned(device::cuda_pinned::PinnedWeights),
    /// Nowhere: the wake reads the model's files again.
    Dropped,
}

/// Bytes moved across the bus and how long it took.
#[derive(Debug, Clone, Copy, Default)]
pub struct Copied {
    pub bytes: u64,
    pub secs: f64,
    /// Time spent page-locking host memory before the copy (pinned copies).
    pub pin_s: Option<f64>,
}

impl Copied {
    /// `copied_bytes=N copy_s=S gib_per_s=R`: what the sleep/wake metrics read.
    pub fn fields(self) -> String {
        let rate = if self.secs > 0.0 {
            self.bytes as f64 / self.secs / GIB
        } else {
            0.0
        };
        let pin = self
            .pin_s
            .map(|s| format!(" pin_s={s:.6}"))
            .unwrap_or_default();
        format!(
            "copied_bytes={} copy_s={:.6} gib_per_s={rate:.2}{pin}",
            self.bytes, self.secs
        )
    }
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Each weight once, by the first name the loader asked for it by (a tied
/// head asked for twice shares the embedding's name and bytes).
pub fn unique_weights(model: &LoadedModel) -> Vec<(&str, &Tensor)> {
    let mut seen = std::collections::HashSet::new();
    model
        .named_weights()
        .iter()
        .filter(|(name, _)| seen.insert(name.as_str()))
        .map(|(name, t)| (name.as_str(), t))
        .collect()
}

pub fn tensor_bytes(t: &Tensor) -> u64 {
    (t.elem_count() * t.dtype().size_in_bytes()) as u64
}

/// Puts `model` to sleep; returns where its weights wait and the sleep's note.
pub fn sleep(
    session: &mut Session,
    mode: SleepMode,
    model: LoadedModel,
) -> Result<(Asleep, String)> {
    if model.named_weights().is_empty() {
        bail!("sleep: the model was loaded without recording its weights (a memrel bug)");
    }
    let (asleep, copied) = match mode {
        SleepMode::None => {
            bail!("a sleep step under a strategy that does not sleep (a memrel bug)")
        }
        SleepMode::Offload => {
            let start = Instant::now();
            let mut host = HashMap::new();
            let mut bytes = 0;
            for (name, t) in unique_weights(&model) {
                bytes += tensor_bytes(t);
                host.insert(name.to_string(), t.to_device(&Device::Cpu)?);
            }
            session.synchronize()?;
            let secs = start.elapsed().as_secs_f64();
            (
                Asleep::Host(host),
                Some(Copied {
                    bytes,
                    secs,
                    pin_s: None,
                }),
            )
        }
        SleepMode::OffloadPinned => {
            #[cfg(feature = "cuda")]
            {
                let (pinned, copied) = device::cuda_pinned::to_pinned(&unique_weights(&model))?;
                (Asleep::Pinned(pinned), Some(copied))
            }
            #[cfg(not(feature = "cuda"))]
            bail!("offload-pinned needs a memrel built with the `cuda` feature")
        }
        SleepMode::Reload => (Asleep::Dropped, None),
    };
    drop(model);
    session.synchronize()?;
    let before_flush = device::vram_bytes_now()
        .map(|b| format!(" vram_before_flush_bytes={b}"))
        .unwrap_or_default();
    let flushed = session
        .flush()?
        .map(|n| format!("; {n}"))
        .unwrap_or_default();
    let copied = copied
        .map(|c| format!(" {}", c.fields()))
        .unwrap_or_default();
    Ok((
        asleep,
        format!("mode={}{copied}{before_flush}{flushed}", mode.name()),
    ))
}

/// Wakes a sleeping model: its weights back on the session's device, built
/// into a model ready for a forward pass. Returns the model and the note.
pub fn wake(
    session: &mut Session,
    asleep: Asleep,
    model: &ModelDir,
    dtype: Dtype,
    method: LoadMethod,
) -> Result<(LoadedModel, String)> {
    let start = Instant::now();
    let dev = session.candle()?.clone();
    let (loaded, copied) = match asleep {
        Asleep::Host(host) => {
            let bytes = host.values().map(tensor_bytes).sum();
            // Each tensor is copied to the device as the loader asks for it;
            // the host copies are freed when the rebuild returns.
            let loaded = LoadedModel::rebuild(model, &dev, dtype, host)?;
            session.synchronize()?;
            let secs = start.elapsed().as_secs_f64();
            (
                loaded,
                Some(Copied {
                    bytes,
                    secs,
                    pin_s: None,
                }),
            )
        }
        #[cfg(feature = "cuda")]
        Asleep::Pinned(pinned) => {
            let (on_device, copied) = device::cuda_pinned::from_pinned(pinned, &dev)?;
            let loaded = LoadedModel::rebuild(model, &dev, dtype, on_device)?;
            session.synchronize()?;
            (loaded, Some(copied))
        }
        Asleep::Dropped => {
            let loaded = LoadedModel::load_with(model, &dev, dtype, method, true)?;
            session.synchronize()?;
            (loaded, None)
        }
    };
    let copied = copied
        .map(|c| c.fields())
        .unwrap_or_else(|| "read from the model's files".to_string());
    Ok((
        loaded,
        format!("{copied} wake_s={:.6}", start.elapsed().as_secs_f64()),
    ))
}
