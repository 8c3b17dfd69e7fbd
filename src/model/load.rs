//! Loads a model directory in the worker through candle-transformers' real
//! loaders, and runs its forward pass.
//!
//! Only the worker loads; the parent checked the directory first
//! (`inspect`), so what fails here is what only reading the weights can show.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;

use super::backend::{head_name, Recording, Renamed};
use super::config;
use super::inspect::{ModelDir, WeightFormat};
use super::net::Net;
use super::spec::{Dtype, LoadMethod};

/// A model in memory, ready for a forward pass.
pub struct LoadedModel {
    net: Net,
    /// Every tensor the loader handed out, with the name it was asked for by,
    /// when asked for at load (the `to-cpu` strategy copies them, a sleep
    /// takes them off the device); clones share storage, so they cost no memory.
    weights: Vec<(String, Tensor)>,
}

impl LoadedModel {
    /// Loads through candle-transformers' real loader. The VarBuilder (and any
    /// mmap or file buffer it holds) is dropped before this returns.
    pub fn load(
        model: &ModelDir,
        device: &Device,
        dtype: Dtype,
        method: LoadMethod,
    ) -> Result<LoadedModel> {
        LoadedModel::load_with(model, device, dtype, method, false)
    }

    /// [`LoadedModel::load`], keeping a handle to every weight when
    /// `keep_weights` (see [`LoadedModel::weights`]).
    pub fn load_with(
        model: &ModelDir,
        device: &Device,
        dtype: Dtype,
        method: LoadMethod,
        keep_weights: bool,
    ) -> Result<LoadedModel> {
        if model.format == WeightFormat::Gguf {
            return LoadedModel::load_gguf(model, device, keep_weights);
        }
        let dtype = candle_dtype(dtype);
        let typed = typed_config(model)?;
        let backend: Box<dyn SimpleBackend> = match method {
            // SAFETY: the files are not modified while the model loads; tensors
            // are copied out of the mapping before it is dropped.
            LoadMethod::Mmap => Box::new(unsafe { MmapedSafetensors::multi(&model.files)? }),
            LoadMethod::Read => {
                let mut tensors = HashMap::new();
                for file in &model.files {
                    let bytes = std::fs::read(file)
                        .with_context(|| format!("cannot read {}", file.display()))?;
                    tensors.extend(candle_core::safetensors::load_buffer(&bytes, device)?);
                }
                Box::new(tensors)
            }
        };
        LoadedModel::assemble(model, typed, backend, dtype, device, keep_weights)
    }

    /// A GGUF file through candle's quantized llama loader (the dtype and the
    /// load method do not apply: its tensors keep the file's types and are
    /// read, never mapped). Quantized weights have no float tensors to hand
    /// out by name, so strategies that move them are refused.
    fn load_gguf(model: &ModelDir, device: &Device, keep_weights: bool) -> Result<LoadedModel> {
        if keep_weights {
            bail!(
                "{} is a GGUF model: its quantized weights cannot be moved by name, so \
                 strategies that take the weights off the device (to-cpu, sleep) do not apply; \
                 choose another strategy or a safetensors model",
                model.dir.display()
            );
        }
        let [file] = &model.files[..] else {
            bail!(
                "a GGUF model is one file, {} has {}",
                model.dir.display(),
                model.files.len()
            );
        };
        Ok(LoadedModel {
            net: Net::load_gguf(file, device)?,
            weights: Vec::new(),
        })
    }

    /// Builds the model again from weights taken off it by name (a wake): each
    /// tensor is served as the loader asks for it, moved to `device` where it
    /// is not there yet (a pageable host-to-device copy) and kept as a weight
    /// for the next sleep. Tensors already on `device` cost nothing.
    pub fn rebuild(
        model: &ModelDir,
        device: &Device,
        dtype: Dtype,
        weights: HashMap<String, Tensor>,
    ) -> Result<LoadedModel> {
        if model.format == WeightFormat::Gguf {
            bail!(
                "{} is a GGUF model: it cannot be rebuilt from named weights",
                model.dir.display()
            );
        }
        let typed = typed_config(model)?;
        LoadedModel::assemble(
            model,
            typed,
            Box::new(weights),
            candle_dtype(dtype),
            device,
            true,
        )
    }

    fn assemble(
        model: &ModelDir,
        typed: config::Typed,
        backend: Box<dyn SimpleBackend + '_>,
        dtype: DType,
        device: &Device,
        keep_weights: bool,
    ) -> Result<LoadedModel> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let backend: Box<dyn SimpleBackend> = if keep_weights {
            Box::new(Recording {
                inner: backend,
                seen: Arc::clone(&seen),
            })
        } else {
            backend
        };
        let net = model.build(typed, backend, dtype, device)?;
        let mut weights = match seen.lock() {
            Ok(mut seen) => std::mem::take(&mut *seen),
            Err(_) => bail!("the weight recorder's lock is poisoned"),
        };
        let mut ids = std::collections::HashSet::new();
        weights.retain(|(_, t)| ids.insert(t.id()));
        Ok(LoadedModel { net, weights })
    }

    /// The weights recorded at load (empty unless loaded with `keep_weights`),
    /// each once even where the model uses it twice.
    pub fn weights(&self) -> impl ExactSizeIterator<Item = &Tensor> {
        self.weights.iter().map(|(_, t)| t)
    }

    /// [`LoadedModel::weights`] with the names the loader asked for them by
    /// (a name asked for twice, as a tied head, may appear twice).
    pub fn named_weights(&self) -> &[(String, Tensor)] {
        &self.weights
    }

    /// One forward pass over a deterministic batch of token ids; returns the
    /// number of output elements (so the work cannot be optimised away).
    pub fn forward(
        &mut self,
        device: &Device,
        batch_size: usize,
        seq_len: usize,
        vocab: usize,
    ) -> Result<usize> {
        let ids: Vec<u32> = (0..batch_size * seq_len)
            .map(|i| ((i * 7919 + 13) % vocab.max(2)) as u32)
            .collect();
        let input = Tensor::from_vec(ids, (batch_size, seq_len), device)?;
        Ok(self.net.forward(&input, device)?.elem_count())
    }
}

fn candle_dtype(dtype: Dtype) -> DType {
    match dtype {
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::Bf16 => DType::BF16,
    }
}

/// The directory's config.json as the architecture's candle config.
fn typed_config(model: &ModelDir) -> Result<config::Typed> {
    let config_path = model.dir.join("config.json");
    let config_text = std::fs::read_to_string(&config_path)
        .with_context(|| format!("cannot read {}", config_path.display()))?;
    let config_json: serde_json::Value = serde_json::from_str(&config_text)
        .with_context(|| format!("{} is not valid JSON", config_path.display()))?;
    config::parse(&config_path, model.architecture, &config_json)
}

impl ModelDir {
    /// Builds the network from `backend` through a VarBuilder that serves the
    /// names the architecture's loader asks for: bert's under its prefix, a
    /// decoder's mapped onto the checkpoint's own (`backend::Renamed`), its
    /// head tied to the embedding where the checkpoint has none.
    pub fn build(
        &self,
        mut typed: config::Typed,
        backend: Box<dyn SimpleBackend + '_>,
        dtype: DType,
        device: &Device,
    ) -> Result<Net> {
        let vb = if self.architecture.is_decoder() {
            if !backend.contains_tensor(&head_name(&self.tensor_prefix, "weight")) {
                typed.tie_head();
            }
            let renamed = Renamed {
                inner: backend,
                prefix: self.tensor_prefix.clone(),
            };
            VarBuilder::from_backend(Box::new(renamed), dtype, device.clone())
        } else {
            let vb = VarBuilder::from_backend(backend, dtype, device.clone());
            if self.tensor_prefix.is_empty() {
                vb
            } else {
                vb.pp(self.tensor_prefix.trim_end_matches('.'))
            }
        };
        Net::build(&typed, vb)
            .with_context(|| format!("cannot load the model in {}", self.dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{preset, synth};

    fn tiny(name: &str) -> (tempfile::TempDir, ModelDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(name);
        synth::write_model_dir(preset::lookup(name).unwrap(), &dir).unwrap();
        let model = ModelDir::inspect(&dir).unwrap();
        (tmp, model)
    }

    #[test]
    fn recorded_weights_are_every_tensor_of_the_model_once() {
        let (_tmp, model) = tiny("bert-tiny");
        let loaded =
            LoadedModel::load_with(&model, &Device::Cpu, Dtype::F32, LoadMethod::Mmap, true)
                .unwrap();
        let bytes: u64 = loaded
            .weights()
            .map(|t| (t.elem_count() * t.dtype().size_in_bytes()) as u64)
            .sum();
        assert_eq!(bytes, model.tensor_bytes);
        assert_eq!(loaded.weights().len(), model.tensor_count);
    }

    #[test]
    fn weights_are_not_kept_unless_asked() {
        let (_tmp, model) = tiny("bert-tiny");
        let mut loaded =
            LoadedModel::load(&model, &Device::Cpu, Dtype::F32, LoadMethod::Read).unwrap();
        assert_eq!(loaded.weights().len(), 0);
        assert!(
            loaded
                .forward(&Device::Cpu, 1, 8, model.vocab_size)
                .unwrap()
                > 0
        );
    }

    #[test]
    fn every_tiny_preset_loads_every_tensor_and_forwards() {
        for p in preset::PRESETS.iter().filter(|p| p.name.ends_with("-tiny")) {
            let (_tmp, model) = tiny(p.name);
            for method in [LoadMethod::Mmap, LoadMethod::Read] {
                let mut loaded =
                    LoadedModel::load_with(&model, &Device::Cpu, Dtype::F32, method, true)
                        .unwrap_or_else(|e| panic!("{}: {e:#}", p.name));
                assert_eq!(loaded.weights().len(), model.tensor_count, "{}", p.name);
                let out = loaded.forward(&Device::Cpu, 2, 8, model.vocab_size);
                let out = out.unwrap_or_else(|e| panic!("{}: {e:#}", p.name));
                assert!(out >= 2 * 8, "{}: {out}", p.name);
            }
        }
    }
}
