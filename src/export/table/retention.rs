//! Whether each strategy retains, said per run: "retains in 4 of 5 runs"
//! with the spread of retained over the runs, and the caption line of a table
//! whose strategies have too few runs for that to be a conclusion.
//!
//! Whether glibc keeps freed memory can differ from one process to the next
//! under the same strategy (a plain `drop` of bert-base retained in some runs
//! and gave everything back in others on the same VM), so one run per
//! strategy is a coin flip, not an answer: the tables count processes.
//!
//! Formats counts the summary already holds (`processes_retaining`, the
//! retained spread over runs); computes nothing.

use super::cells::sig;
use super::Line;
use crate::metrics::Resource;
use crate::metrics::ResourceFacts;
use crate::textutil::MIB;

/// Completed runs per strategy below which a table says it cannot conclude.
/// On the project's 2-core VM a plain `drop` of the default scenario gave
/// back in 2 of 10 runs: five runs that all give back by chance happen about
/// once in 3000 (0.2⁵), one run in five.
pub const RUNS_TO_CONCLUDE: u32 = 5;

/// The fewest completed runs of a strategy of `lines`, where below
/// [`RUNS_TO_CONCLUDE`].
fn too_few(lines: &[Line]) -> Option<u32> {
    let fewest = lines.iter().map(|l| l.summary.runs_completed).min()?;
    (fewest < RUNS_TO_CONCLUDE).then_some(fewest)
}

/// compare.md's warning for a table with a strategy of fewer than
/// [`RUNS_TO_CONCLUDE`] completed runs (fits 100 columns), else `None`.
pub(in crate::export) fn too_few_runs(lines: &[Line]) -> Option<String> {
    too_few(lines).map(|fewest| {
        format!(
            "too few runs to conclude: {fewest} completed run{} of a strategy; retention can vary \
             by run (--repeat {RUNS_TO_CONCLUDE})",
            if fewest == 1 { "" } else { "s" },
        )
    })
}

/// The same as the console's first note (fits 100 columns after `note: `).
pub(in crate::export) fn too_few_runs_note(lines: &[Line]) -> Option<String> {
    too_few(lines).map(|fewest| {
        format!(
            "too few runs to conclude: {fewest} completed run{} of a strategy; retention varies by \
             run (--repeat {RUNS_TO_CONCLUDE})",
            if fewest == 1 { "" } else { "s" },
        )
    })
}

/// What a strategy's runs say of one resource, before it is put in words.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::export) enum Said {
    /// Not judged: the reading moves with other processes' work (the context).
    NotJudged(String),
    /// One level from the baseline through the load to the release.
    Held { level_bytes: f64 },
    /// `retaining` of `runs` runs had a cycle above the threshold.
    Retains { retaining: u32, runs: u32 },
    /// No run had a cycle above the threshold.
    GivesBack { runs: u32 },
}

/// What `line`'s runs say of `resource`; `None` where the resource was not
/// measured or no run has a cycle (a program without phase markers: nothing
/// was loaded and released to judge).
pub(in crate::export) fn said(line: &Line, resource: Resource) -> Option<Said> {
    let s = line.summary;
    let m = s
        .resource(resource)
        .filter(|m| m.not_measured.is_none() && m.cycles_total > 0)?;
    Some(match (&m.context, m.processes_retaining > 0) {
        (Some(context), _) => Said::NotJudged(context.clone()),
        // Nothing came and went: "gives back" would be news it is not.
        (None, false) if let Some(level_bytes) = held_throughout(m) => Said::Held { level_bytes },
        (None, true) => Said::Retains {
            retaining: m.processes_retaining,
            runs: s.runs,
        },
        (None, false) => Said::GivesBack { runs: s.runs },
    })
}

/// "415 MiB stay cached from start to end" (the page cache) or "… held …".
pub(in crate::export) fn held_text(resource: Resource, level_bytes: f64) -> String {
    let what = if resource.look().cache {
        "stay cached"
    } else {
        "held"
    };
    format!("{} MiB {what} from start to end", sig(level_bytes / MIB))
}

/// One strategy's answer for `resource`: (the verdict, the spread), e.g.
/// ("retains in 4 of 5 runs", "333 MiB (4.59–425)"); `None` as for [`said`].
pub(in crate::export) fn verdict(line: &Line, resource: Resource) -> Option<(String, String)> {
    let m = line.summary.resource(resource)?;
    let text = match said(line, resource)? {
        Said::NotJudged(context) => format!("not judged, {context}"),
        Said::Held { level_bytes } => held_text(resource, level_bytes),
        Said::Retains { runs: 1, .. } => "retains in its one run".to_string(),
        Said::GivesBack { runs: 1 } => "gives back in its one run".to_string(),
        Said::Retains { retaining, runs } => format!("retains in {retaining} of {runs} runs"),
        Said::GivesBack { runs } => format!("gives back in all {runs} runs"),
    };
    let spread = match &m.retained_bytes {
        Some(r) => {
            let (median, lo, hi) = (sig(r.median / MIB), sig(r.min / MIB), sig(r.max / MIB));
            if r.n > 1 && lo != hi {
                format!("{median} MiB ({lo}–{hi})")
            } else {
                format!("{median} MiB")
            }
        }
        None => super::cells::NONE.to_string(),
    };
    Some((text, spread))
}

/// The level where the representative run's last cycle held one level from
/// its baseline through its load to its release (within 1 MiB or 1 %): a
/// page cache already full before the run, a resource the program did not
/// touch. `None` where it moved.
fn held_throughout(m: &crate::metrics::ResourceSummary) -> Option<f64> {
    let row = m.row.as_ref()?;
    let base = row.baseline_bytes as f64;
    let near = |v: u64| (v as f64 - base).abs() <= (0.01 * base).max(MIB);
    if base < MIB || !near(row.loaded_bytes) || !near(row.after_release_bytes) {
        return None;
    }
    Some(base)
}

/// What [`verdict`] means, for the line above a block of verdicts.
/// On two lines where one would pass 100 characters (the container's long name).
pub(in crate::export) fn verdict_heading(resource: Resource, threshold_bytes: u64) -> String {
    let legend = format!(
        "(retaining = a cycle above {:.0} MiB; retained: last cycle, median (min–max)):",
        threshold_bytes as f64 / MIB
    );
    let one_line = format!("{} per run {legend}", resource.label());
    if one_line.chars().count() <= super::COMPACT_MAX_CHARS {
        one_line
    } else {
        format!("{} per run\n{legend}", resource.label())
    }
}

/// The verdict lines of `lines` for `resource`, aligned: `  drop  retains
/// in 4 of 5 runs  retained 333 MiB (4.59–425)`.
pub(in crate::export) fn verdict_lines(lines: &[Line], resource: Resource) -> Vec<String> {
    let rows: Vec<(&str, String, String)> = lines
        .iter()
        .filter_map(|l| verdict(l, resource).map(|(v, s)| (l.label.as_str(), v, s)))
        .collect();
    let name_width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let verdict_width = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    rows.into_iter()
        .map(|(name, v, s)| format!("  {name:<name_width$}  {v:<verdict_width$}  retained {s}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use crate::record::fixture;

    fn lines_of(summary: &crate::metrics::Summary) -> Vec<Line<'_>> {
        summary
            .strategies
            .iter()
            .map(|s| Line {
                label: s.strategy.clone(),
                summary: s,
                relative: None,
                machine: None,
            })
            .collect()
    }

    #[test]
    fn a_strategy_retains_in_k_of_n_runs_with_its_spread() {
        // drop: runs ending at 60 and 40 MiB, one of them retaining from its
        // first cycle; malloc-trim never above the threshold.
        let mut record = fixture::record();
        record.runs[2] = fixture::run(3, "drop", 2, &[2, 2, 40]);
        let summary = summarize(&record);
        let lines = lines_of(&summary);
        assert_eq!(
            verdict(&lines[0], Resource::Host),
            Some((
                "retains in 2 of 2 runs".into(),
                "50.0 MiB (40.0–60.0)".into()
            ))
        );
        assert_eq!(
            verdict(&lines[1], Resource::Host),
            Some(("gives back in all 2 runs".into(), "1.00 MiB".into()))
        );
        assert_eq!(verdict(&lines[0], Resource::Device(0)), None);
        record.runs[2] = fixture::run(3, "drop", 2, &[2, 2, 2]);
        let summary = summarize(&record);
        let (text, _) = verdict(&lines_of(&summary)[0], Resource::Host).unwrap();
        assert_eq!(text, "retains in 1 of 2 runs");
        // One run: said of that run, not "all 1 runs".
        record.runs.retain(|r| r.meta.repetition == 1);
        let summary = summarize(&record);
        let lines = lines_of(&summary);
        let said = |i: usize| verdict(&lines[i], Resource::Host).map(|v| v.0);
        assert_eq!(said(0).as_deref(), Some("retains in its one run"));
        assert_eq!(said(1).as_deref(), Some("gives back in its one run"));
    }

    #[test]
    fn fewer_than_five_runs_cannot_conclude() {
        let summary = summarize(&fixture::record());
        let lines = lines_of(&summary);
        let line = too_few_runs(&lines).unwrap();
        assert!(
            line.starts_with("too few runs to conclude: 2 completed runs"),
            "{line}"
        );
        assert!(
            line.chars().count() <= super::super::COMPACT_MAX_CHARS,
            "{line}"
        );
        let mut record = fixture::record();
        for n in 3..=5 {
            record
                .runs
                .push(fixture::run(2 * n - 1, "drop", n, &[2, 2, 2]));
            record
                .runs
                .push(fixture::run(2 * n, "malloc-trim", n, &[1, 1, 1]));
        }
        let summary = summarize(&record);
        assert_eq!(too_few_runs(&lines_of(&summary)), None);
    }
}
