//! One network per architecture, built by candle-transformers' own
//! constructors from a typed config and a VarBuilder, and one forward pass
//! over a batch of token ids.
//!
//! What the VarBuilder serves (real weights, or stand-ins checked against the
//! headers) is the caller's choice; this file never opens a file.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{
    bert, gemma2, gemma3, llama, mistral, phi3, quantized_llama, qwen2, qwen3,
};

use super::config::Typed;

pub enum Net {
    Bert(bert::BertModel),
    Qwen2(qwen2::ModelForCausalLM),
    Llama(Box<llama::Llama>, llama::Config),
    Qwen3(qwen3::ModelForCausalLM),
    Mistral(mistral::Model),
    Gemma2(gemma2::Model),
    Gemma3(gemma3::Model),
    Phi3(phi3::Model),
    /// A GGUF file through candle's quantized llama loader.
    QuantizedLlama(quantized_llama::ModelWeights),
}

impl Net {
    /// Builds the network; a decoder's `vb` must serve the loader's own names
    /// (`model.…`, `lm_head.…`: see `backend::Renamed`).
    pub fn build(config: &Typed, vb: VarBuilder) -> Result<Net> {
        let net = match config {
            Typed::Bert(config) => {
                let mut config = config.clone();
                // The prefix is already applied; stop candle from trying it again.
                config.model_type = None;
                Net::Bert(bert::BertModel::load(vb, &config)?)
            }
            Typed::Qwen2(c) => Net::Qwen2(qwen2::ModelForCausalLM::new(c, vb)?),
            Typed::Llama(c) => {
                let config = c.clone().into_config(false);
                Net::Llama(Box::new(llama::Llama::load(vb, &config)?), config)
            }
            Typed::Qwen3(c) => Net::Qwen3(qwen3::ModelForCausalLM::new(c, vb)?),
            Typed::Mistral(c) => {
                let mut c = c.clone();
                c.use_flash_attn = false;
                Net::Mistral(mistral::Model::new(&c, vb)?)
            }
            Typed::Gemma2(c) => Net::Gemma2(gemma2::Model::new(false, c, vb)?),
            Typed::Gemma3(c) => Net::Gemma3(gemma3::Model::new(false, c, vb)?),
            Typed::Phi3(c) => Net::Phi3(phi3::Model::new(c, vb)?),
        };
        Ok(net)
    }

    /// Builds a llama from a GGUF file through candle's quantized loader:
    /// it reads the header, then seeks to each tensor and reads it into a
    /// buffer (no mapping); quantized tensors stay quantized on `device`.
    pub fn load_gguf(path: &std::path::Path, device: &Device) -> Result<Net> {
        use anyhow::Context;
        let shown = path.display();
        let mut file = std::fs::File::open(path).with_context(|| format!("cannot open {shown}"))?;
        let content = candle_core::quantized::gguf_file::Content::read(&mut file)
            .with_context(|| format!("cannot read the GGUF header of {shown}"))?;
        let weights = quantized_llama::ModelWeights::from_gguf(content, &mut file, device)
            .with_context(|| format!("cannot load the GGUF model {shown}"))?;
        Ok(Net::QuantizedLlama(weights))
    }

    /// One forward pass over `input` (token ids, batch × sequence); the KV
    /// caches are emptied after it, so every pass starts alike.
    pub fn forward(&mut self, input: &Tensor, device: &Device) -> Result<Tensor> {
        let out = match self {
            Net::Bert(m) => {
                let token_types = input.zeros_like()?;
                m.forward(input, &token_types, None)?
            }
            Net::Qwen2(m) => {
                let out = m.forward(input, 0);
                m.clear_kv_cache();
                out?
            }
            Net::Llama(m, config) => {
                let mut cache = llama::Cache::new(false, DType::F32, config, device)?;
                m.forward(input, 0, &mut cache)?
            }
            Net::Qwen3(m) => {
                let out = m.forward(input, 0);
                m.clear_kv_cache();
                out?
            }
            Net::Mistral(m) => {
                let out = m.forward(input, 0);
                m.clear_kv_cache();
                out?
            }
            Net::Gemma2(m) => {
                let out = m.forward(input, 0);
                m.clear_kv_cache();
                out?
            }
            Net::Gemma3(m) => {
                // candle 0.11's gemma3 appends a non-contiguous value tensor to
                // its KV cache ("slice-set only supports contiguous tensors")
                // unless a pass holds one token or the model one KV head: feed
                // the sequence a token at a time, as decoding does.
                let mut out = Err(candle_core::Error::Msg("an empty sequence".into()));
                for i in 0..input.dim(1)? {
                    out = m.forward(&input.narrow(1, i, 1)?, i);
                    if out.is_err() {
                        break;
                    }
                }
                m.clear_kv_cache();
                out?
            }
            Net::Phi3(m) => {
                let out = m.forward(input, 0);
                m.clear_kv_cache();
                out?
            }
            Net::QuantizedLlama(m) => {
                // candle 0.11's quantized llama slices the last position out
                // of a batch ("input tensor is not contiguous" in QMatMul on
                // the CPU) unless the batch holds one sequence: feed the
                // sequences one by one, as a llama.cpp server does per slot.
                let mut outs = Vec::with_capacity(input.dim(0)?);
                for b in 0..input.dim(0)? {
                    let out = m.forward(&input.narrow(0, b, 1)?, 0);
                    m.clear_kv_cache();
                    outs.push(out?);
                }
                Tensor::cat(&outs, 0)?
            }
        };
        Ok(out)
    }
}
