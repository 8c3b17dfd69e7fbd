//! `memrel model gen` and `memrel model info`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use super::ExitStatus;
use crate::cli::ModelCommand;
use crate::model::{preset, synth, ModelDir};
use crate::textutil::MIB;

/// `memrel model gen` or `memrel model info`, its one line or block printed to `out`.
pub fn run(command: &ModelCommand, out: &mut dyn Write) -> Result<ExitStatus> {
    let text = match command {
        ModelCommand::Gen { preset, dir } => gen(preset, dir)?,
        ModelCommand::Info { dir } => info(dir)?,
    };
    writeln!(out, "{text}")?;
    Ok(ExitStatus::Success)
}

fn gen(preset_name: &str, dir: &Path) -> Result<String> {
    let preset = preset::lookup(preset_name)?;
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

fn info(dir: &Path) -> Result<String> {
    let m = ModelDir::inspect(dir)?;
    let files: Vec<String> = m.files.iter().map(|f| f.display().to_string()).collect();
    Ok(format!(
        "directory     {}\narchitecture  {}\ntensors       {}\nparameters    {}\ntensor bytes  {} ({:.1} MiB)\nname prefix   {}\nfiles         {}\nloadable      yes (candle-transformers {} loader)",
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
