//! Named baselines: a saved copy of a run's raw record and summary under
//! `results/baselines/NAME/<scenario>/`, which `memrel check` compares
//! new runs against. Raw samples are kept, not only summaries, so a baseline
//! can be re-analysed later.
//!
//! This file names entries and reads them back (a damaged or hand-edited
//! entry is an error naming its file and the fix, never a silent skip);
//! `save` writes one (sound evidence only, one writer at a time, atomically,
//! never dropping coverage without `--replace`); `coverage` says what an
//! entry covers, for that check and for `memrel baseline list|show`.

mod coverage;
mod save;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use coverage::{Coverage, EntrySummary};
pub use save::{save, Saved};

use crate::fsutil::{check_name, join_name};
use crate::hint::Hint;
use crate::record::{Record, RUNS_FILE};

/// `<results root>/baselines`.
pub fn root(results_root: &Path) -> PathBuf {
    results_root.join("baselines")
}

/// Names must be usable as one directory name (and are held to a narrower
/// alphabet than [`check_name`], since they are typed on command lines).
pub fn validate_name(name: &str) -> Result<()> {
    check_name("baseline", name)?;
    let ok = name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok {
        bail!("baseline name {name:?} is not valid: use letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// `<root>/<name>/<scenario>`: both names checked, so neither a baseline name
/// nor a scenario name read back from a saved `runs.json` can leave `root`.
fn entry_dir(root: &Path, name: &str, scenario: &str) -> Result<PathBuf> {
    validate_name(name)?;
    Ok(join_name(&root.join(name), "scenario", scenario)?)
}

/// The command that saves `scenario` into baseline `name` under `root`
/// (`<OUT>/baselines`): three runs a strategy, `--out` where `root` is not
/// the default's.
pub fn save_hint(root: &Path, scenario: &str, name: &str, replace: bool) -> String {
    let out = root.parent().filter(|o| *o != Path::new("results"));
    Hint::SaveScenario {
        scenario,
        repeat: Some(crate::gate::BASELINE_MIN_RUNS),
        baseline: name,
        replace,
        out,
    }
    .line()
}

/// The baselines under `root`, sorted (directories with a valid name).
pub fn names(root: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", root.display())),
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| validate_name(n).is_ok())
        .collect();
    out.sort();
    Ok(out)
}

/// The scenarios a baseline holds, sorted: every directory of it with a
/// valid scenario name (a save's temporary directories start with '.'),
/// whether or not its files are intact ([`load`] says what is wrong).
pub fn scenarios(root: &Path, name: &str) -> Result<Vec<String>> {
    validate_name(name)?;
    let dir = root.join(name);
    let entries = std::fs::read_dir(&dir).with_context(|| {
        format!(
            "baseline {name:?} does not exist in {}: create it with `{}`",
            root.display(),
            save_hint(root, "<scenario>", name, false)
        )
    })?;
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| check_name("scenario", n).is_ok())
        .collect();
    out.sort();
    Ok(out)
}

/// The saved record of `scenario` in baseline `name`, `None` if it has no
/// entry for it. An entry that cannot be read (a file missing or edited by
/// hand, another schema) is an error naming it and how to re-make it.
pub fn load(root: &Path, name: &str, scenario: &str) -> Result<Option<Record>> {
    let entry = entry_dir(root, name, scenario)?;
    if !entry.is_dir() {
        return Ok(None);
    }
    let remake = format!(
        "re-make it with `{}`, or restore it from version control",
        save_hint(root, scenario, name, true)
    );
    if !entry.join(RUNS_FILE).is_file() {
        bail!(
            "baseline {name}: {} has no {RUNS_FILE} (damaged or edited by hand): {remake}",
            entry.display()
        );
    }
    let record = Record::load(&entry).with_context(|| {
        format!(
            "baseline {name}: the entry {} cannot be read: {remake}",
            entry.display()
        )
    })?;
    if record.header.scenario != scenario {
        bail!(
            "baseline {name}: {} names scenario {:?}, not {scenario:?} (its directory was renamed or its file edited by hand): {remake}",
            entry.join(RUNS_FILE).display(),
            record.header.scenario
        );
    }
    Ok(Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{fixture, RunStatus, SUMMARY_FILE};

    /// A results directory whose runs.json names `scenario` (as a damaged or
    /// hand-edited record could).
    fn results_dir_naming(scenario: &str) -> tempfile::TempDir {
        let mut record = three_runs_a_strategy();
        record.header.scenario = scenario.to_string();
        results_dir(&record)
    }

    /// A results directory of `record` (a summary.json that is no summary:
    /// a baseline's save reads the record).
    fn results_dir(record: &Record) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        record.save(dir.path()).unwrap();
        std::fs::write(dir.path().join(SUMMARY_FILE), "{}").unwrap();
        dir
    }

    /// The fixture with a third run of each strategy: a baseline the gate
    /// can judge with.
    fn three_runs_a_strategy() -> Record {
        let mut record = fixture::record();
        record.runs.push(fixture::run(5, "drop", 3, &[2, 2, 60]));
        record
            .runs
            .push(fixture::run(6, "malloc-trim", 3, &[1, 1, 1]));
        record
    }

    /// The results directory `dir` as a run hands it on.
    fn measured(dir: &Path) -> crate::metrics::measured::Measured {
        crate::metrics::measured::Measured::new(dir.to_path_buf(), Record::load(dir).unwrap())
    }

    /// Why saving `record` (written into a results directory of its own)
    /// as baseline `ci` under `root` fails.
    fn save_error(record: &Record, root: &Path) -> String {
        let dir = results_dir(record);
        format!(
            "{:#}",
            save(&measured(dir.path()), root, "ci", false).unwrap_err()
        )
    }

    #[test]
    fn fewer_than_three_runs_of_a_strategy_is_no_baseline() {
        let root = tempfile::tempdir().unwrap();
        let mut record = fixture::record();
        record.header.command = [
            "memrel",
            "run",
            "--scenario",
            "fixture",
            "--save-baseline",
            "ci",
        ]
        .map(String::from)
        .to_vec();
        let err = save_error(&record, root.path());
        assert!(
            err.contains("a baseline needs 3 runs of every strategy to show a regression"),
            "{err}"
        );
        assert!(
            err.contains("drop has 2 run(s), malloc-trim has 2 run(s)"),
            "{err}"
        );
        assert!(
            err.contains("run `memrel run --scenario fixture --repeat 3 --save-baseline ci`"),
            "{err}"
        );
        assert!(!root.path().join("ci").exists(), "nothing written");
    }

    #[test]
    fn a_scenario_name_from_runs_json_cannot_leave_the_baseline_root() {
        for scenario in ["../../escaped", "..", "/tmp/abs", "a\0b"] {
            let results = results_dir_naming(scenario);
            let top = tempfile::tempdir().unwrap();
            let root = top.path().join("results").join("baselines");
            let err = save(&measured(results.path()), &root, "ci", false).unwrap_err();
            assert!(
                format!("{err:#}").contains("scenario name"),
                "{scenario:?}: {err:#}"
            );
            // Nothing was written anywhere under the top directory but the root.
            assert!(!top.path().join("escaped").exists());
            assert!(!top.path().join("results").join("escaped").exists());
            let err = load(&root, "ci", scenario).unwrap_err();
            assert!(err.to_string().contains("scenario name"), "{err}");
        }
    }

    #[test]
    fn baseline_names_with_separators_or_nul_are_refused() {
        for name in ["", "..", "../x", "a/b", "a\0b", ".x", "a\\b"] {
            assert!(validate_name(name).is_err(), "{name:?}");
            let root = tempfile::tempdir().unwrap();
            assert!(load(root.path(), name, "cpu-trim").is_err(), "{name:?}");
            assert!(scenarios(root.path(), name).is_err(), "{name:?}");
        }
        validate_name("ci-2.gate_x").unwrap();
    }

    #[test]
    fn a_failed_run_or_no_runs_is_no_baseline_and_nothing_is_written() {
        let root = tempfile::tempdir().unwrap();
        let good = results_dir_naming("cpu-trim");
        save(&measured(good.path()), root.path(), "ci", false).unwrap();
        let before = std::fs::read(root.path().join("ci/cpu-trim").join(RUNS_FILE)).unwrap();

        for status in [
            RunStatus::Failed,
            RunStatus::TimedOut,
            RunStatus::Killed,
            RunStatus::OomKilled,
            RunStatus::AllocFailed,
        ] {
            let mut record = fixture::record();
            record.runs[0].meta.status = status;
            let err = save_error(&record, root.path());
            assert!(err.contains("cannot save baseline ci: run 1 ("), "{err}");
            assert!(err.contains("every run completed"), "{err}");
        }
        // A run that completed but measured 2 of its 3 cycles is cut short.
        let mut record = fixture::record();
        record.runs[1] = fixture::run(2, "malloc-trim", 1, &[1, 1]);
        let err = save_error(&record, root.path());
        assert!(
            err.contains("run 2 (malloc-trim) incomplete: measured 2 of 3 cycles"),
            "{err}"
        );
        let mut record = fixture::record();
        record.runs.clear();
        let err = save_error(&record, root.path());
        assert!(err.contains("holds no runs"), "{err}");

        // The earlier baseline is intact and no temp directory is left.
        let after = std::fs::read(root.path().join("ci/cpu-trim").join(RUNS_FILE)).unwrap();
        assert_eq!(before, after);
        let names: Vec<_> = std::fs::read_dir(root.path().join("ci"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("cpu-trim")]);
    }

    #[test]
    fn a_failed_copy_leaves_the_old_baseline_and_no_temp_dir() {
        let root = tempfile::tempdir().unwrap();
        let results = results_dir_naming("cpu-trim");
        save(&measured(results.path()), root.path(), "ci", false).unwrap();
        let before = std::fs::read(root.path().join("ci/cpu-trim").join(RUNS_FILE)).unwrap();
        // The summary goes missing after the record was read: the copy fails.
        std::fs::remove_file(results.path().join(SUMMARY_FILE)).unwrap();
        let err = format!(
            "{:#}",
            save(&measured(results.path()), root.path(), "ci", false).unwrap_err()
        );
        assert!(err.contains("cannot copy"), "{err}");
        let after = std::fs::read(root.path().join("ci/cpu-trim").join(RUNS_FILE)).unwrap();
        assert_eq!(before, after);
        assert_eq!(
            std::fs::read_dir(root.path().join("ci")).unwrap().count(),
            1
        );
    }

    #[test]
    fn save_then_load_an_ordinary_name() {
        let results = results_dir_naming("cpu-trim");
        let root = tempfile::tempdir().unwrap();
        let entry = save(&measured(results.path()), root.path(), "ci", false)
            .unwrap()
            .entry;
        assert_eq!(entry, root.path().join("ci").join("cpu-trim"));
        assert!(load(root.path(), "ci", "cpu-trim").unwrap().is_some());
        assert_eq!(scenarios(root.path(), "ci").unwrap(), vec!["cpu-trim"]);
    }
}
