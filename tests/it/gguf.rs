//! GGUF checkpoints (issue 38): `model gen --gguf` in f32 and a quantized
//! type, `model info` on a good file and on broken ones (wrong magic,
//! truncated, a tensor past the end of the file: exit 2, the file and the
//! offset named, never a panic), and `run --model FILE.gguf` on the CPU
//! through candle's quantized llama loader.

use std::path::{Path, PathBuf};

use crate::common::*;

fn gen_gguf(dir: &Path, preset: &str, kind: &str) -> PathBuf {
    let path = dir.join(format!("{preset}-{kind}.gguf"));
    let output = run_ok(
        memrel()
            .args(["model", "gen", preset, "--gguf", "--gguf-type", kind])
            .arg(&path),
    );
    let out = text(&output.stdout);
    assert!(
        out.starts_with(&format!("wrote {preset} as GGUF {kind} (")),
        "{out}"
    );
    path
}

fn info_ok(path: &Path) -> String {
    text(&run_ok(memrel().args(["model", "info"]).arg(path)).stdout)
}

/// `model info FILE` fails with exit 2; its stderr, checked for a panic.
fn info_err(path: &Path) -> String {
    let output = memrel()
        .args(["model", "info"])
        .arg(path)
        .output()
        .expect("memrel starts");
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    err
}

fn field<'a>(info: &'a str, name: &str) -> &'a str {
    info.lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {info}"))
        .trim()
}

#[test]
fn gen_writes_f32_and_q8_0_files_that_info_reads() {
    let work = tempfile::tempdir().unwrap();
    let f32_path = gen_gguf(work.path(), "llama-tiny", "f32");
    let q8_path = gen_gguf(work.path(), "llama-tiny", "q8_0");
    let f32_info = info_ok(&f32_path);
    let q8_info = info_ok(&q8_path);
    for info in [&f32_info, &q8_info] {
        assert_eq!(field(info, "format"), "gguf v2", "{info}");
        assert_eq!(field(info, "architecture"), "llama", "{info}");
        // token_embd, output_norm, 9 per block × 2 blocks (the head is tied).
        assert_eq!(field(info, "tensors"), "20", "{info}");
        assert_eq!(field(info, "metadata"), "11 entries", "{info}");
        assert!(
            field(info, "loadable").starts_with("yes (candle's quantized_llama loader"),
            "{info}"
        );
    }
    // Norms stay f32; the 2-D weights take the type asked for.
    assert_eq!(field(&f32_info, "tensor types"), "F32 ×20", "{f32_info}");
    assert_eq!(
        field(&q8_info, "tensor types"),
        "F32 ×5, Q8_0 ×15",
        "{q8_info}"
    );
    // Same parameters; q8_0 stores 34 bytes per 32 weights instead of 128.
    assert_eq!(
        field(&f32_info, "parameters"),
        field(&q8_info, "parameters")
    );
    let bytes = |info: &str| -> u64 {
        field(info, "tensor bytes")
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (f32_bytes, q8_bytes) = (bytes(&f32_info), bytes(&q8_info));
    assert!(
        q8_bytes * 3 < f32_bytes && q8_bytes * 4 > f32_bytes,
        "{q8_bytes} vs {f32_bytes}"
    );
    let file_bytes = std::fs::metadata(&q8_path).unwrap().len();
    assert_eq!(field(&q8_info, "file bytes"), file_bytes.to_string());
}

#[test]
fn gen_refuses_a_family_candle_cannot_load_from_gguf_and_an_unknown_type() {
    let work = tempfile::tempdir().unwrap();
    let output = memrel()
        .args(["model", "gen", "bert-tiny", "--gguf"])
        .arg(work.path().join("b.gguf"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("--gguf writes llama-family models"),
        "{}",
        streams(&output)
    );
    let output = memrel()
        .args([
            "model",
            "gen",
            "llama-tiny",
            "--gguf",
            "--gguf-type",
            "q3_x",
        ])
        .arg(work.path().join("l.gguf"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", streams(&output));
    assert!(
        stderr(&output).contains("--gguf-type q3_x is not a type memrel writes"),
        "{}",
        streams(&output)
    );
    assert!(!work.path().join("l.gguf").exists());
}

#[test]
fn info_refuses_a_wrong_magic_with_the_file_and_byte_0() {
    let work = tempfile::tempdir().unwrap();
    let good = gen_gguf(work.path(), "llama-tiny", "f32");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[..4].copy_from_slice(b"GGML");
    let bad = work.path().join("magic.gguf");
    std::fs::write(&bad, bytes).unwrap();
    let err = info_err(&bad);
    assert!(
        err.contains("is not a GGUF file: byte 0 holds \"GGML\""),
        "{err}"
    );
}

#[test]
fn info_refuses_a_truncated_header_with_the_offset() {
    let work = tempfile::tempdir().unwrap();
    let good = gen_gguf(work.path(), "llama-tiny", "q8_0");
    let bytes = std::fs::read(&good).unwrap();
    let bad = work.path().join("cut.gguf");
    // Inside the tensor descriptions (the header is 1664 bytes, the first 600
    // hold the counts and metadata): the field cut short is named with its offset.
    std::fs::write(&bad, &bytes[..800]).unwrap();
    let err = info_err(&bad);
    let at: u64 = err
        .split("is truncated at byte ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {err}"));
    assert!((600..800).contains(&at), "{err}");
    assert!(
        err.contains("the file has") && err.contains("(it is 800 bytes)"),
        "{err}"
    );
    // A header whose counts alone need more than the file holds.
    std::fs::write(&bad, &bytes[..40]).unwrap();
    let err = info_err(&bad);
    assert!(
        err.contains(
            "is truncated at byte 24: its header declares 20 tensors and 11 metadata entries"
        ),
        "{err}"
    );
}

#[test]
fn info_refuses_a_tensor_past_the_end_of_the_file() {
    let work = tempfile::tempdir().unwrap();
    let good = gen_gguf(work.path(), "llama-tiny", "q4_0");
    let bytes = std::fs::read(&good).unwrap();
    let bad = work.path().join("short.gguf");
    let kept = bytes.len() - 100;
    std::fs::write(&bad, &bytes[..kept]).unwrap();
    let err = info_err(&bad);
    assert!(err.contains("past the end of the file at byte "), "{err}");
    assert!(err.contains(&format!("at byte {kept}")), "{err}");
    assert!(err.contains("runs from byte "), "{err}");
}

#[test]
fn run_loads_a_gguf_file_reads_it_into_memory_and_releases() {
    let work = tempfile::tempdir().unwrap();
    let model = gen_gguf(work.path(), "llama-tiny", "q8_0");
    let out = work.path().join("out");
    let output = run_ok(
        memrel()
            .args(["run", "--model"])
            .arg(&model)
            .args([
                "--strategy",
                "drop,malloc-trim",
                "--cycles",
                "1",
                "--repeat",
                "1",
                "--out",
            ])
            .arg(&out),
    );
    let err = stderr(&output);
    assert!(
        err.contains("is gguf v2 (F32 ×5, Q8_0 ×15), read into memory"),
        "{err}"
    );
    let dir = only_results_dir(&out, "llama-tiny-q8_0.gguf");
    let runs = runs_json(&dir);
    let m = &runs["header"]["models"][0];
    assert_eq!(m["architecture"], "llama", "{m}");
    assert!(
        m["load"].as_str().unwrap().contains("read into memory"),
        "{m}"
    );
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "completed", "{run}");
}
