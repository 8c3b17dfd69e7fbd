//! Reads and checks a GGUF file's header (the format llama.cpp and Ollama
//! keep models in) before anything trusts it, and says whether memrel can
//! load it through candle's quantized llama loader.
//!
//! It exists because candle's own reader (`gguf_file::Content::read`) answers
//! a damaged file with a bare I/O error ("failed to fill whole buffer") and
//! no offset, and only notices a tensor past the end of the file when the
//! worker reads that tensor. Here every field is read with its byte offset
//! known, so a wrong magic, a truncated header or a tensor whose data runs
//! past the end of the file is refused in the parent, naming the file and
//! the offset. It reads the header only (a few KiB for a tiny model, the
//! vocabulary for a real one), never the tensor data, and allocates nothing
//! the file's own length does not bound.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::arch::Architecture;
use super::inspect::{ModelDir, WeightFormat};

/// `GGUF` as the first four bytes of the file.
const MAGIC: [u8; 4] = *b"GGUF";
/// candle's limits on what a header may declare (its `GGUF_MAX_*`).
const MAX_TENSOR_DIMS: u32 = 4;
const MAX_VALUE_DEPTH: usize = 64;
/// The alignment of the tensor data when `general.alignment` does not say.
const DEFAULT_ALIGNMENT: u64 = 32;

/// The metadata keys candle's `quantized_llama::ModelWeights::from_gguf` reads without a default.
pub const LLAMA_KEYS: &[&str] = &[
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.block_count",
    "llama.embedding_length",
    "llama.rope.dimension_count",
    "llama.attention.layer_norm_rms_epsilon",
];
/// The tensors of each block the loader asks for (`blk.N.<name>.weight`).
pub const BLOCK_TENSORS: &[&str] = &[
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "attn_norm",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
    "ffn_norm",
];

/// A metadata value, kept where memrel shows or uses it (scalars, strings),
/// and only counted where it does not (arrays: a vocabulary of 150 000 strings).
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    Int(i128),
    Float(f64),
    Bool(bool),
    Text(String),
    Array(u64),
}

impl MetaValue {
    fn as_u64(&self) -> Option<u64> {
        match self {
            MetaValue::Int(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
}

/// One tensor as the header describes it, checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensor {
    pub name: String,
    /// Dimensions in candle's order (outermost first; the file stores them innermost first).
    pub shape: Vec<u64>,
    /// The ggml type's name (`F32`, `Q8_0`, …).
    pub type_name: &'static str,
    /// Where its data starts in the file, and how many bytes it has.
    pub start_byte: u64,
    pub bytes: u64,
}

/// A GGUF file's header, every tensor inside the file.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub path: PathBuf,
    pub version: u32,
    pub file_bytes: u64,
    pub metadata: BTreeMap<String, MetaValue>,
    pub tensors: Vec<GgufTensor>,
    /// Where the tensor data begins (the header's end, aligned).
    pub data_offset_bytes: u64,
}

/// The ggml types by their number in the file: name, elements per block, bytes per block.
fn ggml_type(id: u32) -> Option<(&'static str, u64, u64)> {
    Some(match id {
        0 => ("F32", 1, 4),
        1 => ("F16", 1, 2),
        2 => ("Q4_0", 32, 18),
        3 => ("Q4_1", 32, 20),
        6 => ("Q5_0", 32, 22),
        7 => ("Q5_1", 32, 24),
        8 => ("Q8_0", 32, 34),
        9 => ("Q8_1", 32, 36),
        10 => ("Q2_K", 256, 84),
        11 => ("Q3_K", 256, 110),
        12 => ("Q4_K", 256, 144),
        13 => ("Q5_K", 256, 176),
        14 => ("Q6_K", 256, 210),
        15 => ("Q8_K", 256, 292),
        30 => ("BF16", 1, 2),
        _ => return None,
    })
}

/// Reads the header, counting every byte so an error can name its offset.
struct Reader<'a> {
    inner: BufReader<File>,
    path: &'a Path,
    offset: u64,
    file_bytes: u64,
    /// 4 in version 1 (u32 lengths), 8 after.
    length_bytes: u64,
}

impl Reader<'_> {
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        let left = self.file_bytes.saturating_sub(self.offset);
        if n > left {
            bail!(
                "{} is truncated at byte {}: {what} needs {n} bytes there, the file has {left} \
                 left (it is {} bytes): download or generate the file again",
                self.path.display(),
                self.offset,
                self.file_bytes
            );
        }
        let mut buf = vec![0u8; n as usize];
        self.inner.read_exact(&mut buf).with_context(|| {
            format!(
                "cannot read {} at byte {}",
                self.path.display(),
                self.offset
            )
        })?;
        self.offset += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let v = self.bytes(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&v);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn length(&mut self, what: &str) -> Result<u64> {
        if self.length_bytes == 4 {
            Ok(u64::from(self.u32(what)?))
        } else {
            self.u64(what)
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let at = self.offset;
        let len = self.length(what)?;
        let bytes = self.bytes(len, what)?;
        String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "{}: {what} at byte {at} is not UTF-8: the file is damaged",
                self.path.display()
            )
        })
    }

    fn value(&mut self, kind: u32, key: &str, depth: usize) -> Result<MetaValue> {
        let what = format!("the value of {key:?}");
        Ok(match kind {
            0 => MetaValue::Int(self.array::<1>(&what)?[0].into()),
            1 => MetaValue::Int((self.array::<1>(&what)?[0] as i8).into()),
            2 => MetaValue::Int(u16::from_le_bytes(self.array(&what)?).into()),
            3 => MetaValue::Int(i16::from_le_bytes(self.array(&what)?).into()),
            4 => MetaValue::Int(u32::from_le_bytes(self.array(&what)?).into()),
            5 => MetaValue::Int(i32::from_le_bytes(self.array(&what)?).into()),
            6 => MetaValue::Float(f32::from_le_bytes(self.array(&what)?).into()),
            7 => MetaValue::Bool(self.array::<1>(&what)?[0] != 0),
            8 => MetaValue::Text(self.string(&what)?),
            9 => {
                if depth >= MAX_VALUE_DEPTH {
                    bail!(
                        "{}: {what} nests arrays deeper than {MAX_VALUE_DEPTH} at byte {}: the file is damaged",
                        self.path.display(),
                        self.offset
                    );
                }
                let inner = self.u32(&what)?;
                let count = self.length(&what)?;
                for _ in 0..count {
                    self.value(inner, key, depth + 1)?;
                }
                MetaValue::Array(count)
            }
            10 => MetaValue::Int(u64::from_le_bytes(self.array(&what)?).into()),
            11 => MetaValue::Int(i64::from_le_bytes(self.array(&what)?).into()),
            12 => MetaValue::Float(f64::from_le_bytes(self.array(&what)?)),
            other => bail!(
                "{}: {what} has unknown type {other} at byte {}: the file is damaged or of a newer GGUF",
                self.path.display(),
                self.offset - 4
            ),
        })
    }
}

/// Whether `path` starts like a GGUF file (its name ends in `.gguf`, or its first bytes are `GGUF`).
pub fn looks_like_gguf(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        return true;
    }
    let mut magic = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == MAGIC)
}

/// Reads the header of `path` and checks every tensor against the file's length.
pub fn read_header(path: &Path) -> Result<GgufHeader> {
    let shown = path.display();
    let file = File::open(path).with_context(|| format!("cannot open {shown}"))?;
    let file_bytes = file
        .metadata()
        .with_context(|| format!("cannot read the size of {shown}"))?
        .len();
    let mut r = Reader {
        inner: BufReader::new(file),
        path,
        offset: 0,
        file_bytes,
        length_bytes: 8,
    };
    let counts = r.preamble()?;
    let mut metadata = BTreeMap::new();
    for _ in 0..counts.metadata {
        let key = r.string("a metadata key")?;
        let kind = r.u32(&format!("the type of {key:?}"))?;
        let value = r.value(kind, &key, 0)?;
        metadata.insert(key, value);
    }
    let raw = (0..counts.tensors)
        .map(|_| r.tensor_info())
        .collect::<Result<Vec<_>>>()?;
    let alignment = match metadata
        .get("general.alignment")
        .and_then(MetaValue::as_u64)
    {
        Some(0) | None => DEFAULT_ALIGNMENT,
        Some(a) => a,
    };
    let data_offset_bytes = r.offset.div_ceil(alignment).saturating_mul(alignment);
    let tensors = raw
        .into_iter()
        .map(|t| t.placed(data_offset_bytes, file_bytes, path))
        .collect::<Result<Vec<_>>>()?;
    Ok(GgufHeader {
        path: path.to_path_buf(),
        version: counts.version,
        file_bytes,
        metadata,
        tensors,
        data_offset_bytes,
    })
}

/// What a GGUF file's first bytes say: its version and how many entries follow.
struct Preamble {
    version: u32,
    tensors: u64,
    metadata: u64,
}

/// A tensor as its header entry says, before it is placed in the file.
struct RawTensor {
    name: String,
    shape: Vec<u64>,
    /// Its ggml type: name, elements a block, bytes a block.
    kind: (&'static str, u64, u64),
    /// From the start of the tensor data.
    offset: u64,
}

impl RawTensor {
    /// The tensor where it lies in the file (its data from
    /// `data_offset_bytes` on); `Err`: its shape is no whole number of
    /// blocks, or it runs past the end of the file.
    fn placed(self, data_offset_bytes: u64, file_bytes: u64, path: &Path) -> Result<GgufTensor> {
        let shown = path.display();
        let RawTensor {
            name,
            shape,
            kind: (type_name, block, block_bytes),
            offset,
        } = self;
        let elems = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|e| e % block == 0);
        let Some(elems) = elems else {
            bail!(
                "{shown}: tensor {name:?} has shape {shape:?}, not a whole number of {type_name} \
                 blocks of {block}: the file is damaged"
            );
        };
        let bytes = (elems / block).saturating_mul(block_bytes);
        let start = data_offset_bytes.saturating_add(offset);
        let end = start.saturating_add(bytes);
        if end > file_bytes {
            bail!(
                "{shown}: tensor {name:?} ({type_name}, {bytes} bytes) runs from byte {start} to \
                 byte {end}, past the end of the file at byte {file_bytes}: the file is truncated \
                 or damaged; download or generate it again"
            );
        }
        Ok(GgufTensor {
            name,
            shape,
            type_name,
            start_byte: start,
            bytes,
        })
    }
}

impl Reader<'_> {
    /// The magic, the version and the two counts, each checked (a count the
    /// file cannot hold is refused before anything is allocated for it).
    fn preamble(&mut self) -> Result<Preamble> {
        let path = self.path;
        let shown = path.display();
        let magic = self.array::<4>("the magic GGUF")?;
        if magic != MAGIC {
            bail!(
                "{shown} is not a GGUF file: byte 0 holds {:?} (hex {}), not the magic \"GGUF\": \
                 give a .gguf file (llama.cpp's format) or a model directory",
                String::from_utf8_lossy(&magic),
                magic.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
        let version = self.u32("the version")?;
        match version {
            1 => self.length_bytes = 4,
            2 | 3 => {}
            v => bail!(
                "{shown}: GGUF version {v} at byte 4 is not one memrel reads (1, 2 or 3): \
                 the file is damaged or of a newer GGUF"
            ),
        }
        let tensor_count = self.length("the tensor count")?;
        let metadata_count = self.length("the metadata count")?;
        // Each entry takes at least a length and a type.
        let min_bytes = metadata_count
            .saturating_mul(self.length_bytes + 5)
            .saturating_add(tensor_count.saturating_mul(self.length_bytes + 16));
        let file_bytes = self.file_bytes;
        if min_bytes > file_bytes.saturating_sub(self.offset) {
            bail!(
                "{shown} is truncated at byte {}: its header declares {tensor_count} tensors and \
                 {metadata_count} metadata entries, at least {min_bytes} bytes, but the file is \
                 {file_bytes} bytes: download or generate the file again",
                self.offset
            );
        }
        Ok(Preamble {
            version,
            tensors: tensor_count,
            metadata: metadata_count,
        })
    }

    /// One tensor's header entry: name, dimensions, shape, type and offset.
    fn tensor_info(&mut self) -> Result<RawTensor> {
        let path = self.path;
        let shown = path.display();
        let at = self.offset;
        let name = self.string("a tensor name")?;
        let dims = self.u32(&format!("the dimensions of tensor {name:?}"))?;
        if dims > MAX_TENSOR_DIMS {
            bail!(
                "{shown}: tensor {name:?} at byte {at} has {dims} dimensions, at most \
                 {MAX_TENSOR_DIMS} are allowed: the file is damaged"
            );
        }
        let mut shape = Vec::new();
        for _ in 0..dims {
            shape.push(self.length(&format!("the shape of tensor {name:?}"))?);
        }
        shape.reverse();
        let type_at = self.offset;
        let type_id = self.u32(&format!("the type of tensor {name:?}"))?;
        let offset = self.u64(&format!("the offset of tensor {name:?}"))?;
        let Some(kind) = ggml_type(type_id) else {
            bail!(
                "{shown}: tensor {name:?} has unknown ggml type {type_id} at byte {type_at}: \
                 the file is damaged or uses a type candle does not load"
            );
        };
        Ok(RawTensor {
            name,
            shape,
            kind,
            offset,
        })
    }
}

impl GgufHeader {
    /// `general.architecture`, if the file says.
    pub fn architecture(&self) -> Option<&str> {
        match self.metadata.get("general.architecture") {
            Some(MetaValue::Text(a)) => Some(a),
            _ => None,
        }
    }

    /// The tensor types and how many tensors have each (`Q8_0 ×14, F32 ×5`).
    pub fn type_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for t in &self.tensors {
            *counts.entry(t.type_name).or_insert(0) += 1;
        }
        counts
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    pub fn parameters(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.shape.iter().product::<u64>())
            .sum()
    }

    fn tensor(&self, name: &str) -> Option<&GgufTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Checks that candle's quantized llama loader finds what it reads
    /// (llama metadata, every block's tensors), and returns the model as the
    /// worker loads it; errors say what is missing.
    pub fn loadable(&self) -> Result<ModelDir> {
        let shown = self.path.display();
        match self.architecture() {
            Some("llama") => {}
            Some(other) => bail!(
                "{shown} holds a {other:?} model: memrel loads GGUF files of the llama \
                 architecture (candle's quantized_llama); give a llama-family GGUF"
            ),
            None => bail!(
                "{shown} has no general.architecture: memrel loads GGUF files of the llama \
                 architecture; the file is damaged or not a model"
            ),
        }
        let int = |key: &str| -> Result<u64> {
            match self.metadata.get(key) {
                Some(MetaValue::Int(v)) => {
                    u64::try_from(*v).ok().filter(|v| *v > 0).with_context(|| {
                        format!("{shown}: metadata {key} is {v}, not a positive count")
                    })
                }
                Some(other) => bail!("{shown}: metadata {key} is {other:?}, not a number"),
                None => bail!(
                    "{shown} lacks the metadata key {key}, which candle's llama loader needs: \
                     the file is not a complete llama GGUF"
                ),
            }
        };
        for key in LLAMA_KEYS {
            if key.ends_with("epsilon") {
                if !matches!(self.metadata.get(*key), Some(MetaValue::Float(_))) {
                    bail!(
                        "{shown} lacks the metadata key {key} (a float), which candle's llama \
                         loader needs: the file is not a complete llama GGUF"
                    );
                }
            } else {
                int(key)?;
            }
        }
        if self
            .metadata
            .get("llama.expert_count")
            .and_then(MetaValue::as_u64)
            > Some(1)
        {
            bail!("{shown} is a mixture of experts: memrel loads dense llama GGUF files only");
        }
        let blocks = int("llama.block_count")?;
        let hidden = int("llama.embedding_length")?;
        let heads = int("llama.attention.head_count")?;
        let kv_heads = int("llama.attention.head_count_kv")?;
        if hidden % heads != 0 || heads % kv_heads != 0 {
            bail!(
                "{shown}: llama.embedding_length {hidden} with {heads} heads and {kv_heads} KV \
                 heads is not a llama model candle can build"
            );
        }
        let mut need = vec![
            "token_embd.weight".to_string(),
            "output_norm.weight".to_string(),
        ];
        for b in 0..blocks {
            need.extend(BLOCK_TENSORS.iter().map(|t| format!("blk.{b}.{t}.weight")));
        }
        for name in &need {
            if self.tensor(name).is_none() {
                bail!(
                    "{shown} lacks tensor {name:?}, which candle's llama loader reads: the file \
                     is not a complete llama GGUF of llama.block_count {blocks}"
                );
            }
        }
        let embedding = self.tensor("token_embd.weight").map(|t| t.shape.clone());
        let vocab = match embedding.as_deref() {
            Some([vocab, h]) if *h == hidden => *vocab,
            other => bail!(
                "{shown}: token_embd.weight has shape {:?}, not [vocabulary, {hidden}] \
                 (llama.embedding_length): the metadata and the weights are not of one model",
                other.unwrap_or_default()
            ),
        };
        Ok(ModelDir {
            dir: self.path.clone(),
            architecture: Architecture::Llama,
            files: vec![self.path.clone()],
            tensor_bytes: self.tensor_bytes(),
            parameters: self.parameters(),
            tensor_count: self.tensors.len(),
            vocab_size: usize::try_from(vocab).unwrap_or(usize::MAX),
            tensor_prefix: String::new(),
            format: WeightFormat::Gguf,
        })
    }

    /// How the worker loads it, in words (runs.json's `load`, `model info`).
    pub fn load_words(&self) -> String {
        let types: Vec<String> = self
            .type_counts()
            .iter()
            .map(|(t, n)| format!("{t} ×{n}"))
            .collect();
        format!(
            "gguf v{} ({}), read into memory: candle's gguf reader seeks to each tensor and \
             reads it into a buffer (no mmap), quantized types stay quantized",
            self.version,
            types.join(", ")
        )
    }
}

/// Inspects a GGUF file as a model the worker can load.
pub fn inspect(path: &Path) -> Result<ModelDir> {
    read_header(path)?.loadable()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(version: u32, tensors: u64, kvs: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(version.to_le_bytes());
        b.extend(tensors.to_le_bytes());
        b.extend(kvs.to_le_bytes());
        b
    }

    fn err_of(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).unwrap();
        format!("{:#}", read_header(&path).unwrap_err())
    }

    #[test]
    fn wrong_magic_names_byte_zero() {
        let err = err_of(b"GGUX\x03\0\0\0");
        assert!(err.contains("m.gguf is not a GGUF file: byte 0"), "{err}");
    }

    #[test]
    fn a_header_cut_short_names_the_offset() {
        let mut b = header_bytes(3, 0, 1);
        b.extend(100u64.to_le_bytes());
        b.extend(b"general");
        let err = err_of(&b);
        assert!(err.contains("truncated at byte 32"), "{err}");
    }

    #[test]
    fn counts_the_file_cannot_hold_are_refused_before_allocating() {
        let err = err_of(&header_bytes(3, u64::MAX, u64::MAX));
        assert!(err.contains("truncated at byte 24"), "{err}");
    }

    #[test]
    fn a_tensor_past_the_end_is_named() {
        let mut b = header_bytes(3, 1, 0);
        b.extend(1u64.to_le_bytes());
        b.push(b'w');
        b.extend(1u32.to_le_bytes());
        b.extend(64u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        let err = err_of(&b);
        assert!(
            err.contains("tensor \"w\" (F32, 256 bytes) runs from byte 64"),
            "{err}"
        );
        assert!(
            err.contains(&format!("end of the file at byte {}", b.len())),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let err = err_of(&header_bytes(9, 0, 0));
        assert!(
            err.contains("gguf version 9 at byte 4") || err.contains("GGUF version 9 at byte 4"),
            "{err}"
        );
    }
}
