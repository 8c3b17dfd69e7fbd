//! Synthetic model presets: real HuggingFace shapes with deterministic weights.
//!
//! Each preset names an architecture and its dimensions; `synth` writes the
//! files. The tensor names follow the published checkpoints (BERT's are
//! `bert.`-prefixed with `gamma`/`beta` LayerNorm names, as in
//! bert-base-uncased), so the loaders take the same paths as for real models.

use serde_json::json;

use super::arch::Architecture;
use crate::textutil::did_you_mean;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub intermediate_size: usize,
    pub max_positions: usize,
}

/// Bumped when a preset's files change, so old caches are not reused.
pub const PRESET_FORMAT: u32 = 1;

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "bert-tiny",
        summary: "BERT, 2 layers × 128 (~17 MiB f32): for tests and CI",
        architecture: Architecture::Bert,
        vocab_size: 30522,
        hidden_size: 128,
        layers: 2,
        heads: 2,
        kv_heads: 2,
        intermediate_size: 512,
        max_positions: 512,
    },
    Preset {
        name: "bert-base",
        summary: "the bert-base-uncased encoder shape, 12 layers × 768 (~416 MiB f32)",
        architecture: Architecture::Bert,
        vocab_size: 30522,
        hidden_size: 768,
        layers: 12,
        heads: 12,
        kv_heads: 12,
        intermediate_size: 3072,
        max_positions: 512,
    },
    Preset {
        name: "bert-base-ja",
        summary: "the bert-base-japanese-v2 encoder shape, vocabulary 32768 (~422 MiB f32)",
        architecture: Architecture::Bert,
        vocab_size: 32768,
        hidden_size: 768,
        layers: 12,
        heads: 12,
        kv_heads: 12,
        intermediate_size: 3072,
        max_positions: 512,
    },
    Preset {
        name: "qwen2-tiny",
        summary: "Qwen2 decoder, 2 layers × 64 (~0.5 MiB f32): for tests",
        architecture: Architecture::Qwen2,
        vocab_size: 1024,
        hidden_size: 64,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        intermediate_size: 128,
        max_positions: 512,
    },
    Preset {
        name: "qwen2-small",
        summary: "Qwen2 decoder LLM, 8 layers × 768, GQA 12/4, tied embeddings (~287 MiB f32)",
        architecture: Architecture::Qwen2,
        vocab_size: 32000,
        hidden_size: 768,
        layers: 8,
        heads: 12,
        kv_heads: 4,
        intermediate_size: 2048,
        max_positions: 2048,
    },
];

#[derive(Debug, thiserror::Error)]
#[error("unknown model preset {name:?}{suggestion}; presets: {known}")]
pub struct UnknownPreset {
    name: String,
    suggestion: String,
    known: String,
}

pub fn lookup(name: &str) -> Result<&'static Preset, UnknownPreset> {
    if let Some(p) = PRESETS.iter().find(|p| p.name == name) {
        return Ok(p);
    }
    let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    Err(UnknownPreset {
        name: name.to_string(),
        suggestion: did_you_mean(name, &names)
            .map(|g| format!(" (did you mean {g:?}?)"))
            .unwrap_or_default(),
        known: names.join(", "),
    })
}

/// How a synthetic tensor is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Deterministic uniform noise in ±0.05, seeded by the tensor's name.
    Noise,
    Ones,
    Zeros,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub fill: Fill,
}

fn t(name: String, shape: &[usize], fill: Fill) -> TensorSpec {
    TensorSpec {
        name,
        shape: shape.to_vec(),
        fill,
    }
}

impl Preset {
    /// The config.json a HuggingFace checkpoint of this shape would have.
    pub fn config_json(&self) -> serde_json::Value {
        match self.architecture {
            Architecture::Bert => json!({
                "architectures": ["BertForMaskedLM"],
                "model_type": "bert",
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads,
                "intermediate_size": self.intermediate_size,
                "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": self.max_positions,
                "type_vocab_size": 2,
                "initializer_range": 0.02,
                "layer_norm_eps": 1e-12,
                "pad_token_id": 0,
                "position_embedding_type": "absolute",
                "use_cache": true,
                "classifier_dropout": null,
                "torch_dtype": "float32",
                "memrel_preset": self.name,
            }),
            Architecture::Qwen2 | Architecture::Llama => json!({
                "architectures": ["Qwen2ForCausalLM"],
                "model_type": "qwen2",
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size,
                "num_hidden_layers": self.layers,
                "num_attention_heads": self.heads,
                "num_key_value_heads": self.kv_heads,
                "max_position_embeddings": self.max_positions,
                "sliding_window": self.max_positions,
                "max_window_layers": self.layers,
                "tie_word_embeddings": true,
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-6,
                "use_sliding_window": false,
                "hidden_act": "silu",
                "torch_dtype": "float32",
                "memrel_preset": self.name,
            }),
        }
    }

    /// Every tensor the checkpoint holds, in file order.
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let h = self.hidden_size;
        let mut out = Vec::new();
        match self.architecture {
            Architecture::Bert => {
                let p = "bert.";
                out.push(t(
                    format!("{p}embeddings.word_embeddings.weight"),
                    &[self.vocab_size, h],
                    Fill::Noise,
                ));
                out.push(t(
                    format!("{p}embeddings.position_embeddings.weight"),
                    &[self.max_positions, h],
                    Fill::Noise,
                ));
                out.push(t(
                    format!("{p}embeddings.token_type_embeddings.weight"),
                    &[2, h],
                    Fill::Noise,
                ));
                out.push(t(
                    format!("{p}embeddings.LayerNorm.gamma"),
                    &[h],
                    Fill::Ones,
                ));
                out.push(t(
                    format!("{p}embeddings.LayerNorm.beta"),
                    &[h],
                    Fill::Zeros,
                ));
                for i in 0..self.layers {
                    let l = format!("{p}encoder.layer.{i}");
                    for part in ["query", "key", "value"] {
                        out.push(t(
                            format!("{l}.attention.self.{part}.weight"),
                            &[h, h],
                            Fill::Noise,
                        ));
                        out.push(t(
                            format!("{l}.attention.self.{part}.bias"),
                            &[h],
                            Fill::Noise,
                        ));
                    }
                    out.push(t(
                        format!("{l}.attention.output.dense.weight"),
                        &[h, h],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.attention.output.dense.bias"),
                        &[h],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.attention.output.LayerNorm.gamma"),
                        &[h],
                        Fill::Ones,
                    ));
                    out.push(t(
                        format!("{l}.attention.output.LayerNorm.beta"),
                        &[h],
                        Fill::Zeros,
                    ));
                    out.push(t(
                        format!("{l}.intermediate.dense.weight"),
                        &[self.intermediate_size, h],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.intermediate.dense.bias"),
                        &[self.intermediate_size],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.output.dense.weight"),
                        &[h, self.intermediate_size],
                        Fill::Noise,
                    ));
                    out.push(t(format!("{l}.output.dense.bias"), &[h], Fill::Noise));
                    out.push(t(format!("{l}.output.LayerNorm.gamma"), &[h], Fill::Ones));
                    out.push(t(format!("{l}.output.LayerNorm.beta"), &[h], Fill::Zeros));
                }
            }
            Architecture::Qwen2 | Architecture::Llama => {
                let head_dim = h / self.heads;
                let q = self.heads * head_dim;
                let kv = self.kv_heads * head_dim;
                out.push(t(
                    "model.embed_tokens.weight".into(),
                    &[self.vocab_size, h],
                    Fill::Noise,
                ));
                for i in 0..self.layers {
                    let l = format!("model.layers.{i}");
                    out.push(t(
                        format!("{l}.self_attn.q_proj.weight"),
                        &[q, h],
                        Fill::Noise,
                    ));
                    out.push(t(format!("{l}.self_attn.q_proj.bias"), &[q], Fill::Noise));
                    out.push(t(
                        format!("{l}.self_attn.k_proj.weight"),
                        &[kv, h],
                        Fill::Noise,
                    ));
                    out.push(t(format!("{l}.self_attn.k_proj.bias"), &[kv], Fill::Noise));
                    out.push(t(
                        format!("{l}.self_attn.v_proj.weight"),
                        &[kv, h],
                        Fill::Noise,
                    ));
                    out.push(t(format!("{l}.self_attn.v_proj.bias"), &[kv], Fill::Noise));
                    out.push(t(
                        format!("{l}.self_attn.o_proj.weight"),
                        &[h, q],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.mlp.gate_proj.weight"),
                        &[self.intermediate_size, h],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.mlp.up_proj.weight"),
                        &[self.intermediate_size, h],
                        Fill::Noise,
                    ));
                    out.push(t(
                        format!("{l}.mlp.down_proj.weight"),
                        &[h, self.intermediate_size],
                        Fill::Noise,
                    ));
                    out.push(t(format!("{l}.input_layernorm.weight"), &[h], Fill::Ones));
                    out.push(t(
                        format!("{l}.post_attention_layernorm.weight"),
                        &[h],
                        Fill::Ones,
                    ));
                }
                out.push(t("model.norm.weight".into(), &[h], Fill::Ones));
            }
        }
        out
    }

    /// Bytes of f32 weights this preset writes.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors()
            .iter()
            .map(|t| t.shape.iter().product::<usize>() as u64 * 4)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bert_base_has_the_published_encoder_size() {
        // bert-base-uncased's encoder (without pooler and MLM head) has 108,891,648 parameters.
        let p = lookup("bert-base").unwrap();
        assert_eq!(p.tensor_bytes() / 4, 108_891_648);
    }

    #[test]
    fn unknown_preset_suggests() {
        let e = lookup("bert-bas").unwrap_err().to_string();
        assert!(e.contains("did you mean \"bert-base\""), "{e}");
    }
}
