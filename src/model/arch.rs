//! The architectures memrel can load, and how a checkpoint says which one it
//! is: config.json's `model_type` (else its `architectures` class) and the
//! prefix its tensor names carry.
//!
//! Detection only: the config's typed form is in `config`, building the
//! network in `net`, loading in `load`.

use std::collections::BTreeSet;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    Bert,
    Qwen2,
    Llama,
    Qwen3,
    Mistral,
    Gemma2,
    Gemma3,
    Phi3,
}

/// Every architecture, in the order messages list them.
pub const ALL: &[Architecture] = &[
    Architecture::Bert,
    Architecture::Llama,
    Architecture::Qwen2,
    Architecture::Qwen3,
    Architecture::Mistral,
    Architecture::Gemma2,
    Architecture::Gemma3,
    Architecture::Phi3,
];

/// The list messages show: each architecture's `model_type`.
pub const SUPPORTED: &str =
    "bert, llama, qwen2, qwen3, mistral, gemma2, gemma3 (gemma3_text), phi3";

impl Architecture {
    pub fn as_str(self) -> &'static str {
        match self {
            Architecture::Bert => "bert",
            Architecture::Qwen2 => "qwen2",
            Architecture::Llama => "llama",
            Architecture::Qwen3 => "qwen3",
            Architecture::Mistral => "mistral",
            Architecture::Gemma2 => "gemma2",
            Architecture::Gemma3 => "gemma3",
            Architecture::Phi3 => "phi3",
        }
    }

    /// The `model_type` transformers writes for it.
    fn model_type(self) -> &'static str {
        match self {
            Architecture::Gemma3 => "gemma3_text",
            other => other.as_str(),
        }
    }

    /// The class-name stem of its transformers classes (`LlamaForCausalLM`).
    fn class_stem(self) -> &'static str {
        match self {
            Architecture::Bert => "Bert",
            Architecture::Qwen2 => "Qwen2",
            Architecture::Llama => "Llama",
            Architecture::Qwen3 => "Qwen3",
            Architecture::Mistral => "Mistral",
            Architecture::Gemma2 => "Gemma2",
            Architecture::Gemma3 => "Gemma3",
            Architecture::Phi3 => "Phi3",
        }
    }

    /// A decoder (everything but bert): names under `model.`, maybe an `lm_head`.
    pub fn is_decoder(self) -> bool {
        self != Architecture::Bert
    }

    /// From config.json's `model_type`, else its `architectures` list.
    pub fn from_config(config: &Value) -> Result<Architecture> {
        let model_type = config["model_type"].as_str().unwrap_or("");
        let class = config["architectures"][0].as_str().unwrap_or("");
        if let Some(arch) = ALL.iter().find(|a| a.model_type() == model_type) {
            return Ok(*arch);
        }
        if model_type.is_empty() && !class.is_empty() {
            // Longest stem first, so no stem is read as a shorter one it begins with.
            let mut by_stem: Vec<Architecture> = ALL.to_vec();
            by_stem.sort_by_key(|a| std::cmp::Reverse(a.class_stem().len()));
            if let Some(arch) = by_stem.iter().find(|a| class.starts_with(a.class_stem())) {
                return Ok(*arch);
            }
        }
        if model_type.is_empty() && class.is_empty() {
            bail!(
                "config.json has neither model_type nor architectures; memrel loads: {SUPPORTED}"
            );
        }
        bail!(
            "unsupported architecture (model_type {model_type:?}, architectures [{class:?}]); memrel loads: {SUPPORTED}"
        )
    }

    /// The token-embedding tensor every checkpoint of the architecture has,
    /// of shape `[vocab_size, hidden_size]`, without a prefix.
    pub fn embedding_tensor(self) -> &'static str {
        match self {
            Architecture::Bert => "embeddings.word_embeddings.weight",
            _ => "embed_tokens.weight",
        }
    }

    /// What stands before the embedding tensor's name in the checkpoint: for
    /// bert the prefix the loader must add (`bert.`, or none); for a decoder
    /// `model.` (a `*ForCausalLM` checkpoint) or none (a base `*Model`).
    pub fn tensor_prefix(self, names: &BTreeSet<String>) -> Result<String> {
        let anchor = self.embedding_tensor();
        let found: Vec<&String> = names
            .iter()
            .filter(|n| n.as_str() == anchor || n.ends_with(&format!(".{anchor}")))
            .collect();
        match found.as_slice() {
            [name] => Ok(name[..name.len() - anchor.len()].to_string()),
            [] => bail!("no tensor named *{anchor}"),
            more => bail!(
                "{} tensors end in {anchor} ({}): memrel loads one model per directory",
                more.len(),
                more.iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_type_and_class_name_both_detect() {
        for arch in ALL {
            let by_type = json!({"model_type": arch.model_type()});
            assert_eq!(Architecture::from_config(&by_type).unwrap(), *arch);
            let by_class = json!({"architectures": [format!("{}ForCausalLM", arch.class_stem())]});
            assert_eq!(Architecture::from_config(&by_class).unwrap(), *arch);
        }
    }

    #[test]
    fn an_unsupported_architecture_lists_the_supported_ones() {
        let err = Architecture::from_config(&json!({"model_type": "falcon"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"falcon\""), "{err}");
        for arch in ALL {
            assert!(err.contains(arch.as_str()), "{err}");
        }
    }

    #[test]
    fn the_prefix_follows_the_names_in_the_header() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let causal = names(&["model.embed_tokens.weight", "lm_head.weight"]);
        assert_eq!(
            Architecture::Llama.tensor_prefix(&causal).unwrap(),
            "model."
        );
        let base = names(&["embed_tokens.weight", "norm.weight"]);
        assert_eq!(Architecture::Llama.tensor_prefix(&base).unwrap(), "");
        let bert = names(&["bert.embeddings.word_embeddings.weight"]);
        assert_eq!(Architecture::Bert.tensor_prefix(&bert).unwrap(), "bert.");
    }
}
