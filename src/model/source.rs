//! Turns a scenario's model source into a local directory: a synthetic preset
//! (written once into the cache), a user's directory, or a hub repository
//! (fetched by `hub`).
//!
//! Runs in the parent, before any worker starts, so downloads and generation
//! never show up in a measurement.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::inspect::ModelDir;
use super::spec::ModelSource;
use super::{preset, synth};

/// Resolves and inspects a model; `base` is the directory relative paths start from.
pub fn resolve(source: &ModelSource, base: &Path, cache: &Path) -> Result<ModelDir> {
    let dir = match source {
        ModelSource::Preset(name) => synth::ensure(preset::lookup(name)?, cache)?,
        ModelSource::Path(path) => {
            let p = PathBuf::from(path);
            if p.is_absolute() {
                p
            } else {
                base.join(p)
            }
        }
        ModelSource::Hub { repo, revision } => super::hub::fetch(repo, revision)?,
        ModelSource::Fake(_) => bail!("a fake model has no files: the fake worker makes its bytes"),
    };
    ModelDir::inspect(&dir)
}
