//! Turns a scenario's model source into a local directory: a synthetic preset
//! (written once into the cache), a user's directory, or a hub repository
//! fetched through hf-hub (honouring `HF_HOME`, `HF_HUB_OFFLINE` and the cache).
//!
//! Runs in the parent, before any worker starts, so downloads and generation
//! never show up in a measurement.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hf_hub::{Repo, RepoType};

use super::inspect::ModelDir;
use super::{preset, synth};
use crate::scenario::ModelSource;

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
        ModelSource::Hub { repo, revision } => fetch_from_hub(repo, revision)?,
        ModelSource::Fake(_) => bail!("a fake model has no files: the fake worker makes its bytes"),
    };
    ModelDir::inspect(&dir)
}

fn hub_offline() -> bool {
    matches!(
        std::env::var("HF_HUB_OFFLINE").as_deref(),
        Ok("1") | Ok("true") | Ok("TRUE") | Ok("yes")
    )
}

/// Fetches config.json and the safetensors files of `repo` into the hub cache.
fn fetch_from_hub(repo_id: &str, revision: &str) -> Result<PathBuf> {
    let repo = Repo::with_revision(repo_id.to_string(), RepoType::Model, revision.to_string());
    let cache = hf_hub::Cache::from_env();
    let cached = cache.repo(repo.clone());
    let have = |file: &str| cached.get(file);
    if hub_offline() {
        let config = have("config.json").with_context(|| {
            format!(
                "hub model {repo_id}@{revision} is not in the local cache ({}) and HF_HUB_OFFLINE is set: \
                 unset HF_HUB_OFFLINE to download it, or point `path =` at a local copy",
                cache.path().display()
            )
        })?;
        let dir = config
            .parent()
            .map(Path::to_path_buf)
            .context("cached config.json has no parent directory")?;
        if have("model.safetensors").is_none() && have("model.safetensors.index.json").is_none() {
            bail!(
                "hub model {repo_id}@{revision} is cached without model.safetensors in {}: \
                 unset HF_HUB_OFFLINE to download it",
                dir.display()
            );
        }
        return Ok(dir);
    }
    let api = hf_hub::api::sync::ApiBuilder::from_env()
        .with_progress(false)
        .build()
        .context("cannot set up the hub client")?;
    let remote = api.repo(repo);
    let fetch = |file: &str| {
        remote.get(file).with_context(|| {
            format!(
                "cannot fetch {file} of hub model {repo_id}@{revision}: without a network, \
                 set HF_HUB_OFFLINE=1 to use the cache or point `path =` at a local copy"
            )
        })
    };
    let config = fetch("config.json")?;
    match remote.get("model.safetensors") {
        Ok(_) => {}
        Err(_) => {
            let index = fetch("model.safetensors.index.json")?;
            let text = std::fs::read_to_string(&index)?;
            let value: serde_json::Value = serde_json::from_str(&text)?;
            let mut shards: Vec<&str> = value["weight_map"]
                .as_object()
                .map(|m| m.values().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            shards.sort_unstable();
            shards.dedup();
            for shard in shards {
                // hf-hub writes each file under the cache's snapshot directory by this name.
                crate::fsutil::check_name("shard", shard).with_context(|| {
                    format!("{} names a shard outside its repository", index.display())
                })?;
                fetch(shard)?;
            }
        }
    }
    config
        .parent()
        .map(Path::to_path_buf)
        .context("downloaded config.json has no parent directory")
}
