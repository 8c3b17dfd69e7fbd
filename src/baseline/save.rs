//! Writing a baseline entry, so that a baseline never changes by accident
//! and can always fail a check: only from sound evidence (every run
//! completed with all its cycles) that can show a regression (three runs of
//! every strategy, or a budget for every metric the gate judges), one
//! writer per baseline at a time (an advisory lock on its directory), never
//! dropping a strategy or resource the old entry covered unless asked
//! (`--replace`, which says what goes), and atomically: the new entry is
//! written beside the old one and swapped in with one `renameat2` exchange,
//! so a crash at any point leaves the old entry or the new one, whole.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rustix::fs::{renameat_with, RenameFlags, CWD};

use super::coverage::Coverage;
use super::{entry_dir, load, validate_name};
use crate::gate::{thin_strategies, unbudgeted, BASELINE_MIN_RUNS};
use crate::hint::Hint;
use crate::metrics::measured::Measured;
use crate::metrics::{self, Summary};
use crate::record::{
    record_file, Header, Record, EVENTS_FILE, RUNS_FILE, SAMPLES_FILE, SUMMARY_FILE,
};
use crate::scenario::Scenario;

/// What a save did.
#[derive(Debug)]
pub struct Saved {
    pub entry: PathBuf,
    /// What the replaced entry covered and the new one does not
    /// (`strategy drop`, `resource VRAM (cuda0)`); empty unless `--replace`.
    pub dropped: Vec<String>,
}

/// Copies the record files of `measured` (just made: its record and summary
/// are taken as they are, not read back) into `<root>/<name>/<scenario>/`,
/// replacing that scenario's earlier entry; one that covered more needs
/// `replace`. Nothing is written when it fails.
pub fn save(measured: &Measured, root: &Path, name: &str, replace: bool) -> Result<Saved> {
    validate_name(name)?;
    let Measured {
        dir: results_dir,
        record,
        summary,
    } = measured;
    let results_dir = results_dir.as_path();
    check_sound(record, summary, results_dir, name)?;
    check_can_fail(&record.header, summary, results_dir, name)?;
    let scenario = record.header.scenario.clone();
    let entry = entry_dir(root, name, &scenario)
        .with_context(|| format!("cannot save {} as a baseline", results_dir.display()))?;
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _lock = lock(&dir, name)?;
    remove_leftovers(&dir, &scenario);

    let dropped = match load(root, name, &scenario) {
        Ok(Some(old)) => {
            Coverage::of(&metrics::summarize(&old)).dropped_by(&Coverage::of(summary))
        }
        Ok(None) => Vec::new(),
        Err(_) if replace => vec!["a damaged entry".to_string()],
        Err(err) => {
            return Err(err.context(format!(
                "cannot save baseline {name}: its entry for {scenario} is damaged; pass --replace to overwrite it"
            )))
        }
    };
    if !dropped.is_empty() && !replace {
        bail!(
            "cannot save baseline {name}: its entry for {scenario} covers {} that {} does not; run them too, or pass --replace to drop them",
            dropped.join(", "),
            results_dir.display()
        );
    }

    let tmp = dir.join(format!(".{scenario}.tmp{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let written = copy_record(results_dir, &tmp).and_then(|()| swap_in(&tmp, &entry));
    // After a swap `tmp` holds the old entry; after a failure, a partial copy.
    let _ = std::fs::remove_dir_all(&tmp);
    written?;
    Ok(Saved { entry, dropped })
}

/// An exclusive advisory lock on the baseline's directory (released when
/// the file is dropped): a second `--save-baseline` of the same name at
/// the same time is refused, not interleaved.
fn lock(dir: &Path, name: &str) -> Result<File> {
    let handle = File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    match handle.try_lock() {
        Ok(()) => Ok(handle),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "cannot save baseline {name}: another memrel is saving into {} right now; wait for it to finish and save again",
            dir.display()
        ),
        Err(std::fs::TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("cannot lock {}", dir.display()))
        }
    }
}

/// Temporary directories of saves that crashed (under the lock no other
/// save is running, so every one is stale).
fn remove_leftovers(dir: &Path, scenario: &str) {
    let (tmp, aside) = (format!(".{scenario}.tmp"), format!(".{scenario}.old"));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let file_name = e.file_name().to_string_lossy().into_owned();
        if file_name.starts_with(&tmp) || file_name == aside {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Puts the complete copy `tmp` at `entry`: an atomic exchange when an
/// entry exists (the old one lands in `tmp`), a rename when none does.
/// Filesystems without `RENAME_EXCHANGE` get a rename aside, then in.
fn swap_in(tmp: &Path, entry: &Path) -> Result<()> {
    let moved = |err: std::io::Error| {
        anyhow::Error::new(err)
            .context(format!("cannot move the baseline into {}", entry.display()))
    };
    if !entry.exists() {
        return std::fs::rename(tmp, entry).map_err(moved);
    }
    match renameat_with(CWD, tmp, CWD, entry, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            let aside = tmp.with_extension("old");
            std::fs::rename(entry, &aside).map_err(moved)?;
            std::fs::rename(tmp, entry).map_err(moved)?;
            std::fs::rename(&aside, tmp).map_err(moved)
        }
        Err(err) => Err(moved(err.into())),
    }
}

/// A baseline is only made from sound evidence: at least one run, and every
/// run completed with every cycle asked for (a failed, timed-out, killed or
/// cut-short run measured something else). The same rule as the gate's
/// ([`metrics::Summary::broken_runs`]).
fn check_sound(record: &Record, summary: &Summary, results_dir: &Path, name: &str) -> Result<()> {
    if record.runs.is_empty() {
        bail!(
            "cannot save baseline {name}: {} holds no runs; run the scenario again and save that",
            results_dir.join(RUNS_FILE).display()
        );
    }
    let unsound: Vec<String> = summary
        .broken_runs()
        .iter()
        .map(|(run, b)| format!("run {} ({}) {}: {}", run.run, run.strategy, b.status, b.why))
        .collect();
    if !unsound.is_empty() {
        bail!(
            "cannot save baseline {name}: {} in {}; a baseline needs every run completed with all its cycles: fix the cause and run again",
            unsound.join(", "),
            results_dir.display()
        );
    }
    Ok(())
}

/// A baseline must be able to show a regression: [`BASELINE_MIN_RUNS`] runs
/// of every strategy, unless the scenario budgets every metric the gate
/// judges (budgets are checked on the new runs alone and need no
/// statistics). The refusal names the command that would work.
fn check_can_fail(
    header: &Header,
    summary: &Summary,
    results_dir: &Path,
    name: &str,
) -> Result<()> {
    let thin = thin_strategies(summary);
    if thin.is_empty() {
        return Ok(());
    }
    // A scenario that does not parse has no budgets to count on.
    let missing = match Scenario::of_header(header) {
        Ok(scenario) => unbudgeted(summary, &scenario.thresholds),
        Err(_) => vec!["(its scenario file does not parse)".to_string()],
    };
    if missing.is_empty() {
        return Ok(());
    }
    let runs: Vec<String> = thin
        .iter()
        .map(|(strategy, n)| format!("{strategy} has {n} run(s)"))
        .collect();
    let fix = match repeat_command(header) {
        Some(command) => format!("run `{command}`"),
        None if header.attached.is_some() => format!(
            "an attached process is one run: measure the program under memrel instead (`{}`)",
            Hint::ExecProgram {
                repeat: BASELINE_MIN_RUNS,
                baseline: name,
            }
        ),
        None => format!("run the scenario again with `--repeat {BASELINE_MIN_RUNS}`"),
    };
    bail!(
        "cannot save baseline {name}: a baseline needs {BASELINE_MIN_RUNS} runs of every strategy to show a regression, \
         and in {} {}; fewer cannot show a change holds, however large, so a check against it could not fail: \
         {fix}, or budget every metric the gate judges in the scenario's [thresholds] (missing: {}); \
         the results are kept in {}",
        results_dir.display(),
        runs.join(", "),
        missing.join(", "),
        results_dir.display()
    )
}

/// The command line that made `header`'s record with `--repeat` set to
/// [`BASELINE_MIN_RUNS`] (`hint::Hint::again`: added before
/// `--save-baseline`, or replacing the one given), quoted for a shell;
/// `None` for a process `memrel attach` measured, which cannot be repeated
/// (`memrel drive` can: it drives the server again).
fn repeat_command(header: &Header) -> Option<String> {
    Hint::again(&header.command, BASELINE_MIN_RUNS, None, None).map(|h| h.line())
}

/// Copies the record's files from `results_dir` into `to` (a CSV kept
/// gzipped stays gzipped: see `record::record_file`).
fn copy_record(results_dir: &Path, to: &Path) -> Result<()> {
    for file in [SAMPLES_FILE, EVENTS_FILE, RUNS_FILE, SUMMARY_FILE] {
        let from = record_file(results_dir, file);
        let name = from.file_name().unwrap_or(file.as_ref());
        std::fs::copy(&from, to.join(name))
            .with_context(|| format!("cannot copy {} into the baseline", from.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;

    fn command_of(argv: &[&str]) -> Option<String> {
        let mut header = fixture::record().header;
        header.command = argv.iter().map(|a| a.to_string()).collect();
        repeat_command(&header)
    }

    /// The command that works is the same with three runs (`Hint::again`,
    /// whose tests hold `run` and `compare`; here the flags saved in the
    /// command line of `exec` and `drive`).
    #[test]
    fn the_command_that_works_is_the_same_with_three_runs() {
        assert_eq!(
            command_of(&[
                "memrel",
                "exec",
                "--repeat=1",
                "--save-baseline",
                "p",
                "--",
                "python3",
                "-c",
                "print('x')"
            ])
            .as_deref(),
            Some("memrel exec --repeat=3 --save-baseline p -- python3 -c 'print('\\''x'\\'')'")
        ); // A drive is repeated by memrel itself (the server started again).
        assert_eq!(
            command_of(&[
                "memrel",
                "drive",
                "--server",
                "vllm",
                "--save-baseline",
                "srv",
                "--",
                "vllm",
                "serve",
                "m"
            ])
            .as_deref(),
            Some("memrel drive --server vllm --repeat 3 --save-baseline srv -- vllm serve m")
        );
    }
}
