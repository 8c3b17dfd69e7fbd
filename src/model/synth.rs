//! Writes a synthetic model as a real HuggingFace-layout directory:
//! `config.json` + `model.safetensors` with deterministic seeded weights.
//!
//! Files are streamed tensor by tensor (a 416 MiB model never sits in memory
//! twice) into a temporary directory that is renamed into place, so two
//! processes generating the same preset at once cannot see half a model.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use super::preset::{Fill, Preset, TensorSpec, PRESET_FORMAT};

/// The cache directory for generated models: `$MEMREL_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/memrel`, else `~/.cache/memrel`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MEMREL_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("memrel");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("memrel"),
        None => std::env::temp_dir().join("memrel-cache"),
    }
}

/// Returns the preset's directory under `cache`, writing it first if missing.
pub fn ensure(preset: &Preset, cache: &Path) -> Result<PathBuf> {
    let dir = cache
        .join("models")
        .join(format!("{}-v{PRESET_FORMAT}", preset.name));
    if dir.join("model.safetensors").is_file() && dir.join("config.json").is_file() {
        return Ok(dir);
    }
    let parent = cache.join("models");
    std::fs::create_dir_all(&parent).with_context(|| {
        format!(
            "cannot create the model cache {}: set MEMREL_CACHE_DIR to a writable directory",
            parent.display()
        )
    })?;
    let tmp = parent.join(format!(
        ".{}-tmp-{}-{:?}",
        preset.name,
        std::process::id(),
        std::thread::current().id()
    ));
    write_model_dir(preset, &tmp)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another process finished first: theirs is identical.
        Err(_) if dir.join("model.safetensors").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(e).with_context(|| format!("cannot move the model into {}", dir.display())),
    }
}

/// Writes `config.json` and `model.safetensors` for `preset` into `dir`.
pub fn write_model_dir(preset: &Preset, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = serde_json::to_string_pretty(&preset.config_json())?;
    std::fs::write(dir.join("config.json"), config + "\n")
        .with_context(|| format!("cannot write {}", dir.join("config.json").display()))?;
    let mut metadata = Map::new();
    metadata.insert("format".into(), json!("pt"));
    metadata.insert("memrel_preset".into(), json!(preset.name));
    write_safetensors(&dir.join("model.safetensors"), &preset.tensors(), metadata)
}

/// Streams f32 tensors into a safetensors file. The header is padded to a
/// multiple of 8 so every tensor is aligned and the loader never re-copies.
pub fn write_safetensors(
    path: &Path,
    tensors: &[TensorSpec],
    metadata: Map<String, Value>,
) -> Result<()> {
    let mut header = Map::new();
    header.insert("__metadata__".into(), Value::Object(metadata));
    let mut offset = 0u64;
    for t in tensors {
        let bytes = t.shape.iter().product::<usize>() as u64 * 4;
        header.insert(
            t.name.clone(),
            json!({"dtype": "F32", "shape": t.shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut header_bytes = serde_json::to_vec(&Value::Object(header))?;
    while header_bytes.len() % 8 != 0 {
        header_bytes.push(b' ');
    }
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(&(header_bytes.len() as u64).to_le_bytes())?;
    out.write_all(&header_bytes)?;
    let mut chunk: Vec<u8> = Vec::with_capacity(1 << 18);
    for t in tensors {
        let count = t.shape.iter().product::<usize>();
        let mut rng = SplitMix64::new(crate::fsutil::fnv1a64(t.name.bytes()));
        let mut written = 0;
        while written < count {
            let n = (count - written).min(1 << 16);
            chunk.clear();
            for _ in 0..n {
                let v: f32 = match t.fill {
                    Fill::Noise => rng.next_unit() * 0.05,
                    Fill::Ones => 1.0,
                    Fill::Zeros => 0.0,
                };
                chunk.extend_from_slice(&v.to_le_bytes());
            }
            out.write_all(&chunk)
                .with_context(|| format!("cannot write {}", path.display()))?;
            written += n;
        }
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// A tiny, fast, deterministic generator (Steele et al.'s SplitMix64).
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn next_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::preset::lookup;

    #[test]
    fn same_preset_gives_identical_bytes() {
        let preset = lookup("qwen2-tiny").unwrap();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        write_model_dir(preset, a.path()).unwrap();
        write_model_dir(preset, b.path()).unwrap();
        let fa = std::fs::read(a.path().join("model.safetensors")).unwrap();
        let fb = std::fs::read(b.path().join("model.safetensors")).unwrap();
        assert_eq!(fa, fb);
        let st = safetensors::SafeTensors::deserialize(&fa).unwrap();
        assert_eq!(st.len(), preset.tensors().len());
    }
}
