//! Strategies side by side: joins the summaries of one or more saved records
//! into one [`Comparison`] (rows per strategy and source, forward time relative
//! to a reference strategy, and what differs between the sources). Every
//! source and row carries its `machine` key, so a fleet's results read as
//! (machine, strategy): the tables get a machine column and the charts a
//! panel per machine when the sources span several.
//!
//! Pure like the rest of `metrics`: it reads summaries and headers, never
//! files. It names what it joins (row labels, notes on what differs between
//! sources) but leaves number formatting to the exporters. Damage found while loading (a cut-short CSV) is
//! passed in by the caller and carried through so every report can show it.

use serde::{Deserialize, Serialize};

use super::{Resource, StrategySummary, Summary};
use crate::record::{Header, Host, RunStatus};

/// Version of compare.json (and the columns of compare.csv): 3 added the
/// release curve (`release_t50_s`, `release_t90_s`) per resource, 4 the
/// release gap (`settle_s`, `late_bytes`), 5 the `machine` key of each
/// source and row (`crate::machine`; `unknown` for records without the
/// machine facts), the comparison's `machines` and each source's
/// `memrel_commit`, 6 compare.csv's `<r>_why_<mechanism>_bytes` columns
/// (each row's `summary.why`, retained memory by mechanism).
pub const COMPARE_SCHEMA_VERSION: u32 = 6;

/// The strategy other rows are measured against when a source has it.
pub const REFERENCE_STRATEGY: &str = "drop";

/// One saved record to compare, as the caller loaded it.
pub struct Input<'a> {
    /// The results directory, as given.
    pub dir: String,
    pub header: &'a Header,
    pub summary: &'a Summary,
    /// Problems found while reading the directory (missing or cut-short files).
    pub damage: Vec<String>,
}

/// Where one set of rows came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Source {
    /// `A`, `B`, … when several sources are compared; the scenario name for one.
    pub label: String,
    pub dir: String,
    pub scenario: String,
    pub device: String,
    /// The machine the record was made on (`crate::machine::key`).
    #[serde(default = "unknown_machine")]
    pub machine: String,
    pub memrel_version: String,
    /// The commit memrel was built from; `unknown` for older records.
    #[serde(default = "unknown_machine")]
    pub memrel_commit: String,
    pub record_schema_version: u32,
    pub created_unix_s: u64,
    pub host: Host,
    pub cycles: u32,
    /// The most repetitions any strategy has.
    pub repetitions: u32,
    pub interval_s: f64,
    pub retention_threshold_bytes: u64,
    /// Models as `id (MiB of tensors)`, in load order of the header.
    pub models: Vec<String>,
    /// The strategy this source's forward times are relative to.
    pub reference_strategy: Option<String>,
    pub damage: Vec<String>,
}

/// One strategy of one source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// The strategy name, with ` (A)` when several sources are compared.
    pub label: String,
    /// Index into [`Comparison::sources`].
    pub source: usize,
    /// The source's machine: rows are keyed by (machine, strategy).
    #[serde(default = "unknown_machine")]
    pub machine: String,
    pub strategy: String,
    /// Median forward time over the reference strategy's median (1.24 = 24 % slower).
    pub forward_time_relative: Option<f64>,
    /// Why the row is incomplete, for people (failed runs, missing cycles, damage).
    pub notes: Vec<String>,
    pub summary: StrategySummary,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub schema_version: u32,
    /// The scenario, or the scenarios joined with ` vs ` when they differ.
    pub scenario: String,
    pub device: String,
    pub retention_threshold_bytes: u64,
    /// Every resource any source measured, in the order reports show them:
    /// the lead (a device any source read, else host) first.
    pub resources: Vec<Resource>,
    pub lead: Resource,
    /// The distinct machines of the sources, in source order: more than one
    /// makes `machine` a column of the tables and a facet of the charts.
    #[serde(default)]
    pub machines: Vec<String>,
    pub sources: Vec<Source>,
    pub rows: Vec<Row>,
    /// What differs between sources, and damage, one line each.
    pub warnings: Vec<String>,
}

fn unknown_machine() -> String {
    crate::machine::UNKNOWN.to_string()
}

/// Joins the inputs into one comparison (rows in source order, then strategy order).
pub fn compare(inputs: &[Input]) -> Comparison {
    let many = inputs.len() > 1;
    let mut sources = Vec::new();
    let mut rows = Vec::new();
    for (index, input) in inputs.iter().enumerate() {
        let at = SourceAt {
            index,
            label: if many {
                source_letter(index)
            } else {
                input.header.scenario.clone()
            },
            machine: crate::machine::key(&input.header.host),
            reference: input
                .summary
                .strategies
                .iter()
                .find(|s| s.strategy == REFERENCE_STRATEGY)
                .or_else(|| input.summary.strategies.first()),
        };
        rows.extend(rows_of(input, &at, many));
        sources.push(source_of(input, at));
    }
    let mut warnings = differences(inputs, &sources);
    for source in &sources {
        for d in &source.damage {
            warnings.push(format!("{} ({}): {d}", source.label, source.dir));
        }
    }
    let lead = inputs
        .iter()
        .map(|i| i.summary.lead)
        .find(|r| r.is_device())
        .unwrap_or(Resource::Host);
    let mut resources = vec![lead];
    for input in inputs {
        for r in input.summary.shown() {
            if !resources.contains(&r) {
                resources.push(r);
            }
        }
    }
    Comparison {
        schema_version: COMPARE_SCHEMA_VERSION,
        resources,
        lead,
        machines: distinct(sources.iter().map(|s| s.machine.as_str()))
            .into_iter()
            .map(str::to_string)
            .collect(),
        scenario: distinct(sources.iter().map(|s| s.scenario.as_str())).join(" vs "),
        device: distinct(sources.iter().map(|s| s.device.as_str())).join(" vs "),
        retention_threshold_bytes: sources
            .first()
            .map(|s| s.retention_threshold_bytes)
            .unwrap_or(0),
        sources,
        rows,
        warnings,
    }
}

/// What one source is among the inputs: its place, label, machine and the
/// strategy its forward times are relative to.
struct SourceAt<'a> {
    index: usize,
    label: String,
    machine: String,
    reference: Option<&'a StrategySummary>,
}

/// Each distinct item once, in the order first seen.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The rows of one source, a row per strategy.
fn rows_of(input: &Input, at: &SourceAt, many: bool) -> Vec<Row> {
    let reference_forward = at
        .reference
        .and_then(|r| r.forward_time_s.as_ref())
        .map(|s| s.median);
    input
        .summary
        .strategies
        .iter()
        .map(|s| {
            let forward_time_relative = match (s.forward_time_s.as_ref(), reference_forward) {
                (Some(f), Some(r)) if r > 0.0 => Some(f.median / r),
                _ => None,
            };
            Row {
                label: if many {
                    format!("{} ({})", s.strategy, at.label)
                } else {
                    s.strategy.clone()
                },
                source: at.index,
                machine: at.machine.clone(),
                strategy: s.strategy.clone(),
                forward_time_relative,
                notes: row_notes(input, s),
                summary: s.clone(),
            }
        })
        .collect()
}

/// Where the rows of `input` came from.
fn source_of(input: &Input, at: SourceAt) -> Source {
    let header = input.header;
    Source {
        label: at.label,
        dir: input.dir.clone(),
        scenario: header.scenario.clone(),
        device: header.device.clone(),
        machine: at.machine,
        memrel_version: header.memrel_version.clone(),
        memrel_commit: header.memrel_commit.clone().unwrap_or_else(unknown_machine),
        record_schema_version: header.schema_version,
        created_unix_s: header.created_unix_s,
        host: header.host.clone(),
        cycles: header.cycles,
        repetitions: input
            .summary
            .runs
            .iter()
            .map(|r| r.repetition)
            .max()
            .unwrap_or(0),
        interval_s: header.interval_s,
        retention_threshold_bytes: header.retention_threshold_bytes,
        models: header
            .models
            .iter()
            .map(|m| {
                format!(
                    "{} ({:.1} MiB)",
                    m.id,
                    m.tensor_bytes as f64 / crate::textutil::MIB
                )
            })
            .collect(),
        reference_strategy: at.reference.map(|r| r.strategy.clone()),
        damage: input.damage.clone(),
    }
}

/// `A`, `B`, …, `Z`, `AA`, …
fn source_letter(index: usize) -> String {
    let mut n = index;
    let mut out = String::new();
    loop {
        out.insert(0, char::from(b'A' + (n % 26) as u8));
        if n < 26 {
            return out;
        }
        n = n / 26 - 1;
    }
}

/// Why one strategy's numbers are incomplete.
fn row_notes(input: &Input, s: &StrategySummary) -> Vec<String> {
    let mut notes = Vec::new();
    for run in input
        .summary
        .runs
        .iter()
        .filter(|r| r.strategy == s.strategy)
    {
        if run.status != RunStatus::Completed {
            let what = match run.status {
                RunStatus::TimedOut => "timed out",
                RunStatus::Killed => "was killed",
                RunStatus::OomKilled => "was OOM-killed",
                RunStatus::AllocFailed => "had an allocation refused",
                _ => "failed",
            };
            let why = run
                .error
                .as_deref()
                .map(|e| format!(": {}", first_line(e, 120)))
                .unwrap_or_default();
            notes.push(format!(
                "run {} (repetition {}) {what}{why}",
                run.run, run.repetition
            ));
        }
        if run.samples == 0 {
            notes.push(format!(
                "run {} has no samples: its peak is unknown",
                run.run
            ));
        }
    }
    if s.cycles_total < s.cycles_expected {
        notes.push(format!(
            "{} of {} cycles measured",
            s.cycles_total, s.cycles_expected
        ));
    }
    if !s.checks_passed {
        notes.push("the strategy's checks failed: it may not have taken effect".to_string());
    }
    if !input.damage.is_empty() {
        notes.push("its results directory is damaged (see the warnings)".to_string());
    }
    notes
}

fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max_chars {
        line.to_string()
    } else {
        line.chars().take(max_chars).collect::<String>() + "…"
    }
}

/// What differs between each source and the first, one line per difference.
fn differences(inputs: &[Input], sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(first), Some(first_source)) = (inputs.first(), sources.first()) else {
        return out;
    };
    let a = first.header;
    let first_facts = facts(a, first_source);
    for (input, source) in inputs.iter().zip(sources).skip(1) {
        let b = input.header;
        let who = format!("{} and {}", first_source.label, source.label);
        // Either the scenarios differ (a line below) or this: never both.
        if a.scenario == b.scenario && a.scenario_toml != b.scenario_toml {
            out.push(format!(
                "{who} ran different versions of scenario {}: compare runs of one scenario file",
                a.scenario
            ));
        }
        for ((what, x), (_, y)) in first_facts.iter().zip(facts(b, source)) {
            if *x != y {
                out.push(format!("{who} differ in {what}: {x} vs {y}"));
            }
        }
    }
    out
}

/// What the sources are compared on, each with its value for the source
/// `s` of `h`, in the order the warnings name them.
fn facts(h: &Header, s: &Source) -> [(&'static str, String); 11] {
    [
        (
            "scenario (the rows compare different workloads)",
            h.scenario.clone(),
        ),
        ("record schema version", h.schema_version.to_string()),
        ("device", h.device.clone()),
        ("cycles per run", h.cycles.to_string()),
        ("sampling interval (s)", h.interval_s.to_string()),
        (
            "retention threshold (bytes)",
            h.retention_threshold_bytes.to_string(),
        ),
        ("models", s.models.join(", ")),
        ("host", host_line(&h.host)),
        ("machine (rows are grouped by machine)", s.machine.clone()),
        ("memrel version", h.memrel_version.clone()),
        ("memrel commit", s.memrel_commit.clone()),
    ]
}

fn host_line(h: &Host) -> String {
    format!(
        "{} ({}, kernel {}, {}, {} cpus)",
        h.hostname, h.os, h.kernel, h.libc, h.cpus
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_letters_go_past_z() {
        assert_eq!(source_letter(0), "A");
        assert_eq!(source_letter(25), "Z");
        assert_eq!(source_letter(26), "AA");
        assert_eq!(source_letter(27), "AB");
    }

    #[test]
    fn long_errors_are_cut_to_one_line() {
        assert_eq!(first_line("a\nb", 10), "a");
        assert_eq!(first_line("abcdef", 3), "abc…");
    }

    use crate::metrics::summarize;
    use crate::record::fixture;

    /// A source of `dir` without damage.
    fn input<'a>(dir: &str, header: &'a Header, summary: &'a Summary) -> Input<'a> {
        Input {
            dir: dir.into(),
            header,
            summary,
            damage: Vec::new(),
        }
    }

    /// Two records of the fixture, from two machines (the second with more CPUs).
    fn two_machines() -> (crate::record::Record, crate::record::Record) {
        let epyc = crate::record::Machine {
            cpu_model: Some("AMD EPYC".into()),
            ..Default::default()
        };
        let mut a = fixture::record();
        a.header.host.machine = Some(epyc);
        let mut b = a.clone();
        b.header.host.cpus = 16;
        (a, b)
    }

    #[test]
    fn one_source_has_no_warnings_and_drop_is_the_reference() {
        let record = fixture::record();
        let summary = summarize(&record);
        let c = compare(&[input("a", &record.header, &summary)]);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.sources[0].reference_strategy.as_deref(), Some("drop"));
        assert_eq!(c.sources[0].repetitions, 2);
        let labels: Vec<&str> = c.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["drop", "malloc-trim"]);
        assert_eq!(
            c.rows[0].forward_time_relative, None,
            "the fixture has no forward phase"
        );
    }

    #[test]
    fn sources_that_differ_say_what_differs() {
        let a = fixture::record();
        let mut b = fixture::record();
        b.header.scenario = "other".into();
        b.header.host.libc = "musl".into();
        let (sa, sb) = (summarize(&a), summarize(&b));
        let c = compare(&[
            input("a", &a.header, &sa),
            Input {
                dir: "b".into(),
                header: &b.header,
                summary: &sb,
                damage: vec!["samples.csv line 9 is cut short".into()],
            },
        ]);
        assert_eq!(c.scenario, "fixture vs other");
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(
            c.warnings[0].starts_with("A and B differ in scenario"),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings[1].contains("differ in host") && c.warnings[1].contains("musl"),
            "{:?}",
            c.warnings
        );
        assert_eq!(c.warnings[2], "B (b): samples.csv line 9 is cut short");
        assert_eq!(c.rows[2].label, "drop (B)");
        assert!(c.rows[2].notes.iter().any(|n| n.contains("damaged")));
        assert!(c.rows[0].notes.is_empty());
    }

    #[test]
    fn the_same_scenario_name_with_another_file_is_flagged() {
        let a = fixture::record();
        let mut b = fixture::record();
        b.header.scenario_toml.push_str("\nsettle_ms = 5");
        let (sa, sb) = (summarize(&a), summarize(&b));
        let c = compare(&[input("a", &a.header, &sa), input("b", &b.header, &sb)]);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("ran different versions of scenario fixture"));
    }

    /// Two machines (issue 28): each row carries its source's machine, the
    /// comparison lists both, and the sources say they differ.
    #[test]
    fn rows_are_keyed_by_machine_and_strategy() {
        let (a, b) = two_machines();
        let old = fixture::record();
        let (sa, sb, so) = (summarize(&a), summarize(&b), summarize(&old));
        let c = compare(&[
            input("a", &a.header, &sa),
            input("b", &b.header, &sb),
            input("old", &old.header, &so),
        ]);
        assert_eq!(c.machines.len(), 3, "{:?}", c.machines);
        assert!(
            c.machines[0].starts_with("amd-epyc-2c-8g-glibc2.36-"),
            "{:?}",
            c.machines
        );
        assert!(
            c.machines[1].starts_with("amd-epyc-16c-8g-glibc2.36-"),
            "{:?}",
            c.machines
        );
        assert_eq!(c.machines[2], "unknown", "a record without facts");
        let keyed: Vec<(&str, &str)> = c
            .rows
            .iter()
            .map(|r| (r.machine.as_str(), r.strategy.as_str()))
            .collect();
        assert_eq!(keyed[2], (c.machines[1].as_str(), "drop"));
        assert_eq!(keyed[5], ("unknown", "malloc-trim"));
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("A and B differ in machine")),
            "{:?}",
            c.warnings
        );
        assert_eq!(c.sources[2].memrel_commit, "unknown");
    }
}
