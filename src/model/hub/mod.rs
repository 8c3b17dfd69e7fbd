//! The hub: a repository's config.json and safetensors weights fetched into
//! the hub cache through hf-hub's sync API, honouring `HF_HOME`,
//! `HF_ENDPOINT`, `HF_TOKEN` (or the cache's token file) and
//! `HF_HUB_OFFLINE`, with each download's progress on stderr.
//!
//! A model whose files are all in the cache is used without asking the hub
//! anything (as hf-hub's own `get` does). A download cut short resumes: hf-hub
//! keeps it as `blobs/<etag>.part` and asks for the rest (`Range: bytes=N-`).
//! The hub's refusals become errors that say what to check: a repository that
//! is not there (404), a gated one (401/403: accept the terms, set HF_TOKEN).
//!
//! Runs in the parent before any worker starts, so a download is never
//! measured. It must not read the model's contents (`inspect` does) or fall
//! back to anything the user did not ask for.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hf_hub::api::sync::{ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Cache, CacheRepo, Repo, RepoType};

mod errors;
mod progress;

use progress::Download;

const CONFIG: &str = "config.json";
const SINGLE: &str = "model.safetensors";
const INDEX: &str = "model.safetensors.index.json";
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Fetches (or finds in the cache) `repo_id` at `revision`; returns the
/// snapshot directory holding config.json and the weights.
pub fn fetch(repo_id: &str, revision: &str) -> Result<PathBuf> {
    let repo = Repo::with_revision(repo_id.to_string(), RepoType::Model, revision.to_string());
    let cache = Cache::from_env();
    let cached = cache.repo(repo.clone());
    if let Some(dir) = cached_model(&cached)? {
        return Ok(dir);
    }
    let hub = Hub {
        repo_id,
        revision,
        endpoint: std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.into()),
    };
    if offline() {
        bail!(
            "hub model {repo_id}@{revision} is not in the local cache ({}), or only in \
             part, and HF_HUB_OFFLINE is set: unset HF_HUB_OFFLINE to download it, or use a \
             local copy",
            cache.path().display()
        );
    }
    let token = std::env::var("HF_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| cache.token());
    let api = ApiBuilder::from_env()
        .with_token(token)
        .with_progress(false)
        .build()
        .context("cannot set up the hub client")?;
    let remote = api.repo(repo);
    let info = remote.info().map_err(|e| hub.explain(e, None))?;
    let listed: BTreeSet<&str> = info.siblings.iter().map(|s| s.rfilename.as_str()).collect();
    if !listed.contains(CONFIG) {
        bail!(
            "hub repository {repo_id}@{revision} has no {CONFIG}: memrel loads \
             HuggingFace-layout checkpoints (config.json + safetensors weights)"
        );
    }
    let snapshot = cache
        .path()
        .join(Repo::model(repo_id.to_string()).folder_name())
        .join("snapshots")
        .join(&info.sha);
    let config = hub.file(&remote, &snapshot, CONFIG)?;
    let dir = config
        .parent()
        .map(Path::to_path_buf)
        .context("downloaded config.json has no parent directory")?;
    let mut files = vec![CONFIG.to_string()];
    if listed.contains(SINGLE) {
        hub.file(&remote, &snapshot, SINGLE)?;
        files.push(SINGLE.into());
    } else if listed.contains(INDEX) {
        let index = hub.file(&remote, &snapshot, INDEX)?;
        files.push(INDEX.into());
        for shard in shards(&index)? {
            hub.file(&remote, &snapshot, &shard)?;
            files.push(shard);
        }
    } else {
        bail!(
            "hub repository {repo_id}@{revision} has no safetensors weights ({SINGLE} or \
             {INDEX}): memrel loads safetensors checkpoints only"
        );
    }
    // Every file must sit in one snapshot (a push during the download moves the commit).
    if let Some(missing) = files.iter().find(|f| !dir.join(f).exists()) {
        bail!(
            "hub repository {repo_id}@{revision} changed while downloading ({missing} is not in \
             {}): run again",
            dir.display()
        );
    }
    // The next run finds it all in the cache, asking nothing.
    if let Some(commit) = dir.file_name().and_then(|c| c.to_str()) {
        cached
            .create_ref(commit)
            .with_context(|| format!("cannot write the cache's ref of {repo_id}@{revision}"))?;
    }
    Ok(dir)
}

fn offline() -> bool {
    matches!(
        std::env::var("HF_HUB_OFFLINE").as_deref(),
        Ok("1") | Ok("true") | Ok("TRUE") | Ok("yes")
    )
}

/// The cached snapshot, when config.json and every weights file are in it.
fn cached_model(cached: &CacheRepo) -> Result<Option<PathBuf>> {
    let Some(config) = cached.get(CONFIG) else {
        return Ok(None);
    };
    let complete = match (cached.get(SINGLE), cached.get(INDEX)) {
        (Some(_), _) => true,
        (None, Some(index)) => shards(&index)?.iter().all(|s| cached.get(s).is_some()),
        (None, None) => false,
    };
    Ok(complete
        .then(|| config.parent().map(Path::to_path_buf))
        .flatten())
}

/// The shard files a sharded checkpoint's index names, each once.
fn shards(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index)
        .with_context(|| format!("cannot read {}", index.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", index.display()))?;
    let mut shards: Vec<String> = value["weight_map"]
        .as_object()
        .with_context(|| format!("{} has no weight_map", index.display()))?
        .values()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    shards.sort_unstable();
    shards.dedup();
    for shard in &shards {
        // hf-hub writes each file under the cache's snapshot directory by this name.
        crate::fsutil::check_name("shard", shard)
            .with_context(|| format!("{} names a shard outside its repository", index.display()))?;
    }
    Ok(shards)
}

/// One repository being fetched, for downloads and their errors.
struct Hub<'a> {
    repo_id: &'a str,
    revision: &'a str,
    endpoint: String,
}

impl Hub<'_> {
    /// `file` from the snapshot when it is there, else downloaded with progress.
    fn file(&self, remote: &ApiRepo, snapshot: &Path, file: &str) -> Result<PathBuf> {
        let have = snapshot.join(file);
        if have.exists() {
            return Ok(have);
        }
        let progress = Download::new(self.repo_id);
        remote
            .download_with_progress(file, progress)
            .map_err(|e| self.explain(e, Some(file)))
    }
    /// The hub's answer as a user needs it (see `errors`).
    fn explain(&self, error: ApiError, file: Option<&str>) -> anyhow::Error {
        errors::explain(error, self.repo_id, self.revision, &self.endpoint, file)
    }
}
