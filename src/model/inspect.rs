//! Reads what a HuggingFace-layout model directory holds, without loading it:
//! config.json, which safetensors files (single or sharded), how many tensor
//! bytes, the architecture, and the tensor-name prefix the loader must use.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::arch::Architecture;

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
}

impl ModelDir {
    /// Inspects `dir`; errors name the path and say what is missing.
    pub fn inspect(dir: &Path) -> Result<ModelDir> {
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
        let files = safetensors_files(dir)?;
        let mut tensor_bytes = 0;
        let mut parameters = 0;
        let mut names = BTreeSet::new();
        for file in &files {
            let header = read_header(file)?;
            for (name, entry) in header.iter() {
                if name == "__metadata__" {
                    continue;
                }
                let offsets = entry["data_offsets"].as_array().with_context(|| {
                    format!("{}: tensor {name} has no data_offsets", file.display())
                })?;
                let (start, end) = (
                    offsets.first().and_then(Value::as_u64).unwrap_or(0),
                    offsets.get(1).and_then(Value::as_u64).unwrap_or(0),
                );
                let count: u64 = entry["shape"]
                    .as_array()
                    .map(|s| s.iter().filter_map(Value::as_u64).product())
                    .unwrap_or(0);
                tensor_bytes += end.saturating_sub(start);
                parameters += count;
                names.insert(name.clone());
            }
        }
        let tensor_prefix = architecture.tensor_prefix(&names).with_context(|| {
            format!(
                "{} does not hold the tensors a {} model needs",
                dir.display(),
                architecture.as_str()
            )
        })?;
        Ok(ModelDir {
            dir: dir.to_path_buf(),
            architecture,
            files,
            tensor_bytes,
            parameters,
            tensor_count: names.len(),
            vocab_size: config["vocab_size"].as_u64().unwrap_or(2) as usize,
            tensor_prefix,
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

/// The JSON header of a safetensors file.
pub fn read_header(path: &Path) -> Result<serde_json::Map<String, Value>> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut len_bytes = [0u8; 8];
    file.read_exact(&mut len_bytes)
        .with_context(|| format!("{} is too short to be safetensors", path.display()))?;
    let len = u64::from_le_bytes(len_bytes);
    if len > 100 << 20 {
        bail!(
            "{} has an implausible header size ({len} bytes): not safetensors?",
            path.display()
        );
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header)
        .with_context(|| format!("{} ends inside its header", path.display()))?;
    let value: Value = serde_json::from_slice(&header)
        .with_context(|| format!("{} has a header that is not JSON", path.display()))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => bail!("{} has a header that is not a JSON object", path.display()),
    }
}
