//! Named baselines: a saved copy of a run's raw record and summary under
//! `results/baselines/NAME/<scenario>/`, which `memrel check` compares
//! new runs against. Raw samples are kept, not only summaries, so a baseline
//! can be re-analysed later.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::export::SUMMARY_FILE;
use crate::record::{Record, EVENTS_FILE, RUNS_FILE, SAMPLES_FILE};

/// `<results root>/baselines`.
pub fn root(results_root: &Path) -> PathBuf {
    results_root.join("baselines")
}

/// Names must be usable as one directory name.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok {
        bail!("baseline name {name:?} is not valid: use letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// Copies the record files of `results_dir` into `<root>/<name>/<scenario>/`,
/// replacing that scenario's earlier entry. Returns the entry's directory.
pub fn save(results_dir: &Path, root: &Path, name: &str) -> Result<PathBuf> {
    validate_name(name)?;
    let record = Record::load(results_dir)?;
    let entry = root.join(name).join(&record.header.scenario);
    let tmp = root.join(name).join(format!(
        ".{}.tmp{}",
        record.header.scenario,
        std::process::id()
    ));
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    for file in [SAMPLES_FILE, EVENTS_FILE, RUNS_FILE, SUMMARY_FILE] {
        let from = results_dir.join(file);
        std::fs::copy(&from, tmp.join(file))
            .with_context(|| format!("cannot copy {} into the baseline", from.display()))?;
    }
    if entry.exists() {
        std::fs::remove_dir_all(&entry)
            .with_context(|| format!("cannot replace {}", entry.display()))?;
    }
    std::fs::rename(&tmp, &entry)
        .with_context(|| format!("cannot move the baseline into {}", entry.display()))?;
    Ok(entry)
}

/// The scenarios a baseline holds, sorted.
pub fn scenarios(root: &Path, name: &str) -> Result<Vec<String>> {
    let dir = root.join(name);
    let entries = std::fs::read_dir(&dir).with_context(|| {
        format!(
            "baseline {name:?} does not exist in {}: create it with `memrel run --scenario <scenario> --save-baseline {name}`",
            root.display()
        )
    })?;
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(RUNS_FILE).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    out.sort();
    Ok(out)
}

/// The saved record of `scenario` in baseline `name`, `None` if it has none.
pub fn load(root: &Path, name: &str, scenario: &str) -> Result<Option<Record>> {
    let entry = root.join(name).join(scenario);
    if !entry.join(RUNS_FILE).is_file() {
        return Ok(None);
    }
    Record::load(&entry).map(Some)
}
