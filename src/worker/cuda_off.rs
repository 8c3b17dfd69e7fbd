//! The CUDA state of a build without the `cuda` feature: a type that has no
//! value, with `cuda.rs`'s methods. A `device::Session` holds an
//! `Option<CudaState>` in every build, so its methods are written once,
//! without `cfg`; here that option is always `None` and no method below can
//! be called. Opening a CUDA device says how to build memrel with CUDA.
//! Must not do anything: it only stands in for `cuda.rs`.

use anyhow::{bail, Result};
use candle_core::Device;

use crate::model::LoadedModel;
use crate::protocol::Check;
use crate::strategy::ReleaseAction;

/// No value: a build without the `cuda` feature never has a CUDA state.
pub enum CudaState {}

impl CudaState {
    pub fn open(_ordinal: usize) -> Result<(Device, CudaState)> {
        bail!(
            "this memrel was built without the `cuda` feature: build it with scripts/build-cuda.sh (or cargo build --release --features cuda)"
        )
    }

    pub fn checks(&self) -> Vec<Check> {
        match *self {}
    }

    pub fn before_drop(
        &mut self,
        _action: ReleaseAction,
        _model: &LoadedModel,
        _device: Option<&Device>,
    ) -> Result<Option<String>> {
        match *self {}
    }

    pub fn release(
        &mut self,
        _action: ReleaseAction,
        _device: &mut Option<Device>,
        _models_alive: usize,
    ) -> Result<Option<String>> {
        match *self {}
    }

    pub fn floor_bytes(&self) -> Option<u64> {
        match *self {}
    }

    pub fn flush(&self, _device: &Device) -> Result<String> {
        match *self {}
    }

    pub fn reopen(&mut self) -> Result<(Device, String)> {
        match *self {}
    }

    pub fn finish(&mut self, _device: &mut Option<Device>) -> Result<Vec<Check>> {
        match *self {}
    }

    pub fn pinned_ceiling_gib_s(&self, _device: &Device, _bytes: usize) -> Result<(f64, f64)> {
        match *self {}
    }
}
