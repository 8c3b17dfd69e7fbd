//! The strategy tables people read: `compare.md` (GitHub Markdown, for a PR
//! comment or `$GITHUB_STEP_SUMMARY`) and the aligned plain-text tables of the
//! console (`memrel compare` here, `memrel run` through `console`).
//!
//! Every table has one aggregation, said in its caption: the memory columns of
//! a row are the last cycle of the strategy's representative run
//! (`ResourceSummary::row`), so a row agrees with itself (after release −
//! baseline = retained, released from the same numbers); retained adds its
//! range over the runs; growth is per run (median and range over runs); times
//! and release latency are per cycle (median and range over every cycle).
//!
//! Columns are per resource, in the order the summary shows them (the lead
//! first: on CUDA the VRAM columns come first), never a hard-coded field.
//! Three layouts: `Compact` (the console default, fits 100 columns),
//! `Markdown` (compare.md: the lead resource in full, the others' peak and
//! retained, the times) and `Wide` (`--wide`: every column of every resource).
//!
//! Formats a [`Comparison`] or a summary's strategies; computes nothing.
//! Numbers for machines (bytes, seconds) go to compare.csv and compare.json.
//!
//! Split by job: `columns` (which columns, their headers), `cells` (the text
//! of a cell), this file (rows, captions, legend, notes and the documents);
//! `export::markdown` lays the cells out, `export::fields` names the memory
//! metrics once for the tables and compare.csv.

mod cells;
mod columns;
mod retention;

use crate::metrics::ResourceFacts;
use std::fmt::Write;

use super::console::View;
use super::glance::{self, Notes};
use super::markdown::{escape as md_escape, Rule, Table};
use crate::fsutil::utc_readable;
use crate::metrics::comparison::Comparison;
use crate::metrics::{Resource, StrategySummary};
use crate::textutil::MIB;
use cells::{cell, relative_cell};
pub(in crate::export) use cells::{percent, sig};
use columns::{columns, names, prefix, Column};
pub use columns::{Fit, Layout, COMPACT_MAX_CHARS};
pub use retention::RUNS_TO_CONCLUDE;
pub(super) use retention::{
    held_text, said, too_few_runs, too_few_runs_note, verdict, verdict_heading, verdict_lines, Said,
};

/// One row of a table: a strategy's summary under a label.
pub(super) struct Line<'a> {
    /// The strategy (and source), with ` ⚠` when incomplete.
    pub label: String,
    pub summary: &'a StrategySummary,
    /// The `forward vs ref` cell, for tables that have that column.
    pub relative: Option<String>,
    /// The row's `machine` key, where the table spans several machines
    /// (a `machine` column after the strategy's).
    pub machine: Option<String>,
}

/// A table's cells before layout (`export::markdown` lays them out):
/// headers and rows, one cell per column.
struct Grid {
    /// The resource each column belongs to, for the console's group line.
    groups: Vec<Option<String>>,
    /// Console headers (short, unit in the caption).
    short: Vec<String>,
    /// Markdown headers (resource, name and unit).
    long: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    /// The cells of `lines` in `layout`; `resources` lead first.
    fn new(
        layout: Layout,
        resources: &[Resource],
        lines: &[Line],
        relative: bool,
        fit: Fit,
    ) -> Grid {
        let mut columns = columns(layout, resources, relative, fit);
        if lines.iter().any(|l| l.machine.is_some()) {
            columns.insert(1, Column::Machine);
        }
        let mut groups = Vec::new();
        let mut short = Vec::new();
        let mut long = Vec::new();
        for &column in &columns {
            let names = names(column);
            short.push(names.console.to_string());
            let resource = match column {
                Column::Memory { resource, .. } => Some(resource),
                _ => None,
            };
            // Slim: a shorter heading where the resource has one (the
            // caption says the container's is the whole cgroup's).
            groups.push(resource.map(|r| match fit {
                Fit::Slim => r.look().slim_label,
                _ => r.label(),
            }));
            let words: Vec<String> = [
                resource.map(|r| prefix(r, resources)).unwrap_or_default(),
                names.markdown.to_string(),
                names.unit.to_string(),
            ]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect();
            long.push(words.join(" "));
        }
        let rows = lines
            .iter()
            .map(|line| columns.iter().map(|&c| cell(c, line)).collect())
            .collect();
        Grid {
            groups,
            short,
            long,
            rows,
        }
    }

    /// The table as aligned plain text: a line naming each resource above its
    /// columns, the headers, a rule, the rows.
    fn plain_lines(&self) -> Vec<String> {
        let mut writer = Table::new(self.short.iter().cloned())
            .numeric()
            .groups(self.groups.clone());
        for row in &self.rows {
            writer.row(row.iter().cloned());
        }
        writer.aligned_lines()
    }

    /// The table as GitHub Markdown: strategy names as code, numbers right-aligned.
    fn markdown(&self) -> String {
        let mut writer = Table::new(self.long.iter().cloned())
            .numeric()
            .rule(Rule::Colons)
            .code_column(0);
        for row in &self.rows {
            writer.row(row.iter().cloned());
        }
        writer.markdown()
    }
}

/// The console table of `lines`: in the compact layout, what it gives up to
/// fit [`COMPACT_MAX_CHARS`] (the first [`Fit`] that fits, else the last),
/// which the second value says.
pub(super) fn console_lines(
    layout: Layout,
    resources: &[Resource],
    lines: &[Line],
    relative: bool,
) -> (Vec<String>, Fit) {
    let plain = |fit| Grid::new(layout, resources, lines, relative, fit).plain_lines();
    let full = plain(Fit::Full);
    let fits = |t: &[String]| t.iter().all(|l| l.chars().count() <= COMPACT_MAX_CHARS);
    if layout != Layout::Compact || fits(&full) {
        return (full, Fit::Full);
    }
    let no_ranges = plain(Fit::NoRanges);
    if fits(&no_ranges) {
        return (no_ranges, Fit::NoRanges);
    }
    (plain(Fit::Slim), Fit::Slim)
}

/// One line per resource that some strategies did not measure, saying why
/// and which ("VRAM not measured: … (cuda:0: drop, sync)"), instead of a 0.
pub(super) fn not_measured_notes(resources: &[Resource], lines: &[Line]) -> Vec<String> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for &r in resources {
        for line in lines {
            let Some(why) = line
                .summary
                .resource(r)
                .and_then(|m| m.not_measured.as_deref())
            else {
                continue;
            };
            let text = format!("{why} ({}", r.key());
            match out.iter_mut().find(|(t, _)| *t == text) {
                Some((_, who)) => who.push(&line.summary.strategy),
                None => out.push((text, vec![&line.summary.strategy])),
            }
        }
    }
    out.into_iter()
        .map(|(text, who)| format!("{text}: {})", who.join(", ")))
        .collect()
}

/// The rows of a comparison, in its order; with their machine when the
/// sources span several.
fn comparison_lines(c: &Comparison) -> Vec<Line<'_>> {
    let machines = c.machines.len() > 1;
    c.rows
        .iter()
        .map(|row| {
            let reference = c
                .sources
                .get(row.source)
                .and_then(|src| src.reference_strategy.as_deref());
            let mut label = row.label.clone();
            if row.summary.incomplete || !row.notes.is_empty() {
                label.push_str(" ⚠");
            }
            Line {
                label,
                summary: &row.summary,
                relative: Some(relative_cell(row, reference)),
                machine: machines.then(|| row.machine.clone()),
            }
        })
        .collect()
}

/// The cells of compare.md's table, header first (for tests and other formats).
pub fn cells(c: &Comparison) -> Vec<Vec<String>> {
    let lines = comparison_lines(c);
    let table = Grid::new(Layout::Markdown, &c.resources, &lines, true, Fit::Full);
    let mut out = vec![table.long.clone()];
    out.extend(table.rows);
    out
}

/// What the console caption says about the aggregation and what the
/// layout left out (each line ≤ 100 chars; whether the runs are enough to
/// conclude is the first note, `too_few_runs`).
pub(super) fn caption(layout: Layout, fit: Fit) -> Vec<String> {
    let mut out = vec![
        "memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs"
            .to_string(),
    ];
    match layout {
        Layout::Compact => match fit {
            Fit::Full => {
                out.push("--wide shows every column, --verbose each run and cycle".to_string())
            }
            Fit::NoRanges => out.push(
                "ranges left out to fit 100 columns; --wide shows every column, --verbose each run"
                    .to_string(),
            ),
            Fit::Slim => out.push(
                "ranges and after release (= baseline + retained) left out to fit 100 columns \
                 (--wide)"
                    .to_string(),
            ),
        },
        Layout::Markdown | Layout::Wide => out.push(
            "growth: median over runs; latency, t50, t90, settle, late, times: median (min–max) \
             over every cycle"
                .to_string(),
        ),
    }
    out
}

/// What the numbers mean, in one paragraph (compare.md).
fn legend_text(c: &Comparison) -> String {
    let reference = reference_names(c);
    let device = c.resources.iter().any(|r| r.is_device());
    let why_slower = if device {
        ""
    } else {
        " (freezing glibc's mmap threshold slows inference)"
    };
    let floor = if device {
        "Floor = VRAM of a bare CUDA device as each run's worker calibrated it (median (min–max) \
         over runs): VRAM cannot go below it while a device is open, and ends below it where the \
         context is released. Every GPU strategy starts its cycles from the same baseline (after \
         the warm-up, a dropped device is reopened and warmed, and the memory pool trimmed). "
    } else {
        ""
    };
    format!(
        "Memory in MiB, at the last cycle of each strategy's median run (the completed run whose \
         {lead} retained is nearest the median over runs), so a row agrees with itself: \
         retained = after release − baseline (negative: below the baseline), released = \
         (loaded − after release) / (loaded − baseline); retained adds its (min–max) over the runs. \
         Baseline = just before the first load (after the warm-up). {floor}Growth = slope of \
         retained over cycles, median (min–max) over runs (a leak grows, a one-time cost stays \
         flat). Release t50 / t90 = from the begin of the unload until half / 90 % of what came \
         back by the end of the cycle (its release, settle, idle or busy steps) had come back. \
         Settle = from the end of the release step (the call returned; the unload's end without \
         one) until memory stays within {threshold:.0} MiB of where it ends up before the next \
         load; late = what came back after the call returned. \
         Release action = the strategy's release step; release → next ready = that step plus the \
         next cycle's first load and first forward (for respawn: the old process's exit and the \
         new one's start, then a load and forward in a cold process). \
         Release latency, t50, t90, settle, late, load, forward, release and ready: median \
         (min–max) over every cycle of every run. \
         Retaining cycles: cycles whose retained is above {threshold:.0} MiB, of those measured; \
         retaining processes: runs with at least one. Forward vs ref = median forward time \
         relative to {reference}{why_slower}. \
         ⚠ = incomplete, see the notes.",
        lead = c.lead.label(),
        threshold = c.retention_threshold_bytes as f64 / MIB
    )
}

fn reference_names(c: &Comparison) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in &c.sources {
        if let Some(r) = s.reference_strategy.as_deref() {
            if !names.contains(&r) {
                names.push(r);
            }
        }
    }
    if names.is_empty() {
        "the first strategy".to_string()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `compare.md`: GitHub-flavoured Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### memrel compare: {} on {}\n", c.scenario, c.device);
    for s in &c.sources {
        let _ = writeln!(
            out,
            "- {}`{}`: {} repetition(s) × {} cycle(s) per strategy; models {}; {} ({}, {}, {} CPUs); machine `{}`; {} UTC; memrel {} ({})",
            if c.sources.len() > 1 { format!("**{}** ", s.label) } else { String::new() },
            md_escape(&s.dir),
            s.repetitions,
            s.cycles,
            md_escape(&s.models.join(", ")),
            md_escape(&s.host.hostname),
            md_escape(&s.host.os),
            md_escape(&s.host.libc),
            s.host.cpus,
            s.machine,
            utc_readable(s.created_unix_s),
            md_escape(&s.memrel_version),
            md_escape(&s.memrel_commit),
        );
    }
    out.push('\n');
    for w in &c.warnings {
        let _ = writeln!(out, "> **warning:** {}\n", md_escape(w));
    }
    let lines = comparison_lines(c);
    if let Some(few) = too_few_runs(&lines) {
        let _ = writeln!(out, "> **warning:** {}\n", md_escape(&few));
    }
    let table = Grid::new(Layout::Markdown, &c.resources, &lines, true, Fit::Full);
    out.push_str(&table.markdown());
    for line in verdict_blocks(c, &lines, true) {
        let _ = writeln!(out, "{line}");
    }
    out.push_str(&super::why::markdown(c));
    let _ = writeln!(out, "\n{}", legend_text(c));
    let notes = notes(c, &lines);
    if !notes.is_empty() {
        let _ = writeln!(out, "\n**Notes**\n");
        for n in notes {
            let _ = writeln!(out, "- {}", md_escape(&n));
        }
    }
    out
}

/// The console's comparison, compact (fits 100 columns, one screen).
pub fn plain(c: &Comparison) -> String {
    plain_as(c, View::DEFAULT)
}

/// The console's comparison in `view`: A, B, … with their directories, the
/// table, one line per resource and the notes (each once); `--verbose`
/// adds each resource's verdict per run and every note.
pub fn plain_as(c: &Comparison, view: View) -> String {
    let layout = view.layout;
    let mut lines = comparison_lines(c);
    // A machine key is ~50 characters: the compact table says under it
    // which machine made each source (--wide and compare.md keep a column).
    let machine_names = if layout == Layout::Compact {
        machines_by_source(c, &mut lines)
    } else {
        Vec::new()
    };
    let (mut table, fit) = console_lines(layout, &c.resources, &lines, true);
    table.extend(machine_names);
    let mut out = String::new();
    let _ = writeln!(out, "memrel compare: {} on {}", c.scenario, c.device);
    if c.sources.len() > 1 {
        for s in &c.sources {
            let _ = writeln!(out, "  {} = {}", s.label, s.dir);
        }
    }
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for line in caption(layout, fit).iter().chain(&table) {
        let _ = writeln!(out, "{line}");
    }
    let answers = glance::answers(&c.resources, &lines, c.retention_threshold_bytes);
    if !answers.is_empty() {
        out.push('\n');
    }
    for line in answers {
        let _ = writeln!(out, "{line}");
    }
    if view.verbose {
        for line in verdict_blocks(c, &lines, false) {
            let _ = writeln!(out, "{line}");
        }
    }
    let mut notes = Notes::default();
    if let Some(few) = too_few_runs_note(&lines) {
        notes.add(few, "");
    }
    for row in &c.rows {
        for n in &row.notes {
            notes.add(n.clone(), row.label.clone());
        }
    }
    for n in not_measured_notes(&c.resources, &lines) {
        notes.add(n, "");
    }
    let notes = notes.lines(view.notes_shown());
    if !notes.is_empty() {
        out.push('\n');
    }
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    out
}

/// The compact table's machines: each source (`A`, `B`, …, in the rows'
/// labels) is one record made on one machine, so the column gives way to a
/// line per source under the table saying which machine made it.
fn machines_by_source(c: &Comparison, lines: &mut [Line]) -> Vec<String> {
    if lines.iter().all(|l| l.machine.is_none()) {
        return Vec::new();
    }
    for line in lines.iter_mut() {
        line.machine = None;
    }
    c.sources
        .iter()
        .map(|s| format!("  {} = machine {}", s.label, s.machine))
        .collect()
}

/// Per measured resource: a blank line, the heading, and each row's
/// "retains in k of n runs" with its spread: aligned lines for the console,
/// list items for `markdown`.
fn verdict_blocks(c: &Comparison, lines: &[Line], markdown: bool) -> Vec<String> {
    let mut out = Vec::new();
    for &r in &c.resources {
        let verdicts: Vec<String> = if markdown {
            lines
                .iter()
                .filter_map(|l| {
                    let (text, spread) = verdict(l, r)?;
                    Some(format!(
                        "- `{}`: {text}; retained {}",
                        l.label,
                        md_escape(&spread)
                    ))
                })
                .collect()
        } else {
            verdict_lines(lines, r)
        };
        if verdicts.is_empty() {
            continue;
        }
        out.push(String::new());
        out.push(verdict_heading(r, c.retention_threshold_bytes));
        if markdown {
            out.push(String::new());
        }
        out.extend(verdicts);
    }
    out
}

/// One line per incomplete row and per resource not measured.
fn notes(c: &Comparison, lines: &[Line]) -> Vec<String> {
    let mut out: Vec<String> = c
        .rows
        .iter()
        .flat_map(|row| row.notes.iter().map(move |n| format!("{}: {n}", row.label)))
        .collect();
    out.extend(not_measured_notes(&c.resources, lines));
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metrics::comparison::{compare, Input};
    use crate::metrics::summarize;
    use crate::record::{fixture, Record};

    #[test]
    fn dates_read_like_dates() {
        assert_eq!(
            crate::fsutil::utc_readable(1_795_000_000),
            "2026-11-18 11:06"
        );
    }

    pub(in crate::export) fn comparison_of(record: &Record) -> Comparison {
        let summary = summarize(record);
        compare(&[Input {
            dir: "fixture".into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        }])
    }

    /// Sources from two machines (issue 28): a `machine` column after the
    /// strategy in compare.md and the console; one machine: no such column.
    #[test]
    fn tables_of_two_machines_have_a_machine_column() {
        let mut a = fixture::record();
        a.header.host.machine = Some(crate::record::Machine {
            cpu_model: Some("AMD EPYC".into()),
            ..Default::default()
        });
        let mut b = a.clone();
        b.header.host.cpus = 16;
        let (sa, sb) = (summarize(&a), summarize(&b));
        let input = |dir: &str, header, summary| Input {
            dir: dir.into(),
            header,
            summary,
            damage: Vec::new(),
        };
        let c = compare(&[input("a", &a.header, &sa), input("b", &b.header, &sb)]);
        let grid = cells(&c);
        assert_eq!(&grid[0][..2], ["strategy", "machine"]);
        assert_eq!(grid[1][1], c.machines[0]);
        assert_eq!(grid[3][1], c.machines[1]);
        // The compact console table says which machine made each source
        // under it (a key is ~50 characters); --wide keeps the column.
        let console = plain(&c);
        let header = console
            .lines()
            .find(|l| l.trim_start().starts_with("strategy"))
            .unwrap();
        assert!(!header.contains("machine"), "{console}");
        for (source, machine) in ["A", "B"].iter().zip(&c.machines) {
            assert!(
                console.contains(&format!("  {source} = machine {machine}")),
                "{console}"
            );
        }
        let wide = plain_as(&c, View::console(true, true));
        let header = wide
            .lines()
            .find(|l| l.trim_start().starts_with("strategy"))
            .unwrap();
        assert!(header.contains("machine"), "{wide}");
        let one = compare(&[input("a", &a.header, &sa), input("a2", &a.header, &sa)]);
        assert_eq!(one.machines.len(), 1);
        assert_ne!(cells(&one)[0][1], "machine");
        assert!(markdown(&one).contains(&format!("machine `{}`", one.machines[0])));
    }

    /// The number a cell starts with and half its last digit (its rounding).
    pub(in crate::export) fn number(cell: &str) -> (f64, f64) {
        let text = cell.split_whitespace().next().unwrap();
        let decimals = text.split('.').nth(1).map(str::len).unwrap_or(0);
        let value: f64 = text
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {cell:?}"));
        (value, 0.5 * 10f64.powi(-(decimals as i32)))
    }

    /// after release − baseline = retained within rounding, for every row and
    /// every `prefix` group of the header (`header` names the columns).
    pub(in crate::export) fn assert_rows_agree(
        header: &[String],
        rows: &[Vec<String>],
        groups: &[(&str, &str)],
    ) -> usize {
        let mut checked = 0;
        for (prefix, suffix) in groups {
            let at = |name: &str| {
                let wanted = format!("{prefix}{name}{suffix}");
                header
                    .iter()
                    .position(|h| *h == wanted)
                    .unwrap_or_else(|| panic!("no column {wanted:?} in {header:?}"))
            };
            let (b, a, r) = (at("baseline"), at("after release"), at("retained"));
            for row in rows {
                let (baseline, eb) = number(&row[b]);
                let (after, ea) = number(&row[a]);
                let (retained, er) = number(&row[r]);
                assert!(
                    (after - baseline - retained).abs() <= eb + ea + er + 1e-9,
                    "{prefix}: {after} − {baseline} ≠ {retained} in {row:?}"
                );
                checked += 1;
            }
        }
        checked
    }

    fn markdown_table(md: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let split = |l: &str| -> Vec<String> {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        };
        let mut lines = md.lines().filter(|l| l.starts_with("| "));
        let header = split(lines.next().unwrap());
        (header, lines.map(split).collect())
    }

    #[test]
    fn markdown_rows_agree_with_themselves_on_cpu_and_cuda() {
        let cpu = markdown(&comparison_of(&fixture::record()));
        let (header, rows) = markdown_table(&cpu);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            assert_rows_agree(&header, &rows, &[("RSS ", " MiB")]),
            2,
            "{cpu}"
        );
        // drop's median run retains 60 MiB (both runs end at 60): no range.
        assert_eq!(
            rows[0][header.iter().position(|h| h == "RSS retained MiB").unwrap()],
            "60.0"
        );

        let cuda = markdown(&comparison_of(&fixture::cuda_record()));
        let (header, rows) = markdown_table(&cuda);
        assert_eq!(rows.len(), 3);
        assert_rows_agree(&header, &rows, &[("VRAM ", " MiB")]);
        let column = |name: &str| header.iter().position(|h| h == name).unwrap();
        let of = |strategy: &str, name: &str| {
            rows.iter().find(|r| r[0] == strategy).unwrap()[column(name)].clone()
        };
        // The VRAM story leads; host RSS follows.
        assert!(
            column("VRAM baseline MiB") < column("RSS retained MiB"),
            "{header:?}"
        );
        assert_eq!(of("drop", "VRAM retained MiB"), "416");
        assert_eq!(of("sync", "VRAM after release MiB"), "678");
        assert_eq!(of("context-release", "VRAM after release MiB"), "0.00");
        assert_eq!(of("context-release", "VRAM retained MiB"), "-678");
        assert_eq!(of("context-release", "VRAM floor MiB"), "586");
        assert_eq!(of("drop", "VRAM released"), "0.0 %");
        assert_eq!(of("sync", "VRAM released"), "100.0 %");
        assert_eq!(of("drop", "RSS retained MiB"), "1.00");
        assert!(
            cuda.contains("Floor = VRAM of a bare CUDA device"),
            "{cuda}"
        );
    }

    #[test]
    fn the_retained_range_over_runs_follows_the_median_run() {
        let mut record = fixture::record();
        // Three drop runs ending at 60, 2 and 30 MiB: the median run retains 30.
        record.runs.push(fixture::run(5, "drop", 3, &[2, 2, 30]));
        record.runs[2] = fixture::run(3, "drop", 2, &[2, 2, 2]);
        let md = markdown(&comparison_of(&record));
        let (header, rows) = markdown_table(&md);
        let retained = header.iter().position(|h| h == "RSS retained MiB").unwrap();
        assert_eq!(rows[0][retained], "30.0 (2.00–60.0)", "{md}");
        assert_rows_agree(&header, &rows, &[("RSS ", " MiB")]);
    }

    #[test]
    fn the_compact_console_table_fits_100_columns_and_wide_has_every_column() {
        for record in [fixture::record(), fixture::cuda_record()] {
            let c = comparison_of(&record);
            let compact = plain(&c);
            for line in compact.lines() {
                assert!(
                    line.chars().count() <= COMPACT_MAX_CHARS,
                    "{}: {line}",
                    line.len()
                );
            }
            let wide = plain_as(&c, View::console(true, true));
            let columns = columns(Layout::Wide, &c.resources, true, Fit::Full);
            // Strategy, runs, 15 host metrics (+ 16 device ones), 6 time and check columns.
            let device = usize::from(c.lead.is_device());
            assert_eq!(columns.len(), 2 + 15 + device * 16 + 6);
            let header = wide.lines().find(|l| l.starts_with("strategy")).unwrap();
            for name in [
                "after unload",
                "loaded",
                "peak",
                "growth/cycle",
                "latency ms",
                "t50 ms",
                "t90 ms",
                "load ms",
                "release ms",
                "vs ref",
                "checks",
            ] {
                assert!(header.contains(name), "no {name} in {header}");
            }
            assert!(
                wide.lines()
                    .any(|l| l.starts_with("host RSS") || l.contains("  host RSS")),
                "{wide}"
            );
        }
    }

    /// `record` compared with itself, as two sources `a` and `b`.
    fn as_two_sources(record: &Record) -> Comparison {
        let summary = summarize(record);
        let input = |dir: &str| Input {
            dir: dir.into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        };
        compare(&[input("a"), input("b")])
    }

    /// The compact console table of `c`, each of its lines checked to fit.
    fn fitting_compact(c: &Comparison) -> String {
        let compact = plain(c);
        assert!(
            compact
                .lines()
                .all(|l| l.chars().count() <= COMPACT_MAX_CHARS),
            "{compact}"
        );
        compact
    }

    /// VRAM, host and the container, two sources: without ranges still too
    /// wide, so the compact table also leaves out the lead's after release
    /// and names the container short, and says so.
    #[test]
    fn a_compact_table_of_three_resources_fits_by_slimming() {
        let mut record = fixture::cuda_record();
        record.header.container = Some(crate::cgroup::setup::whole_cgroup_of(std::process::id()));
        record.header.container.as_mut().unwrap().unavailable = None;
        for run in &mut record.runs {
            for s in &mut run.samples {
                let host = s.host_bytes();
                s.readings
                    .set_container(Some(crate::record::ContainerSample {
                        working_set_bytes: host + 300 * 1024 * 1024,
                        usage_bytes: host + 400 * 1024 * 1024,
                        anon_bytes: None,
                        file_bytes: None,
                    }));
            }
            for e in &mut run.events {
                let host = e.readings.get(Resource::Host).unwrap_or(0);
                e.readings
                    .set(Resource::Container, host + 300 * 1024 * 1024);
            }
        }
        let c = as_two_sources(&record);
        assert_eq!(c.resources.len(), 3, "{:?}", c.resources);
        let lines = comparison_lines(&c);
        let (_, fit) = console_lines(Layout::Compact, &c.resources, &lines, true);
        assert_eq!(fit, Fit::Slim);
        let compact = fitting_compact(&c);
        assert!(compact.contains("container WS"), "{compact}");
        assert!(
            compact.contains("after release (= baseline + retained) left out"),
            "{compact}"
        );
    }

    #[test]
    fn the_compact_table_drops_its_ranges_rather_than_overflow() {
        // Two sources (labels grow by " (A)") and context-release runs that
        // end apart (-678 and -600 MiB): with its range the table is too wide.
        let mut record = fixture::cuda_record();
        let last = record.runs.len() - 1;
        let meta = record.runs[last].meta.clone();
        record.runs[last] = fixture::with_vram(
            fixture::run(meta.run, &meta.strategy, meta.repetition, &[1, 1, 1]),
            678,
            1094,
            &[-678, -678, -600],
            586,
        );
        let c = as_two_sources(&record);
        let compact = fitting_compact(&c);
        assert!(
            compact.contains("ranges left out to fit 100 columns"),
            "{compact}"
        );
        // The table itself (the verdict lines below it keep their spread).
        let table = compact.split("\n\n").next().unwrap();
        assert!(!table.contains("(-678–-600)"), "{compact}");
        let verbose = plain_as(&c, View::console(false, true));
        assert!(
            verbose.contains("gives back in all 2 runs  retained -639 MiB (-678–-600)"),
            "{verbose}"
        );
        let wide = plain_as(&c, View::console(true, true));
        assert!(wide.contains("-678 (-678–-600)"), "{wide}");
    }

    #[test]
    fn a_resource_not_measured_says_why_instead_of_a_zero() {
        let mut record = fixture::cuda_record();
        for run in &mut record.runs {
            for e in &mut run.events {
                e.readings.set_one_device(0, None);
            }
            for s in &mut run.samples {
                s.readings.set_one_device(0, None);
            }
            run.meta.error = Some("nvml: library not found".into());
        }
        let c = comparison_of(&record);
        let text = plain_as(&c, View::console(true, true));
        assert!(
            text.contains("note: VRAM not measured: nvml: library not found (cuda:0: drop, sync, context-release)"),
            "{text}"
        );
        let md = markdown(&c);
        let (header, rows) = markdown_table(&md);
        for (i, h) in header
            .iter()
            .enumerate()
            .filter(|(_, h)| h.starts_with("VRAM"))
        {
            assert!(rows.iter().all(|r| r[i] == "–"), "{h}: {md}");
        }
    }
}
