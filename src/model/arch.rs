//! The architectures memrel can load, through candle-transformers' own
//! loaders, and one forward pass for each.
//!
//! Only the worker loads models; the parent uses the detection half
//! (`from_config`, `tensor_prefix`) to fail early with a clear message.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::VarBuilder;
use candle_transformers::models::{bert, llama, qwen2};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::inspect::ModelDir;
use crate::scenario::{Dtype, LoadMethod};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    Bert,
    Qwen2,
    Llama,
}

pub const SUPPORTED: &str = "bert, qwen2, llama";

impl Architecture {
    pub fn as_str(self) -> &'static str {
        match self {
            Architecture::Bert => "bert",
            Architecture::Qwen2 => "qwen2",
            Architecture::Llama => "llama",
        }
    }

    /// From config.json's `model_type`, else its `architectures` list.
    pub fn from_config(config: &Value) -> Result<Architecture> {
        let model_type = config["model_type"].as_str().unwrap_or("");
        let class = config["architectures"][0].as_str().unwrap_or("");
        let arch = match (model_type, class) {
            ("bert", _) => Architecture::Bert,
            ("qwen2", _) => Architecture::Qwen2,
            ("llama", _) => Architecture::Llama,
            ("", c) if c.starts_with("Bert") => Architecture::Bert,
            ("", c) if c.starts_with("Qwen2") => Architecture::Qwen2,
            ("", c) if c.starts_with("Llama") => Architecture::Llama,
            ("", "") => bail!("config.json has neither model_type nor architectures; supported: {SUPPORTED}"),
            (t, c) => bail!(
                "unsupported architecture (model_type {t:?}, architectures [{c:?}]); memrel loads: {SUPPORTED}"
            ),
        };
        Ok(arch)
    }

    /// The token-embedding tensor every checkpoint of the architecture has,
    /// of shape `[vocab_size, hidden_size]`, without a prefix.
    pub fn embedding_tensor(self) -> &'static str {
        match self {
            Architecture::Bert => "embeddings.word_embeddings.weight",
            // candle's qwen2/llama loaders add `model.` themselves.
            Architecture::Qwen2 | Architecture::Llama => "model.embed_tokens.weight",
        }
    }

    /// The prefix before the tensor names candle's loader expects, found from
    /// the embedding tensor.
    pub fn tensor_prefix(self, names: &BTreeSet<String>) -> Result<String> {
        let anchor = self.embedding_tensor();
        match names.iter().find(|n| n.ends_with(anchor)) {
            Some(name) => Ok(name[..name.len() - anchor.len()].to_string()),
            None => bail!("no tensor named *{anchor}"),
        }
    }
}

/// A model in memory, ready for a forward pass.
pub struct LoadedModel {
    net: Net,
    /// Every tensor the loader handed out, when asked for at load (the `to-cpu`
    /// strategy copies them); clones share storage, so they cost no memory.
    weights: Vec<Tensor>,
}

enum Net {
    Bert(bert::BertModel),
    Qwen2(qwen2::ModelForCausalLM),
    Llama(Box<llama::Llama>, llama::Config),
}

/// A VarBuilder backend that remembers every tensor it returns. candle's models
/// keep their tensors private, so this is the only way to reach all weights.
struct Recording<'a> {
    inner: Box<dyn SimpleBackend + 'a>,
    seen: Arc<Mutex<Vec<Tensor>>>,
}

impl Recording<'_> {
    fn keep(&self, tensor: candle_core::Result<Tensor>) -> candle_core::Result<Tensor> {
        let tensor = tensor?;
        match self.seen.lock() {
            Ok(mut seen) => seen.push(tensor.clone()),
            Err(_) => candle_core::bail!("the weight recorder's lock is poisoned"),
        }
        Ok(tensor)
    }
}

impl SimpleBackend for Recording<'_> {
    fn get(
        &self,
        s: Shape,
        name: &str,
        h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        self.keep(self.inner.get(s, name, h, dtype, dev))
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.keep(self.inner.get_unchecked(name, dtype, dev))
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
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
        let dtype = match dtype {
            Dtype::F32 => DType::F32,
            Dtype::F16 => DType::F16,
            Dtype::Bf16 => DType::BF16,
        };
        let config_path = model.dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .with_context(|| format!("cannot read {}", config_path.display()))?;
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
        let seen = Arc::new(Mutex::new(Vec::new()));
        let backend: Box<dyn SimpleBackend> = if keep_weights {
            Box::new(Recording {
                inner: backend,
                seen: Arc::clone(&seen),
            })
        } else {
            backend
        };
        let vb = VarBuilder::from_backend(backend, dtype, device.clone());
        let vb = if model.tensor_prefix.is_empty() {
            vb
        } else {
            vb.pp(model.tensor_prefix.trim_end_matches('.'))
        };
        let parse = |what: &str| {
            format!(
                "{} is not a valid {what} config.json",
                config_path.display()
            )
        };
        let net = match model.architecture {
            Architecture::Bert => {
                let mut config: bert::Config =
                    serde_json::from_str(&config_text).with_context(|| parse("bert"))?;
                // The prefix is already applied; stop candle from trying it again.
                config.model_type = None;
                Net::Bert(bert::BertModel::load(vb, &config)?)
            }
            Architecture::Qwen2 => {
                let config: qwen2::Config =
                    serde_json::from_str(&config_text).with_context(|| parse("qwen2"))?;
                Net::Qwen2(qwen2::ModelForCausalLM::new(&config, vb)?)
            }
            Architecture::Llama => {
                let config: llama::LlamaConfig =
                    serde_json::from_str(&config_text).with_context(|| parse("llama"))?;
                let config = config.into_config(false);
                Net::Llama(Box::new(llama::Llama::load(vb, &config)?), config)
            }
        };
        let mut weights = match seen.lock() {
            Ok(mut seen) => std::mem::take(&mut *seen),
            Err(_) => bail!("the weight recorder's lock is poisoned"),
        };
        let mut ids = std::collections::HashSet::new();
        weights.retain(|t| ids.insert(t.id()));
        Ok(LoadedModel { net, weights })
    }

    /// The weights recorded at load (empty unless loaded with `keep_weights`),
    /// each once even where the model uses it twice.
    pub fn weights(&self) -> &[Tensor] {
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
        let out = match &mut self.net {
            Net::Bert(m) => {
                let token_types = input.zeros_like()?;
                m.forward(&input, &token_types, None)?
            }
            Net::Qwen2(m) => {
                let out = m.forward(&input, 0)?;
                m.clear_kv_cache();
                out
            }
            Net::Llama(m, config) => {
                let mut cache = llama::Cache::new(false, DType::F32, config, device)?;
                m.forward(&input, 0, &mut cache)?
            }
        };
        Ok(out.elem_count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{preset, synth};

    fn tiny() -> (tempfile::TempDir, ModelDir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bert-tiny");
        synth::write_model_dir(preset::lookup("bert-tiny").unwrap(), &dir).unwrap();
        let model = ModelDir::inspect(&dir).unwrap();
        (tmp, model)
    }

    #[test]
    fn recorded_weights_are_every_tensor_of_the_model_once() {
        let (_tmp, model) = tiny();
        let loaded =
            LoadedModel::load_with(&model, &Device::Cpu, Dtype::F32, LoadMethod::Mmap, true)
                .unwrap();
        let bytes: u64 = loaded
            .weights()
            .iter()
            .map(|t| (t.elem_count() * t.dtype().size_in_bytes()) as u64)
            .sum();
        assert_eq!(bytes, model.tensor_bytes);
        assert_eq!(loaded.weights().len(), model.tensor_count);
    }

    #[test]
    fn weights_are_not_kept_unless_asked() {
        let (_tmp, model) = tiny();
        let mut loaded =
            LoadedModel::load(&model, &Device::Cpu, Dtype::F32, LoadMethod::Read).unwrap();
        assert!(loaded.weights().is_empty());
        assert!(
            loaded
                .forward(&Device::Cpu, 1, 8, model.vocab_size)
                .unwrap()
                > 0
        );
    }
}
