//! Synthetic model presets: real HuggingFace shapes with deterministic weights.
//!
//! Each preset names an architecture and its dimensions; `layout` says what
//! its config.json and tensors are, `synth` writes the files. The tensor names
//! follow the published checkpoints (BERT's are `bert.`-prefixed with
//! `gamma`/`beta` LayerNorm names, as in bert-base-uncased), so the loaders
//! take the same paths as for real models.

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

/// The decoder test presets: one shape (that of qwen2-tiny), each family's layout.
const fn tiny(name: &'static str, summary: &'static str, architecture: Architecture) -> Preset {
    Preset {
        name,
        summary,
        architecture,
        vocab_size: 1024,
        hidden_size: 64,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        intermediate_size: 128,
        max_positions: 512,
    }
}

/// The bert-base encoder shape (12 layers × 768) with its own vocabulary.
const fn bert_base(name: &'static str, summary: &'static str, vocab_size: usize) -> Preset {
    Preset {
        name,
        summary,
        architecture: Architecture::Bert,
        vocab_size,
        hidden_size: 768,
        layers: 12,
        heads: 12,
        kv_heads: 12,
        intermediate_size: 3072,
        max_positions: 512,
    }
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
    bert_base(
        "bert-base",
        "the bert-base-uncased encoder shape, 12 layers × 768 (~416 MiB f32)",
        30522,
    ),
    bert_base(
        "bert-base-ja",
        "the bert-base-japanese-v2 encoder shape, vocabulary 32768 (~422 MiB f32)",
        32768,
    ),
    tiny(
        "qwen2-tiny",
        "Qwen2 decoder, 2 layers × 64 (~0.5 MiB f32): for tests",
        Architecture::Qwen2,
    ),
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
    tiny("llama-tiny", "Llama decoder, 2 layers × 64, GQA 4/2, tied head, transformers 5.x config (~0.5 MiB f32): for tests", Architecture::Llama),
    tiny("qwen3-tiny", "Qwen3 decoder (q/k norms), 2 layers × 64, transformers 5.x config (~0.5 MiB f32): for tests", Architecture::Qwen3),
    tiny("mistral-tiny", "Mistral decoder, 2 layers × 64, untied lm_head, no sliding window (~0.8 MiB f32): for tests", Architecture::Mistral),
    tiny("gemma2-tiny", "Gemma 2 decoder (sandwich norms, soft-capping), 2 layers × 64 (~0.5 MiB f32): for tests", Architecture::Gemma2),
    tiny("gemma3-tiny", "Gemma 3 text decoder (gemma3_text), 2 layers × 64, layer_types (~0.5 MiB f32): for tests", Architecture::Gemma3),
    tiny("phi3-tiny", "Phi-3 decoder (fused qkv and gate_up), 2 layers × 64, untied lm_head (~0.8 MiB f32): for tests", Architecture::Phi3),
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

impl Preset {
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
