//! The architectures memrel can load, through candle-transformers' own
//! loaders, and one forward pass for each.
//!
//! Only the worker loads models; the parent uses the detection half
//! (`from_config`, `tensor_prefix`) to fail early with a clear message.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
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

    /// The prefix before the tensor names candle's loader expects, found from
    /// an anchor tensor every checkpoint of the architecture has.
    pub fn tensor_prefix(self, names: &BTreeSet<String>) -> Result<String> {
        let anchor = match self {
            Architecture::Bert => "embeddings.word_embeddings.weight",
            // candle's qwen2/llama loaders add `model.` themselves.
            Architecture::Qwen2 | Architecture::Llama => "model.embed_tokens.weight",
        };
        match names.iter().find(|n| n.ends_with(anchor)) {
            Some(name) => Ok(name[..name.len() - anchor.len()].to_string()),
            None => bail!("no tensor named *{anchor}"),
        }
    }
}

/// A model in memory, ready for a forward pass.
pub enum LoadedModel {
    Bert(bert::BertModel),
    Qwen2(qwen2::ModelForCausalLM),
    Llama(Box<llama::Llama>, llama::Config),
}

impl LoadedModel {
    /// Loads through candle-transformers' real loader. The VarBuilder (and any
    /// mmap or file buffer it holds) is dropped before this returns.
    pub fn load(model: &ModelDir, device: &Device, dtype: Dtype, method: LoadMethod) -> Result<LoadedModel> {
        let dtype = match dtype {
            Dtype::F32 => DType::F32,
            Dtype::F16 => DType::F16,
            Dtype::Bf16 => DType::BF16,
        };
        let config_path = model.dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .with_context(|| format!("cannot read {}", config_path.display()))?;
        let vb = match method {
            // SAFETY: the files are not modified while the model loads; tensors
            // are copied out of the mapping before it is dropped.
            LoadMethod::Mmap => unsafe { VarBuilder::from_mmaped_safetensors(&model.files, dtype, device)? },
            LoadMethod::Read => {
                let mut tensors = std::collections::HashMap::new();
                for file in &model.files {
                    let bytes = std::fs::read(file)
                        .with_context(|| format!("cannot read {}", file.display()))?;
                    tensors.extend(candle_core::safetensors::load_buffer(&bytes, device)?);
                }
                VarBuilder::from_tensors(tensors, dtype, device)
            }
        };
        let vb = if model.tensor_prefix.is_empty() {
            vb
        } else {
            vb.pp(model.tensor_prefix.trim_end_matches('.'))
        };
        let parse = |what: &str| format!("{} is not a valid {what} config.json", config_path.display());
        let loaded = match model.architecture {
            Architecture::Bert => {
                let mut config: bert::Config = serde_json::from_str(&config_text).with_context(|| parse("bert"))?;
                // The prefix is already applied; stop candle from trying it again.
                config.model_type = None;
                LoadedModel::Bert(bert::BertModel::load(vb, &config)?)
            }
            Architecture::Qwen2 => {
                let config: qwen2::Config = serde_json::from_str(&config_text).with_context(|| parse("qwen2"))?;
                LoadedModel::Qwen2(qwen2::ModelForCausalLM::new(&config, vb)?)
            }
            Architecture::Llama => {
                let config: llama::LlamaConfig =
                    serde_json::from_str(&config_text).with_context(|| parse("llama"))?;
                let config = config.into_config(false);
                LoadedModel::Llama(Box::new(llama::Llama::load(vb, &config)?), config)
            }
        };
        Ok(loaded)
    }

    /// One forward pass over a deterministic batch of token ids; returns the
    /// number of output elements (so the work cannot be optimised away).
    pub fn forward(&mut self, device: &Device, batch_size: usize, seq_len: usize, vocab: usize) -> Result<usize> {
        let ids: Vec<u32> = (0..batch_size * seq_len)
            .map(|i| ((i * 7919 + 13) % vocab.max(2)) as u32)
            .collect();
        let input = Tensor::from_vec(ids, (batch_size, seq_len), device)?;
        let out = match self {
            LoadedModel::Bert(m) => {
                let token_types = input.zeros_like()?;
                m.forward(&input, &token_types, None)?
            }
            LoadedModel::Qwen2(m) => {
                let out = m.forward(&input, 0)?;
                m.clear_kv_cache();
                out
            }
            LoadedModel::Llama(m, config) => {
                let mut cache = llama::Cache::new(false, DType::F32, config, device)?;
                m.forward(&input, 0, &mut cache)?
            }
        };
        Ok(out.elem_count())
    }
}
