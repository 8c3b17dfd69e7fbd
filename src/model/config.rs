//! Checks a model's `config.json` in the parent, before a worker starts: the
//! loaders size buffers from it that the checkpoint does not hold (rotary
//! tables of `max_position_embeddings` rows, attention heads of
//! `hidden_size / num_attention_heads`), so an absurd value (a hidden size of
//! 10^9, a negative or zero size, a missing key) must be refused here with a
//! message naming the file and the key, not met in the worker as an
//! allocation of gigabytes or a panic.
//!
//! The keys are read with candle-transformers' own config types (after
//! `normalise` brings a transformers 5.x file to the shape they read), so what
//! this accepts is what the worker's loader accepts; [`parse`] is the one
//! place both the parent and the worker turn config.json into those types.

use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_transformers::models::{bert, gemma2, gemma3, llama, mistral, phi3, qwen2, qwen3};
use serde::Deserialize;
use serde_json::Value;

use super::arch::Architecture;
use super::normalise::normalise;

/// config.json as the architecture's candle-transformers loader reads it.
#[derive(Debug, Clone)]
pub enum Typed {
    Bert(bert::Config),
    Qwen2(qwen2::Config),
    Llama(llama::LlamaConfig),
    Qwen3(qwen3::Config),
    Mistral(mistral::Config),
    Gemma2(gemma2::Config),
    Gemma3(gemma3::Config),
    Phi3(phi3::Config),
}

impl Typed {
    /// Ties the head to the embedding: for a checkpoint with no `lm_head` (a
    /// base model, or a tied head transformers did not write), so the loaders
    /// that can share the embedding do, instead of loading it twice. Mistral's
    /// loader cannot (it always reads a head: the embedding, a second time).
    pub fn tie_head(&mut self) {
        match self {
            Typed::Llama(c) => c.tie_word_embeddings = Some(true),
            Typed::Qwen3(c) => c.tie_word_embeddings = true,
            Typed::Phi3(c) => c.tie_word_embeddings = true,
            // qwen2 asks whether a head exists; gemma always shares; bert has no head.
            Typed::Qwen2(_) | Typed::Mistral(_) | Typed::Gemma2(_) | Typed::Gemma3(_) => {}
            Typed::Bert(_) => {}
        }
    }
}

/// Reads `config` (the text of `path`, either transformers shape) into the
/// loader's type; a missing or mistyped key is named with the file.
pub fn parse(path: &Path, architecture: Architecture, config: &Value) -> Result<Typed> {
    let config = normalise(architecture, config);
    let typed = match architecture {
        Architecture::Bert => bert::Config::deserialize(&config).map(Typed::Bert),
        Architecture::Qwen2 => qwen2::Config::deserialize(&config).map(Typed::Qwen2),
        Architecture::Llama => llama::LlamaConfig::deserialize(&config).map(Typed::Llama),
        Architecture::Qwen3 => qwen3::Config::deserialize(&config).map(Typed::Qwen3),
        Architecture::Mistral => mistral::Config::deserialize(&config).map(Typed::Mistral),
        Architecture::Gemma2 => gemma2::Config::deserialize(&config).map(Typed::Gemma2),
        Architecture::Gemma3 => gemma3::Config::deserialize(&config).map(Typed::Gemma3),
        Architecture::Phi3 => phi3::Config::deserialize(&config).map(Typed::Phi3),
    };
    typed.with_context(|| {
        format!(
            "{} is not a valid {} config.json",
            path.display(),
            architecture.as_str()
        )
    })
}

/// The largest value memrel accepts for each size key of config.json. Each is
/// several times the largest published model of the architectures memrel
/// loads (vocabularies ≈ 256 Ki, hidden sizes ≈ 16 Ki, 1 Mi positions).
pub const LIMITS: &[(&str, u64)] = &[
    ("vocab_size", 1 << 22),
    ("hidden_size", 1 << 17),
    ("intermediate_size", 1 << 19),
    ("num_hidden_layers", 1 << 10),
    ("num_attention_heads", 1 << 10),
    ("num_key_value_heads", 1 << 10),
    ("max_position_embeddings", 1 << 20),
    ("type_vocab_size", 1 << 16),
    ("head_dim", 1 << 12),
];

/// The sizes the rest of memrel needs from a checked config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub vocab_size: u64,
    pub hidden_size: u64,
}

/// Checks `config` (the text of `path`) for `architecture`; errors name the
/// file and the key.
pub fn check(path: &Path, architecture: Architecture, config: &Value) -> Result<(Sizes, Typed)> {
    let shown = path.display();
    let arch = architecture.as_str();
    let typed = parse(path, architecture, config)?;
    for (key, max) in LIMITS {
        let Some(value) = config.get(*key).filter(|v| !v.is_null()) else {
            continue;
        };
        match value.as_u64() {
            Some(n) if (1..=*max).contains(&n) => {}
            _ => bail!(
                "{shown}: {key} = {value} is out of range: memrel loads models with a {key} from 1 to {max}"
            ),
        }
    }
    let size = |key: &str| config[key].as_u64().unwrap_or(0);
    let (hidden, heads) = (size("hidden_size"), size("num_attention_heads"));
    // With an explicit head_dim (Gemma, Qwen 3) heads × head_dim need not be the hidden size.
    let head_dim_given = config.get("head_dim").is_some_and(|v| !v.is_null());
    if heads == 0 || (!head_dim_given && hidden % heads != 0) {
        bail!(
            "{shown}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}: the file is not a {arch} config"
        );
    }
    let kv_heads = config["num_key_value_heads"].as_u64().unwrap_or(heads);
    if heads % kv_heads != 0 {
        bail!("{shown}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}");
    }
    let sizes = Sizes {
        vocab_size: size("vocab_size"),
        hidden_size: hidden,
    };
    Ok((sizes, typed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::preset;

    fn config_of(name: &str) -> Value {
        preset::lookup(name).unwrap().config_json()
    }

    fn error(architecture: Architecture, config: &Value) -> String {
        let err = check(Path::new("m/config.json"), architecture, config).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.starts_with("m/config.json"), "{text}");
        text
    }

    #[test]
    fn every_preset_config_passes() {
        for p in preset::PRESETS {
            let (sizes, _) = check(Path::new("c.json"), p.architecture, &p.config_json()).unwrap();
            assert_eq!(sizes.hidden_size, p.hidden_size as u64, "{}", p.name);
        }
    }

    #[test]
    fn absurd_sizes_name_the_key() {
        for (key, value) in [
            ("hidden_size", serde_json::json!(1_000_000_000u64)),
            (
                "max_position_embeddings",
                serde_json::json!(1_000_000_000u64),
            ),
            ("num_attention_heads", serde_json::json!(0)),
        ] {
            let mut config = config_of("qwen2-tiny");
            config[key] = value;
            let err = error(Architecture::Qwen2, &config);
            assert!(err.contains(&format!("{key} = ")), "{err}");
            assert!(err.contains("out of range"), "{err}");
        }
    }

    #[test]
    fn negative_sizes_and_missing_keys_are_refused_by_the_loaders_own_types() {
        let mut negative = config_of("bert-tiny");
        negative["hidden_size"] = serde_json::json!(-768);
        let err = error(Architecture::Bert, &negative);
        assert!(err.contains("not a valid bert config.json"), "{err}");
        assert!(err.contains("-768"), "{err}");
        let mut missing = config_of("qwen2-tiny");
        missing
            .as_object_mut()
            .unwrap()
            .remove("num_key_value_heads");
        let err = error(Architecture::Qwen2, &missing);
        assert!(err.contains("num_key_value_heads"), "{err}");
    }

    #[test]
    fn heads_that_do_not_divide_the_hidden_size_are_refused() {
        let mut config = config_of("qwen2-tiny");
        config["num_attention_heads"] = serde_json::json!(3);
        let err = error(Architecture::Qwen2, &config);
        assert!(err.contains("not a multiple"), "{err}");
    }
}
