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
/// `memrel_commit`.
pub const COMPARE_SCHEMA_VERSION: u32 = 5;

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
        let machine = crate::machine::key(&input.header.host);
        let label = if many {
            source_letter(index)
        } else {
            input.header.scenario.clone()
        };
        let reference = input
            .summary
            .strategies
            .iter()
            .find(|s| s.strategy == REFERENCE_STRATEGY)
            .or_else(|| input.summary.strategies.first());
        let reference_forward = reference
            .and_then(|r| r.forward_time_s.as_ref())
            .map(|s| s.median);
        for s in &input.summary.strategies {
            let forward_time_relative = match (s.forward_time_s.as_ref(), reference_forward) {
                (Some(f), Some(r)) if r > 0.0 => Some(f.median / r),
                _ => None,
            };
            rows.push(Row {
                label: if many {
                    format!("{} ({label})", s.strategy)
                } else {
                    s.strategy.clone()
                },
                source: index,
                machine: machine.clone(),
                strategy: s.strategy.clone(),
                forward_time_relative,
                notes: row_notes(input, s),
                summary: s.clone(),
            });
        }
        let header = input.header;
        sources.push(Source {
            label,
            dir: input.dir.clone(),
            scenario: header.scenario.clone(),
            device: header.device.clone(),
            machine,
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
            reference_strategy: reference.map(|r| r.strategy.clone()),
            damage: input.damage.clone(),
        });
    }
    let mut warnings = differences(inputs, &sources);
    for source in &sources {
        for d in &source.damage {
            warnings.push(format!("{} ({}): {d}", source.label, source.dir));
        }
    }
    let mut scenarios: Vec<&str> = Vec::new();
    for s in &sources {
        if !scenarios.contains(&s.scenario.as_str()) {
            scenarios.push(&s.scenario);
        }
    }
    let mut devices: Vec<&str> = Vec::new();
    for s in &sources {
        if !devices.contains(&s.device.as_str()) {
            devices.push(&s.device);
        }
    }
    let lead = inputs
        .iter()
        .map(|i| i.summary.lead)
        .find(|r| r.is_device())
        .unwrap_or(Resource::Host);
    let mut machines: Vec<String> = Vec::new();
    for s in &sources {
        if !machines.contains(&s.machine) {
            machines.push(s.machine.clone());
        }
    }
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
        machines,
        scenario: scenarios.join(" vs "),
        device: devices.join(" vs "),
        retention_threshold_bytes: sources
            .first()
            .map(|s| s.retention_threshold_bytes)
            .unwrap_or(0),
        sources,
        rows,
        warnings,
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
    let Some(first) = inputs.first() else {
        return out;
    };
    let a = first.header;
    for (input, source) in inputs.iter().zip(sources).skip(1) {
        let b = input.header;
        let who = format!("{} and {}", sources[0].label, source.label);
        let mut differ = |what: &str, x: String, y: String| {
            if x != y {
                out.push(format!("{who} differ in {what}: {x} vs {y}"));
            }
        };
        differ(
            "scenario (the rows compare different workloads)",
            a.scenario.clone(),
            b.scenario.clone(),
        );
        if a.scenario == b.scenario && a.scenario_toml != b.scenario_toml {
            out.push(format!(
                "{who} ran different versions of scenario {}: compare runs of one scenario file",
                a.scenario
            ));
        }
        let mut differ = |what: &str, x: String, y: String| {
            if x != y {
                out.push(format!("{who} differ in {what}: {x} vs {y}"));
            }
        };
        differ(
            "record schema version",
            a.schema_version.to_string(),
            b.schema_version.to_string(),
        );
        differ("device", a.device.clone(), b.device.clone());
        differ("cycles per run", a.cycles.to_string(), b.cycles.to_string());
        differ(
            "sampling interval (s)",
            a.interval_s.to_string(),
            b.interval_s.to_string(),
        );
        differ(
            "retention threshold (bytes)",
            a.retention_threshold_bytes.to_string(),
            b.retention_threshold_bytes.to_string(),
        );
        differ(
            "models",
            sources[0].models.join(", "),
            source.models.join(", "),
        );
        differ("host", host_line(&a.host), host_line(&b.host));
        differ(
            "machine (rows are grouped by machine)",
            sources[0].machine.clone(),
            source.machine.clone(),
        );
        differ(
            "memrel version",
            a.memrel_version.clone(),
            b.memrel_version.clone(),
        );
        differ(
            "memrel commit",
            sources[0].memrel_commit.clone(),
            source.memrel_commit.clone(),
        );
    }
    out
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

    #[test]
    fn one_source_has_no_warnings_and_drop_is_the_reference() {
        let record = fixture::record();
        let summary = summarize(&record);
        let c = compare(&[Input {
            dir: "a".into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        }]);
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
            Input {
                dir: "a".into(),
                header: &a.header,
                summary: &sa,
                damage: Vec::new(),
            },
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
        let input = |dir: &str, header, summary| Input {
            dir: dir.into(),
            header,
            summary,
            damage: Vec::new(),
        };
        let c = compare(&[input("a", &a.header, &sa), input("b", &b.header, &sb)]);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("ran different versions of scenario fixture"));
    }

    /// Two machines (issue 28): each row carries its source's machine, the
    /// comparison lists both, and the sources say they differ.
    #[test]
    fn rows_are_keyed_by_machine_and_strategy() {
        let mut a = fixture::record();
        a.header.host.machine = Some(crate::record::Machine {
            cpu_model: Some("AMD EPYC".into()),
            ..Default::default()
        });
        let mut b = a.clone();
        b.header.host.cpus = 16;
        let old = fixture::record();
        let (sa, sb, so) = (summarize(&a), summarize(&b), summarize(&old));
        let input = |dir: &str, header, summary| Input {
            dir: dir.into(),
            header,
            summary,
            damage: Vec::new(),
        };
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
