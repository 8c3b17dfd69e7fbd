//! What a model is and how it loads: where it comes from ([`ModelSource`],
//! a [`FakeModel`]'s exact bytes) and how the worker reads it ([`LoadMethod`],
//! [`LoadThread`], [`Dtype`]). The words scenario, strategy, worker and model
//! share; they live here, at the bottom, so the model code need not borrow
//! them from the scenario that names them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a model comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// A synthetic model memrel writes itself (see `memrel list --long`).
    Preset(String),
    /// A local HuggingFace-layout directory.
    Path(String),
    /// A HuggingFace Hub repository id, fetched through hf-hub.
    Hub { repo: String, revision: String },
    /// No files: the fake worker allocates exactly these bytes (tests, calibration).
    Fake(FakeModel),
}

/// What the fake worker does for a "model": at load it maps and touches
/// `anon_bytes` of anonymous memory and `file_bytes` of a file it wrote, and
/// maps `leak_bytes` more that it never frees (a leak of that much per cycle);
/// on a CUDA device it also allocates `vram_bytes` of device memory
/// (`cuMemAlloc`) and sets every byte; at unload it frees all but the leak.
/// With `late_free_ms` above 0 the unload hands its host memory (anon and
/// file) to a thread that frees it that many ms after the cycle's release
/// step returns (after the unload's, in a cycle without a release): a
/// release call that returns before the memory is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeModel {
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub leak_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vram_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_free_ms: u64,
    /// A block of this many bytes the load allocates, touches, holds for
    /// `spike_ms` and frees before its end: a peak between two samples.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spike_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spike_ms: u64,
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

impl FakeModel {
    /// Bytes a load brings in (the "tensor bytes" of a fake model).
    pub fn load_bytes(&self) -> u64 {
        self.anon_bytes + self.file_bytes + self.leak_bytes + self.vram_bytes
    }
}

impl fmt::Display for ModelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSource::Preset(name) => write!(f, "preset:{name}"),
            ModelSource::Path(path) => write!(f, "path:{path}"),
            ModelSource::Hub { repo, revision } => write!(f, "hub:{repo}@{revision}"),
            ModelSource::Fake(m) => {
                write!(
                    f,
                    "fake:anon={},file={},leak={}",
                    m.anon_bytes, m.file_bytes, m.leak_bytes
                )?;
                if m.vram_bytes > 0 {
                    write!(f, ",vram={}", m.vram_bytes)?;
                }
                match m.late_free_ms {
                    0 => Ok(()),
                    ms => write!(f, ",late_free_ms={ms}"),
                }
            }
        }
    }
}

/// How the worker reads safetensors files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadMethod {
    /// `VarBuilder::from_mmaped_safetensors`: file pages are mapped, tensors copied out.
    Mmap,
    /// The whole file is read into a buffer first, then tensors are copied out.
    Read,
}

/// Which thread loads the models (glibc gives other threads their own arenas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadThread {
    Main,
    Spawned,
}

/// Tensor element type used for loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}
