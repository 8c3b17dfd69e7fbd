//! `memrel model gen <preset> --gguf`: writes a synthetic llama-family model
//! as one GGUF file (llama.cpp's layout and names), in f32 or a quantized
//! type, through candle's own GGUF writer and quantizer.
//!
//! The weights are the preset's safetensors weights (the same seeded values
//! `model gen` writes), renamed to llama.cpp's tensor names, with the query
//! and key rows permuted as llama.cpp's converter does (GGUF's llama rotates
//! interleaved pairs), so the file is what a user's converted checkpoint
//! looks like. Only the metadata candle's `quantized_llama` loader reads is
//! written: no tokenizer (memrel feeds token ids).

use std::io::BufWriter;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::arch::Architecture;
use super::preset::Preset;
use super::synth;

/// The tensor types `--gguf-type` takes.
pub const TYPES: &[&str] = &["f32", "f16", "q8_0", "q4_0"];

fn ggml_dtype(name: &str) -> Result<GgmlDType> {
    Ok(match name {
        "f32" => GgmlDType::F32,
        "f16" => GgmlDType::F16,
        "q8_0" => GgmlDType::Q8_0,
        "q4_0" => GgmlDType::Q4_0,
        other => bail!(
            "--gguf-type {other} is not a type memrel writes: choose one of {}",
            TYPES.join(", ")
        ),
    })
}

/// llama.cpp's name for a HuggingFace llama tensor name.
fn gguf_name(hf: &str) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, name) = rest.split_once('.')?;
    let short = match name {
        "self_attn.q_proj.weight" => "attn_q",
        "self_attn.k_proj.weight" => "attn_k",
        "self_attn.v_proj.weight" => "attn_v",
        "self_attn.o_proj.weight" => "attn_output",
        "mlp.gate_proj.weight" => "ffn_gate",
        "mlp.up_proj.weight" => "ffn_up",
        "mlp.down_proj.weight" => "ffn_down",
        "input_layernorm.weight" => "attn_norm",
        "post_attention_layernorm.weight" => "ffn_norm",
        _ => return None,
    };
    Some(format!("blk.{layer}.{short}.weight"))
}

/// llama.cpp's `permute`: each head's rows from halves to interleaved pairs.
fn permute(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (rows, cols) = w.dims2()?;
    Ok(w.reshape((heads, 2, rows / heads / 2, cols))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((rows, cols))?)
}

/// Writes `preset` as a GGUF file at `path` with its 2-D weights in `type_name`
/// (norms stay f32, as llama.cpp keeps them); returns the tensor count.
pub fn write(preset: &Preset, type_name: &str, path: &Path) -> Result<usize> {
    let dtype = ggml_dtype(type_name)?;
    if !matches!(
        preset.architecture,
        Architecture::Llama | Architecture::Mistral
    ) {
        bail!(
            "--gguf writes llama-family models (llama, mistral presets); {} is {}: choose a \
             llama or mistral preset (`{}`)",
            preset.name,
            preset.architecture.as_str(),
            crate::hint::Hint::List
        );
    }
    let config = preset.config_json();
    let rope_theta = config["rope_theta"]
        .as_f64()
        .or_else(|| config["rope_parameters"]["rope_theta"].as_f64())
        .unwrap_or(10000.0);
    let eps = config["rms_norm_eps"].as_f64().unwrap_or(1e-6);
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    synth::write_model_dir(preset, tmp.path())?;
    let hf = candle_core::safetensors::load(tmp.path().join("model.safetensors"), &Device::Cpu)?;
    let mut names: Vec<&String> = hf.keys().collect();
    names.sort();
    let mut tensors = Vec::new();
    for hf_name in names {
        let Some(name) = gguf_name(hf_name) else {
            bail!(
                "{}: tensor {hf_name:?} has no GGUF name (memrel's layout changed)",
                preset.name
            );
        };
        let mut t = hf[hf_name].clone();
        if name.ends_with("attn_q.weight") {
            t = permute(&t, preset.heads)?;
        } else if name.ends_with("attn_k.weight") {
            t = permute(&t, preset.kv_heads)?;
        }
        let as_type = if t.rank() == 1 { GgmlDType::F32 } else { dtype };
        let q = QTensor::quantize(&t, as_type)
            .with_context(|| format!("cannot make {name} {type_name}"))?;
        tensors.push((name, q));
    }
    let u32_of = |n: usize| Value::U32(u32::try_from(n).unwrap_or(u32::MAX));
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("general.name", Value::String(preset.name.into())),
        ("llama.block_count", u32_of(preset.layers)),
        ("llama.context_length", u32_of(4096)),
        ("llama.embedding_length", u32_of(preset.hidden_size)),
        (
            "llama.feed_forward_length",
            u32_of(preset.intermediate_size),
        ),
        ("llama.attention.head_count", u32_of(preset.heads)),
        ("llama.attention.head_count_kv", u32_of(preset.kv_heads)),
        (
            "llama.rope.dimension_count",
            u32_of(preset.hidden_size / preset.heads),
        ),
        ("llama.rope.freq_base", Value::F32(rope_theta as f32)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(eps as f32),
        ),
    ];
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let partial = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    {
        let mut out = BufWriter::new(
            partial
                .as_file()
                .try_clone()
                .with_context(|| format!("cannot write {}", path.display()))?,
        );
        let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, q)| (n.as_str(), q)).collect();
        gguf_file::write(&mut out, &md, &ts)
            .with_context(|| format!("cannot write {}", path.display()))?;
        std::io::Write::flush(&mut out)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    partial
        .persist(path)
        .with_context(|| format!("cannot move the GGUF file into {}", path.display()))?;
    Ok(tensors.len())
}
