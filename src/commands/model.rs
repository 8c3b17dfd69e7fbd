//! `memrel model gen` and `memrel model info` (a model directory, or a GGUF file).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::ExitStatus;
use crate::cli::ModelCommand;
use crate::model::{gguf, gguf_gen, preset, synth, ModelDir};
use crate::textutil::MIB;

/// `memrel model gen` or `memrel model info`, its one line or block printed to `out`.
pub fn run(command: &ModelCommand, out: &mut dyn Write) -> Result<ExitStatus> {
    let text = match command {
        ModelCommand::Gen {
            preset,
            dir,
            force,
            gguf: true,
            gguf_type,
        } => gen_gguf(preset, gguf_type, dir, *force)?,
        ModelCommand::Gen {
            preset, dir, force, ..
        } => gen(preset, dir, *force)?,
        ModelCommand::Info { dir } if dir.is_file() => gguf_info(dir)?,
        ModelCommand::Info { dir } => info(dir)?,
    };
    writeln!(out, "{text}")?;
    Ok(ExitStatus::Success)
}

fn gen(preset_name: &str, dir: &Path, force: bool) -> Result<String> {
    let preset = preset::lookup(preset_name)?;
    if !force {
        refuse_files_in(dir)?;
    }
    synth::write_model_dir(preset, dir)
        .with_context(|| format!("cannot write preset {preset_name} into {}", dir.display()))?;
    let info = ModelDir::inspect(dir)?;
    Ok(format!(
        "wrote {} ({} tensors, {:.1} MiB) into {}",
        preset.name,
        info.tensor_count,
        info.tensor_bytes as f64 / MIB,
        dir.display()
    ))
}

/// `model gen --gguf`: one GGUF file at `path`, refused over an existing file unless `force`.
fn gen_gguf(preset_name: &str, type_name: &str, path: &Path, force: bool) -> Result<String> {
    let preset = preset::lookup(preset_name)?;
    if path.is_dir() {
        bail!(
            "{} is a directory: with --gguf give the file to write (e.g. {}/{}.gguf)",
            path.display(),
            path.display(),
            preset.name
        );
    }
    if path.exists() && !force {
        bail!(
            "{} already exists: memrel model gen --gguf would overwrite it; choose a new file \
             name, or pass --force",
            path.display()
        );
    }
    let tensors = gguf_gen::write(preset, type_name, path).with_context(|| {
        format!(
            "cannot write preset {preset_name} as GGUF into {}",
            path.display()
        )
    })?;
    let header = gguf::read_header(path)?;
    Ok(format!(
        "wrote {} as GGUF {type_name} ({tensors} tensors, {:.1} MiB of tensor data) into {}",
        preset.name,
        header.tensor_bytes() as f64 / MIB,
        path.display()
    ))
}

/// `model info FILE.gguf`: the header, checked against the file, and whether
/// candle's quantized llama loader can load it (exit 2 with the reason if not).
fn gguf_info(path: &Path) -> Result<String> {
    let h = gguf::read_header(path)?;
    let types: Vec<String> = h
        .type_counts()
        .iter()
        .map(|(t, n)| format!("{t} ×{n}"))
        .collect();
    let model = h.loadable()?;
    Ok(format!(
        "file          {}\nformat        gguf v{}\nfile bytes    {}\nmetadata      {} entries\narchitecture  {}\ntensors       {}\ntensor types  {}\nparameters    {}\ntensor bytes  {} ({:.1} MiB)\ndata offset   {}\nloadable      yes (candle's quantized_llama loader; {})",
        path.display(),
        h.version,
        h.file_bytes,
        h.metadata.len(),
        h.architecture().unwrap_or("(none)"),
        h.tensors.len(),
        types.join(", "),
        model.parameters,
        model.tensor_bytes,
        model.tensor_bytes as f64 / MIB,
        h.data_offset_bytes,
        "read into memory, not mapped",
    ))
}

/// `model gen` writes config.json and model.safetensors: over a real model
/// that would destroy it, so a directory holding anything is refused.
fn refuse_files_in(dir: &Path) -> Result<()> {
    let mut entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    if let Some(entry) = entries.next() {
        let name = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .file_name();
        bail!(
            "{} already holds files ({} among them): memrel model gen would overwrite its \
             config.json and model.safetensors; choose an empty or new directory, or pass --force",
            dir.display(),
            name.to_string_lossy()
        );
    }
    Ok(())
}

fn info(dir: &Path) -> Result<String> {
    let m = ModelDir::inspect(dir)?;
    let files: Vec<String> = m.files.iter().map(|f| f.display().to_string()).collect();
    Ok(format!(
        "directory     {}\narchitecture  {}\ntensors       {}\nparameters    {}\ntensor bytes  {} ({:.1} MiB)\nname prefix   {}\nfiles         {}\nloadable      yes (candle-transformers {} loader, run over the headers)",
        m.dir.display(),
        m.architecture.as_str(),
        m.tensor_count,
        m.parameters,
        m.tensor_bytes,
        m.tensor_bytes as f64 / MIB,
        if m.tensor_prefix.is_empty() { "(none)" } else { m.tensor_prefix.as_str() },
        files.join(", "),
        m.architecture.as_str()
    ))
}
