//! The model files whose page cache is read for a program memrel did not
//! load the model for, as the user names them: `--model-files PATH` of
//! `exec`, `attach` and `drive`, `model_files = [...]` of a program's
//! scenario. A program's or a server's files are not memrel's to guess (a
//! server may close them once loaded), so their page cache is read only
//! where they are named.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The file names a directory's weight files end with.
const WEIGHT_SUFFIXES: &[&str] = &[".safetensors", ".gguf", ".bin", ".pt", ".pth", ".onnx"];

/// Each path as a file; a directory as its weight files (sorted). A path
/// that is not there, or a directory with no weight file, is an error naming
/// the flag and the fix.
pub fn model_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    model_files_named(paths, "--model-files")
}

/// [`model_files`], its errors naming `named` (the flag or the key).
pub fn model_files_named(paths: &[PathBuf], named: &str) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = weights_in(path, named)?;
            if found.is_empty() {
                bail!(
                    "{named} {}: a directory with no weight file ({}): name the files, or the directory that holds them",
                    path.display(),
                    WEIGHT_SUFFIXES.join(", ")
                );
            }
            files.append(&mut found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            bail!(
                "{named} {}: no such file or directory: name the model's weight files or their directory",
                path.display()
            );
        }
    }
    Ok(files)
}

fn weights_in(dir: &Path, named: &str) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("{named} {}: cannot be read", dir.display()))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| WEIGHT_SUFFIXES.iter().any(|s| n.ends_with(s)))
        })
        .collect();
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_its_weight_files_and_a_missing_path_is_named() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for name in ["b.safetensors", "a.gguf", "config.json"] {
            std::fs::write(tmp.path().join(name), b"x").expect("write");
        }
        let files = model_files(&[tmp.path().to_path_buf()]).expect("files");
        assert_eq!(
            files,
            [tmp.path().join("a.gguf"), tmp.path().join("b.safetensors")]
        );
        let missing = tmp.path().join("nope");
        let err = model_files(&[missing]).expect_err("missing").to_string();
        assert!(
            err.starts_with("--model-files ") && err.contains("no such file"),
            "{err}"
        );
        let empty = tempfile::tempdir().expect("tempdir");
        let err = model_files(&[empty.path().to_path_buf()])
            .expect_err("empty")
            .to_string();
        assert!(err.contains("no weight file"), "{err}");
    }
}
