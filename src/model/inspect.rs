//! Reads what a HuggingFace-layout model directory holds, without loading it:
//! config.json, which safetensors files (single or sharded), how many tensor
//! bytes, the architecture, and the tensor-name prefix the loader must use.
//!
//! It is also where a model directory is first read, so hostile or damaged
//! files are refused here, in the parent, before any worker starts: every
//! safetensors header is checked against its file (`header`), config.json's
//! sizes are checked (`config`) and must agree with the embedding tensor the
//! file really holds, integer-typed weights are refused, shard names cannot
//! leave the directory, the layers and (for llama, whose loader would panic)
//! the blocks are checked against the headers (`fit`), and the architecture's
//! loader is run over the headers alone (`backend::ShapesOnly`), so a tensor
//! that is missing or of another shape than config.json implies is named
//! here, with both shapes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::arch::Architecture;
use super::backend::ShapesOnly;
use super::{config, header};

/// The tensor types memrel loads (candle converts each to the run's dtype).
const FLOAT_DTYPES: &[&str] = &["F32", "F16", "BF16", "F64"];

/// A model directory as the worker needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDir {
    pub dir: PathBuf,
    pub architecture: Architecture,
    /// The safetensors files, in load order.
    pub files: Vec<PathBuf>,
    pub tensor_bytes: u64,
    pub parameters: u64,
    pub tensor_count: usize,
    /// config.json's `vocab_size`, for building valid token ids.
    pub vocab_size: usize,
    /// Prefix before the names the candle loader expects (e.g. `bert.`), empty if none.
    pub tensor_prefix: String,
    /// Safetensors in a directory, or one GGUF file (then `dir` is the file).
    #[serde(default, skip_serializing_if = "WeightFormat::is_safetensors")]
    pub format: WeightFormat,
}

/// What the weights are stored as, which decides the loader the worker uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    /// config.json + safetensors, loaded through candle-transformers' float loaders.
    #[default]
    Safetensors,
    /// One GGUF file, loaded through candle's quantized llama loader.
    Gguf,
}

impl WeightFormat {
    fn is_safetensors(&self) -> bool {
        *self == WeightFormat::Safetensors
    }
}

impl ModelDir {
    /// Inspects `dir`; errors name the path and say what is missing.
    pub fn inspect(dir: &Path) -> Result<ModelDir> {
        if dir.is_file() && super::gguf::looks_like_gguf(dir) {
            return super::gguf::inspect(dir);
        }
        if !dir.is_dir() {
            bail!("model directory {} does not exist", dir.display());
        }
        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path).with_context(|| {
            format!(
                "{} has no readable config.json: a model directory needs config.json and model.safetensors (HuggingFace layout)",
                dir.display()
            )
        })?;
        let config: Value = serde_json::from_str(&config_text)
            .with_context(|| format!("{} is not valid JSON", config_path.display()))?;
        let architecture = Architecture::from_config(&config)
            .with_context(|| format!("cannot load the model in {}", dir.display()))?;
        let (sizes, typed) = config::check(&config_path, architecture, &config)?;
        let files = safetensors_files(dir)?;
        let mut tensor_bytes = 0u64;
        let mut parameters = 0u64;
        let mut names = BTreeSet::new();
        let mut shapes = std::collections::HashMap::new();
        for file in &files {
            for tensor in header::read_header(file)? {
                // Each term is below the file's length (checked), so the sums cannot overflow.
                tensor_bytes += tensor.bytes;
                parameters += tensor.shape.iter().product::<u64>();
                if !names.insert(tensor.name.clone()) {
                    bail!(
                        "tensor {:?} is in two shards of {} ({} is one): the checkpoint is damaged",
                        tensor.name,
                        dir.display(),
                        file.display()
                    );
                }
                // Integer buffers (old BERT checkpoints' position_ids) are not weights.
                let buffer = tensor.name.ends_with("position_ids");
                if !buffer && !FLOAT_DTYPES.contains(&tensor.dtype.as_str()) {
                    bail!(
                        "tensor {:?} in {} is {}: memrel loads float weights ({}), \
                         not integer or quantized ones: export the checkpoint in float",
                        tensor.name,
                        file.display(),
                        tensor.dtype,
                        FLOAT_DTYPES.join(", ")
                    );
                }
                shapes.insert(tensor.name, (tensor.shape, file.clone()));
            }
        }
        let tensor_prefix = architecture.tensor_prefix(&names).with_context(|| {
            format!(
                "{} does not hold the tensors a {} model needs",
                dir.display(),
                architecture.as_str()
            )
        })?;
        let embedding = format!("{tensor_prefix}{}", architecture.embedding_tensor());
        let want = [sizes.vocab_size, sizes.hidden_size];
        let embedding_shape = shapes.get(&embedding).map(|(shape, _)| shape.clone());
        if embedding_shape.as_deref() != Some(&want[..]) {
            bail!(
                "{} says vocab_size × hidden_size = {} × {}, but tensor {embedding:?} has shape {:?} \
                 (expected {want:?}): the config and the weights are not of one model",
                config_path.display(),
                want[0],
                want[1],
                embedding_shape.unwrap_or_default()
            );
        }
        let model = ModelDir {
            dir: dir.to_path_buf(),
            architecture,
            files,
            tensor_bytes,
            parameters,
            tensor_count: names.len(),
            vocab_size: sizes.vocab_size as usize,
            tensor_prefix,
            format: WeightFormat::Safetensors,
        };
        super::fit::check(
            &config_path,
            architecture,
            &typed,
            &model.tensor_prefix,
            &shapes,
        )?;
        model.fits(typed, shapes)?;
        Ok(model)
    }

    /// Runs the loader over the headers alone: every tensor it asks for must
    /// be there with the shape the config implies. Costs no weight memory
    /// (each stand-in is one zero, broadcast).
    fn fits(
        &self,
        typed: config::Typed,
        shapes: std::collections::HashMap<String, (Vec<u64>, PathBuf)>,
    ) -> Result<()> {
        let tensors = shapes
            .into_iter()
            .map(|(name, (shape, file))| {
                let dims = shape.iter().map(|&d| d as usize).collect();
                (name, (dims, file))
            })
            .collect();
        let backend = Box::new(ShapesOnly { tensors });
        let device = candle_core::Device::Cpu;
        self.build(typed, backend, candle_core::DType::F32, &device)
            .map(drop)
            .with_context(|| {
                format!(
                    "{} does not fit its config.json as a {} model",
                    self.dir.display(),
                    self.architecture.as_str()
                )
            })
    }
}

/// `model.safetensors`, or the shards named by `model.safetensors.index.json`.
fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index_path = dir.join("model.safetensors.index.json");
    if index_path.is_file() {
        let index: Value = serde_json::from_str(
            &std::fs::read_to_string(&index_path)
                .with_context(|| format!("cannot read {}", index_path.display()))?,
        )
        .with_context(|| format!("{} is not valid JSON", index_path.display()))?;
        let map = index["weight_map"]
            .as_object()
            .with_context(|| format!("{} has no weight_map", index_path.display()))?;
        let shards: BTreeSet<&str> = map.values().filter_map(Value::as_str).collect();
        for shard in &shards {
            crate::fsutil::check_name("shard", shard).with_context(|| {
                format!(
                    "{} names a shard outside its directory",
                    index_path.display()
                )
            })?;
        }
        let files: Vec<PathBuf> = shards.into_iter().map(|s| dir.join(s)).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            bail!(
                "{} names shard {}, which is missing",
                index_path.display(),
                missing.display()
            );
        }
        return Ok(files);
    }
    bail!(
        "{} has no model.safetensors (nor model.safetensors.index.json); memrel loads safetensors only: convert pytorch_model.bin first",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{preset, synth};

    /// A qwen2-tiny directory whose tensors are split over two shards by an index.
    fn sharded(shard_names: [&str; 2]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        synth::write_model_dir(preset::lookup("qwen2-tiny").unwrap(), tmp.path()).unwrap();
        let whole = tmp.path().join("model.safetensors");
        for shard in shard_names {
            if let Some(parent) = tmp.path().join(shard).parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::copy(&whole, tmp.path().join(shard)).unwrap();
        }
        std::fs::remove_file(&whole).unwrap();
        let index = serde_json::json!({"weight_map": {"a": shard_names[0], "b": shard_names[1]}});
        std::fs::write(
            tmp.path().join("model.safetensors.index.json"),
            index.to_string(),
        )
        .unwrap();
        tmp
    }

    #[test]
    fn a_shard_name_outside_the_directory_is_refused() {
        for bad in ["../outside.safetensors", "/etc/passwd", "sub/../../x"] {
            let dir = sharded(["model-1.safetensors", "model-1.safetensors"]);
            let index = serde_json::json!({"weight_map": {"a": "model-1.safetensors", "b": bad}});
            std::fs::write(
                dir.path().join("model.safetensors.index.json"),
                index.to_string(),
            )
            .unwrap();
            let err = format!("{:#}", ModelDir::inspect(dir.path()).unwrap_err());
            assert!(
                err.contains("names a shard outside its directory"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_tensor_in_two_shards_is_refused() {
        let dir = sharded(["model-1.safetensors", "model-2.safetensors"]);
        let err = format!("{:#}", ModelDir::inspect(dir.path()).unwrap_err());
        assert!(err.contains("is in two shards"), "{err}");
    }
}
