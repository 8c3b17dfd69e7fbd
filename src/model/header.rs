//! Reads and checks the header of a safetensors file before anything trusts
//! it: a hostile or damaged file (a header length of 2^60, offsets past the end
//! of the file, a shape whose byte size overflows, a truncated file, two
//! tensors of one name) is refused here, in the parent, with a message naming
//! the file and the tensor, before a worker starts or anything large is
//! allocated.
//!
//! The rules are the `safetensors` crate's own (the one candle loads with):
//! a header of at most 100 000 000 bytes, tensors laid end to end from the
//! start of the data with no gap or overlap, ending exactly at the end of the
//! file. It is checked here by hand rather than with that crate because the
//! crate is not a dependency of the library (only candle's), it needs the
//! whole file mapped, and it keeps the last of two tensors of one name
//! silently (serde maps do) where this check names the duplicate.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The safetensors crate's `MAX_HEADER_SIZE`.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// One tensor as the header describes it, checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Bytes of data, `shape` product × the dtype's size.
    pub bytes: u64,
}

/// Reads the header of `path` and checks every tensor against the file's
/// length; the tensors come back in file order.
pub fn read_header(path: &Path) -> Result<Vec<TensorEntry>> {
    let shown = path.display();
    let mut file = File::open(path).with_context(|| format!("cannot open {shown}"))?;
    let file_bytes = file
        .metadata()
        .with_context(|| format!("cannot read the size of {shown}"))?
        .len();
    if file_bytes < 8 {
        bail!("{shown} is too short to be safetensors ({file_bytes} bytes): the file is truncated");
    }
    let mut len_bytes = [0u8; 8];
    file.read_exact(&mut len_bytes)
        .with_context(|| format!("cannot read {shown}"))?;
    let header_bytes = u64::from_le_bytes(len_bytes);
    if header_bytes > MAX_HEADER_BYTES {
        bail!(
            "{shown} declares a header of {header_bytes} bytes, more than safetensors allows \
             ({MAX_HEADER_BYTES}): the file is damaged or not safetensors"
        );
    }
    if header_bytes > file_bytes - 8 {
        bail!(
            "{shown} declares a header of {header_bytes} bytes but holds only {} after the length: \
             the file is truncated",
            file_bytes - 8
        );
    }
    // Bounded by the file's real length (checked above), so never more than is on disk.
    let mut header = Vec::new();
    file.take(header_bytes)
        .read_to_end(&mut header)
        .with_context(|| format!("cannot read the header of {shown}"))?;
    if header.len() as u64 != header_bytes {
        bail!("{shown} ends inside its header: the file is truncated");
    }
    let entries: Entries = serde_json::from_slice(&header)
        .with_context(|| format!("{shown} has a header that is not a JSON object"))?;
    let data_bytes = file_bytes - 8 - header_bytes;
    check_entries(entries.0, data_bytes)
        .with_context(|| format!("{shown} is not valid safetensors"))
}

/// Checks every entry and that the tensors tile the data exactly.
fn check_entries(entries: Vec<(String, Value)>, data_bytes: u64) -> Result<Vec<TensorEntry>> {
    let mut seen = HashSet::new();
    let mut tensors = Vec::new();
    for (name, entry) in entries {
        if !seen.insert(name.clone()) {
            bail!("the header names {name:?} twice");
        }
        if name == "__metadata__" {
            continue;
        }
        tensors.push(check_entry(&name, &entry, data_bytes)?);
    }
    tensors.sort_by_key(|(_, start)| *start);
    let mut end = 0;
    for (tensor, start) in &tensors {
        if *start != end {
            bail!(
                "tensor {:?} starts at byte {start} of the data, but the tensor before it ends at {end}: \
                 tensors must follow each other without gaps or overlaps",
                tensor.name
            );
        }
        end = start + tensor.bytes;
    }
    if end != data_bytes {
        bail!(
            "its tensors end at byte {end} of the data, but the file holds {data_bytes} bytes after the header"
        );
    }
    Ok(tensors.into_iter().map(|(t, _)| t).collect())
}

/// One tensor's dtype, shape and offsets, with its start offset.
fn check_entry(name: &str, entry: &Value, data_bytes: u64) -> Result<(TensorEntry, u64)> {
    let dtype = entry["dtype"]
        .as_str()
        .with_context(|| format!("tensor {name:?} has no dtype"))?;
    let bits = dtype_bits(dtype).with_context(|| {
        format!("tensor {name:?} has dtype {dtype:?}, which safetensors does not define")
    })?;
    let shape: Vec<u64> = entry["shape"]
        .as_array()
        .with_context(|| format!("tensor {name:?} has no shape"))?
        .iter()
        .map(Value::as_u64)
        .collect::<Option<_>>()
        .with_context(|| {
            format!(
                "tensor {name:?} has shape {}: dimensions must be integers from 0",
                entry["shape"]
            )
        })?;
    let total_bits = shape
        .iter()
        .try_fold(1u64, |n, d| n.checked_mul(*d))
        .and_then(|n| n.checked_mul(bits))
        .with_context(|| {
            format!("tensor {name:?} of shape {shape:?} × {dtype} is larger than 2^64 bytes")
        })?;
    if total_bits % 8 != 0 {
        bail!("tensor {name:?} of shape {shape:?} × {dtype} is not a whole number of bytes");
    }
    let bytes = total_bits / 8;
    let offsets = match entry["data_offsets"].as_array().map(Vec::as_slice) {
        Some([start, end]) => start.as_u64().zip(end.as_u64()),
        _ => None,
    };
    let (start, end) = offsets.with_context(|| {
        format!(
            "tensor {name:?} has data_offsets {}: expected [start, end] in bytes",
            entry["data_offsets"]
        )
    })?;
    if end < start || end - start != bytes {
        bail!(
            "tensor {name:?} has data_offsets [{start}, {end}], but its shape {shape:?} × {dtype} needs {bytes} bytes"
        );
    }
    if end > data_bytes {
        bail!(
            "tensor {name:?} ends at byte {end} of the data, past the end of the file \
             ({data_bytes} bytes after the header): the file is truncated"
        );
    }
    let tensor = TensorEntry {
        name: name.to_string(),
        dtype: dtype.to_string(),
        shape,
        bytes,
    };
    Ok((tensor, start))
}

/// Bits per element of the dtypes the safetensors format defines.
fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E3M2" | "F6_E2M3" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// A JSON object's entries in order, duplicates kept (a `serde_json::Map`
/// would keep only the last of two equal keys).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        deserializer.deserialize_map(Object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A safetensors file from a header value and `data_bytes` of zeros.
    fn file_with(
        header: &str,
        declared_len: Option<u64>,
        data_bytes: usize,
    ) -> tempfile::NamedTempFile {
        let mut bytes = declared_len
            .unwrap_or(header.len() as u64)
            .to_le_bytes()
            .to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.resize(bytes.len() + data_bytes, 0);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        file
    }

    fn error_of(header: &str, declared_len: Option<u64>, data_bytes: usize) -> String {
        let file = file_with(header, declared_len, data_bytes);
        let err = format!("{:#}", read_header(file.path()).unwrap_err());
        assert!(err.contains(&file.path().display().to_string()), "{err}");
        err
    }

    #[test]
    fn a_valid_header_gives_every_tensor_in_file_order() {
        let header = json!({
            "__metadata__": {"format": "pt"},
            "b": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]},
            "a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
        })
        .to_string();
        let file = file_with(&header, None, 32);
        let tensors = read_header(file.path()).unwrap();
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(tensors[1].bytes, 24);
    }

    #[test]
    fn a_header_length_of_2_pow_60_is_refused_before_reading() {
        let err = error_of("{}", Some(1 << 60), 0);
        assert!(
            err.contains("declares a header of 1152921504606846976 bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_header_longer_than_the_file_is_truncation() {
        let err = error_of("{}", Some(50_000_000), 0);
        assert!(err.contains("holds only 2 after the length"), "{err}");
    }

    #[test]
    fn offsets_past_the_end_of_the_file_are_truncation() {
        let header =
            json!({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).to_string();
        let err = error_of(&header, None, 8);
        assert!(err.contains("past the end of the file"), "{err}");
    }

    #[test]
    fn a_shape_whose_bytes_overflow_is_refused() {
        let header = json!({"w": {"dtype": "F64", "shape": [1u64 << 32, 1u64 << 32], "data_offsets": [0, 8]}})
            .to_string();
        let err = error_of(&header, None, 8);
        assert!(err.contains("larger than 2^64 bytes"), "{err}");
    }

    #[test]
    fn offsets_that_disagree_with_the_shape_are_refused() {
        let header =
            json!({"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 8]}}).to_string();
        let err = error_of(&header, None, 8);
        assert!(err.contains("needs 4000 bytes"), "{err}");
    }

    #[test]
    fn duplicate_tensor_names_are_named() {
        let header = r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        let err = error_of(header, None, 8);
        assert!(err.contains("names \"w\" twice"), "{err}");
    }

    #[test]
    fn overlapping_tensors_and_trailing_bytes_are_refused() {
        let overlap = json!({
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
        })
        .to_string();
        assert!(error_of(&overlap, None, 12).contains("without gaps or overlaps"));
        let short =
            json!({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).to_string();
        assert!(error_of(&short, None, 8).contains("holds 8 bytes after the header"));
    }

    #[test]
    fn negative_dimensions_unknown_dtypes_and_tiny_files_are_refused() {
        let negative =
            json!({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}).to_string();
        assert!(error_of(&negative, None, 4).contains("integers from 0"));
        let dtype = json!({"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}}).to_string();
        assert!(error_of(&dtype, None, 4).contains("\"Q4\""));
        let tiny = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tiny.path(), [1, 2, 3]).unwrap();
        let err = read_header(tiny.path()).unwrap_err().to_string();
        assert!(err.contains("too short"), "{err}");
    }
}
