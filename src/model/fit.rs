//! Checks a checkpoint's tensors against the shapes its config.json implies
//! before any candle-transformers loader runs over them, for what a loader
//! would meet as a panic rather than an error.
//!
//! candle-transformers 0.11.1's llama loader builds its blocks with
//! `unwrap()` (`vendor/…/llama.rs:524`, never edited by hand), so a config
//! with more layers than the weights hold, or a head count or intermediate
//! size that gives other shapes, would end memrel with a backtrace where the
//! other families' loaders return an error. So, from the headers alone, in
//! the parent: every family's layers are counted (a missing layer is named
//! by one of its tensors, with the shape that tensor has in the layer before
//! it), and llama's blocks are checked tensor by tensor against the shapes
//! its `Block::load` asks for. What passes here is then run through the
//! loader itself over the headers (`inspect`'s `fits`), which names anything
//! else that does not fit.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::arch::Architecture;
use super::backend::decoder_name;
use super::config::Typed;

/// Each tensor's shape and the file it is in, by its name in the checkpoint.
pub type Shapes = HashMap<String, (Vec<u64>, PathBuf)>;

/// Checks `shapes` (the checkpoint's headers) against `typed` (config.json,
/// at `config_path`); `prefix` is what stands before the embedding tensor's
/// name in the checkpoint.
pub fn check(
    config_path: &Path,
    architecture: Architecture,
    typed: &Typed,
    prefix: &str,
    shapes: &Shapes,
) -> Result<()> {
    check_layers(config_path, architecture, layers(typed), prefix, shapes)?;
    if let Typed::Llama(c) = typed {
        check_llama_blocks(&c.clone().into_config(false), prefix, shapes)?;
    }
    Ok(())
}

/// config.json's `num_hidden_layers`, as the loader reads it.
fn layers(typed: &Typed) -> usize {
    match typed {
        Typed::Bert(c) => c.num_hidden_layers,
        Typed::Qwen2(c) => c.num_hidden_layers,
        Typed::Llama(c) => c.num_hidden_layers,
        Typed::Qwen3(c) => c.num_hidden_layers,
        Typed::Mistral(c) => c.num_hidden_layers,
        Typed::Gemma2(c) => c.num_hidden_layers,
        Typed::Gemma3(c) => c.num_hidden_layers,
        Typed::Phi3(c) => c.num_hidden_layers,
    }
}

/// Where a layer's tensors are named in the checkpoint: `<stem><i>.…`.
fn layer_stem(architecture: Architecture, prefix: &str) -> String {
    if architecture.is_decoder() {
        format!("{prefix}layers.")
    } else {
        format!("{prefix}encoder.layer.")
    }
}

/// Every layer from 0 to `want - 1` must have tensors; the first one that has
/// none is named by the tensor the loader would ask for first that the layer
/// before it (or any layer) holds, with its shape there.
fn check_layers(
    config_path: &Path,
    architecture: Architecture,
    want: usize,
    prefix: &str,
    shapes: &Shapes,
) -> Result<()> {
    let stem = layer_stem(architecture, prefix);
    // Layer index → the names of its tensors after `<stem><i>.`.
    let mut held: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
    for name in shapes.keys() {
        let Some((index, rest)) = name
            .strip_prefix(&stem)
            .and_then(|rest| rest.split_once('.'))
        else {
            continue;
        };
        if let Ok(index) = index.parse::<usize>() {
            held.entry(index).or_default().insert(rest);
        }
    }
    let Some(missing) = (0..want).find(|i| !held.contains_key(i)) else {
        return Ok(());
    };
    let count = held.len();
    let fix = if count > 0 && held.keys().all(|&i| i < count) {
        format!("set num_hidden_layers to {count} in config.json, or use the config.json that came with these weights")
    } else {
        "use the config.json that came with these weights, or a checkpoint that holds every layer"
            .to_string()
    };
    // The layer before the missing one (or the first the checkpoint has).
    let template = held
        .range(..missing)
        .next_back()
        .or_else(|| held.iter().next());
    let example = match template {
        Some((&index, rest)) => {
            let part = preferred_part(rest);
            let have = format!("{stem}{index}.{part}");
            let shape = shapes
                .get(&have)
                .map(|(s, _)| s.clone())
                .unwrap_or_default();
            format!(
                ": the checkpoint has no tensor {stem}{missing}.{part} (expected shape {shape:?}, \
                 as {have} has)"
            )
        }
        None => format!(": the checkpoint has no tensor named {stem}<i>.…"),
    };
    bail!(
        "{} says num_hidden_layers = {want}, but the weights hold {count} layer{}{example}: {fix}",
        config_path.display(),
        if count == 1 { "" } else { "s" },
    )
}

/// The part of a layer to name: its attention's first projection where it
/// has one (what every loader asks for first), else the first by name.
fn preferred_part<'a>(parts: &BTreeSet<&'a str>) -> &'a str {
    const FIRST: &[&str] = &[
        "self_attn.q_proj.weight",
        "self_attn.qkv_proj.weight",
        "attention.self.query.weight",
    ];
    FIRST
        .iter()
        .find_map(|p| parts.get(p).copied())
        .or_else(|| parts.iter().next().copied())
        .unwrap_or("")
}

/// llama's blocks as candle-transformers 0.11.1's `Block::load` asks for them
/// (`CausalSelfAttention::load`, `Mlp::load`, two `RmsNorm`s; no biases), by
/// the names the loader uses, mapped onto the checkpoint's.
fn check_llama_blocks(
    cfg: &candle_transformers::models::llama::Config,
    prefix: &str,
    shapes: &Shapes,
) -> Result<()> {
    let h = cfg.hidden_size as u64;
    let heads = cfg.num_attention_heads.max(1);
    let head_dim = (cfg.hidden_size / heads) as u64;
    let size_q = head_dim * cfg.num_attention_heads as u64;
    let size_kv = head_dim * cfg.num_key_value_heads as u64;
    let inter = cfg.intermediate_size as u64;
    let parts: [(&str, Vec<u64>); 9] = [
        ("self_attn.q_proj.weight", vec![size_q, h]),
        ("self_attn.k_proj.weight", vec![size_kv, h]),
        ("self_attn.v_proj.weight", vec![size_kv, h]),
        ("self_attn.o_proj.weight", vec![h, size_q]),
        ("mlp.gate_proj.weight", vec![inter, h]),
        ("mlp.up_proj.weight", vec![inter, h]),
        ("mlp.down_proj.weight", vec![h, inter]),
        ("input_layernorm.weight", vec![h]),
        ("post_attention_layernorm.weight", vec![h]),
    ];
    for layer in 0..cfg.num_hidden_layers {
        for (part, want) in &parts {
            let asked = format!("model.layers.{layer}.{part}");
            let name = decoder_name(prefix, &asked, |n| shapes.contains_key(n));
            match shapes.get(&name) {
                None => bail!(
                    "the checkpoint has no tensor named {name} (config.json implies shape {want:?}), \
                     which the llama loader needs: the config and the weights are not of one model"
                ),
                Some((shape, file)) if shape != want => bail!(
                    "tensor {name} in {} has shape {shape:?}, but config.json implies {want:?}: \
                     the config and the weights are not of one model",
                    file.display()
                ),
                Some(_) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(names: &[(&str, &[u64])]) -> Shapes {
        names
            .iter()
            .map(|(n, s)| (n.to_string(), (s.to_vec(), PathBuf::from("m.safetensors"))))
            .collect()
    }

    #[test]
    fn a_missing_layer_is_named_with_the_shape_of_the_layer_before() {
        let held = shapes(&[
            ("model.layers.0.self_attn.q_proj.weight", &[64, 64]),
            ("model.layers.0.input_layernorm.weight", &[64]),
            ("model.layers.1.self_attn.q_proj.weight", &[64, 64]),
        ]);
        let path = Path::new("m/config.json");
        check_layers(path, Architecture::Qwen2, 2, "model.", &held).unwrap();
        let err = check_layers(path, Architecture::Qwen2, 3, "model.", &held)
            .unwrap_err()
            .to_string();
        for part in [
            "m/config.json says num_hidden_layers = 3, but the weights hold 2 layers",
            "no tensor model.layers.2.self_attn.q_proj.weight (expected shape [64, 64], as model.layers.1.self_attn.q_proj.weight has)",
            "set num_hidden_layers to 2",
        ] {
            assert!(err.contains(part), "{part} missing from {err}");
        }
    }

    #[test]
    fn bert_layers_are_counted_under_the_encoder() {
        let held = shapes(&[("bert.encoder.layer.0.attention.self.query.weight", &[8, 8])]);
        let err = check_layers(Path::new("c.json"), Architecture::Bert, 2, "bert.", &held)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no tensor bert.encoder.layer.1.attention.self.query.weight"),
            "{err}"
        );
    }
}
