//! VarBuilder backends memrel puts between candle-transformers' loaders and
//! the safetensors files: one that maps the names a loader asks for onto the
//! names a checkpoint really holds (base models without `model.`, tied heads
//! without `lm_head`), one that remembers every tensor handed out, and one
//! that only checks names and shapes against the headers, so the parent can
//! run a loader's constructor without reading a byte of weights.
//!
//! They change names and record handles; they never change a tensor's values.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;

/// The name a decoder loader asks for (`model.layers.0…`, `lm_head.weight`)
/// as the checkpoint spells it. `prefix` is what stands before
/// `embed_tokens.weight` in the file (`model.`, or none for a base model);
/// `has` says whether the file holds a name.
pub fn decoder_name(prefix: &str, name: &str, has: impl Fn(&str) -> bool) -> String {
    if let Some(rest) = name.strip_prefix("model.") {
        return format!("{prefix}{rest}");
    }
    if let Some(rest) = name.strip_prefix("lm_head.") {
        let head = head_name(prefix, rest);
        // A tied head (or a base model, which has none) is the embedding.
        return if has(&head) {
            head
        } else {
            format!("{prefix}embed_tokens.{rest}")
        };
    }
    name.to_string()
}

/// The checkpoint's name for the head's `part` (`weight`): `lm_head.weight`
/// beside the `model.` that `prefix` ends in.
pub fn head_name(prefix: &str, part: &str) -> String {
    let outer = prefix.strip_suffix("model.").unwrap_or(prefix);
    format!("{outer}lm_head.{part}")
}

/// Serves a decoder loader's names from a checkpoint's (see [`decoder_name`]).
pub struct Renamed<'a> {
    pub inner: Box<dyn SimpleBackend + 'a>,
    pub prefix: String,
}

impl Renamed<'_> {
    fn real(&self, name: &str) -> String {
        decoder_name(&self.prefix, name, |n| self.inner.contains_tensor(n))
    }
}

impl SimpleBackend for Renamed<'_> {
    fn get(
        &self,
        s: Shape,
        name: &str,
        h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        self.inner.get(s, &self.real(name), h, dtype, dev)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.inner.get_unchecked(&self.real(name), dtype, dev)
    }

    /// True for `lm_head.…` only where the file holds a head: a loader that
    /// asks (qwen2's) then shares the embedding rather than loading it twice.
    fn contains_tensor(&self, name: &str) -> bool {
        match name.strip_prefix("lm_head.") {
            Some(part) => self.inner.contains_tensor(&head_name(&self.prefix, part)),
            None => self.inner.contains_tensor(&self.real(name)),
        }
    }
}

/// A VarBuilder backend that remembers every tensor it returns. candle's models
/// keep their tensors private, so this is the only way to reach all weights.
pub struct Recording<'a> {
    pub inner: Box<dyn SimpleBackend + 'a>,
    /// Every tensor handed out, with the name it was asked for by.
    pub seen: Arc<Mutex<Vec<(String, Tensor)>>>,
}

impl Recording<'_> {
    fn keep(&self, name: &str, tensor: candle_core::Result<Tensor>) -> candle_core::Result<Tensor> {
        let tensor = tensor?;
        match self.seen.lock() {
            Ok(mut seen) => seen.push((name.to_string(), tensor.clone())),
            Err(_) => candle_core::bail!("the weight recorder's lock is poisoned"),
        }
        Ok(tensor)
    }
}

impl SimpleBackend for Recording<'_> {
    fn get(
        &self,
        s: Shape,
        name: &str,
        h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        self.keep(name, self.inner.get(s, name, h, dtype, dev))
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.keep(name, self.inner.get_unchecked(name, dtype, dev))
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
}

/// Names and shapes from the safetensors headers, and the file each is in:
/// a loader built on this gets zero-cost stand-ins (one zero broadcast to the
/// shape), and a tensor that is missing or of another shape than the config
/// implies is an error naming it, its file, its shape and the expected one.
pub struct ShapesOnly {
    pub tensors: HashMap<String, (Vec<usize>, PathBuf)>,
}

impl SimpleBackend for ShapesOnly {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let Some((shape, file)) = self.tensors.get(name) else {
            candle_core::bail!(
                "the checkpoint has no tensor named {name} (config.json implies shape {:?}), \
                 which the loader needs",
                s.dims()
            )
        };
        if shape.as_slice() != s.dims() {
            candle_core::bail!(
                "tensor {name} in {} has shape {shape:?}, but config.json implies {:?}: \
                 the config and the weights are not of one model",
                file.display(),
                s.dims()
            )
        }
        Tensor::zeros((), dtype, dev)?.broadcast_as(s)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        match self.tensors.get(name) {
            Some((shape, _)) => Tensor::zeros((), dtype, dev)?.broadcast_as(shape.as_slice()),
            None => candle_core::bail!("the checkpoint has no tensor named {name}"),
        }
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_names_map_onto_base_and_causal_checkpoints() {
        let none = |_: &str| false;
        let head = |n: &str| n == "lm_head.weight";
        assert_eq!(decoder_name("", "model.layers.0.x", none), "layers.0.x");
        assert_eq!(
            decoder_name("model.", "model.norm.weight", none),
            "model.norm.weight"
        );
        assert_eq!(
            decoder_name("model.", "lm_head.weight", head),
            "lm_head.weight"
        );
        assert_eq!(
            decoder_name("model.", "lm_head.weight", none),
            "model.embed_tokens.weight"
        );
        assert_eq!(
            decoder_name("", "lm_head.weight", none),
            "embed_tokens.weight"
        );
    }
}
